
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
$pc->node($leader)->safe_psql('postgres', qq[
CREATE EXTENSION leaf;
CREATE ROLE leaf_fleet LOGIN;
GRANT USAGE ON SCHEMA public TO leaf_fleet;
GRANT SELECT, UPDATE ON leaf_alloc TO leaf_fleet;
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline, leaf_worker_lease_fleet TO leaf_fleet;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_take, leaf_worker_lease_renew, leaf_worker_lease_release, leaf_worker_lease_give_up, leaf_worker_lease_copy_check, leaf_worker_lease_fleet_check, leaf_worker_lease_pick TO leaf_fleet;
SELECT leaf_segment_create('order', $seg_step, 1, 'patroni raft test');
]);
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
	my $name = "shard$i";
	my $s = LeafTest::new_node($name, { extension => 0 },
		"leaf.worker_id_source = 'database'",
		"leaf.alloc_conninfo = '$conninfo'",
		"leaf.alloc_failover = 'synchronous'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '2s'",
		"leaf.wait_timeout = '1s'",
		"max_connections = 30");
	$s->safe_psql('postgres', q[
CREATE EXTENSION leaf;
CREATE TABLE sf_ids (id bigint NOT NULL);
CREATE TABLE sf_calls (
	started_at timestamptz NOT NULL,
	done_at timestamptz NOT NULL,
	n integer NOT NULL,
	sqlstate text,
	message text);
CREATE TABLE seg_ids (
	started_at timestamptz NOT NULL,
	id bigint,
	done_at timestamptz NOT NULL,
	sqlstate text,
	message text);
CREATE FUNCTION call_sf() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
	got integer;
	st text; msg text;
BEGIN
	INSERT INTO sf_ids SELECT leaf_snowflake_nextvals(20);
	GET DIAGNOSTICS got = ROW_COUNT;
	INSERT INTO sf_calls VALUES (t0, clock_timestamp(), got, NULL, NULL);
EXCEPTION WHEN others THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	INSERT INTO sf_calls VALUES (t0, clock_timestamp(), 0, st, msg);
END
$$;
CREATE FUNCTION call_seg() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
	v bigint;
	st text; msg text;
BEGIN
	v := leaf_segment_nextval('order');
	INSERT INTO seg_ids VALUES (t0, v, clock_timestamp(), NULL, NULL);
EXCEPTION WHEN others THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	INSERT INTO seg_ids VALUES (t0, NULL, clock_timestamp(), st, msg);
END
$$;
]);
	push @shards, $s;
	return $s;
}

sub status
{
	my ($s, $cols) = @_;
	return $s->safe_psql('postgres', "SELECT $cols FROM leaf_snowflake_status");
}

my @bench;

sub start_load
{
	my ($s) = @_;
	push @bench,
	  LeafTest::start_pgbench($s, 'postgres', "SELECT call_sf();\n",
		[ '-c', 2, '-j', 1, '-R', $sf_rate, '-T', 600 ]),
	  LeafTest::start_pgbench($s, 'postgres', "SELECT call_seg();\n",
		[ '-c', 1, '-j', 1, '-R', $seg_rate, '-T', 600 ]);
	return;
}

new_shard($_) for 1 .. 2;
for my $s (@shards)
{
	ok($s->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
		$s->name . ' serves snowflake IDs');
}
my %wid = map { $_->name => status($_, 'worker_id') } @shards;
isnt($wid{shard1}, $wid{shard2},
	"the shards hold distinct worker IDs ($wid{shard1}, $wid{shard2})");
is(join(',', map { status($_, 'worker_id_source') } @shards), 'database,database',
	'... from the allocation database');

# the rows reach the synchronous standby
ok( $pc->node($sync)->poll_query_until('postgres',
		q[SELECT count(*) FROM leaf_worker_lease WHERE holder_address LIKE 'shard%'], '2'),
	"the synchronous standby $sync has both lease rows");

