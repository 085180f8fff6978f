
# Copyright (c) leaf contributors

# Fleet mode: a shard that freezes in the middle of a load must not hold
# the tag's row lock on the allocation database, or every other shard's
# refills of that tag wait for it (lock_timeout) until the frozen
# session is ended.
#
# Shard 1's allocator is made to wait for the row lock (the test holds
# it), then stopped with SIGSTOP; the test then lets the lock go, so
# that shard 1's remote session receives the lock while its client
# cannot answer.  Shard 2 must keep refilling the tag meanwhile, and
# shard 1's remote session must not be left holding the lock.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LeafTest;

my $stopped_pid;

# never leave a stopped process behind, whatever happens
END { kill 'CONT', $stopped_pid if $stopped_pid; }

my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
$alloc->safe_psql('postgres', "SELECT leaf_segment_create('hot', 100)");
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');

my @shards;
for my $i (1, 2)
{
	push @shards,
	  LeafTest::new_node("shard$i",
		"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user application_name=shard$i'",
		"leaf.segment_duration = '1ms'",	# keep the step at 100
		"leaf.wait_timeout = '5s'");
}
my ($s1, $s2) = @shards;

sub take
{
	my ($node, $n) = @_;
	return grep { /^\d+$/ } split /\n/,
	  $node->safe_psql('postgres',
		"SELECT * FROM leaf_segment_nextvals('hot', $n)");
}

# the remote session of a shard on the allocation database
sub remote_session
{
	my ($app) = @_;
	return $alloc->safe_psql('postgres',
		"SELECT coalesce(state, '') || '|' || coalesce(wait_event_type, '') "
		  . "FROM pg_stat_activity WHERE application_name = '$app'");
}

my @ids = (take($s1, 10), take($s2, 10));
is(scalar(@ids), 20, 'both shards take IDs of tag hot');

# the test holds the row lock for a moment
my $holder = LeafTest::start_psql_script($alloc, 'postgres',
	"BEGIN;\nSELECT 'locked' FROM leaf_alloc WHERE biz_tag = 'hot' FOR UPDATE;\n"
	  . "SELECT pg_sleep(1.5);\nCOMMIT;\n");
ok( LeafTest::wait_until(
		sub { (LeafTest::psql_output($holder))[0] =~ /locked/ },
		'the test to hold the row lock'),
	'the test holds the row lock of hot');

# shard 1 needs a segment: its allocator waits for the lock
my $caller = LeafTest::start_psql_script($s1, 'postgres',
	"SET leaf.wait_timeout = '3s';\nSELECT count(*) FROM leaf_segment_nextvals('hot', 100000);\n");
ok( LeafTest::wait_until(
		sub { ((split /\|/, remote_session('shard1'), -1)[1] // '') eq 'Lock' },
		"shard 1's remote session to wait for the row lock"),
	"shard 1's allocator waits for the row lock");
my ($pid) = LeafTest::allocator_pids($s1, 'postgres');
ok(kill('STOP', $pid), "shard 1's allocator (pid $pid) is stopped");
$stopped_pid = $pid;

# the lock goes to shard 1's session, whose client cannot answer
LeafTest::finish_psql_script($holder);
ok( LeafTest::wait_until(
		sub { ((split /\|/, remote_session('shard1'), -1)[1] // '') ne 'Lock' },
		"shard 1's remote session to stop waiting"),
	"shard 1's remote session got the lock");
my $t_released = time;
my $state = (split /\|/, remote_session('shard1'), -1)[0] // '';
diag "shard 1's remote session, its allocator stopped: state '$state'";
isnt($state, 'idle in transaction',
	"shard 1's remote session is not left idle in a transaction");

# shard 2 keeps refilling hot: several loads, none failing
my ($refills0) = $s2->safe_psql('postgres',
	"SELECT refills FROM leaf_segments WHERE biz_tag = 'hot'");
my @more;
my ($ok, $failed) = (0, 0);
for my $round (1 .. 5)
{
	my ($ret, $out, $err) = $s2->psql('postgres',
		"SELECT * FROM leaf_segment_nextvals('hot', 300)");
	if ($ret == 0)
	{
		$ok++;
		push @more, grep { /^\d+$/ } split /\n/, $out;
	}
	else
	{
		$failed++;
		diag "shard 2: $err";
	}
}
my $secs = time - $t_released;
my ($refills1) = $s2->safe_psql('postgres',
	"SELECT refills FROM leaf_segments WHERE biz_tag = 'hot'");
is($failed, 0, 'shard 2 fails no call while shard 1 is frozen');
cmp_ok($refills1 - $refills0, '>=', 3,
	sprintf('shard 2 refills hot %d times in %.2fs while shard 1 is frozen',
		$refills1 - $refills0, $secs));
diag sprintf('shard 2: %d refills, %d calls of 300 IDs in %.2fs with shard 1 frozen',
	$refills1 - $refills0, $ok, $secs);

# shard 1 wakes up and carries on; nothing was handed out twice
kill 'CONT', $pid;
$stopped_pid = undef;
LeafTest::finish_psql_script($caller);
push @ids, @more, take($s1, 500), take($s2, 500);
is(LeafTest::count_repeats(\@ids), 0,
	sprintf('no ID repeats over both shards (%d IDs)', scalar(@ids)));

$_->stop for ($s1, $s2, $alloc);

done_testing();
