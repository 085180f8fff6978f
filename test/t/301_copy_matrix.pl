# Copyright (c) leaf contributors

# Every way PostgreSQL copies an allocation cluster, against what each
# copy must do (test/copy_matrix, the cells placed in "matrix"): serve IDs
# nobody else serves, or refuse with a documented error.
#
# The original cluster holds segment counters (tag t, loaded, so that
# leaf_alloc_source records its source) and the leases of two snowflake
# nodes (leaf.worker_id_source = 'database', heartbeat 500 ms,
# leaf.max_clock_drift_ms 500 ms, layout 41+2+12).  For each operation
# the copy is made, then:
#  - segment: leaf_segment_nextval('t') in the copy and in the original
#    (where it goes on serving): no ID is handed out twice in the whole
#    run, and each serves or fails with the cell's SQLSTATE;
#  - lease: a snowflake node pointed at the copy (one without a state
#    file; for a dump or a template copy the original's node, whose state
#    file names the original's table of worker IDs) is ready, held back or
#    refused as the cell says, the original's nodes go on where the cell
#    says so, no two ready nodes hold one worker ID, and no snowflake ID
#    is handed out twice in the whole run.  Where the copy refuses a
#    new node (a clone, a logical subscriber, with the subscription
#    enabled or not), a node of the bound mode
#    (leaf.worker_id_lease = 'bound') whose row the copy holds, bound to
#    it, is pointed at the copy with its state file too, and is refused
#    as well: neither its own row nor its state file lets it serve there,
#    not even for a moment (its log never says the file stood in).
# The operations: a physical standby; a pg_basebackup clone started as a
# primary; a restore to a restore point (archive recovery, a new
# timeline); pg_dump into another database of the cluster and into a
# fresh cluster; CREATE DATABASE ... TEMPLATE; a synchronous standby
# promoted with leaf.alloc_failover = synchronous; an asynchronous one
# promoted (it replaces the original from then on: its counters raised
# and confirmed, the nodes pointed at it, on timeline 2); cp -a of its
# stopped data directory started beside it; pg_upgrade (copy mode, the
# same major) of it as it was at that stop, and a standby of the upgraded
# cluster promoted (timeline 2 again, of another cluster); a logical
# subscriber of all its tables, the same with the subscription disabled,
# and after leaf_alloc_cutover().  The copies share the original, its
# nodes and one snowflake node pointed at each copy in turn.  The
# promotions, the copied data directory and pg_upgrade are a second part,
# test/t/302_copy_matrix_promotions.pl, which runs this file.
use strict;
use warnings;

use Cwd;
use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $m = LeafTest::copy_matrix('test/copy_matrix');
BAIL_OUT('test/copy_matrix does not read: ' . join('; ', @{ $m->{errors} }))
  if @{ $m->{errors} };
