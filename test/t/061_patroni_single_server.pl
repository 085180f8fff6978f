
# Copyright (c) leaf contributors

# One leaf server made highly available by Patroni.
#
# A 3-member Patroni cluster (synchronous_mode: true) on ZooKeeper; every
# member preloads leaf, serves segment mode from its own leaf_alloc and
# snowflake mode with a worker ID from the same ZooKeeper (leaf.zk_hosts,
# leaf.node_address per member).  Replicas are pg_basebackup copies of
# the leader, state files included.  Clients reach the leader through a
# connection string that lists every member with
# target_session_attrs=read-write, and connect again when they lose it.
#
# 1. kill -9 of the leader's Patroni and postmaster under load.  Patroni
#    promotes the synchronous standby.  Checked: no ID repeats across the
#    old and the new leader, in both modes; the new leader serves both
#    modes without a manual step; its snowflake worker ID is not the old
#    leader's.  Measured: time from the crash to the first ID from the new
#    leader, per mode, and the failed calls.
# 2. The old leader's Patroni started again: it comes back as a replica
#    (pg_rewind, which also copies the new leader's state file over its
#    own).
# 3. patronictl switchover back to the old leader: it serves again, with
#    no repeat and a worker ID that no other member used meanwhile.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use LeafTest;
use LeafZK;
use LeafPatroni;

my $zk = LeafZK->new(nodes => 1);
my $pc = LeafPatroni->new(
	zk => $zk,
	members => 3,
	synchronous_mode => 1,
	parameters => {
		'leaf.alloc_failover' => 'synchronous',
		'leaf.zk_hosts' => $zk->hosts,
		'leaf.zk_root' => '/leaf/patroni',
		'leaf.heartbeat_interval' => '500ms',
		'leaf.max_clock_drift_ms' => '1s',
		# calls on a new leader wait for its snowflake worker to register
		'leaf.wait_timeout' => '30s',
	},
	member_parameters => sub {
		my ($name, $port) = @_;
		return { 'leaf.node_address' => "$name.patroni:$port" };
	});
my $t0 = time;
my $old_wid;
# the leader serves both modes before the replicas clone it, so that they
# copy its state file
$pc->start(
	sub {
		my ($leader) = @_;
		my $node = $pc->node($leader);
		$node->safe_psql('postgres', q[
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', 100, 1, 'patroni single server test');
]);
		$node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status')
		  or die "snowflake mode did not become ready on $leader";
		$node->safe_psql('postgres', q[SELECT leaf_segment_nextval('order'), leaf_snowflake()]);
		$old_wid = $node->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
	});
my $old = $pc->wait_leader;
ok($old, "the Patroni cluster has a leader ($old)");
my $sync = $pc->sync_standby;
ok($sync, "and a synchronous standby ($sync)");
note sprintf('Patroni cluster up in %.1fs: %s', time - $t0, $pc->members_text);
note "leader $old: snowflake worker ID $old_wid";

# every replica holds the leader's state file, copied by pg_basebackup
for my $n (grep { $_ ne $old } $pc->names)
{
	ok(-f $pc->data_dir($n) . '/leaf_snowflake.state',
		"replica $n holds a copy of the leader's leaf_snowflake.state");
}

# ---------- clients ----------

my $conninfo = $pc->conninfo('dbname=postgres user=postgres application_name=ha_client');
my $dir = PostgreSQL::Test::Utils::tempdir('clients');
my @kids;

sub worker_id_of { return ($_[0] >> 12) & 1023; }

# the first ID of a mode answered by $port to a call started after $t (ms)
sub first_after
{
	my ($ids, $tag, $port, $t) = @_;
	my ($first) = sort { $a->[1] <=> $b->[1] }
	  grep { $_->[2] eq $tag && $_->[4] == $port && $_->[0] >= $t } @$ids;
	return $first;
}

my $run_until = time + 600;
@kids = LeafPatroni::start_ha_clients($dir, $conninfo, $run_until,
	qw(segment segment snowflake snowflake));
END { kill 'TERM', @kids if @kids; }

# the clients reach the leader in both modes
ok( $pc->wait_until(
		sub {
			my ($ids) = LeafPatroni::read_ha_clients($dir);
			my %tags = map { $_->[2] => 1 } @$ids;
			return $tags{order} && $tags{'~sf'};
		},
		60, 'IDs from the clients'),
	'the clients take IDs in both modes from the leader');
usleep(3_000_000);	# load before the first event

# ---------- 1. kill -9 of the leader ----------

my $t_crash = $pc->kill9($old);
my $new = $pc->wait_leader(120, $old);
my $t_promoted = time;
ok($new, "after kill -9 of $old, Patroni promotes $new");
is($new, $sync, 'the new leader is the member that was the synchronous standby');
my $new_port = $pc->port($new);

my %first;
ok( $pc->wait_until(
		sub {
			my ($ids) = LeafPatroni::read_ha_clients($dir);
			$first{$_} //= first_after($ids, $_, $new_port, 1000 * $t_crash) for ('order', '~sf');
			return $first{order} && $first{'~sf'};
		},
		120, 'IDs from the new leader'),
	"the new leader $new serves both modes with no manual step");
