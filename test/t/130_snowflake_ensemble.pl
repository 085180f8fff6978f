# Snowflake mode on a 3-node ZooKeeper ensemble: losing one ZooKeeper node
# changes nothing.
use strict;
use warnings;

use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 3);

my $node = $zk->start_pg_node('sf_ens');
my $wid = $node->safe_psql('postgres', 'SELECT (leaf_snowflake_decode(leaf_snowflake())).worker_id');
is($node->safe_psql('postgres', 'SELECT worker_id_source, ready, zk_state FROM leaf_snowflake_status'),
	'zookeeper|t|connected', 'registered through the ensemble');

# stop the leader
my ($leader) = grep { $zk->mode($_) eq 'leader' } 1 .. 3;
ok($leader, "ZooKeeper node $leader is the leader");
$zk->stop_node($leader);
my $stopped_at = $node->safe_psql('postgres', 'SELECT now()');

# IDs keep coming while the ensemble elects a new leader
my $bad = 0;
my $last = 0;
for my $i (1 .. 30)
{
	my ($ret, $out) = $node->psql('postgres', 'SELECT leaf_snowflake()');
	$bad++ if $ret != 0 || $out <= $last;
	$last = $out if $ret == 0;
	select(undef, undef, undef, 0.1);
}
is($bad, 0, 'no failed or non-increasing call while a ZooKeeper node is down');
is($node->safe_psql('postgres', 'SELECT ready FROM leaf_snowflake_status'), 't', 'still ready');
ok( $node->poll_query_until('postgres',
		qq[SELECT zk_state = 'connected' AND last_heartbeat > '$stopped_at'::timestamptz + interval '1 s' FROM leaf_snowflake_status]),
	'heartbeats reach the remaining two nodes');

# a restart with one ZooKeeper node down registers normally
$node->restart;
LeafZK::wait_decided($node);
is($node->safe_psql('postgres', 'SELECT worker_id, worker_id_source, ready FROM leaf_snowflake_status'),
	"$wid|zookeeper|t", 'restart with 2 of 3 ZooKeeper nodes keeps the worker ID from ZooKeeper');

$zk->start_node($leader);
$node->stop;
$zk->stop;
done_testing();
