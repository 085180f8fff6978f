# Snowflake mode: the status tells what a call would do now.  With the
# snowflake worker frozen, the lease runs out; calls fail with LF102, and
# the status must not say ready.  The status function is not executable by
# PUBLIC.  A clock behind the last ID (LF101) or past the 41-bit range
# (LF103) is not ready either.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $node = LeafTest::new_node('sf_status', { worker_id => 9, max_worker_processes => undef },
	"leaf.heartbeat_interval = '500ms'",
	"leaf.wait_timeout = '1s'");
$node->safe_psql('postgres', 'CREATE ROLE app LOGIN;
	GRANT EXECUTE ON FUNCTION leaf_snowflake() TO app');

my ($state, $err) = LeafTest::sqlstate($node, 'postgres',
	'SET ROLE app; SELECT node_address FROM leaf_snowflake_status()');
is($state, '42501', 'an ordinary role may not call leaf_snowflake_status()');
($state) = LeafTest::sqlstate($node, 'postgres',
	'SET ROLE app; SELECT * FROM leaf_snowflake_status');
is($state, '42501', 'nor read the view');
($state) = LeafTest::sqlstate($node, 'postgres', 'SET ROLE app; SELECT leaf_snowflake()');
is($state, undef, 'but may generate IDs, once granted EXECUTE');

ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
($state, $err) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake_new_worker_id()');
is($state, '55000', 'a worker ID set by hand cannot be replaced with leaf_snowflake_new_worker_id()');

# freeze the worker (found by its process title, under the postmaster)
my $pid = LeafZK::worker_pid($node);
ok($pid =~ /^\d+$/, "the snowflake worker runs (pid $pid)");
kill 'STOP', $pid;
ok($node->poll_query_until('postgres', 'SELECT recorded_until < clock_timestamp() FROM leaf_snowflake_status'),
	'with the worker frozen, the lease runs out');
($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102');
like($node->safe_psql('postgres', 'SELECT ready, not_ready_reason FROM leaf_snowflake_status'),
	qr/^f\|the high-water mark of issued timestamps was not recorded in time/,
	'and the status says not ready, and why');
kill 'CONT', $pid;
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'ready again once the worker runs');
($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, undef, 'and calls succeed');

# A session's clock behind the last ID by more than leaf.max_backward_ms:
# its calls fail with LF101, and its status says so (before 1.3: ready)
my $lf101 = $node->safe_psql('postgres', q[
SELECT leaf_snowflake_nextvals(1000);
SET leaf.test_clock_offset_ms = -5000;
DO $$BEGIN PERFORM leaf_snowflake(); EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'call: %', SQLSTATE; END$$;
SELECT ready, not_ready_reason FROM leaf_snowflake_status;]);
like($lf101, qr/^f\|the clock is \d+ ms behind the last ID issued, more than "leaf\.max_backward_ms" \(5 ms\): calls fail with LF101/m,
	'with the clock 5 s behind the last ID, the status says not ready, and why');
my ($ret, $out, $err2) = $node->psql('postgres',
	"SET leaf.test_clock_offset_ms = -5000; SELECT leaf_snowflake()");
like($err2, qr/clock moved backwards/, 'as calls fail');
$node->stop;

# The 41-bit range runs out while the node serves: calls fail with LF103,
# and the status says not ready (before 1.3: ready, no reason)
my $end_in = 12_000;
my $epoch = int(Time::HiRes::time() * 1000) - 2**41 + $end_in;
$node->append_conf('postgresql.conf', "leaf.snowflake_epoch = '$epoch'\n");
$node->start;
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'ready, shortly before the end of the 41-bit range');
ok($node->poll_query_until('postgres', 'SELECT NOT ready FROM leaf_snowflake_status'),
	'not ready once the range has run out');
like($node->safe_psql('postgres', 'SELECT not_ready_reason FROM leaf_snowflake_status'),
	qr/outside the 41-bit range of timestamps since "leaf\.snowflake_epoch"/, 'and says why');
($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF103', 'calls fail with LF103');

$node->stop;
done_testing();
