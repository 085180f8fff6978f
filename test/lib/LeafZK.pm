# LeafZK: start and stop real ZooKeeper servers (standalone or a 3-node
# ensemble) on the loopback interface for leaf's TAP tests.
#
#   my $zk = LeafZK->new(nodes => 1);     # or nodes => 3
#   $zk->hosts;                           # "127.0.0.1:p1[,127.0.0.1:p2,...]"
#   $zk->stop_node(1); $zk->start_node(1);
#   $zk->wipe_node(1);                    # stopped server loses its data
#   $zk->stop;                            # also done at exit, even on die
#   my $node = $zk->pg_node('n1', root => '/leaf/x');   # leaf on this ZooKeeper
#   LeafZK::wait_decided($node);          # the worker has decided ready or not
#   LeafZK::status($node, 'worker_id');   # columns of leaf_snowflake_status
#   LeafZK::start_in_turn(@nodes);        # the last one gets the highest worker ID
#   $zk->outrun_sessions(@nodes);         # a restored server will refuse their sessions
#   LeafZK::wait_registered_again($root, \@nodes, \@log_offsets, $t0, 90);
#   $zk->cli('get', '/leaf/x/forever');   # one zkCli command, its output
#   $zk->cli_script("set /a 1\nset /a 2\n");  # several, one session
#   my $p = $zk->proxy;                   # TCP proxy to server 1
#   $p->{hosts}; $zk->freeze_proxy($p); $zk->thaw_proxy($p);
#   my $load = LeafZK::start_load(100, @nodes);   # IDs and status probes
#   my $r = LeafZK::stop_load($load, @nodes);     # repeats, probes, ...
#
# Servers run from Debian's zookeeper package (QuorumPeerMain), each with
# its own data directory under a temporary directory and free ports.
package LeafZK;

use strict;
use warnings;

use Carp;
use File::Path qw(make_path);
use IO::Select;
use IO::Socket::INET;
use IPC::Run;
use POSIX ();
use Time::HiRes qw(usleep time);

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use LeafTest;
use Test::More ();

my @all_servers;

my $classpath = '/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar';

sub new
{
	my ($class, %opts) = @_;
	my $n = $opts{nodes} // 1;
	croak "nodes must be 1 or 3" unless $n == 1 || $n == 3;

	my $self = bless { base => PostgreSQL::Test::Utils::tempdir('zk'), servers => [] }, $class;
	for my $i (1 .. $n)
	{
		push @{ $self->{servers} }, {
			id => $i,
			client_port => PostgreSQL::Test::Cluster::get_free_port(),
			peer_port => ($n > 1 ? PostgreSQL::Test::Cluster::get_free_port() : 0),
			election_port => ($n > 1 ? PostgreSQL::Test::Cluster::get_free_port() : 0),
			pid => undef,
		};
	}
	for my $s (@{ $self->{servers} })
	{
		my $dir = "$self->{base}/z$s->{id}";
		make_path("$dir/data");
		my $cfg = "tickTime=1000\ninitLimit=10\nsyncLimit=5\n"
		  . "dataDir=$dir/data\nclientPort=$s->{client_port}\n"
		  . "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
		  . "4lw.commands.whitelist=srvr,stat\nmaxClientCnxns=0\n"
		  . "minSessionTimeout=1000\nmaxSessionTimeout=60000\n"
		  # no fsync per write: a test kills ZooKeeper's process, never
		  # the machine, and what was written survives in the page
		  # cache; with fsync, a machine busy writing elsewhere held a
		  # write past the 1 s Patroni gives some of its writes
		  . "forceSync=no\n";
		if ($n > 1)
		{
			$cfg .= "server.$_->{id}=127.0.0.1:$_->{peer_port}:$_->{election_port}\n"
			  for @{ $self->{servers} };
			open my $m, '>', "$dir/data/myid" or die $!;
			print $m "$s->{id}\n";
			close $m;
		}
		open my $f, '>', "$dir/zoo.cfg" or die $!;
		print $f $cfg;
		close $f;
		$s->{dir} = $dir;
	}
	push @all_servers, @{ $self->{servers} };

	$self->start_node($_->{id}, 1) for @{ $self->{servers} };
	$self->wait_ready($_->{id}) for @{ $self->{servers} };
	return $self;
}

sub hosts
{
	my ($self) = @_;
	return join(',', map { "127.0.0.1:$_->{client_port}" } @{ $self->{servers} });
}

