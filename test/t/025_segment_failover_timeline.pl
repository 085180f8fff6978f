
# Copyright (c) leaf contributors

# Segment mode (local leaf_alloc) across a promotion that may have lost
# the last allocations.
#
# (1) An asynchronous standby misses a burst of refills: it is cut off
#     (stopped) before the burst, the primary is stopped with an immediate
#     shutdown, and the standby is started and promoted.  Its leaf_alloc
#     lies below IDs the old primary handed out.  With leaf.alloc_failover
#     = 'confirm' (the default) loads on the new timeline are refused with
#     LF007, and no ID is handed out again; after the documented repair
#     (max_id raised) and leaf_alloc_source_confirm(), IDs continue above
#     every ID of the old primary.  Before the fix the promoted standby
#     handed the old primary's IDs out again.
# (2) A restart of the primary after a crash stays on its timeline: no
#     refusal.
# (3) A synchronous standby with leaf.alloc_failover = 'synchronous': the
#     new timeline is recorded and loads go on, with no manual step and no
#     repeated ID.
# (4) The primary is lost, and a backup is restored with archive recovery
#     (recovery.signal): it ends on a new timeline, without the loads made
#     after the last archived WAL, and is refused as well.
#
# (Pausing replay on the standby with pg_wal_replay_pause() is not enough
# to lose WAL: what the standby received is replayed before it is
# promoted.  Stopping it is.)
# copy-matrix: segment promote_async
# copy-matrix: segment promote_sync
# copy-matrix: segment pitr

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

sub pair
{
	my ($name, $sync, @conf) = @_;
	my $p = LeafTest::new_node("${name}_primary", { init => [ allows_streaming => 1 ] },
		"leaf.segment_duration = '1ms'",
		"leaf.wait_timeout = '3s'",
		@conf);
	$p->safe_psql('postgres', q[
SELECT leaf_segment_create('order', step => 10);
SELECT leaf_segment_create('other', step => 10);]);
	$p->backup('base');
	my $s = LeafTest::new_node_from_backup("${name}_standby", $p, 'base',
		{ init => [ has_streaming => 1 ] });
	LeafTest::make_synchronous($p, $s) if $sync;
	$p->wait_for_catchup($s);
	return ($p, $s);
}

# ---------- (1) asynchronous standby, leaf.alloc_failover = 'confirm' ----------

my ($p1, $s1) = pair('async', 0);
is($p1->safe_psql('postgres', 'SHOW leaf.alloc_failover'), 'confirm',
	"leaf.alloc_failover is 'confirm' by default");
my @ids = LeafTest::take_ids($p1, 'order', 25);
is(scalar(@ids), 25, '(1) the primary hands out IDs');
is( $p1->safe_psql('postgres',
		q[SELECT state || ' ' || timeline FROM leaf_alloc_source]),
	'current 1', '(1) leaf_alloc_source records timeline 1');
is( $p1->safe_psql('postgres',
		q[SELECT last_refill_server || ' ' || timeline FROM leaf_segments WHERE biz_tag = 'order']),
	'local 1', '(1) leaf_segments shows the last refill as local, on timeline 1');

# (2) a crash and restart of the primary keeps its timeline: no refusal
$p1->stop('immediate');
$p1->start;
push @ids, LeafTest::take_ids($p1, 'order', 25);
is(scalar(@ids), 50, '(2) after an immediate shutdown and restart, the primary serves at once');
is($p1->safe_psql('postgres', q[SELECT count(*) FROM leaf_alloc_source WHERE state = 'pending']),
	'0', '(2) and nothing waits for confirmation');
$p1->wait_for_catchup($s1);

# the standby is cut off; the primary goes on with a burst of refills
$s1->stop;
push @ids, LeafTest::burst_ids($p1, 'order', 500);
my $given = LeafTest::max_of(@ids);
my $refills = $p1->safe_psql('postgres',
	q[SELECT refills FROM leaf_segments WHERE biz_tag = 'order']);
note "the old primary handed out IDs up to $given ($refills refills since its restart)";
$p1->stop('immediate');

$s1->start;
$s1->promote;
ok($s1->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'(1) the asynchronous standby is promoted');
is($s1->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments'), '0',
	'(1) it holds no segment: a standby never loads any');
my $lost_max = $s1->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
cmp_ok($lost_max, '<', $given,
	"(1) the promoted standby lacks allocations: its max_id $lost_max is below $given");

my ($got, $states, $err) = LeafTest::take_each($s1, 'order', 200);
my $repeats = LeafTest::count_repeats([ @ids, @$got ]);
diag sprintf('(1) after the promotion: %d IDs handed out, %d of them repeated, %d calls failed (%s)',
	scalar(@$got), $repeats, scalar(@$states), join(',', LeafTest::uniq_in_order(sort @$states)));
is($repeats, 0, '(1) no ID of the old primary is handed out again');
is(scalar(@$got), 0, '(1) no ID at all is handed out before the confirmation');
is((LeafTest::uniq_in_order(@$states))[0], 'LF007', '(1) calls fail with LF007');
like($err, qr/ERROR:  LF007: allocation database was promoted or restored; segments are not loaded until confirmed\nDETAIL:  Segments were last loaded on timeline 1, and the allocation database is on timeline 2 now\. biz_tag "order" has no segment left/,
	'(1) the message says why, and its detail names both timelines and the tag');
