# Copyright (c) leaf contributors

# One leaf server on Patroni with asynchronous replication (Patroni's
# default, synchronous_mode: false) and the default leaf.alloc_failover
# ('confirm').
#
# Two members on ZooKeeper; segment mode from the members' own leaf_alloc,
# tag step 10 and leaf.segment_duration = '1ms', so that a refill (an
# UPDATE of leaf_alloc) comes every ten IDs.  Two clients take IDs through
# a connection string that lists both members with
# target_session_attrs=read-write.
#
# The replica is made to miss the last refills: the leader's walsender is
# stopped (SIGSTOP) while the clients and a burst of calls go on, then the
# leader's Patroni and postmaster get kill -9, and the stopped walsender
# too, so that nothing of the burst reaches the replica.  (Stopping the
# replica's walreceiver instead would not lose it: what the walsender has
# sent waits in the socket buffers and is read once the walreceiver goes
# on.)  The WAL held back stays far below maximum_lag_on_failover (1 MB,
# the default), so Patroni promotes the replica.
#
# Checked: the replica is promoted with no command; its leaf_alloc lacks
# the last refills; leaf refuses its loads with LF007 (leaf_segments shows
# 'refused') and hands out no ID; after the repair of docs/segment.md (max_id
# raised above the highest ID the clients saw) and
# leaf_alloc_source_confirm(), IDs continue above every earlier one; no ID
# of the old and the new leader repeats.  Measured: time from the crash to
# the promotion, to the first LF007, and to the first ID after the
# confirmation; failed and waiting calls.

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
	members => 2,
	synchronous_mode => 0,
	parameters => {
		# every segment outlives 1 ms: the step stays at the tag's 10
		'leaf.segment_duration' => '1ms',
		'leaf.wait_timeout' => '5s',
	});
my $t0 = time;
$pc->start(
	sub {
		my ($leader) = @_;
		$pc->node($leader)->safe_psql('postgres', q[
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', step => 10);
SELECT leaf_segment_nextval('order');
]);
	});
my $old = $pc->wait_leader;
ok($old, "the Patroni cluster has a leader ($old)");
my ($replica) = grep { $_ ne $old } $pc->names;
is($pc->role($replica), 'Replica', "$replica is an asynchronous replica");
note sprintf('Patroni cluster up in %.1fs: %s', time - $t0, $pc->members_text);
my $lnode = $pc->node($old);
my $rnode = $pc->node($replica);
is($lnode->safe_psql('postgres', 'SHOW leaf.alloc_failover'), 'confirm',
	"leaf.alloc_failover is 'confirm' (the default)");
is($lnode->safe_psql('postgres', 'SHOW synchronous_standby_names'), '',
	'the leader has no synchronous standby');

# ---------- clients ----------

my $conninfo = $pc->conninfo('dbname=postgres user=postgres application_name=ha_client');
my $dir = PostgreSQL::Test::Utils::tempdir('clients');
my @kids = LeafPatroni::start_ha_clients($dir, $conninfo, time + 300, qw(segment segment));

# the walsender held back, if any: killed at exit, even on failure
my $walsender;
END
{
	kill 'KILL', $walsender if $walsender;
	kill 'TERM', @kids if @kids;
}

ok( $pc->wait_until(
		sub {
			my ($ids) = LeafPatroni::read_ha_clients($dir);
			return @$ids >= 50;
		},
		60, 'IDs from the clients'),
	'the clients take IDs from the leader');

# the replica has everything so far
ok( $rnode->poll_query_until('postgres',
		"SELECT pg_last_wal_replay_lsn() >= '"
		  . $lnode->safe_psql('postgres', 'SELECT pg_current_wal_lsn()') . "'::pg_lsn"),
	"$replica has caught up");

# ---------- the replica misses a burst of refills ----------

$walsender = $lnode->safe_psql('postgres',
	"SELECT pid FROM pg_stat_replication WHERE application_name = '$replica'");
like($walsender, qr/^\d+$/, "the walsender to $replica runs (pid $walsender)");
kill 'STOP', $walsender;
my $t_held = time;

