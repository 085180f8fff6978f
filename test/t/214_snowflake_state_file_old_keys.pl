# Snowflake mode: a state file written before its keys were renamed
# ("zk_node" and "session", now "lease_ref" and "lease_token") is read as
# it was meant, so that an upgrade keeps every node's worker ID and floor:
#  1. worker IDs from the allocation database: a node restarted (after
#     kill -9) over a file of the old keys takes its row back as the run
#     the file names (no wait of a new holder), with its worker ID, above
#     every ID it issued; the file is then written with the new keys;
#  2. worker IDs from ZooKeeper, with ZooKeeper down: the file of the old
#     keys stands in, with its worker ID and its forever node, above every
#     ID issued; once ZooKeeper is back, the node registers with the same
#     worker ID.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

# Rewrite a node's state file with the keys of before the rename.
sub to_old_keys
{
	my ($node) = @_;
	my $path = $node->data_dir . '/leaf_snowflake.state';
	my $text = slurp_file($path);
	ok($text =~ s/^lease_ref /zk_node /m && $text =~ s/^lease_token /session /m,
		$node->name . ': the state file is rewritten with the old keys');
	open my $f, '>', $path or die "could not write $path: $!";
	print $f $text;
	close $f;
	return LeafZK::state_file($node);
}

# 1. the allocation database
my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
$alloc->safe_psql('postgres', q[
CREATE ROLE leaf_node LOGIN;
GRANT USAGE ON SCHEMA public TO leaf_node;
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline, leaf_worker_lease_fleet TO leaf_node;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_take, leaf_worker_lease_renew, leaf_worker_lease_release, leaf_worker_lease_give_up, leaf_worker_lease_copy_check, leaf_worker_lease_fleet_check, leaf_worker_lease_pick TO leaf_node;
]);
my $lease_ms = 2000;
my $drift_ms = 2000;
my $a = LeafTest::new_node('a', { max_worker_processes => undef, start => 0 },
	"leaf.worker_id_source = 'database'",
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=leaf_node connect_timeout=2'",
	"leaf.snowflake_layout = '41+2+12'",
	"leaf.node_address = 'a.example:5432'",
	"leaf.heartbeat_interval = '500ms'",
	"leaf.max_clock_drift_ms = '${drift_ms}ms'",
	"leaf.wait_timeout = '1s'");
$a->start;
$a->safe_psql('postgres', 'CREATE EXTENSION leaf');
ok(LeafTest::sf_wait_ready($a), 'a serves with a worker ID from the allocation database');
my $wa = LeafTest::sf_status($a, 'worker_id');
my @ids = LeafTest::sf_ids($a, 5000);

$a->stop('immediate');
my $old = to_old_keys($a);
like($old->{zk_node}, qr/^database fleet \d+$/, 'a: the old file names the table of worker IDs');
like($old->{session}, qr/^[0-9a-f]+$/, 'a: and the token of the lease');
my $log_at = -s $a->logfile;
$a->start;
my $t0 = Time::HiRes::time();
ok(LeafTest::sf_wait_ready($a), 'a serves again over the file of the old keys');
is(LeafTest::sf_status($a, 'worker_id'), $wa, "... with its worker ID $wa");
cmp_ok(Time::HiRes::time() - $t0, '<', ($lease_ms + $drift_ms) / 1000,
	'... without the wait of a new holder');
my $log = substr(slurp_file($a->logfile), $log_at);
unlike($log, qr/took back worker ID|new to this node/,
	'... as the run its state file names');
my @after = LeafTest::sf_ids($a, 5000);
cmp_ok(LeafTest::min_of(@after), '>', LeafTest::max_of(@ids),
	'... above every ID it issued before');
my $new = LeafZK::state_file($a);
my $token = $alloc->safe_psql('postgres',
	"SELECT to_hex(holder_token) FROM leaf_worker_lease WHERE worker_id = $wa");
is($new->{lease_token}, $token, 'the file now names the lease it holds as lease_token');
is($new->{lease_ref}, $old->{zk_node}, '... and its table as lease_ref');
ok(!exists $new->{session} && !exists $new->{zk_node}, '... without the old keys');
$a->stop;

# 2. ZooKeeper down: the file of the old keys stands in
my $zk = LeafZK->new(nodes => 1);
my $z = $zk->start_pg_node('z', root => '/leaf/oldkeys');
ok(LeafTest::sf_wait_ready($z), 'z serves with a worker ID from ZooKeeper');
my ($wz, $path) = split /\|/, LeafZK::status($z, 'worker_id, zk_node');
ok(LeafZK::wait_state_file_names($z, $wz), "z: the state file names worker ID $wz");
my @zids = LeafTest::sf_ids($z, 5000);
$z->stop;
$zk->stop;
$old = to_old_keys($z);
is($old->{zk_node}, $path, 'z: the old file names its forever node');
$z->start;
ok($z->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'z serves with ZooKeeper down');
is(LeafZK::status($z, 'worker_id, worker_id_source, zk_node'),
	"$wz|cache file|$path", '... from the file of the old keys, with its worker ID and forever node');
@after = LeafTest::sf_ids($z, 5000);
cmp_ok(LeafTest::min_of(@after), '>', LeafTest::max_of(@zids),
	'... above every ID it issued before');

$zk->start_node(1);
ok( $z->poll_query_until('postgres',
		q[SELECT worker_id_source = 'zookeeper' AND zk_state = 'connected' FROM leaf_snowflake_status]),
	'z registers once ZooKeeper is back');
is(LeafZK::status($z, 'worker_id, zk_node'), "$wz|$path", '... with the same worker ID and forever node');

$z->stop;
$zk->stop;
$alloc->stop;
done_testing();
