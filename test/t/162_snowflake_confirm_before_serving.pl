# Snowflake mode: a node that registered in ZooKeeper waits before it
# serves with a new worker ID.  If its forever node is deleted (or
# ZooKeeper loses its data) during that wait and ZooKeeper is then
# unreachable, it must not serve with that worker ID, which another node
# may hold by then: it serves only once a heartbeat finds its node still
# there.  (Found by the fault-injection run: a node frozen in that wait
# repeated 749 IDs of a node that ZooKeeper, restored empty, gave the same
# worker ID.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../lib";

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/confirm';
my $node = $zk->pg_node('sf_confirm', root => $root, wait_timeout => '1s',
	extra => "leaf.node_address = 'cf.example:1'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
ok($node->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '%new worker ID 0 is used only from%' FROM leaf_snowflake_status]),
	'the new node waits before it serves with worker ID 0');
my $path = LeafZK::status($node, 'zk_node');

# during the wait: its node deleted, then ZooKeeper unreachable
$zk->cli('delete', $path);
$zk->stop_node(1);
my $nb = $node->safe_psql('postgres', q[SELECT extract(epoch FROM not_before) FROM leaf_snowflake_status]);
sleep 1 while time() < $nb + 3;
like(LeafZK::status($node, 'ready, not_ready_reason'),
	qr/^f\|worker ID 0 is used once ZooKeeper confirms its registration/,
	'past the wait, it does not serve with an unconfirmed registration');
my ($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102');

# ZooKeeper back: the node registers again (its session expired, its node
# is gone) and serves
$zk->start_node(1);
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'it serves once ZooKeeper is back, registered again');
my @reg = slurp_file($node->logfile) =~ /(registered cf\.example:1 as)/g;
cmp_ok(scalar(@reg), '>=', 2, 'after registering again');

$node->stop;
$zk->stop;
done_testing();
