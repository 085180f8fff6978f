# A copy of a database that hands out IDs has the same counters: the
# copy and the original would hand out the same IDs.  A copy made with
# CREATE DATABASE ... TEMPLATE, or with pg_dump and psql while the
# original keeps serving, is refused (LF006) until a superuser confirms it,
# with its counters raised first; the original goes on.  0 IDs are shared
# between them.
# copy-matrix: segment dump_same_cluster
# copy-matrix: segment template
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('dbcopy');
$node->safe_psql('postgres', 'CREATE DATABASE orig');
$node->safe_psql('orig', q[CREATE EXTENSION leaf;
	SELECT leaf_segment_create('order', step => 100);
	CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('order'), note text);
	INSERT INTO orders (note) SELECT 'before' FROM generate_series(1, 500);]);

# Takes $n IDs of 'order' in $db, one call a statement, going on after
# errors; returns (\@ids, \@sqlstates).
sub take
{
	my ($db, $n) = @_;
	my $h = LeafTest::start_psql_script($node, $db,
		"\\set VERBOSITY verbose\n" . ("SELECT leaf_segment_nextval('order');\n" x $n));
	my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
	return ([ map { 0 + $_ } ($out =~ /^(\d+)$/mg) ],
		[ $err =~ /ERROR:\s+([0-9A-Z]{5}):/g ]);
}

# (1) CREATE DATABASE ... TEMPLATE: the allocator of orig is stopped for it
my ($state, $err) = LeafTest::sqlstate($node, 'postgres',
	'CREATE DATABASE tcopy TEMPLATE orig');
is($state, undef, 'CREATE DATABASE ... TEMPLATE of a database with an allocator') or diag $err;

# (2) pg_dump | psql while the original keeps serving
my $stream = LeafTest::start_id_stream($node, 'orig', 'order', 3000);
$node->safe_psql('postgres', 'CREATE DATABASE dcopy');
my $dump = $node->basedir . '/orig.sql';
$node->command_ok([ 'pg_dump', '-f', $dump, '-d', $node->connstr('orig') ],
	'pg_dump while the original serves');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $dump, '-d', $node->connstr('dcopy') ],
	'restored into another database with psql');
my @orig = LeafTest::finish_id_stream($stream);
is(scalar(@orig), 3000, 'the original served 3000 IDs meanwhile');

for my $copy ('tcopy', 'dcopy')
{
	my ($ids, $states) = take($copy, 20);
	is(scalar(@$ids), 0, "$copy hands out no ID");
	is_deeply([ sort { $a cmp $b } keys %{ { map { $_ => 1 } @$states } } ], ['LF006'],
		"$copy is refused with LF006");
	is($node->safe_psql($copy,
			q[SELECT string_agg(state || ' ' || kind, ', ' ORDER BY state) FROM leaf_alloc_source]),
		'current local, pending local', "$copy records the copy as pending");
}
($state, $err) = LeafTest::sqlstate($node, 'tcopy', q[SELECT leaf_segment_nextval('order')]);
like($err, qr/DETAIL:.*this is database \d+ of system \d+: a copy \(CREATE DATABASE \.\.\. TEMPLATE, a restored dump/,
	'the detail names the copy (for a superuser)');
$node->safe_psql('postgres', 'CREATE ROLE app LOGIN');
$node->safe_psql('tcopy', 'GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO app');
my ($rc, $out, $aerr) = $node->psql('tcopy', q[SELECT leaf_segment_nextval('order')],
	extra_params => [ '-U', 'app' ]);
like($aerr, qr/refusing to draw segments of biz_tag "order" in a copy of the database that drew them/,
	'an application role gets the refusal, which names the copy');
like($aerr, qr/DETAIL:  This database is a copy \(a restored dump/,
	'and its detail says what a copy is');
unlike($aerr, qr/this is database/, 'without the internals');

# the original goes on, unaffected
my ($more, $ostates) = take('orig', 500);
is(scalar(@$more), 500, 'the original keeps serving');
push @orig, @$more;

# The operator gives the copy counters of its own, above everything the
# original will hand out for a while, then confirms.
for my $copy ('tcopy', 'dcopy')
{
	$node->safe_psql($copy, q[UPDATE leaf_alloc SET max_id = 1000000 WHERE biz_tag = 'order']);
	like($node->safe_psql($copy, 'SELECT leaf_alloc_source_confirm()'),
		qr/^the local leaf_alloc \(database \d+ of system \d+\)$/, "$copy confirmed");
	my ($ids, $states) = take($copy, 500);
	is(scalar(@$ids), 500, "$copy serves once confirmed");
	is(LeafTest::count_repeats([ @orig, @$ids ]), 0, "$copy shares no ID with the original");
	cmp_ok(LeafTest::min_of(@$ids), '>=', 1000000, "$copy serves from its raised counter");
}

# the confirmation stays: a restart does not bring the refusal back
$node->restart;
my ($ids, $states) = take('tcopy', 10);
is(scalar(@$ids), 10, 'the confirmed copy serves after a restart');
($ids, $states) = take('orig', 10);
is(scalar(@$ids), 10, 'and so does the original');

$node->stop;
done_testing();
