# Snowflake mode with ZooKeeper: a take-over found by the very first
# heartbeat, while a restarted node waits for its clock to pass its mark,
# must not start the generator with worker ID -1.  The node registers again
# and serves with a new worker ID.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $zk = LeafZK->new(nodes => 1);
# a long heartbeat: after a crash the node waits up to 2 x 8 s + 1 s,
# at least 9 s less its restart, which a loaded machine may make slow
my $node = $zk->start_pg_node('sf_early', root => '/leaf/early',
	extra => "leaf.node_address = 'early.example:1'\nleaf.heartbeat_interval = '8s'\n");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
my ($wid, $path) = split /\|/,
  $node->safe_psql('postgres', 'SELECT worker_id, zk_node FROM leaf_snowflake_status');
$node->safe_psql('postgres', 'SELECT count(leaf_snowflake()) FROM generate_series(1, 100)');

$node->stop('immediate');
$node->start;
ok($node->poll_query_until('postgres',
		q[SELECT not_ready_reason LIKE 'clock is % behind the last time recorded%' FROM leaf_snowflake_status]),
	'after a crash the node waits for its clock to pass its mark');

# meanwhile another node takes the worker ID over
my $now = int(Time::HiRes::time() * 1000);
my $out = $zk->cli('set', $path,
	qq({"addr":"thief.example:1","ts":$now,"hwm":$now,"bounded":1}));
note $out;

ok($node->poll_query_until('postgres',
		"SELECT ready AND worker_id <> $wid FROM leaf_snowflake_status"),
	'the node serves again, with another worker ID');
ok($node->log_contains(qr/worker ID $wid was taken over by thief\.example:1/),
	'the take-over is logged');
ok(!$node->log_contains(qr/ready with worker ID -1/),
	'the generator never started with worker ID -1');
my $new = $node->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
is($node->safe_psql('postgres', 'SELECT (leaf_snowflake_decode(leaf_snowflake())).worker_id'),
	$new, 'IDs carry the new worker ID');

$node->stop;
$zk->stop;
done_testing();
