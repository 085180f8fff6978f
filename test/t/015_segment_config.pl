
# Copyright (c) leaf contributors

# Segment mode settings and life cycle:
#  (a) without shared_preload_libraries the extension installs with a
#      warning (55000) whose hint names the setting, and calls fail with
#      55000 and a hint naming the setting;
#  (b) leaf.max_tags bounds the tags in shared memory (53000 past it), and
#      unknown tags never take any of that space;
#  (c) changes to leaf_alloc apply without a restart: new tags at once,
#      deleted tags after the next refresh, a new step from the next refill;
#  (d) the dynamic step doubles while segments last less than
#      leaf.segment_duration (capped at 1000000) and halves back, never
#      below leaf_alloc.step, when they last longer;
#  (e) the same tag in two databases is two independent counters.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LeafTest;

my ($state, $err);

############################################################################
# (a) not preloaded
############################################################################

my $plain = LeafTest::new_node('not_preloaded',
	{ preload => 0, max_worker_processes => undef });
pass('CREATE EXTENSION leaf works without shared_preload_libraries');
# but it warns, with a code and a hint that give the line to add
$plain->safe_psql('postgres', 'CREATE DATABASE warned');
(undef, undef, $err) = $plain->psql('warned',
	"\\set VERBOSITY verbose\nCREATE EXTENSION leaf");
like($err,
	qr/WARNING:  55000: leaf is not loaded via "shared_preload_libraries"/,
	'not preloaded: CREATE EXTENSION warns with 55000');
like($err,
	qr/HINT:  Add shared_preload_libraries = 'leaf' to postgresql.conf and restart the server/,
	'the warning\'s hint gives the setting and the restart');
is($plain->safe_psql('warned',
		"SELECT extversion = default_version FROM pg_extension, pg_available_extensions WHERE extname = 'leaf' AND name = 'leaf'"),
	't', 'the extension is created all the same');
$plain->safe_psql('postgres', "SELECT leaf_segment_create('order')");
($state, $err) = LeafTest::sqlstate($plain, 'postgres',
	"SELECT leaf_segment_nextval('order')");
is($state, '55000', 'not preloaded: leaf_segment_nextval fails with 55000');
like($err, qr/HINT:.*shared_preload_libraries/,
	'the hint names shared_preload_libraries');
($state) = LeafTest::sqlstate($plain, 'postgres',
	"SELECT * FROM leaf_segment_nextvals('order', 3)");
is($state, '55000', 'not preloaded: leaf_segment_nextvals fails with 55000');
($state) = LeafTest::sqlstate($plain, 'postgres',
	'SELECT * FROM leaf_segments');
is($state, '55000', 'not preloaded: leaf_segments fails with 55000');
is($plain->safe_psql('postgres', 'SELECT max_id FROM leaf_alloc'),
	1, 'nothing was allocated');
$plain->stop;

############################################################################
# (b) leaf.max_tags
############################################################################

my $small = LeafTest::new_node('max_tags',
	'leaf.max_tags = 16', 'leaf.max_tags_per_database = 0',
	"leaf.tag_refresh_interval = '200ms'");
$small->safe_psql(
	'postgres', q{
SELECT leaf_segment_create('t' || g, step => 10) FROM generate_series(1, 17) g;
CREATE FUNCTION sqlstate_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$$;});

# sqlstate_of for a set of tags, as "state:count,..."
sub outcomes
{
	my ($node, $tag_expr, $from, $to) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT string_agg(st || ':' || n, ',' ORDER BY st) FROM (
	SELECT sqlstate_of(format('SELECT leaf_segment_nextval(%L)', $tag_expr)) AS st,
	       count(*) AS n
	  FROM generate_series($from, $to) g GROUP BY 1) s});
}

is(outcomes($small, "'t' || g", 1, 15), 'ok:15', '15 tags work');
is(outcomes($small, "'unknown' || g", 1, 100),
	'LF001:100', '100 distinct unknown tags: LF001 each');