start_load($_) for @shards;
my $t_load = time;
note elapsed() . 'load started on shard1 and shard2';
usleep(5_000_000);    # load before the first event

# wait until the shard serves again: a successful snowflake call started
# after its last failed one and after $since
sub wait_serving
{
	my ($s, $since, $seconds) = @_;
	return $pc->wait_until(
		sub {
			return $s->safe_psql('postgres', qq[
SELECT coalesce(max(started_at) FILTER (WHERE sqlstate IS NULL), '-infinity')
       > greatest(coalesce(max(done_at) FILTER (WHERE sqlstate IS NOT NULL), '-infinity'),
                  to_timestamp($since))
  FROM sf_calls]) eq 't';
		},
		$seconds // 120, $s->name . ' to serve again');
}

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
	ok(wait_serving($s, $t_promoted), $s->name . " serves snowflake IDs again after the failover to $new");
}
$event{crash} = { at => $t_crash, promoted => $t_promoted - $t_crash, leader => $new,
	shards => [ @shards ] };

is(join(',', map { status($_, 'worker_id') } @shards), "$wid{shard1},$wid{shard2}",
	'the shards kept their worker IDs across the failover');

# ---------- 2. a third shard joins; the old leader rejoins ----------

note elapsed() . 'both shards serve again';
$pc->start_member($old);
my $s3 = new_shard(3);
my $held_back = '';
my $t_s3 = time;
ok( $pc->wait_until(
		sub {
			my $r = status($s3, "ready::text || '|' || coalesce(not_ready_reason, '')");
			$held_back = $r if $r =~ /moved to timeline/;
			return $r =~ /^true\|/;
		},
		60, 'shard3 to serve'),
	'shard3 serves');
note sprintf('shard3 served %.1fs after its start', time - $t_s3);
is($held_back, '', 'shard3 was not held back by the new timeline (leaf.alloc_failover = synchronous)');
$wid{shard3} = status($s3, 'worker_id');
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
	ok(wait_serving($s, $t_sw_done), $s->name . " serves snowflake IDs again after the switchover to $sync");
}
$event{switchover} = { at => $t_sw, promoted => $t_sw_done - $t_sw, leader => $sync,
	shards => [ @shards ] };
usleep(3_000_000);    # load after the last event

for my $b (@bench)
{
	$b->{run}->signal('TERM');
	eval { $b->{run}->finish };
}
my $t_end = time;
note elapsed() . 'load stopped';
note 'members at the end: ' . $pc->members_text;

# ---------- checks ----------

my $final = $pc->leader;
is(join(',', map { status($_, 'worker_id') } @shards),
	"$wid{shard1},$wid{shard2},$wid{shard3}",
	'every shard still holds its worker ID at the end');

my (@all_sf, @all_seg);
for my $s (@shards)
{
	my $name = $s->name;
	my @ids = grep { /^\d+$/ } split /\n/, $s->safe_psql('postgres', 'SELECT id FROM sf_ids');
	my @other = grep { (($_ >> 12) & 1023) != $wid{$name} } @ids;
	is(scalar(@other), 0,
		"$name: every one of its " . scalar(@ids) . " snowflake IDs carries its worker ID $wid{$name}");
	push @all_sf, @ids;
	push @all_seg, grep { /^\d+$/ } split /\n/,
	  $s->safe_psql('postgres', 'SELECT id FROM seg_ids WHERE id IS NOT NULL');

	# the final leader's row bounds every ID the shard handed out
	my $max_ms = $s->safe_psql('postgres', q[
SELECT (extract(epoch FROM (leaf_snowflake_decode(max(id))).ts) * 1000)::bigint FROM sf_ids]);
	my $row = $pc->node($final)->safe_psql('postgres', qq[
SELECT holder_address || '|' || hwm_ms || '|' || timeline
  FROM leaf_worker_lease WHERE worker_id = $wid{$name}]);
	my ($addr, $hwm, $tl) = split /\|/, $row;
	is($addr, "$name.example:5432", "$name: the final leader $final holds its row");
	cmp_ok($hwm, '>=', $max_ms, "$name: the row's mark ($hwm) is at or above its latest ID's timestamp ($max_ms)");
}
is(LeafTest::count_repeats(\@all_sf), 0,
	'no snowflake ID repeats over the ' . scalar(@all_sf) . ' IDs of all shards');
