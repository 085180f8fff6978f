
# Copyright (c) leaf contributors

# Fleet mode: the allocation database is promoted from a standby that
# may lack the last allocations.
#
# (A) An asynchronous standby, cut off (stopped) while shard 2 draws a
#     burst of segments, is promoted after an immediate shutdown of the
#     primary.  Shard 1 did not load those segments and has no memory of
#     them.  With leaf.alloc_failover = 'confirm' (the default) both
#     shards keep serving the segments they hold, then refuse to load from
#     the new timeline (LF007) and hand out no ID twice; after the repair
#     and leaf_alloc_source_confirm() on each shard they go on above
#     every earlier ID.  Before the fix, shard 1 handed out shard 2's IDs
#     again.
# (B) A synchronous standby, with leaf.alloc_failover = 'synchronous' on
#     the shard: loads go on after the promotion with no manual step.
#
# The timeline of the allocation server is read from the name of the WAL
# file it writes, which changes at once on promotion (the checkpoint's
# timeline in pg_control_checkpoint() lags until the next checkpoint).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

sub seg
{
	my ($node, $cols) = @_;
	return $node->safe_psql('postgres',
		"SELECT $cols FROM leaf_segments WHERE biz_tag = 'order'");
}

sub alloc_pair
{
	my ($name, $sync) = @_;
	# leaf is not preloaded on the allocation database
	my $p = LeafTest::new_node("${name}_alloc1",
		{ preload => 0, max_worker_processes => undef, init => [ allows_streaming => 1 ] },
		"listen_addresses = '127.0.0.1'");
	$p->safe_psql('postgres', q[SELECT leaf_segment_create('order', 10)]);
	$p->backup('base');
	my $s = LeafTest::new_node_from_backup("${name}_alloc2", $p, 'base',
		{ init => [ has_streaming => 1 ] });
	LeafTest::make_synchronous($p, $s) if $sync;
	$p->wait_for_catchup($s);
	my $user = $p->safe_psql('postgres', 'SELECT current_user');
	my $conninfo = sprintf(
		'host=127.0.0.1,127.0.0.1 port=%d,%d dbname=postgres user=%s '
		  . 'target_session_attrs=read-write connect_timeout=2',
		$p->port, $s->port, $user);
	return ($p, $s, $conninfo);
}

# ---------- (A) asynchronous standby, 'confirm' ----------

my ($a1, $a2, $ci) = alloc_pair('async', 0);
my @shards = map {
	LeafTest::new_node("shard$_",
		"leaf.alloc_conninfo = '$ci'",
		"leaf.segment_duration = '1ms'",
		"leaf.wait_timeout = '3s'")
} (1, 2);
my ($sh1, $sh2) = @shards;

my @ids1 = LeafTest::take_ids($sh1, 'order', 5);
my @ids2 = LeafTest::take_ids($sh2, 'order', 5);
is(seg($sh1, q[last_refill_server || ' ' || timeline || ' ' || state]),
	'127.0.0.1:' . $a1->port . ' 1 ok',
	'(A) leaf_segments: last refill from the allocation primary, timeline 1, ok');
is($sh1->safe_psql('postgres', 'SELECT state || timeline FROM leaf_alloc_source'),
	'current1', '(A) shard 1 records timeline 1');
$a1->wait_for_catchup($a2);

# the standby is cut off; shard 2 draws a burst of segments
$a2->stop;
push @ids2, LeafTest::burst_ids($sh2, 'order', 400);
my $given = LeafTest::max_of(@ids1, @ids2);
$a1->stop('immediate');
$a2->start;
$a2->promote;
ok($a2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'(A) the asynchronous standby is promoted');
is( $a2->safe_psql('postgres',
		'SELECT substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8)'),
	'00000002', '(A) the name of its WAL file shows timeline 2 at once');
note 'pg_control_checkpoint() says timeline '
  . $a2->safe_psql('postgres', 'SELECT timeline_id FROM pg_control_checkpoint()');
my $lost_max = $a2->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
cmp_ok($lost_max, '<', $given, "(A) the new primary's max_id $lost_max lies below ID $given handed out");