is(outcomes($small, "'t' || g", 16, 16),
	'ok:1', 'the 16th tag still finds room');
is($small->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments'),
	16, 'shared memory holds 16 tags');

($state, $err) = LeafTest::sqlstate($small, 'postgres',
	"SELECT leaf_segment_nextval('t17')");
is($state, '53000', 'the 17th tag fails with 53000');
like($err, qr/HINT:.*leaf\.max_tags/, 'the hint names leaf.max_tags');
is(outcomes($small, "'unknown' || g", 101, 200),
	'LF001:100', 'with shared memory full, unknown tags still give LF001');
is(outcomes($small, "'t' || g", 1, 16),
	'ok:16', 'the 16 tags in use keep working');

# a deleted tag gives its room back
$small->safe_psql('postgres', "DELETE FROM leaf_alloc WHERE biz_tag = 't1'");
ok( $small->poll_query_until(
		'postgres', 'SELECT count(*) = 15 FROM leaf_segments'),
	'the slot of a deleted tag is freed');
is(outcomes($small, "'t' || g", 17, 17),
	'ok:1', 'and the 17th tag takes it');
$small->stop;

############################################################################
# (c) leaf_alloc changes apply without a restart
############################################################################

# a 1ms segment duration keeps each segment at leaf_alloc.step as long as
# segments last a few milliseconds (the step would halve, but not below it)
my $node = LeafTest::new_node('config',
	"leaf.tag_refresh_interval = '200ms'",
	"leaf.segment_duration = '1ms'");
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION take_and_watch(tag text, n int, pause float8)
RETURNS TABLE (got bigint, seg_start bigint, seg_end bigint, cur_step bigint)
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. n LOOP
		got := leaf_segment_nextval(tag);
		SELECT s.segment_start, s.segment_end, s.step
		  INTO seg_start, seg_end, cur_step
		  FROM leaf_segments s
		 WHERE s.biz_tag = tag AND s.database = current_database();
		RETURN NEXT;
		IF pause > 0 THEN
			PERFORM pg_sleep(pause);
		END IF;
	END LOOP;
END
$$;});

# Runs take_and_watch; returns the IDs, the segments seen in order (as
# [start, size]) and the steps seen.
sub take_and_watch
{
	my ($tag, $n, $pause) = @_;
	my (@ids, @segs, @steps, %seen);
	for my $line (split /\n/,
		$node->safe_psql('postgres',
			"SELECT * FROM take_and_watch('$tag', $n, $pause)"))
	{
		my ($id, $start, $end, $step) = split /\|/, $line;
		push @ids, $id;
		push @steps, $step;
		push @segs, [ $start, $end - $start + 1 ] unless $seen{$start}++;
	}
	return (\@ids, \@segs, \@steps);
}

# a tag added while the server runs works at once
$node->safe_psql('postgres',
	"INSERT INTO leaf_alloc (biz_tag, step) VALUES ('new', 10)");
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('new')"),
	1, 'a tag inserted into leaf_alloc works at once');

