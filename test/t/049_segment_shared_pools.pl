
# Copyright (c) leaf contributors

# The pools every database of a server draws from, tag slots
# (leaf.max_tags) and allocators (leaf.max_databases), are fair whatever
# tenants do (docs/privileges.md, "What each database is guaranteed"):
#  (1) two databases at their share (half of the pool each) leave a third
#      its guaranteed share, leaf.max_tags / leaf.max_databases: it takes
#      over the slots of the databases above theirs;
#  (2) the tags of copies of a database, whose loads are refused (LF006),
#      hold nothing: their slots count for nothing and go to the first
#      tag that needs one, and the copies' allocators exit at once rather
#      than after leaf.alloc_idle_timeout;
#  (3) the databases of one owner have at most
#      leaf.max_databases_per_owner allocators at once (half of them by
#      default), and the last free allocator is kept for an owner that
#      has none, so that another owner's database still gets one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

# 16 slots, 4 allocators: each database is guaranteed 16 / 4 = 4 slots,
# may hold 8 (half), and the databases of one owner 2 allocators
my $node = LeafTest::new_node('pools', 'leaf.max_tags = 16',
	'leaf.max_databases = 4', "leaf.alloc_idle_timeout = '5min'");

# a database owned by $owner with leaf and $ntags tags t1..tN, and
# EXECUTE on the ID functions for its owner
sub tenant_db
{
	my ($db, $owner, $ntags) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db OWNER $owner");
	$node->safe_psql($db, qq{
CREATE EXTENSION leaf;
SELECT leaf_segment_create('t' || g, step => 10) FROM generate_series(1, $ntags) g;
GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO $owner;});
}

# calls tags t1..tN of $db as $role, a statement each (an error does not
# keep the next tag from being called): (SQLSTATE of the first error,
# stderr)
sub call_tags
{
	my ($db, $role, $ntags) = @_;
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nSET ROLE $role;\n"
		  . join('', map { "SELECT leaf_segment_nextval('t$_');\n" } 1 .. $ntags),
		on_error_stop => 0);
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return wantarray ? ($state, $err) : $state;
}

sub slots_of
{
	my ($db) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FROM leaf_segments s JOIN pg_database d ON d.datname = s.database
 WHERE d.datname = '$db'});
}

sub allocators_of
{
	my ($db) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FROM pg_stat_activity
 WHERE backend_type = 'leaf allocator' AND datname = '$db'});
}

for my $r (qw(alice bob carol dave))
{
	$node->safe_psql('postgres', "CREATE ROLE $r LOGIN CREATEDB");
}
$node->safe_psql('postgres', 'CREATE ROLE root_owner SUPERUSER');

# ---------- (1) two databases at their share, a third ----------
tenant_db('ta', 'alice', 8);
tenant_db('tb', 'bob', 8);
tenant_db('victim', 'carol', 4);
my ($state, $err) = call_tags('ta', 'alice', 8);
is($state, undef, '1: a takes its share, 8 slots') or diag $err;
($state, $err) = call_tags('tb', 'bob', 8);
is($state, undef, '1: b takes its share, 8 slots') or diag $err;
is(slots_of('ta') + slots_of('tb'), 16, '1: ... and the pool is full');

($state, $err) = call_tags('victim', 'carol', 4);
is($state, undef, '1: the victim gets its guaranteed share of 4 slots, the pool full')
  or diag $err;
is(slots_of('victim'), '4', '1: ... and holds them');
cmp_ok(slots_of('ta') + slots_of('tb'), '==', 12,
	'1: a and b gave up the slots of the tags loaded the longest ago');

# a and b, above their guaranteed share, take no slot back from the victim
($state, $err) = call_tags('ta', 'alice', 8);
is($state, '53000', '1: a, above its guaranteed share, is refused a slot of the full pool');
like($err, qr/too many biz_tags in use.*guaranteed 4/s, '1: ... and told its guaranteed share');
is(slots_of('victim'), '4', '1: the victim keeps its slots');

