# Snowflake mode: the worker ID from a StatefulSet pod's ordinal
# (leaf.worker_id_from, leaf.worker_id_offset).  The ordinal plus the
# offset becomes leaf.worker_id before any process starts, and is then a
# hand-set worker ID in every respect: a new data directory waits out an
# earlier pod with the same ordinal, a restart (a rolling update) keeps the
# marks, two nodes with the same ordinal and offset are refused by
# ZooKeeper's claim, and a value without an ordinal makes the node serve
# nothing rather than take a worker ID from elsewhere.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

# 1. env:LEAF_POD = shard-b-3 and offset 4: worker ID 7
my $node = LeafTest::new_node('sf_ordinal', { max_worker_processes => undef, start => 0 },
	"leaf.worker_id_from = 'env:LEAF_POD'",
	"leaf.worker_id_offset = 4",
	"leaf.heartbeat_interval = '500ms'",
	"leaf.max_clock_drift_ms = '8s'",
	"leaf.wait_timeout = '1s'");
LeafTest::start_pod($node, 'shard-b-3');
my $started = Time::HiRes::time();
$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
is($node->safe_psql('postgres', 'SHOW leaf.worker_id'), '7', 'leaf.worker_id is the ordinal plus the offset');
ok($node->log_contains(qr/worker ID 7 comes from the environment variable "shard-b-3" \(ordinal 3, "leaf\.worker_id_offset" 4\)/),
	'the log says where the worker ID came from');
my $reason = LeafZK::status($node, 'not_ready_reason');
like($reason, qr/^(new worker ID 7 is used only from \d+ ms from now|the snowflake worker is starting)/,
	'a new data directory waits out an earlier pod with the same ordinal');
my ($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', '... and calls fail with LF102 meanwhile');
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'then it serves');
# the wait: 2 heartbeats and 1 s (2 s), and leaf.max_clock_drift_ms (8 s)
cmp_ok(Time::HiRes::time() - $started, '>=', 9, '... 10 s after the start');
my $id = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');
is(($id >> 12) & 1023, 7, 'its IDs carry worker ID 7');
is(LeafZK::status($node, 'worker_id_source'), 'setting', 'the status names it a worker ID set by hand');
my $last = $node->safe_psql('postgres', 'SELECT max(id) FROM leaf_snowflake_nextvals(100000) AS id');

# 2. a rolling restart: the same volume, the marks kept, no wait
$node->stop;
LeafTest::start_pod($node, 'shard-b-3');
$started = Time::HiRes::time();
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'after a restart it serves');
cmp_ok(Time::HiRes::time() - $started, '<', 8, '... without that wait: its state file holds its marks');
cmp_ok($node->safe_psql('postgres', 'SELECT leaf_snowflake()'), '>', $last, 'above the IDs issued before');

# 3. no ordinal: the node serves nothing, and says why
$node->stop;
LeafTest::start_pod($node, 'shard-b');
is($node->safe_psql('postgres', 'SHOW leaf.worker_id'), '-1', 'a value without an ordinal sets no worker ID');
LeafZK::wait_decided($node);
like(LeafZK::status($node, 'not_ready_reason'),
	qr/^"leaf\.worker_id_from" is 'env:LEAF_POD', but the environment variable is "shard-b", which ends in no ordinal/,
	'the status says the value holds no ordinal');
($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102');
$node->stop;
LeafTest::start_pod($node, undef);
LeafZK::wait_decided($node);
like(LeafZK::status($node, 'not_ready_reason'),
	qr/^"leaf\.worker_id_from" is 'env:LEAF_POD', but the server was started without the environment variable LEAF_POD/,
	'without the variable, the status says so');
$node->stop;

# 4. leaf.worker_id set as well: the server refuses to start
$node->append_conf('postgresql.conf', "leaf.worker_id = 5\n");
my $offset = -s $node->logfile;
ok(!LeafTest::start_pod($node, 'shard-b-3', fail_ok => 1), 'leaf.worker_id and leaf.worker_id_from together: the server does not start');
like(slurp_file($node->logfile, $offset), qr/FATAL:  "leaf\.worker_id" and "leaf\.worker_id_from" are both set/,
	'... and says why');

# an invalid value is refused at start as well
$node->append_conf('postgresql.conf', "leaf.worker_id = -1\nleaf.worker_id_from = 'pod'\n");
$offset = -s $node->logfile;
ok(!LeafTest::start_pod($node, 'shard-b-3', fail_ok => 1), 'leaf.worker_id_from = pod: the server does not start');
like(slurp_file($node->logfile, $offset), qr/must be empty, 'hostname' or 'env:'/, '... and says what is valid');

# 5. 'hostname': the host name's ordinal, or the reason
my $host = `hostname`;
chomp $host;
$node->append_conf('postgresql.conf', "leaf.worker_id_from = 'hostname'\nleaf.worker_id_offset = 0\n");
LeafTest::start_pod($node, undef);
LeafZK::wait_decided($node);
if ($host =~ /(?:^|-)(\d{1,6})$/)
{
	is($node->safe_psql('postgres', 'SHOW leaf.worker_id'), $1 + 0, "the host name $host gives worker ID $1");
}
else
{
	like(LeafZK::status($node, 'not_ready_reason'),
		qr/^"leaf\.worker_id_from" is 'hostname', but the host name is "\Q$host\E", which ends in no ordinal/,
		"the host name $host holds no ordinal, and the status says so");
}
$node->stop;

# 6. ZooKeeper: the worker ID is claimed; a second node with the same
# ordinal and offset (another StatefulSet without its own offset) is refused
my $zk = LeafZK->new(nodes => 1);
my @zn;
for my $i (0, 1)
{
	my $n = $zk->pg_node("sf_ordinal_zk$i", root => '/leaf/ordinal',
		extra => "leaf.worker_id_from = 'env:LEAF_POD'\nleaf.node_address = 'pod$i.example:5432'\n");
	LeafTest::start_pod($n, 'web-2');
	$n->safe_psql('postgres', 'CREATE EXTENSION leaf');
	ok($n->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'the first pod with ordinal 2 serves')
	  if $i == 0;
	push @zn, $n;
}
LeafZK::wait_decided($zn[1]);
like(LeafZK::status($zn[1], 'not_ready_reason'),
	qr/"leaf\.worker_id" is 2, but pod0\.example:5432 .* claims worker ID 2 by hand as well/,
	'the second pod with ordinal 2 is refused by the claim in ZooKeeper');
like($zk->cli('get', '/leaf/ordinal/claimed/0000000002'), qr/pod0\.example:5432/, 'the claim names the first pod');
$_->stop for @zn;
$zk->stop;
done_testing();