sub server
{
	my ($self, $id) = @_;
	return (grep { $_->{id} == $id } @{ $self->{servers} })[0];
}

# Send a four-letter command, return the answer ('' if none).
sub four_letter
{
	my ($self, $id, $cmd) = @_;
	my $s = $self->server($id);
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $s->{client_port},
		Proto => 'tcp',
		Timeout => 2) or return '';
	print $sock $cmd;

	# a starting server may accept and not answer: never block for long
	my $answer = '';
	my $sel = IO::Select->new($sock);
	my $deadline = time() + 2;
	while (time() < $deadline && $sel->can_read(0.2))
	{
		my $n = sysread($sock, my $buf, 4096);
		last unless $n;
		$answer .= $buf;
	}
	close $sock;
	return $answer;
}

sub mode
{
	my ($self, $id) = @_;
	my $answer = $self->four_letter($id, 'srvr');
	return $answer =~ /^Mode: (\w+)/m ? $1 : '';
}

sub start_node
{
	my ($self, $id, $nowait) = @_;
	my $s = $self->server($id);
	croak "ZooKeeper server $id already running" if defined $s->{pid};

	# a port still in use would make the new server exit at once
	my $probe = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
		PeerPort => $s->{client_port}, Proto => 'tcp', Timeout => 1);
	croak "port $s->{client_port} is in use" if $probe;

	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDIN, '<', '/dev/null';
		open STDOUT, '>>', "$s->{dir}/zk.log";
		open STDERR, '>&', \*STDOUT;
		exec('java', '-Xmx64m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1',
			'-cp', $classpath,
			'org.apache.zookeeper.server.quorum.QuorumPeerMain',
			"$s->{dir}/zoo.cfg")
		  or POSIX::_exit(127);
	}
	$s->{pid} = $pid;
	$self->wait_ready($id) unless $nowait;
	return;
}

# A server is ready once it serves as standalone, leader or follower.  An
# election of an ensemble whose servers all started at once can take
# several rounds on a loaded machine: 120 s unless told.
sub wait_ready
{
	my ($self, $id, $secs) = @_;
	my $s = $self->server($id);
	$secs //= 120;
	my $deadline = time() + $secs;
	while (time() < $deadline)
	{
		croak "ZooKeeper server $id exited, see $s->{dir}/zk.log"
		  if waitpid($s->{pid}, POSIX::WNOHANG()) == $s->{pid};
		return 1 if $self->mode($id) =~ /^(standalone|leader|follower)$/;
		usleep(100_000);
	}
	croak "ZooKeeper server $id not ready after $secs s, see $s->{dir}/zk.log";
}

sub _kill
{
	my ($s) = @_;
	return unless defined $s->{pid};
	kill 'TERM', $s->{pid};
	my $deadline = time() + 10;
	while (time() < $deadline)
	{
		last if waitpid($s->{pid}, POSIX::WNOHANG()) == $s->{pid};
		usleep(50_000);
	}
	if (kill(0, $s->{pid}))
	{
		kill 'KILL', $s->{pid};
		waitpid($s->{pid}, 0);
	}
	$s->{pid} = undef;
	return;
}

sub stop_node
{
	my ($self, $id) = @_;
	_kill($self->server($id));
	return;
}

# Remove the data of a stopped server, as a restore to an empty state would.
sub wipe_node
{
	my ($self, $id) = @_;
	my $s = $self->server($id);
	croak "ZooKeeper server $id is running" if defined $s->{pid};
	File::Path::rmtree("$s->{dir}/data/version-2");
	return;
}

# Keep a copy of a stopped server's data under NAME, and put it back
# (a restore from that snapshot).
sub save_node
{
	my ($self, $id, $name) = @_;
	my $s = $self->server($id);
	croak "ZooKeeper server $id is running" if defined $s->{pid};
	File::Path::rmtree("$s->{dir}/data/version-2.$name");
	system('cp', '-a', "$s->{dir}/data/version-2", "$s->{dir}/data/version-2.$name") == 0
	  or croak "saving the data of ZooKeeper server $id failed";
	return;
}

sub restore_node
{
	my ($self, $id, $name) = @_;
	my $s = $self->server($id);
	$self->wipe_node($id);
	system('cp', '-a', "$s->{dir}/data/version-2.$name", "$s->{dir}/data/version-2") == 0
	  or croak "restoring the data of ZooKeeper server $id failed";
	return;
}

