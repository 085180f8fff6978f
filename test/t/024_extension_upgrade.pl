# Versions: leaf created at the previous release, in use (tags, IDs handed
# out, a table whose key defaults to leaf IDs), is upgraded with ALTER
# EXTENSION leaf UPDATE.  IDs continue above the earlier ones, nothing in
# leaf_alloc or the user's table is lost, and the upgraded extension has
# exactly the objects and definitions of a new installation of the current
# release; so has an installation of every older release, upgraded.  A
# table made before the upgrade is adopted after it (leaf_adopt, 1.3).
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::MD5;

my $node = LeafTest::new_node('upgrade', { worker_id => 3, extension => 0 });

my $current = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'leaf'");
my @versions = split /\n/, $node->safe_psql('postgres',
	"SELECT version FROM pg_available_extension_versions WHERE name = 'leaf' ORDER BY string_to_array(version, '.')::int[]");
cmp_ok(scalar(@versions), '>=', 2, 'more than one release is installed: ' . join(', ', @versions));
is($versions[-1], $current, "the default version $current is the newest");

# every release can be reached from every older one
for my $i (0 .. $#versions - 1)
{
	my $path = $node->safe_psql('postgres',
		"SELECT path FROM pg_extension_update_paths('leaf') WHERE source = '$versions[$i]' AND target = '$current'");
	isnt($path, '', "an update path leads from $versions[$i] to $current ($path)");
}

# Released scripts never change: a change to SQL objects goes into a new
# release's upgrade script.  The CHANGELOG names the script of every
# released version and its md5; the installed file must match it.
my %released;
my $version;
for my $line (split /\n/, slurp_file('CHANGELOG.md'))
{
	$version = $1 if $line =~ /^## (\d+\.\d+)/;
	$released{$version} = [ $1, $2 ]
	  if $line =~ /^SQL script: `src\/(leaf--[\d.-]+\.sql)`, md5 `([0-9a-f]{32})`/;
}
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
for my $v (@versions)
{
	next if $v eq $current && !$released{$v};
	ok($released{$v}, "the CHANGELOG names the script of release $v and its md5");
	next unless $released{$v};
	my ($file, $md5) = @{ $released{$v} };
	like($file, qr/^leaf--(\Q$v\E|[\d.]+--\Q$v\E)\.sql$/, "the script of release $v is $file");
	is(Digest::MD5::md5_hex(slurp_file("$sharedir/extension/$file")), $md5,
		"the script of release $v is as released");
}
cmp_ok(scalar(keys %released), '>=', 4, 'the released versions have their scripts recorded');

my $previous = $versions[-2];
$node->safe_psql('postgres', qq[
	CREATE DATABASE old;
	CREATE DATABASE fresh;
]);
$node->safe_psql('old', qq[
	CREATE EXTENSION leaf VERSION '$previous';
	INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100), ('users', 1000, 10);
	CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('orders'), note text);
	CREATE TABLE events (id bigint PRIMARY KEY DEFAULT leaf_snowflake(), note text);
	CREATE TABLE legacy (id bigserial PRIMARY KEY, note text);
	INSERT INTO legacy (note) SELECT 'l' || g FROM generate_series(1, 100) g;
	INSERT INTO orders (note) SELECT 'o' || g FROM generate_series(1, 250) g;
	INSERT INTO events (note) SELECT 'e' || g FROM generate_series(1, 250) g;
	SELECT count(leaf_segment_nextval('users')) FROM generate_series(1, 25);
]);
is($node->safe_psql('old', "SELECT extversion FROM pg_extension WHERE extname = 'leaf'"),
	$previous, "created at $previous");

my $max_order = $node->safe_psql('old', 'SELECT max(id) FROM orders');
my $max_event = $node->safe_psql('old', 'SELECT max(id) FROM events');
my $alloc_before = $node->safe_psql('old', 'SELECT biz_tag, max_id, step FROM leaf_alloc ORDER BY 1');

# the upgrade, while a session keeps drawing IDs
$node->safe_psql('old', 'ALTER EXTENSION leaf UPDATE');
is($node->safe_psql('old', "SELECT extversion FROM pg_extension WHERE extname = 'leaf'"),
	$current, "upgraded to $current");

is($node->safe_psql('old', 'SELECT count(*) FROM orders'), '250', 'the table keeps its rows');
is($node->safe_psql('old', 'SELECT biz_tag, max_id, step FROM leaf_alloc ORDER BY 1'),
	$alloc_before, 'leaf_alloc is unchanged by the upgrade');

$node->safe_psql('old', qq[
	INSERT INTO orders (note) SELECT 'n' || g FROM generate_series(1, 250) g;
	INSERT INTO events (note) SELECT 'n' || g FROM generate_series(1, 250) g;
]);
is($node->safe_psql('old', "SELECT count(*) FROM orders WHERE note LIKE 'n%' AND id <= $max_order"),
	'0', 'segment IDs after the upgrade are above every earlier one');
is($node->safe_psql('old', "SELECT count(*) FROM events WHERE note LIKE 'n%' AND id <= $max_event"),
	'0', 'snowflake IDs after the upgrade are above every earlier one');
