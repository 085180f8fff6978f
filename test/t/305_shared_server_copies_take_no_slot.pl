
# Copyright (c) leaf contributors

# Copies of a database, whose loads are refused (LF006), take no slot of
# a database above its share once refused: a database refused lately
# takes only free or refused slots, since it could not serve from
# another's (its first call, before any refusal, is any new database's).  Before, a
# copy, below its guaranteed share since its refused tags count for
# nothing, took over the victim's slots (here 8 tags where 4 are
# guaranteed) again and again, and its cached IDs were skipped.  Measured
# with copies called in a loop: the victim's takeovers (gaps) and IDs
# skipped; and the victim's IDs never repeat and always increase, across
# a kill -9 of its allocator and an immediate shutdown.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;
use Time::HiRes ();

my $ncopies = 3;
my $secs = 12;

my $node = LeafTest::new_node('evict', 'leaf.max_tags = 16',
	'leaf.max_databases = 4', "leaf.alloc_idle_timeout = '5min'",
	'restart_after_crash = on');
$node->safe_psql('postgres', "CREATE ROLE $_ LOGIN CREATEDB")
  for qw(dave carol bob);

sub tenant_db
{
	my ($db, $owner, $prefix, $ntags, $step) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db OWNER $owner");
	$node->safe_psql($db, qq{
CREATE EXTENSION leaf;
SELECT leaf_segment_create('$prefix' || g, step => $step) FROM generate_series(1, $ntags) g;
GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO $owner;});
}

tenant_db('victim', 'carol', 'v', 8, 1000);
$node->safe_psql('victim', q{
CREATE TABLE ids (n bigserial PRIMARY KEY, tag text, id bigint);
GRANT ALL ON ids, ids_n_seq TO carol;});
tenant_db('filler', 'bob', 'f', 7, 10);
tenant_db('orig', 'dave', 't', 8, 10);
$node->safe_psql('orig', "SET ROLE dave; SELECT leaf_segment_nextval('t1')");
$node->safe_psql('postgres', "SET ROLE dave; CREATE DATABASE copy$_ TEMPLATE orig")
  for 1 .. $ncopies;

# the victim's 8 tags and the filler's 8: the pool is full
$node->safe_psql('filler',
	"SET ROLE bob; SELECT leaf_segment_nextval('f' || g) FROM generate_series(1, 7) g");
$node->safe_psql('victim', "SET ROLE carol; "
	  . "INSERT INTO ids (tag, id) SELECT 'v' || g, leaf_segment_nextval('v' || g) FROM generate_series(1, 8) g");
is($node->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments'), '16',
	'the pool is full: the victim holds 8 slots, the filler 7, orig 1');

sub victim_script
{
	my ($rounds) = @_;
	my $sql = "SET ROLE carol;\n";
	for my $r (1 .. $rounds)
	{
		$sql .= "INSERT INTO ids (tag, id) VALUES ('v$_', leaf_segment_nextval('v$_'));\n"
		  for 1 .. 8;
	}
	return $sql;
}

# the victim's 8 tags, round and round for secs, a commit each round
sub victim_loop
{
	my ($s) = @_;
	$s //= $secs;
	return qq{SET ROLE carol;
DO \$\$
DECLARE t0 timestamptz := clock_timestamp(); r int := 0; n int := 0;
BEGIN
  WHILE clock_timestamp() < t0 + interval '$s s' LOOP
    r := r + 1;
    FOR g IN 1 .. 8 LOOP
      BEGIN
        INSERT INTO ids (tag, id) VALUES ('v' || g, leaf_segment_nextval('v' || g));
      EXCEPTION WHEN others THEN n := n + 1;
      END;
    END LOOP;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'victim calls % errors %', 8 * r, n;
END
\$\$;
};
}

sub copy_loop
{
	return qq{SET ROLE dave;
DO \$\$
DECLARE t0 timestamptz := clock_timestamp(); i int := 0; n int := 0;
BEGIN
  WHILE clock_timestamp() < t0 + interval '$secs s' LOOP
    i := i + 1;
    BEGIN
      PERFORM leaf_segment_nextval('t' || (1 + i % 8));
    EXCEPTION WHEN others THEN n := n + 1;
    END;
  END LOOP;
  RAISE NOTICE 'calls % errors %', i, n;
END
\$\$;
};
}

