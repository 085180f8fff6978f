# Snowflake mode with ZooKeeper and worker-ID recycling on every node
# (leaf.worker_id_reclaim_after): four nodes hold worker IDs 0 to 3;
# ZooKeeper stops, the node with worker ID 3 restarts meanwhile, and
# ZooKeeper comes back empty.  With recycling on, a node's lease never
# passes what ZooKeeper holds, so every node stops serving during the
# outage and must register again afterwards.  Checked: no ID repeats; the
# status's "ready" never says t when a call made at once fails; the server
# log says why calls fail; and every node serves again within a bound.
# (Before the lease was reported, the status gave no reason and the log
# said nothing until the session was given up, 6 s into the outage.)
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $root = '/leaf/recycled';
my $zk = LeafZK->new(nodes => 1);

my @nodes = map {
	$zk->pg_node("sf_recycled$_", root => $root,
		extra => "leaf.worker_id_reclaim_after = '10s'\nlog_statement = none\n")
} 1 .. 4;
my ($n1, $n2, $n3, $n4) = @nodes;

# n1..n3 register first (in any order), then n4, which gets worker ID 3
LeafZK::start_in_turn(@nodes);
is(LeafZK::status($n4, 'worker_id'), '3', 'n4 has worker ID 3');
is(join(',', sort map { LeafZK::status($_, 'worker_id') } @nodes), '0,1,2,3',
	'the four nodes hold worker IDs 0 to 3');

# first a short outage with ZooKeeper's data kept: the lease runs out and
# is extended again once ZooKeeper is back, and the log says both
my $off = -s $n1->logfile;
$zk->stop_node(1);
ok( $n1->poll_query_until('postgres',
		q[SELECT not_ready_reason LIKE '%ZooKeeper has not recorded a new high-water mark%' FROM leaf_snowflake_status]),
	'a short outage: the lease runs out, and the status says why');
$zk->start_node(1);
ok($n1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'ready again once ZooKeeper is back');
ok($n1->log_contains(qr/the lease ran out: ZooKeeper has not recorded.*\n(?s:.*)leaf snowflake lease extended again after \d+ ms/, $off),
	'the log says that the lease ran out, and when it was extended again');

# many transactions, so that the old sessions have seen more than the
# restored server will have for a while and are refused
$zk->outrun_sessions(@nodes);

# n1..n3 under load from now on
my $load = LeafZK::start_load(100, $n1, $n2, $n3);
my @offsets = map { -s $_->logfile } @nodes;

# the outage: every lease runs out; n4 restarts and may not use its cache
$zk->stop_node(1);
my $t_stop = time();
$n4->restart;
LeafZK::wait_decided($n4);
is(LeafZK::status($n4, 'ready'), 'f', 'n4, restarted during the outage, does not serve');
like(LeafZK::status($n4, 'not_ready_reason'), qr/"leaf\.worker_id_reclaim_after" forbids using worker ID \d+ from "leaf_snowflake\.state"/,
	'and says why');
push @$load, @{ LeafZK::start_load(100, $n4) };
for my $node ($n1, $n2, $n3)
{
	ok($node->poll_query_until('postgres', 'SELECT NOT ready FROM leaf_snowflake_status'),
		$node->name . ' is not ready once its lease runs out');
}

# the status says why, within a few heartbeats
my %reason;
my $until = time() + 5;
while (time() < $until)
{
	$reason{$_} = LeafZK::status($nodes[$_], 'not_ready_reason') for 0 .. 2;
	last unless grep { $reason{$_} !~ /ZooKeeper/ } 0 .. 2;
	usleep(100_000);
}
like($reason{$_}, qr/lease ran out.*ZooKeeper/, $nodes[$_]->name . "'s status names ZooKeeper")
  for 0 .. 2;
my ($state, $err) = LeafTest::sqlstate($n1, 'postgres',
	"SET leaf.wait_timeout = '100ms'; SELECT leaf_snowflake()");
is($state, 'LF102', 'a call fails with LF102');
like($err, qr/DETAIL:.*ZooKeeper has not recorded a new high-water mark/,
	'and its DETAIL says why');
my @offsets_up = map { -s $_->logfile } @nodes;

# ZooKeeper comes back empty
$zk->wipe_node(1);
$zk->start_node(1);
my $t_up = time();
note sprintf('ZooKeeper is back, empty, after an outage of %.1f s', $t_up - $t_stop);

# healed: registered anew since the wipe, connected, serving
my %healed = %{ LeafZK::wait_registered_again($root, \@nodes, \@offsets, $t_up, 90) };
# a few more seconds of load on the healed nodes
sleep 2;
my $load_result = LeafZK::stop_load($load, @nodes);

my $worst = LeafZK::check_healed(\%healed, @nodes);
# the bound: a session the restored server refuses is given up once it has
# not connected for its timeout (6 s, counted from the start of the
# outage), a few heartbeats late at most; a new session connects and
# registers within a second; a new registration waits out
# max(lease margin 2 s, session timeout 6 s + heartbeat 0.5 s) +
# leaf.max_clock_drift_ms 1 s = 7.5 s.  That makes about 16 s, and 25 s
# leaves room for a loaded machine.
cmp_ok($worst, '<', 25,
	sprintf('every node serves again within 25 s of ZooKeeper being back (slowest: %.1f s)', $worst));

my @wids = map { LeafZK::status($_, 'worker_id') } @nodes;
my %distinct = map { $_ => 1 } @wids;
is(scalar(keys %distinct), 4, 'four distinct worker IDs (' . join(',', @wids) . ')');

# the log said why calls failed before ZooKeeper was back
for my $i (0 .. 2)
{
	my $log = substr(slurp_file($nodes[$i]->logfile), $offsets[$i],
		$offsets_up[$i] - $offsets[$i]);
	like($log, qr/leaf snowflake generator not ready: the lease ran out: ZooKeeper/,
		$nodes[$i]->name . ' logged that its lease ran out, naming ZooKeeper');
}

# the status against what a call made at once did
for my $i (0 .. $#nodes)
{
	my @p = @{ $load_result->{probes}[$i] };
	my $lies = grep { $_->[1] eq 't' && $_->[2] ne 'ok' } @p;
	my $refused = grep { $_->[2] eq 'LF102' } @p;
	my $other = grep { $_->[2] ne 'ok' && $_->[2] ne 'LF102' } @p;
	cmp_ok($refused, '>', 0, $nodes[$i]->name . ": probes refused with LF102 ($refused of " . scalar(@p) . ')');
	is($lies, 0, $nodes[$i]->name . ': no probe found ready = t and then a failing call');
	is($other, 0, $nodes[$i]->name . ': no probe failed with another error');
}

LeafZK::check_load($load_result);

$_->stop for @nodes;
$zk->stop;
done_testing();
