
# Copyright (c) leaf contributors

=pod

=head1 NAME

LeafProxy - a loopback TCP proxy that can cut its connections

=head1 SYNOPSIS

  use LeafProxy;
  my $p = LeafProxy->start(name => 'shard1-zk2', upstream => $zk_port,
      log => "$dir/proxy-shard1-zk2.log");
  # in front of a PostgreSQL server: its watch logs in as this role
  LeafProxy->start(name => 'shard1-alloc1', upstream => $port, pg_user => 'postgres');
  "127.0.0.1:" . $p->port;            # what the shard connects to
  $p->set('blackhole');               # pass reset blackhole up_only down_only
  $p->set('reset', 10);               # back to pass by itself after 10 s
  $p->status;                         # "mode blackhole conns 2 held 1"
  $p->set('pass');
  $p->stop;                           # also done at exit

=head1 DESCRIPTION

One process per proxy (this file run by perl, see main), listening on a
free loopback port and forwarding every connection to one upstream port
on 127.0.0.1.  Only the connections made through it are cut: the
upstream servers still reach each other, and the shard's clients still
reach the shard.  The modes:

=over

=item pass

Bytes are forwarded both ways.  Connections held by an earlier mode go
on where they stopped, and those accepted meanwhile are connected to the
upstream now.

=item reset

Every connection is closed with a reset (SO_LINGER 0), and the listening
socket is closed, so that new connections are refused, as a firewall that
rejects with a reset would.  Leaving the mode listens again.

=item blackhole

Half-open: connections are accepted and kept, nothing is read from or
written to either side, and no reset is sent.  The peers' own timeouts
must find out.  New connections are accepted too, but not connected
upstream (their handshake never reached the server).  The kernel under
the proxy still acknowledges what it buffers, so TCP's own timers
(keepalives, tcp_user_timeout) do not fire: only the peers'
application-level deadlines do.

=item up_only, down_only

One-way: only the shard's bytes to the upstream (up_only) or only the
upstream's bytes to the shard (down_only) are forwarded; the other
direction is held as in blackhole.  New connections are held as in
blackhole, since a handshake needs both directions.

=back

Control: one line per connection to the control port, answered with
one line: "mode M [S]" sets the mode and answers "ok M" (with S, the
proxy goes back to pass by itself S seconds later, on time whatever its
parent is busy with, unless another mode is set first); "stat" answers
"mode M conns N held H" (N connections, H of them accepted but not
connected upstream).

=cut

package LeafProxy;

use strict;
use warnings;

use Carp;
use File::Basename;
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Socket qw(SOL_SOCKET SO_LINGER);
use Time::HiRes qw(time sleep);

my %MODES = map { $_ => 1 } qw(pass reset blackhole up_only down_only);

# at most this much is read ahead of a peer that does not read
my $MAX_BUF = 256 * 1024;

my @started;

# ---------- the parent's side ----------

sub start
{
	my ($class, %o) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $ctl = PostgreSQL::Test::Cluster::get_free_port();
	my $log = $o{log} // '/dev/null';
	my $pid = fork();
	croak "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		# a process of its own: nothing of the run's (END blocks, handles
		# of servers) goes with it
		open STDOUT, '>>', $log or POSIX::_exit(1);
		open STDERR, '>&', \*STDOUT or POSIX::_exit(1);
		exec($^X, '-I', dirname(__FILE__), '-MLeafProxy', '-e', 'LeafProxy::main(@ARGV)',
			$port, $o{upstream}, $ctl, $o{name}, $o{pg_user} // '')
		  or POSIX::_exit(127);
	}
	my $self = bless { pid => $pid, port => $port, ctl => $ctl, name => $o{name},
		upstream => $o{upstream}, mode => 'pass' }, $class;
	push @started, $self;
	my $deadline = time() + 30;
	while (time() < $deadline)
	{
		return $self if defined eval { $self->status };
		sleep 0.05;
	}
	croak "proxy $o{name} did not start";
}

sub port { return $_[0]{port}; }
sub name { return $_[0]{name}; }
sub mode { return $_[0]{mode}; }

# one command on the control port, its answer
sub command
{
	my ($self, $cmd) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{ctl},
		Proto => 'tcp', Timeout => 5)
	  or croak "proxy $self->{name}: control port: $!";
	print $s "$cmd\n";
	my $sel = IO::Select->new($s);
	my $answer;
	$answer = <$s> if $sel->can_read(10);
	close $s;
	croak "proxy $self->{name}: no answer to '$cmd'" unless defined $answer;
	chomp $answer;
	return $answer;
}

sub set
{
	my ($self, $mode, $seconds) = @_;
	croak "unknown proxy mode '$mode'" unless $MODES{$mode};
	my $a = $self->command("mode $mode" . (defined $seconds ? " $seconds" : ''));
	croak "proxy $self->{name}: '$a' to mode $mode" unless $a eq "ok $mode";
	$self->{mode} = $mode;
	return;
}

