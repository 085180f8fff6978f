
# Copyright (c) leaf contributors

# Snowflake keys with pg_partman (docs/time.md, "With pg_partman"): its
# ID-based mode, with an interval of the IDs of one day, keeps day
# partitions of a table partitioned on leaf_snowflake() ahead of its
# newest row, with a worker ID set by hand:
#
#  - create_parent, started at today's UTC midnight, makes the partitions
#    of today and the premade days, each bounded by
#    leaf_snowflake_min_id() of its midnight and of the next one;
#  - rows of leaf_snowflake(), then the IDs of later days (those the node
#    would issue then, and the two on either side of each midnight), each
#    followed by run_maintenance(): the partitions stay at least premake
#    days ahead of the newest row, every row is in the partition of its
#    day and none in the default partition;
#  - a range of time on the key, with the STABLE and the IMMUTABLE bounds,
#    scans only the partitions of the range and returns exactly the rows
#    whose leaf_snowflake_time() is in it.
#
# pg_partman's partitions start at multiples of the interval: with every
# version, leaf.snowflake_epoch is set on a UTC midnight, which makes
# them the bounds of UTC midnights; from 5.3.0, a second node keeps the
# default epoch and moves them there with p_offset_id.  4.x and 5.x call
# create_parent differently (p_type 'native' before the interval; the
# interval, then p_type 'range'): the installed version says which.
#
# Where Debian ships pg_partman for this major (postgresql-NN-partman, as
# apt-cache shows it), it must be installed, as install.sh and
# test/majors.sh do: its absence fails.  Only where Debian has none are
# the checks skipped, with the reason.

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# the first node's leaf.snowflake_epoch: a UTC midnight
my $epoch = '2020-01-01 00:00:00+00';
my $epoch_ms = 1577836800000;
my $premake = 3;
# the IDs of one day in the default layout: 86,400,000 ms above 22 bits
my $day_ids = 86_400_000 << 22;

my $node = LeafTest::new_node('sf_partman', { worker_id => 5 },
	"leaf.snowflake_epoch = '$epoch_ms'");
my $db = 'postgres';
my $major = $node->safe_psql($db,
	"SELECT current_setting('server_version_num')::int / 10000");

# the version of a package that apt offers, or undef
sub debian_version
{
	my ($pkg) = @_;
	my $out = `apt-cache show --no-all-versions $pkg 2>/dev/null`;
	return $out =~ /^Version: (\S+)$/m ? $1 : undef;
}

my $available = $node->safe_psql($db,
	"SELECT default_version FROM pg_available_extensions WHERE name = 'pg_partman'");
if ($available eq '')
{
	my $shipped = debian_version("postgresql-$major-partman");
	ok(defined debian_version("postgresql-$major"),
		"apt knows postgresql-$major, so it can tell whether Debian ships pg_partman for it");
	ok(!defined $shipped,
		defined $shipped
		? "Debian ships postgresql-$major-partman $shipped: pg_partman must be installed for PostgreSQL $major"
		: "Debian has no postgresql-$major-partman: pg_partman need not be installed for PostgreSQL $major");
  SKIP:
	{
		my $why = "Debian has no postgresql-$major-partman: pg_partman is not tested on PostgreSQL $major";
		diag $why unless defined $shipped;
		skip $why, 1 unless defined $shipped;
	}
	$node->stop;
	done_testing();
	exit;
}

# pg_partman, and the table with a view of its partitions and their bounds
sub setup
{
	my ($n) = @_;
	$n->safe_psql($db, q{
		CREATE SCHEMA partman;
		CREATE EXTENSION pg_partman SCHEMA partman;
		CREATE TABLE public.events (id bigint PRIMARY KEY DEFAULT leaf_snowflake(), note text)
			PARTITION BY RANGE (id);
		CREATE VIEW parts AS
		SELECT c.oid AS part, c.relname AS name, b.expr = 'DEFAULT' AS is_default,
		       (regexp_match(b.expr, $$FROM \('?(-?\d+)'?\) TO$$))[1]::bigint AS lo,
		       (regexp_match(b.expr, $$TO \('?(-?\d+)'?\)$$))[1]::bigint AS hi
		  FROM pg_inherits i
		  JOIN pg_class c ON c.oid = i.inhrelid,
		       LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) b
		 WHERE i.inhparent = 'public.events'::regclass;
	});
	return;
}

