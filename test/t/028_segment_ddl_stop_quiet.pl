# Routine database commands that stop a database's allocator (DROP
# DATABASE, ALTER DATABASE ... RENAME and ... SET TABLESPACE, CREATE
# DATABASE ... TEMPLATE) succeed, and the stopped worker leaves no FATAL
# in the log: it exits with a LOG line, and with exit code 0.  An
# administrator's pg_terminate_backend still ends it as before.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

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

# Fleet mode: a load waiting on an allocation server that does not answer
# (its session stopped with SIGSTOP; leaf.alloc_timeout is 60 s) is given
# up at once when DROP DATABASE stops the worker, so the command does not
# wait for the timeout, and fails with "being accessed by other users".
my $stopped_pid;
END { kill 'CONT', $stopped_pid if $stopped_pid; }

my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
$alloc->safe_psql('postgres', "SELECT leaf_segment_create('r', 10)");
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');
my $shard = LeafTest::new_node('shard',
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=@{[ $alloc->port ]} dbname=postgres user=$user'",
	"leaf.alloc_timeout = '60s'",
	"leaf.wait_timeout = '200ms'");
# The first call of a database starts its allocator, which connects to
# the allocation server: on a loaded machine that outlasts the 200 ms a
# caller waits here (set short for the refusals below), so the first
# segment is waited for, not demanded of one call.
sub first_segment
{
	my ($db) = @_;
	$shard->safe_psql($db, 'CREATE EXTENSION leaf');
	ok($shard->poll_query_until($db, "SELECT leaf_segment_nextval('r') > 0"),
		"$db: a first segment from the allocation server");
}
$shard->safe_psql('postgres', 'CREATE DATABASE fd');
first_segment('fd');
$stopped_pid = $alloc->safe_psql('postgres',
	q[SELECT pid FROM pg_stat_activity WHERE application_name = 'leaf shard shard']);
like($stopped_pid, qr/^\d+$/, 'the shard has a session on the allocation server');
kill 'STOP', $stopped_pid;

# use up the segment: the next load hangs on the stopped session
$shard->psql('fd', "SELECT count(*) FROM leaf_segment_nextvals('r', 100)");
ok( LeafTest::wait_until(
		sub {
			$shard->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'leaf allocator' AND datname = 'fd' AND query = 'leaf: loading a remote segment' AND state = 'active'"
			) eq '1';
		},
		'the remote load to hang'),
	'the allocator of fd waits for the allocation server');

$offset = -s $shard->logfile;
my $t0 = time;
my ($state, $err) = LeafTest::sqlstate($shard, 'postgres', 'DROP DATABASE fd');
my $took = time - $t0;
is($state, undef, 'DROP DATABASE works while a remote load hangs') or diag $err;
cmp_ok($took, '<', 5, sprintf('and does not wait for leaf.alloc_timeout (took %.2f s)', $took));
ok($shard->wait_for_log(qr/leaf allocator exiting to let a command on database "fd" proceed/, $offset),
	'the allocator of fd says why it exits');
unlike(slurp_file($shard->logfile, $offset), qr/FATAL/, 'no FATAL in the log of the shard');

kill 'CONT', $stopped_pid;
$stopped_pid = undef;

# The load cut short by such a stop is not reported as a cancel: callers
# that time out (LF003) and leaf_segments say that the allocator was
# stopped for the database command.
$shard->safe_psql('postgres', 'CREATE DATABASE fe');
first_segment('fe');
my $fe_session = q[SELECT pid FROM pg_stat_activity WHERE application_name = 'leaf shard shard' AND backend_type = 'client backend'];
ok( LeafTest::wait_until(
		sub { $alloc->safe_psql('postgres', "SELECT count(*) FROM ($fe_session) s") eq '1' },
		'one session of the shard on the allocation server'),
	'the allocator of fe has a session on the allocation server');
$stopped_pid = $alloc->safe_psql('postgres', $fe_session);
kill 'STOP', $stopped_pid;
$shard->psql('fe', "SELECT count(*) FROM leaf_segment_nextvals('r', 100)");
ok( LeafTest::wait_until(
		sub {
			$shard->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'leaf allocator' AND datname = 'fe' AND query = 'leaf: loading a remote segment' AND state = 'active'"
			) eq '1';
		},
		'the remote load of fe to hang'),
	'the allocator of fe waits for the allocation server');
($state, $err) = LeafTest::sqlstate($shard, 'postgres', 'ALTER DATABASE fe RENAME TO fe2');
is($state, undef, 'ALTER DATABASE ... RENAME works while a remote load hangs') or diag $err;
like( $shard->safe_psql('postgres', q[SELECT last_error FROM leaf_segments WHERE database = 'fe2' AND biz_tag = 'r']),
	qr/^the allocator was stopped to let ALTER DATABASE on database "fe" proceed$/,
	'leaf_segments names the command that stopped the load');

# the next load (a new allocator, a new session) waits on the row of the
# tag, locked on the allocation server, so the caller times out first
my $row_locker = $alloc->background_psql('postgres');
$row_locker->query_safe(q[BEGIN; SELECT 1 FROM leaf_alloc WHERE biz_tag = 'r' FOR UPDATE]);
($state, $err) = LeafTest::sqlstate($shard, 'fe2', "SELECT leaf_segment_nextval('r')");
is($state, 'LF003', 'a caller of fe2 times out');
like($err, qr/DETAIL:  The last allocation failed: the allocator was stopped to let ALTER DATABASE on database "fe" proceed\n/,
	'its detail says that the allocator was stopped for ALTER DATABASE');
unlike($err, qr/canceling statement/, 'and nothing about a cancelled statement');
$row_locker->query_safe('ROLLBACK');
$row_locker->quit;

kill 'CONT', $stopped_pid;
$stopped_pid = undef;
$_->stop for ($shard, $alloc);
done_testing();