sub status { return $_[0]->command('stat'); }

# connections open through it (held ones included)
sub connections
{
	my ($self) = @_;
	my ($n) = (eval { $self->status } // '') =~ /conns (\d+)/;
	return $n // 0;
}

sub stop
{
	my ($self) = @_;
	return unless $self->{pid};
	kill 'TERM', $self->{pid};
	waitpid($self->{pid}, 0);
	$self->{pid} = undef;
	return;
}

END
{
	my $rc = $?;
	$_->stop for grep { $_->{pid} } @started;
	$? = $rc;
}

# ---------- the proxy's process ----------

# The state of the process: the mode, the listening socket (undef while
# closed), the pairs ({c => the shard's socket, u => the upstream's, undef
# while held; cu / uc => bytes read and not yet written, each way}), and
# a watch: a connection of its own to the upstream, kept open.  When the
# upstream goes away (a stopped server), the watch finds out at once and
# tries again every 100 ms; while the upstream refuses, the proxy in pass
# mode does not listen, so that the shard's connections are refused as
# they would be without the proxy (libpq tries the next host of the list
# then, which it does not for a connection that is accepted and then
# closed).  In front of a PostgreSQL server the watch logs in (as pg_user)
# and stays an idle session: a connection that sent nothing would be
# kept by a server that shuts down, which waits for it (a backend waiting
# for its startup packet, up to authentication_timeout), while a server
# that shuts down ends a session at once, and answers a new one with an
# error.

sub main
{
	my ($port, $upstream, $ctlport, $name, $pg_user) = @_;
	$| = 1;
	my $st = { port => $port, upstream => $upstream, name => $name, pg_user => $pg_user,
		up => 0,
		mode => 'pass', listen => undef, pairs => [], watch => undef, next_try => 0,
		revert_at => undef };
	$st->{ctl} = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $ctlport,
		Listen => 8, ReuseAddr => 1, Proto => 'tcp')
	  or die "$name: control port $ctlport: $!\n";
	$SIG{TERM} = sub { POSIX::_exit(0) };
	$SIG{PIPE} = 'IGNORE';
	watch($st);
	open_listen($st) if $st->{up};
	while (1)
	{
		$st->{pairs} = [ grep { $_->{c} } @{ $st->{pairs} } ];
		my $m = $st->{mode};
		my $to_up = $m eq 'pass' || $m eq 'up_only';
		my $to_shard = $m eq 'pass' || $m eq 'down_only';
		my $r = IO::Select->new($st->{ctl});
		my $w = IO::Select->new;
		$r->add($st->{listen}) if $st->{listen};
		$r->add($st->{watch}) if $st->{watch};
		for my $p (@{ $st->{pairs} })
		{
			next unless $p->{u};
			$r->add($p->{c}) if $to_up && length($p->{cu}) < $MAX_BUF;
			$r->add($p->{u}) if $to_shard && length($p->{uc}) < $MAX_BUF;
			$w->add($p->{u}) if $to_up && length($p->{cu});
			$w->add($p->{c}) if $to_shard && length($p->{uc});
		}
		my $wait = $st->{watch} ? 1 : 0.1;
		if (defined $st->{revert_at})
		{
			my $left = $st->{revert_at} - time();
			$wait = $left < 0 ? 0 : $left if $left < $wait;
		}
		my ($rr, $ww) = IO::Select->select($r, $w, undef, $wait);
		for my $fh (@{ $ww // [] })
		{
			my $p = pair_of($st, $fh) or next;
			my $k = $fh == $p->{u} ? 'cu' : 'uc';
			my $n = syswrite($fh, $p->{$k});
			if (!defined $n) { close_pair($p) unless $!{EAGAIN}; next; }
			substr($p->{$k}, 0, $n, '');
		}
		for my $fh (@{ $rr // [] })
		{
			if ($fh == $st->{ctl}) { control($st); }
			elsif ($st->{listen} && $fh == $st->{listen}) { accept_one($st); }
			elsif ($st->{watch} && $fh == $st->{watch})
			{
				my $n = sysread($fh, my $buf, 4096);
				next if $n || (!defined $n && $!{EAGAIN});
				# tried again in 100 ms; up or not till then
				close $st->{watch};
				$st->{watch} = undef;
				$st->{next_try} = time() + 0.1;
			}
			else { forward($st, $fh); }
		}
		set_mode($st, 'pass') if defined $st->{revert_at} && time() >= $st->{revert_at};
		# the upstream gone: try again every 100 ms; listen as the mode says
		watch($st) if !$st->{watch} && time() >= $st->{next_try};
		my $listening = $st->{mode} ne 'reset' && ($st->{mode} ne 'pass' || $st->{up});
		if ($listening && !$st->{listen}) { open_listen($st); }
		elsif (!$listening && $st->{listen})
		{
			close $st->{listen};
			$st->{listen} = undef;
			printf "%.3f %s: upstream %d down, not listening\n", time(), $name, $upstream
			  if $st->{mode} eq 'pass';
		}
	}
}

# (re)open the watch connection; the upstream is down if it refuses
sub watch
{
	my ($st) = @_;
	my $w = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
		PeerPort => $st->{upstream}, Proto => 'tcp', Timeout => 2);
	$st->{next_try} = time() + 0.1;
	$st->{up} = $w ? 1 : 0;
	return unless $w;
	if ($st->{pg_user})
	{
		# a startup message (protocol 3.0), as an idle session
		my $body = pack('N', 196608)
		  . join('', map { "$_\0" } user => $st->{pg_user}, database => 'postgres',
			application_name => 'leaf chaos proxy') . "\0";
		syswrite($w, pack('N', 4 + length $body) . $body);
	}
	$w->blocking(0);
	$st->{watch} = $w;
	return;
}

sub open_listen
{
	my ($st) = @_;
	$st->{listen} = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $st->{port},
		Listen => 64, ReuseAddr => 1, Proto => 'tcp');
	if ($st->{listen}) { $st->{listen}->blocking(0); }
	else { printf "%.3f %s: listen on %d: %s\n", time(), $st->{name}, $st->{port}, $!; }
	return;
}

sub connect_up
{
	my ($st, $p) = @_;
	my $u = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $st->{upstream},
		Proto => 'tcp', Timeout => 2);
	if (!$u) { close_pair($p, 1); return; }
	$u->blocking(0);
	$p->{u} = $u;
	return;
}

sub accept_one
{
	my ($st) = @_;
	my $c = $st->{listen}->accept or return;
	$c->blocking(0);
	my $p = { c => $c, u => undef, cu => '', uc => '' };
	push @{ $st->{pairs} }, $p;
	# else held until pass, as a handshake that never arrived
	connect_up($st, $p) if $st->{mode} eq 'pass';
	return;
}

sub pair_of
{
	my ($st, $fh) = @_;
	my ($p) = grep { $_->{c} && ($_->{c} == $fh || ($_->{u} && $_->{u} == $fh)) }
	  @{ $st->{pairs} };
	return $p;
}

# bytes from one side of a pair, kept for the other
sub forward
{
	my ($st, $fh) = @_;
	my $p = pair_of($st, $fh) or return;
	my ($k, $o) = $fh == $p->{c} ? ('cu', $p->{u}) : ('uc', $p->{c});
	my $n = sysread($fh, my $buf, 65536);
	return if !defined $n && $!{EAGAIN};
	if (!$n)
	{
		# the peer closed: what was read goes on, then the other side is
		# closed too
		syswrite($o, $p->{$k}) if length $p->{$k};
		close_pair($p);
		return;
	}
	$p->{$k} .= $buf;
	return;
}

sub close_pair
{
	my ($p, $reset) = @_;
	for my $s (grep { $_ } $p->{c}, $p->{u})
	{
		setsockopt($s, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0)) if $reset;
		close $s;
	}
	$p->{c} = $p->{u} = undef;
	return;
}

