# Snowflake mode with ZooKeeper: ZooKeeper is restored empty while a node
# serves.  The server refuses the node's old session, which has seen later
# transactions than the restored server has ("client must try another
# server"), and the client keeps "connecting" without ever reporting an
# expiry.  The node must open a new session, find its forever node gone and
# register again; a node that registers meanwhile must not repeat its IDs.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);

my $n1 = $zk->start_pg_node('sf_wiped1', root => '/leaf/wiped');
ok($n1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'n1 is ready');
my $wid1 = $n1->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');

# many transactions, so that n1's session has seen more than the restored
# server will have for a while
$zk->outrun_sessions($n1);

$zk->stop_node(1);
$zk->wipe_node(1);
$zk->start_node(1);

my $n2 = $zk->start_pg_node('sf_wiped2', root => '/leaf/wiped');
ok($n2->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'n2 is ready');

# both at once: count repeated IDs
my ($nids, $repeats) = LeafZK::repeats_at_once(200000, $n1, $n2);
is($repeats, 0, 'no ID is repeated');

ok($n1->poll_query_until('postgres',
		q[SELECT ready AND zk_state = 'connected' AND worker_id_source = 'zookeeper' FROM leaf_snowflake_status]),
	'n1 is connected again and serves');
ok($n1->log_contains(qr/gave worker ID \d+ \(a new registration\)|forever node \S+ is gone from ZooKeeper/),
	'n1 registered again');
my $w1 = $n1->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
my $w2 = $n2->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
isnt($w1, $w2, "n1 and n2 serve with different worker IDs ($w1, $w2)");

$_->stop for ($n1, $n2);
$zk->stop;
done_testing();
