
# Copyright (c) leaf contributors

# Segment mode when things go wrong: the allocator worker is killed with
# SIGKILL while clients take IDs (the postmaster restarts everything), and
# a caller waiting for a segment is cancelled.  No ID may repeat, and after
# the crash every new ID lies above every ID handed out before it (the
# first segment, which the warm start loads, too).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('kill9',
	"leaf.segment_duration = '1ms'",
	"restart_after_crash = on");

$node->safe_psql(
	'postgres', q{
SELECT leaf_segment_create('k', step => 5);
CREATE TABLE kt (
	id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('k'),
	phase text NOT NULL);});

############################################################################
# SIGKILL of the allocator while clients take IDs
############################################################################

# clients: pgbench inserting rows (what it commits is in kt) and two psql
# streams printing every ID they get
my $bench = LeafTest::start_pgbench(
	$node, 'postgres',
	"INSERT INTO kt (phase) VALUES ('before');\n",
	[ '-c', 4, '-j', 1, '-T', 60 ]);
my @streams =
  map { LeafTest::start_id_stream($node, 'postgres', 'k', 200000) } 1 .. 2;

ok( LeafTest::wait_until(
		sub {
			LeafTest::id_stream_count($streams[0]) >= 2000
			  && LeafTest::id_stream_count($streams[1]) >= 2000;
		},
		'the ID streams to get going'),
	'clients are taking IDs');

my @pids = LeafTest::allocator_pids($node, 'postgres');
is(scalar(@pids), 1, 'one allocator worker is running');
my $rows_before_kill =
  $node->safe_psql('postgres', 'SELECT count(*) FROM kt');
note "killing allocator $pids[0] after $rows_before_kill committed rows";
ok(kill('KILL', $pids[0]), 'allocator killed with SIGKILL');

# every client loses its connection in the crash restart
my @before;
for my $s (@streams)
{
	my @ids = LeafTest::finish_id_stream($s);
	note 'stream got ' . scalar(@ids) . " IDs; stderr: $s->{err}";
	push @before, @ids;
}
my $r = LeafTest::finish_pgbench($bench);
isnt($r->{rc}, 0, 'pgbench lost its connections in the crash');

ok($node->poll_query_until('postgres', 'SELECT true'),
	'server accepts connections again');
ok( $node->log_contains(
		qr/\(PID $pids[0]\) was terminated by signal 9/),
	'the log shows the allocator killed by signal 9');
ok($node->log_contains(qr/all server processes terminated; reinitializing/),
	'the postmaster reinitialised shared memory');

my @committed = split /\n/,
  $node->safe_psql('postgres', "SELECT id FROM kt WHERE phase = 'before'");
push @before, @committed;
my $max_before = LeafTest::max_of(@before);
cmp_ok(scalar(@committed), '>=', $rows_before_kill,
	'rows committed before the kill survived');
is(LeafTest::count_repeats(\@before), 0,
	'no repeats among the ' . scalar(@before) . ' IDs handed out before the kill');
# the segments of before are gone; the warm start may have loaded one
is($node->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments WHERE refills > 1'),
	0, 'shared memory holds no segment of before the restart');

# new IDs, from a single session and from concurrent clients
my @after = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('k') FROM generate_series(1, 500)");
$r = LeafTest::finish_pgbench(
	LeafTest::start_pgbench(
		$node, 'postgres',
		"INSERT INTO kt (phase) VALUES ('after');\n",
		[ '-c', 4, '-j', 1, '-t', 250 ]));
is($r->{rc}, 0, 'pgbench runs cleanly after the restart')
  or diag($r->{err});
push @after, split /\n/,
  $node->safe_psql('postgres', "SELECT id FROM kt WHERE phase = 'after'");
is(scalar(@after), 1500, '1500 IDs taken after the restart');
my $min_after = LeafTest::min_of(@after);
cmp_ok($min_after, '>', $max_before,
	"every new ID (from $min_after) is above every ID handed out before the kill (up to $max_before)"
);
is(LeafTest::count_repeats([ @before, @after ]),
	0, 'no ID repeats over the whole test');
cmp_ok(
	LeafTest::max_of(@after), '<',
	$node->safe_psql(
		'postgres', "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'k'"),
	'every ID lies below leaf_alloc.max_id');
is(scalar(LeafTest::allocator_pids($node, 'postgres')),
	1, 'a new allocator worker serves the database');

############################################################################
# a caller cancelled while it waits for a segment
############################################################################

$node->safe_psql('postgres', "SELECT leaf_segment_create('c', step => 1)");
my $first = $node->safe_psql('postgres', "SELECT leaf_segment_nextval('c')");
is($first, 1, 'tag c starts at 1');
ok( $node->poll_query_until(
		'postgres',
		"SELECT next_ready FROM leaf_segments WHERE biz_tag = 'c'"),
	'its second buffer is loaded');