my %cell;
# Two parts, each a file of its own so that they run side by side: this
# one runs the copies beside the original; test/t/302_copy_matrix_promotions.pl
# sets $copy_matrix_part to run the promotions, the copied data directory
# and pg_upgrade, after which the original is another server.
our $copy_matrix_part;
my $part = $copy_matrix_part // 'copies';
my %part_of = map { $_ => 'promotions' } qw(promote_sync promote_async cp_datadir pg_upgrade_promote);
for my $c (@{ $m->{cells} })
{
	next unless ($part_of{ $c->{op} } // 'copies') eq $part;
	$cell{"$c->{probe} $c->{op}"} = $c if grep { $_ eq 'matrix' } @{ $c->{where} };
}
my %ran;
my $t_start = Time::HiRes::time();

# the clauses of a cell, of the copy, the original or the operation
sub clauses
{
	my ($probe, $op, $who) = @_;
	my $c = $cell{"$probe $op"} or return ();
	return grep { $_->{who} eq $who } @{ $c->{outcome} };
}

sub elapsed { return sprintf('%.1f s', Time::HiRes::time() - $t_start); }

# ---------------------------------------------------------------- segment

my %seg_seen;    # every ID of tag t handed out in the run => by whom

# $n calls of leaf_segment_nextval('t') in $db of $node, one a statement,
# going on after errors: (\@ids, \@sqlstates, $stderr)
sub seg_take
{
	my ($node, $db, $n) = @_;
	my $h = LeafTest::start_psql_script($node, $db,
		"\\set VERBOSITY verbose\n" . ("SELECT leaf_segment_nextval('t');\n" x $n));
	my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
	return ([ map { 0 + $_ } ($out =~ /^(\d+)$/mg) ],
		[ $err =~ /ERROR:\s+([0-9A-Z]{5}):/g ], $err);
}

# records IDs of tag t handed out by $who; returns those handed out before
sub seg_record
{
	my ($who, @ids) = @_;
	my @rep;
	for (@ids)
	{
		if (exists $seg_seen{$_}) { push @rep, $_; }
		else { $seg_seen{$_} = $who; }
	}
	return @rep;
}

# the segment cell of $op: the copy is $db of $copy, the original $db of
# $orig (undef where it was stopped)
sub segment_cell
{
	my ($op, $copy, $cdb, $orig, $odb) = @_;
	my $c = $cell{"segment $op"} or return;
	$ran{"segment $op"} = 1;
	note "segment $op: $c->{text} (" . elapsed() . ')';
	for my $cl (@{ $c->{outcome} })
	{
		next if $cl->{who} eq 'first';
		my $mine = $cl->{who} eq 'copy';
		my ($node, $db) = $mine ? ($copy, $cdb) : ($orig, $odb);
		my $who = $mine ? 'the copy' : 'the original';
		my $what = "segment $op: " . ($mine ? 'copy: ' : '') . $cl->{text};
		if (!$node)
		{
			fail("$what: the original does not run in this cell");
			next;
		}
		# the original, fenced, may first hand out what it holds in memory
		my $n = !$mine && $cl->{what} eq 'refused' ? 60 : 10;
		my ($ids, $states, $err) = seg_take($node, $db, $n);
		my @rep = seg_record("$op: $who", @$ids);
		is(scalar(@rep), 0, "segment $op: $who hands out no ID handed out before in the run")
		  or diag "repeated: @rep[0 .. ($#rep < 4 ? $#rep : 4)], first by $seg_seen{$rep[0]}";
		my %st = map { $_ => 1 } @$states;
		if ($cl->{what} eq 'serves')
		{
			ok(!@$states && @$ids == $n, "$what (" . scalar(@$ids) . " of $n IDs)")
			  or diag $err;
		}
		elsif ($cl->{what} eq 'refused')
		{
			is_deeply([ sort keys %st ], [ $cl->{state} ], "$what (got: "
				  . (join(',', sort keys %st) || 'no error') . ', ' . scalar(@$ids) . ' IDs)')
			  or diag $err;
			is(scalar(@$ids), 0, "segment $op: $who hands out no ID") if $mine;
			if (!$mine)
			{
				# refused for good, once what it held in memory is gone
				my ($more, $mstates) = seg_take($node, $db, 5);
				seg_record("$op: $who", @$more);
				ok(!@$more && @$mstates == 5 && !grep({ $_ ne $cl->{state} } @$mstates),
					"segment $op: $who serves nothing more");
			}
		}
		else
		{
			fail("$what: not a clause of segment cells");
		}
	}
	return;
}

# ---------------------------------------------------------------- lease

my @sf_conf = (
	"leaf.worker_id_source = 'database'",
	"leaf.snowflake_layout = '41+2+12'",
	"leaf.heartbeat_interval = '500ms'",
	"leaf.max_clock_drift_ms = '500ms'",
	"leaf.wait_timeout = '1s'",
	"include_if_exists = 'copy_matrix.conf'");

# a snowflake node, not started: point() starts it
sub sf_node
{
	my ($name, @conf) = @_;
	return LeafTest::new_node($name, { max_worker_processes => undef, start => 0 },
		@sf_conf, "leaf.node_address = '$name.example:5432'", @conf);
}

sub running { return defined $_[0]->{_pid}; }

# (Re)start snowflake node $sf with its worker IDs from database $db of
# $alloc; fresh => 1 removes its state file first (a node that held no
# worker ID anywhere), failover sets leaf.alloc_failover.
sub point
{
	my ($sf, $alloc, $db, %o) = @_;
	$sf->stop if running($sf);
	unlink $sf->data_dir . '/leaf_snowflake.state' if $o{fresh};
	# what it logs from this start on
	$sf->{cm_log_from} = -s $sf->logfile // 0;
	my $conf = $sf->data_dir . '/copy_matrix.conf';
	unlink $conf;
	append_to_file($conf,
		"leaf.alloc_conninfo = 'host=" . $alloc->host . ' port=' . $alloc->port
		  . " dbname=$db connect_timeout=2'\n"
		  . "leaf.alloc_failover = '" . ($o{failover} // 'confirm') . "'\n");
	$sf->start;
	$sf->safe_psql('postgres', 'CREATE EXTENSION IF NOT EXISTS leaf');
	$sf->{cm_target} = $alloc->name . "/$db";
	return $sf;
}

# (ready, worker_id, not_ready_reason) of a snowflake node
sub sf_state
{
	my ($sf) = @_;
	my $out = $sf->safe_psql('postgres',
		q[SELECT coalesce(ready, false), coalesce(worker_id, -1), coalesce(not_ready_reason, '')
		    FROM leaf_snowflake_status]);
	my ($ready, $wid, $reason) = split /\|/, $out, 3;
	return ($ready eq 't', $wid, $reason // '');
}

my %sf_seen;    # every snowflake ID handed out in the run => by whom

# IDs of every ready node of @nodes, taken at once (so that two nodes with
# one worker ID would meet in the same milliseconds); checks that they hold
# distinct worker IDs and that no ID was handed out before in the run
sub sf_check_ready
{
	my ($what, @nodes) = @_;
	my (%by_wid, @ready);
	for my $n (@nodes)
	{
		my ($ready, $wid) = sf_state($n);
		next unless $ready;
		push @ready, $n;
		push @{ $by_wid{$wid} }, $n->name . ' (' . $n->{cm_target} . ')';
	}
	my @shared = grep { @{ $by_wid{$_} } > 1 } sort keys %by_wid;
	is(scalar(@shared), 0, "$what: no two ready nodes hold one worker ID ("
		  . join(', ', map { "$_: @{ $by_wid{$_} }" } sort keys %by_wid) . ')');
	my @h = map { [ $_, LeafTest::start_psql_script($_, 'postgres',
				"SELECT leaf_snowflake_nextvals(4000);\nSELECT leaf_snowflake_nextvals(4000);\n") ] } @ready;
	my ($rep, $n, $first) = (0, 0);
	for my $h (@h)
	{
		my ($rc, $out, $err) = LeafTest::finish_psql_script($h->[1]);
		my @ids = $out =~ /^(\d+)$/mg;
		$n += @ids;
		for (@ids)
		{
			if (exists $sf_seen{$_})
			{
				$rep++;
				$first //= "$_ by " . $h->[0]->name . ", before by $sf_seen{$_}";
			}
			$sf_seen{$_} //= $h->[0]->name . " ($what)";
		}
	}
	is($rep, 0, "$what: no snowflake ID of the " . scalar(@ready)
		  . " ready nodes ($n IDs) was handed out before in the run")
	  or diag "first: $first";
	return;
}

# the lease cell of $op: $copy is the node pointed at the copy (started),
# or a list of them whose first is the node new to the copy and the
# others nodes of the bound mode pointed at it with their state files
# (only where every clause of the copy is not_ready), @$orig the nodes
# that go on at the original, $after (optional) a sub that starts a node
# at the original once the copy's clauses are checked (for clauses of the
# original other than "serves") and returns it
sub lease_cell
{
	my ($op, $copy, $orig, $after) = @_;
	my $c = $cell{"lease $op"} or return;
	$ran{"lease $op"} = 1;
	note "lease $op: $c->{text} (" . elapsed() . ')';
	my @cl = @{ $c->{outcome} };
	my @copies = ref $copy eq 'ARRAY' ? @$copy : ($copy);
	$copy = $copies[0];
	fail("lease $op: nodes of the bound mode are pointed at a copy only where it is refused")
	  if @copies > 1 && grep { $_->{who} eq 'copy' && $_->{what} ne 'not_ready' } @cl;
	my @check = @copies;
	my ($never, $refused);
	for my $i (0 .. $#cl)
	{
		my $cl = $cl[$i];
		my $what = "lease $op: " . ($cl->{who} eq 'copy' ? 'copy: ' : '') . $cl->{text};
		next if $cl->{who} eq 'first';
		if ($cl->{who} eq 'original')
		{
			if ($cl->{what} eq 'serves')
			{
				for my $n (@$orig)
				{
					ok(LeafTest::sf_wait_ready($n, 30),
						"$what: " . $n->name . ' (' . $n->{cm_target} . ') is ready');
					push @check, $n;
				}
			}
			elsif ($cl->{what} eq 'not_ready')
			{
				my $n = $after ? $after->() : undef;
				if (!$n)
				{
					fail("$what: no node is started at the original in this cell");
					next;
				}
				push @check, $n;
				my ($ready, $wid, $reason) = sf_decide($n, $cl->{re}, 30);
				ok(!$ready && $reason =~ $cl->{re}, "$what (" . $n->name . ": "
					  . ($ready ? "ready with worker ID $wid" : "not ready: $reason") . ')');
			}
			else
			{
				fail("$what: not a clause of the original in lease cells");
			}
			next;
		}
		if ($cl->{what} eq 'hold')
		{
			my ($ready, $wid, $reason) = sf_decide($copy, $cl->{re}, 30);
			ok(!$ready && $reason =~ $cl->{re},
				"$what (" . ($ready ? "ready with worker ID $wid, not held" : "not ready: $reason") . ')');
		}
		elsif ($cl->{what} eq 'never')
		{
			$never = $cl;
		}
		elsif ($cl->{what} eq 'serves')
		{
			my $seen = '';
			my $ok = LeafTest::wait_until(sub {
				my ($ready, $wid, $reason) = sf_state($copy);
				$seen .= "\n  $reason" if !$ready && $seen !~ /\Q$reason\E/;
				return $ready;
			}, $copy->name . ' ready', 30);
			ok($ok, "$what: " . $copy->name . ' (' . $copy->{cm_target} . ') is ready')
			  or diag "reasons seen:$seen";
			note "reasons on the way:$seen" if $ok && $seen ne '';
			if ($never)
			{
				unlike($seen, $never->{re}, "lease $op: copy: $never->{text}");
				undef $never;
			}
		}
		elsif ($cl->{what} eq 'not_ready')
		{
			for my $n (@copies)
			{
				my $whose = $n == $copy ? '' : ' (' . $n->name . ', bound there)';
				my ($ready, $wid, $reason) = sf_decide($n, $cl->{re}, 30);
				ok(!$ready && $reason =~ $cl->{re}, "$what$whose ("
					  . ($ready ? "ready with worker ID $wid" : "not ready: $reason") . ')');
				next if $ready;
				my ($st) = LeafTest::sqlstate($n, 'postgres', 'SELECT leaf_snowflake()');
				is($st, 'LF102', "lease $op: leaf_snowflake() on the node " . $n->name
					  . " pointed at the copy fails with LF102");
				# not even for a moment, before the copy refused it
				unlike(slurp_file($n->logfile, $n->{cm_log_from}),
					qr/using worker ID \d+, bound to this node there/,
					"lease $op: the state file of the node " . $n->name
					  . ' never stood in for the copy');
				$refused = 1;
			}
		}
		else
		{
			fail("$what: not a clause of lease cells");
		}
	}
	sf_check_ready("lease $op", @check);
	# a refusal stays
	if ($refused)
	{
		for my $n (@copies)
		{
			my ($ready, $wid) = sf_state($n);
			ok(!$ready, "lease $op: the node " . $n->name . " pointed at the copy is still not ready"
				  . ($ready ? " (ready with worker ID $wid)" : ''));
		}
	}
	return;
}

# the node of the bound mode back at the original $alloc
sub bound_back
{
	my ($sf, $alloc, $what) = @_;
	point($sf, $alloc, 'postgres');
	ok(LeafTest::sf_wait_ready($sf, 30), "$what: the bound node serves at the original again");
	return;
}

# waits until the node is ready or its reason matches $re: (ready,
# worker_id, reason)
sub sf_decide
{
	my ($sf, $re, $secs) = @_;
	my @s;
	LeafTest::wait_until(sub {
		@s = sf_state($sf);
		return $s[0] || $s[2] =~ $re;
	}, $sf->name . " ready or $re", $secs);
	return @s;
}

# ---------------------------------------------------------------- nodes

# A server that started within a lease and twice the drift (3 s here)
# holds new holders back whatever else it is ("the allocation database's
# server started N ms ago and holds leases"): a cell that is about what
# the copy is (a new timeline, a synchronous promotion, pg_upgrade)
# points its node at it only past that.
sub past_start_hold
{
	my ($started) = @_;
	my $left = $started + 3.5 - Time::HiRes::time();
	Time::HiRes::sleep($left) if $left > 0;
	return;
}

# a copy from a backup of $from; it archives nothing into its original's
# archive
sub from_backup
{
	my ($name, $from, $backup, %p) = @_;
	return LeafTest::new_node_from_backup($name, $from, $backup,
		{ init => [%p], start => 0 }, 'archive_mode = off');
}

# cp -a of the stopped $from's data directory, as a node of its own
sub cp_copy
{
	my ($name, $from) = @_;
	return LeafTest::new_node_from_data_dir($name, $from, 'archive_mode = off');
}

# ---------------------------------------------------------------- set-up

my @alloc_conf = ("leaf.segment_duration = '1ms'", "leaf.wait_timeout = '3s'");
my $A = LeafTest::new_node('alloc',
	{ init => [ allows_streaming => 'logical', has_archiving => 1 ] }, @alloc_conf);
$A->safe_psql('postgres', q[SELECT leaf_segment_create('t', step => 10)]);
is(scalar(seg_record('alloc', LeafTest::take_ids($A, 't', 25))), 0, 'the original serves');
is($A->safe_psql('postgres', q[SELECT count(*) FROM leaf_alloc_source WHERE state = 'current']),
	'1', 'the original records the source of its segments');

my $S1 = sf_node('s1');
my $S2 = sf_node('s2');
my $N = sf_node('n');
point($S1, $A, 'postgres');
point($S2, $A, 'postgres');
ok(LeafTest::sf_wait_ready($S1, 60) && LeafTest::sf_wait_ready($S2, 60),
	'the two nodes of the original serve');
sf_check_ready('set-up', $S1, $S2);
# a node of the bound mode, whose row the copies made from here hold
my $Bd;
if ($part eq 'copies')
{
	$Bd = sf_node('bound', "leaf.worker_id_lease = 'bound'");
	point($Bd, $A, 'postgres');
	ok(LeafTest::sf_wait_ready($Bd, 60), 'the node of the bound mode serves');
	is($A->safe_psql('postgres', q[SELECT bound FROM leaf_worker_lease WHERE holder_address = 'bound.example:5432']),
		't', '... with its row bound to it');
	sf_check_ready('set-up, bound', $S1, $S2, $Bd);
}

$A->backup('base');
$A->safe_psql('postgres', q[SELECT pg_create_restore_point('copy_matrix')]);
# written after the restore point: what a restore to it loses
is(scalar(seg_record('alloc', LeafTest::take_ids($A, 't', 25))), 0,
	'the original serves after the restore point');

my ($B_async, $F, $O);

if ($part eq 'copies')
{
	# ---------------------------------------------------------------- standby

	$B_async = from_backup('standby_async', $A, 'base', has_streaming => 1);
	$B_async->start;
	$A->wait_for_catchup($B_async);
	segment_cell('standby', $B_async, 'postgres', $A, 'postgres');
	point($N, $B_async, 'postgres', fresh => 1);
	lease_cell('standby', $N, [ $S1, $S2 ]);
	$N->stop;

	# ---------------------------------------------------------------- clone

	my $C = from_backup('clone', $A, 'base');
	$C->start;
	segment_cell('clone_primary', $C, 'postgres', $A, 'postgres');
	point($N, $C, 'postgres', fresh => 1);
	is($C->safe_psql('postgres', q[SELECT bound FROM leaf_worker_lease WHERE holder_address = 'bound.example:5432']),
		't', "clone_primary: the clone holds the bound node's row, bound");
	point($Bd, $C, 'postgres');
	lease_cell('clone_primary', [ $N, $Bd ], [ $S1, $S2 ]);
	$N->stop;
	bound_back($Bd, $A, 'clone_primary');
	$C->stop;

	# ---------------------------------------------------------------- PITR

	# the restore point is in a file of the archive
	my $seg = $A->safe_psql('postgres', 'SELECT pg_walfile_name(pg_switch_wal())');
	ok($A->poll_query_until('postgres',
			"SELECT last_archived_wal >= '$seg' FROM pg_stat_archiver"),
		'pitr: the WAL of the restore point is archived');
	my $R = from_backup('pitr', $A, 'base', has_restoring => 1, standby => 0);
	$R->append_conf('postgresql.conf',
		"recovery_target_name = 'copy_matrix'\nrecovery_target_action = 'promote'\n");
	$R->start;
	my $r_started = Time::HiRes::time();
	ok($R->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
		'pitr: the restore reached its restore point and was promoted');
	isnt($R->safe_psql('postgres', 'SELECT timeline_id FROM pg_control_checkpoint()'),
		$A->safe_psql('postgres', 'SELECT timeline_id FROM pg_control_checkpoint()'),
		'pitr: the restore is on a timeline of its own');
	segment_cell('pitr', $R, 'postgres', $A, 'postgres');
	past_start_hold($r_started);
	point($N, $R, 'postgres', fresh => 1);
	lease_cell('pitr', $N, [ $S1, $S2 ]);
	$N->stop;
	$R->stop;

	# ---------------------------------------------------------------- dumps

	my $dump = $A->basedir . '/alloc.dump';
	$A->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $A->connstr('postgres') ],
		'dump: pg_dump of the original');
	$A->safe_psql('postgres', 'CREATE DATABASE dcopy');
	$A->command_ok([ 'pg_restore', '--exit-on-error', '-d', $A->connstr('dcopy'), $dump ],
		'dump_same_cluster: restored into another database of the cluster');
	segment_cell('dump_same_cluster', $A, 'dcopy', $A, 'postgres');
	# the original's node, pointed at the copy: its state file names the
	# original's table of worker IDs
	point($S1, $A, 'dcopy');
	lease_cell('dump_same_cluster', $S1, [$S2]);

	$F = LeafTest::new_node('fresh', { extension => 0 });
	$F->safe_psql('postgres', 'CREATE DATABASE app');
	$F->command_ok([ 'pg_restore', '--exit-on-error', '-d', $F->connstr('app'), $dump ],
		'dump_new_cluster: restored into a fresh cluster');
	segment_cell('dump_new_cluster', $F, 'app', $A, 'postgres');
	point($S1, $F, 'app');
	lease_cell('dump_new_cluster', $S1, [$S2]);

	# ---------------------------------------------------------------- template

	# no session may be in the template: the nodes stop (cleanly, ending
	# their leases); leaf stops its allocator for the copy itself
	$S1->stop;
	$S2->stop;
	$Bd->stop;
	my ($tstate, $terr) = LeafTest::sqlstate($A, 'template1', 'CREATE DATABASE tcopy TEMPLATE postgres');
	is($tstate, undef, 'template: CREATE DATABASE tcopy TEMPLATE postgres') or diag $terr;
	point($S2, $A, 'postgres');
	segment_cell('template', $A, 'tcopy', $A, 'postgres');
	point($S1, $A, 'tcopy');
	lease_cell('template', $S1, [$S2]);
	point($S1, $A, 'postgres');
	ok(LeafTest::sf_wait_ready($S1, 30), 'template: s1 serves at the original again');
	bound_back($Bd, $A, 'template');

}

if ($part eq 'promotions')
{
	# the asynchronous standby, which the other part also uses unpromoted
	$B_async = from_backup('standby_async', $A, 'base', has_streaming => 1);
	$B_async->start;
	$A->wait_for_catchup($B_async);

	# ---------------------------------------------------------------- promotions

	# a synchronous standby; the original stops, the standby is promoted
	$A->backup('sync');
	my $B_sync = from_backup('standby_sync', $A, 'sync', has_streaming => 1);
	$B_sync->append_conf('postgresql.conf', "leaf.alloc_failover = 'synchronous'\n");
	$B_sync->start;
	my $sync_started = Time::HiRes::time();
	LeafTest::make_synchronous($A, $B_sync);
	is(scalar(seg_record('alloc', LeafTest::take_ids($A, 't', 25))), 0,
		'the original serves with a synchronous standby');
	sf_check_ready('before the promotions', $S1, $S2);
	$A->wait_for_catchup($B_async);
	$A->stop('immediate');
	$B_sync->promote;
	ok($B_sync->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
		'promote_sync: the synchronous standby is promoted');
	segment_cell('promote_sync', $B_sync, 'postgres');
	past_start_hold($sync_started);
	point($N, $B_sync, 'postgres', fresh => 1, failover => 'synchronous');
	lease_cell('promote_sync', $N, []);
	$N->stop;
	$B_sync->stop;

	# the asynchronous standby is promoted: from now on it is the original
	$B_async->promote;
	ok($B_async->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
		'promote_async: the asynchronous standby is promoted');
	segment_cell('promote_async', $B_async, 'postgres');
	point($N, $B_async, 'postgres', fresh => 1);
	lease_cell('promote_async', $N, []);
	$N->stop;

	$O = $B_async;
	# the documented repair: counters above anything handed out before
	# (here: by the synchronous standby), then the confirmation
	$O->safe_psql('postgres', 'UPDATE leaf_alloc SET max_id = max_id + 1000000');
	like($O->safe_psql('postgres', 'SELECT leaf_alloc_source_confirm()'),
		qr/^the local leaf_alloc/, 'the promoted standby is confirmed, and is the original from now on');
	my @ids = LeafTest::take_ids($O, 't', 25);
	is(scalar(seg_record('original', @ids)), 0, 'the new original serves IDs not handed out before');
	# its nodes follow it (a reload: they renew their rows there)
	for my $sf ($S1, $S2)
	{
		my $conf = $sf->data_dir . '/copy_matrix.conf';
		unlink $conf;
		append_to_file($conf, "leaf.alloc_conninfo = 'host=" . $O->host . ' port=' . $O->port
			  . " dbname=postgres connect_timeout=2'\n");
		$sf->reload;
		$sf->{cm_target} = $O->name . '/postgres';
	}
	ok(LeafTest::sf_wait_ready($S1, 30) && LeafTest::sf_wait_ready($S2, 30),
		'the nodes of the original serve at the promoted standby');
	sf_check_ready('the new original', $S1, $S2);

	# ---------------------------------------------------------------- cp -a

	# one stop of the original: a copy started beside it, and one that
	# pg_upgrade takes as the old cluster (copy mode leaves the old cluster
	# as it was; this one is it, as it was at the stop)
	$O->stop;
	my $P = cp_copy('cp_copy', $O);
	my $Q = cp_copy('upgrade_old', $O);
	$O->start;
	$P->start;
	segment_cell('cp_datadir', $P, 'postgres', $O, 'postgres');
	point($N, $P, 'postgres', fresh => 1);
	lease_cell('cp_datadir', $N, [ $S1, $S2 ]);
	$N->stop;
	$P->stop;

	# ---------------------------------------------------------------- pg_upgrade

	my $U = LeafTest::new_node('upgraded', { init => [ allows_streaming => 1 ], start => 0 }, @alloc_conf);
	{
		my $dir = PostgreSQL::Test::Utils::tempdir_short();
		my $cwd = getcwd();
		chdir $dir or die "chdir $dir: $!";
		command_ok(
			[ 'pg_upgrade', '--no-sync',
				'-b', $Q->config_data('--bindir'), '-B', $U->config_data('--bindir'),
				'-d', $Q->data_dir, '-D', $U->data_dir,
				'-p', PostgreSQL::Test::Cluster::get_free_port(),
				'-P', PostgreSQL::Test::Cluster::get_free_port(),
				'-s', $dir ],
			'pg_upgrade_promote: pg_upgrade of the original');
		chdir $cwd or die "chdir $cwd: $!";
	}
	$U->start;
	$U->backup('up');
	my $U2 = from_backup('upgraded_standby', $U, 'up', has_streaming => 1);
	$U2->start;
	my $u2_started = Time::HiRes::time();
	$U->wait_for_catchup($U2);
	$U->stop;
	$U2->promote;
	ok($U2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
		'pg_upgrade_promote: the standby of the upgraded cluster is promoted');
	isnt($U2->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
		$O->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
		'pg_upgrade_promote: it is another cluster');
	segment_cell('pg_upgrade_promote', $U2, 'postgres', $O, 'postgres');
	past_start_hold($u2_started);
	point($N, $U2, 'postgres', fresh => 1);
	lease_cell('pg_upgrade_promote', $N, [ $S1, $S2 ]);
	$N->stop;
	$U2->stop;

}

if ($part eq 'copies')
{
	$O = $A;

	# ---------------------------------------------------------------- logical

	$O->safe_psql('postgres', 'CREATE PUBLICATION copy_matrix FOR ALL TABLES');
	$F->safe_psql('postgres', 'CREATE DATABASE sub');
	$F->safe_psql('sub', 'CREATE EXTENSION leaf');
	$F->safe_psql('sub', "CREATE SUBSCRIPTION copy_matrix CONNECTION '"
		  . $O->connstr . " dbname=postgres' PUBLICATION copy_matrix");
	ok($F->poll_query_until('sub', q[SELECT count(*) > 0 AND bool_and(srsubstate = 'r') FROM pg_subscription_rel]),
		'logical_sub: the subscriber has every table');
	$O->wait_for_catchup('copy_matrix');
	is($F->safe_psql('sub', 'SELECT count(*) FROM leaf_worker_lease'),
		$O->safe_psql('postgres', 'SELECT count(*) FROM leaf_worker_lease'),
		'logical_sub: the leases are replicated');
	is($F->safe_psql('sub', q[SELECT bound FROM leaf_worker_lease WHERE holder_address = 'bound.example:5432']),
		't', "logical_sub: the subscriber holds the bound node's row, bound");
	segment_cell('logical_sub', $F, 'sub', $O, 'postgres');
	point($N, $F, 'sub', fresh => 1);
	point($Bd, $F, 'sub');
	lease_cell('logical_sub', [ $N, $Bd ], [ $S1, $S2 ]);
	$N->stop;

	$F->safe_psql('sub', 'ALTER SUBSCRIPTION copy_matrix DISABLE');
	ok($F->poll_query_until('sub', q[SELECT count(*) = 0 FROM pg_stat_subscription
		WHERE subname = 'copy_matrix' AND pid IS NOT NULL]),
		'logical_sub_disabled: the subscription is disabled, its apply gone');
	segment_cell('logical_sub_disabled', $F, 'sub', $O, 'postgres');
	point($N, $F, 'sub', fresh => 1);
	point($Bd, $F, 'sub');
	lease_cell('logical_sub_disabled', [ $N, $Bd ], [ $S1, $S2 ]);
	$Bd->stop;

	# the cut-over; the subscriber's node keeps running through it
	my $cutover = q[SELECT count(*) FROM leaf_alloc_cutover('copy_matrix')];
	my ($first) = clauses('lease', 'logical_cutover', 'first');
	my $done = 0;
	if ($first)
	{
		my ($st, $err) = LeafTest::sqlstate($F, 'sub', $cutover);
		is($st, $first->{state},
			"logical_cutover: the cut-over is refused ($first->{state}) while the original's nodes hold leases"
			  . " (got: " . ($st // 'done') . ')')
		  or diag $err;
		$done = !defined $st;
	}
	$S1->stop;
	$S2->stop;
	if (!$done)
	{
		my ($st, $err) = LeafTest::sqlstate($F, 'sub', $cutover);
		is($st, undef, 'logical_cutover: done once the nodes stopped cleanly') or diag $err;
	}
	segment_cell('logical_cutover', $F, 'sub', $O, 'postgres');
	lease_cell('logical_cutover', $N, [], sub { return point($S1, $O, 'postgres') });

}

# ---------------------------------------------------------------- the end

for my $k (sort keys %cell)
{
	ok($ran{$k}, "cell $k ran");
}
note 'the run took ' . elapsed();
my %stopped;
$_->stop for grep { defined $_ && !$stopped{ $_->name }++ && running($_) } ($N, $S1, $S2, $Bd, $O, $F, $A);
done_testing();
