# Copyright (c) leaf contributors

# A database restored with pg_dump and pg_restore into another cluster is
# a copy even where its database has the same OID as the original: a
# local source of segments is the cluster's system identifier and the
# database OID, not the OID alone.  The copy is refused (LF006) at its
# first load, for a tag called directly and for a table moved onto leaf
# with leaf_adopt, while the original goes on serving.  Once a superuser
# has raised the copy's counters and confirmed, the copy serves, and no ID
# is handed out by both.
# copy-matrix: segment dump_new_cluster

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# the same OID in both clusters: the case a check by OID alone misses
my $dboid = 16390;
my $acct_tag = 'public.accounts.id';

# a segment duration this short keeps the dynamic step at the tags' step
# (100): the original's segments held in memory stay small, so the IDs it
# hands out after the dump soon pass the counters the dump holds
my @conf = ("leaf.segment_duration = '1ms'");
my $orig = LeafTest::new_node('orig', @conf);
my $other = LeafTest::new_node('other', @conf);

$orig->safe_psql('postgres', "CREATE DATABASE app OID $dboid");
$orig->safe_psql('app', q[CREATE EXTENSION leaf;
	SELECT leaf_segment_create('order', step => 100);
	CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('order'), note text);
	INSERT INTO orders (note) SELECT 'orig' FROM generate_series(1, 300);
	CREATE TABLE accounts (id bigserial PRIMARY KEY, note text);
	INSERT INTO accounts (note) SELECT 'orig' FROM generate_series(1, 300);]);

# $n IDs of $tag in database app of $node, one call a statement, going on
# after errors; returns (\@ids, \@sqlstates, $stderr)
sub take
{
	my ($node, $tag, $n) = @_;
	my $h = LeafTest::start_psql_script($node, 'app',
		"\\set VERBOSITY verbose\n" . ("SELECT leaf_segment_nextval('$tag');\n" x $n));
	my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
	return ([ map { 0 + $_ } ($out =~ /^(\d+)$/mg) ],
		[ $err =~ /ERROR:\s+([0-9A-Z]{5}):/g ], $err);
}

# $n rows inserted into accounts of app on $node, one a statement, going
# on after errors; returns (\@ids, \@sqlstates)
sub insert_accounts
{
	my ($node, $note, $n) = @_;
	my $h = LeafTest::start_psql_script($node, 'app',
		"\\set VERBOSITY verbose\n"
		  . ("INSERT INTO accounts (note) VALUES ('$note') RETURNING id;\n" x $n));
	my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
	return ([ map { 0 + $_ } ($out =~ /^(\d+)$/mg) ],
		[ $err =~ /ERROR:\s+([0-9A-Z]{5}):/g ]);
}

sub distinct { my %s = map { $_ => 1 } @_; return [ sort keys %s ]; }

like($orig->safe_psql('app', q[SELECT leaf_adopt('accounts', 'id', step => 100)]),
	qr/leaf_segment_nextval\('public\.accounts\.id'/, 'accounts adopted onto leaf');
# one row a statement: a bulk insert would use up segments faster than the
# segment duration and double the step
my ($ids, $states) = insert_accounts($orig, 'orig', 300);
is(scalar(@$ids), 300, 'the original inserts into the adopted table');

# everything the original hands out, and everything the copy hands out
my (%orig_ids, %copy_ids);
push @{ $orig_ids{order} },
  split /\n/, $orig->safe_psql('app', 'SELECT id FROM orders');

# pg_dump while the original serves, pg_restore into the other cluster
my $stream = LeafTest::start_id_stream($orig, 'app', 'order', 1000);
my $dump = $orig->basedir . '/app.dump';
$orig->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $orig->connstr('app') ],
	'pg_dump while the original serves');
push @{ $orig_ids{order} }, LeafTest::finish_id_stream($stream);
$other->safe_psql('postgres', "CREATE DATABASE app OID $dboid");
is($other->safe_psql('postgres', q[SELECT oid FROM pg_database WHERE datname = 'app']),
	$orig->safe_psql('postgres', q[SELECT oid FROM pg_database WHERE datname = 'app']),
	'the database has the same OID in both clusters');
$other->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $other->connstr('app'), $dump ],
	'restored into the other cluster with pg_restore');
is($other->safe_psql('app', q[SELECT count(*) FROM accounts WHERE note = 'orig']),
	600, 'the restore holds the adopted table');

# the copy's first load is refused
my $err;
($ids, $states, $err) = take($other, 'order', 20);
push @{ $copy_ids{order} }, @$ids;
is(scalar(@$ids), 0, 'the copy hands out no ID of order')
  or diag 'the copy handed out ' . scalar(@$ids) . ' IDs of order';
is_deeply(distinct(@$states), ['LF006'], 'the copy is refused with LF006');
like($err,
	qr/refusing to draw segments of biz_tag "order" in a copy of the database that drew them/,
	'the message says it is a copy');
my ($detail) = $err =~ /^DETAIL:\s+(.*)$/m;
$detail //= '';
like($detail, qr/a copy/, 'the detail (for a superuser) says it is a copy');
like($detail, qr/system/i, 'and speaks of the system the counters belong to');
is($other->safe_psql('app',
		q[SELECT string_agg(state || ' ' || kind, ', ' ORDER BY state) FROM leaf_alloc_source]),
	'current local, pending local', 'the copy records the copy as pending');