my $new_wid = $pc->node($new)->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
isnt($new_wid, $old_wid, "the new leader's snowflake worker ID ($new_wid) is not the old leader's ($old_wid)");
my %to_first = map { $_ => $first{$_} ? $first{$_}[1] / 1000 - $t_crash : undef } keys %first;
note sprintf('first ID from the new leader %.1fs (segment) and %.1fs (snowflake) after the crash',
	$to_first{order} // -1, $to_first{'~sf'} // -1);

# ---------- 2. the old leader comes back as a replica ----------

$pc->start_member($old);
ok($pc->wait_replica($old, 150), "the old leader $old, started again, runs as a replica");
my $t_rejoined = time;
note 'members: ' . $pc->members_text;

# ---------- 3. switchover back to the old leader ----------

# Patroni keeps a healthy synchronous standby: to make the old leader the
# synchronous standby, the third member is stopped meanwhile
my ($third) = grep { $_ ne $old && $_ ne $new } $pc->names;
$pc->stop_member($third) if ($pc->sync_standby // '') ne $old;
ok( $pc->wait_until(sub { ($pc->sync_standby // '') eq $old }, 60, "$old synchronous"),
	"$old becomes the synchronous standby");
usleep(2_000_000);	# load on this topology before the switchover
my $t_sw = time;
my ($rc) = $pc->switchover($old);
is($rc, 0, "patronictl switchover from $new back to $old succeeds");
is($pc->wait_leader(120, $new), $old, "$old leads again");
my %first_sw;
ok( $pc->wait_until(
		sub {
			my ($ids) = LeafPatroni::read_ha_clients($dir);
			$first_sw{$_} //= first_after($ids, $_, $pc->port($old), 1000 * $t_sw) for ('order', '~sf');
			return $first_sw{order} && $first_sw{'~sf'};
		},
		120, 'IDs from the old leader again'),
	"$old serves both modes again after the switchover");
my $back_wid = $pc->node($old)->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
isnt($back_wid, $new_wid, "$old does not use $new\'s worker ID ($new_wid); it uses $back_wid");
if (!$pc->member($third)->{pid})
{
	$pc->start_member($third);
	ok($pc->wait_replica($third, 150), "$third, started again, runs as a replica");
}
usleep(2_000_000);	# load after the last event, before the clients stop

kill 'TERM', @kids;
waitpid($_, 0) for @kids;
@kids = ();

# ---------- checks ----------

my ($ids, $errs) = LeafPatroni::read_ha_clients($dir);
my %by_tag;
push @{ $by_tag{ $_->[2] } }, $_->[3] for @$ids;
for my $tag ('order', '~sf')
{
	my $mode = $tag eq 'order' ? 'segment' : 'snowflake';
	is(LeafTest::count_repeats($by_tag{$tag} // []), 0,
		"$mode mode: no ID repeats over the " . scalar(@{ $by_tag{$tag} // [] })
		  . ' IDs of all leaders');
}

# snowflake worker IDs by the server that used them
my %wid_port;
for my $r (grep { $_->[2] eq '~sf' } @$ids)
{
	$wid_port{ worker_id_of($r->[3]) }{ $r->[4] }++;
}
for my $w (sort keys %wid_port)
{
	is(scalar(keys %{ $wid_port{$w} }), 1,
		"snowflake worker ID $w was used by one server only ("
		  . join(', ', map { "port $_: $wid_port{$w}{$_} IDs" } sort keys %{ $wid_port{$w} }) . ')');
}
my @new_sf = grep { $_->[2] eq '~sf' && $_->[4] == $new_port } @$ids;
ok(@new_sf && !grep({ worker_id_of($_->[3]) == $old_wid } @new_sf),
	"no ID of the new leader carries the old leader's worker ID $old_wid");

# failed calls, by phase and kind.  A call counts where it ended: one in
# flight at the kill fails with the crash, and on a loaded machine a call
# can take longer than 100 ms.
my %failed;
for my $e (@$errs)
{
	my $phase = $e->[1] < 1000 * $t_crash ? 'before the crash'
	  : $e->[1] < 1000 * $t_sw ? 'crash' : 'switchover';
	$failed{$phase}{ $e->[2] }++;
}
is(join(',', sort keys %{ $failed{'before the crash'} // {} }), '', 'no call failed before the crash');
for my $phase ('crash', 'switchover')
{
	my @leaf_errors = grep { !/^(conn|connect|25006|57P0.)$/ } keys %{ $failed{$phase} // {} };
	is(join(',', @leaf_errors), '', "$phase: calls failed only for a lost or refused connection");
}
my ($segment_max) = LeafTest::max_of(@{ $by_tag{order} });
my $max_id = $pc->node($old)->safe_psql('postgres',
	q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
cmp_ok($max_id, '>', $segment_max,
	"the leader's max_id ($max_id) lies above every segment ID handed out ($segment_max)");

# ---------- figures ----------

my %first_ms = map { $_ => $first_sw{$_} ? $first_sw{$_}[1] / 1000 - $t_sw : undef } keys %first_sw;
diag sprintf('kill -9 of %s: %s promoted after %.1fs; first ID from it after %.1fs (segment), %.1fs (snowflake, worker ID %s, was %s)',
	$old, $new, $t_promoted - $t_crash, $to_first{order} // -1, $to_first{'~sf'} // -1, $new_wid, $old_wid);
diag sprintf('switchover back to %s: first ID from it after %.1fs (segment), %.1fs (snowflake, worker ID %s)',
	$old, $first_ms{order} // -1, $first_ms{'~sf'} // -1, $back_wid);
for my $phase ('crash', 'switchover')
{
	my $f = $failed{$phase} // {};
	my $refused = delete $f->{connect} // 0;
	diag sprintf('%s: failed calls: %s; refused connection attempts (one per 100 ms per client): %d',
		$phase, %$f ? join(', ', map { "$_: $f->{$_}" } sort keys %$f) : 'none', $refused);
}
diag sprintf('IDs checked: %d segment, %d snowflake; duplicates: %d',
	scalar(@{ $by_tag{order} // [] }), scalar(@{ $by_tag{'~sf'} // [] }),
	LeafTest::count_repeats($by_tag{order} // []) + LeafTest::count_repeats($by_tag{'~sf'} // []));

$pc->stop;
$zk->stop;

done_testing();