# A tag inserted by a transaction that has not committed yet: the caller
# sees the row, the allocator (in a transaction of its own) does not.  The
# caller should get a prompt error, not wait out leaf.wait_timeout while
# the allocator frees and the caller re-creates the tag's slot over and
# over.
my $scans_before = $node->safe_psql('postgres',
	"SELECT idx_scan + seq_scan FROM pg_stat_user_tables WHERE relname = 'leaf_alloc'"
);
my $t0 = time;
($state, $err) = LeafTest::sqlstate(
	$node, 'postgres', q{
BEGIN;
SELECT leaf_segment_create('uncommitted', step => 10);
SET LOCAL leaf.wait_timeout = '3s';
SELECT leaf_segment_nextval('uncommitted');});
my $uncommitted_s = time - $t0;
# let the statistics of the allocator and the caller reach the server
$node->safe_psql('postgres', 'SELECT pg_sleep(1)');
my $scans = $node->safe_psql('postgres',
	"SELECT idx_scan + seq_scan FROM pg_stat_user_tables WHERE relname = 'leaf_alloc'"
) - $scans_before;
note sprintf(
	'tag not committed yet: %s after %.2f s, %d scans of leaf_alloc meanwhile',
	$state // 'no error', $uncommitted_s, $scans);
ok(defined $state, 'using a tag whose row is not committed yet fails');
is($state, 'LF001',
	'it fails with its own error, not a timeout (got ' . ($state // '-') . ')');
like($err, qr/commit before taking IDs/, 'and the hint says to commit first');
cmp_ok($uncommitted_s, '<', 2, 'promptly, well before leaf.wait_timeout');
cmp_ok($scans, '<', 100, 'without a storm of allocation attempts');
is($node->safe_psql('postgres', "SELECT count(*) FROM leaf_alloc WHERE biz_tag = 'uncommitted'"),
	0, 'the row went away with the rollback');

# a deleted tag disappears
$node->safe_psql('postgres', "SELECT leaf_segment_create('del', step => 100)");
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('del')"),
	1, 'tag del hands out IDs');
$node->safe_psql('postgres', "DELETE FROM leaf_alloc WHERE biz_tag = 'del'");
$t0 = time;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM leaf_segments WHERE biz_tag = 'del'"),
	'a deleted tag disappears from leaf_segments');
note sprintf('the deleted tag was gone after %.2f s', time - $t0);
($state) = LeafTest::sqlstate($node, 'postgres',
	"SELECT leaf_segment_nextval('del')");
is($state, 'LF001', 'and is no longer served (LF001)');

# a changed step applies from the next refill
$node->safe_psql('postgres', "SELECT leaf_segment_create('st', step => 10)");
my (undef, $segs_before) = take_and_watch('st', 30, 0.003);
is(join(',', map { $_->[1] } @$segs_before),
	'10,10,10', 'segments of step 10 have 10 IDs');
my $max_at_change = $node->safe_psql('postgres',
	"UPDATE leaf_alloc SET step = 25 WHERE biz_tag = 'st' RETURNING max_id");
my ($ids, $segs_after) = take_and_watch('st', 100, 0.003);
my @old = grep { $_->[0] < $max_at_change } @$segs_after;
my @new = grep { $_->[0] >= $max_at_change } @$segs_after;
note 'segments after the change: '
  . join(' ', map { "$_->[0]+$_->[1]" } @$segs_after);
is(scalar(grep { $_->[1] != 10 } @old),
	0, 'segments loaded before the change keep 10 IDs');
cmp_ok(scalar(@new), '>=', 3, 'several segments were loaded after the change');
is(scalar(grep { $_->[1] != 25 } @new),
	0, 'every segment loaded after the change has 25 IDs');

############################################################################
# (d) dynamic step
############################################################################

# Sets leaf.segment_duration with ALTER SYSTEM and waits until the server
# has taken it.
sub set_segment_duration
{
	my ($value) = @_;
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET leaf.segment_duration = '$value'; SELECT pg_reload_conf()"
	);
	$node->wait_for_log(
		qr/parameter "leaf.segment_duration" changed to "\Q$value\E"/,
		$offset);
	# the allocator rereads its configuration when its latch is set
	select(undef, undef, undef, 0.5);
}

set_segment_duration('1h');
$node->safe_psql('postgres', "SELECT leaf_segment_create('dyn', step => 10)");
my ($fast_ids, $fast_segs) = take_and_watch('dyn', 100, 0);
my $sizes = join(',', map { $_->[1] } @$fast_segs);
note "segment sizes while consumed fast: $sizes";
like($sizes, qr/^10,10,20,40,80/,
	'segments used up within leaf.segment_duration double the step');
