# Snowflake mode: whether the state file may stand in for ZooKeeper
# follows what the node last declared in ZooKeeper, not the setting of the
# day.  n1 runs with worker-ID recycling on (its forever node says
# "bounded"), stops; n2 takes its worker ID over.  n1 restarts with
# recycling off while ZooKeeper is down: it must not serve the worker ID
# from its state file (before 1.3 it did: 88,311 and 46,867 repeats).
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/declared';

my $n1 = $zk->start_pg_node('sf_decl1', root => $root, wait_timeout => '2s',
	extra => "leaf.node_address = 'n1.example:1'\nleaf.worker_id_reclaim_after = '2s'\n");
ok($n1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'n1 (recycling on) is ready');
my $wid1 = LeafZK::status($n1, 'worker_id');
my @before = split /\n/, $n1->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(20000)');
like(slurp_file($n1->data_dir . '/leaf_snowflake.state'), qr/^recyclable 1$/m,
	'the state file records that n1 declared its worker ID recyclable');
$n1->stop;

# n1's node goes without heartbeat for longer than 2 s: n2 takes it over
sleep 3;
my $n2 = $zk->start_pg_node('sf_decl2', root => $root,
	extra => "leaf.node_address = 'n2.example:1'\nleaf.worker_id_reclaim_after = '2s'\n");
ok($n2->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'n2 is ready');
is(LeafZK::status($n2, 'worker_id'), $wid1, "n2 took n1's worker ID $wid1 over");
push @before, split /\n/, $n2->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(20000)');

# ZooKeeper down; n1 restarts with recycling off
$zk->stop_node(1);
$n1->append_conf('postgresql.conf', "leaf.worker_id_reclaim_after = 0\n");
$n1->start;
ok(LeafZK::wait_decided($n1), 'n1 has decided');
like(LeafZK::status($n1, 'ready, not_ready_reason'),
	qr/^f\|could not connect to ZooKeeper at "[^"]+", and worker ID $wid1 in "leaf_snowflake\.state" was last declared recyclable/,
	'n1 does not serve the worker ID from its state file, and says why');
my ($state) = LeafTest::sqlstate($n1, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls on n1 fail with LF102');

# ZooKeeper back: n1 registers anew, under a worker ID of its own
$zk->start_node(1);
ok($n1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'n1 serves once ZooKeeper is back');
isnt(LeafZK::status($n1, 'worker_id'), $wid1, 'with another worker ID than n2');
ok($n2->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'n2 serves again');
my ($n, $repeats) = LeafZK::repeats_at_once(50000, $n1, $n2);
my @all = (@before, split(/\n/, $n1->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(20000)')));
is(LeafTest::count_repeats(\@all), 0, 'no ID repeats one issued before');
is($repeats, 0, 'no ID is repeated between n1 and n2');

$_->stop for ($n1, $n2);
$zk->stop;
done_testing();
