
# Copyright (c) leaf contributors

=pod

=head1 NAME

LeafChaos - a whole leaf fleet under load and random faults

=head1 SYNOPSIS

  use LeafChaos;
  my $r = LeafChaos::run(seed => 1, seconds => 60);
  # $r->{summary}{duplicates}, $r->{table}, $r->{dir}, ...

=head1 DESCRIPTION

Starts, on the loopback interface, an allocation primary with a
synchronous standby, three shards drawing segments from it, and a 3-node
ZooKeeper ensemble that hands out the shards' snowflake worker IDs.  With
worker_ids => 'database' (make chaos CHAOS_WORKER_IDS=database) no
ZooKeeper is started: the shards lease their worker IDs as rows of
leaf_worker_lease in the allocation database
(leaf.worker_id_source = 'database'), the faults of ZooKeeper are left
out of the schedule, and faults on those rows take their place.  Each
shard reaches the allocation servers and the ZooKeeper servers through
loopback proxies of its own (LeafProxy.pm), which the partition faults
cut; the servers reach each other, and the clients the shards, directly.
Four clients per shard (test/chaos/client.pl: two calling segment mode,
one snowflake mode, one both, with rolled-back transactions) write down
every ID they receive.  Meanwhile faults are injected on a schedule
drawn from the seed; every kind comes once per round, in an order drawn
from the seed.  At the end every server is stopped and test/chaos/check.pl
checks every ID.

The same seed gives the same schedule of faults (kinds, targets,
parameters, and the pauses between them); how long each fault takes, and
so when the next one starts, depends on the machine.

=cut

package LeafChaos;

use strict;
use warnings;

use Carp;
use File::Basename;
use File::Copy;
use File::Path qw(make_path);
use POSIX ();
use Time::HiRes qw(time usleep sleep);
use IPC::Run ();

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More ();
use LeafTest;
use LeafZK;
use LeafProxy;

my $here = dirname(__FILE__);

our @KINDS = qw(
  kill9_allocator kill9_snowflake_worker kill9_backend
  terminate_workers cancel_workers
  shard_immediate_restart alloc_failover
  zk_stop_follower zk_stop_leader zk_session_expiry
  zk_restored_empty zk_nodes_deleted
  sync_commit_off_shard sync_commit_off_alloc
  clock_step_small clock_step_large
  step_change tag_recreated
  hand_set_worker_id clock_step_forward locked_alloc_row
  partition_alloc partition_zk_one partition_zk_all partition_alloc_zk
);

# With worker IDs from the allocation database: no ZooKeeper faults, and
# faults on the rows of leaf_worker_lease instead
our @DB_KINDS = (
	(grep { !/zk/ } @KINDS),
	qw(lease_row_deleted lease_rows_truncated lease_expiry_frozen_worker));

# The shards' leaf.heartbeat_interval is 500 ms, so a lease in the
# allocation database is 2 s (2 x heartbeat + 1 s); leaf.max_clock_drift_ms
# is left at its default, 5 s
my $LEASE_S = 2;
my $DRIFT_S = 5;

# A partition lasts 8 to 13 s: longer than the ZooKeeper session (6 s),
# the lease (2 s), a lease and the drift after it (7 s, when another node
# may take the worker ID over) and the shards' leaf.alloc_timeout (3 s)
my $CUT_MIN_S = 8;
my $CUT_SPAN_S = 6;

# How a partition cuts the shard's links (LeafProxy's modes): refused and
# reset, half-open (nothing passes, nothing is reset), or one-way
my @CUT_VARIANTS = (
	[ reset => 'reset' ],
	[ blackhole => 'half-open' ],
	[ up_only => 'one-way, shard to server only' ],
	[ down_only => 'one-way, server to shard only' ],
);

my @TAGS = (
	[ 'big', 1000 ],
	[ 'mid', 100 ],
	[ 'small', 5 ],
	[ 'phoenix', 10 ],
);

sub ms { return int(time() * 1000); }

# ---------- the schedule ----------