setup($node);
my $version = $node->safe_psql($db,
	"SELECT extversion FROM pg_extension WHERE extname = 'pg_partman'");
# in prove's output: which pg_partman this run tested
diag "pg_partman $version on PostgreSQL $major";
my ($vmajor, $vminor) = $version =~ /^(\d+)\.(\d+)/;
ok(defined $vmajor && ($vmajor == 4 || $vmajor == 5),
	"pg_partman $version is of 4.x or 5.x, whose create_parent this test calls");

# 5.x: the time-based mode takes an encoder and a decoder for text and
# uuid keys only, and refuses them for a bigint key
SKIP:
{
	skip "pg_partman $version has no p_time_encoder (5.x)", 1 unless $vmajor >= 5;
	my ($ret, $out, $err) = $node->psql($db, qq{
		CREATE FUNCTION public.id_time(bigint) RETURNS timestamptz IMMUTABLE LANGUAGE sql
			AS \$\$SELECT leaf_snowflake_time(\$1, 'default', '$epoch')\$\$;
		CREATE FUNCTION public.time_id(timestamptz) RETURNS bigint IMMUTABLE LANGUAGE sql
			AS \$\$SELECT leaf_snowflake_min_id(\$1, 'default', '$epoch')\$\$;
		CREATE TABLE public.by_time (id bigint PRIMARY KEY DEFAULT leaf_snowflake()) PARTITION BY RANGE (id);
		SELECT partman.create_parent('public.by_time', 'id', '1 day',
			p_time_encoder := 'public.time_id', p_time_decoder := 'public.id_time');});
	like($err, qr/p_time_encoder and p_time_decoder can only be used with text\/uuid type control column/,
		"pg_partman $version: the time-based mode refuses an encoder for a bigint key");
}

# The partitions are those of UTC days: each from the bound of its
# midnight to the bound of the next (the STABLE and the IMMUTABLE form),
# one after the other; and a default partition.  $c: the node, the
# server's epoch, what the messages start with.
sub check_partitions
{
	my ($c, $when) = @_;
	my ($wrong, $follow, $defaults) = split /\|/, $c->{node}->safe_psql($db, qq{
		SELECT (SELECT coalesce(string_agg(name || ' ' || lo || '..' || hi, ', ' ORDER BY lo), 'none')
				  FROM parts, LATERAL (SELECT leaf_snowflake_time(lo) AS m) t
				 WHERE NOT is_default
				   AND NOT (date_trunc('day', m, 'UTC') = m
							AND lo = leaf_snowflake_min_id(m)
							AND hi = leaf_snowflake_min_id(m + interval '1 day')
							AND lo = leaf_snowflake_min_id(m, 'default', '$c->{epoch}')
							AND hi = leaf_snowflake_min_id(m + interval '1 day', 'default', '$c->{epoch}'))),
			   (SELECT count(*) = (max(hi) - min(lo)) / $day_ids FROM parts WHERE NOT is_default),
			   (SELECT count(*) FROM parts WHERE is_default)});
	is($wrong, 'none',
		"$c->{what}, $when: every partition is bounded by leaf_snowflake_min_id() of a UTC midnight and the next");
	is($follow, 't', "$c->{what}, $when: the days follow each other without a gap");
	is($defaults, '1', "$c->{what}, $when: there is a default partition");
	return;
}

# every row is in the partition of its UTC day, none in the default one
sub check_rows
{
	my ($c, $when) = @_;
	my ($elsewhere, $in_default) = split /\|/, $c->{node}->safe_psql($db, q{
		SELECT count(*) FILTER (WHERE p.is_default OR p.lo <>
					leaf_snowflake_min_id(date_trunc('day', leaf_snowflake_time(e.id), 'UTC'))),
			   count(*) FILTER (WHERE p.is_default)
		  FROM events e JOIN parts p ON p.part = e.tableoid});
	is($elsewhere, '0', "$c->{what}, $when: every row is in the partition of its UTC day");
	is($in_default, '0', "$c->{what}, $when: no row is in the default partition");
	return;
}

