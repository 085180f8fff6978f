# Snowflake mode: a backend stalled between reading the generator state and
# installing its ID, across a change of the worker ID (here: the worker ID
# is taken over, the node registers again with a new one), must not issue
# an ID with the old worker ID.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $zk = LeafZK->new(nodes => 1);
my $node = $zk->start_pg_node('sf_stall', root => '/leaf/stall',
	extra => "leaf.node_address = 'stall.example:1'\nleaf.heartbeat_interval = '3s'\n");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
my ($wid, $path) = split /\|/,
  $node->safe_psql('postgres', 'SELECT worker_id, zk_node FROM leaf_snowflake_status');

# The worker ID is taken over.  The worker finds out at its next heartbeat
# (within 3 s), stops, and serves again with a new worker ID after
# registering again.  A call that read the state before that heartbeat and
# stalls for 3 s right before its compare-and-swap resumes after it.
my $now = int(Time::HiRes::time() * 1000);
$zk->cli('set', $path, qq({"addr":"thief.example:1","ts":$now,"hwm":$now,"bounded":1}));
my $h = LeafTest::start_psql_script($node, 'postgres',
	"SET leaf.test_reserve_pause_ms = 3000;\nSELECT leaf_snowflake();\n");
ok($node->poll_query_until('postgres', "SELECT worker_id IS DISTINCT FROM $wid FROM leaf_snowflake_status"),
	'the worker gave up the worker ID');

my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
my ($id) = $out =~ /^(\d+)$/m;
note "stalled call: id " . ($id // 'none') . ", error: $err";
if (defined $id)
{
	isnt($node->safe_psql('postgres', "SELECT (leaf_snowflake_decode($id)).worker_id"),
		$wid, 'the stalled call did not issue an ID with the old worker ID');
}
else
{
	like($err, qr/snowflake generator is not ready/, 'the stalled call failed instead of using the old worker ID');
}

$node->stop;
$zk->stop;
done_testing();
