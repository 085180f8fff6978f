
# Copyright (c) leaf contributors

=pod

=head1 NAME

LeafTest - shared helpers for leaf's TAP tests

=head1 SYNOPSIS

  use lib 'test/lib';    # prove already has -I test/lib
  use LeafTest;

  my $node = LeafTest::new_node('main', 'leaf.wait_timeout = 2s');
  my $sf = LeafTest::new_node('sf', { worker_id => 3, max_worker_processes => undef },
      "leaf.heartbeat_interval = '500ms'");
  $node->backup('b');
  my $standby = LeafTest::new_node_from_backup('standby', $node, 'b',
      { init => [ has_streaming => 1 ] }, "leaf.wait_timeout = '3s'");
  my ($state, $err) = LeafTest::sqlstate($node, 'postgres',
      "SELECT leaf_segment_nextval('nope')");

  my $bench = LeafTest::start_pgbench($node, 'postgres', $script,
      [ '-c', 8, '-j', 2, '-T', 10 ]);
  my $r = LeafTest::finish_pgbench($bench);

  my $stream = LeafTest::start_id_stream($node, 'postgres', 'k', 50000);
  my @ids = LeafTest::finish_id_stream($stream);

=head1 DESCRIPTION

Small wrappers around PostgreSQL::Test::Cluster for the TAP tests:
making a node with leaf preloaded, or a standby, a restored backup or a
copy of a data directory (every node of a test is made here), reading
the SQLSTATE of a failing statement, and running pgbench or a stream of
leaf_segment_nextval() calls in the background while the test does
something else.

=cut

package LeafTest;

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

=pod

=head1 FUNCTIONS

=over

=item new_node($name, [\%options,] @conf_lines)

A started node with leaf in shared_preload_libraries, room for allocator
workers, the given extra postgresql.conf lines, and the extension created
in database postgres.  The options change that:

=over

=item worker_id => N

adds leaf.worker_id = N (after the lines above, before @conf_lines);

=item max_worker_processes => N

the room for workers (16 unless given; undef leaves the line out);

=item init => [ @args ]

arguments of init, such as allows_streaming => 1;

=item start => 0

returns the node configured but not started (nor the extension created);

=item extension => 0

starts it without creating the extension;

=item preload => 0

leaves leaf out of shared_preload_libraries (a server that only holds
leaf's tables, such as an allocation database, or a check that leaf works
without it);

=item install_path => $dir

another PostgreSQL installation, as PostgreSQL::Test::Cluster takes it
(an older major to upgrade from).

=back

=cut

