
# Copyright (c) leaf contributors

# Snowflake worker IDs from an allocation database that pg_upgrade moved
# into a new cluster, then failed over.  After a promotion that was not
# synchronous (leaf.alloc_failover left at its default) the promoted
# server may have lost leases written on the former primary, so no worker
# ID is taken, not even a node's own row, until a lease and twice
# leaf.max_clock_drift_ms have passed since its new timeline was first
# seen.  pg_upgrade keeps leaf_worker_lease_timeline, but the new cluster
# starts on timeline 1: its own promotions come to timelines already
# recorded there, of the old cluster, and must be held back all the same.
#  1. The allocation database's standby promoted: node n, restarted on
#     it, waits (timeline 2 is new); this holds before any upgrade.
#  2. The promoted server stopped and pg_upgrade'd into a new cluster
#     (same major, same binaries), which keeps the table of timelines (1
#     and 2) and starts on timeline 1; n serves from it.
#  3. A standby of the upgraded cluster, running longer than the hold
#     (the hold after a server start does not apply), promoted: timeline
#     2 of the new cluster.  n, restarted on it, does not serve within the
#     hold, and says why; then it serves.
use strict;
use warnings;

use Cwd;
use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $t_start = Time::HiRes::time();

# heartbeat 500 ms: the lease (leaf_sf_margin_ms: two heartbeats and a
# second) is 2 s; the hold, the lease and twice the drift
my $lease_ms = 2 * 500 + 1000;
my $drift_ms = 1000;
my $hold_ms = $lease_ms + 2 * $drift_ms;

# the server's timeline, as leaf reads it
my $timeline_sql =
  q[SELECT ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::int];

my $old = LeafTest::new_node('old', { max_worker_processes => undef, init => [ allows_streaming => 1 ] },
	"listen_addresses = '127.0.0.1'");
$old->backup('old_base');
my $old_standby = LeafTest::new_node_from_backup('old_standby', $old, 'old_base',
	{ init => [ has_streaming => 1 ] });
my $user = $old->safe_psql('postgres', 'SELECT current_user');
my $old_sysid = $old->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');

sub alloc_at
{
	my ($alloc) = @_;
	my $port = $alloc->port;
	return "leaf.alloc_conninfo = 'host=127.0.0.1 port=$port dbname=postgres user=$user connect_timeout=2'\n";
}

my $n = LeafTest::new_node('n', { max_worker_processes => undef, start => 0 },
	"leaf.worker_id_source = 'database'",
	"leaf.snowflake_layout = '41+2+12'",
	"leaf.node_address = 'n.example:5432'",
	"leaf.heartbeat_interval = '500ms'",
	"leaf.max_clock_drift_ms = '${drift_ms}ms'",
	"leaf.wait_timeout = '1s'");
$n->append_conf('postgresql.conf', alloc_at($old));

# Starts n; waits until it serves (60 s at most).  Returns the seconds
# from the start until it was seen serving (undef if it did not), whether
# a reason that holds every worker ID back was seen, and the reasons seen.
sub start_and_watch
{
	my $t0 = Time::HiRes::time();
	$n->start;
	my ($took, $held) = (undef, 0);
	my @reasons;
	LeafTest::wait_until(
		sub {
			my ($ready, $reason) = split /\|/,
			  LeafTest::sf_status($n, "coalesce(ready, false), coalesce(not_ready_reason, '')"), 2;
			if ($ready eq 't')
			{
				$took = Time::HiRes::time() - $t0;
				return 1;
			}
			$held ||= $reason =~ /no worker ID is taken for/;
			push @reasons, $reason if $reason ne '' && (!@reasons || $reasons[-1] ne $reason);
			return 0;
		},
		'n to serve', 60);
	note sprintf('n served after %s s; reasons seen: %s',
		defined $took ? sprintf('%.2f', $took) : '(never)', join(' / ', @reasons) || '(none)');
	return ($took, $held, \@reasons);
}

my @before;

sub take_ids
{
	my ($what) = @_;
	my @ids = LeafTest::sf_ids($n, 2000);
	cmp_ok(LeafTest::min_of(@ids), '>', LeafTest::max_of(@before) // 0,
		"$what: n's IDs lie above those it issued before");
	push @before, @ids;
	return;
}

# ---------------------------------------------------------------------
# 1. the allocation database's standby promoted, before any upgrade
# ---------------------------------------------------------------------
$n->start;
$n->safe_psql('postgres', 'CREATE EXTENSION leaf');
ok(LeafTest::sf_wait_ready($n), '1: node n serves');
is(LeafTest::sf_status($n, 'worker_id'), '0', '1: ... with worker ID 0');
take_ids('1');

