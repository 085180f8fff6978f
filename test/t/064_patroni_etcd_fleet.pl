
# Copyright (c) leaf contributors

# A fleet whose allocation database is a 3-member Patroni cluster on
# etcd (Patroni's etcd3 section, one etcd server started by the test),
# synchronous_mode: true, and two shards that draw their segments from it
# and lease their snowflake worker IDs from it (leaf.worker_id_source =
# 'database', a lease of 2 s), as in 063_patroni_db_lease.pl, whose
# shards, load and checks this file shares (LeafPatroni.pm).
#
# The tag 'order' has a step of 400 at about 20 calls/s per shard, with
# leaf.segment_duration = 1ms keeping the step as it is: a segment lasts
# about 20 s, so a shard refills during the run, and its two buffers
# outlast a failover (ttl 10 s): no segment call should wait or fail.
#
# Under load:
#
#   1. kill -9 of the leader's Patroni and postmaster.  Patroni promotes
#      the synchronous standby once the leader key expires in etcd.
#   2. patronictl switchover to the member that is then the synchronous
#      standby (the killed member stays down).
#
# Checked: the new leader is the synchronous standby; the shards serve
# snowflake IDs again after each event, with the worker IDs they had; no
# ID repeats over the shards' snowflake IDs, nor over their segment IDs;
# no segment call waited for a segment during the events nor failed;
# failed snowflake calls failed with LF102 only; the final leader's rows
# bound every snowflake ID handed out and its leaf_alloc every segment
# ID.  Measured, per event: the time to the new leader, each shard's time
# without snowflake service and failed calls.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use LeafTest;
use LeafPatroni;

my ($etcd_ok, $etcd_why) = LeafPatroni::etcd_available();
plan skip_all => $etcd_why unless $etcd_ok;

my $t_start = time;
# the time since the start, in the notes
sub elapsed { return sprintf('[%.0fs] ', time - $t_start); }

my $sf_rate = 50;     # snowflake calls/s per shard, 20 IDs each
my $seg_rate = 20;    # segment calls/s per shard
my $seg_step = 400;   # a segment lasts about 20 s

# ---------- the Patroni allocation cluster, on etcd ----------

my $pc = LeafPatroni->new(
	dcs => 'etcd',
	members => 3,
	synchronous_mode => 1,
	parameters => { 'leaf.alloc_failover' => 'synchronous' });