# create_parent from today's UTC midnight, $c->{offset} (an SQL
# expression) as p_offset_id if given, then the rows of days to come,
# each followed by run_maintenance()
sub keep_ahead
{
	my ($c) = @_;
	my $n = $c->{node};
	is( $n->safe_psql($db,
			"SELECT leaf_snowflake_min_id(now() + interval '1 day') - leaf_snowflake_min_id(now())"),
		$day_ids, "$c->{what}: the IDs of one day are $day_ids");

	# today's UTC midnight, once: the first partition starts there
	my $today = $c->{today} = $n->safe_psql($db, "SELECT date_trunc('day', now(), 'UTC')");
	my $start = "leaf_snowflake_min_id('$today')::text";
	my $create =
	  $vmajor == 4
	  ? "partman.create_parent('public.events', 'id', 'native', '$day_ids', p_premake := $premake, p_start_partition := $start)"
	  : "partman.create_parent('public.events', 'id', '$day_ids', p_type := 'range', p_premake := $premake, p_start_partition := $start"
	  . (defined $c->{offset} ? ", p_offset_id := $c->{offset})" : ')');
	is($n->safe_psql($db, "SELECT $create"), 't', "$c->{what}: create_parent of pg_partman $version");

	# what create_parent made: today and the premade days
	is( $n->safe_psql($db, 'SELECT array_agg(lo ORDER BY lo) FROM parts WHERE NOT is_default'),
		$n->safe_psql($db, qq{
			SELECT array_agg(leaf_snowflake_min_id('$today'::timestamptz + k * interval '1 day') ORDER BY k)
			  FROM generate_series(0, $premake) k}),
		"$c->{what}: create_parent made today's partition and $premake days ahead, at the bounds of their UTC midnights");
	check_partitions($c, 'after create_parent');

	$n->safe_psql($db,
		"INSERT INTO events (note) SELECT 'issued' FROM generate_series(1, 2000)");
	is($n->safe_psql($db, 'SELECT count(*), count(DISTINCT id) FROM events'),
		'2000|2000', "$c->{what}: 2000 rows of leaf_snowflake()");
	check_rows($c, 'rows of leaf_snowflake()');

	# Later days, one after the other, each followed by
	# run_maintenance(): 100 IDs that this node (worker ID 5) would issue
	# at this time of day k days from now, and the last ID before day k's
	# UTC midnight and the first after it
	my $parts_before = $n->safe_psql($db, 'SELECT count(*) FROM parts');
	for my $k (1 .. 5)
	{
		$n->safe_psql($db, qq{
			INSERT INTO events
			SELECT leaf_snowflake_min_id(now() + $k * interval '1 day') + (5 << 12) + i, 'day $k'
			  FROM generate_series(0, 99) i;
			INSERT INTO events
			SELECT leaf_snowflake_min_id('$today'::timestamptz + $k * interval '1 day') + d, 'edge $k'
			  FROM (VALUES (-1), (0)) v(d)});
		$n->safe_psql($db, "SELECT partman.run_maintenance('public.events')");
		my $ahead = $n->safe_psql($db, qq{
			SELECT (max(hi) - leaf_snowflake_min_id(date_trunc('day', leaf_snowflake_time((SELECT max(id) FROM events)), 'UTC') + interval '1 day'))
			       / $day_ids
			  FROM parts WHERE NOT is_default});
		cmp_ok($ahead, '>=', $premake,
			"$c->{what}, day $k: after run_maintenance(), $ahead whole days of partitions are ahead of the newest row's day");
		check_partitions($c, "day $k");
		check_rows($c, "day $k");
	}
	my $parts_after = $n->safe_psql($db, 'SELECT count(*) FROM parts');
	cmp_ok($parts_after, '>', $parts_before,
		"$c->{what}: run_maintenance() added partitions ($parts_before before, $parts_after after)");
	return;
}