# a new mode, for the given seconds or until the next
sub set_mode
{
	my ($st, $new, $seconds) = @_;
	$st->{mode} = $new;
	$st->{revert_at} = defined $seconds ? time() + $seconds : undef;
	printf "%.3f %s: mode %s%s\n", time(), $st->{name}, $new,
	  defined $seconds ? " for $seconds s" : '';
	if ($new eq 'reset')
	{
		close_pair($_, 1) for @{ $st->{pairs} };
		$st->{pairs} = [];
		close $st->{listen} if $st->{listen};
		$st->{listen} = undef;
	}
	elsif ($new eq 'pass')
	{
		connect_up($st, $_) for grep { $_->{c} && !$_->{u} } @{ $st->{pairs} };
	}
	return;
}

# one control command
sub control
{
	my ($st) = @_;
	my $s = $st->{ctl}->accept or return;
	$s->blocking(1);
	my $line = IO::Select->new($s)->can_read(2) ? <$s> : undef;
	if (defined $line && $line =~ /^mode (\w+)(?: (\d+(?:\.\d+)?))?\s*$/ && $MODES{$1})
	{
		my ($new, $seconds) = ($1, $2);
		set_mode($st, $new, $seconds);
		print $s "ok $new\n";
	}
	elsif (defined $line && $line =~ /^stat\s*$/)
	{
		my @open = grep { $_->{c} } @{ $st->{pairs} };
		printf $s "mode %s conns %d held %d listening %d\n", $st->{mode}, scalar @open,
		  scalar(grep { !$_->{u} } @open), $st->{listen} ? 1 : 0;
	}
	else { print $s "error\n"; }
	close $s;
	return;
}

1;