# one call per statement, 1 ms apart: a refill every ten calls
my $h = LeafTest::start_psql_script($lnode, 'postgres',
	"SELECT leaf_segment_nextval('order');\nSELECT pg_sleep(0.001);\n" x 300);
my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
is($rc, 0, 'a burst of 300 calls on the leader') or diag $err;
my @burst = map { 0 + $_ } ($out =~ /^(\d+)$/mg);

my $leader_max = $lnode->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
my $replica_max = $rnode->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
my $lag = $lnode->safe_psql('postgres', sprintf(
		q[SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '%s')],
		$rnode->safe_psql('postgres',
			'SELECT greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())')));
cmp_ok($replica_max, '<', $leader_max,
	"the replica lacks the last refills (its max_id $replica_max, the leader's $leader_max)");
cmp_ok($lag, '<', 1048576,
	"the WAL held back ($lag bytes) is within maximum_lag_on_failover (1 MB)");
note sprintf('walsender stopped for %.1fs; the replica lags %d bytes of WAL', time - $t_held, $lag);

# ---------- kill -9 of the leader ----------

my $t_crash = $pc->kill9($old);
kill 'KILL', $walsender;
$walsender = undef;

my $new = $pc->wait_leader(120, $old);
my $t_promoted = time;
is($new, $replica, "after kill -9 of $old, Patroni promotes $replica with no command");
my $new_port = $pc->port($new);
my $nnode = $pc->node($new);

# the first answer of the new leader: LF007, or an ID
my ($first_lf007, $first_new_id);
$pc->wait_until(
	sub {
		my ($ids, $errs) = LeafPatroni::read_ha_clients($dir);
		($first_lf007) = sort { $a->[1] <=> $b->[1] }
		  grep { $_->[2] eq 'LF007' } @$errs;
		($first_new_id) = sort { $a->[1] <=> $b->[1] }
		  grep { $_->[4] == $new_port } @$ids;
		return $first_lf007 || $first_new_id;
	},
	90, 'an answer of the new leader');
ok($first_lf007, 'the new leader refuses segment loads with LF007');
like($first_lf007 ? $first_lf007->[3] : '', qr/allocation database was promoted or restored; segments are not loaded until confirmed DETAIL: Segments were last loaded on timeline 1, and the allocation database is on timeline 2 now\./,
	'the error names both timelines');
ok(!$first_new_id, 'and hands out no ID');

# the refusal lasts: calls go on failing for a while
usleep(3_000_000);
is($nnode->safe_psql('postgres', q[SELECT state FROM leaf_segments WHERE biz_tag = 'order']),
	'refused', "leaf_segments shows state 'refused'");
is( $nnode->safe_psql('postgres',
		q[SELECT string_agg(state || ' ' || timeline, ', ' ORDER BY state) FROM leaf_alloc_source]),
	'current 1, pending 2', 'leaf_alloc_source holds timeline 2 as pending');

my ($ids, $errs) = LeafPatroni::read_ha_clients($dir);
my @old_ids = ((map { $_->[3] } grep { $_->[4] != $new_port } @$ids), @burst);
my @new_ids = map { $_->[3] } grep { $_->[4] == $new_port } @$ids;
my $repeats_unconfirmed = LeafTest::count_repeats([ @old_ids, @new_ids ]);
is($repeats_unconfirmed, 0,
	sprintf('before the confirmation: no ID repeats (%d IDs of the old leader, %d of the new)',
		scalar(@old_ids), scalar(@new_ids)));
my $lf007_before = grep { $_->[2] eq 'LF007' } @$errs;
cmp_ok($lf007_before, '>', 1, "calls keep failing with LF007 ($lf007_before so far)");

# ---------- the repair and the confirmation ----------

my $highest = LeafTest::max_of(@old_ids);
my $lost_max = $nnode->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
cmp_ok($lost_max, '<', $highest,
	"the new leader's max_id ($lost_max) lies below IDs the clients saw ($highest)");
$nnode->safe_psql('postgres',
	"UPDATE leaf_alloc SET max_id = greatest(max_id, $highest) + 1000 WHERE biz_tag = 'order'");
my $t_confirm = time;
my ($crc, $cout, $cerr) = $nnode->psql('postgres', 'SELECT leaf_alloc_source_confirm()');
is($crc, 0, "leaf_alloc_source_confirm() accepts the new timeline ($cout)") or diag $cerr;