sub new_node
{
	my ($name, @conf) = @_;
	my %opt = ref $conf[0] eq 'HASH' ? %{ shift @conf } : ();
	known_options('new_node', \%opt,
		qw(worker_id max_worker_processes init start extension preload install_path));
	my $workers =
	  exists $opt{max_worker_processes} ? $opt{max_worker_processes} : 16;
	my $preload = !defined $opt{preload} || $opt{preload};

	my $node = PostgreSQL::Test::Cluster->new($name,
		defined $opt{install_path} ? (install_path => $opt{install_path}) : ());
	$node->init(@{ $opt{init} // [] });
	$node->append_conf('postgresql.conf',
		join("\n",
			($preload ? ("shared_preload_libraries = 'leaf'") : ()),
			(defined $workers ? ("max_worker_processes = $workers") : ()),
			(defined $opt{worker_id} ? ("leaf.worker_id = $opt{worker_id}") : ()),
			@conf)
		  . "\n");
	return $node if defined $opt{start} && !$opt{start};
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION leaf')
	  unless defined $opt{extension} && !$opt{extension};
	return $node;
}

# dies on an option that $what does not know
sub known_options
{
	my ($what, $opt, @known) = @_;
	my %known = map { $_ => 1 } @known;
	for (sort keys %$opt)
	{
		die "$what: unknown option $_" unless $known{$_};
	}
	return;
}

=pod

=item new_node_from_backup($name, $from, $backup, [\%options,] @conf_lines)

A started node made from backup $backup of node $from (taken with
$from->backup($backup)): a standby, a restored copy or a clone, with the
given extra postgresql.conf lines after those of the backup.  The
extension is what the backup holds.  The options:

=over

=item init => [ @args ]

arguments of init_from_backup, such as has_streaming => 1 (a standby),
has_restoring => 1 or standby => 0;

=item start => 0

returns the node configured but not started;

=item port => N

the port of the node (an old server's, for a server rebuilt in its place);

=item install_path => $dir

another PostgreSQL installation, as for new_node.

=back

=cut

sub new_node_from_backup
{
	my ($name, $from, $backup, @conf) = @_;
	my %opt = ref $conf[0] eq 'HASH' ? %{ shift @conf } : ();
	known_options('new_node_from_backup', \%opt, qw(init start port install_path));

	my $node = PostgreSQL::Test::Cluster->new($name,
		(defined $opt{port} ? (port => $opt{port}) : ()),
		(defined $opt{install_path} ? (install_path => $opt{install_path}) : ()));
	$node->init_from_backup($from, $backup, @{ $opt{init} // [] });
	$node->append_conf('postgresql.conf', join("\n", @conf) . "\n") if @conf;
	$node->start unless defined $opt{start} && !$opt{start};
	return $node;
}

=pod

=item new_node_from_data_dir($name, $from, @conf_lines)

A node whose data directory is a copy (cp -a) of the data directory of
node $from, which must be stopped: a file system copy, with its own port
and socket directory and the given extra postgresql.conf lines.  Not
started.

=cut

sub new_node_from_data_dir
{
	my ($name, $from, @conf) = @_;

	my $node = PostgreSQL::Test::Cluster->new($name);
	system('cp', '-a', $from->data_dir, $node->data_dir) == 0
	  or die 'cp -a ' . $from->data_dir . ": $?";
	$node->append_conf('postgresql.conf',
		join("\n",
			'port = ' . $node->port,
			"unix_socket_directories = '" . $node->host . "'",
			@conf)
		  . "\n");
	return $node;
}

=pod

=item make_synchronous($primary, $standby)

Names the standby in the primary's synchronous_standby_names, reloads the
primary and waits until the standby replicates synchronously (dies if it
does not within the default test timeout).

=cut

sub make_synchronous
{
	my ($p, $s) = @_;

	$p->append_conf('postgresql.conf',
		"synchronous_standby_names = '" . $s->name . "'\n");
	$p->reload;
	$p->poll_query_until('postgres',
		"SELECT sync_state FROM pg_stat_replication WHERE application_name = '"
		  . $s->name . "'", 'sync')
	  or die 'the standby did not become synchronous';
	return;
}

=pod

=item sqlstate($node, $dbname, $sql)

Runs $sql with VERBOSITY verbose and returns, in list context, the
SQLSTATE of the first error (undef if there was none) and psql's stderr.

=cut

sub sqlstate
{
	my ($node, $dbname, $sql) = @_;

	my ($ret, $out, $err) =
	  $node->psql($dbname, "\\set VERBOSITY verbose\n$sql");
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return wantarray ? ($state, $err, $out) : $state;
}

=pod

=item write_script($node, $filename, $text)

Writes $text to a file in the node's base directory and returns its path.

=cut

sub write_script
{
	my ($node, $filename, $text) = @_;

	my $path = $node->basedir . '/' . $filename;
	unlink $path;
	PostgreSQL::Test::Utils::append_to_file($path, $text);
	return $path;
}

=pod

=item start_pgbench($node, $dbname, $script_text, \@options)

Starts pgbench in the background on a custom script (no initialisation, no
vacuum) and returns a handle for finish_pgbench.

=cut

my $script_counter = 0;

sub start_pgbench
{
	my ($node, $dbname, $script, $opts) = @_;

	my $file = write_script($node,
		sprintf('pgbench_%d_%d.sql', $$, ++$script_counter), $script);
	my %h = (out => '', err => '', file => $file);
	my @cmd = (
		$node->installed_command('pgbench'),
		'-n', '-h', $node->host, '-p', $node->port,
		'-f', $file, @$opts, $dbname);
	note 'running: ' . join(' ', @cmd);
	$h{run} = IPC::Run::start(\@cmd, '<', \undef, '>', \$h{out}, '2>',
		\$h{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return \%h;
}

=pod

=item finish_pgbench($handle)

Waits for a pgbench started by start_pgbench and returns a hash reference
with its exit code (rc), stdout (out), stderr (err) and, when pgbench got
as far as printing them, processed (transactions processed), failed
(failed transactions) and tps.

=cut

sub finish_pgbench
{
	my ($h) = @_;

	$h->{run}->finish;
	my %r = (
		rc => $h->{run}->result(0),
		out => $h->{out},
		err => $h->{err});
	($r{processed}) =
	  $h->{out} =~ /number of transactions actually processed: (\d+)/;
	($r{failed}) = $h->{out} =~ /number of failed transactions: (\d+)/;
	($r{tps}) = $h->{out} =~ /tps = ([\d.]+)/;
	return \%r;
}

=pod

=item start_id_stream($node, $dbname, $tag, $count)

Starts a psql in the background that runs $count separate statements
SELECT leaf_segment_nextval($tag) and prints every ID it gets.  It
continues after errors, so it also survives the loss of single IDs, and
stops when the server goes away.

=cut

sub start_id_stream
{
	my ($node, $dbname, $tag, $count) = @_;

	return start_psql_script($node, $dbname,
		"SELECT leaf_segment_nextval('$tag');\n" x $count);
}

=pod

=item start_psql_script($node, $connstr, $sql)

Starts psql in the background on $sql (errors do not stop it) and returns
a handle; $connstr is a database name or a libpq connection string such
as "dbname=postgres application_name=waiter".  Read what it printed so far
with psql_output($handle), and wait for it with finish_psql_script.

=cut

sub start_psql_script
{
	my ($node, $connstr, $sql) = @_;

	# from a file: psql may go away before reading all of it
	my $file = write_script($node,
		sprintf('psql_%d_%d.sql', $$, ++$script_counter), $sql);
	my %h = (out => '', err => '');
	my @cmd = (
		$node->installed_command('psql'),
		'-XAtq', '-h', $node->host, '-p', $node->port, '-d', $connstr,
		'-f', $file);
	$h{run} = IPC::Run::start(\@cmd, '<', \undef, '>', \$h{out}, '2>',
		\$h{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return \%h;
}

=pod

=item psql_output($handle)

What a background psql has printed so far, as (stdout, stderr).

=cut

sub psql_output
{
	my ($h) = @_;

	$h->{run}->pump_nb if $h->{run}->pumpable;
	return ($h->{out}, $h->{err});
}

=pod

=item finish_psql_script($handle)

Waits for a background psql; returns (exit code, stdout, stderr).

=cut

sub finish_psql_script
{
	my ($h) = @_;

	$h->{run}->finish;
	return ($h->{run}->result(0), $h->{out}, $h->{err});
}

=pod

=item id_stream_count($handle)

How many IDs the stream has printed so far (pumps its output).

=cut

sub id_stream_count
{
	my ($h) = @_;

	$h->{run}->pump_nb if $h->{run}->pumpable;
	my $n = () = $h->{out} =~ /^\d+$/mg;
	return $n;
}

=pod

=item finish_id_stream($handle)

Waits for the stream to end and returns the IDs it printed, in the order
they were received.

=cut

sub finish_id_stream
{
	my ($h) = @_;

	$h->{run}->finish;
	return map { 0 + $_ } ($h->{out} =~ /^(\d+)$/mg);
}

=pod

=item wait_until($code, $what [, $seconds])

Calls $code every 50ms until it returns true; gives up (returning false)
after $seconds, the default test timeout unless given, with one last call
at or after that time.  $what names the condition for the log; the
message of a wait that timed out gives it, the time waited and the
caller's file and line.

=cut

sub wait_until
{
	my ($code, $what, $seconds) = @_;
	my (undef, $file, $line) = caller;

	$seconds //= $PostgreSQL::Test::Utils::timeout_default;
	my $deadline = Time::HiRes::time() + $seconds;
	for (;;)
	{
		my $last = Time::HiRes::time() >= $deadline;
		return 1 if $code->();
		last if $last;
		Time::HiRes::sleep(0.05);
	}
	diag "timed out after $seconds s waiting for "
	  . ($what // 'a condition that was not named')
	  . " ($file line $line)";
	return 0;
}

=pod

=item allocator_pids($node, $dbname)

The PIDs of the running leaf allocator workers, as seen from $dbname.

=cut

sub allocator_pids
{
	my ($node, $dbname) = @_;

	my $out = $node->safe_psql($dbname,
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'leaf allocator' ORDER BY pid"
	);
	return grep { /^\d+$/ } split /\n/, $out;
}

=pod

=item wait_setting($node, $name, $value)

After a reload of $node's configuration, waits until a new session sees
setting $name at $value (pg_settings.setting, without a unit).  By then
the postmaster has read the files again and signalled every process of
the node, which reads them at its next wait or command.  Returns false if
that did not come within the default test timeout.

=cut

sub wait_setting
{
	my ($node, $name, $value) = @_;

	return $node->poll_query_until('postgres',
		"SELECT setting FROM pg_catalog.pg_settings WHERE name = '$name'",
		$value);
}

=pod

=item sf_status($node, $cols)

Returns columns $cols (an SQL select list) of leaf_snowflake_status on
$node, joined by "|".

=cut

sub sf_status
{
	my ($node, $cols) = @_;
	return $node->safe_psql('postgres', "SELECT $cols FROM leaf_snowflake_status");
}

=pod

=item sf_wait_ready($node [, $secs])

Waits until $node's snowflake generator is ready (up to $secs, 60 by
default); returns whether it became so.

=cut

sub sf_wait_ready
{
	my ($node, $secs) = @_;
	return wait_until(sub { sf_status($node, 'coalesce(ready, false)') eq 't' },
		$node->name . ' ready', $secs // 60);
}

=pod

=item sf_wait_reason($node, $re [, $secs])

Waits until not_ready_reason of $node matches $re; returns whether it
did, and prints the last reason when it did not.

=cut

sub sf_wait_reason
{
	my ($node, $re, $secs) = @_;
	my $last = '';
	my $ok = wait_until(sub {
		$last = sf_status($node, "coalesce(not_ready_reason, '')");
		return $last =~ $re;
	}, $node->name . ' reason', $secs // 60);
	Test::More::diag("last not_ready_reason: $last") unless $ok;
	return $ok;
}

=pod

=item sf_ids($node, $n)

Returns $n snowflake IDs of $node, from one call of
leaf_snowflake_nextvals.

=cut

sub sf_ids
{
	my ($node, $n) = @_;
	return split /\n/,
	  $node->safe_psql('postgres', "SELECT leaf_snowflake_nextvals($n)");
}

=pod

=item sf_start_cover($node, $secs [, $shift])

Starts a session on $node that takes snowflake IDs as fast as it can for
$secs seconds and records, per millisecond (the ID shifted right by
$shift bits, 14 by default: 2 worker-ID bits and 12 sequence bits), the
range of sequence numbers it got (one session gets a contiguous run per
millisecond), in table cover.  Returns [harness, \stdout, \stderr].

=cut

sub sf_start_cover
{
	my ($node, $secs, $shift) = @_;
	my ($o, $e) = ('', '');
	$shift //= 14;
	$node->safe_psql('postgres',
		'CREATE TABLE IF NOT EXISTS cover (ms bigint, lo int, hi int, n bigint)');
	my $sql = qq[
DO \$\$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '$secs s';
BEGIN
	LOOP
		INSERT INTO cover
		SELECT id >> $shift, min(id & 4095), max(id & 4095), count(*)
		FROM leaf_snowflake_nextvals(20000) AS g(id) GROUP BY 1;
		COMMIT;
		EXIT WHEN clock_timestamp() > deadline;
	END LOOP;
END
\$\$;
];
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$o, '2>', \$e);
	return [ $h, \$o, \$e ];
}

=pod

=item sf_cover($node)

What sf_start_cover recorded on $node: a hash of millisecond to [lo, hi].

=cut

sub sf_cover
{
	my ($node) = @_;
	my %c;
	for (split /\n/, $node->safe_psql('postgres', 'SELECT ms, lo, hi, n FROM cover'))
	{
		my ($ms, $lo, $hi, $n) = split /\|/;
		die "not one run in ms $ms" if $hi - $lo + 1 != $n;
		die "ms $ms twice" if $c{$ms};
		$c{$ms} = [ $lo, $hi ];
	}
	return \%c;
}

=pod

=item sf_repeats($cover_a, $cover_b)

The IDs two sf_cover results have in common: (count, milliseconds, first
millisecond).

=cut

sub sf_repeats
{
	my ($ca, $cb) = @_;
	my ($rep, $ms_rep, $first) = (0, 0, undef);
	for my $ms (sort { $a <=> $b } keys %$cb)
	{
		next unless $ca->{$ms};
		my $lo = $ca->{$ms}[0] > $cb->{$ms}[0] ? $ca->{$ms}[0] : $cb->{$ms}[0];
		my $hi = $ca->{$ms}[1] < $cb->{$ms}[1] ? $ca->{$ms}[1] : $cb->{$ms}[1];
		next if $hi < $lo;
		$rep += $hi - $lo + 1;
		$ms_rep++;
		$first //= $ms;
	}
	return ($rep, $ms_rep, $first);
}

=pod

=item count_repeats(\@ids)

Returns the number of IDs that occur more than once in the list.

=cut

sub count_repeats
{
	my ($ids) = @_;

	my %seen;
	my $dups = 0;
	for my $id (@$ids)
	{
		$dups++ if $seen{$id}++;
	}
	return $dups;
}

=pod

=item max_of(@list), min_of(@list)

The largest and smallest numbers of a list (undef for an empty one).

=cut

sub max_of
{
	my $m;
	for (@_) { $m = $_ if !defined $m || $_ > $m; }
	return $m;
}

sub min_of
{
	my $m;
	for (@_) { $m = $_ if !defined $m || $_ < $m; }
	return $m;
}

=pod

=item uniq_in_order(@list)

The list without repeats of the value just before (1,1,2,1 gives 1,2,1).

=cut

sub uniq_in_order
{
	my @out;
	for (@_) { push @out, $_ if !@out || $out[-1] ne $_; }
	return @out;
}

=pod

=item take_ids($node, $tag, $n)

$n IDs of a tag from leaf_segment_nextval, in one statement (dies on an
error).

=cut

sub take_ids
{
	my ($node, $tag, $n) = @_;
	return grep { /^\d+$/ } split /\n/,
	  $node->safe_psql('postgres',
		"SELECT leaf_segment_nextval('$tag') FROM generate_series(1, $n)");
}

=pod

=item burst_ids($node, $tag, $n)

A burst of $n calls of leaf_segment_nextval, one per statement, 1 ms
apart (dies on an error).  With leaf.segment_duration = '1ms' each segment
outlasts its duration, so the dynamic step stays at the tag's step and
every few calls is a refill.  Returns the IDs.

=cut

sub burst_ids
{
	my ($node, $tag, $n) = @_;
	my $h = start_psql_script($node, 'postgres',
		"SELECT leaf_segment_nextval('$tag');\nSELECT pg_sleep(0.001);\n" x $n);
	my ($rc, $out, $err) = finish_psql_script($h);
	die "burst failed: $err" if $rc != 0 || $err ne '';
	return map { 0 + $_ } ($out =~ /^(\d+)$/mg);
}

=pod

=item take_each($node, $tag, $n)

$n calls of leaf_segment_nextval, one per statement, going on after
errors.  Returns (\@ids, \@sqlstates_of_the_errors, $stderr).

=cut

sub take_each
{
	my ($node, $tag, $n) = @_;
	my $h = start_psql_script($node, 'postgres',
		"\\set VERBOSITY verbose\n" . ("SELECT leaf_segment_nextval('$tag');\n" x $n));
	my ($rc, $out, $err) = finish_psql_script($h);
	my @ids = map { 0 + $_ } ($out =~ /^(\d+)$/mg);
	my @states = ($err =~ /ERROR:\s+([0-9A-Z]{5}):/g);
	return (\@ids, \@states, $err);
}

=pod

=item LeafTest::start_pod($node, $pod, %opts)

Starts $node (with $node->start(%opts)) with the environment variable
LEAF_POD set to $pod, as a StatefulSet's pod gets its name; undef starts
it without the variable.  The pod-ordinal tests set
leaf.worker_id_from = 'env:LEAF_POD'.

=cut

sub start_pod
{
	my ($node, $pod, %opts) = @_;
	local $ENV{LEAF_POD} = $pod;
	delete local $ENV{LEAF_POD} unless defined $pod;
	return $node->start(%opts);
}

=pod

=back

=cut

1;

=pod

=head1 THE COPY MATRIX

=over

=item copy_matrix($path)

Reads the registry of copies, test/copy_matrix (its header says what its
lines mean), and returns a hash reference:

  states  => [ { kind, name, probe, line } ]     every piece of state
  probes  => { name => description }, probe_order => [ names ]
  ops     => { name => description }, op_order => [ names ]
  cells   => [ { probe, op, where => [ places ], outcome => [ clauses ],
                 text, line } ]
  errors  => [ "line N: what is wrong" ]         lines it could not read

Each clause of an outcome is a hash: who ('copy', 'original', or 'first':
the last step of the operation itself), what ('serves', 'refused',
'not_ready', 'hold', 'never', 'not_run', 'own_worker_id', 'not_copied'),
state (the SQLSTATE of 'refused'), re (the pattern of 'not_ready', 'hold'
and 'never', a qr//) and text.

=cut

# the probes that test/t/301_copy_matrix.pl runs, and the clauses it checks
our %copy_matrix_runtime = (segment => 1, lease => 1);
our %copy_matrix_runtime_clause = (
	'copy serves' => 1, 'copy refused' => 1, 'copy not_ready' => 1,
	'copy hold' => 1, 'copy never' => 1, 'original serves' => 1, 'original refused' => 1,
	'original not_ready' => 1, 'first refused' => 1);

sub copy_matrix
{
	my ($path) = @_;
	my %m = (states => [], probes => {}, probe_order => [], ops => {},
		op_order => [], cells => [], errors => []);
	open my $fh, '<', $path or die "could not open $path: $!";
	my $n = 0;
	while (my $l = <$fh>)
	{
		$n++;
		chomp $l;
		next if $l =~ /^\s*(#|$)/;
		my $err = sub { push @{ $m{errors} }, "line $n: $_[0]: $l"; };
		if ($l =~ /^state\s+(table|file|zk)\s+(\S+)\s+(\w+)\s*$/)
		{
			push @{ $m{states} },
			  { kind => $1, name => $2, probe => $3, line => $n };
		}
		elsif ($l =~ /^(probe|op)\s+(\w+)\s+(\S.*)$/)
		{
			my ($what, $name, $desc) = ($1, $2, $3);
			my $h = $what eq 'probe' ? 'probes' : 'ops';
			$err->("$what $name is declared twice"), next if $m{$h}{$name};
			$m{$h}{$name} = $desc;
			push @{ $m{ $what eq 'probe' ? 'probe_order' : 'op_order' } }, $name;
		}
		elsif ($l =~ /^cell\s+(\w+)\s+(\w+)\s+(\S+)\s+(\S.*)$/)
		{
			my ($probe, $op, $where, $text) = ($1, $2, $3, $4);
			my ($clauses, $why) = copy_matrix_outcome($text);
			$err->($why), next unless $clauses;
			push @{ $m{cells} }, {
				probe => $probe, op => $op, where => [ split /,/, $where ],
				outcome => $clauses, text => $text, line => $n };
		}
		else
		{
			$err->('not a line of the registry');
		}
	}
	close $fh;
	return \%m;
}

=pod

=item copy_matrix_outcome($text)

The clauses of an outcome of the registry (see copy_matrix), or (undef,
why) if it cannot be read.

=cut

sub copy_matrix_outcome
{
	my ($text) = @_;
	my @c;
	my $lit = qr{/((?:[^/\\]|\\.)*)/};
	pos($text) = 0;
	while (pos($text) < length($text))
	{
		if ($text =~ m{\G\s*(?:(original|first)\s+)?
				(serves|not_copied|not_run|own_worker_id
				 |refused\s+([0-9A-Z]{5})
				 |not_ready\s+$lit
				 |hold\s+$lit
				 |never\s+$lit)
				\s*(?:;|\z)}gcx)
		{
			my ($who, $all, $state, $re) = ($1 // 'copy', $2, $3, $4 // $5 // $6);
			my ($what) = $all =~ /^(\w+)/;
			my $compiled;
			if (defined $re)
			{
				$compiled = eval { qr/$re/ };
				return (undef, "pattern /$re/ does not compile: $@") unless $compiled;
			}
			push @c, { who => $who, what => $what, state => $state,
				re => $compiled, text => ($who eq 'copy' ? '' : "$who ") . $all };
		}
		else
		{
			return (undef, 'cannot read the outcome from "'
				  . substr($text, pos($text) // 0) . '"');
		}
	}
	return (undef, 'no outcome') unless @c;
	return (\@c);
}

=pod

=back

=cut

1;
