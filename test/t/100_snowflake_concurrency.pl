# Snowflake mode with leaf.worker_id: many concurrent clients, restarts
# and the cached high-water mark.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $node = LeafTest::new_node('sf_conc', { worker_id => 7, max_worker_processes => undef },
	"leaf.heartbeat_interval = '500ms'",
	"max_connections = 40");
$node->safe_psql('postgres', q[
CREATE UNLOGGED TABLE ids (client int, ord bigserial, id bigint);
CREATE UNLOGGED TABLE bulk (client int, ord bigserial, id bigint);
]);

# 8 clients calling leaf_snowflake(), 2 more taking IDs in bulk
my $single = "INSERT INTO ids (client, id) SELECT :client_id, leaf_snowflake() FROM generate_series(1, 20);\n";
my $bulk = "INSERT INTO bulk (client, id) SELECT :client_id, id FROM leaf_snowflake_nextvals(5000) WITH ORDINALITY AS t(id, o) ORDER BY o;\n";
$node->pgbench(
	'--no-vacuum --client=10 --jobs=2 --transactions=400',
	0,
	[qr{processed: 4000/4000}],
	[qr{^$}],
	'pgbench with 10 clients',
	{
		'001_single@4' => $single,
		'002_bulk@1' => $bulk,
	});

my $res = $node->safe_psql('postgres', q[
WITH all_ids AS (SELECT id FROM ids UNION ALL SELECT id FROM bulk)
SELECT count(*), count(DISTINCT id),
       bool_and((leaf_snowflake_decode(id)).worker_id = 7),
       bool_and(id > 0)
  FROM all_ids]);
my ($n, $distinct, $worker_ok, $positive) = split /\|/, $res;
cmp_ok($n, '>', 400_000, 'many IDs were generated');
is($distinct, $n, 'no duplicate among ' . $n . ' IDs');
is($worker_ok, 't', 'every ID decodes to worker ID 7');
is($positive, 't', 'every ID is positive');

is( $node->safe_psql('postgres', q[
SELECT count(*) FROM (
  SELECT id <= lag(id) OVER (PARTITION BY client ORDER BY ord) AS bad FROM ids
  UNION ALL
  SELECT id <= lag(id) OVER (PARTITION BY client ORDER BY ord) FROM bulk) s
 WHERE bad]),
	'0', 'the IDs of each session increase');

is( $node->safe_psql('postgres', q[
SELECT count(DISTINCT client) FROM ids]),
	'10', 'all clients took part');

# the cache file holds the worker ID and a high-water mark ahead of use
my $state = slurp_file($node->data_dir . '/leaf_snowflake.state');
like($state, qr/^worker_id 7$/m, 'state file has the worker ID');
like($state, qr/^source setting$/m, 'state file has the source');
my ($hwm) = $state =~ /^high_water_ms (\d+)$/m;
my $max_ms = $node->safe_psql('postgres', q[
SELECT (extract(epoch FROM max((leaf_snowflake_decode(id)).ts)) * 1000)::bigint
  FROM (SELECT id FROM ids UNION ALL SELECT id FROM bulk) s]);
cmp_ok($hwm, '>=', $max_ms, 'recorded high-water mark covers every ID handed out');

# clean restart: the mark is brought down to what was used, IDs go on
my $before = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');
$node->restart;
my $after = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');
cmp_ok($after, '>', $before, 'IDs after a clean restart are larger');

# crash (immediate stop): the next start waits until the clock passes the
# recorded mark, which lies up to 2 heartbeats + 1 s ahead
$node->safe_psql('postgres', 'SELECT count(leaf_snowflake()) FROM generate_series(1, 1000)');
$node->stop('immediate');
# the mark the next start finds (a heartbeat may have raised it just
# before the stop)
$state = slurp_file($node->data_dir . '/leaf_snowflake.state');
($hwm) = $state =~ /^high_water_ms (\d+)$/m;
$node->start;
LeafZK::wait_decided($node);
my $status = $node->safe_psql('postgres',
	q[SELECT ready, not_ready_reason, (extract(epoch FROM not_before) * 1000)::bigint FROM leaf_snowflake_status]);
if ($status =~ /^t\|/)
{
	# the wait was over before the status was read (a loaded machine)
	cmp_ok(int(Time::HiRes::time() * 1000), '>', $hwm,
		'after a crash, ready only once the clock has passed the recorded mark');
}
else
{
	like($status, qr/^f\|clock is \d+ ms behind the last time recorded for this node, waiting for it to pass\|$hwm$/,
		'after a crash, not ready until the clock passes the recorded mark');
}
my ($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT (extract(epoch FROM (leaf_snowflake_decode(leaf_snowflake())).ts) * 1000)::bigint");
if ($ret == 0)
{
	# the clock passed the mark between the two statements (a loaded
	# machine): then the ID lies above it
	cmp_ok($out, '>', $hwm, 'leaf_snowflake, called once the wait was over, serves above the mark');
}
else
{
	like($err, qr/ERROR:  LF102: snowflake generator is not ready\nDETAIL:  The snowflake worker says: clock is \d+ ms behind/,
		'leaf_snowflake says why it waits');
}
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'ready once the clock has passed the mark');
my $first = $node->safe_psql('postgres', q[
SELECT (extract(epoch FROM (leaf_snowflake_decode(leaf_snowflake())).ts) * 1000)::bigint]);
cmp_ok($first, '>', $hwm, 'first ID after a crash is above the recorded high-water mark');

done_testing();
