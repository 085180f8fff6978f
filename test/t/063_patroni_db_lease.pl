
# Copyright (c) leaf contributors

# A fleet with no ZooKeeper at all: the allocation database on a 3-member
# Patroni cluster whose DCS is Patroni's own Raft (python3-pysyncobj),
# synchronous_mode: true, and shards that take their snowflake worker IDs
# from it (leaf.worker_id_source = 'database', leaf.heartbeat_interval =
# 500ms: a lease of 2 s) and their segments too.  Every shard lists every
# member with target_session_attrs=read-write and logs in as a role that
# has only the privileges the fleet needs.
#
# Under load (on each shard, leaf_snowflake_nextvals(20) at about 50
# calls/s, leaf_segment_nextval at about 20 calls/s; every call, and the
# SQLSTATE of every failed one, recorded on the shard):
#
#   1. kill -9 of the leader's Patroni and postmaster.  Patroni promotes
#      the synchronous standby once the leader key expires (ttl 10 s).
#      The shards cannot renew their leases meanwhile: they stop serving
#      snowflake IDs one lease after their last renewal, calls fail with
#      LF102 (leaf.wait_timeout 1 s), and they serve again, with the same
#      worker IDs, once a renewal reaches the new leader: their rows were
#      replicated synchronously.
#   2. A third shard joins on the new timeline and takes the lowest free
#      worker ID at once (leaf.alloc_failover = 'synchronous': no hold for
#      the new timeline), while the old leader's Patroni, started again,
#      rejoins as a replica.
#   3. patronictl switchover to the synchronous standby.
#
# Checked: distinct worker IDs, kept across both events (every ID of a
# shard carries its worker ID); every shard serves again after each event;
# no ID repeats over the union of all shards' snowflake IDs, nor over
# their segment IDs; failed calls fail with LF102 and nothing else, and no
# segment call fails (their buffers outlast a failover); the final
# leader's rows bound every ID handed out.  Measured, per shard and
# event: the time without snowflake service and the calls that failed.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use LeafTest;
use LeafPatroni;

my ($raft_ok, $raft_why) = LeafPatroni::raft_available();
plan skip_all => $raft_why unless $raft_ok;

my $t_start = time;
# the time since the start, in the notes
sub elapsed { return sprintf('[%.0fs] ', time - $t_start); }

my $sf_rate = 50;     # snowflake calls/s per shard, 20 IDs each
my $seg_rate = 20;    # segment calls/s per shard
my $seg_step = 100000;    # a segment outlasts the run

# ---------- the Patroni allocation cluster, on Raft ----------

my $pc = LeafPatroni->new(
	dcs => 'raft',
	members => 3,
	synchronous_mode => 1,
	parameters => { 'leaf.alloc_failover' => 'synchronous' });
