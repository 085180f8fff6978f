
# Copyright (c) leaf contributors

# leaf_adopt and leaf_unadopt under load.  Clients insert without pause
# into a bigserial table (8 of them), an identity table and an integer
# serial table (2 each) while each column is adopted onto a segment tag,
# moved back onto its sequence, and adopted again.  No insert may fail (a
# client only waits for the lock of a step), no ID may come twice, and a
# session that holds cached sequence values keeps values that lie below
# leaf's.  A lock that does not come is given up after lock_timeout.
# Then pg_dump and pg_restore of the adopted tables into a new database:
# the adoptions are tied to the restored tables, and inserts there, onto
# leaf and after moving back, collide with no row.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use LeafTest;

# a short segment duration keeps the dynamic step near the tags' step, so
# the tags are refilled all along
my $node = LeafTest::new_node('adopt',
	"leaf.segment_duration = '1ms'",
	"max_connections = 40");

my %initial = (big => 50000, ident => 1000, small => 1000);
$node->safe_psql('postgres', qq{
CREATE TABLE big (id bigserial PRIMARY KEY, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
ALTER SEQUENCE big_id_seq CACHE 10;
INSERT INTO big (pid) SELECT 0 FROM generate_series(1, $initial{big});
CREATE TABLE ident (id bigint GENERATED ALWAYS AS IDENTITY (CACHE 5) PRIMARY KEY, pid int NOT NULL,
					at timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO ident (pid) SELECT 0 FROM generate_series(1, $initial{ident});
CREATE TABLE small (id serial PRIMARY KEY, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO small (pid) SELECT 0 FROM generate_series(1, $initial{small});
});

# A session with values of big_id_seq in its cache (CACHE 10): it took
# one, and holds the next nine.
my $cached = $node->background_psql('postgres', on_error_stop => 0);
my $first_cached = $cached->query_safe("SELECT nextval('big_id_seq')");
note "the caching session took $first_cached and holds the next 9";

my $seconds = 24;
my @bench;
for my $b ([ 'big', 8, 2, [ '-M', 'prepared' ] ], [ 'ident', 2, 1, [] ],
	[ 'small', 2, 1, [] ])
{
	my ($table, $clients, $threads, $extra) = @$b;
	my $log = $node->basedir . "/bench_$table";
	push @bench,
	  [
		$table,
		LeafTest::start_pgbench(
			$node, 'postgres',
			"INSERT INTO $table (pid) VALUES (pg_backend_pid());\n",
			[
				'-c', $clients, '-j', $threads, '-T', $seconds, @$extra,
				'-l', '--log-prefix', $log
			]),
		$log
	  ];
}

# every step in a transaction of its own; its length is the statement's
# (the lock is held from inside the call to the commit right after it)
sub step
{
	my ($sql) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT ($sql)::text, round(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000, 1)"
	);
	my ($result, $ms) = split /\|/, $out;
	return ($result, $ms);
}

my %steps;
sub run_steps
{
	my ($phase, $fmt) = @_;
	for my $t ('big', 'ident', 'small')
	{
		my ($r, $ms) = step(sprintf($fmt, $t));
		push @{ $steps{$phase} }, "$t $ms ms";
		note "$phase $t: $r ($ms ms)";
	}
}

# each step comes after the clients have inserted for a while
sleep 4;
run_steps('adopt', "SELECT leaf_adopt('%s', 'id', step => 50)");
my $clamp = $node->safe_psql('postgres',
	"SELECT seqmax FROM pg_sequence WHERE seqrelid = 'big_id_seq'::regclass");

# The caching session: whatever it still hands out from its cache lies at
# or below the value the sequence was stopped at, and leaf starts above
# it.  (On PostgreSQL 15 and 17 the session drops its cached values at
# its next nextval() after the ALTER SEQUENCE of the adoption, and hands
# out none.)  Then nextval() fails instead of going on into leaf's range.
my @mine;
my $stopped = '';
for (1 .. 12)
{
	my ($out, $ret) = $cached->query("SELECT nextval('big_id_seq')");
	if ($ret != 0)
	{
		$stopped = $cached->{stderr};
		$cached->{stderr} = '';
		last;
	}
	push @mine, $out;
}
note 'the caching session handed out ' . scalar(@mine) . ' cached values after the adoption';
cmp_ok(scalar(@mine), '<=', 9, 'the caching session hands out at most the 9 values it held');
cmp_ok(LeafTest::max_of(@mine, 0), '<=', $clamp,
	"they lie at or below where the sequence stopped ($clamp)");
like($stopped, qr/reached maximum value of sequence "big_id_seq"/,
	'then nextval() fails instead of going on');
$cached->query_safe(
	"INSERT INTO big (id, pid) SELECT v, -1 FROM unnest('{"
	  . join(',', @mine)
	  . "}'::bigint[]) v");
pass('and what it handed out can be inserted by hand');

sleep 4;	# the clients insert on leaf for a while
run_steps('unadopt', "SELECT leaf_unadopt('%s', 'id')");
sleep 4;	# and on the sequences again
run_steps('adopt again', "SELECT leaf_adopt('%s', 'id', step => 50)");

my %processed;
for my $b (@bench)
{
	my ($table, $h, $log) = @$b;
	my $r = LeafTest::finish_pgbench($h);
	is($r->{rc}, 0, "$table: pgbench exits with status 0")
	  or diag("pgbench stdout:\n$r->{out}\npgbench stderr:\n$r->{err}");
	is($r->{failed} // 0, 0, "$table: no failed inserts");
	unlike($r->{err}, qr/ERROR|FATAL/, "$table: no server errors")
	  or diag($r->{err});
	cmp_ok($r->{processed} // 0, '>', 0, "$table: inserts were made");
	$processed{$table} = $r->{processed} // 0;

	# the longest insert: how long the lock of a step held it up
	my $max_us = 0;
	for my $f (glob("$log.*"))
	{
		open my $fh, '<', $f or die "$f: $!";
		while (<$fh>)
		{
			my @c = split / /;
			$max_us = $c[2] if $c[2] > $max_us;
		}
		close $fh;
	}
	note sprintf("%s: %d inserts, the longest took %.1f ms", $table,
		$processed{$table}, $max_us / 1000);
}
note "$_: " . join(', ', @{ $steps{$_} }) for ('adopt', 'unadopt', 'adopt again');

for my $t ('big', 'ident', 'small')
{
	my ($n, $distinct, $min) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT id), min(id) FROM $t");
	my $expected = $initial{$t} + $processed{$t} + ($t eq 'big' ? scalar(@mine) : 0);
	is($n, $expected,
		"$t: every insert is there ($initial{$t} before, $processed{$t} by the clients)"
	);
	is($distinct, $n, "$t: no ID twice ($n rows)");
	cmp_ok($min, '>', 0, "$t: every ID is positive");
}
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(relname || ':' || origin, ',' ORDER BY relname) FROM leaf_adopted"),
	'big:sequence,ident:identity always,small:sequence',
	'the three columns are adopted, each with what it came from');

# A lock that does not come is given up after lock_timeout, and nothing
# changes.
my $reader = $node->background_psql('postgres');
$reader->query_safe('BEGIN');
$reader->query_safe('SELECT count(*) FROM big WHERE id = 1');
my ($state, $err) = LeafTest::sqlstate($node, 'postgres',
	"SET lock_timeout = '200ms'; SELECT leaf_unadopt('big', 'id')");
is($state, '55P03', 'leaf_unadopt gives up after lock_timeout when the table stays locked');
$reader->query_safe('COMMIT');
$reader->quit;
$cached->quit;
like($node->safe_psql('postgres', "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'big'::regclass"),
	qr/leaf_segment_nextval/, 'and the column stays adopted');

############################################################################
# pg_dump and pg_restore of the adopted tables
############################################################################

# a rename after the adoption is followed in leaf_adopted, so the dump
# names the table as it is now
$node->safe_psql('postgres', 'ALTER TABLE small RENAME TO small_renamed');
my %max_before;
$max_before{$_} = $node->safe_psql('postgres', "SELECT max(id) FROM $_")
  for ('big', 'ident', 'small_renamed');
my $clamp_before = $node->safe_psql('postgres',
	"SELECT seqmax FROM pg_sequence WHERE seqrelid = 'big_id_seq'::regclass");

my $dump = $node->basedir . '/adopted.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ],
	'pg_dump of the database with adopted tables');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'pg_restore into a new database, without an error');