# another session holds the row lock, so the allocator cannot refill
my $locker = $node->background_psql('postgres');
$locker->query_safe(
	"BEGIN; UPDATE leaf_alloc SET description = 'locked' WHERE biz_tag = 'c'"
);

my $waiter = LeafTest::start_psql_script($node,
	'dbname=postgres application_name=leaf_waiter',
	"SET leaf.wait_timeout = '60s';\n"
	  . "SELECT leaf_segment_nextval('c');\n" x 6);

my $waiting_sql = q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE application_name = 'leaf_waiter' AND state = 'active'
   AND wait_event_type = 'Extension'};
ok($node->poll_query_until('postgres', $waiting_sql),
	'the caller waits for a segment once both buffers are empty');
LeafTest::wait_until(sub { LeafTest::id_stream_count($waiter) >= 1 },
	'the first ID of the waiter');
is(LeafTest::id_stream_count($waiter),
	1, 'it got the one ID left in the buffers first');

ok( $node->safe_psql(
		'postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'leaf_waiter'"
	),
	'cancel the waiting caller');
ok( LeafTest::wait_until(
		sub {
			my (undef, $e) = LeafTest::psql_output($waiter);
			$e =~ /canceling statement due to user request/;
		},
		'the cancel to reach the waiter'),
	'the wait ends with "canceling statement due to user request"');

# its next statement waits again; once the lock is gone, everything flows
ok($node->poll_query_until('postgres', $waiting_sql),
	'the next call of the same session waits again');
# let it wait a while, so that the wait shows in leaf_segments
select(undef, undef, undef, 0.4);
$locker->query_safe('ROLLBACK');
$locker->quit;

my ($rc, $wout, $werr) = LeafTest::finish_psql_script($waiter);
my @wids = $wout =~ /^(\d+)$/mg;
note "waiter got @wids; stderr: $werr";
is(scalar(@wids), 5, 'the waiter got an ID from each of its 5 other calls');
my $ncancel = () = $werr =~ /canceling statement/g;
is($ncancel, 1, 'only the cancelled call failed');
unlike($werr, qr/LF003|timed out/, 'no call timed out');
my $sorted = join ',', sort { $a <=> $b } @wids;
is(join(',', @wids), $sorted, 'its IDs increase');
cmp_ok($wids[0], '>', $first, 'and lie above the first ID of the tag');

my @more = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('c') FROM generate_series(1, 20)");
is(LeafTest::count_repeats([ $first, @wids, @more ]),
	0, 'no ID of tag c repeats after the cancel');
cmp_ok(LeafTest::min_of(@more), '>', LeafTest::max_of(@wids),
	'later calls continue above');

my ($waits, $max_wait) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT waits, round(max_wait_ms) FROM leaf_segments WHERE biz_tag = 'c'"
  );
note "tag c: $waits waits, longest $max_wait ms";
cmp_ok($max_wait, '>=', 400,
	'leaf_segments recorded the long wait that ended when the lock went away');

############################################################################
# the allocator is terminated (not a crash) while a load is pending
############################################################################

$node->safe_psql('postgres', "SELECT leaf_segment_create('term', step => 1)");
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('term')"),
	1, 'tag term starts at 1');
ok( $node->poll_query_until(
		'postgres',
		"SELECT next_ready FROM leaf_segments WHERE biz_tag = 'term'"),
	'its second buffer is loaded');
$locker = $node->background_psql('postgres');
$locker->query_safe(
	"BEGIN; UPDATE leaf_alloc SET description = 'locked' WHERE biz_tag = 'term'"
);
# take the last buffered ID: the next load is requested but cannot finish
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('term')"),
	2, 'the buffered ID is handed out');
ok( $node->poll_query_until(
		'postgres',
		"SELECT last_error IS NOT NULL FROM leaf_segments WHERE biz_tag = 'term'"),
	'the pending load fails on the row lock');
@pids = LeafTest::allocator_pids($node, 'postgres');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend($pids[0])");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pids[0]"),
	"allocator $pids[0] terminated");
$locker->query_safe('ROLLBACK');
$locker->quit;

my $t_next = $node->safe_psql('postgres',
	"SET leaf.wait_timeout = '10s'; SELECT leaf_segment_nextval('term')");
is($t_next, 3,
	'a caller finding no allocator starts a new one and gets the next ID');
my @new_pids = LeafTest::allocator_pids($node, 'postgres');
is(scalar(@new_pids), 1, 'one allocator runs again');
isnt($new_pids[0], $pids[0], 'and it is a new process');

done_testing();
