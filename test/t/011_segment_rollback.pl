
# Copyright (c) leaf contributors

# Segment mode and rollbacks: IDs taken in a transaction that rolls back
# are never handed out again, leaf_alloc.max_id never moves down, and a
# caller that itself holds the row lock on its tag's leaf_alloc row (so
# the allocator cannot refill) gets a clean LF003 error after
# leaf.wait_timeout instead of hanging.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LeafTest;

my $node = LeafTest::new_node('rollback');

sub max_id
{
	my ($tag) = @_;
	return $node->safe_psql('postgres',
		"SELECT max_id FROM leaf_alloc WHERE biz_tag = '$tag'");
}

sub strictly_increasing
{
	my @v = @_;
	for my $i (1 .. $#v)
	{
		return 0 unless $v[$i] > $v[ $i - 1 ];
	}
	return 1;
}

############################################################################
# IDs of a rolled-back transaction are not handed out again
############################################################################

$node->safe_psql('postgres', "SELECT leaf_segment_create('rb', step => 10)");

my $max0 = max_id('rb');
my @rolled_back = split /\n/, $node->safe_psql(
	'postgres', q{
BEGIN;
SELECT leaf_segment_nextval('rb') FROM generate_series(1, 25);
ROLLBACK;});
is(scalar(@rolled_back), 25, 'took 25 IDs in a transaction, then rolled back');
my $max1 = max_id('rb');
cmp_ok($max1, '>', $max0,
	"leaf_alloc.max_id moved from $max0 to $max1 and stayed there after the rollback"
);

my @after = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('rb') FROM generate_series(1, 25)");
my %rb = map { $_ => 1 } @rolled_back;
is(scalar(grep { $rb{$_} } @after), 0,
	'no ID of the rolled-back transaction is handed out again');
cmp_ok(LeafTest::min_of(@after), '>', LeafTest::max_of(@rolled_back),
	'IDs after the rollback are above those rolled back');

# the first load of a tag happens on behalf of a transaction that rolls
# back: the allocation is committed anyway
$node->safe_psql('postgres',
	"SELECT leaf_segment_create('fresh', step => 10)");
my $first = $node->safe_psql('postgres',
	"BEGIN; SELECT leaf_segment_nextval('fresh'); ROLLBACK;");
is($first, 1, 'a fresh tag hands out 1 inside a transaction');
my $fresh_max = max_id('fresh');
cmp_ok($fresh_max, '>=', 11,
	"the load done for a rolled-back transaction stays committed (max_id $fresh_max)"
);
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('fresh')"),
	2, 'the next caller gets 2, not 1 again');

# savepoints
my ($in_sp, $after_sp) = split /\n/, $node->safe_psql(
	'postgres', q{
BEGIN;
SAVEPOINT s;
SELECT leaf_segment_nextval('fresh');
ROLLBACK TO SAVEPOINT s;
SELECT leaf_segment_nextval('fresh');
COMMIT;});
cmp_ok($after_sp, '>', $in_sp,
	"an ID rolled back to a savepoint ($in_sp) is not reused ($after_sp)");

############################################################################
# many rolled-back transactions across many refills of a tiny step
############################################################################