sub stop
{
	my ($self) = @_;
	_kill($_) for @{ $self->{servers} };
	return;
}

# A Postgres node (initialised, not started) with leaf preloaded, taking
# its snowflake worker ID from this ZooKeeper.  Options: root (leaf.zk_root,
# default /leaf/test; '' for none), wait_timeout (default 20s), extra (more conf lines),
# hosts (leaf.zk_hosts, e.g. a proxy's, else this ZooKeeper's), install_path
# (another PostgreSQL installation, as PostgreSQL::Test::Cluster takes it),
# init (a list of options for init).
sub pg_node
{
	my ($self, $name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		defined $opts{install_path} ? (install_path => $opts{install_path}) : ());
	my $hosts = $opts{hosts} // $self->hosts;
	my $conf = "shared_preload_libraries = 'leaf'\n"
	  . "leaf.zk_hosts = '$hosts'\n"
	  . "leaf.heartbeat_interval = '500ms'\n"
	  . "leaf.max_clock_drift_ms = '1s'\n"
	  . "leaf.wait_timeout = '" . ($opts{wait_timeout} // '20s') . "'\n";
	# leaf.zk_root has no default: root => '' leaves it out
	my $root = $opts{root} // '/leaf/test';
	$conf .= "leaf.zk_root = '$root'\n" if $root ne '';
	$conf .= $opts{extra} // '';

	$node->init(defined $opts{init} ? @{ $opts{init} } : ());
	$node->append_conf('postgresql.conf', $conf);
	return $node;
}

# A node of pg_node, started, with the extension created in database
# postgres.
sub start_pg_node
{
	my ($self, $name, %opts) = @_;
	my $node = $self->pg_node($name, %opts);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
	return $node;
}

# Wait until the snowflake worker of a node has decided: ready, or not
# ready with a reason other than still starting.
sub wait_decided
{
	my ($node) = @_;
	return $node->poll_query_until('postgres',
		q[SELECT ready OR not_ready_reason NOT LIKE 'the snowflake worker is starting%' FROM leaf_snowflake_status]);
}

# The state file of a node's data directory: a hash of its "key value"
# lines (worker_id, source, ...), empty if there is none.
sub state_file
{
	my ($node) = @_;
	my $path = $node->data_dir . '/leaf_snowflake.state';
	return {} unless -f $path;
	my %f = map { /^(\S+) (.*)$/ ? ($1 => $2) : () }
	  split /\n/, PostgreSQL::Test::Utils::slurp_file($path);
	return \%f;
}

# Wait until a node's state file stands in for ZooKeeper with worker ID
# $wid (source "zookeeper"); false if it does not within the test timeout.
sub wait_state_file_names
{
	my ($node, $wid) = @_;
	return LeafTest::wait_until(sub {
			my $f = state_file($node);
			($f->{worker_id} // '') eq $wid && ($f->{source} // '') eq 'zookeeper';
		},
		"the state file to name worker ID $wid");
}

# Columns of a node's leaf_snowflake_status, as psql prints them.
sub status
{
	my ($node, $cols) = @_;
	return $node->safe_psql('postgres', "SELECT $cols FROM leaf_snowflake_status");
}

# Start every node but the last (in any order), wait until they hold
# worker IDs, then start the last one, so that it registers last and gets
# the highest worker ID; each node creates the extension, and must become
# ready (one test each).
sub start_in_turn
{
	my (@nodes) = @_;
	my $last = pop @nodes;
	for my $node (@nodes)
	{
		$node->start;
		$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
	}
	$_->poll_query_until('postgres',
		'SELECT worker_id IS NOT NULL FROM leaf_snowflake_status')
	  for @nodes;
	$last->start;
	$last->safe_psql('postgres', 'CREATE EXTENSION leaf');
	for my $node (@nodes, $last)
	{
		Test::More::ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
			$node->name . ' is ready');
	}
	return;
}

# Many ZooKeeper transactions, seen by the nodes' sessions (each node has
# heartbeated since): a server restored empty then lags behind what those
# sessions have seen, and refuses them for a while ("client must try
# another server") instead of expiring them.
sub outrun_sessions
{
	my ($self, @nodes) = @_;
	$self->cli_script("create /burst\n" . ("set /burst x\n" x 400));
	my $hb = $nodes[0]->safe_psql('postgres', 'SELECT clock_timestamp()');
	$_->poll_query_until('postgres',
		"SELECT last_heartbeat > '$hb'::timestamptz + interval '600 ms' FROM leaf_snowflake_status")
	  for @nodes;
	return;
}

# Wait until every node has registered again under $root (a log line after
# its log offset) and serves from ZooKeeper, connected; at most $seconds.
# Returns { node index => seconds after $t0 }, without the nodes that did
# not.
sub wait_registered_again
{
	my ($root, $nodes, $offsets, $t0, $seconds) = @_;
	my %healed;
	my $deadline = time() + $seconds;
	while (keys(%healed) < @$nodes && time() < $deadline)
	{
		for my $i (0 .. $#$nodes)
		{
			next if defined $healed{$i};
			my $node = $nodes->[$i];
			next unless $node->log_contains(qr/registered \S+ as "\Q$root\E\/forever\//,
				$offsets->[$i]);
			next unless status($node,
				q[ready AND zk_state = 'connected' AND worker_id_source = 'zookeeper'])
			  eq 't';
			$healed{$i} = time() - $t0;
		}
		usleep(200_000);
	}
	return \%healed;
}

# Run one ZooKeeper command line (as zkCli would) against server 1 and
# return what it printed (stdout and stderr), without authentication.
sub cli
{
	my ($self, @cmd) = @_;
	my $s = $self->{servers}[0];
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'java', '-Xmx64m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1',
			'-cp', $classpath, 'org.apache.zookeeper.ZooKeeperMain',
			'-server', "127.0.0.1:$s->{client_port}", @cmd ],
		'<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout(60));
	return $out . $err;
}

# Run several ZooKeeper commands (one a line) in one client session
# against server 1, return what it printed.
sub cli_script
{
	my ($self, $script) = @_;
	my $s = $self->{servers}[0];
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'java', '-Xmx64m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1',
			'-cp', $classpath, 'org.apache.zookeeper.ZooKeeperMain',
			'-server', "127.0.0.1:$s->{client_port}" ],
		'<', \"${script}quit\n", '>', \$out, '2>', \$err,
		IPC::Run::timeout(120));
	return $out . $err;
}

