# Snowflake mode with bad settings or an unreachable ZooKeeper: Postgres
# keeps running, segment mode works, and leaf_snowflake() says why it
# cannot serve.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LeafTest;

my $node = LeafTest::new_node('sf_bad', { max_worker_processes => undef, start => 0 },
	"leaf.wait_timeout = '8s'",
	"include_if_exists = 'leaf_case.conf'");

# Start with the given leaf settings; check the error of leaf_snowflake()
# and that segment mode still works.
sub check_case
{
	my ($name, $conf, $sqlstate, $message_re) = @_;

	open my $f, '>', $node->data_dir . '/leaf_case.conf' or die $!;
	print $f $conf;
	close $f;
	$node->start;

	my $t0 = time();
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT leaf_snowflake()");
	my $elapsed = time() - $t0;
	isnt($ret, 0, "$name: leaf_snowflake fails");
	like($err, qr/ERROR:  $sqlstate: /, "$name: SQLSTATE $sqlstate");
	like($err, $message_re, "$name: the error says why");
	note "$name: error after ${elapsed}s: $err";

	my $status = $node->safe_psql('postgres',
		'SELECT ready, not_ready_reason FROM leaf_snowflake_status');
	like($status, qr/^f\|.*\S/, "$name: status view shows not ready with a reason");

	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$name: Postgres is running");
	$node->safe_psql('postgres', q[
		SET leaf.allow_drop_with_counters = on;
		DROP EXTENSION IF EXISTS leaf CASCADE;
		CREATE EXTENSION leaf;
		SELECT leaf_segment_create('bad_case_tag', 100)]);
	is($node->safe_psql('postgres', q[SELECT leaf_segment_nextval('bad_case_tag')]),
		'1', "$name: segment mode is unaffected");
	$node->stop;
	return $elapsed;
}

$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
$node->stop;

check_case('worker ID out of range', "leaf.worker_id = 5000\n",
	'LF102', qr/"leaf\.worker_id" is 5000, but must be between 0 and 1023/);
check_case('negative worker ID', "leaf.worker_id = -7\n",
	'LF102', qr/"leaf\.worker_id" is -7/);
check_case('nothing configured', '',
	'LF102', qr/snowflake mode is not configured/);
check_case('unparsable ZooKeeper address', "leaf.zk_hosts = 'zk.example.com'\n",
	'LF102', qr/"leaf\.zk_hosts" is not a list of host:port/);
check_case('bad ZooKeeper port', "leaf.zk_hosts = '127.0.0.1:99999'\n",
	'LF102', qr/"leaf\.zk_hosts" is not a list of host:port/);

# nothing listens on this port; no cache file: the first call waits for
# the worker's verdict instead of failing with "not registered"
my $port = PostgreSQL::Test::Cluster::get_free_port();

# leaf.zk_root has no default: a node whose configuration lost the line
# must not join another fleet's numbering (the old default root)
check_case('ZooKeeper without leaf.zk_root', "leaf.zk_hosts = '127.0.0.1:$port'\n",
	'LF102', qr/"leaf\.zk_root" is not set: every node of a fleet must name the fleet's root/);
check_case('worker ID by hand, ZooKeeper without leaf.zk_root',
	"leaf.worker_id = 4\nleaf.zk_hosts = '127.0.0.1:$port'\n",
	'LF102', qr/"leaf\.worker_id" is set with "leaf\.zk_hosts", so it is claimed in ZooKeeper before it is used, but "leaf\.zk_root" is not set/);
# a quote in the address would break the node's data in ZooKeeper
check_case('quote in leaf.node_address',
	"leaf.zk_hosts = '127.0.0.1:$port'\nleaf.zk_root = '/leaf/x'\nleaf.node_address = 'a\"b:1'\n",
	'LF102', qr/node address "a"b:1" must not contain "\/", a double quote or a backslash/);
# a worker ID set by hand is not used before it is claimed
check_case('worker ID by hand, ZooKeeper unreachable, never claimed',
	"leaf.worker_id = 4\nleaf.zk_hosts = '127.0.0.1:$port'\nleaf.zk_root = '/leaf/x'\n",
	'LF102', qr/"leaf\.worker_id" 4 is not used before it is claimed in ZooKeeper/);

my $elapsed = check_case('ZooKeeper unreachable, no cache file',
	"leaf.zk_hosts = '127.0.0.1:$port'\nleaf.zk_root = '/leaf/x'\n",
	'LF102', qr/could not connect to ZooKeeper at "127\.0\.0\.1:$port", and "leaf_snowflake\.state" holds no worker ID/);
cmp_ok($elapsed, '>', 1, 'the first call waited for the worker to try ZooKeeper');

# the 41-bit timestamp has run out: LF103, never a wrapped ID
my $epoch = int(time() * 1000) - 2**41 - 60_000;
check_case('timestamp overflow', "leaf.worker_id = 1\nleaf.snowflake_epoch = '$epoch'\n",
	'LF103', qr/snowflake timestamp out of range: more than 2\^41 ms since "leaf\.snowflake_epoch"/);

# an epoch in the future: also LF103
$epoch = int(time() * 1000) + 3_600_000;
check_case('epoch in the future', "leaf.worker_id = 1\nleaf.snowflake_epoch = '$epoch'\n",
	'LF103', qr/the clock is before "leaf\.snowflake_epoch"/);

# ... and with ZooKeeper, the node does not even register (which would use
# up a worker ID for nothing)
check_case('epoch in the future, ZooKeeper',
	"leaf.zk_hosts = '127.0.0.1:$port'\nleaf.zk_root = '/leaf/x'\nleaf.snowflake_epoch = '$epoch'\n",
	'LF103', qr/the clock is before "leaf\.snowflake_epoch"/);
like(slurp_file($node->logfile),
	qr/the clock is outside the 41-bit range of timestamps since "leaf\.snowflake_epoch" \(it is before the epoch, or more than 2\^41 ms after it\): not registering/,
	'the worker says it does not register with a clock before the epoch');

# and a good setting works again on the same data directory
open my $f, '>', $node->data_dir . '/leaf_case.conf' or die $!;
print $f "leaf.worker_id = 3\n";
close $f;
$node->start;
is($node->safe_psql('postgres', 'SELECT (leaf_snowflake_decode(leaf_snowflake())).worker_id'),
	'3', 'a valid leaf.worker_id serves');
$node->stop;

done_testing();
