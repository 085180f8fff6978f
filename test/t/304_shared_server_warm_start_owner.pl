
# Copyright (c) leaf contributors

# The allocators the warm start launches count in their owner's share.
# The leader launches them outside a transaction, where the owner of a
# database (pg_database.datdba) is not read; each allocator then counts
# itself in its owner's share once connected, and exits if that owner's
# databases held theirs already.  Before, one non-superuser whose
# databases were the most recently used before a restart got the warm
# start's places and, with calls to its other databases, every allocator,
# and another owner's database was refused one (53000).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;
use Time::HiRes ();

# 4 allocators, 2 per owner; the warm start has 2 places
my $node = LeafTest::new_node('warm_owner', 'leaf.max_tags = 16',
	'leaf.max_databases = 4', "leaf.alloc_idle_timeout = '10s'",
	"leaf.warm_start_interval = '1s'");

$node->safe_psql('postgres', "CREATE ROLE $_ LOGIN CREATEDB")
  for qw(mallory carol);

sub tenant_db
{
	my ($db, $owner) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db OWNER $owner");
	$node->safe_psql($db, qq{
CREATE EXTENSION leaf;
SELECT leaf_segment_create('t1', step => 10);
GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO $owner;
GRANT EXECUTE ON FUNCTION leaf_segment_nextvals(text, integer) TO $owner;});
}

sub call
{
	my ($db, $role) = @_;
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nSET ROLE $role;\nSELECT leaf_segment_nextval('t1');\n",
		on_error_stop => 0);
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return wantarray ? ($state, $err) : $state;
}

sub allocators
{
	return $node->safe_psql('postgres', q{
SELECT string_agg(coalesce(datname, '?'), ',' ORDER BY datname)
  FROM pg_stat_activity WHERE backend_type = 'leaf allocator'});
}

tenant_db('victim', 'carol');
tenant_db("m$_", 'mallory') for 1 .. 4;

# before the restart: the victim is used, then (a second later) two of
# mallory's databases, within his share of two allocators
my ($state, $err) = call('victim', 'carol');
is($state, undef, 'the victim serves before the restart') or diag $err;
sleep 2;
for my $db (qw(m1 m2))
{
	($state, $err) = call($db, 'mallory');
	is($state, undef, "$db serves before the restart") or diag $err;
}
($state, $err) = call('m3', 'mallory');
is($state, '53000', 'before the restart a third database of mallory gets no allocator');

# (the call of m3 took a tag slot: the warm start lists it among the
# most recent, so it warms two of m1, m2 and m3)
$node->restart;
my @warm;
ok( LeafTest::wait_until(
		sub { @warm = grep { /^m\d$/ } split /,/, allocators(); @warm == 2 },
		'the warm start of two of mallory\'s databases', 10),
	'the warm start starts the allocators of two of mallory\'s databases');
note 'allocators after the warm start: ' . allocators();

# mallory calls his two other databases: his owner share is full
my %warm = map { $_ => 1 } @warm;
my @others = grep { !$warm{$_} } map { "m$_" } 1 .. 4;
my @m = map { scalar call($_, 'mallory') } @others;
note "mallory's @others after the restart: " . join(',', map { $_ // 'ok' } @m);
note 'allocators now: ' . allocators();

my $t0 = Time::HiRes::time();
($state, $err) = call('victim', 'carol');
my $dt = Time::HiRes::time() - $t0;
note sprintf('victim first call after restart: %s in %.2f s',
	$state // 'ok', $dt);
note $err if defined $state;

is(join(',', map { $_ // 'ok' } @m), '53000,53000',
	'mallory\'s databases get no more than his 2 allocators after a restart');
is($state, undef, 'the victim, of another owner, gets an allocator');

# for how long: mallory keeps loads going in his four databases (50 IDs
# every 0.2 s, step 10)
my @h = map {
	LeafTest::start_psql_script($node, "m$_",
		"SET ROLE mallory;\n"
		  . "SELECT count(*) FROM leaf_segment_nextvals('t1', 50);\nSELECT pg_sleep(0.2);\n" x 60)
} 1 .. 4;
my $denied = 0;
for (1 .. 10)
{
	$denied++ if (call('victim', 'carol') // '') eq '53000';
	sleep 1;
}
LeafTest::finish_psql_script($_) for @h;
note "victim refused an allocator in $denied of 10 calls a second apart "
  . 'allocators: ' . allocators();
is($denied, 0, 'the victim is not refused while mallory keeps loading');

$node->stop;
done_testing();