my @all_proxies;

# A TCP proxy on a free loopback port in front of server 1.  Freezing it
# (SIGSTOP) cuts the clients off without closing their connections, as a
# network partition does.
sub proxy
{
	my ($self) = @_;
	my $target = $self->{servers}[0]{client_port};
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
		LocalPort => $port, Listen => 16, ReuseAddr => 1, Proto => 'tcp')
	  or croak "proxy listen: $!";
	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		# The child never goes back into the test: an error in it must not
		# run the test's END blocks, which would stop the test's nodes.
		eval { proxy_loop($listen, $target) };
		POSIX::_exit(1);
	}
	close $listen;
	my $p = { pid => $pid, port => $port, hosts => "127.0.0.1:$port" };
	push @all_proxies, $p;
	return $p;
}

# The proxy's child: passes bytes both ways until it is killed.
sub proxy_loop
{
	my ($listen, $target) = @_;
	my $sel = IO::Select->new($listen);
	my %peer;
	while (1)
	{
		for my $fh ($sel->can_read(1))
		{
			if ($fh == $listen)
			{
				my $c = $listen->accept or next;
				my $u = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
					PeerPort => $target, Proto => 'tcp');
				if (!$u) { close $c; next; }
				$peer{$c} = $u;
				$peer{$u} = $c;
				$sel->add($c, $u);
				next;
			}
			# both ends were readable and the other one closed the pair
			my $o = $peer{$fh} or next;
			my $n = sysread($fh, my $buf, 65536);
			if (!$n || !defined syswrite($o, $buf))
			{
				$sel->remove($fh, $o);
				delete @peer{ $fh, $o };
				close $fh;
				close $o;
			}
		}
	}
}

sub freeze_proxy { my ($self, $p) = @_; kill 'STOP', $p->{pid}; return; }
sub thaw_proxy { my ($self, $p) = @_; kill 'CONT', $p->{pid}; return; }

