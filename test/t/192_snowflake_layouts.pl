# Snowflake mode: layouts other than 41+10+12 (leaf.snowflake_layout), with
# a worker ID set by hand.
#  - js53 (41+6+6): every ID below 2^53, worker IDs up to 63, at most 64
#    IDs per ms, which a bulk request must wait for;
#  - a layout with a unit of time and more than 10 worker bits
#    (39+14+10/10ms): worker ID 9000, at most 1,024 IDs per 10 ms;
#  - the state file records the layout: a restart under another layout
#    serves nothing (LF102, naming both), and the old one serves again
#    above every ID it issued;
#  - clock safety in units of 10 ms: LF101, a short wait, a restart
#    behind the recorded mark;
#  - invalid layouts stop the server from starting.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = LeafTest::new_node('sf_layouts', "leaf.worker_id = 63",
	"leaf.snowflake_layout = 'js53'", "leaf.wait_timeout = '5s'");

is( $node->safe_psql('postgres',
		'SELECT layout, timestamp_bits, worker_bits, sequence_bits, time_unit_ms, max_worker_id, ids_per_unit, max_id FROM leaf_snowflake_layout()'),
	'41+6+6/1ms|41|6|6|1|63|64|9007199254740991',
	'js53 is 41+6+6 in ms; its largest ID is 2^53 - 1');
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'the js53 node serves');

# 100,000 IDs in one call: 64 per ms at most, so at least 1,563 ms
my $n = 100_000;
my $t0 = time();
my $res = $node->safe_psql('postgres', qq[
	SELECT count(*), count(DISTINCT id), max(id) < 2^53,
	       bool_and((d).worker_id = 63), max((d).sequence),
	       max(per_ms), bool_and(id > prev)
	  FROM (SELECT id, leaf_snowflake_decode(id) AS d,
	               count(*) OVER (PARTITION BY id >> 12) AS per_ms,
	               lag(id) OVER (ORDER BY ord) AS prev
	          FROM leaf_snowflake_nextvals($n) WITH ORDINALITY AS s(id, ord)) t]);
my $secs = time() - $t0;
my ($count, $distinct, $below, $wid_ok, $maxseq, $per_ms, $increasing) = split /\|/, $res;
is($count, $n, "$n IDs");
is($distinct, $n, 'all distinct');
is($below, 't', 'every ID is below 2^53');
is($wid_ok, 't', 'every ID carries worker ID 63');
cmp_ok($maxseq, '<=', 63, 'sequences fit in 6 bits');
cmp_ok($per_ms, '<=', 64, 'at most 64 IDs in one ms');
cmp_ok($secs, '>=', $n / 64 / 1000 - 0.05,
	sprintf('the call took %.2f s, at least the %.2f s that 64 IDs per ms allow', $secs, $n / 64000));
note sprintf('js53: %d IDs in %.3f s: %.0f IDs/s against a limit of 64,000', $n, $secs, $n / $secs);
my $last_js53 = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');

# worker ID 64 does not fit in 6 bits
$node->stop;
$node->append_conf('postgresql.conf', "leaf.worker_id = 64\n");
$node->start;
my ($state, $err) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'worker ID 64 under js53: LF102');
like($err, qr/"leaf\.worker_id" is 64, but must be between 0 and 63/, '... saying the range');

# another layout over the state file of js53: refused, naming both
$node->stop;
$node->append_conf('postgresql.conf', "leaf.worker_id = 63\nleaf.snowflake_layout = 'default'\n");
$node->start;
($state, $err) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'the default layout over a js53 state file: LF102');
like($err, qr/"leaf_snowflake\.state" records IDs of layout 41\+6\+6\/1ms, but "leaf\.snowflake_layout" is 41\+10\+12\/1ms/,
	'... naming both layouts');
is(LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()'), 'LF102',
	'... and it stays so');
like(slurp_file($node->data_dir . '/leaf_snowflake.state'), qr/^layout 41\+6\+6\/1ms$/m,
	'the state file still records js53');

# back to js53: it serves again, above every ID it issued
$node->stop;
$node->append_conf('postgresql.conf', "leaf.snowflake_layout = 'js53'\n");
$node->start;
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'js53 again: the node serves');
cmp_ok($node->safe_psql('postgres', 'SELECT leaf_snowflake()'), '>', $last_js53,
	'above the IDs issued before');
$node->stop;

# a unit of 10 ms and 14 worker bits, on a new data directory
my $wide = LeafTest::new_node('sf_layout_wide', "leaf.worker_id = 9000",
	"leaf.snowflake_layout = '39+14+10/10ms'", "leaf.wait_timeout = '5s'");
