# Snowflake mode: when the ZooKeeper session expires (here: the snowflake
# worker is frozen for longer than the 6 s session timeout, so ZooKeeper
# drops the session and its ephemeral node), the worker opens a new
# session, keeps its worker ID and registers again; IDs go on increasing.
use strict;
use warnings;

use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);

my $node = $zk->start_pg_node('sf_expiry', root => '/leaf/expiry');
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'registered with ZooKeeper');
my $wid = $node->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
my $before = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');

# freeze the worker for longer than the session timeout (plus a tick)
my $pid = LeafZK::worker_pid($node);
ok($pid =~ /^\d+$/, "the snowflake worker runs (pid $pid)");
kill 'STOP', $pid;
sleep 10;
kill 'CONT', $pid;
my $resumed = $node->safe_psql('postgres', 'SELECT now()');

ok( $node->wait_for_log(
		qr/ZooKeeper session of the leaf snowflake worker expired, opening a new one/),
	'the expired session is noticed and a new one opened');
ok( $node->poll_query_until(
		'postgres',
		qq[SELECT ready AND zk_state = 'connected' AND last_heartbeat > '$resumed'::timestamptz + interval '1 s'
		     FROM leaf_snowflake_status]),
	'connected again, heartbeats resume');
is($node->safe_psql('postgres', 'SELECT worker_id, worker_id_source FROM leaf_snowflake_status'),
	"$wid|zookeeper", 'same worker ID, from ZooKeeper');
cmp_ok($node->safe_psql('postgres', 'SELECT leaf_snowflake()'), '>', $before,
	'IDs go on increasing');

$node->stop;
$zk->stop;
done_testing();