# The pids of a node's postmaster children whose process title matches $re.
sub child_pids
{
	my ($node, $re) = @_;
	my $f = $node->data_dir . '/postmaster.pid';
	return () unless -f $f;
	my ($postmaster) = split /\n/, slurp_file($f);
	my @pids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		my ($p) = $stat =~ m{/proc/(\d+)/stat};
		open my $fh, '<', $stat or next;
		my $line = <$fh> // '';
		close $fh;
		my ($ppid) = $line =~ /^\d+ \(.*\) \S (\d+)/;
		next unless defined $ppid && $ppid == $postmaster;
		my $cmd = eval { slurp_file("/proc/$p/cmdline") } // '';
		push @pids, $p if $cmd =~ $re;
	}
	return @pids;
}

# The pid of a node's snowflake worker, or ''.
sub worker_pid
{
	my ($node) = @_;
	my ($pid) = child_pids($node, qr/leaf snowflake worker/);
	return $pid // '';
}

# Run leaf_snowflake_nextvals($n) on every node at the same time; return
# how many IDs came back, and how many of them were repeats.
sub repeats_at_once
{
	my ($n, @nodes) = @_;
	my @h = map {
		LeafTest::start_psql_script($_, 'postgres',
			"SELECT leaf_snowflake_nextvals($n);\n")
	} @nodes;
	my @ids;
	for my $h (@h)
	{
		my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
		push @ids, ($out =~ /^(\d+)$/mg);
	}
	my $repeats = LeafTest::count_repeats(\@ids);
	Test::More::note('IDs from ' . scalar(@nodes) . ' nodes: ' . scalar(@ids)
		  . ", repeated: $repeats");
	return (scalar(@ids), $repeats);
}