my $first_after;
ok( $pc->wait_until(
		sub {
			my ($ids) = LeafPatroni::read_ha_clients($dir);
			($first_after) = sort { $a->[1] <=> $b->[1] }
			  grep { $_->[4] == $new_port && $_->[0] >= 1000 * $t_confirm } @$ids;
			return $first_after;
		},
		60, 'an ID after the confirmation'),
	'once confirmed, the new leader serves');
usleep(2_000_000);	# load after the confirmation, before the clients stop

kill 'TERM', @kids;
waitpid($_, 0) for @kids;
@kids = ();

# ---------- checks ----------

($ids, $errs) = LeafPatroni::read_ha_clients($dir);
my @all = ((map { $_->[3] } @$ids), @burst);
my @after = map { $_->[3] } grep { $_->[4] == $new_port } @$ids;
is(LeafTest::count_repeats(\@all), 0,
	sprintf('no ID repeats over the %d IDs of both leaders', scalar(@all)));
cmp_ok(LeafTest::min_of(@after) // 0, '>', LeafTest::max_of(@old_ids),
	sprintf('the %d IDs of the new leader lie above every ID of the old one', scalar(@after)));
is(scalar(grep { $_->[4] == $new_port && $_->[1] < 1000 * $t_confirm } @$ids), 0,
	'no ID came from the new leader before the confirmation');
is($nnode->safe_psql('postgres',
		q[SELECT state || ' ' || timeline FROM leaf_segments WHERE biz_tag = 'order']),
	'ok 2', "leaf_segments: state 'ok', last refill on timeline 2");

# a failed call counts where it ended: one in flight at the kill fails
# with the crash, and on a loaded machine a call can take 100 ms and more
my %failed;
$failed{ $_->[1] < 1000 * $t_crash ? 'before' : 'after' }{ $_->[2] }++ for @$errs;
is(join(',', sort keys %{ $failed{before} // {} }), '', 'no call failed before the crash');
my @unexpected = grep { !/^(conn|connect|57P0.|25006|LF007)$/ } keys %{ $failed{after} // {} };
is(join(',', @unexpected), '', 'after the crash, calls failed only for the connection or with LF007');

# calls (not connection attempts) after the crash: the longest, by outcome
my %longest;
for my $c ((map { [ $_->[0], $_->[1], 'id' ] } @$ids), grep { $_->[2] ne 'connect' } @$errs)
{
	next if $c->[0] < 1000 * $t_crash;
	my $ms = $c->[1] - $c->[0];
	$longest{ $c->[2] } = $ms if $ms > ($longest{ $c->[2] } // -1);
}

# ---------- figures ----------

diag sprintf('kill -9 of %s: %s promoted after %.1fs; first LF007 after %.1fs; '
	  . 'confirmed after %.1fs; first ID after the confirmation %.2fs later (%.1fs after the crash)',
	$old, $new, $t_promoted - $t_crash,
	$first_lf007 ? $first_lf007->[1] / 1000 - $t_crash : -1,
	$t_confirm - $t_crash,
	$first_after ? $first_after->[1] / 1000 - $t_confirm : -1,
	$first_after ? $first_after->[1] / 1000 - $t_crash : -1);
diag sprintf('held back: %d bytes of WAL, max_id %d on the leader against %d on the replica; '
	  . 'the clients saw IDs up to %d',
	$lag, $leader_max, $replica_max, $highest);
my $f = $failed{after} // {};
my $refused = delete $f->{connect} // 0;
diag sprintf('after the crash: failed calls: %s; refused connection attempts (one per 100 ms per client): %d',
	%$f ? join(', ', map { "$_: $f->{$_}" } sort keys %$f) : 'none', $refused);
diag sprintf('the longest call after the crash, by outcome: %s',
	join(', ', map { "$_: $longest{$_} ms" } sort keys %longest));
diag sprintf('IDs checked: %d (%d of the new leader); duplicates: %d before the confirmation, %d in all',
	scalar(@all), scalar(@after), $repeats_unconfirmed, LeafTest::count_repeats(\@all));

$pc->stop;
$zk->stop;

done_testing();