# so is the adopted table
my $acct_states;
($ids, $acct_states) = insert_accounts($other, 'copy', 20);
push @{ $copy_ids{$acct_tag} }, @$ids;
is(scalar(@$ids), 0, 'no row goes into the adopted table of the copy')
  or diag 'the copy inserted ' . scalar(@$ids) . ' rows into accounts';
is_deeply(distinct(@$acct_states), ['LF006'], 'its inserts are refused with LF006');

# the original goes on meanwhile
($ids, $states) = take($orig, 'order', 500);
is(scalar(@$ids), 500, 'the original keeps serving order');
push @{ $orig_ids{order} }, @$ids;
($ids, $states) = insert_accounts($orig, 'orig', 300);
is(scalar(@$ids), 300, 'and inserting into accounts');

# the operator raises the copy's counters above the original's, and
# confirms
my $raise = 1000000;
cmp_ok($orig->safe_psql('app', 'SELECT max(max_id) FROM leaf_alloc'), '<', $raise / 10,
	'the original is far below the raised counters');
$other->safe_psql('app', "UPDATE leaf_alloc SET max_id = $raise");
my ($cstate, $cerr) = LeafTest::sqlstate($other, 'app', 'SELECT leaf_alloc_source_confirm()');
is($cstate, undef, 'a superuser confirms the copy') or diag $cerr;

($ids, $states, $err) = take($other, 'order', 300);
is(scalar(@$ids), 300, 'the confirmed copy serves order') or diag $err;
push @{ $copy_ids{order} }, @$ids;
cmp_ok(LeafTest::min_of(@$ids) // 0, '>=', $raise, 'from its raised counter');
($ids, $acct_states) = insert_accounts($other, 'copy', 100);
is(scalar(@$ids), 100, 'and rows go into its adopted table');
push @{ $copy_ids{$acct_tag} }, @$ids;

# both serve side by side from now on
($ids) = take($orig, 'order', 300);
push @{ $orig_ids{order} }, @$ids;
insert_accounts($orig, 'orig', 100);
push @{ $orig_ids{$acct_tag} },
  split /\n/, $orig->safe_psql('app', 'SELECT id FROM accounts');

for my $tag ('order', $acct_tag)
{
	my @o = @{ $orig_ids{$tag} };
	my @c = @{ $copy_ids{$tag} // [] };
	is(LeafTest::count_repeats(\@o), 0, "the original repeats no ID of $tag");
	my $shared = LeafTest::count_repeats([ @o, @c ]);
	diag sprintf('%s: the original handed out %d IDs, the copy %d; shared: %d',
		$tag, scalar(@o), scalar(@c), $shared);
	is($shared, 0, "0 IDs of $tag shared between the original and the copy");
}

# A dump of a database whose leaf_alloc_source was written before 1.4
# (a local row without its cluster) is a copy too, wherever it is
# restored: 1.4 writes the cluster in every local row, and its update fills
# it in, so a local row without one in a database at 1.4 came with a dump.
$orig->safe_psql('postgres', 'CREATE DATABASE app13 OID ' . ($dboid + 1));
$orig->safe_psql('app13', q[CREATE EXTENSION leaf;
	SELECT leaf_segment_create('order', step => 100);
	SELECT leaf_segment_nextval('order') FROM generate_series(1, 150);]);
my $sysid13 = $orig->safe_psql('app13',
	q[SELECT system_identifier FROM leaf_alloc_source WHERE state = 'current']);
# (the original holds no segment meanwhile, so that it loads none)
$orig->safe_psql('app13', q[SELECT leaf_segment_discard('order');
	UPDATE leaf_alloc_source SET system_identifier = NULL, data_directory = NULL]);
my $dump13 = $orig->basedir . '/app13.dump';
$orig->command_ok([ 'pg_dump', '-Fc', '-f', $dump13, '-d', $orig->connstr('app13') ],
	'pg_dump of a database whose source row has no cluster (as before 1.4)');
$orig->safe_psql('app13',
	qq[UPDATE leaf_alloc_source SET system_identifier = $sysid13]);
$other->safe_psql('postgres', 'CREATE DATABASE app13 OID ' . ($dboid + 1));
$other->command_ok([ 'pg_restore', '-d', $other->connstr('app13'), $dump13 ],
	'restored into the other cluster, with the same OID');
my ($st13, $err13) = LeafTest::sqlstate($other, 'app13', q[SELECT leaf_segment_nextval('order')]);
is($st13, 'LF006', 'the copy of a source row without its cluster is refused');
is($other->safe_psql('app13',
		q[SELECT string_agg(state || ' ' || (system_identifier IS NULL), ', ' ORDER BY state) FROM leaf_alloc_source]),
	'current true, pending false', 'the row without its cluster stays, the copy waits as pending');
($st13, $err13) = LeafTest::sqlstate($orig, 'app13', q[SELECT leaf_segment_nextval('order')]);
is($st13, undef, 'the original goes on') or diag $err13;

done_testing();