ok( $node->poll_query_until(
		'postgres', "SELECT next_ready FROM leaf_segments WHERE biz_tag = 'dyn'"),
	'the next segment is loaded');
my $fast_step = $node->safe_psql('postgres',
	"SELECT step FROM leaf_segments WHERE biz_tag = 'dyn'");
cmp_ok($fast_step, '>', 10,
	"leaf_segments.step grew beyond leaf_alloc.step ($fast_step)");

# the cap: a tag of step 100000 consumed by millions
$node->safe_psql('postgres',
	"SELECT leaf_segment_create('dcap', step => 100000)");
$t0 = time;
is( $node->safe_psql(
		'postgres',
		"SELECT count(DISTINCT leaf_segment_nextval('dcap')) FROM generate_series(1, 3000000)"
	),
	3000000,
	'3 million distinct IDs from a tag of step 100000');
note sprintf('3 million IDs took %.2f s', time - $t0);
my ($cap_step, $cap_size, $cap_next) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT step, segment_end - segment_start + 1, coalesce(next_segment_end - next_segment_start + 1, 0) FROM leaf_segments WHERE biz_tag = 'dcap'"
  );
note "tag dcap: step $cap_step, segments of $cap_size and $cap_next IDs";
cmp_ok($cap_step, '>', 100000, 'the step of dcap grew');
cmp_ok($cap_step, '<=', 1000000, 'but not beyond 1000000');
cmp_ok($cap_step * 2, '>', 1000000, 'it stopped doubling at the cap');
cmp_ok($cap_size, '<=', 1000000, 'no segment holds more than 1000000 IDs');
cmp_ok($cap_next, '<=', 1000000, 'nor does the next one');

# segments that last longer than twice leaf.segment_duration halve the
# step, down to leaf_alloc.step
set_segment_duration('1ms');
my ($slow_ids, $slow_segs, $slow_steps) = take_and_watch('dyn', 500, 0.002);
my @slow_sizes = map { $_->[1] } @$slow_segs;
note "segment sizes while consumed slowly: @slow_sizes";
note 'steps seen: ' . join(',', LeafTest::uniq_in_order(@$slow_steps));
is(LeafTest::min_of(@$slow_steps), 10, 'the step went back to leaf_alloc.step');
is($slow_steps->[-1], 10, 'and stays there');
is(scalar(grep { $_ < 10 } @slow_sizes), 0, 'no segment is below leaf_alloc.step');
my $grew = 0;
for my $i (2 .. $#slow_sizes)
{
	$grew++ if $slow_sizes[$i] > $slow_sizes[ $i - 1 ];
}
is($grew, 0, 'segment sizes only shrink while consumption is slow');
is(LeafTest::count_repeats([ @$fast_ids, @$slow_ids ]),
	0, 'no ID of tag dyn repeats');

############################################################################
# (e) one counter per database
############################################################################

$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE EXTENSION leaf');
$node->safe_psql('postgres', "SELECT leaf_segment_create('same', step => 10)");
$node->safe_psql('other', "SELECT leaf_segment_create('same', step => 10)");
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('same')"),
	1, 'tag same starts at 1 in database postgres');
is($node->safe_psql('other', "SELECT leaf_segment_nextval('same')"),
	1, 'and at 1 in database other');
is( $node->safe_psql(
		'postgres', "SELECT leaf_segment_nextval('same') FROM generate_series(1, 30)"),
	join("\n", 2 .. 31),
	'postgres goes on 2..31');
is($node->safe_psql('other', "SELECT leaf_segment_nextval('same')"),
	2, 'other goes on at 2, unaffected');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(database, ',' ORDER BY database) FROM leaf_segments WHERE biz_tag = 'same'"
	),
	'other,postgres',
	'leaf_segments lists the tag once per database');
($state) = LeafTest::sqlstate($node, 'other',
	"SELECT leaf_segment_nextval('st')");
is($state, 'LF001', 'a tag of database postgres is unknown in database other');

done_testing();