my $t0 = time;
$pc->start;
my $leader = $pc->wait_leader;
ok($leader, "the Patroni cluster on Raft has a leader ($leader)");
my $sync;
$pc->wait_until(sub { $sync = $pc->sync_standby; defined $sync }, 60, 'a synchronous standby');
ok($sync, 'and a synchronous standby (' . ($sync // 'none') . ')');
note elapsed() . sprintf('Patroni cluster up in %.1fs: %s', time - $t0, $pc->members_text);

# the fleet's login: segments and worker-ID leases, nothing more
$pc->node($leader)->safe_psql('postgres',
	LeafPatroni::lease_fleet_sql($seg_step, 'patroni raft test'));
is($pc->node($leader)->safe_psql('postgres',
		q[SELECT extversion FROM pg_extension WHERE extname = 'leaf']),
	'1.5', 'the allocation database has leaf 1.5');

my $conninfo = $pc->conninfo('dbname=postgres user=leaf_fleet');
note "leaf.alloc_conninfo = '$conninfo'";

# ---------- shards ----------

my @shards;

sub new_shard
{
	my ($i) = @_;
	my $s = LeafPatroni::new_lease_shard("shard$i", $conninfo);
	push @shards, $s;
	return $s;
}

my @bench;

sub start_load
{
	my ($s) = @_;
	push @bench, LeafPatroni::start_lease_load($s, $sf_rate, $seg_rate);
	return;
}

new_shard($_) for 1 .. 2;
for my $s (@shards)
{
	ok($s->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
		$s->name . ' serves snowflake IDs');
}
my %wid = map { $_->name => LeafTest::sf_status($_, 'worker_id') } @shards;
isnt($wid{shard1}, $wid{shard2},
	"the shards hold distinct worker IDs ($wid{shard1}, $wid{shard2})");
is(join(',', map { LeafTest::sf_status($_, 'worker_id_source') } @shards), 'database,database',
	'... from the allocation database');

# the rows reach the synchronous standby
ok( $pc->node($sync)->poll_query_until('postgres',
		q[SELECT count(*) FROM leaf_worker_lease WHERE holder_address LIKE 'shard%'], '2'),
	"the synchronous standby $sync has both lease rows");

start_load($_) for @shards;
my $t_load = time;
note elapsed() . 'load started on shard1 and shard2';
usleep(5_000_000);    # load before the first event

my %event;

# ---------- 1. kill -9 of the leader ----------

my $old = $leader;
$sync = $pc->sync_standby;
my $t_crash = $pc->kill9($old);
note elapsed() . "kill -9 of $old";
my $new = $pc->wait_leader(120, $old);
my $t_promoted = time;
ok($new, "after kill -9 of $old, Patroni on Raft promotes " . ($new // 'nobody'));
is($new, $sync, 'the new leader is the member that was the synchronous standby');
for my $s (@shards)
{
	ok($pc->wait_serving($s, $t_promoted), $s->name . " serves snowflake IDs again after the failover to $new");
}
$event{crash} = { at => $t_crash, promoted => $t_promoted - $t_crash, leader => $new,
	shards => [ @shards ] };

is(join(',', map { LeafTest::sf_status($_, 'worker_id') } @shards), "$wid{shard1},$wid{shard2}",
	'the shards kept their worker IDs across the failover');

# ---------- 2. a third shard joins; the old leader rejoins ----------

note elapsed() . 'both shards serve again';
$pc->start_member($old);
my $s3 = new_shard(3);
my $held_back = '';
my $t_s3 = time;
ok( $pc->wait_until(
		sub {
			my $r = LeafTest::sf_status($s3, "ready::text || '|' || coalesce(not_ready_reason, '')");
			$held_back = $r if $r =~ /moved to timeline/;
			return $r =~ /^true\|/;
		},
		60, 'shard3 to serve'),
	'shard3 serves');
note sprintf('shard3 served %.1fs after its start', time - $t_s3);
is($held_back, '', 'shard3 was not held back by the new timeline (leaf.alloc_failover = synchronous)');
$wid{shard3} = LeafTest::sf_status($s3, 'worker_id');
is(scalar(keys %{ { reverse %wid } }), 3,
	"the three shards hold distinct worker IDs ($wid{shard1}, $wid{shard2}, $wid{shard3})");
is($pc->node($new)->safe_psql('postgres',
		q[SELECT string_agg(timeline || ':' || synchronous, ',' ORDER BY timeline) FROM leaf_worker_lease_timeline]),
	'1:true,2:true', 'the new timeline is recorded as synchronous');
start_load($s3);

ok($pc->wait_replica($old, 150), "the old leader $old, started again, runs as a replica");
note 'members: ' . $pc->members_text;
usleep(3_000_000);    # load with the old leader back, before the next event

# ---------- 3. switchover to the synchronous standby ----------

$leader = $pc->leader;
$pc->wait_until(sub { $sync = $pc->sync_standby; defined $sync }, 60, 'a synchronous standby');
ok($sync && $sync ne $leader,
	'there is a synchronous standby (' . ($sync // 'none') . ') to switch over to');
note elapsed() . "switchover to $sync";
my $t_sw = time;
my ($rc, $out) = $pc->switchover($sync);
is($rc, 0, "patronictl switchover from $leader to $sync succeeds");
my $new2 = $pc->wait_leader(120, $leader);
my $t_sw_done = time;
is($new2, $sync, "$sync leads after the switchover");
for my $s (@shards)
{
	ok($pc->wait_serving($s, $t_sw_done), $s->name . " serves snowflake IDs again after the switchover to $sync");
}
$event{switchover} = { at => $t_sw, promoted => $t_sw_done - $t_sw, leader => $sync,
	shards => [ @shards ] };
usleep(3_000_000);    # load after the last event

LeafPatroni::stop_lease_load(@bench);
my $t_end = time;
note elapsed() . 'load stopped';
note 'members at the end: ' . $pc->members_text;

# ---------- checks ----------

$pc->check_lease_fleet(\@shards, \%wid,
	[ [ crash => $event{crash} ], [ switchover => $event{switchover} ] ],
	$t_load, $t_end);

note elapsed() . 'checks done';
$_->stop for @shards;
$pc->stop;
note elapsed() . 'stopped';

done_testing();
