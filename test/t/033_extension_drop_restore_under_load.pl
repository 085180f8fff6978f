# Dropping the extension and putting its counters back, the documented way,
# while 4 callers keep taking IDs: the counters are saved in the
# transaction that drops the extension, after a lock that holds the
# allocator's loads, so no segment loaded after the save can come out
# again.  0 repeats over every ID handed out before and after.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# a small step that stays small, so that segments are loaded all the time
my $node = LeafTest::new_node('droprestore', "leaf.segment_duration = '1ms'",
	"leaf.wait_timeout = '2s'");
$node->safe_psql('postgres', q[SELECT leaf_segment_create('load', step => 20);
	SELECT leaf_segment_create('idle', step => 20, start => 5000)]);

my $calls = 4000;
my @callers = map {
	LeafTest::start_psql_script($node, 'postgres',
		"SELECT leaf_segment_nextval('load');\nSELECT pg_sleep(0.001);\n" x $calls)
} 1 .. 4;

# let them take IDs (and the allocator load segments) for a while
ok( LeafTest::wait_until(
		sub { LeafTest::id_stream_count($callers[0]) >= 300 }, 'callers running'),
	'the callers are taking IDs');

# The procedure of docs/segment.md ("Dropping the extension"), under load.
my $dir = $node->basedir;
my ($rc, $out, $err) = $node->psql('postgres', qq[
BEGIN;
LOCK TABLE leaf_alloc, leaf_alloc_retired, leaf_alloc_source IN EXCLUSIVE MODE;
\\copy leaf_alloc TO '$dir/leaf_alloc.copy'
\\copy leaf_alloc_retired TO '$dir/leaf_alloc_retired.copy'
\\copy leaf_alloc_source TO '$dir/leaf_alloc_source.copy'
SET LOCAL leaf.allow_drop_with_counters = on;
DROP EXTENSION leaf CASCADE;
COMMIT;
], on_error_stop => 1);
is($rc, 0, 'saved and dropped in one transaction') or diag $err;

# callers fail while there is no extension; a moment later it is back
select(undef, undef, undef, 0.3);
($rc, $out, $err) = $node->psql('postgres', qq[
BEGIN;
CREATE EXTENSION leaf;
\\copy leaf_alloc_retired FROM '$dir/leaf_alloc_retired.copy'
\\copy leaf_alloc FROM '$dir/leaf_alloc.copy'
\\copy leaf_alloc_source FROM '$dir/leaf_alloc_source.copy'
COMMIT;
], on_error_stop => 1);
is($rc, 0, 'created again, with the counters put back') or diag $err;

my @ids;
my $errors = 0;
for my $h (@callers)
{
	my ($crc, $cout, $cerr) = LeafTest::finish_psql_script($h);
	push @ids, map { 0 + $_ } ($cout =~ /^(\d+)$/mg);
	$errors += () = $cerr =~ /ERROR:/g;
}
my $after = $node->safe_psql('postgres',
	q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'load']);
note sprintf('%d IDs from 4 callers, %d failed calls while the extension was away', scalar(@ids), $errors);
cmp_ok(scalar(@ids), '>', 1000, 'the callers got IDs');
cmp_ok($errors, '>', 0, 'and some calls failed while the extension was gone');
is(LeafTest::count_repeats(\@ids), 0, '0 repeats across the drop and the restore');

# IDs were handed out after the restore, and new ones go on above all
my @more = LeafTest::take_ids($node, 'load', 200);
is(LeafTest::count_repeats([ @ids, @more ]), 0, 'nor afterwards');
cmp_ok(LeafTest::min_of(@more), '>', LeafTest::max_of(@ids),
	'new IDs lie above every earlier one');
is($node->safe_psql('postgres', q[SELECT leaf_segment_nextval('idle')]), '5000',
	'an unused tag starts where it was');

$node->stop;
done_testing();