my $t0 = time;
$pc->start;
my $leader = $pc->wait_leader;
ok($leader, "the Patroni cluster on etcd has a leader ($leader)");
my $sync;
$pc->wait_until(sub { $sync = $pc->sync_standby; defined $sync }, 60, 'a synchronous standby');
ok($sync, 'and a synchronous standby (' . ($sync // 'none') . ')');
note elapsed() . sprintf('Patroni cluster up in %.1fs: %s', time - $t0, $pc->members_text);

$pc->node($leader)->safe_psql('postgres',
	LeafPatroni::lease_fleet_sql($seg_step, 'patroni etcd test'));
my $conninfo = $pc->conninfo('dbname=postgres user=leaf_fleet');
note "leaf.alloc_conninfo = '$conninfo'";

# ---------- two shards ----------

my @shards = map {
	LeafPatroni::new_lease_shard("shard$_", $conninfo, "leaf.segment_duration = '1ms'")
} 1 .. 2;
for my $s (@shards)
{
	ok($s->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
		$s->name . ' serves snowflake IDs');
}
my %wid = map { $_->name => LeafTest::sf_status($_, 'worker_id') } @shards;
isnt($wid{shard1}, $wid{shard2},
	"the shards hold distinct worker IDs ($wid{shard1}, $wid{shard2})");
ok( $pc->node($sync)->poll_query_until('postgres',
		q[SELECT count(*) FROM leaf_worker_lease WHERE holder_address LIKE 'shard%'], '2'),
	"the synchronous standby $sync has both lease rows");

# the segment calls that waited for a segment so far, over both shards,
# and the refills
sub seg_counts
{
	my ($waits, $refills) = (0, 0);
	for my $s (@shards)
	{
		my ($w, $r) = split /\|/, $s->safe_psql('postgres',
			q[SELECT waits || '|' || refills FROM leaf_segments WHERE biz_tag = 'order']);
		$waits += $w // 0;
		$refills += $r // 0;
	}
	return ($waits, $refills);
}

my @bench = map { LeafPatroni::start_lease_load($_, $sf_rate, $seg_rate) } @shards;
my $t_load = time;
note elapsed() . 'load started on shard1 and shard2';
usleep(4_000_000);    # load before the first event

my @events;

# one event: wait for the new leader, then for both shards to serve
# snowflake IDs again; records what the checks report
sub after_event
{
	my ($name, $t_at, $old, $expected, $seg_before) = @_;
	my $new = $pc->wait_leader(120, $old);
	my $t_new = time;
	is($new, $expected, "$name: the synchronous standby $expected leads");
	for my $s (@shards)
	{
		ok($pc->wait_serving($s, $t_new), $s->name . " serves snowflake IDs again after the $name");
	}
	push @events, [ $name => { at => $t_at, promoted => $t_new - $t_at,
		leader => $new // 'none', shards => [ @shards ], seg_before => $seg_before } ];
	note elapsed() . sprintf('%s: %s leads after %.1fs', $name, $new // 'nobody', $t_new - $t_at);
	return;
}

# ---------- 1. kill -9 of the leader ----------

my @seg_before = seg_counts();
my $t_crash = $pc->kill9($leader);
note elapsed() . "kill -9 of $leader";
after_event('kill -9', $t_crash, $leader, $sync, [ @seg_before ]);
$events[-1][1]{seg_after} = [ seg_counts() ];
$leader = $sync;

# ---------- 2. switchover ----------

$pc->wait_until(sub { $sync = $pc->sync_standby; defined $sync && $sync ne $leader },
	60, 'a synchronous standby of the new leader');
ok($sync && $sync ne $leader,
	'there is a synchronous standby (' . ($sync // 'none') . ') to switch over to');
@seg_before = seg_counts();
my $t_sw = time;
note elapsed() . "switchover to $sync";
my ($rc, $out) = $pc->switchover($sync);
is($rc, 0, "patronictl switchover from $leader to $sync succeeds");
after_event('switchover', $t_sw, $leader, $sync, [ @seg_before ]);
usleep(3_000_000);    # load after the last event
$events[-1][1]{seg_after} = [ seg_counts() ];

LeafPatroni::stop_lease_load(@bench);
my $t_end = time;
note elapsed() . 'load stopped';

# ---------- checks ----------

$pc->check_lease_fleet(\@shards, \%wid, \@events, $t_load, $t_end);

for my $ev (@events)
{
	my ($name, $e) = @$ev;
	my $waits = $e->{seg_after}[0] - $e->{seg_before}[0];
	is($waits, 0, "$name: no segment call waited for a segment: the buffers outlast it");
	diag sprintf('%s: %d segment calls waited, %d refills', $name, $waits,
		$e->{seg_after}[1] - $e->{seg_before}[1]);
}
my @seg_ids = map { grep { /^\d+$/ } split /\n/,
	  $_->safe_psql('postgres', 'SELECT id FROM seg_ids WHERE id IS NOT NULL') } @shards;
my $max_id = $pc->node($pc->leader)->safe_psql('postgres',
	q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
my $largest = LeafTest::max_of(@seg_ids);
cmp_ok($max_id, '>', $largest,
	"the final leader's max_id ($max_id) lies above every segment ID handed out ($largest)");
my ($waits, $refills) = seg_counts();
diag sprintf('segments: %d refills over both shards, %d calls waited in all (the first ones included)',
	$refills, $waits);

note elapsed() . 'checks done';
$_->stop for @shards;
$pc->stop;
note elapsed() . 'stopped';

done_testing();