# A list of faults: { at => seconds into the run, kind, shard, p }.
sub schedule
{
	my ($seed, $seconds, $every, $kinds) = @_;
	$kinds //= \@KINDS;
	srand($seed);
	my @s;
	my $t = 3;
	my @round;
	while ($t < $seconds - 5)
	{
		if (!@round)
		{
			@round = @$kinds;
			for (my $i = $#round; $i > 0; $i--)
			{
				my $j = int(rand($i + 1));
				@round[ $i, $j ] = @round[ $j, $i ];
			}
		}
		push @s, { at => $t, kind => shift(@round), shard => 1 + int(rand(3)), p => rand() };
		$t += $every * (0.5 + rand());
	}
	return @s;
}

# ---------- topology ----------

sub alloc_conf
{
	return qq[
listen_addresses = '127.0.0.1'
max_connections = 30
wal_log_hints = on
log_statement = none
];
}

sub start_fleet
{
	my ($self) = @_;
	my $db_ids = $self->{worker_ids} eq 'database';

	if (!$db_ids)
	{
		$self->{zk} = LeafZK->new(nodes => 3);
		$self->seed_zk($ENV{CHAOS_ZK_TAKEN}) if $ENV{CHAOS_ZK_TAKEN};
	}

	# leaf is not preloaded on the allocation database
	my $a = LeafTest::new_node('chaos_alloc1',
		{ preload => 0, max_worker_processes => undef, init => [ allows_streaming => 1 ] },
		alloc_conf());
	$a->safe_psql('postgres',
		"SELECT leaf_segment_create('$_->[0]', $_->[1], 1, 'chaos')")
	  for @TAGS;
	$a->backup('base1');
	my $b = LeafTest::new_node_from_backup('chaos_alloc2', $a, 'base1',
		{ init => [ has_streaming => 1 ] });
	# any standby is the synchronous one; set only now that one is there
	$_->append_conf('postgresql.conf', "synchronous_standby_names = '*'\n") for ($a, $b);
	$_->reload for ($a, $b);
	$self->{alloc} = [ $a, $b ];    # [primary, standby]
	$self->{rebuilds} = 1;
	$a->poll_query_until('postgres',
		q[SELECT count(*) > 0 FROM pg_stat_replication WHERE sync_state = 'sync'])
	  or croak 'the allocation standby did not become synchronous';

	my $user = $a->safe_psql('postgres', 'SELECT current_user');
	$self->{alloc_ports} = [ $a->port, $b->port ];
	$self->{alloc_user} = $user;

	for my $i (1 .. 3)
	{
		# the shard reaches both allocation servers and every ZooKeeper
		# server through proxies of its own, which a partition cuts; the
		# clients reach it directly
		my $px = $self->start_proxies($i);
		my $conninfo = sprintf(
			'host=127.0.0.1,127.0.0.1 port=%d,%d dbname=postgres user=%s '
			  . 'target_session_attrs=read-write connect_timeout=2',
			(map { $_->port } @{ $px->{alloc} }), $user);

		# where the worker IDs come from: ZooKeeper, or the allocation
		# database that alloc_conninfo names (the role is the superuser that
		# created the extension there, so it may use leaf_worker_lease)
		my $id_conf = $db_ids
		  ? qq[leaf.worker_id_source = 'database'\n]
		  : sprintf(qq[leaf.zk_hosts = '%s'\nleaf.zk_root = '/leaf/chaos'\n],
			join(',', map { '127.0.0.1:' . $_->port } @{ $px->{zk} }));
		# its node address names its port: the rest after it
		my $s = LeafTest::new_node("chaos_shard$i", { start => 0 }, qq[
max_connections = 40
leaf.alloc_conninfo = '$conninfo'
leaf.alloc_timeout = '3s'
leaf.alloc_failover = 'synchronous'
leaf.segment_duration = '1s'
leaf.wait_timeout = '5s'
${id_conf}]);
		$s->append_conf('postgresql.conf', qq[leaf.node_address = 'shard$i.chaos:@{[ $s->port ]}'
leaf.heartbeat_interval = '500ms'
leaf.snowflake_layout = '@{[ $ENV{CHAOS_LAYOUT} // 'default' ]}'
restart_after_crash = on
log_statement = none
log_min_messages = warning
include_if_exists = 'leaf_chaos.conf'
]);
		$s->start;
		$s->safe_psql('postgres', 'CREATE EXTENSION leaf');
		push @{ $self->{shards} }, $s;
	}
	for my $s (@{ $self->{shards} })
	{
		$s->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status')
		  or croak $s->name . ': snowflake mode did not become ready';
		$s->safe_psql('postgres', "SELECT leaf_segment_nextval('big')");
	}
	return;
}

# The proxies of shard $i: one per allocation server (in front of the port
# it keeps through failovers) and one per ZooKeeper server.
sub start_proxies
{
	my ($self, $i) = @_;
	my %px;
	make_path("$self->{dir}/proxies");
	my $n = 0;
	for my $port (@{ $self->{alloc_ports} })
	{
		$n++;
		push @{ $px{alloc} }, LeafProxy->start(name => "shard$i-alloc$n", upstream => $port,
			pg_user => $self->{alloc_user},
			log => "$self->{dir}/proxies/shard$i-alloc$n.log");
	}
	for my $z (@{ $self->{zk} ? $self->{zk}{servers} : [] })
	{
		push @{ $px{zk} }, LeafProxy->start(name => "shard$i-zk$z->{id}",
			upstream => $z->{client_port},
			log => "$self->{dir}/proxies/shard$i-zk$z->{id}.log");
	}
	$self->{proxies}[$i] = \%px;
	return \%px;
}

# CHAOS_ZK_TAKEN=N: N forever nodes of a retired address in the fleet's
# root before the shards start (with the root's layout node), so that
# ZooKeeper gives the shards worker IDs from N on: past 1023 under a
# layout with more worker bits.  They never bounded their leases, so they
# are never taken over.  The ensemble's data is then saved: the fault
# that restores ZooKeeper restores that snapshot instead of an empty one,
# and the fault that deletes forever nodes deletes the shards' own only,
# so that the numbering stays above N for the whole run.
sub seed_zk
{
	my ($self, $taken) = @_;
	my $layout = $ENV{CHAOS_LAYOUT} // 'default';
	my $wbits = $layout eq 'default' ? 10 : $layout eq 'js53' ? 6
	  : $layout =~ /^\d+\+(\d+)\+\d+/ ? $1 : 10;
	croak "CHAOS_ZK_TAKEN must be a number below 2^worker bits - 64, not '$taken'"
	  unless $taken =~ /^\d+$/ && $taken < (1 << $wbits) - 64;
	my $zk = $self->{zk};
	my $cmds = join('', map { "create $_\n" }
		  qw(/leaf /leaf/chaos /leaf/chaos/forever /leaf/chaos/temporary))
	  . "create /leaf/chaos/layout $layout\n";
	$cmds .= qq[create -s /leaf/chaos/forever/retired.chaos:1- {"addr":"retired.chaos:1","ts":1,"hwm":1}\n]
	  for 1 .. $taken;
	my $out = $zk->cli_script($cmds . "stat /leaf/chaos/forever\n");
	my ($children) = $out =~ /numChildren = (\d+)/;
	croak "seeding ZooKeeper with $taken forever nodes failed:\n$out"
	  unless defined $children && $children == $taken;
	my @ids = map { $_->{id} } @{ $zk->{servers} };
	$zk->stop_node($_) for @ids;
	$zk->save_node($_, 'seeded') for @ids;
	$zk->start_node($_, 1) for @ids;
	$zk->wait_ready($_) for @ids;
	$self->{zk_seeded} = $taken;
	Test::More::diag("ZooKeeper seeded with $taken forever nodes of a retired address");
	return;
}

# ---------- helpers ----------

# safe_psql that never dies: (output, error)
sub try_psql
{
	my ($node, $sql, $timeout) = @_;
	my ($out, $err) = ('', '');
	my $rc = eval {
		$node->psql('postgres', $sql,
			stdout => \$out, stderr => \$err,
			timeout => $timeout // 20, on_error_die => 0);
	};
	return ($out, $@ ? "$@" : ($rc ? $err || "exit $rc" : ''));
}

# pids of the postmaster's children whose process title matches $re
sub child_pids { return LeafZK::child_pids(@_); }

sub wait_accepting
{
	my ($node, $seconds) = @_;
	my $deadline = time() + ($seconds // 60);
	while (time() < $deadline)
	{
		my ($out, $err) = try_psql($node, 'SELECT 1', 5);
		return 1 if $out eq '1';
		sleep 0.2;
	}
	return 0;
}

sub current_primary { return $_[0]{alloc}[0]; }

# poll_query_until with a timeout of our own; true once $sql returns 't'
sub poll
{
	my ($node, $sql, $seconds) = @_;
	my $deadline = time() + $seconds;
	while (time() < $deadline)
	{
		my ($out) = try_psql($node, $sql, 5);
		return 1 if $out eq 't';
		sleep 0.2;
	}
	return 0;
}

# ---------- faults ----------

sub inject
{
	my ($self, $f) = @_;
	my $k = $f->{kind};
	my $s = $self->{shards}[ $f->{shard} - 1 ];
	my $target = 'shard' . $f->{shard};
	my $outcome = 'done';

	if ($k eq 'kill9_allocator' || $k eq 'kill9_snowflake_worker' || $k eq 'kill9_backend')
	{
		my @pids;
		if ($k eq 'kill9_backend')
		{
			my ($out) = try_psql($s,
				q[SELECT pid FROM pg_stat_activity WHERE application_name = 'chaos']);
			@pids = grep { /^\d+$/ } split /\n/, $out;
		}
		else
		{
			@pids = child_pids($s,
				$k eq 'kill9_allocator' ? qr/leaf allocator/ : qr/leaf snowflake worker/);
		}
		if (@pids)
		{
			my $pid = $pids[ int($f->{p} * @pids) ];
			kill 'KILL', $pid;
			$outcome = "killed $pid";
			# the postmaster restarts every process after a child's crash
			wait_accepting($s, 60) or $outcome .= ', shard did not come back';
		}
		else { $outcome = 'no such process' }
	}
	elsif ($k eq 'terminate_workers' || $k eq 'cancel_workers')
	{
		my $fn = $k eq 'terminate_workers' ? 'pg_terminate_backend' : 'pg_cancel_backend';
		my @pids = (child_pids($s, qr/leaf allocator/), child_pids($s, qr/leaf snowflake worker/));
		my ($out, $err) = try_psql($s,
			join(';', map { "SELECT $fn($_)" } @pids) || 'SELECT 1');
		$outcome = @pids ? "$fn(" . join(',', @pids) . ')' : 'no workers';
	}
	elsif ($k eq 'shard_immediate_restart')
	{
		$s->stop('immediate', fail_ok => 1);
		eval { $s->start };
		$outcome = $@ ? "start failed: $@" : 'restarted';
		wait_accepting($s, 60);
	}
	elsif ($k eq 'alloc_failover')
	{
		$target = 'all';
		$outcome = $self->alloc_failover;
	}
	elsif ($k eq 'zk_stop_follower' || $k eq 'zk_stop_leader')
	{
		$target = 'all';
		my $zk = $self->{zk};
		$self->zk_restart_all;
		my @ids = map { $_->{id} } @{ $zk->{servers} };
		my ($leader) = grep { $zk->mode($_) eq 'leader' } @ids;
		my @followers = grep { !defined $leader || $_ != $leader } @ids;
		my $id = $k eq 'zk_stop_leader' && defined $leader ? $leader
		  : $followers[ int($f->{p} * @followers) ];
		$zk->stop_node($id);
		$self->{zk_down}{$id} = time() + 2 + 4 * $f->{p};
		$outcome = "stopped ZooKeeper server $id" . (defined $leader && $id == $leader ? ' (leader)' : '');
	}
	elsif ($k eq 'zk_restored_empty')
	{
		# the ensemble loses everything, as a restore from an empty (or
		# old) snapshot would: every server stopped, wiped, started again
		$target = 'all';
		my $zk = $self->{zk};
		$self->zk_restart_all;
		my @ids = map { $_->{id} } @{ $zk->{servers} };
		$zk->stop_node($_) for @ids;
		if ($self->{zk_seeded})
		{
			$zk->restore_node($_, 'seeded') for @ids;
			$outcome = "all ZooKeeper servers restored to the snapshot of $self->{zk_seeded} retired nodes and started again";
		}
		else
		{
			$zk->wipe_node($_) for @ids;
			$outcome = 'all ZooKeeper servers wiped and started again';
		}
		$zk->start_node($_, 1) for @ids;
		# all three elect at once, from empty data: allow several rounds
		$zk->wait_ready($_, 180) for @ids;
	}
	elsif ($k eq 'zk_nodes_deleted')
	{
		# an operator's cleanup while the nodes run
		$target = 'all';
		$self->zk_restart_all;
		my $out;
		if ($self->{zk_seeded})
		{
			# the shards' own, not the retired ones
			my ($list) = $self->{zk}->cli('ls', '/leaf/chaos/forever') =~ /^\[(.*)\]\s*$/m;
			my @mine = grep { /^shard/ } split /,\s*/, $list // '';
			$out = $self->{zk}->cli_script(join('', map { "delete /leaf/chaos/forever/$_\n" } @mine));
			$outcome = 'deleted the shards\' forever nodes (' . join(' ', @mine) . ')';
			# (the client may log an EndOfStreamException as it quits)
			$outcome .= ": $1" if $out =~ /(KeeperErrorCode[^\n]*)/;
		}
		else
		{
			$out = $self->{zk}->cli('deleteall', '/leaf/chaos/forever');
			$outcome = 'deleteall /leaf/chaos/forever';
			$outcome .= ': ' . (($out =~ /(\S*Exception[^\n]*)/)[0]) if $out =~ /Exception/;
		}
	}
	elsif ($k eq 'zk_session_expiry')
	{
		# freeze the snowflake worker past its 6 s session timeout
		my ($pid) = child_pids($s, qr/leaf snowflake worker/);
		if ($pid)
		{
			kill 'STOP', $pid;
			push @{ $self->{undo} }, { at => time() + 8, what => sub { kill 'CONT', $pid; 1 } };
			$outcome = "froze $pid for 8 s";
		}
		else { $outcome = 'no snowflake worker' }
	}
	elsif ($k eq 'lease_row_deleted')
	{
		# an operator's cleanup of one shard's row while it serves: the
		# row it renewed last (a hand-set row of an earlier fault is not
		# renewed any more)
		my $addr = "shard$f->{shard}.chaos:" . $s->port;
		my ($out, $err) = try_psql($self->current_primary, qq[
DELETE FROM leaf_worker_lease WHERE worker_id = (
  SELECT worker_id FROM leaf_worker_lease WHERE holder_address = '$addr'
  ORDER BY renewed_at DESC NULLS LAST LIMIT 1)
RETURNING worker_id, hwm_ms]);
		$err =~ s/\s+/ /g;
		$outcome = $err ? "failed: $err"
		  : $out =~ /^(\d+)\|(\d+)$/m ? "deleted the row of worker ID $1 (mark $2)"
		  : 'no row';
	}
	elsif ($k eq 'lease_rows_truncated')
	{
		# every lease lost at once, as a restore from a dump without them
		$target = 'all';
		my ($out, $err) = try_psql($self->current_primary,
			q[SELECT string_agg(worker_id || '=' || holder_address, ' ' ORDER BY worker_id) FROM leaf_worker_lease; TRUNCATE leaf_worker_lease]);
		$err =~ s/\s+/ /g;
		$outcome = $err ? "failed: $err" : "TRUNCATE leaf_worker_lease (held: $out)";
	}
	elsif ($k eq 'lease_expiry_frozen_worker')
	{
		# freeze the snowflake worker past its lease and
		# leaf.max_clock_drift_ms after it, when another node may take
		# its worker ID over
		my $secs = $LEASE_S + $DRIFT_S + 1 + int(4 * $f->{p});
		my ($pid) = child_pids($s, qr/leaf snowflake worker/);
		if ($pid)
		{
			kill 'STOP', $pid;
			push @{ $self->{undo} }, { at => time() + $secs, what => sub { kill 'CONT', $pid; 1 } };
			$outcome = "froze $pid for $secs s";
		}
		else { $outcome = 'no snowflake worker' }
	}
	elsif ($k eq 'sync_commit_off_shard' || $k eq 'sync_commit_off_alloc')
	{
		my @nodes = $k eq 'sync_commit_off_shard' ? ($s) : @{ $self->{alloc} };
		$target = 'all' if $k eq 'sync_commit_off_alloc';
		for my $n (@nodes)
		{
			try_psql($n, q[ALTER SYSTEM SET synchronous_commit = off; SELECT pg_reload_conf()]);
		}
		push @{ $self->{undo} }, {
			at => time() + 3 + 5 * $f->{p},
			what => sub {
				my $ok = 1;
				for my $n ($k eq 'sync_commit_off_shard' ? ($s) : @{ $self->{alloc} })
				{
					my ($o, $e) = try_psql($n, q[ALTER SYSTEM RESET synchronous_commit; SELECT pg_reload_conf()]);
					$ok = 0 if $e;
				}
				return $ok;
			} };
		$outcome = 'synchronous_commit = off, reloaded';
	}
	elsif ($k eq 'clock_step_small' || $k eq 'clock_step_large')
	{
		my $off = $k eq 'clock_step_small' ? 1 + int(4 * $f->{p}) : 20 + int(2000 * $f->{p});
		my $sql = "\\set VERBOSITY verbose\nSET leaf.test_clock_offset_ms = -$off;\n"
		  . join('', map { "SELECT leaf_snowflake();\n" } 1 .. 20);
		my $t0 = ms();
		my ($out, $err) = try_psql($s, $sql);
		my @ids = grep { /^\d+$/ } split /\n/, $out;
		my $t = ms();
		open my $fh, '>>', "$self->{dir}/ids/shard$f->{shard}-clock.ids" or die $!;
		print $fh "$t0 $t ~sf $_\n" for @ids;
		if ($err =~ /ERROR:\s+([0-9A-Z]{5}):/) { print $fh "$t0 $t ERR $1 clock step\n" }
		elsif ($err) { $err =~ s/\s+/ /g; print $fh "$t0 $t ERR psql $err\n" }
		close $fh;
		$outcome = sprintf('offset -%d ms: %d IDs%s', $off, scalar @ids,
			$err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? ", then $1" : $err ? ", then: $err" : '');
	}
	elsif ($k eq 'step_change')
	{
		$target = 'all';
		my $tag = $TAGS[ int($f->{p} * 3) ][0];
		my $step = (5, 50, 500, 5000)[ int($f->{p} * 97) % 4 ];
		my ($o, $e) = try_psql($self->current_primary,
			"UPDATE leaf_alloc SET step = $step WHERE biz_tag = '$tag'");
		$outcome = $e ? "failed: $e" : "$tag step $step";
	}
	elsif ($k eq 'tag_recreated')
	{
		$target = 'all';
		my $p = $self->current_primary;
		my ($o1, $e1) = try_psql($p, q[DELETE FROM leaf_alloc WHERE biz_tag = 'phoenix']);
		sleep 0.5;
		my ($o2, $e2) = try_psql($p,
			q[INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('phoenix', 1, 10) ON CONFLICT DO NOTHING]);
		$outcome = 'deleted' . ($e1 ? " (failed: $e1)" : '')
		  . ', inserted again at max_id 1' . ($e2 ? " (refused: $e2)" : '');
		$outcome =~ s/\s+/ /g;
	}
	elsif ($k eq 'hand_set_worker_id')
	{
		# a shard restarted with leaf.worker_id set by hand: either to the
		# worker ID ZooKeeper (or the allocation database) gave another
		# shard (must be refused), or to
		# one of its own, after which it crashes and restarts with a
		# damaged state file (must be refused: the marks are lost)
		my $other = $self->{shards}[ $f->{shard} % 3 ];
		my ($wid) = try_psql($other, 'SELECT worker_id FROM leaf_snowflake_status');
		my $damage = $f->{p} >= 0.5 || $wid !~ /^\d+$/;
		# its own: near the top of the layout's worker IDs, which
		# ZooKeeper's numbering (or the allocation database's, lowest
		# free first) does not reach in a run
		my ($top) = try_psql($other, 'SELECT max_worker_id FROM leaf_snowflake_layout()');
		$top = 1023 unless defined $top && $top =~ /^\d+$/;
		$wid = $top - 13 + $f->{shard} if $damage;
		$self->shard_conf($s, "leaf.worker_id = $wid\n");
		my $err = $self->restart_shard($s);
		$outcome = $damage ? "leaf.worker_id = $wid (its own)" : "leaf.worker_id = $wid (another shard's)";
		if ($damage && !$err)
		{
			poll($s, 'SELECT ready FROM leaf_snowflake_status', 10);
			sleep 1;
			kill 'CONT', $_ for child_pids($s, qr/./);
			$s->stop('immediate', fail_ok => 1);
			open my $fh, '>', $s->data_dir . '/leaf_snowflake.state' or die $!;
			print $fh join('', map { chr(int(rand(256))) } 1 .. 200);
			close $fh;
			eval { $s->start };
			$err = $@;
			$outcome .= ', crashed, state file overwritten with random bytes';
		}
		$outcome .= ", start failed: $err" if $err;
		my ($r) = try_psql($s, 'SELECT ready FROM leaf_snowflake_status');
		$outcome .= $r eq 'f' ? ', refused' : $r eq 't' ? ', SERVING' : ", status: $r";
		if ($r eq 'f' && $self->{worker_ids} eq 'database')
		{
			# not ready need not mean refused here: a worker ID whose row
			# was deleted or truncated is free, and is taken, to be used
			# after the wait of a new holder
			my ($why) = try_psql($s, 'SELECT not_ready_reason FROM leaf_snowflake_status');
			$outcome .= $why =~ /holds worker ID \d+ in the allocation database/ ? ' (held by another node)'
			  : $why =~ /is damaged/ ? ' (damaged state file)'
			  : $why =~ /^new worker ID \d+ is used only from/ ? ' (taken: it had no row; used after the wait of a new holder)'
			  : " ($why)";
		}
		push @{ $self->{undo} }, {
			at => time() + 2 + 3 * $f->{p},
			what => sub {
				$self->shard_conf($s, '');
				kill 'CONT', $_ for child_pids($s, qr/./);
				$s->stop('immediate', fail_ok => 1);
				# the way out of a damaged file, as documented
				unlink $s->data_dir . '/leaf_snowflake.state' if $damage;
				eval { $s->start };
				return 1;
			} };
	}
	elsif ($k eq 'clock_step_forward')
	{
		# every process of the shard with its clock 2 to 8 s ahead, then
		# set right again: it waits for its own mark
		my $off = 2000 + int(6000 * $f->{p});
		$self->shard_conf($s, "leaf.test_node_clock_offset_ms = $off\n");
		my $err = $self->restart_shard($s);
		$outcome = "clock +$off ms" . ($err ? ", start failed: $err" : '');
		push @{ $self->{undo} }, {
			at => time() + 2 + 3 * $f->{p},
			what => sub {
				$self->shard_conf($s, '');
				$self->restart_shard($s);
				return 1;
			} };
	}
	elsif ($k eq 'locked_alloc_row')
	{
		# a long transaction holds one tag's row on the allocation primary
		$target = 'all';
		my $tag = $TAGS[ int($f->{p} * @TAGS) ][0];
		my $secs = 3 + int(5 * $f->{p});
		my $p = $self->current_primary;
		my $h = IPC::Run::start(
			[ $p->installed_command('psql'), '-XAtq', '-h', $p->host, '-p', $p->port,
				'-d', 'postgres', '-c',
				"BEGIN; SELECT 1 FROM leaf_alloc WHERE biz_tag = '$tag' FOR UPDATE; SELECT pg_sleep($secs); COMMIT" ],
			'<', \undef, '>', '/dev/null', '2>', '/dev/null');
		push @{ $self->{undo} }, {
			at => time() + $secs + 1,
			what => sub { eval { $h->finish }; eval { $h->kill_kill }; 1 } };
		$outcome = "row of '$tag' locked for $secs s";
	}
	elsif ($k =~ /^partition_/)
	{
		$outcome = $self->partition($f, $k);
	}
	else { croak "unknown fault $k" }

	return ($target, $outcome);
}

# A partition of a shard from the allocation database (both servers),
# from one ZooKeeper server (the one its session is on, if any), from all
# of them, or from both; the variant and the length drawn from p.  Its
# clients still reach it.  The proxies go back to pass by themselves when
# the time is up, however long the fault being injected then takes; a
# later partition of the same proxy takes it over.  Each partition is a
# line of cuts.tsv once over: start_ms end_ms kind target variant proxies.
sub partition
{
	my ($self, $f, $k) = @_;
	my $px = $self->{proxies}[ $f->{shard} ];
	my $v = int($f->{p} * @CUT_VARIANTS);
	my $rest = $f->{p} * @CUT_VARIANTS - $v;    # in [0, 1), for the rest
	my ($mode, $what) = @{ $CUT_VARIANTS[$v] };
	my $secs = $CUT_MIN_S + int($CUT_SPAN_S * $rest);
	my @cut;
	push @cut, @{ $px->{alloc} } if $k eq 'partition_alloc' || $k eq 'partition_alloc_zk';
	push @cut, @{ $px->{zk} } if $k eq 'partition_zk_all' || $k eq 'partition_alloc_zk';
	if ($k eq 'partition_zk_one')
	{
		my @zk = @{ $px->{zk} };
		my @busy = grep { $_->connections > 0 } @zk;
		@zk = @busy if @busy;
		push @cut, $zk[ int($rest * 997) % @zk ];
	}
	my $id = ++$self->{cuts};
	my $start = ms();
	for my $p (@cut)
	{
		my $ok = eval { $p->set($mode, $secs); 1 };
		return 'proxy ' . $p->name . " failed: $@" unless $ok;
		$self->{cut_by}{ $p->name } = $id;
	}
	my $end = ms() + 1000 * $secs;
	my $names = join(',', map { $_->name =~ s/^shard\d+-//r } @cut);
	push @{ $self->{undo} }, {
		at => $end / 1000,
		what => sub {
			# (at the end of the run, perhaps before the time is up)
			my @mine = grep { ($self->{cut_by}{ $_->name } // 0) == $id } @cut;
			if (ms() < $end)
			{
				eval { $_->set('pass') } for @mine;
				$end = ms();
			}
			delete $self->{cut_by}{ $_->name } for @mine;
			open my $c, '>>', "$self->{dir}/cuts.tsv" or die $!;
			printf $c "%d\t%d\t%s\tshard%d\t%s\t%s\n", $start, $end, $k,
			  $f->{shard}, $mode, $names . (@mine < @cut ? ' (in part taken over by a later partition)' : '');
			close $c;
			return 1;
		} };
	return "cut from $names: $what, for $secs s";
}

# Stop a shard at once and start it again.  Its processes are first let
# go on, should an earlier fault have frozen one (a frozen process would
# hold the stop up).
sub restart_shard
{
	my ($self, $s) = @_;
	kill 'CONT', $_ for child_pids($s, qr/./);
	$s->stop('immediate', fail_ok => 1);
	eval { $s->start };
	return $@;
}

# Settings of a shard for a fault (an included file; '' for none).
sub shard_conf
{
	my ($self, $s, $conf) = @_;
	open my $fh, '>', $s->data_dir . '/leaf_chaos.conf' or die $!;
	print $fh $conf;
	close $fh;
	return;
}

# Start the ZooKeeper servers that are due (or all of them).
sub zk_restart_all
{
	my ($self, $only_due) = @_;
	for my $id (keys %{ $self->{zk_down} })
	{
		next if $only_due && $self->{zk_down}{$id} > time();
		eval { $self->{zk}->start_node($id) };
		delete $self->{zk_down}{$id} unless $@;
	}
	return;
}

# Immediate stop of the allocation primary, promotion of the standby,
# and the old primary rebuilt as the new standby on its old port.
sub alloc_failover
{
	my ($self) = @_;
	my ($old, $new) = @{ $self->{alloc} };

	$old->stop('immediate', fail_ok => 1);
	eval { $new->promote };
	return "promotion failed: $@" if $@;

	my $n = ++$self->{rebuilds};
	my $bk = "fo$n";
	eval { $new->backup($bk) };
	return "backup of the new primary failed: $@" if $@;
	copy($old->logfile, "$self->{dir}/logs/" . $old->name . '.log');
	my $r = LeafTest::new_node_from_backup("chaos_alloc_r$n", $new, $bk,
		{ port => $old->port, init => [ has_streaming => 1 ] });
	push @{ $self->{retired} }, $old;
	$self->{alloc} = [ $new, $r ];
	my $ok = poll($new, q[SELECT count(*) > 0 FROM pg_stat_replication WHERE sync_state = 'sync'], 30);
	return sprintf('%s promoted, %s rebuilt as its standby%s',
		$new->name, $r->name, $ok ? '' : ' (not synchronous in time)');
}

# ---------- the run ----------

sub run
{
	my (%o) = @_;
	my $self = bless {
		seed => $o{seed} // 1,
		seconds => $o{seconds} // 60,
		every => $o{every} // 3,
		settle => $o{settle} // 20,
		worker_ids => $o{worker_ids} || 'zookeeper',
		clients => $o{clients} // [qw(segment segment snowflake mixed)],
		undo => [],
		zk_down => {},
	}, __PACKAGE__;
	croak "worker_ids must be 'zookeeper' or 'database', not '$self->{worker_ids}'"
	  unless $self->{worker_ids} =~ /^(zookeeper|database)$/;
	croak 'CHAOS_ZK_TAKEN applies to worker IDs from ZooKeeper only'
	  if $self->{worker_ids} eq 'database' && $ENV{CHAOS_ZK_TAKEN};
	# kept after the run, next to the servers' logs
	$self->{dir} = $o{dir}
	  // "$PostgreSQL::Test::Utils::tmp_check/chaos-$self->{seed}";
	make_path("$self->{dir}/ids", "$self->{dir}/logs");

	my @sched = schedule($self->{seed}, $self->{seconds}, $self->{every},
		$self->{worker_ids} eq 'database' ? \@DB_KINDS : \@KINDS);
	$self->start_fleet;

	# clients: they go on after the last fault is undone, for the settle
	# time, so that the recovery from every fault is seen however long the
	# last one took; the stop file ends them, the hard limit is a backstop
	my $t0 = time();
	my $until = $t0 + $self->{seconds};
	my $stop_file = "$self->{dir}/stop";
	unlink $stop_file;
	my @kids;
	for my $i (1 .. 3)
	{
		my $s = $self->{shards}[ $i - 1 ];
		for my $c (1 .. @{ $self->{clients} })
		{
			my $pid = fork();
			croak "fork: $!" unless defined $pid;
			if ($pid == 0)
			{
				exec($^X, "$here/client.pl",
					'--host', $s->host, '--port', $s->port,
					'--shard', $i, '--client', $c, '--seed', $self->{seed},
					'--until', $until + $self->{settle} + 600,
					'--stop-file', $stop_file,
					'--mode', $self->{clients}[ $c - 1 ],
					'--out', "$self->{dir}/ids/shard$i-client$c.ids")
				  or POSIX::_exit(127);
			}
			push @kids, $pid;
		}
	}

	# faults
	open my $fl, '>', "$self->{dir}/faults.tsv" or die $!;
	$fl->autoflush(1);
	my $i = 0;
	while (time() < $until)
	{
		# due undo actions and ZooKeeper restarts
		my @left;
		for my $u (@{ $self->{undo} })
		{
			if ($u->{at} <= time()) { push @left, $u unless $u->{what}->() }
			else { push @left, $u }
		}
		$self->{undo} = \@left;
		$self->zk_restart_all(1);

		if ($i < @sched && time() - $t0 >= $sched[$i]{at})
		{
			my $f = $sched[ $i++ ];
			my $start = ms();
			my ($target, $outcome) = $self->inject($f);
			printf $fl "%d\t%d\t%s\t%s\t%s\n", $start, ms(), $f->{kind}, $target, $outcome;
			Test::More::note(sprintf('chaos +%5.1fs %-24s %-6s %s',
				$start / 1000 - $t0, $f->{kind}, $target, $outcome));
			next;
		}
		sleep 0.05;
	}
	close $fl;

	# end: every fault undone, the clients go on for the settle time, then
	# they are told to stop
	$_->{what}->() for @{ $self->{undo} };
	$self->zk_restart_all;
	Test::More::note(sprintf('chaos +%5.1fs faults undone, clients go on for %d s',
		time() - $t0, $self->{settle}));
	sleep $self->{settle};
	open my $sf, '>', $stop_file or die "$stop_file: $!";
	close $sf;
	waitpid($_, 0) for @kids;

	# servers: still up?  then stop them and keep their logs
	my @down;
	for my $n (@{ $self->{shards} }, @{ $self->{alloc} })
	{
		push @down, $n->name unless wait_accepting($n, 30);
	}
	open my $d, '>', "$self->{dir}/down" or die $!;
	print $d "$_\n" for @down;
	close $d;
	# the proxies go after the shards and before the servers, which
	# they would otherwise try to reach again as these stop
	for my $n (@{ $self->{shards} }, 'proxies', @{ $self->{alloc} }, @{ $self->{retired} // [] })
	{
		if (!ref $n)
		{
			$_->stop for map { @{ $_->{alloc} }, @{ $_->{zk} // [] } } grep { $_ } @{ $self->{proxies} };
			next;
		}
		$n->stop('fast', fail_ok => 1);
		copy($n->logfile, "$self->{dir}/logs/" . $n->name . '.log');
	}
	$self->{zk}->stop if $self->{zk};

	my $table = `$^X $here/check.pl $self->{dir} $here/../../docs/errors.md 2>&1`;
	my $rc = $? >> 8;
	my %summary;
	if (open my $sf, '<', "$self->{dir}/summary")
	{
		while (<$sf>) { my ($k, $v) = split; $summary{$k} = $v; }
		close $sf;
	}
	return {
		dir => $self->{dir},
		table => $table,
		check_rc => $rc,
		summary => \%summary,
		faults => scalar(grep { 1 } @sched[ 0 .. $i - 1 ]),
	};
}

# Run and check, as TAP: the table goes to the TAP output.
sub tap_run
{
	my (%o) = @_;
	my $seed = $o{seed};
	my $seconds = $o{seconds};
	my $layout = $ENV{CHAOS_LAYOUT} // 'default';
	my $taken = $ENV{CHAOS_ZK_TAKEN} ? " CHAOS_ZK_TAKEN=$ENV{CHAOS_ZK_TAKEN}" : '';
	my $db = ($o{worker_ids} // '') eq 'database';
	$taken .= ' CHAOS_WORKER_IDS=database' if $db;
	Test::More::diag("chaos run: seed $seed, $seconds s, snowflake layout $layout"
		  . ($db ? ', worker IDs from the allocation database' : '') . '; replay with: '
		  . "make chaos CHAOS_SEED=$seed CHAOS_SECONDS=$seconds CHAOS_LAYOUT=$layout$taken");
	my $r = run(%o);
	Test::More::diag($r->{table});
	my $s = $r->{summary};
	Test::More::cmp_ok($s->{ids_segment} // 0, '>', 1000, 'segment IDs were checked');
	Test::More::cmp_ok($s->{ids_snowflake} // 0, '>', 1000, 'snowflake IDs were checked');
	Test::More::cmp_ok($s->{faults} // 0, '>', 0, 'faults were injected');
	Test::More::is($s->{duplicates}, 0, 'no ID was handed out twice');
	Test::More::is($s->{order_breaks}, 0, 'no client received an ID at or below an earlier one of the same tag and shard');
	Test::More::is($s->{unexplained}, 0, 'every failed call is a documented leaf error or a lost connection');
	Test::More::is($s->{crashes}, 0, 'no server crashed on its own, and all run at the end');
	Test::More::is($s->{unrecovered}, 0, 'every shard handed out IDs again after every fault');
	Test::More::is($r->{check_rc}, 0, 'the checker passes');
	return $r;
}

1;
