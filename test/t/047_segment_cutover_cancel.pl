
# Copyright (c) leaf contributors

# leaf_alloc_cutover() waits for its publisher on the latch, never in a
# blocking libpq call: while the publisher does not answer, the caller's
# cancel (pg_cancel_backend) and statement_timeout end it at once, with
# their own SQLSTATE (57014), and the fence's transaction on the publisher
# is rolled back with the connection that the cancel closed.
#
# (a) a publisher that takes the TCP connection and never answers: a
#     cancel ends the cut-over within seconds, not after the connection's
#     deadline;
# (b) the same with statement_timeout = 1s;
# (c) a publisher whose leaf_alloc is locked by another session: a cancel
#     ends the cut-over while its LOCK waits there, and nothing of the
#     fence is committed on the publisher;
# (d) the connection's socket is counted against the backend's files
#     (AcquireExternalFD): with every one of them taken (by dblink), the
#     cut-over is refused with 08001, and the failed, cancelled and timed
#     out cut-overs above gave theirs back.

use strict;
use warnings;

use IO::Socket::INET;
use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $node = LeafTest::new_node('cutover', 'max_files_per_process = 80');
$node->safe_psql('postgres', 'CREATE DATABASE pubdb');
$node->safe_psql('pubdb', 'CREATE EXTENSION leaf');
$node->safe_psql('pubdb', "SELECT leaf_segment_create('order', step => 100)");

# A publisher that never answers: a listening socket of this test that
# takes connections and says nothing.  It goes away with the test.
my $silent = IO::Socket::INET->new(
	Listen => 16,
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Proto => 'tcp',
	Blocking => 0) or die "cannot listen: $!";
my $silent_port = $silent->sockport;
my @held;    # the connections it took, kept open and silent

my $silent_conninfo = "host=127.0.0.1 port=$silent_port dbname=nowhere";

# starts leaf_alloc_cutover() against $conninfo in the background, as
# application_name $app, after the statements in $before
sub start_cutover
{
	my ($app, $conninfo, $before) = @_;
	return LeafTest::start_psql_script($node,
		"dbname=postgres application_name=$app",
		"\\set VERBOSITY verbose\n"
		  . ($before // '')
		  . "SELECT * FROM leaf_alloc_cutover('nosub', publisher => '$conninfo');\n"
	);
}

sub pid_of
{
	my ($app) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = '$app'");
}

# (a) cancelled while the publisher says nothing
my $h = start_cutover('cutover_a', $silent_conninfo);
ok( LeafTest::wait_until(
		sub {
			my $c = $silent->accept;
			push @held, $c if $c;
			return scalar @held;
		},
		'the cut-over to connect to the silent publisher'),
	'(a) the cut-over connected to a publisher that does not answer');
my $pid = pid_of('cutover_a');
my $t0 = Time::HiRes::time();
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
my $took = Time::HiRes::time() - $t0;
like($err, qr/ERROR:\s+57014: canceling statement due to user request/,
	'(a) pg_cancel_backend ends the cut-over with 57014')
  or diag $err;
cmp_ok($took, '<', 5, '(a) within seconds of the cancel');
note sprintf('(a) the cut-over ended %.3f s after the cancel', $took);

# (b) statement_timeout while the publisher says nothing
$t0 = Time::HiRes::time();
$h = start_cutover('cutover_b', $silent_conninfo,
	"SET statement_timeout = '1s';\n");
($rc, $out, $err) = LeafTest::finish_psql_script($h);
$took = Time::HiRes::time() - $t0;
like($err, qr/ERROR:\s+57014: canceling statement due to statement timeout/,
	'(b) statement_timeout ends the cut-over with 57014')
  or diag $err;
cmp_ok($took, '<', 5, '(b) within seconds of the timeout of 1 s');
note sprintf('(b) the cut-over took %.3f s in all', $took);

# (c) cancelled while its LOCK of the publisher's leaf_alloc waits
my $locker = LeafTest::start_psql_script($node,
	'dbname=pubdb application_name=cutover_locker',
	"BEGIN;\nLOCK TABLE leaf_alloc IN EXCLUSIVE MODE;\n"
	  . "SELECT pg_sleep(600);\nCOMMIT;\n");
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'cutover_locker' AND wait_event = 'PgSleep'"
) or die 'the locker did not take its lock';
my $pubconn = 'host=' . $node->host . ' port=' . $node->port . ' dbname=pubdb';
$h = start_cutover('cutover_c', $pubconn);
ok( $node->poll_query_until(
		'postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE application_name = 'leaf_alloc_cutover' AND datname = 'pubdb'
	   AND wait_event_type = 'Lock'}),
	'(c) the cut-over waits for its lock on the publisher');