is( $node->safe_psql(
		'restored', q{
SELECT string_agg(a.relname || ':' || (a.relid = c.oid) || ':' || (a.attnum = t.attnum), ',' ORDER BY a.relname)
  FROM leaf_adopted a
  JOIN pg_class c ON c.relname = a.relname
  JOIN pg_attribute t ON t.attrelid = c.oid AND t.attname = a.attname}),
	'big:true:true,ident:true:true,small_renamed:true:true',
	'the restored adoptions name the restored tables by their OIDs, not those of the dump');
is( $node->safe_psql('restored',
		"SELECT seqmax FROM pg_sequence WHERE seqrelid = 'big_id_seq'::regclass"),
	$clamp_before, 'the stopped sequence is restored as it was');

# the restored database is a copy until a superuser confirms it
my ($refused) = LeafTest::sqlstate($node, 'restored', 'INSERT INTO big (pid) VALUES (-1)');
is($refused, 'LF006', 'the restored database takes no ID before it is confirmed');
like($node->safe_psql('restored', 'SELECT leaf_alloc_source_confirm()'),
	qr/^the local leaf_alloc/, 'the restored database is confirmed');
for my $t ('big', 'ident', 'small_renamed')
{
	my $ok = $node->safe_psql('restored', qq{
INSERT INTO $t (pid) SELECT -2 FROM generate_series(1, 500);
SELECT count(*) = count(DISTINCT id) AND min(id) FILTER (WHERE pid = -2) > $max_before{$t} FROM $t});
	is($ok, 't', "restored $t: 500 inserts onto leaf, above every ID before the dump, none twice");
	my $next = $node->safe_psql('restored', "SELECT leaf_unadopt('$t', 'id')");
	$ok = $node->safe_psql('restored', qq{
INSERT INTO $t (pid) SELECT -3 FROM generate_series(1, 500);
SELECT count(*) = count(DISTINCT id)
	   AND min(id) FILTER (WHERE pid = -3) > (SELECT max(id) FROM $t WHERE pid <> -3) FROM $t});
	is($ok, 't', "restored $t: moved back (next value $next), 500 inserts from the sequence above every leaf ID");
}
is($node->safe_psql('restored', 'SELECT count(*) FROM leaf_adopted'),
	'0', 'nothing is left adopted in the restored database');
is( $node->safe_psql('restored',
		"SELECT seqmax FROM pg_sequence WHERE seqrelid = 'big_id_seq'::regclass"),
	'9223372036854775807', 'and the sequence has its MAXVALUE back');

$node->stop;
done_testing();
