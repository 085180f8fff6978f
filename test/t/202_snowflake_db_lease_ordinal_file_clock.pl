# Copyright (c) leaf contributors

# Worker IDs from the allocation database (leaf.worker_id_source =
# 'database'), with what the ZooKeeper tests do to a node:
#  1. pod ordinals (leaf.worker_id_from): each pod's worker ID is claimed
#     as a row of its own; a second pod with the same ordinal (two
#     StatefulSets with one name, or a copy of a pod) is refused and says
#     who holds it;
#  2. a state file overwritten with garbage while the node was down (an
#     immediate stop): the node takes its row back as a new holder would
#     (the file no longer names the row's token), above the row's mark,
#     and repeats none of its IDs;
#  3. a node whose clock ran 3 s ahead (within leaf.max_clock_drift_ms)
#     and is then set right: its row's mark is ahead, and the restart
#     waits for it instead of repeating the IDs issued ahead of time.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
my $drift_ms = 5000;

sub sf_node
{
	my ($name, $pod, @extra) = @_;
	my $node = LeafTest::new_node($name, { max_worker_processes => undef, start => 0 },
		"leaf.worker_id_source = 'database'",
		"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres connect_timeout=2'",
		"leaf.snowflake_layout = '41+4+18'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '${drift_ms}ms'",
		"leaf.wait_timeout = '1s'",
		@extra);
	LeafTest::start_pod($node, $pod);
	$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
	return $node;
}

# 1. pod ordinals, claimed in the allocation database
my $p2 = sf_node('p2', 'shard-2', "leaf.worker_id_from = 'env:LEAF_POD'",
	"leaf.worker_id_offset = 3");
ok(LeafTest::sf_wait_ready($p2), 'pod shard-2 serves');
is(LeafTest::sf_status($p2, 'worker_id'), '5', '... with worker ID 5, its ordinal plus the offset');
is($alloc->safe_psql('postgres', 'SELECT hand_set, holder_address FROM leaf_worker_lease WHERE worker_id = 5'),
	't|p2.example:5432', '... claimed in the allocation database as a set worker ID');
my $twin = sf_node('twin', 'shard-2', "leaf.worker_id_from = 'env:LEAF_POD'",
	"leaf.worker_id_offset = 3");
ok(LeafTest::sf_wait_reason($twin, qr/^"?leaf\.worker_id"? is 5, but p2\.example:5432 holds worker ID 5 in the allocation database/),
	'a second pod with the same ordinal is refused, and says who holds it');
my ($state) = LeafTest::sqlstate($twin, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', '... its calls fail with LF102');
ok(LeafTest::sf_wait_ready($p2), '... and the first pod still serves');
$twin->stop;

# 2. a damaged state file
my $n = sf_node('n', undef);
ok(LeafTest::sf_wait_ready($n), 'node n serves');
my $wn = LeafTest::sf_status($n, 'worker_id');
my @before = LeafTest::sf_ids($n, 20000);
$n->stop('immediate');
my $file = $n->data_dir . '/leaf_snowflake.state';
ok(-e $file, 'n has a state file');
open(my $fh, '>', $file) or die;
print $fh join('', map { chr(int(rand(256))) } 1 .. 200);
close $fh;
my $t0 = Time::HiRes::time();
$n->start;
ok(LeafTest::sf_wait_ready($n), 'with its state file damaged, n serves again');
is(LeafTest::sf_status($n, 'worker_id'), $wn, "... with its worker ID $wn, taken back from its row");
cmp_ok(Time::HiRes::time() - $t0, '>=', (2 * 500 + 1000 + 2 * $drift_ms) / 1000 - 0.5,
	'... as a new holder: after a lease and twice the drift');
like(slurp_file($n->logfile), qr/took back worker ID $wn, whose row in the allocation database has this data directory's identity but not the lease/,
	'... and the log says why');
my %before = map { $_ => 1 } @before;
is(scalar(grep { $before{$_} } LeafTest::sf_ids($n, 20000)), 0, '... repeating none of its IDs');

# 3. a clock that ran ahead and was set right
$n->stop;
$n->append_conf('postgresql.conf', "leaf.test_node_clock_offset_ms = '3000'\n");
$n->start;
ok(LeafTest::sf_wait_ready($n), 'n with its clock 3 s ahead (within the drift) serves');
my @ahead = LeafTest::sf_ids($n, 20000);
$n->stop;
$n->append_conf('postgresql.conf', "leaf.test_node_clock_offset_ms = '0'\n");
$n->start;
ok(LeafTest::sf_wait_ready($n), 'with its clock set right, n serves again');
my %ahead = map { $_ => 1 } @ahead;
is(scalar(grep { $ahead{$_} } LeafTest::sf_ids($n, 50000)), 0,
	'... repeating none of the IDs it issued ahead of time');
my $last_ahead = (sort { $a <=> $b } @ahead)[-1];
cmp_ok(($n->safe_psql('postgres', 'SELECT leaf_snowflake()')) + 0, '>', $last_ahead,
	'... its IDs above them: it waited for the mark');

$_->stop for ($n, $p2, $alloc);
done_testing();