# Keep every node busy until stop_load, with two clients per node: one
# calls leaf_snowflake_nextvals($n) every 10 ms (waiting as callers do);
# the other, every 20 ms, calls probe_call(), which reads the status's
# "ready" and then, in the same statement, makes one leaf_snowflake() call
# that may not wait.  Errors do not stop the clients.  Creates the
# function probe_call in each node's database postgres.
sub start_load
{
	my ($n, @nodes) = @_;
	my $stop = "SELECT to_regclass('stop_load') IS NOT NULL AS stop \\gset\n"
	  . "\\if :stop\n\\q\n\\endif\n";
	my %script = (
		ids => "SELECT leaf_snowflake_nextvals($n);\nSELECT pg_sleep(0.01);\n$stop",
		probe => "SELECT 'P', (extract(epoch FROM clock_timestamp()) * 1000)::bigint, * FROM probe_call();\n"
		  . "SELECT pg_sleep(0.02);\n$stop");
	my @load;
	for my $node (@nodes)
	{
		$node->safe_psql('postgres', q[
DROP TABLE IF EXISTS stop_load;
CREATE OR REPLACE FUNCTION probe_call(OUT ready bool, OUT state text, OUT id bigint)
LANGUAGE plpgsql SET leaf.wait_timeout = '1ms' AS $$
BEGIN
	SELECT s.ready INTO ready FROM leaf_snowflake_status s;
	BEGIN
		id := leaf_snowflake();
		state := 'ok';
	EXCEPTION WHEN OTHERS THEN
		state := SQLSTATE;
	END;
END $$]);

		# output to files: a pipe nobody reads would stop the clients
		my @clients;
		for my $kind ('ids', 'probe')
		{
			my $base = $node->basedir . "/load_$kind";
			my $file = LeafTest::write_script($node, "load_$kind.sql",
				"\\set VERBOSITY verbose\n" . ($script{$kind} x 20000));
			my %h = (out => "$base.out", err => "$base.err");
			$h{run} = IPC::Run::start(
				[ $node->installed_command('psql'), '-XAtq', '-h', $node->host,
					'-p', $node->port, '-d', 'postgres', '-f', $file ],
				'<', \undef, '>', $h{out}, '2>', $h{err},
				IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
			push @clients, \%h;
		}
		push @load, \@clients;
	}
	return \@load;
}

# Stop the clients of start_load (one entry per node, in the order of
# @nodes) and sum up what they got: how many IDs, how many of them were
# repeats, in how many milliseconds two nodes issued IDs with the same
# worker ID, how often a node issued IDs with a worker ID again after
# another node had (0 unless two nodes used it at once), and per node the
# probes as [ms, ready, state, ID] (state: "ok" or the SQLSTATE; ID '' if
# none).
sub stop_load
{
	my ($load, @nodes) = @_;
	$_->safe_psql('postgres', 'CREATE TABLE IF NOT EXISTS stop_load ()') for @nodes;
	# the bits of worker ID and sequence of the nodes' layout (all nodes
	# of a root share one; a release before 1.3 has only the default)
	my ($rc, $bits) = $nodes[0]->psql('postgres',
		q[SELECT worker_bits || ' ' || sequence_bits FROM leaf_snowflake_layout()]);
	my ($wbits, $sbits) = $rc == 0 && $bits =~ /^(\d+) (\d+)$/ ? ($1, $2) : (10, 12);
	my $nw = 1 << $wbits;
	my (@ids, %owner, @probes);
	my $shared = 0;
	for my $i (0 .. $#$load)
	{
		my (@mine, @p, %errs);
		for my $h (@{ $load->[$i] })
		{
			$h->{run}->finish;
			my $out = slurp_file($h->{out});
			my $err = slurp_file($h->{err});
			$errs{$1}++ while $err =~ /^(?:psql:\S+ )?ERROR:\s+(\w+)/mg;
			push @mine, ($out =~ /^(\d+)$/mg);
			for my $line (split /\n/, $out)
			{
				next unless $line =~ /^P\|(\d+)\|([tf])\|(\w+)\|(\d*)$/;
				push @p, [ $1, $2, $3, $4 ];
				push @mine, $4 if $4 ne '';
			}
		}
		Test::More::note($nodes[$i]->name . ': ' . scalar(@mine) . ' IDs, '
			  . scalar(@p) . ' probes, errors of nextvals: '
			  . (join(', ', map { "$_ $errs{$_}" } sort keys %errs) || 'none'));
		push @probes, \@p;
		for my $id (@mine)
		{
			my $key = ($id >> ($wbits + $sbits)) * $nw + (($id >> $sbits) & ($nw - 1));
			my $o = $owner{$key};
			if (!defined $o) { $owner{$key} = $i; }
			elsif ($o != $i && $o >= 0) { $shared++; $owner{$key} = -1; }
		}
		push @ids, @mine;
	}
	my $repeats = LeafTest::count_repeats(\@ids);

	# per worker ID, in the order of time: a node whose IDs come in two
	# runs with another node's in between used it at the same time
	my (%runs, %users);
	for my $key (sort { $a <=> $b } keys %owner)
	{
		my $wid = $key % $nw;
		my $o = $owner{$key};
		$users{$wid}{$o} = 1;
		push @{ $runs{$wid} }, $o
		  unless @{ $runs{$wid} // [] } && $runs{$wid}[-1] == $o;
	}
	my $interleaved = 0;
	$interleaved += @{ $runs{$_} } - keys %{ $users{$_} } for keys %runs;

	Test::More::note('IDs from ' . scalar(@nodes) . ' nodes: ' . scalar(@ids)
		  . ", repeated: $repeats, milliseconds shared by two nodes with one worker ID: $shared"
		  . ", worker IDs used by two nodes in turn: $interleaved");
	return { ids => scalar(@ids), repeats => $repeats, shared_ms => $shared,
		interleaved => $interleaved, probes => \@probes };
}

# One check per node (in the order of @nodes) that wait_registered_again
# found it registered again and serving; returns the seconds the slowest
# took (999 when one did not).
sub check_healed
{
	my ($healed, @nodes) = @_;
	for my $i (0 .. $#nodes)
	{
		Test::More::ok(defined $healed->{$i},
			sprintf('%s registered again and serves, %.1f s after ZooKeeper was back',
				$nodes[$i]->name, $healed->{$i} // -1));
	}
	return LeafTest::max_of(map { $_ // 999 } @{$healed}{ 0 .. $#nodes });
}

# The checks of a result of stop_load that hold in every test: IDs were
# generated, no two nodes issued IDs with one worker ID in the same
# millisecond or in turn, and no ID is repeated.
sub check_load
{
	my ($r) = @_;
	Test::More::cmp_ok($r->{ids}, '>', 0, "IDs were generated ($r->{ids})");
	Test::More::is($r->{shared_ms}, 0,
		'no two nodes issued IDs with the same worker ID in the same millisecond');
	Test::More::is($r->{interleaved}, 0,
		'no worker ID was used by two nodes in turn');
	Test::More::is($r->{repeats}, 0, 'no ID is repeated');
	return;
}

END
{
	local $?;
	for my $p (@all_proxies)
	{
		kill 'KILL', $p->{pid};
		waitpid($p->{pid}, 0);
	}
	_kill($_) for @all_servers;
}

1;