sub check_ids
{
	my ($what, $from) = @_;
	$from //= 0;
	my $rep = $node->safe_psql('victim', q{
SELECT count(*) - count(DISTINCT (tag, id)) FROM ids});
	is($rep, '0', "$what: no ID of the victim repeats");
	my $dec = $node->safe_psql('victim', q{
SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY tag ORDER BY n) AS prev FROM ids) s
 WHERE id <= prev});
	is($dec, '0', "$what: each tag's IDs increase");
	return $node->safe_psql('victim', qq{
SELECT count(*) FILTER (WHERE id - prev > 1), coalesce(sum(id - prev - 1) FILTER (WHERE id - prev > 1), 0), count(*)
  FROM (SELECT n, id, lag(id) OVER (PARTITION BY tag ORDER BY n) AS prev FROM ids) s
 WHERE n > $from});
}

# ---- two databases above their share, the victim and the filler, both
# taking IDs: neither takes a slot of the other ----
my $f = LeafTest::start_psql_script($node, 'filler',
	"SET ROLE bob;\n" . "SELECT leaf_segment_nextval('f' || g) FROM generate_series(1, 7) g;\n" x 300);
my $v0 = LeafTest::start_psql_script($node, 'victim', victim_loop(4));
my (undef, undef, $v0err) = LeafTest::finish_psql_script($v0);
my (undef, undef, $ferr) = LeafTest::finish_psql_script($f);
my ($gaps0) = split /\|/, check_ids('two databases above their share');
is($gaps0, 0, 'two databases above their share take no slot of each other');
unlike($v0err . $ferr, qr/ERROR/, '... and neither gets an error');
note "victim and filler alone: $1" if $v0err =~ /(victim calls \d+ errors \d+)/;

# ---- the copies called in a loop while the victim takes IDs ----
my $mark = $node->safe_psql('victim', 'SELECT max(n) FROM ids');
my $before = check_ids('before');
my $t0 = Time::HiRes::time();
my @h = map { LeafTest::start_psql_script($node, "copy$_", copy_loop()) } 1 .. $ncopies;
my $v = LeafTest::start_psql_script($node, 'victim', victim_loop());
my ($vrc, $vout, $verr) = LeafTest::finish_psql_script($v);
my $vsecs = Time::HiRes::time() - $t0;
note "victim: $1" if $verr =~ /(victim calls \d+ errors \d+)/;
my @notes;
for (@h)
{
	my ($rc, $out, $e) = LeafTest::finish_psql_script($_);
	push @notes, $1 if $e =~ /(calls \d+ errors \d+)/;
}
note 'copies: ' . join('; ', @notes);
my ($gaps, $skipped, $n) = split /\|/, check_ids('copies in a loop', $mark);
$mark = $node->safe_psql('victim', 'SELECT max(n) FROM ids');
note sprintf('victim: %d IDs taken in %.1f s, %d takeovers (gaps), %d IDs skipped',
	$n, $vsecs, $gaps, $skipped);
# a copy's first call, before its first refusal, is a new database's
# like any other: it may take over one slot of a database above its
# share; once refused, it takes none (before: 192 takeovers in 12 s)
cmp_ok($gaps, '<=', $ncopies,
	'copies called in a loop take at most one slot each of the victim, at their first call');

# ---- a kill -9 of the victim's allocator, then an immediate shutdown ----
my $v2 = LeafTest::start_psql_script($node, 'victim', victim_script(200));
@h = map { LeafTest::start_psql_script($node, "copy$_", copy_loop()) } 1 .. $ncopies;
Time::HiRes::sleep(1.5);
my ($apid) = $node->safe_psql('postgres', q{
SELECT pid FROM pg_stat_activity WHERE backend_type = 'leaf allocator' AND datname = 'victim'});
if ($apid)
{
	kill 'KILL', $apid;
	note "killed the victim's allocator $apid";
}
LeafTest::finish_psql_script($_) for ($v2, @h);
ok( LeafTest::wait_until(
		# psql, refused during the crash restart, may exit before it
		# reads its query, and IPC::Run dies of the broken pipe
		sub { eval { ($node->psql('victim', 'SELECT 1'))[0] == 0 } },
		'the crash restart', 30),
	'the server is back after the kill -9 of an allocator');
my $v4 = LeafTest::start_psql_script($node, 'victim', victim_script(50));
@h = map { LeafTest::start_psql_script($node, "copy$_", copy_loop()) } 1 .. $ncopies;
Time::HiRes::sleep(1);
$node->stop('immediate');
LeafTest::finish_psql_script($_) for ($v4, @h);
$node->start;
my $v3 = LeafTest::start_psql_script($node, 'victim', victim_script(50));
LeafTest::finish_psql_script($v3);
my ($gaps2, $skipped2, $n2) = split /\|/, check_ids('after kill -9 and immediate shutdown', $mark);
note "after the kill and restart: $n2 IDs, $gaps2 gaps, $skipped2 skipped";

$node->stop;
done_testing();