# A range of time on the key: the partitions it scans, with the STABLE
# form in a generic plan (pruned when the executor starts) and with the
# IMMUTABLE form and constants (pruned when the query is planned), and
# the rows it returns.  Sequential scans only, so that each scan in the
# plan names a partition.
sub time_range
{
	my ($c, $lo, $hi, $what) = @_;
	my $n = $c->{node};
	my $epoch = $c->{epoch};
	$what = "$c->{what}, $what";
	my ($lo_ts, $hi_ts) = split /\|/, $n->safe_psql($db, "SELECT $lo, $hi");
	my ($expected, $total) = split /\|/, $n->safe_psql($db, qq{
		SELECT string_agg(name, ' ' ORDER BY name) FILTER (WHERE NOT is_default
			   AND lo < leaf_snowflake_min_id('$hi_ts') AND hi > leaf_snowflake_min_id('$lo_ts')),
			   count(*)
		  FROM parts});
	my @expected = split / /, $expected;
	my $removed = $total - scalar @expected;
	my $seq = 'SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_indexonlyscan = off;';

	my $stable = $n->safe_psql($db, qq{
		$seq
		PREPARE range_rows(timestamptz, timestamptz) AS
			SELECT id FROM events WHERE id >= leaf_snowflake_min_id(\$1) AND id < leaf_snowflake_min_id(\$2);
		SET plan_cache_mode = force_generic_plan;
		EXPLAIN (COSTS OFF) EXECUTE range_rows('$lo_ts', '$hi_ts')});
	note "$what, STABLE bounds, generic plan:\n$stable";
	my @scans = $stable =~ /Scan on (\S+)/g;
	is(join(' ', sort @scans), $expected,
		"$what, STABLE bounds: the plan scans only the partitions of the range ($expected)");
	like($stable, qr/Subplans Removed: $removed\b/,
		"$what, STABLE bounds: the other $removed are removed when the executor starts");

	my $immutable = $n->safe_psql($db, qq{
		$seq
		EXPLAIN (COSTS OFF) SELECT id FROM events
		 WHERE id >= leaf_snowflake_min_id('$lo_ts', 'default', '$epoch')
		   AND id < leaf_snowflake_min_id('$hi_ts', 'default', '$epoch')});
	note "$what, IMMUTABLE bounds:\n$immutable";
	@scans = $immutable =~ /Scan on (\S+)/g;
	is(join(' ', sort @scans), $expected,
		"$what, IMMUTABLE bounds: the plan names only the partitions of the range");
	unlike($immutable, qr/Subplans Removed/, "$what, IMMUTABLE bounds: pruned when planned");

	my ($by_time, $stable_rows, $immutable_rows) = split /\n/, $n->safe_psql($db, qq{
		SELECT count(*) || ' ' || md5(string_agg(id::text, ',' ORDER BY id)) FROM events
		 WHERE leaf_snowflake_time(id) >= '$lo_ts' AND leaf_snowflake_time(id) < '$hi_ts';
		SELECT count(*) || ' ' || md5(string_agg(id::text, ',' ORDER BY id)) FROM events
		 WHERE id >= leaf_snowflake_min_id('$lo_ts') AND id < leaf_snowflake_min_id('$hi_ts');
		SELECT count(*) || ' ' || md5(string_agg(id::text, ',' ORDER BY id)) FROM events
		 WHERE id >= leaf_snowflake_min_id('$lo_ts', 'default', '$epoch')
		   AND id < leaf_snowflake_min_id('$hi_ts', 'default', '$epoch')});
	my ($count) = split / /, $by_time;
	cmp_ok($count, '>', 0, "$what: $count rows have a time in the range");
	is($stable_rows, $by_time, "$what, STABLE bounds: exactly those rows");
	is($immutable_rows, $by_time, "$what, IMMUTABLE bounds: exactly those rows");
	return;
}

# the whole of it on one node: day 2, and noon of day 1 to noon of day 3
sub run_case
{
	my ($c) = @_;
	keep_ahead($c);
	my $t = "'$c->{today}'::timestamptz";
	time_range($c, "$t + interval '2 days'", "$t + interval '3 days'", 'day 2');
	time_range($c, "$t + interval '1 day 12 hours'", "$t + interval '3 days 12 hours'",
		'noon of day 1 to noon of day 3');
	return;
}

# every version: the epoch on a UTC midnight, the partitions on multiples
# of the interval
run_case({ node => $node, epoch => $epoch, what => 'epoch at a UTC midnight' });
$node->stop;

# 5.3.0 and later: the default epoch (01:42:54.657 UTC), and p_offset_id
# the remainder of a UTC midnight's bound by the interval
SKIP:
{
	skip "pg_partman $version has no p_offset_id (5.3.0 and later)", 1
	  unless $vmajor > 5 || ($vmajor == 5 && $vminor >= 3);
	my $other = LeafTest::new_node('sf_partman_offset', { worker_id => 5 });
	setup($other);
	run_case({ node => $other, epoch => '2010-11-04 01:42:54.657+00',
			what => 'default epoch, p_offset_id',
			offset => "leaf_snowflake_min_id('2026-01-01 00:00+00') % $day_ids" });
	$other->stop;
}

done_testing();