is($node->safe_psql('old', 'SELECT count(DISTINCT id) FROM orders'), '500', 'no segment ID repeated');
cmp_ok($node->safe_psql('old', "SELECT leaf_segment_nextval('users')"), '>', 1024,
	'a tag used before the upgrade continues');

# the upgraded extension is the same as a new installation
$node->safe_psql('fresh', 'CREATE EXTENSION leaf');
my $describe = q{
	SELECT pg_describe_object(d.classid, d.objid, d.objsubid) || ' ' ||
		   coalesce(md5(CASE d.classid
				WHEN 'pg_proc'::regclass THEN pg_get_functiondef(d.objid) || coalesce(p.proacl::text, '')
				WHEN 'pg_class'::regclass THEN
					coalesce(pg_get_viewdef(d.objid), '') || coalesce(c.relacl::text, '') ||
					(SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
							coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), ''), ', ' ORDER BY a.attnum)
					   FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
					  WHERE a.attrelid = d.objid AND a.attnum > 0 AND NOT a.attisdropped)
				END), '')
	  FROM pg_depend d
	  LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
	  LEFT JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
	 WHERE d.refclassid = 'pg_extension'::regclass
	   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'leaf')
	   AND d.deptype = 'e'
	 ORDER BY 1};
my $fresh = $node->safe_psql('fresh', $describe);
my $upgraded = $node->safe_psql('old', $describe);
cmp_ok(scalar(split /\n/, $fresh), '>', 10, 'the extension has its objects');
is($upgraded, $fresh, 'the upgraded extension has the objects and definitions of a new installation');

# triggers and constraints on leaf's tables are part of the comparison too
my $triggers = q{SELECT tgname || ' ' || pg_get_triggerdef(oid) FROM pg_trigger
				  WHERE NOT tgisinternal AND tgrelid::regclass::text LIKE 'leaf%' ORDER BY 1};
is($node->safe_psql('old', $triggers), $node->safe_psql('fresh', $triggers), 'the same triggers');
my $constraints = q{SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
					  FROM pg_constraint WHERE conrelid::regclass::text LIKE 'leaf%' ORDER BY 1};
is($node->safe_psql('old', $constraints), $node->safe_psql('fresh', $constraints), 'the same constraints');

# event triggers (1.3) are compared by what they fire on and call
my $event_triggers = q{SELECT evtname || ' ' || evtevent || ' ' || evtfoid::regproc || ' ' || coalesce(evttags::text, '')
						 FROM pg_event_trigger ORDER BY 1};
is($node->safe_psql('old', $event_triggers), $node->safe_psql('fresh', $event_triggers), 'the same event triggers');

# every older release, not only the previous one, upgrades to the objects
# of a new installation
for my $v (@versions[0 .. $#versions - 2])
{
	my $db = 'from_' . ($v =~ s/\./_/gr);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, qq[
		CREATE EXTENSION leaf VERSION '$v';
		INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100);
		ALTER EXTENSION leaf UPDATE;
	]);
	is($node->safe_psql($db, $describe) . $node->safe_psql($db, $triggers)
		  . $node->safe_psql($db, $constraints) . $node->safe_psql($db, $event_triggers),
		$fresh . $node->safe_psql('fresh', $triggers)
		  . $node->safe_psql('fresh', $constraints) . $node->safe_psql('fresh', $event_triggers),
		"from $v: the objects and definitions of a new installation");
}

# A table made before the upgrade is adopted after it (1.3 and later):
# onto a tag above its rows, back onto its sequence above every leaf ID.
if ($node->safe_psql('old', "SELECT to_regproc('leaf_adopt') IS NOT NULL") eq 't')
{
	$node->safe_psql('old', q[
		SELECT leaf_adopt('legacy', 'id');
		INSERT INTO legacy (note) SELECT 'adopted' FROM generate_series(1, 100);
	]);
	is($node->safe_psql('old', "SELECT min(id) FROM legacy WHERE note = 'adopted'"),
		'101', 'a table made before the upgrade is adopted: leaf starts above its rows');
	$node->safe_psql('old', q[
		SELECT leaf_unadopt('legacy', 'id');
		INSERT INTO legacy (note) SELECT 'back' FROM generate_series(1, 100);
		SELECT leaf_adopt('legacy', 'id');
	]);
	is($node->safe_psql('old',
			"SELECT count(DISTINCT id) = count(*) AND min(id) FILTER (WHERE note = 'back') > max(id) FILTER (WHERE note = 'adopted') FROM legacy"),
		't', 'and moved back: the sequence continues above every leaf ID');
}

# a dump of the upgraded database restores with the current release
my $dump = $node->basedir . '/old.dump';
command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('old'), '-f', $dump ], 'pg_dump of the upgraded database');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ], 'pg_restore');
is($node->safe_psql('restored', "SELECT extversion FROM pg_extension WHERE extname = 'leaf'"),
	$current, "the restored database is at $current");
is($node->safe_psql('restored', 'SELECT count(*) FROM orders'), '500', 'the restored table has its rows');

$node->stop;
done_testing();