is(LeafTest::count_repeats(\@all_seg), 0,
	'no segment ID repeats over the ' . scalar(@all_seg) . ' IDs of all shards');

my %other_errors;
my $seg_failed = 0;
for my $s (@shards)
{
	for my $line (grep { length } split /\n/, $s->safe_psql('postgres', q[
SELECT sqlstate || '|' || count(*) || '|' || min(message)
  FROM sf_calls WHERE sqlstate IS NOT NULL AND sqlstate <> 'LF102' GROUP BY sqlstate]))
	{
		my ($st, $n, $msg) = split /\|/, $line, 3;
		$other_errors{$st} += $n;
		diag $s->name . ": $n snowflake calls failed with $st: $msg";
	}
	for my $line (grep { length } split /\n/, $s->safe_psql('postgres', q[
SELECT sqlstate || '|' || count(*) || '|' || min(message)
  FROM seg_ids WHERE sqlstate IS NOT NULL GROUP BY sqlstate]))
	{
		my ($st, $n, $msg) = split /\|/, $line, 3;
		$seg_failed += $n;
		diag $s->name . ": $n segment calls failed with $st: $msg";
	}
}
is(join(',', sort keys %other_errors), '', 'failed snowflake calls failed with LF102 and nothing else');
is($seg_failed, 0, 'no segment call failed');

# per event and shard: the longest time between two successful snowflake
# calls from just before the event until the next one (the time without
# service), and the calls that failed meanwhile
my $total_lf102 = 0;
for my $ev (qw(crash switchover))
{
	my $e = $event{$ev};
	my $until = $ev eq 'crash' ? $event{switchover}{at} : $t_end;
	my @parts;
	for my $s (@{ $e->{shards} })
	{
		my ($gap, $gap_from, $failed) = split /\|/, $s->safe_psql('postgres', qq[
WITH ok AS (
	SELECT done_at, done_at - lag(done_at) OVER (ORDER BY done_at) AS gap
	  FROM sf_calls
	 WHERE sqlstate IS NULL
	   AND done_at >= to_timestamp($e->{at}) - interval '2 s'
	   AND started_at < to_timestamp($until))
SELECT coalesce(round(extract(epoch FROM max(gap))::numeric, 1), 0) || '|' ||
       coalesce(round(extract(epoch FROM
           (SELECT done_at - gap FROM ok ORDER BY gap DESC NULLS LAST LIMIT 1)
           - to_timestamp($e->{at}))::numeric, 1), 0) || '|' ||
       (SELECT count(*) FROM sf_calls
         WHERE sqlstate = 'LF102'
           AND done_at >= to_timestamp($e->{at}) AND started_at < to_timestamp($until))
  FROM ok]);
		$total_lf102 += $failed;
		push @parts, sprintf('%s %.1fs without service (from %+.1fs), %d calls failed with LF102',
			$s->name, $gap, $gap_from, $failed);
		$e->{gap}{ $s->name } = $gap;
	}
	diag sprintf('%s: new leader %s after %.1fs; %s', $ev, $e->{leader}, $e->{promoted},
		join('; ', @parts));
}
my $sf_calls = 0;
$sf_calls += $_->safe_psql('postgres', 'SELECT count(*) FROM sf_calls') for @shards;
diag sprintf('%d snowflake IDs and %d segment IDs over %.0fs of load; %d snowflake calls, %d failed with LF102',
	scalar(@all_sf), scalar(@all_seg), $t_end - $t_load, $sf_calls, $total_lf102);

note elapsed() . 'checks done';
$_->stop for @shards;
$pc->stop;
note elapsed() . 'stopped';

done_testing();