# a clean stop ends the lease; the standby has it; then a failover
$n->stop;
$old->wait_for_catchup($old_standby);
$old->stop;
$old_standby->promote;
ok($old_standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'1: the standby is promoted');
is($old_standby->safe_psql('postgres', $timeline_sql), '2', '1: ... to timeline 2');
$n->append_conf('postgresql.conf', alloc_at($old_standby));
my ($took, $held, $reasons) = start_and_watch();
ok(defined $took, '1: n serves from the promoted server');
ok($held || ($took // 0) >= $hold_ms / 1000,
	'1: ... after a hold (its own row too): "no worker ID is taken for", or not serving for the hold')
  or diag sprintf('served after %.2f s; reasons: %s', $took // -1, join(' / ', @$reasons));
is($old_standby->safe_psql('postgres',
	'SELECT count(*) FROM leaf_worker_lease_timeline WHERE timeline = 2'),
	'1', '1: timeline 2 is recorded in leaf_worker_lease_timeline');
take_ids('1, after the promotion');

# ---------------------------------------------------------------------
# 2. pg_upgrade into a new cluster of the same major
# ---------------------------------------------------------------------
$n->stop;
$old_standby->stop;
my $up = LeafTest::new_node('upgraded',
	{ max_worker_processes => undef, init => [ allows_streaming => 1 ], start => 0 },
	"listen_addresses = '127.0.0.1'");
my $bindir = $old_standby->config_data('--bindir');
{
	my $dir = PostgreSQL::Test::Utils::tempdir_short();
	my $cwd = getcwd();
	chdir $dir or die "chdir $dir: $!";
	my $t0 = Time::HiRes::time();
	command_ok(
		[
			'pg_upgrade', '--no-sync',
			'-b', $bindir, '-B', $bindir,
			'-d', $old_standby->data_dir, '-D', $up->data_dir,
			'-p', PostgreSQL::Test::Cluster::get_free_port(),
			'-P', PostgreSQL::Test::Cluster::get_free_port(),
			'-s', $dir
		],
		'2: pg_upgrade of the promoted allocation database into a new cluster');
	note sprintf('pg_upgrade took %.1f s', Time::HiRes::time() - $t0);
	chdir $cwd or die "chdir $cwd: $!";
}
$up->start;
is($up->safe_psql('postgres', $timeline_sql), '1', '2: the upgraded cluster is on timeline 1');
isnt($up->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	$old_sysid, '2: ... of a system of its own');
is($up->safe_psql('postgres', 'SELECT max(timeline) FROM leaf_worker_lease_timeline'),
	'2', '2: leaf_worker_lease_timeline keeps timeline 2 of the old cluster');
$n->append_conf('postgresql.conf', alloc_at($up));
($took) = start_and_watch();
ok(defined $took, '2: n serves from the upgraded cluster');
is(LeafTest::sf_status($n, 'worker_id'), '0', '2: ... with worker ID 0, its row');
take_ids('2');

# ---------------------------------------------------------------------
# 3. the upgraded cluster's standby promoted: timeline 2 of the new one
# ---------------------------------------------------------------------
$up->backup('up_base');
my $up_standby = LeafTest::new_node_from_backup('upgraded_standby', $up, 'up_base',
	{ init => [ has_streaming => 1 ] });
# running longer than the hold: a hold after its start explains no wait
ok( $up_standby->poll_query_until('postgres',
		"SELECT pg_postmaster_start_time() < clock_timestamp() - interval '$hold_ms ms' - interval '1 s'"),
	'3: the standby of the upgraded cluster has run longer than the hold');
take_ids('3, before the promotion');
$n->stop;
$up->wait_for_catchup($up_standby);
$up_standby->promote;
ok($up_standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'3: the standby is promoted (not synchronous)');
is($up_standby->safe_psql('postgres', $timeline_sql), '2', '3: ... to timeline 2');
is($up_standby->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	$up->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	'3: ... of the upgraded cluster');
$up->stop;
$n->append_conf('postgresql.conf', alloc_at($up_standby));
($took, $held, $reasons) = start_and_watch();
cmp_ok($took // 1e9, '>=', $hold_ms / 1000 - 0.05,
	sprintf('3: n does not serve within the hold (%d ms) after the promotion of the upgraded cluster', $hold_ms))
  or diag sprintf('n served after %.2f s; reasons seen: %s', $took, join(' / ', @$reasons) || '(none)');
ok($held, '3: ... and says that no worker ID is taken for a while')
  or diag 'reasons seen: ' . (join(' / ', @$reasons) || '(none)');
ok(defined $took, '3: then n serves');
take_ids('3, after the promotion') if defined $took;

$n->stop;
$up_standby->stop;
note sprintf('the file took %.0f s', Time::HiRes::time() - $t_start);
done_testing();
