# Segment mode shares the server with everything else:
#  (1) idle allocators exit (leaf.alloc_idle_timeout) and start again on
#      demand, so more databases than max_worker_processes allows at once
#      can use leaf, one after another;
#  (2) a caller's transaction that holds one tag's row of leaf_alloc does
#      not hold up the loads of the other tags, and the error of the
#      locked tag names it;
#  (3) the first call of a tag waits no longer than leaf.wait_timeout,
#      even when leaf_alloc is locked;
# and a read-only database or transaction gets IDs like any other, and so
# does a session of a database that no longer allows connections.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = LeafTest::new_node('shared', 'max_worker_processes = 8',
	"leaf.alloc_idle_timeout = '2s'", 'leaf.max_databases = 12',
	"leaf.segment_duration = '1ms'");

sub allocators
{
	return $node->safe_psql('postgres',
		q[SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'leaf allocator']);
}

# ---------- (1) ten databases, eight worker processes ----------
my @dbs = map { "db$_" } 1 .. 10;
for my $db (@dbs)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q[CREATE EXTENSION leaf; SELECT leaf_segment_create('t', step => 5)]);
}
my %served;
for my $batch ([ @dbs[0 .. 4] ], [ @dbs[5 .. 9] ])
{
	for my $db (@$batch)
	{
		my ($state, $err, $out) = LeafTest::sqlstate($node, $db,
			q[SELECT count(DISTINCT leaf_segment_nextval('t')) FROM generate_series(1, 20)]);
		$served{$db} = (!defined $state && $out =~ /^20$/m) ? 1 : 0;
		diag "$db: $err" if defined $state;
	}
	cmp_ok(allocators(), '<=', 5, 'at most one allocator per database of the batch');
	ok( LeafTest::wait_until(sub { allocators() == 0 }, 'allocators gone'),
		'the idle allocators exit');
}
is(scalar(grep { $served{$_} } @dbs), 10,
	'all 10 databases were served, with max_worker_processes = 8');
ok($node->log_contains(qr/leaf allocator started for database "db10"/),
	'the tenth database had an allocator of its own');

# an exited allocator comes back on demand, and IDs go on above the old ones
my $next = $node->safe_psql('db1', q[SELECT leaf_segment_nextval('t')]);
cmp_ok($next, '>', 20, 'db1 serves again after its allocator exited');
is($node->safe_psql('db1',
		q[SELECT count(DISTINCT id) FROM (SELECT leaf_segment_nextval('t') AS id FROM generate_series(1, 50)) s]),
	'50', 'and loads new segments through a new allocator');

# ---------- read-only databases and transactions ----------
# The allocator writes in transactions of its own, never read-only: a
# database with default_transaction_read_only gets IDs from a new
# allocator too, as read-only transactions always did.
$node->safe_psql('postgres', 'ALTER DATABASE db2 SET default_transaction_read_only = on');
ok(LeafTest::wait_until(sub { allocators() == 0 }, 'allocators gone'), 'no allocator runs');
is($node->safe_psql('db2',
		q[SELECT count(DISTINCT leaf_segment_nextval('t')) FROM generate_series(1, 30)]),
	'30', 'a database with default_transaction_read_only = on gets IDs');
is($node->safe_psql('db3',
		q[BEGIN READ ONLY; SELECT count(DISTINCT leaf_segment_nextval('t')) FROM generate_series(1, 30); COMMIT]),
	'30', 'and so does a read-only transaction');

# ---------- a database that no longer allows connections ----------
# Sessions connected before ALTER DATABASE ... ALLOW_CONNECTIONS false go
# on taking IDs: the allocator that starts for them connects all the same
# (before 1.3 it could not, and callers got LF003 with no reason).
ok(LeafTest::wait_until(sub { allocators() == 0 }, 'allocators gone'), 'no allocator runs');
my $conn = LeafTest::start_psql_script($node, 'db4',
	qq[SELECT 'connected';\nSELECT pg_sleep(3);\nSELECT count(DISTINCT leaf_segment_nextval('t')) FROM generate_series(1, 30);\n]);
ok(LeafTest::wait_until(sub { (LeafTest::psql_output($conn))[0] =~ /connected/ }, 'session connected'),
	'a session is connected to db4');
