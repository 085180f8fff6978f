# Routine database commands that stop a database's allocator (DROP
# DATABASE, ALTER DATABASE ... RENAME and ... SET TABLESPACE, CREATE
# DATABASE ... TEMPLATE) succeed, and the stopped worker leaves no FATAL
# in the log: it exits with a LOG line, and with exit code 0.  An
# administrator's pg_terminate_backend still ends it as before.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../lib";

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('ddlstop', 'log_min_messages = debug1');
my $tsdir = PostgreSQL::Test::Utils::tempdir_short();
$node->safe_psql('postgres', "CREATE TABLESPACE leaf_ts LOCATION '$tsdir'");

# a database whose allocator is connected
sub busy_database
{
	my ($db) = @_;
	$node->safe_psql('postgres', qq[CREATE DATABASE "$db"]);
	$node->safe_psql($db, q[
		CREATE EXTENSION leaf;
		SELECT leaf_segment_create('d', step => 10);
		SELECT leaf_segment_nextval('d');]);
	ok( LeafTest::wait_until(
			sub {
				$node->safe_psql('postgres',
					"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'leaf allocator' AND datname = '$db'"
				) eq '1';
			},
			"the allocator of $db"),
		"the allocator of $db is connected");
}

my @commands = (
	[ 'd_drop',   'DROP DATABASE d_drop' ],
	[ 'd_rename', 'ALTER DATABASE d_rename RENAME TO d_renamed' ],
	[ 'd_ts',     'ALTER DATABASE d_ts SET TABLESPACE leaf_ts' ],
	[ 'd_tmpl',   'CREATE DATABASE d_copy TEMPLATE d_tmpl' ]);

for my $c (@commands)
{
	my ($db, $sql) = @$c;
	busy_database($db);
	my $offset = -s $node->logfile;
	my ($state, $err) = LeafTest::sqlstate($node, 'postgres', $sql);
	is($state, undef, "$sql works") or diag $err;
	ok($node->wait_for_log(qr/leaf allocator exiting to let a command on database "$db" proceed/, $offset),
		"the allocator of $db says why it exits");
	# the postmaster has reaped it once its exit is logged at DEBUG1
	ok($node->wait_for_log(qr/background worker "leaf allocator" \(PID \d+\) exited with exit code 0/, $offset),
		"the allocator of $db exits with code 0");
	my $log = slurp_file($node->logfile, $offset);
	unlike($log, qr/FATAL/, "no FATAL in the log after: $sql");
}

is($node->safe_psql('d_renamed', "SELECT leaf_segment_nextval('d') > 1"), 't',
	'the renamed database serves IDs again');
is($node->safe_psql('d_ts', "SELECT leaf_segment_nextval('d') > 1"), 't',
	'the moved database serves IDs again');

# pg_terminate_backend is still an administrator's command, with its FATAL
busy_database('d_term');
my $offset = -s $node->logfile;
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'leaf allocator' AND datname = 'd_term'");
ok($node->wait_for_log(qr/FATAL:  terminating background worker "leaf allocator" due to administrator command/, $offset),
	'pg_terminate_backend ends the allocator as before');
is($node->safe_psql('d_term', "SELECT leaf_segment_nextval('d') > 1"), 't',
	'and the next call starts it again');

$node->stop;
done_testing();
