# Snowflake mode: the status tells what a call would do now.  With the
# snowflake worker frozen, the lease runs out; calls fail with LF102, and
# the status must not say ready.  The status function is not executable by
# PUBLIC.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../lib";

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('sf_status');
$node->init;
$node->append_conf('postgresql.conf', qq[
shared_preload_libraries = 'leaf'
leaf.worker_id = 9
leaf.heartbeat_interval = '500ms'
leaf.wait_timeout = '1s'
]);
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION leaf; CREATE ROLE app LOGIN;
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

$node->stop;
done_testing();