$node->safe_psql('postgres', 'ALTER DATABASE db4 ALLOW_CONNECTIONS false');
my ($rc, $out, $err) = LeafTest::finish_psql_script($conn);
like($out, qr/^30$/m, 'it takes IDs after the database stopped allowing connections');
is($err, '', 'without an error');
$node->safe_psql('postgres', 'ALTER DATABASE db4 ALLOW_CONNECTIONS true');

# ---------- (2) a locked row holds up its own tag only ----------
$node->safe_psql('postgres', q[
	SELECT leaf_segment_create('locked', step => 5);
	SELECT leaf_segment_create('free', step => 5);
	SELECT leaf_segment_nextval('locked'), leaf_segment_nextval('free');]);
my $holder = LeafTest::start_psql_script($node, 'postgres',
	"BEGIN;\nSELECT 'holding' FROM leaf_alloc WHERE biz_tag = 'locked' FOR UPDATE;\nSELECT pg_sleep(60);\n");
ok( LeafTest::wait_until(sub { (LeafTest::psql_output($holder))[0] =~ /holding/ }, 'row held'),
	'a transaction holds the row of tag "locked"');

# callers of the locked tag wait, and so ask for loads all the time; the
# other tag is taken one call a millisecond, so that its step stays small
# and it needs a load every few calls
my @waiters = map {
	LeafTest::start_psql_script($node, 'postgres',
		"\\set VERBOSITY verbose\nSET leaf.wait_timeout = '3s';\n"
		  . "SELECT leaf_segment_nextval('locked') FROM generate_series(1, 10);\n")
} 1 .. 3;
select(undef, undef, undef, 0.5);
my $refills_sql = q[SELECT refills FROM leaf_segments WHERE database = 'postgres' AND biz_tag = 'free'];
my $refills = $node->safe_psql('postgres', $refills_sql);
my $t0 = time;
my @free = LeafTest::burst_ids($node, 'free', 200);
my $took = time - $t0;
$refills = $node->safe_psql('postgres', $refills_sql) - $refills;
note sprintf('200 IDs of "free" (%d loads) took %.2f s while "locked" was held', $refills, $took);
is(scalar(@free), 200, 'the other tag is served');
cmp_ok($refills, '>=', 10, 'through loads made while the locked tag waited');
cmp_ok($took, '<', 10, 'without waiting behind the locked row (a second per load before)');
my $locked_err = '';
for my $w (@waiters)
{
	my ($rc, $out, $err) = LeafTest::finish_psql_script($w);
	$locked_err .= $err;
}
like($locked_err, qr/LF003/, 'the callers of the locked tag time out with LF003');
like($locked_err, qr/the row of biz_tag "locked" in leaf_alloc is locked by another transaction/,
	'and the detail names the locked tag');
$holder->{run}->kill_kill;
$node->safe_psql('postgres', q[SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE query LIKE 'SELECT pg_sleep(60)%' AND pid <> pg_backend_pid()]);
is($node->safe_psql('postgres', q[SELECT leaf_segment_nextval('locked') > 1]), 't',
	'once the row is free, the tag is served again');

# ---------- (3) leaf.wait_timeout on the first call of a tag ----------
$holder = LeafTest::start_psql_script($node, 'postgres',
	"BEGIN;\nLOCK TABLE leaf_alloc IN ACCESS EXCLUSIVE MODE;\nSELECT 'locked';\nSELECT pg_sleep(60);\n");
ok( LeafTest::wait_until(sub { (LeafTest::psql_output($holder))[0] =~ /locked/ }, 'table locked'),
	'a transaction holds leaf_alloc in ACCESS EXCLUSIVE mode');
$t0 = time;
my ($state, $first_err) = LeafTest::sqlstate($node, 'postgres',
	q[SET leaf.wait_timeout = '1s'; SELECT leaf_segment_nextval('never_seen')]);
$took = time - $t0;
note sprintf('the first call of a new tag gave up after %.2f s', $took);
is($state, '55P03', 'the first call of a tag gives up on the lock with 55P03');
cmp_ok($took, '<', 5, 'after about leaf.wait_timeout, not when the lock is released');
$holder->{run}->kill_kill;
$node->safe_psql('postgres', q[SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE query LIKE 'SELECT pg_sleep(60)%' AND pid <> pg_backend_pid()]);

$node->stop;
done_testing();
