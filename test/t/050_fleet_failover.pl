
# Copyright (c) leaf contributors

# Fleet mode through a failover of the allocation database.
#
# One allocation primary with a synchronous streaming standby, and three
# shards whose leaf.alloc_conninfo names both hosts with
# target_session_attrs=read-write.  Eight pgbench clients spread over the
# shards insert rows whose primary key defaults to
# leaf_segment_nextval('order') for about 20 seconds.  Midway the primary
# is stopped with an immediate shutdown and, a few seconds later, the
# standby is promoted.
#
# Checked afterwards: no ID occurs twice over all shards; the shards kept
# handing out IDs from their buffers while no allocation primary existed;
# every shard served again after the promotion and draws its segments
# from the new primary; the new primary's max_id lies above every ID
# handed out.  How many calls waited or failed, and for how long, is
# printed.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use LeafTest;

my $run_seconds = 20;
my $stop_after = 6;        # seconds into the run: immediate shutdown
my $outage_seconds = 4;    # then no primary at all for this long
my @clients_per_shard = (3, 3, 2);

# ---------- allocation primary and its synchronous standby ----------

# leaf is not preloaded on the allocation database: it only holds leaf_alloc
my $alloc1 = LeafTest::new_node('alloc_primary',
	{ preload => 0, max_worker_processes => undef, init => [ allows_streaming => 1 ] },
	"listen_addresses = '127.0.0.1'",
	'max_connections = 20');
$alloc1->safe_psql('postgres', q[
SELECT leaf_segment_create('order', 50, 1, 'fleet failover test');
]);
$alloc1->backup('base');

# the walreceiver's application_name is what synchronous_standby_names
# names; after promotion this server runs alone
my $alloc2 = LeafTest::new_node_from_backup('alloc_standby', $alloc1, 'base',
	{ init => [ has_streaming => 1 ] },
	"primary_conninfo = '@{[ $alloc1->connstr ]} application_name=alloc_standby'",
	"synchronous_standby_names = ''");

$alloc1->append_conf('postgresql.conf',
	"synchronous_standby_names = 'alloc_standby'\n");
$alloc1->reload;
ok( $alloc1->poll_query_until(
		'postgres',
		q[SELECT sync_state FROM pg_stat_replication WHERE application_name = 'alloc_standby'],
		'sync'),
	'the standby replicates synchronously (pg_stat_replication.sync_state = sync)');
is($alloc1->safe_psql('postgres', 'SHOW synchronous_commit'),
	'on', 'the allocation primary commits with synchronous_commit = on');

my $user = $alloc1->safe_psql('postgres', 'SELECT current_user');
my $conninfo = sprintf(
	'host=127.0.0.1,127.0.0.1 port=%d,%d dbname=postgres user=%s '
	  . 'target_session_attrs=read-write connect_timeout=2',
	$alloc1->port, $alloc2->port, $user);
note "leaf.alloc_conninfo = '$conninfo'";

# ---------- three shards ----------