# the victim's IDs go on
($state, $err) = call_tags('victim', 'carol', 4);
is($state, undef, '1: the victim goes on taking IDs') or diag $err;
$node->safe_psql('postgres', 'DROP DATABASE ta WITH (FORCE)');
$node->safe_psql('postgres', 'DROP DATABASE tb WITH (FORCE)');
$node->safe_psql('postgres', 'DROP DATABASE victim WITH (FORCE)');

# ---------- (2) the refused tags of copies hold nothing ----------
tenant_db('orig', 'dave', 8);
($state, $err) = call_tags('orig', 'dave', 1);
is($state, undef, '2: the original database serves') or diag $err;
for my $c (1 .. 2)
{
	# dave may copy the database he owns
	($state, $err) = LeafTest::sqlstate($node, 'postgres',
		"SET ROLE dave; CREATE DATABASE copy$c TEMPLATE orig");
	is($state, undef, "2: dave makes copy $c of his database") or diag $err;
	($state, $err) = call_tags("copy$c", 'dave', 8);
	is($state, 'LF006', "2: copy $c is refused as a copy");
}
ok( LeafTest::wait_until(
		sub { allocators_of('copy1') == 0 && allocators_of('copy2') == 0 },
		'the copies\' allocators gone', 10),
	'2: the allocators of the refused copies exit at once, not after leaf.alloc_idle_timeout');

# calls to the copies do not keep an allocator alive (a call of a tag
# refused less than a second ago starts none, and waits for that second)
for (1 .. 3)
{
	call_tags("copy$_", 'dave', 2) for 1 .. 2;
}
ok( LeafTest::wait_until(
		sub { allocators_of('copy1') == 0 && allocators_of('copy2') == 0 },
		'the copies\' allocators gone', 10),
	'2: ... and calls to the copies do not keep one');

is( $node->safe_psql('postgres', q{
SELECT count(*) FROM leaf_segments WHERE database IN ('copy1', 'copy2')}),
	'15', '2: the refused tags of the copies have slots (all the pool has left)');
tenant_db('victim', 'carol', 8);
($state, $err) = call_tags('victim', 'carol', 8);
is($state, undef, '2: the victim gets its 8 slots, taking over those of the refused tags')
  or diag $err;
is(slots_of('victim'), '8', '2: ... and holds them');
$node->safe_psql('postgres', "DROP DATABASE $_ WITH (FORCE)")
  for qw(orig copy1 copy2 victim);

# ---------- (3) allocators per owner ----------
tenant_db("d$_", 'dave', 1) for 1 .. 4;
my @states = map { scalar call_tags("d$_", 'dave', 1) } 1 .. 4;
is(join(',', map { $_ // 'ok' } @states), 'ok,ok,53000,53000',
	'3: the databases of one owner get 2 of the 4 allocators');
($state, $err) = call_tags('d3', 'dave', 1);
like($err, qr/too many databases of this database's owner use leaf segment mode/,
	'3: ... and the third is told why');

# a second owner acting with the first gets one of the two left: the
# last is kept for an owner that has none
tenant_db("e$_", 'alice', 1) for 1 .. 2;
@states = map { scalar call_tags("e$_", 'alice', 1) } 1 .. 2;
is(join(',', map { $_ // 'ok' } @states), 'ok,53000',
	'3: a second owner gets one more allocator, not the last');
($state, $err) = call_tags('e2', 'alice', 1);
like($err, qr/kept for the databases of an owner that has none/,
	'3: ... and is told why');
tenant_db('victim', 'carol', 1);
($state, $err) = call_tags('victim', 'carol', 1);
is($state, undef, '3: a third owner\'s database gets the last allocator') or diag $err;

# a superuser's databases count for no owner
$node->safe_psql('postgres', "DROP DATABASE $_ WITH (FORCE)") for qw(d1 d2 d3 d4 e1 e2 victim);
tenant_db("s$_", 'root_owner', 1) for 1 .. 4;
@states = map { scalar call_tags("s$_", 'root_owner', 1) } 1 .. 4;
is(join(',', map { $_ // 'ok' } @states), 'ok,ok,ok,ok',
	'3: databases owned by a superuser may have every allocator');

$node->stop;
done_testing();
