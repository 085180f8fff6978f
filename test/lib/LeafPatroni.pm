
# Copyright (c) leaf contributors

=pod

=head1 NAME

LeafPatroni - a Patroni cluster of PostgreSQL servers for leaf's TAP tests

=head1 SYNOPSIS

  use LeafZK;
  use LeafPatroni;

  my $zk = LeafZK->new(nodes => 3);
  my $pc = LeafPatroni->new(
      zk => $zk, members => 3, synchronous_mode => 1,
      parameters => { 'leaf.alloc_failover' => 'synchronous' },
      member_parameters => sub { my ($name, $port) = @_; return {} });
  $pc->start;                          # every member running, one leader
  my $leader = $pc->wait_leader;       # its name ('n1', ...)
  $pc->node($leader)->safe_psql('postgres', 'CREATE EXTENSION leaf');
  $pc->members;                        # patronictl list -f json
  $pc->kill9($leader);                 # kill -9 of patroni and postmaster
  $pc->start_member($leader);          # its patroni again
  $pc->switchover('n2');               # patronictl switchover --force
  $pc->conninfo('dbname=postgres');    # every member, target_session_attrs=read-write
  $pc->stop;                           # also done at exit, even on die

  # no ZooKeeper: the members keep the cluster's state among themselves
  # (Patroni's Raft DCS, python3-pysyncobj)
  my ($ok, $why) = LeafPatroni::raft_available();
  plan skip_all => $why unless $ok;
  my $pc = LeafPatroni->new(dcs => 'raft', members => 3, ...);

  # no ZooKeeper: the cluster's state in an etcd of its own (Debian's
  # etcd-server, Patroni's etcd3 section, python3-etcd)
  my ($ok, $why) = LeafPatroni::etcd_available();
  plan skip_all => $why unless $ok;
  my $pc = LeafPatroni->new(dcs => 'etcd', members => 3, ...);

=head1 DESCRIPTION

Each member is one C<patroni member.yml> process running in the
foreground in a process group of its own, with its own REST API port,
PostgreSQL port and data directory under the test's temporary directory,
its PostgreSQL from C<pg_config --bindir> (the first on PATH), and as
DCS either the given ZooKeeper ensemble, or, with C<< dcs => 'raft' >>,
Patroni's own Raft (pysyncobj): each member's Patroni is also a node of
a Raft group of the members, on a loopback port of its own, with its
journal in the member's directory, or, with C<< dcs => 'etcd' >>, one
etcd server of the cluster's own (C<etcd> on PATH), on loopback ports
of its own, with its data in a temporary directory of the test and its
log in the test's log directory, which the members reach through
Patroni's C<etcd3> section (etcd's v3 API, the one etcd 3.4 serves by
default).  The first member bootstraps the cluster
(initdb), the others clone it with pg_basebackup.  C<ttl> 10,
C<loop_wait> 1, C<retry_timeout> 4, C<use_pg_rewind>, and leaf in
C<shared_preload_libraries>.

Every member's server is also a PostgreSQL::Test::Cluster object
(C<< $pc->node($name) >>) for psql and friends; it is never started or
stopped through that object.  Servers listen on 127.0.0.1 and on the
tests' socket directory.

Patroni starts its postmaster in a session of its own, so stopping a
member stops Patroni (SIGTERM, which stops PostgreSQL with a fast
shutdown), then kills whatever is left: Patroni's process group, the
postmaster named in C<postmaster.pid> and its children.  That happens for
every member at exit, also when the test dies.

A Raft group elects its leader only with a majority of its nodes up, so
while the first member bootstraps alone, the other members' Raft nodes
run as C<patroni_raft_controller> processes (the same configuration
file: the same address and journal); each is stopped just before its
member's Patroni starts and takes its place in the group.  A member
stopped or killed takes its Raft node with it: with three members, the
other two still hold a majority.

The etcd server starts with start(), before the members, and stops with
stop(), after them; at exit, also when the test dies, it is stopped
after every member.

=cut

package LeafPatroni;

use strict;
use warnings;

use Carp;
use File::Basename ();
use File::Path qw(make_path);
use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(time usleep);

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More ();
use LeafTest;
use LeafZK;

my @all_members;
my @all_etcds;
my $http = HTTP::Tiny->new(timeout => 3);

# an interrupted run still stops its members
for my $sig (qw(INT TERM HUP))
{
	$SIG{$sig} = sub { die "killed by SIG$sig\n" }
	  unless defined $SIG{$sig} && ref $SIG{$sig};
}

=pod

=head1 METHODS

=over

=item LeafPatroni->new(%opts)