is( $wide->safe_psql('postgres',
		'SELECT layout, max_worker_id, ids_per_unit FROM leaf_snowflake_layout()'),
	'39+14+10/10ms|16383|1024', '39+14+10/10ms: 16,384 worker IDs, 1,024 IDs per 10 ms');
ok($wide->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'worker ID 9000 serves');
$n = 60_000;
$t0 = time();
$res = $wide->safe_psql('postgres', qq[
	SELECT count(DISTINCT id), bool_and((d).worker_id = 9000),
	       max((d).sequence), max(per_unit),
	       bool_and(((extract(epoch FROM (d).ts) * 1000)::bigint - epoch) % 10 = 0),
	       max(abs(extract(epoch FROM (d).ts - clock_timestamp()))) < 5
	  FROM (SELECT id, leaf_snowflake_decode(id) AS d, e.epoch,
	               count(*) OVER (PARTITION BY id >> 24) AS per_unit
	          FROM leaf_snowflake_nextvals($n) AS id,
	               (SELECT epoch_ms AS epoch FROM leaf_snowflake_status) e) t]);
$secs = time() - $t0;
my ($dist, $w9000, $seq, $per_unit, $whole, $near) = split /\|/, $res;
is($dist, $n, "$n distinct IDs");
is($w9000, 't', 'every ID carries worker ID 9000');
is($whole, 't', 'their timestamps are whole units of 10 ms after the epoch');
is($near, 't', '... and near now');
cmp_ok($seq, '<=', 1023, 'sequences fit in 10 bits');
cmp_ok($per_unit, '<=', 1024, 'at most 1,024 IDs in one unit of 10 ms');
cmp_ok($secs, '>=', $n / 102_400 - 0.05,
	sprintf('the call took %.2f s, at least the %.2f s that 1,024 IDs per 10 ms allow', $secs, $n / 102_400));
note sprintf('39+14+10/10ms: %d IDs in %.3f s: %.0f IDs/s against a limit of 102,400', $n, $secs, $n / $secs);
is($wide->safe_psql('postgres', 'SELECT (leaf_snowflake_decode(leaf_snowflake())).worker_id'),
	'9000', 'a single call carries worker ID 9000 too');

# clock safety in units of 10 ms: a session clock 1 s behind the last ID
# fails with LF101 (1 s, not less: on a loaded machine the call comes a
# good part of a second after the last ID), one 3 ms behind waits, and a
# restart with the whole instance 3 s behind waits for the recorded mark
is(LeafTest::sqlstate($wide, 'postgres',
		"SET leaf.test_clock_offset_ms = -1000; SELECT leaf_snowflake()"),
	'LF101', 'a clock 1 s behind the last ID: LF101');
is(LeafTest::sqlstate($wide, 'postgres',
		"SET leaf.test_clock_offset_ms = -3; SELECT leaf_snowflake()"),
	undef, 'a clock 3 ms behind: the call waits and succeeds');
my $before = $wide->safe_psql('postgres', 'SELECT leaf_snowflake()');
$wide->stop('immediate');
$wide->append_conf('postgresql.conf', "leaf.test_node_clock_offset_ms = -3000\n");
$wide->start;
ok($wide->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE 'clock is % ms behind the last time recorded for this node%' FROM leaf_snowflake_status]),
	'restarted 3 s behind, the node waits for its mark');
ok($wide->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'... then serves');
cmp_ok($wide->safe_psql('postgres', 'SELECT leaf_snowflake()'), '>', $before,
	'above every ID issued before');
$wide->stop;

# invalid layouts: the server does not start
my $i = 0;
foreach my $bad (
	[ '41+10+13', qr/at most 63 bits together/ ],
	[ '41+17+5',  qr/worker ID must have from 1 to 16 bits/ ],
	[ '41+10+12/2h', qr/unit of time after "\/" must be from 1ms to 1s/ ],
	[ 'js64',     qr/must be "default", "js53", or timestamp\+worker\+sequence bits/ ])
{
	my $b = LeafTest::new_node('sf_layout_bad' . ++$i,
		{ worker_id => 1, max_worker_processes => undef, start => 0 },
		"leaf.snowflake_layout = '$bad->[0]'");
	ok(!$b->start(fail_ok => 1), "layout '$bad->[0]' stops the server from starting");
	like(slurp_file($b->logfile), $bad->[1], '... saying why');
}

done_testing();