like($err, qr/HINT:.*SELECT leaf_alloc_source_confirm\(\)/s, '(1) the hint names the command');
is( $s1->safe_psql('postgres',
		q[SELECT state FROM leaf_segments WHERE biz_tag = 'order']),
	'refused', "(1) leaf_segments.state is 'refused'");
is( $s1->safe_psql('postgres',
		q[SELECT string_agg(state || ' ' || kind || ' ' || timeline, ', ' ORDER BY state) FROM leaf_alloc_source]),
	'current local 1, pending local 2',
	'(1) leaf_alloc_source keeps timeline 1 as current and shows timeline 2 as pending');
like($s1->safe_psql('postgres', q[SELECT source FROM leaf_segments WHERE biz_tag = 'order']),
	qr/^local \(new timeline not confirmed\)$/, '(1) leaf_segments.source says so');
my ($st) = LeafTest::sqlstate($s1, 'postgres', "SELECT leaf_segment_nextval('other')");
is($st, 'LF007', '(1) a tag not used since the promotion is refused too');

# the repair: max_id above anything the old primary may have handed out
$s1->safe_psql('postgres', 'UPDATE leaf_alloc SET max_id = max_id + 1000000');
like($s1->safe_psql('postgres', 'SELECT leaf_alloc_source_confirm()'),
	qr/^the local leaf_alloc \(database \d+ of system \d+\)$/, '(1) leaf_alloc_source_confirm() accepts the new timeline');
my @after = LeafTest::take_ids($s1, 'order', 100);
is(scalar(@after), 100, '(1) once confirmed, the new primary serves');
cmp_ok(LeafTest::min_of(@after), '>', $given, '(1) above every ID of the old primary');
is(LeafTest::count_repeats([ @ids, @after ]), 0, '(1) no ID repeats');
is( $s1->safe_psql('postgres',
		q[SELECT string_agg(state || ' ' || timeline, ', ') FROM leaf_alloc_source]),
	'current 2', '(1) leaf_alloc_source records timeline 2');
is( $s1->safe_psql('postgres',
		q[SELECT state || ' ' || timeline FROM leaf_segments WHERE biz_tag = 'order']),
	'ok 2', "(1) leaf_segments: state 'ok', last refill on timeline 2");
$s1->restart;
is(scalar(LeafTest::take_ids($s1, 'order', 10)), 10, '(1) and a restart on timeline 2 is no change');
$s1->stop;

# ---------- (4) a backup restored with archive recovery ----------

my $q = LeafTest::new_node('archived',
	{ init => [ allows_streaming => 1, has_archiving => 1 ] },
	"leaf.segment_duration = '1ms'",
	"leaf.wait_timeout = '3s'");
$q->safe_psql('postgres', "SELECT leaf_segment_create('order', step => 10)");
my @qids = LeafTest::take_ids($q, 'order', 25);
$q->backup('qbase');
push @qids, LeafTest::burst_ids($q, 'order', 200);
my $qmax = $q->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
# lost: a clean shutdown would archive the last WAL, an immediate one does not
$q->stop('immediate');
my $r = LeafTest::new_node_from_backup('restored', $q, 'qbase',
	{ init => [ has_restoring => 1, standby => 0 ] });
ok($r->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'(4) the backup is restored with archive recovery');
cmp_ok($r->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']),
	'<', $qmax, '(4) it lacks the last loads');
($got, $states, $err) = LeafTest::take_each($r, 'order', 50);
is(LeafTest::count_repeats([ @qids, @$got ]), 0, '(4) no ID is handed out again');
is((LeafTest::uniq_in_order(@$states))[0], 'LF007', '(4) calls fail with LF007');
like($err, qr/DETAIL:  Segments were last loaded on timeline 1, and the allocation database is on timeline [2-9] now\./, '(4) the detail names the new timeline');
$r->stop;

# ---------- (3) synchronous standby, leaf.alloc_failover = 'synchronous' ----------

my ($p2, $s2) = pair('sync', 1, "leaf.alloc_failover = 'synchronous'");
my @sids = LeafTest::take_ids($p2, 'order', 25);
push @sids, LeafTest::take_ids($p2, 'order', 500);
$p2->stop('immediate');
$s2->promote;
ok($s2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'(3) the synchronous standby is promoted');
cmp_ok($s2->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']),
	'>', LeafTest::max_of(@sids), '(3) it has every allocation');
($got, $states) = LeafTest::take_each($s2, 'order', 200);
is(scalar(@$states), 0, '(3) no call fails');
is(scalar(@$got), 200, '(3) the new primary serves with no manual step');
is(LeafTest::count_repeats([ @sids, @$got ]), 0, '(3) no ID repeats');
is( $s2->safe_psql('postgres',
		q[SELECT string_agg(state || ' ' || timeline, ', ') FROM leaf_alloc_source]),
	'current 2', '(3) leaf_alloc_source records timeline 2');
ok( $s2->log_contains(
		qr/leaf allocator accepted timeline 2 of the local leaf_alloc .* where segments were last loaded on timeline 1/),
	'(3) the log says that the new timeline was accepted');
$s2->stop;

done_testing();
