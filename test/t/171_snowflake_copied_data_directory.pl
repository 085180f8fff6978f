# Snowflake mode with leaf.worker_id: a copy of a data directory (a
# restored backup, a standby) must not serve with the original's worker
# ID.  A restored copy refuses with the reason; a standby refuses with
# 25006; a copy given another worker ID serves.
# copy-matrix: sf_file standby
# copy-matrix: sf_file promote_async
# copy-matrix: sf_file clone_primary
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = LeafTest::new_node('sf_orig',
	{ init => [ allows_streaming => 1 ], max_worker_processes => undef },
	"leaf.heartbeat_interval = '500ms'",
	"leaf.wait_timeout = '3s'");
$primary->safe_psql('postgres', 'ALTER SYSTEM SET leaf.worker_id = 5');
$primary->restart;
$primary->safe_psql('postgres', 'SELECT count(leaf_snowflake()) FROM generate_series(1, 1000)');
$primary->backup('b');

# a restored backup, started while the original serves
my $copy = LeafTest::new_node_from_backup('sf_copy', $primary, 'b');
# until it serves, or refuses the worker ID (not while it waits for a clock)
$copy->poll_query_until('postgres',
	q[SELECT ready OR not_ready_reason LIKE 'worker ID % belongs to%' FROM leaf_snowflake_status]);

my @h = map { LeafTest::start_psql_script($_, 'postgres',
		"SELECT leaf_snowflake_nextvals(200000);\n") } ($primary, $copy);
my @ids;
for my $h (@h)
{
	my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
	push @ids, ($out =~ /^(\d+)$/mg);
}
my $repeats = LeafTest::count_repeats(\@ids);
note "IDs from original and copy: " . scalar(@ids) . ", repeated: $repeats";
is($repeats, 0, 'no ID is repeated between the original and its copy');

my ($ready, $reason) = split /\|/,
  $copy->safe_psql('postgres', 'SELECT ready, not_ready_reason FROM leaf_snowflake_status');
is($ready, 'f', 'the copy does not serve with the worker ID of the original');
like($reason, qr/worker ID 5 belongs to another data directory/, 'and says why');
like($reason, qr/set "leaf\.worker_id" to a worker ID no other node uses/, 'and what to do');
my ($state) = LeafTest::sqlstate($copy, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'leaf_snowflake() on the copy fails with LF102');

# the copy given a worker ID of its own serves
$copy->safe_psql('postgres', 'ALTER SYSTEM SET leaf.worker_id = 6');
$copy->restart;
ok($copy->poll_query_until('postgres', 'SELECT ready AND worker_id = 6 FROM leaf_snowflake_status'),
	'the copy serves once it has a worker ID of its own');
like(slurp_file($copy->data_dir . '/leaf_snowflake.state'), qr/^mark 6 \d+$/m,
	'its state file now records its own worker ID');
unlike(slurp_file($copy->data_dir . '/leaf_snowflake.state'), qr/^mark 5 /m,
	"and no longer the original's");
$copy->stop;

# a streaming standby does not generate at all
my $standby = LeafTest::new_node_from_backup('sf_standby', $primary, 'b',
	{ init => [ has_streaming => 1 ] });
$primary->wait_for_catchup($standby);
my ($sstate, $serr) = LeafTest::sqlstate($standby, 'postgres', 'SELECT leaf_snowflake()');
is($sstate, '25006', 'leaf_snowflake() on a standby fails with 25006');
like($serr, qr/cannot generate snowflake IDs during recovery/, 'and says why');
like($standby->safe_psql('postgres', 'SELECT ready, not_ready_reason FROM leaf_snowflake_status'),
	qr/^f\|the server is in recovery/, 'the status of the standby says so');

# promoted, it is a copy with the original's worker ID: it refuses
$primary->stop;
$standby->promote;
LeafZK::wait_decided($standby);
like($standby->safe_psql('postgres', 'SELECT ready, not_ready_reason FROM leaf_snowflake_status'),
	qr/^f\|worker ID 5 belongs to another data directory/,
	'a promoted standby refuses the worker ID of its former primary');

$standby->stop;
done_testing();
