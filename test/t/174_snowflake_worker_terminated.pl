# Snowflake mode: the snowflake worker, terminated as pg_terminate_backend
# does, is started again by the postmaster and serves again; it shows in
# pg_stat_activity, and the log says why it stopped.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('sf_term', { worker_id => 4, max_worker_processes => undef },
	"leaf.heartbeat_interval = '500ms'",
	"leaf.wait_timeout = '10s'");
my $before = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');

my $q = q[SELECT pid FROM pg_stat_activity WHERE backend_type = 'leaf snowflake worker'];
my $pid = $node->safe_psql('postgres', $q);
like($pid, qr/^\d+$/, 'the snowflake worker is in pg_stat_activity');

is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"), 't',
	'pg_terminate_backend finds it');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'leaf snowflake worker' AND pid <> $pid"),
	'a new snowflake worker is started');
ok($node->wait_for_log(qr/leaf snowflake worker stopping on a termination request/),
	'the log says why the worker stopped');
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'the generator is ready again');
my $after = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');
cmp_ok($after, '>', $before, 'IDs go on increasing');

$node->stop;
done_testing();