# each shard first uses up what it holds, then is refused
my ($got1, $st1, $err1) = LeafTest::take_each($sh1, 'order', 100);
my ($got2, $st2) = LeafTest::take_each($sh2, 'order', 100);
my $repeats = LeafTest::count_repeats([ @ids1, @ids2, @$got1, @$got2 ]);
diag sprintf('(A) after the promotion: shard 1 handed out %d IDs, shard 2 %d; %d repeated; failed: %s / %s',
	scalar(@$got1), scalar(@$got2), $repeats,
	join(',', LeafTest::uniq_in_order(sort @$st1)), join(',', LeafTest::uniq_in_order(sort @$st2)));
is($repeats, 0, '(A) no ID is handed out twice');
cmp_ok(scalar(@$got1), '>', 0, '(A) shard 1 kept serving the segments it held');
is((LeafTest::uniq_in_order(@$st1))[0], 'LF007', '(A) then shard 1 refuses with LF007');
is((LeafTest::uniq_in_order(@$st2))[0], 'LF007', '(A) so does shard 2');
like($err1, qr/DETAIL:  Segments were last loaded on timeline 1, and the allocation database is on timeline 2 now\./, '(A) the detail names both timelines');
is(seg($sh1, 'state'), 'refused', "(A) leaf_segments.state is 'refused'");
like(seg($sh1, 'source'), qr/\(new timeline not confirmed\)$/, '(A) leaf_segments.source says why');
is( $sh1->safe_psql('postgres',
		q[SELECT string_agg(state || timeline, ',' ORDER BY state) FROM leaf_alloc_source]),
	'current1,pending2', '(A) leaf_alloc_source shows timeline 2 as pending');

# the repair: above the highest segment any shard reports, with a margin
my $high = LeafTest::max_of(map {
	$_->safe_psql('postgres',
		q[SELECT greatest(segment_end, next_segment_end) FROM leaf_segments WHERE biz_tag = 'order'])
} @shards);
$a2->safe_psql('postgres',
	"UPDATE leaf_alloc SET max_id = greatest(max_id, $high + 1) + 100000");
$_->safe_psql('postgres', 'SELECT leaf_alloc_source_confirm()') for @shards;
my @after1 = LeafTest::take_ids($sh1, 'order', 50);
my @after2 = LeafTest::take_ids($sh2, 'order', 50);
is(scalar(@after1) + scalar(@after2), 100, '(A) once confirmed, both shards serve');
cmp_ok(LeafTest::min_of(@after1, @after2), '>', $given, '(A) above every earlier ID');
is(LeafTest::count_repeats([ @ids1, @ids2, @$got1, @$got2, @after1, @after2 ]), 0,
	'(A) no ID repeats in all');
is(seg($sh1, q[last_refill_server || ' ' || timeline || ' ' || state]),
	'127.0.0.1:' . $a2->port . ' 2 ok',
	'(A) leaf_segments: last refill from the new primary, timeline 2, ok');
$_->stop for (@shards, $a2);

# ---------- (B) synchronous standby, 'synchronous' ----------

my ($b1, $b2, $cib) = alloc_pair('sync', 1);
my $sh3 = LeafTest::new_node('shard3',
	"leaf.alloc_conninfo = '$cib'",
	"leaf.segment_duration = '1ms'",
	"leaf.wait_timeout = '5s'",
	"leaf.alloc_failover = 'synchronous'");
my @ids3 = LeafTest::burst_ids($sh3, 'order', 100);
$b1->stop('immediate');
$b2->promote;
ok($b2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'(B) the synchronous standby is promoted');
my ($got3, $st3) = LeafTest::take_each($sh3, 'order', 300);
is(scalar(@$st3), 0, '(B) no call fails');
is(scalar(@$got3), 300, '(B) the shard goes on with no manual step');
is(LeafTest::count_repeats([ @ids3, @$got3 ]), 0, '(B) no ID repeats');
is(seg($sh3, 'timeline'), '2', '(B) the last refill came from timeline 2');
is($sh3->safe_psql('postgres', 'SELECT state || timeline FROM leaf_alloc_source'),
	'current2', '(B) leaf_alloc_source records timeline 2');
$_->stop for ($sh3, $b2);

done_testing();