$pid = pid_of('cutover_c');
$t0 = Time::HiRes::time();
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
($rc, $out, $err) = LeafTest::finish_psql_script($h);
$took = Time::HiRes::time() - $t0;
like($err, qr/ERROR:\s+57014: canceling statement due to user request/,
	'(c) pg_cancel_backend ends the cut-over with 57014')
  or diag $err;
cmp_ok($took, '<', 5, '(c) within seconds of the cancel');
note sprintf('(c) the cut-over ended %.3f s after the cancel', $took);

$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'cutover_locker'"
);
LeafTest::finish_psql_script($locker);
ok( $node->poll_query_until(
		'postgres', q{
	SELECT count(*) = 0 FROM pg_stat_activity
	 WHERE application_name = 'leaf_alloc_cutover'}),
	'(c) the publisher\'s session of the cancelled cut-over ends');
is( $node->safe_psql(
		'pubdb',
		"SELECT count(*) FROM leaf_alloc_source WHERE description LIKE '%leaf_alloc_cutover()%'"
	),
	'0',
	'(c) nothing of the fence was committed on the publisher');
is($node->safe_psql('postgres', "SELECT count(*) FROM leaf_alloc"),
	'0', '(c) nor anything raised here');

# (d) the socket is counted with the backend's other external files
SKIP:
{
	skip 'dblink is not available', 3
	  unless $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_available_extensions WHERE name = 'dblink'")
	  eq '1';

	my $refused = 'host=127.0.0.1 port='
	  . PostgreSQL::Test::Cluster::get_free_port()
	  . ' dbname=nowhere';
	my $dbconn = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';
	$node->safe_psql('postgres', qq{
		CREATE EXTENSION dblink;
		CREATE FUNCTION fill_fds(keep bool) RETURNS int LANGUAGE plpgsql AS \$\$
		DECLARE n int := 0;
		BEGIN
			LOOP
				BEGIN
					PERFORM dblink_connect('fd' || n, '$dbconn');
				EXCEPTION WHEN OTHERS THEN
					EXIT;
				END;
				n := n + 1;
			END LOOP;
			IF NOT keep THEN
				FOR i IN 0 .. n - 1 LOOP
					PERFORM dblink_disconnect('fd' || i);
				END LOOP;
			END IF;
			RETURN n;
		END \$\$;
	});

	# in one session: how many external files it may open, then cut-overs
	# that fail every way, then again how many
	my $script = qq{\\set VERBOSITY verbose
SELECT 'before', fill_fds(false);
SELECT * FROM leaf_alloc_cutover('nosub', publisher => '$refused');
SET statement_timeout = '200ms';
SELECT * FROM leaf_alloc_cutover('nosub', publisher => '$silent_conninfo');
SELECT * FROM leaf_alloc_cutover('nosub', publisher => '$silent_conninfo');
RESET statement_timeout;
SELECT 'after', fill_fds(false);
SELECT 'full', fill_fds(true);
SELECT * FROM leaf_alloc_cutover('nosub', publisher => '$silent_conninfo');
};
	($rc, $out, $err) =
	  $node->psql('postgres', $script, on_error_stop => 0);
	my ($before) = $out =~ /^before\|(\d+)$/m;
	my ($after) = $out =~ /^after\|(\d+)$/m;
	note "external files a session may open: $before before the cut-overs, $after after";
	ok($before && $before > 0, '(d) dblink took the session\'s external files')
	  or diag "$out\n$err";
	is($after, $before, '(d) the failed and cancelled cut-overs gave their file back');
	like($err,
		qr/ERROR:\s+08001: could not connect to the publisher: there are too many open files/,
		'(d) with none left, the cut-over is refused with 08001')
	  or diag $err;
}

$node->stop;
close $_ for @held;
close $silent;
done_testing();
