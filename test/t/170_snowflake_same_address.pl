# Snowflake mode with ZooKeeper: two running nodes that present the same
# node address must not share a worker ID.  The second one must neither
# take the first one's forever node nor delete its ephemeral node; it
# refuses and says why.  A loopback listen address is never used as the
# node's identity.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $same = "leaf.node_address = 'db.example:5432'\n";

my $n1 = $zk->start_pg_node('sf_same1', root => '/leaf/same', extra => $same);
ok($n1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'first node is ready');
my $wid1 = $n1->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');

my $n2 = $zk->start_pg_node('sf_same2', root => '/leaf/same', extra => $same);
# until it serves, or refuses for the address (not while it waits for a clock)
$n2->poll_query_until('postgres',
	q[SELECT ready OR not_ready_reason LIKE 'node address%' FROM leaf_snowflake_status]);

# both at once: count repeated IDs
my ($nids, $repeats) = LeafZK::repeats_at_once(200000, $n1, $n2);
is($repeats, 0, 'no ID is repeated between the two nodes');

my ($ready2, $reason2) = split /\|/,
  $n2->safe_psql('postgres', 'SELECT ready, not_ready_reason FROM leaf_snowflake_status');
is($ready2, 'f', 'the second node with the same address does not serve');
like($reason2, qr/node address db\.example:5432 is (in use by another running node|registered in ZooKeeper by another data directory)/,
	'and says that another node has its address');
my ($state, $err) = LeafTest::sqlstate($n2, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'leaf_snowflake() on the second node fails with LF102');

# the first node keeps its registration, ephemeral node included, a while
# after the second one was refused
sleep 2;
is($n1->safe_psql('postgres',
		'SELECT ready, worker_id, zk_state FROM leaf_snowflake_status'),
	"t|$wid1|connected", 'the first node still serves with its worker ID');
like($zk->cli('stat', '/leaf/same/temporary/db.example:5432'),
	qr/ephemeralOwner = 0x[0-9a-f]*[1-9a-f]/, "the first node's ephemeral node is still there");

# a loopback listen address is not an identity
my $n3 = $zk->start_pg_node('sf_same3', root => '/leaf/same',
	extra => "listen_addresses = '127.0.0.1'\n");
LeafZK::wait_decided($n3);
my $addr3 = $n3->safe_psql('postgres', 'SELECT coalesce(node_address, \'\') FROM leaf_snowflake_status');
unlike($addr3, qr/^(127\.|localhost)/, "a loopback listen address is not used as the node address ($addr3)");

$_->stop for ($n1, $n2, $n3);
$zk->stop;
done_testing();