# A segment_duration of 1s lets the dynamic step grow from 50 until a
# segment lasts about a second: refills stay frequent, and the buffers
# hold roughly one to three seconds of IDs when the primary goes away.
my @shards;
for my $i (1 .. 3)
{
	my $s = LeafTest::new_node("shard$i",
		"leaf.alloc_conninfo = '$conninfo'",
		"leaf.segment_duration = '1s'",
		"leaf.wait_timeout = '5s'",
		# the standby is synchronous: its promotion loses no allocation
		"leaf.alloc_failover = 'synchronous'",
		"max_connections = 30");
	$s->safe_psql('postgres', q[
CREATE TABLE orders (
	started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
	id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('order'),
	done_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE call_errors (
	started_at timestamptz NOT NULL,
	failed_at timestamptz NOT NULL,
	sqlstate text,
	message text,
	detail text);
-- one call of the application: errors are recorded, not raised, so
-- that a client keeps going through the failover
CREATE FUNCTION place_order() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
	st text; msg text; det text;
BEGIN
	INSERT INTO orders DEFAULT VALUES;
EXCEPTION WHEN others THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL;
	INSERT INTO call_errors VALUES (t0, clock_timestamp(), st, msg, det);
END
$$;
]);
	push @shards, $s;
}

# every shard reaches the allocation primary before the run starts
for my $i (0 .. $#shards)
{
	my $id = $shards[$i]->safe_psql('postgres',
		"SELECT leaf_segment_nextval('order')");
	like($id, qr/^\d+$/, "shard " . ($i + 1) . " takes an ID ($id) from the allocation primary");
}
for my $i (0 .. $#shards)
{
	is( $shards[$i]->safe_psql('postgres',
			q[SELECT source FROM leaf_segments WHERE biz_tag = 'order']),
		'remote 127.0.0.1:' . $alloc1->port . '/postgres',
		'shard ' . ($i + 1) . ' draws segments from the allocation primary');
}

# ---------- the run ----------

my @bench;
for my $i (0 .. $#shards)
{
	push @bench,
	  LeafTest::start_pgbench(
		$shards[$i], 'postgres',
		"SELECT place_order();\n",
		[
			'-c', $clients_per_shard[$i], '-j', 1,
			'-T', $run_seconds
		]);
}
my $t_start = time;

usleep(1_000_000 * $stop_after);
my $t_stop0 = time;
$alloc1->stop('immediate');
my $t_stop1 = time;
note sprintf('allocation primary stopped at +%.2fs', $t_stop1 - $t_start);

usleep(1_000_000 * $outage_seconds);
my $t_prom0 = time;
$alloc2->promote;
ok($alloc2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'the standby is promoted');
my $t_prom1 = time;
note sprintf('standby promoted from +%.2fs to +%.2fs',
	$t_prom0 - $t_start, $t_prom1 - $t_start);

my @results = map { LeafTest::finish_pgbench($_) } @bench;
my $t_end = time;

# ---------- checks ----------

my (@all_ids, $total_errors);
my %errors_by_state;
my ($outage_rows, $max_call_ms, $slow_calls) = (0, 0, 0);
my ($total_waits, $max_wait_ms) = (0, 0);
for my $i (0 .. $#shards)
{
	my $s = $shards[$i];
	my $n = $i + 1;
	my $r = $results[$i];

	is($r->{rc}, 0, "shard $n: pgbench ran to the end")
	  or diag("pgbench stdout:\n$r->{out}\npgbench stderr:\n$r->{err}");
	is($r->{failed} // 0, 0, "shard $n: pgbench saw no failed transactions");

	my @ids = grep { /^\d+$/ } split /\n/,
	  $s->safe_psql('postgres', 'SELECT id FROM orders');
	push @all_ids, @ids;

	my ($in_outage, $after) = split /\|/, $s->safe_psql(
		'postgres', qq[
SELECT count(*) FILTER (WHERE done_at > to_timestamp($t_stop1)
                          AND done_at < to_timestamp($t_prom0)),
       count(*) FILTER (WHERE done_at > to_timestamp($t_prom1))
  FROM orders]);
	$outage_rows += $in_outage;
	cmp_ok($after, '>', 0,
		"shard $n: serves again after the promotion ($after rows)");

	my ($slow, $maxms) = split /\|/, $s->safe_psql(
		'postgres', q[
SELECT count(*) FILTER (WHERE done_at - started_at > interval '100ms'),
       coalesce(round(max(extract(epoch FROM done_at - started_at)) * 1000), 0)
  FROM orders]);
	$slow_calls += $slow;
	$max_call_ms = $maxms if $maxms > $max_call_ms;

	my $errs = $s->safe_psql('postgres', q[
SELECT sqlstate || '|' || count(*) || '|' ||
       round(max(extract(epoch FROM failed_at - started_at)) * 1000) || '|' ||
       min(message) || '|' || coalesce(min(detail), '')
  FROM call_errors GROUP BY sqlstate]);
	for my $line (grep { length } split /\n/, $errs)
	{
		my ($st, $cnt, $ms, $msg, $det) = split /\|/, $line, 5;
		$errors_by_state{$st} += $cnt;
		$total_errors += $cnt;
		diag "shard $n: $cnt calls failed with $st after up to ${ms}ms: $msg ($det)";
	}

	my ($waits, $wait_ms, $refills, $step, $source, $last_error) =
	  split /\|/, $s->safe_psql(
		'postgres', q[
SELECT waits, round(max_wait_ms), refills, step, source, coalesce(last_error, '')
  FROM leaf_segments WHERE biz_tag = 'order']);
	$total_waits += $waits;
	$max_wait_ms = $wait_ms if $wait_ms > $max_wait_ms;
	is($source, 'remote 127.0.0.1:' . $alloc2->port . '/postgres',
		"shard $n: now draws segments from the promoted standby");
	is( $s->safe_psql('postgres',
			q[SELECT state || ' ' || timeline FROM leaf_alloc_source]),
		'current 2',
		"shard $n: accepted the new timeline (leaf.alloc_failover = 'synchronous')");
	diag sprintf(
		'shard %d: %d rows (%d during the outage), %.0f tps; '
		  . '%d refills, last step %d; %d calls waited for a segment, '
		  . 'longest %dms; %d calls over 100ms; last error: %s',
		$n, scalar(@ids), $in_outage, $r->{tps} // 0, $refills, $step,
		$waits, $wait_ms, $slow, $last_error);
}

my $repeats = LeafTest::count_repeats(\@all_ids);
is($repeats, 0,
	'no ID repeats over the ' . scalar(@all_ids) . ' IDs of all shards');

cmp_ok($outage_rows, '>', 0,
	"the shards handed out $outage_rows IDs from their buffers while there was no allocation primary"
);

my $max_id = $alloc2->safe_psql('postgres',
	q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
my $largest = LeafTest::max_of(@all_ids);
cmp_ok($max_id, '>', $largest,
	"the new primary's max_id ($max_id) lies above every ID handed out ($largest)");

# one more round after the run, large enough to need new segments: they
# come from the new primary and lie above its max_id as read above, and
# none of their IDs was handed out before
my @fresh = grep { /^\d+$/ } split /\n/, $shards[0]->safe_psql('postgres',
	q[SELECT id FROM leaf_segment_nextvals('order', 100000) AS t(id)]);
is(scalar(@fresh), 100000, 'shard 1 takes 100000 more IDs after the failover');
cmp_ok(LeafTest::max_of(@fresh), '>=', $max_id,
	'the last of them come from segments the new primary handed out');
is(LeafTest::count_repeats([ @all_ids, @fresh ]), 0,
	'none of them repeats an ID handed out before');

diag sprintf(
	'failover: primary down at +%.1fs (immediate shutdown took %.2fs), '
	  . 'no primary for %.2fs, promotion took %.2fs; run lasted %.1fs',
	$t_stop1 - $t_start, $t_stop1 - $t_stop0, $t_prom0 - $t_stop1,
	$t_prom1 - $t_prom0, $t_end - $t_start);
diag sprintf(
	'failover: %d IDs in all, %d handed out with no primary; '
	  . '%d calls waited for a segment (longest %dms); %d calls took over 100ms '
	  . '(longest %dms); %d calls failed%s',
	scalar(@all_ids), $outage_rows, $total_waits, $max_wait_ms, $slow_calls,
	$max_call_ms, $total_errors // 0,
	%errors_by_state
	? ' (' . join(', ', map { "$_: $errors_by_state{$_}" } sort keys %errors_by_state) . ')'
	: '');

$_->stop for @shards;
$alloc2->stop;

done_testing();