$node->safe_psql('postgres', "SELECT leaf_segment_create('tiny', step => 2)");
my $script = '';
for my $i (1 .. 150)
{
	my $end = ($i % 3 == 0) ? 'COMMIT' : 'ROLLBACK';
	$script .= "BEGIN;\n"
	  . "SELECT 'id:' || leaf_segment_nextval('tiny');\n"
	  . "SELECT 'id:' || leaf_segment_nextval('tiny');\n"
	  . "$end;\n"
	  . "SELECT 'max:' || max_id FROM leaf_alloc WHERE biz_tag = 'tiny';\n";
}
my $out = $node->safe_psql('postgres', $script);
my @ids = $out =~ /^id:(\d+)$/mg;
my @maxes = $out =~ /^max:(\d+)$/mg;
is(scalar(@ids), 300, '300 IDs taken in 150 transactions, 100 rolled back');
is(LeafTest::count_repeats(\@ids), 0, 'none of the 300 IDs repeats');
ok(strictly_increasing(@ids), 'IDs of one session strictly increase');
my $went_down = 0;
for my $i (1 .. $#maxes)
{
	$went_down++ if $maxes[$i] < $maxes[ $i - 1 ];
}
is($went_down, 0,
	'leaf_alloc.max_id never moved down over '
	  . scalar(@maxes)
	  . " samples ($maxes[0] .. $maxes[-1])");
cmp_ok(LeafTest::max_of(@ids), '<', $maxes[-1],
	'every ID lies below leaf_alloc.max_id');

# and it cannot be moved down by hand either.  The allocator may load the
# next segment in the background meanwhile, which moves max_id up only.
my $before = max_id('tiny');
my ($state, $err) = LeafTest::sqlstate($node, 'postgres',
	"UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'tiny'");
is($state, 'LF005', 'lowering max_id by hand fails with LF005');
cmp_ok(max_id('tiny'), '>=', $before, "max_id did not go down (was $before)");

############################################################################
# the caller holds the row lock of its own tag
############################################################################

# a tag never used: the very first load is blocked
$node->safe_psql('postgres',
	"SELECT leaf_segment_create('locked', step => 10)");
my $t0 = time;
($state, $err) = LeafTest::sqlstate(
	$node, 'postgres', q{
BEGIN;
UPDATE leaf_alloc SET description = 'x' WHERE biz_tag = 'locked';
SET LOCAL leaf.wait_timeout = '2s';
SELECT leaf_segment_nextval('locked');});
my $elapsed = time - $t0;
is($state, 'LF003',
	'caller holding its tag row lock, fresh tag: LF003 (timed out waiting)');
like(
	$err,
	qr/timed out waiting for a segment of biz_tag "locked"/,
	'the error names the tag');
like($err, qr/the row of biz_tag "locked" in leaf_alloc is locked by another transaction/,
	'the error says why the allocation failed');
cmp_ok($elapsed, '>=', 2, sprintf('it waited leaf.wait_timeout (%.2f s)', $elapsed));
cmp_ok($elapsed, '<', 10, 'and did not hang');
note sprintf('fresh tag, row locked by the caller: error after %.2f s', $elapsed);

is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('locked')"),
	1, 'once the lock is gone, the tag works and starts at 1');
like(
	$node->safe_psql(
		'postgres',
		"SELECT last_error FROM leaf_segments WHERE biz_tag = 'locked'"),
	qr/is locked by another transaction/,
	'leaf_segments shows the last allocation error');

# a tag in use: the buffers drain, then the wait ends in LF003
$node->safe_psql('postgres',
	"SELECT leaf_segment_create('locked2', step => 3)");
$node->safe_psql('postgres', "SELECT leaf_segment_nextval('locked2')");
ok( $node->poll_query_until(
		'postgres',
		"SELECT next_ready FROM leaf_segments WHERE biz_tag = 'locked2'"),
	'the second buffer of locked2 is loaded');
my $left = $node->safe_psql(
	'postgres', q{
SELECT (segment_end - next_id + 1) + (next_segment_end - next_segment_start + 1)
  FROM leaf_segments WHERE biz_tag = 'locked2'});
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION take_until_error(tag text, lim int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	n int := 0;
	last bigint;
BEGIN
	LOOP
		BEGIN
			last := leaf_segment_nextval(tag);
			n := n + 1;
		EXCEPTION WHEN OTHERS THEN
			RETURN n || ':' || SQLSTATE || ':' || coalesce(last, 0);
		END;
		EXIT WHEN n >= lim;
	END LOOP;
	RETURN n || ':none:' || last;
END
$$;});
$t0 = time;
my $res = $node->safe_psql(
	'postgres', q{
BEGIN;
UPDATE leaf_alloc SET description = 'x' WHERE biz_tag = 'locked2';
SET LOCAL leaf.wait_timeout = '2s';
SELECT take_until_error('locked2', 100);
ROLLBACK;});
$elapsed = time - $t0;
my ($taken, $code, $last_taken) = split /:/, $res;
is($code, 'LF003',
	'caller holding its tag row lock, buffers drained: LF003');
is($taken, $left,
	"exactly the $left IDs left in the two buffers were handed out first");
cmp_ok($elapsed, '>=', 2, sprintf('it waited leaf.wait_timeout (%.2f s)', $elapsed));
cmp_ok($elapsed, '<', 10, 'and did not hang');
my $next = $node->safe_psql('postgres', "SELECT leaf_segment_nextval('locked2')");
cmp_ok($next, '>', $last_taken,
	"after the rollback the tag works again, above the IDs already taken ($next > $last_taken)"
);

my ($waits, $max_wait) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT waits, round(max_wait_ms) FROM leaf_segments WHERE biz_tag = 'locked2'"
  );
note "locked2: $waits waits, longest $max_wait ms";

done_testing();