Options: dcs (C<zookeeper>, the default, C<raft> or C<etcd>), zk (a LeafZK,
required with ZooKeeper), members (default 3), scope (cluster
name, default C<leafalloc>), synchronous_mode (default 1), parameters (a
hash of PostgreSQL settings for every member, e.g. leaf's), and
member_parameters (a code reference called with a member's name and
PostgreSQL port, returning a hash of settings for that member only, such
as C<leaf.node_address>).  Writes the members' configurations; start()
runs them.

=cut

sub new
{
	my ($class, %o) = @_;
	my $dcs = $o{dcs} // 'zookeeper';
	croak "dcs must be 'zookeeper', 'raft' or 'etcd', not '$dcs'"
	  unless $dcs =~ /^(zookeeper|raft|etcd)$/;
	croak 'zk is required' if $dcs eq 'zookeeper' && !$o{zk};
	if ($dcs ne 'zookeeper')
	{
		my ($ok, $why) = $dcs eq 'raft' ? raft_available() : etcd_available();
		croak $why unless $ok;
	}
	my $self = bless {
		dcs => $dcs,
		zk => $o{zk},
		scope => $o{scope} // 'leafalloc',
		nmembers => $o{members} // 3,
		synchronous_mode => $o{synchronous_mode} // 1,
		parameters => $o{parameters} // {},
		member_parameters => $o{member_parameters},
		members => [],
	}, $class;
	$self->{etcd} = _new_etcd($self->{scope}) if $dcs eq 'etcd';

	my $bindir = `pg_config --bindir`;
	chomp $bindir;
	croak 'pg_config --bindir failed' unless $bindir && -x "$bindir/postgres";
	$self->{bindir} = $bindir;

	for my $i (1 .. $self->{nmembers})
	{
		my $name = "n$i";
		my $pgport = PostgreSQL::Test::Cluster::get_free_port();
		my $restport = PostgreSQL::Test::Cluster::get_free_port();
		my $node = PostgreSQL::Test::Cluster->new("$self->{scope}_$name", port => $pgport);
		my $m = {
			name => $name,
			pgport => $pgport,
			restport => $restport,
			node => $node,
			dir => $node->basedir,
			data_dir => $node->data_dir,
			yml => $node->basedir . '/patroni.yml',
			log => "$PostgreSQL::Test::Utils::log_path/"
			  . "patroni_$self->{scope}_$name.log",
			pid => undef,
			raft_pid => undef,
		};
		if ($dcs eq 'raft')
		{
			$m->{raftport} = PostgreSQL::Test::Cluster::get_free_port();
			$m->{raft_dir} = $node->basedir . '/raft';
			$m->{raft_log} = "$PostgreSQL::Test::Utils::log_path/"
			  . "patroni_raft_$self->{scope}_$name.log";
			make_path($m->{raft_dir});
		}
		push @{ $self->{members} }, $m;
		push @all_members, $m;
	}
	$self->write_config($_) for @{ $self->{members} };
	return $self;
}

=pod

=item LeafPatroni::raft_available()

Whether Patroni's Raft DCS can run here: (1) or (0, why not).  It needs
pysyncobj (Debian: python3-pysyncobj) in the Python that runs Patroni.

=cut

sub raft_available
{
	my $python = _patroni_python() // return (0, 'patroni is not installed');
	return (1) if _python_imports($python, 'pysyncobj');
	return (0, "Patroni's Raft DCS needs pysyncobj, which $python cannot import "
		  . '(Debian: apt-get install python3-pysyncobj)');
}

=pod

=item LeafPatroni::etcd_available()

Whether a cluster on etcd can run here: (1) or (0, why not).  It needs
the etcd server on PATH (Debian: etcd-server) and, in the Python that
runs Patroni, python-etcd (Debian: python3-etcd), which Patroni's etcd
and etcd3 sections both import.

=cut

sub etcd_available
{
	my $python = _patroni_python() // return (0, 'patroni is not installed');
	return (0, 'etcd is not installed (Debian: apt-get install etcd-server)')
	  unless defined _on_path('etcd');
	return (1) if _python_imports($python, 'etcd');
	return (0, "Patroni's etcd DCS needs python-etcd, which $python cannot import "
		  . '(Debian: apt-get install python3-etcd)');
}

# the first executable of that name on PATH, or undef
sub _on_path
{
	my ($name) = @_;
	my $dir = (grep { -x "$_/$name" } split /:/, $ENV{PATH} // '')[0];
	return defined $dir ? "$dir/$name" : undef;
}

# the Python that runs Patroni (its #! line), or undef without Patroni
sub _patroni_python
{
	my $patroni = _on_path('patroni') // return undef;
	my $python = 'python3';
	if (open my $fh, '<', $patroni)
	{
		my $line = <$fh> // '';
		close $fh;
		$python = $1 if $line =~ /^#!\s*(\S*python\S*)/;
	}
	return $python;
}

sub _python_imports
{
	my ($python, $module) = @_;
	my ($out, $err) = ('', '');
	return eval {
		IPC::Run::run([ $python, '-c', "import $module" ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	};
}

# The cluster's etcd: one server, its ports, data directory and log
sub _new_etcd
{
	my ($scope) = @_;
	my $e = {
		client_port => PostgreSQL::Test::Cluster::get_free_port(),
		peer_port => PostgreSQL::Test::Cluster::get_free_port(),
		dir => PostgreSQL::Test::Utils::tempdir("etcd_$scope"),
		log => "$PostgreSQL::Test::Utils::log_path/etcd_$scope.log",
		pid => undef,
	};
	push @all_etcds, $e;
	return $e;
}

sub _start_etcd
{
	my ($e) = @_;
	croak 'etcd is already running' if defined $e->{pid};
	my $client = "http://127.0.0.1:$e->{client_port}";
	my $peer = "http://127.0.0.1:$e->{peer_port}";
	my $pid;
	{
		# etcd refuses to start when a variable of its own names a flag
		# that is also given
		local %ENV = %ENV;
		delete $ENV{$_} for grep { /^ETCD_/ } keys %ENV;
		$pid = _spawn($e->{log}, 'etcd', '--name', 'etcd1',
			'--data-dir', "$e->{dir}/data",
			'--listen-client-urls', $client, '--advertise-client-urls', $client,
			'--listen-peer-urls', $peer, '--initial-advertise-peer-urls', $peer,
			'--initial-cluster', "etcd1=$peer", '--initial-cluster-state', 'new',
			'--initial-cluster-token', "leaf-$$-$e->{client_port}");
	}
	$e->{pid} = $pid;
	my $deadline = time() + 60;
	while (time() < $deadline)
	{
		croak "etcd exited at its start; see $e->{log}"
		  if waitpid($pid, POSIX::WNOHANG()) == $pid;
		my $r = $http->get("$client/health");
		if ($r->{status} == 200 && $r->{content} =~ /"health"\s*:\s*"true"/)
		{
			Test::More::note("etcd started (pid $pid, client port $e->{client_port})");
			return;
		}
		usleep(100_000);
	}
	croak "etcd not healthy after 60 s; see $e->{log}";
}

# Start a command in the background, in a process group of its own, its
# output appended to $log; returns its pid.
sub _spawn
{
	my ($log, @cmd) = @_;
	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		POSIX::setsid();
		open STDIN, '<', '/dev/null';
		open STDOUT, '>>', $log;
		open STDERR, '>&', \*STDOUT;
		exec(@cmd) or POSIX::_exit(127);
	}
	return $pid;
}

# Stop a process this module started: SIGTERM, then, after $seconds,
# SIGKILL to its process group.
sub _stop_child
{
	my ($pid, $seconds) = @_;
	kill 'TERM', $pid;
	my $deadline = time() + $seconds;
	while (time() < $deadline)
	{
		return if waitpid($pid, POSIX::WNOHANG()) == $pid;
		usleep(50_000);
	}
	kill 'KILL', -$pid;
	waitpid($pid, 0);
	return;
}

sub _stop_etcd
{
	my ($e) = @_;
	return unless defined $e->{pid};
	_stop_child($e->{pid}, 10);
	$e->{pid} = undef;
	return;
}

sub write_config
{
	my ($self, $m) = @_;
	my $host = $PostgreSQL::Test::Cluster::test_pghost;

	my %cluster_params = (
		wal_level => 'replica',
		hot_standby => 'on',
		wal_log_hints => 'on',
		max_wal_senders => 10,
		max_replication_slots => 10,
		max_connections => 40,
		max_worker_processes => 16,
		wal_keep_size => '128MB',
		shared_preload_libraries => 'leaf',
		fsync => 'on',
	);
	my %local_params = (
		unix_socket_directories => $host,
		log_line_prefix => "%m [%p] $m->{name} ",
		%{ $self->{parameters} },
		$self->{member_parameters}
		? %{ $self->{member_parameters}->($m->{name}, $m->{pgport}) }
		: (),
	);
	my $cfg = {
		scope => $self->{scope},
		name => $m->{name},
		log => { level => 'INFO' },
		restapi => {
			listen => "127.0.0.1:$m->{restport}",
			connect_address => "127.0.0.1:$m->{restport}",
		},
		$self->{dcs} eq 'raft'
		? (raft => {
				data_dir => $m->{raft_dir},
				self_addr => "127.0.0.1:$m->{raftport}",
				partner_addrs => [
					map { "127.0.0.1:$_->{raftport}" }
					  grep { $_ != $m } @{ $self->{members} }
				],
			})
		: $self->{dcs} eq 'etcd'
		? (etcd3 => { hosts => [ "127.0.0.1:$self->{etcd}{client_port}" ] })
		: (zookeeper => { hosts => [ split /,/, $self->{zk}->hosts ] }),
		watchdog => { mode => 'off' },
		bootstrap => {
			dcs => {
				ttl => 10,
				loop_wait => 1,
				retry_timeout => 4,
				synchronous_mode => $self->{synchronous_mode} ? JSON::PP::true : JSON::PP::false,
				maximum_lag_on_failover => 1048576,
				postgresql => {
					use_pg_rewind => JSON::PP::true,
					use_slots => JSON::PP::true,
					parameters => \%cluster_params,
				},
			},
			initdb => [ { encoding => 'UTF8' }, { locale => 'C' }, 'no-sync' ],
		},
		postgresql => {
			listen => "127.0.0.1:$m->{pgport}",
			connect_address => "127.0.0.1:$m->{pgport}",
			data_dir => $m->{data_dir},
			bin_dir => $self->{bindir},
			pgpass => "$m->{dir}/pgpass",
			authentication => {
				superuser => { username => 'postgres' },
				replication => { username => 'postgres' },
				rewind => { username => 'postgres' },
			},
			pg_hba => [
				'local all all trust',
				'local replication all trust',
				'host all all 127.0.0.1/32 trust',
				'host replication all 127.0.0.1/32 trust',
			],
			parameters => \%local_params,
			basebackup => [ { checkpoint => 'fast' } ],
		},
		tags => {
			nofailover => JSON::PP::false,
			noloadbalance => JSON::PP::false,
			clonefrom => JSON::PP::false,
			nosync => JSON::PP::false,
		},
	};
	# JSON is YAML
	open my $f, '>', $m->{yml} or croak "$m->{yml}: $!";
	print $f JSON::PP->new->canonical->pretty->encode($cfg);
	close $f;
	return;
}

=pod

=item $pc->start($after_leader)

Starts every member's Patroni (the first one alone until it leads, so
that it bootstraps) and waits until every member runs, one of them as the
leader and, in synchronous mode, one as the synchronous standby.  If
given, $after_leader is called with the leader's name before the other
members start, so that they clone what it did.  With Raft, the other
members' Raft nodes run meanwhile as C<patroni_raft_controller>
processes, each stopped just before its member's Patroni starts.  With
etcd, the etcd server starts first.

=cut

sub start
{
	my ($self, $after_leader) = @_;
	my ($first, @rest) = @{ $self->{members} };
	_start_etcd($self->{etcd}) if $self->{etcd};
	if ($self->{dcs} eq 'raft')
	{
		_start_raft_controller($_) for @rest;
	}
	$self->start_member($first->{name});
	$self->wait_leader(120) // croak 'no leader after 120 s; see ' . $first->{log};
	$after_leader->($first->{name}) if $after_leader;
	for my $m (@rest)
	{
		_stop_raft_controller($m);
		$self->start_member($m->{name});
	}
	$self->wait_until(
		sub {
			my @m = $self->members;
			return 0 unless @m == @{ $self->{members} };
			return 0 if grep { ($_->{State} // '') !~ /^(running|streaming)$/ } @m;
			return 0 if $self->{synchronous_mode}
			  && !grep { ($_->{Role} // '') eq 'Sync Standby' } @m;
			return 1;
		},
		180, 'every member running')
	  or croak 'the members did not all come up in 180 s: '
	  . $self->members_text;
	return;
}

sub member
{
	my ($self, $name) = @_;
	my ($m) = grep { $_->{name} eq $name } @{ $self->{members} };
	croak "no member $name" unless $m;
	return $m;
}

=pod

=item $pc->names, $pc->node($name), $pc->port($name), $pc->data_dir($name)

The members' names; a member's PostgreSQL::Test::Cluster object, port
and data directory.

=cut

sub names { return map { $_->{name} } @{ $_[0]{members} }; }
sub node { return $_[0]->member($_[1])->{node}; }
sub port { return $_[0]->member($_[1])->{pgport}; }
sub data_dir { return $_[0]->member($_[1])->{data_dir}; }

=pod

=item $pc->conninfo($extra)

A libpq connection string that lists every member, with
C<target_session_attrs=read-write> and C<connect_timeout=2>, plus $extra.

=cut

sub conninfo
{
	my ($self, $extra) = @_;
	my @m = @{ $self->{members} };
	return sprintf('host=%s port=%s target_session_attrs=read-write connect_timeout=2%s',
		join(',', map { '127.0.0.1' } @m),
		join(',', map { $_->{pgport} } @m),
		defined $extra ? " $extra" : '');
}

=pod

=item $pc->start_member($name)

Starts (or starts again) a member's Patroni in the background.

=cut

sub start_member
{
	my ($self, $name) = @_;
	my $m = $self->member($name);
	croak "patroni of $name is already running" if defined $m->{pid};
	croak "the Raft node of $name runs as patroni_raft_controller" if defined $m->{raft_pid};
	my $pid = _spawn($m->{log}, 'patroni', $m->{yml});
	$m->{pid} = $pid;
	$m->{started_at} = time();
	Test::More::note("patroni $name started (pid $pid, PostgreSQL port $m->{pgport}, REST port $m->{restport})");
	return $pid;
}

# A member's Raft node alone, without its Patroni and PostgreSQL, from
# the member's configuration file
sub _start_raft_controller
{
	my ($m) = @_;
	my $pid = _spawn($m->{raft_log}, 'patroni_raft_controller', $m->{yml});
	$m->{raft_pid} = $pid;
	Test::More::note("patroni_raft_controller of $m->{name} started (pid $pid, Raft port $m->{raftport})");
	return;
}

sub _stop_raft_controller
{
	my ($m) = @_;
	return unless defined $m->{raft_pid};
	_stop_child($m->{raft_pid}, 30);
	$m->{raft_pid} = undef;
	return;
}

=pod

=item $pc->postmaster_pid($name)

The pid in the member's postmaster.pid if that process is alive, else
undef.

=cut

sub postmaster_pid
{
	my ($self, $name) = @_;
	return _postmaster_pid($self->member($name));
}

sub _postmaster_pid
{
	my ($m) = @_;
	my $f = "$m->{data_dir}/postmaster.pid";
	open my $fh, '<', $f or return undef;
	my $pid = <$fh>;
	close $fh;
	return undef unless defined $pid && $pid =~ /^(\d+)/;
	$pid = $1;
	my $cmd = '';
	if (open my $c, '<', "/proc/$pid/cmdline")
	{
		local $/;
		$cmd = <$c> // '';
		close $c;
	}
	# a reused pid is not our postmaster
	return ($cmd =~ /postgres/ && $cmd =~ /\Q$m->{data_dir}\E/) ? $pid : undef;
}

# children of a process, from /proc
sub _children
{
	my ($ppid) = @_;
	my @kids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open my $fh, '<', $stat or next;
		my $line = <$fh> // '';
		close $fh;
		my ($pid, $pp) = $line =~ /^(\d+) \(.*\) \S (\d+)/;
		push @kids, $pid if defined $pp && $pp == $ppid;
	}
	return @kids;
}

sub _reap
{
	my ($m, $seconds) = @_;
	return 1 unless defined $m->{pid};
	my $deadline = time() + $seconds;
	while (time() < $deadline)
	{
		if (waitpid($m->{pid}, POSIX::WNOHANG()) == $m->{pid})
		{
			$m->{pid} = undef;
			return 1;
		}
		usleep(50_000);
	}
	return 0;
}

=pod

=item $pc->kill9($name)

kill -9 of the member's Patroni (its whole process group) and of its
postmaster, at once, as a machine that fails would.  Returns the time of
the kill.

=cut

sub kill9
{
	my ($self, $name) = @_;
	my $m = $self->member($name);
	my $pm = _postmaster_pid($m);
	my @pids = grep { defined } ($pm);
	my $t = time();
	kill 'KILL', -$m->{pid} if defined $m->{pid};
	kill 'KILL', @pids if @pids;
	_reap($m, 30) or croak "patroni of $name did not die";
	Test::More::note(sprintf('member %s: kill -9 of patroni and postmaster (%s)',
			$name, $pm // 'none'));
	# its backends notice the postmaster's death and leave
	if (defined $pm)
	{
		my $deadline = time() + 30;
		usleep(50_000) while kill(0, $pm) && time() < $deadline;
	}
	return $t;
}

=pod

=item $pc->stop_member($name)

Stops a member: SIGTERM to Patroni, which stops PostgreSQL (fast), then,
past 60 s, kill -9 of what is left.

=cut

sub stop_member
{
	my ($self, $name) = @_;
	_stop($self->member($name));
	return;
}

sub _stop
{
	my ($m) = @_;
	_stop_raft_controller($m);
	if (defined $m->{pid})
	{
		kill 'TERM', $m->{pid};
		if (!_reap($m, 60))
		{
			kill 'KILL', -$m->{pid};
			_reap($m, 10);
		}
		# the rest of its process group (pg_basebackup, pg_rewind, ...)
		kill 'KILL', -$m->{pid} if defined $m->{pid};
		$m->{pid} = undef;
	}
	my $pm = _postmaster_pid($m);
	if (defined $pm)
	{
		my @kids = _children($pm);
		kill 'QUIT', $pm;
		my $deadline = time() + 10;
		usleep(50_000) while kill(0, $pm) && time() < $deadline;
		kill 'KILL', $pm, @kids;
		$deadline = time() + 10;
		usleep(50_000) while kill(0, $pm, @kids) && time() < $deadline;
	}
	return;
}

=pod

=item $pc->stop

Stops every member, the leader last, so that no replica is promoted
while the cluster goes down, then the cluster's etcd, if any.

=cut

sub stop
{
	my ($self) = @_;
	_stop_all(@{ $self->{members} });
	_stop_etcd($self->{etcd}) if $self->{etcd};
	return;
}

sub _stop_all
{
	my @members = @_;
	my (@leaders, @others);
	for my $m (@members)
	{
		my $r = defined $m->{pid}
		  ? $http->get("http://127.0.0.1:$m->{restport}/primary")
		  : { status => 599 };
		if ($r->{status} == 200) { push @leaders, $m }
		else { push @others, $m }
	}
	_stop($_) for @others, @leaders;
	return;
}

=pod

=item $pc->rest($name, $path)

GET on a member's REST API: (HTTP status, decoded JSON or undef).
Status 599 if the member does not answer.

=cut

sub rest
{
	my ($self, $name, $path) = @_;
	my $m = $self->member($name);
	my $r = $http->get("http://127.0.0.1:$m->{restport}$path");
	my $json = eval { decode_json($r->{content}) };
	return ($r->{status}, $json);
}

=pod

=item $pc->leader

The name of the member whose REST API says it is the running primary
holding the leader lock (GET /primary answers 200) and whose server has
left recovery, or undef.  Patroni answers 200 as soon as it has asked
its server to promote.

=cut

sub leader
{
	my ($self) = @_;
	for my $m (@{ $self->{members} })
	{
		next unless defined $m->{pid};
		my ($status) = $self->rest($m->{name}, '/primary');
		next unless $status == 200;
		my ($rc, $out) = $m->{node}->psql('postgres', 'SELECT pg_is_in_recovery()',
			timeout => 10, on_error_die => 0);
		return $m->{name} if defined $out && $out eq 'f';
	}
	return undef;
}

=pod

=item $pc->wait_leader($seconds, $not)

Waits up to $seconds (default 120) for a leader other than $not (if
given); returns its name, or undef.

=cut

sub wait_leader
{
	my ($self, $seconds, $not) = @_;
	my $found;
	$self->wait_until(
		sub {
			my $l = $self->leader;
			return 0 unless defined $l && (!defined $not || $l ne $not);
			$found = $l;
			return 1;
		},
		$seconds // 120, 'a leader');
	return $found;
}

=pod

=item $pc->members

The members as C<patronictl list -f json> shows them: a list of hashes
with keys Member, Host, Role (Leader, Sync Standby, Replica), State, TL
and C<Lag in MB>.  Empty if patronictl fails.

=cut

sub members
{
	my ($self) = @_;
	my $m = (grep { defined $_->{pid} } @{ $self->{members} })[0] // $self->{members}[0];
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ 'patronictl', '-c', $m->{yml}, 'list', '-f', 'json' ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	};
	my $list = eval { decode_json($out) };
	return ref $list eq 'ARRAY' ? @$list : ();
}

=pod

=item $pc->members_text

One line: each member with its role, state and timeline.

=cut

sub members_text
{
	my ($self) = @_;
	return join(', ',
		map { sprintf('%s %s %s TL%s', $_->{Member}, $_->{Role}, $_->{State}, $_->{TL} // '?') }
		  $self->members);
}

=pod

=item $pc->role($name)

A member's role as patronictl shows it, or ''.

=cut

sub role
{
	my ($self, $name) = @_;
	my ($m) = grep { $_->{Member} eq $name } $self->members;
	return $m ? $m->{Role} // '' : '';
}

=pod

=item $pc->sync_standby

The name of the member patronictl shows as C<Sync Standby>, or undef.

=cut

sub sync_standby
{
	my ($self) = @_;
	my ($m) = grep { ($_->{Role} // '') eq 'Sync Standby' } $self->members;
	return $m ? $m->{Member} : undef;
}

=pod

=item $pc->wait_replica($name, $seconds)

Waits until the member runs as a replica (Replica or Sync Standby) on
the leader's timeline.

=cut

sub wait_replica
{
	my ($self, $name, $seconds) = @_;
	return $self->wait_until(
		sub {
			my @m = $self->members;
			my ($l) = grep { $_->{Role} eq 'Leader' } @m;
			my ($r) = grep { $_->{Member} eq $name } @m;
			return $l && $r
			  && $r->{Role} =~ /^(Replica|Sync Standby)$/
			  && ($r->{State} // '') =~ /^(running|streaming)$/
			  && ($r->{TL} // -1) == ($l->{TL} // -2);
		},
		$seconds // 120, "$name a replica");
}

=pod

=item $pc->switchover($candidate)

C<patronictl switchover --force --leader LEADER --candidate CANDIDATE>;
returns (exit code, output).  patronictl exits with 0 also when Patroni
refused the switchover, so an output that says it failed counts as exit
code 1, unless the candidate becomes the leader within 60 s all the same
(Patroni answers before a slow switchover has ended).  When Patroni
could not write the switchover key into the DCS, nothing was switched,
and the switchover is asked for again, three times at most.

=cut

sub switchover
{
	my ($self, $candidate) = @_;
	my $leader = $self->leader // croak 'no leader to switch over from';
	my $m = $self->member($leader);
	my ($rc, $out, $err);
	for my $try (1 .. 3)
	{
		($out, $err) = ('', '');
		IPC::Run::run(
			[ 'patronictl', '-c', $m->{yml}, 'switchover', '--force',
				'--leader', $leader, '--candidate', $candidate, $self->{scope} ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
		$rc = $? >> 8;
		$rc = 1 if !$rc && "$out$err" =~ /switchover failed/i;
		Test::More::note("patronictl switchover to $candidate: exit $rc: $out$err");
		# Patroni gives its write of the switchover key 1 s, without a
		# retry; when that write failed nothing was switched and the
		# switchover may be asked for again
		last unless "$out$err" =~ /failed to write switchover key/i;
		usleep(2_000_000);
	}
	# Patroni answers 503 "Switchover failed" when the switchover did not
	# end within its own wait, which a loaded machine exceeds, and goes on
	# with it: what counts is whether the candidate becomes the leader
	if ($rc != 0 && ($self->wait_leader(60, $leader) // '') eq $candidate)
	{
		Test::More::note("... $candidate leads all the same: the switchover ended after patronictl's answer");
		$rc = 0;
	}
	return ($rc, "$out$err");
}

=pod

=item $pc->wait_until($code, $seconds, $what)

Calls $code every 200 ms until it returns true, at most $seconds;
returns whether it did.

=cut

sub wait_until
{
	my ($self, $code, $seconds, $what) = @_;
	my $deadline = time() + $seconds;
	while (time() < $deadline)
	{
		return 1 if $code->();
		usleep(200_000);
	}
	Test::More::diag("timed out after $seconds s waiting for $what");
	return 0;
}

=pod

=item LeafPatroni::start_ha_clients($dir, $conninfo, $until, @modes)

Starts one test/lib/leaf_ha_client.pl per mode ('segment' or
'snowflake'), on the tag C<order> with 10 ms between calls, until the
given epoch time; client I<i> writes C<$dir/client>I<i>C<.ids>.  Returns
their pids.

=cut

sub start_ha_clients
{
	my ($dir, $conninfo, $until, @modes) = @_;
	my $client = File::Basename::dirname(__FILE__) . '/leaf_ha_client.pl';
	my @pids;
	my $i = 0;
	for my $mode (@modes)
	{
		$i++;
		my $pid = fork();
		croak "fork: $!" unless defined $pid;
		if ($pid == 0)
		{
			exec($^X, $client, '--conninfo', $conninfo, '--mode', $mode,
				'--tag', 'order', '--until', $until, '--pause-ms', 10,
				'--out', "$dir/client$i.ids")
			  or POSIX::_exit(127);
		}
		push @pids, $pid;
	}
	return @pids;
}

=pod

=item LeafPatroni::read_ha_clients($dir)

What the clients of start_ha_clients wrote so far: (\@ids, \@errors),
with IDs as [start, end, tag, id, server port] and errors as [start, end,
state, message].

=cut

sub read_ha_clients
{
	my ($dir) = @_;
	my (@ids, @errs);
	for my $f (glob "$dir/client*.ids")
	{
		open my $fh, '<', $f or die "$f: $!";
		while (<$fh>)
		{
			chomp;
			if (/^(\d+) (\d+) ERR (\S+) ?(.*)$/) { push @errs, [ $1, $2, $3, $4 ] }
			elsif (/^(\d+) (\d+) (\S+) (\d+) (\d+)$/) { push @ids, [ $1, $2, $3, $4, $5 ] }
		}
		close $fh;
	}
	return (\@ids, \@errs);
}

=pod

=item LeafPatroni::lease_fleet_sql($seg_step, $comment)

The SQL that prepares the allocation database of a fleet whose shards
lease their worker IDs from it: the extension, the role C<leaf_fleet>
with only the privileges the fleet needs (segments and worker-ID
leases), and the tag C<order> with the given step.

=cut

sub lease_fleet_sql
{
	my ($seg_step, $comment) = @_;
	return qq[
CREATE EXTENSION leaf;
CREATE ROLE leaf_fleet LOGIN;
GRANT USAGE ON SCHEMA public TO leaf_fleet;
GRANT SELECT, UPDATE ON leaf_alloc TO leaf_fleet;
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline, leaf_worker_lease_fleet TO leaf_fleet;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_take, leaf_worker_lease_renew, leaf_worker_lease_release, leaf_worker_lease_give_up, leaf_worker_lease_copy_check, leaf_worker_lease_fleet_check, leaf_worker_lease_pick TO leaf_fleet;
SELECT leaf_segment_create('order', $seg_step, 1, '$comment');
];
}

=pod

=item LeafPatroni::new_lease_shard($name, $conninfo, @conf_lines)

A started shard (a PostgreSQL::Test::Cluster) that leases its worker ID
from the allocation database at $conninfo and draws its segments from
it: C<leaf.worker_id_source = 'database'>, C<leaf.alloc_failover =
'synchronous'>, C<leaf.node_address> C<$name.example:5432>,
C<leaf.heartbeat_interval> 500ms (a lease of 2 s),
C<leaf.max_clock_drift_ms> 2s, C<leaf.wait_timeout> 1s, and
@conf_lines.  It records
every call the load of start_lease_load makes: C<sf_ids> (the snowflake
IDs), C<sf_calls> (each snowflake call: start, end, IDs, SQLSTATE and
message if it failed) and C<seg_ids> (each segment call, likewise).

=cut

sub new_lease_shard
{
	my ($name, $conninfo, @conf) = @_;
	my $s = LeafTest::new_node($name, { extension => 0 },
		"leaf.worker_id_source = 'database'",
		"leaf.alloc_conninfo = '$conninfo'",
		"leaf.alloc_failover = 'synchronous'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '2s'",
		"leaf.wait_timeout = '1s'",
		"max_connections = 30", @conf);
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
	return $s;
}

=pod

=item LeafPatroni::start_lease_load($shard, $sf_rate, $seg_rate)

The load of a shard of new_lease_shard: two pgbench clients calling
C<leaf_snowflake_nextvals(20)> at $sf_rate calls/s in all and one
calling C<leaf_segment_nextval('order')> at $seg_rate calls/s, for up to
600 s.  Returns the pgbench handles, for stop_lease_load.

=item LeafPatroni::stop_lease_load(@handles)

Stops them.

=cut

sub start_lease_load
{
	my ($s, $sf_rate, $seg_rate) = @_;
	return (
		LeafTest::start_pgbench($s, 'postgres', "SELECT call_sf();\n",
			[ '-c', 2, '-j', 1, '-R', $sf_rate, '-T', 600 ]),
		LeafTest::start_pgbench($s, 'postgres', "SELECT call_seg();\n",
			[ '-c', 1, '-j', 1, '-R', $seg_rate, '-T', 600 ]));
}

sub stop_lease_load
{
	for my $b (@_)
	{
		$b->{run}->signal('TERM');
		eval { $b->{run}->finish };
	}
	return;
}

=pod

=item $pc->wait_serving($shard, $since, $seconds)

Waits (default 120 s) until a shard of new_lease_shard serves snowflake
IDs again: a successful call started after its last failed one and after
$since (epoch seconds).  Returns whether it did.

=cut

sub wait_serving
{
	my ($self, $s, $since, $seconds) = @_;
	return $self->wait_until(
		sub {
			return $s->safe_psql('postgres', qq[
SELECT coalesce(max(started_at) FILTER (WHERE sqlstate IS NULL), '-infinity')
       > greatest(coalesce(max(done_at) FILTER (WHERE sqlstate IS NOT NULL), '-infinity'),
                  to_timestamp($since))
  FROM sf_calls]) eq 't';
		},
		$seconds // 120, $s->name . ' to serve again');
}

=pod

=item $pc->check_lease_fleet(\@shards, \%worker_ids, \@events, $t_load, $t_end)

The checks of a fleet of new_lease_shard shards once their load has
stopped: every shard still holds its worker ID (%worker_ids, by shard
name) and every one of its snowflake IDs carries it; the current
leader holds each shard's row, with a mark at or above the shard's
latest ID; no snowflake ID and no segment ID repeats over all shards;
failed snowflake calls failed with LF102 and nothing else; no segment
call failed.  Then, as diagnostics, per event (@events: [name, {at,
promoted, leader, shards}], in order) and shard, the time without
snowflake service and the calls that failed with LF102, and the totals
over the load from $t_load to $t_end.

=cut

sub check_lease_fleet
{
	my ($self, $shards, $wid, $events, $t_load, $t_end) = @_;
	my $final = $self->leader;
	Test::More::is(join(',', map { LeafTest::sf_status($_, 'worker_id') } @$shards),
		join(',', map { $wid->{ $_->name } } @$shards),
		'every shard still holds its worker ID at the end');

	my (@all_sf, @all_seg);
	for my $s (@$shards)
	{
		my $name = $s->name;
		my @ids = grep { /^\d+$/ } split /\n/, $s->safe_psql('postgres', 'SELECT id FROM sf_ids');
		my @other = grep { (($_ >> 12) & 1023) != $wid->{$name} } @ids;
		Test::More::is(scalar(@other), 0,
			"$name: every one of its " . scalar(@ids) . " snowflake IDs carries its worker ID $wid->{$name}");
		push @all_sf, @ids;
		push @all_seg, grep { /^\d+$/ } split /\n/,
		  $s->safe_psql('postgres', 'SELECT id FROM seg_ids WHERE id IS NOT NULL');

		# the final leader's row bounds every ID the shard handed out
		my $max_ms = $s->safe_psql('postgres', q[
SELECT (extract(epoch FROM (leaf_snowflake_decode(max(id))).ts) * 1000)::bigint FROM sf_ids]);
		my $row = $self->node($final)->safe_psql('postgres', qq[
SELECT holder_address || '|' || hwm_ms || '|' || timeline
  FROM leaf_worker_lease WHERE worker_id = $wid->{$name}]);
		my ($addr, $hwm, $tl) = split /\|/, $row;
		Test::More::is($addr, "$name.example:5432", "$name: the final leader $final holds its row");
		Test::More::cmp_ok($hwm, '>=', $max_ms,
			"$name: the row's mark ($hwm) is at or above its latest ID's timestamp ($max_ms)");
	}
	Test::More::is(LeafTest::count_repeats(\@all_sf), 0,
		'no snowflake ID repeats over the ' . scalar(@all_sf) . ' IDs of all shards');
	Test::More::is(LeafTest::count_repeats(\@all_seg), 0,
		'no segment ID repeats over the ' . scalar(@all_seg) . ' IDs of all shards');
	_check_lease_errors($shards);
	my $total_lf102 = _lease_event_gaps($events, $t_end);
	my $sf_calls = 0;
	$sf_calls += $_->safe_psql('postgres', 'SELECT count(*) FROM sf_calls') for @$shards;
	Test::More::diag(sprintf('%d snowflake IDs and %d segment IDs over %.0fs of load; %d snowflake calls, %d failed with LF102',
		scalar(@all_sf), scalar(@all_seg), $t_end - $t_load, $sf_calls, $total_lf102));
	return;
}

# failed snowflake calls failed with LF102 only; no segment call failed
sub _check_lease_errors
{
	my ($shards) = @_;
	my %other_errors;
	my $seg_failed = 0;
	for my $s (@$shards)
	{
		for my $line (grep { length } split /\n/, $s->safe_psql('postgres', q[
SELECT sqlstate || '|' || count(*) || '|' || min(message)
  FROM sf_calls WHERE sqlstate IS NOT NULL AND sqlstate <> 'LF102' GROUP BY sqlstate]))
		{
			my ($st, $n, $msg) = split /\|/, $line, 3;
			$other_errors{$st} += $n;
			Test::More::diag($s->name . ": $n snowflake calls failed with $st: $msg");
		}
		for my $line (grep { length } split /\n/, $s->safe_psql('postgres', q[
SELECT sqlstate || '|' || count(*) || '|' || min(message)
  FROM seg_ids WHERE sqlstate IS NOT NULL GROUP BY sqlstate]))
		{
			my ($st, $n, $msg) = split /\|/, $line, 3;
			$seg_failed += $n;
			Test::More::diag($s->name . ": $n segment calls failed with $st: $msg");
		}
	}
	Test::More::is(join(',', sort keys %other_errors), '',
		'failed snowflake calls failed with LF102 and nothing else');
	Test::More::is($seg_failed, 0, 'no segment call failed');
	return;
}

# Per event and shard: the longest time between two successful snowflake
# calls from just before the event until the next one (the time without
# service), and the calls that failed meanwhile.  Returns the calls that
# failed with LF102 over all events.
sub _lease_event_gaps
{
	my ($events, $t_end) = @_;
	my $total_lf102 = 0;
	for my $i (0 .. $#$events)
	{
		my ($ev, $e) = @{ $events->[$i] };
		my $until = $i < $#$events ? $events->[ $i + 1 ][1]{at} : $t_end;
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
		Test::More::diag(sprintf('%s: new leader %s after %.1fs; %s', $ev, $e->{leader}, $e->{promoted},
			join('; ', @parts)));
	}
	return $total_lf102;
}

=pod

=back

=cut

END
{
	local $?;
	_stop_all(@all_members);
	_stop_etcd($_) for @all_etcds;
}

1;
