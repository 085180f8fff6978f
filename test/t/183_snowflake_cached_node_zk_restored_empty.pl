# Snowflake mode with ZooKeeper: four nodes hold worker IDs 0 to 3.  The
# node with worker ID 3 (n4) loses ZooKeeper (its proxy is frozen),
# restarts meanwhile and serves with worker ID 3 from its state file; then
# ZooKeeper is stopped and comes back empty.  n4 reaches it at once, while
# the other three still hold sessions that the restored server refuses, and
# keep serving with their old worker IDs until they give up on those
# sessions.  Whatever worker ID n4 is given, an old holder may still be
# using it: n4 must register as a new node and wait like one, and the
# others too once they register again.  No two nodes may issue IDs with
# the same worker ID at the same time, and every node must serve again,
# with a worker ID of its own, without a restart.  (With the wait of a new
# registration skipped for a node that was serving, this test found 7,265
# and 5,189 repeated IDs in two runs.)
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $root = '/leaf/cached';
my $zk = LeafZK->new(nodes => 1);

my $proxy = $zk->proxy;
my @nodes = map {
	$zk->pg_node("sf_cached$_", root => $root, extra => "log_statement = none\n",
		$_ == 4 ? (hosts => $proxy->{hosts}) : ())
} 1 .. 4;
my ($n1, $n2, $n3, $n4) = @nodes;

# n1..n3 register first (in any order), then n4, which gets worker ID 3
LeafZK::start_in_turn(@nodes);
is(LeafZK::status($n4, 'worker_id'), '3', 'n4 has worker ID 3');
is(join(',', sort map { LeafZK::status($_, 'worker_id') } @nodes), '0,1,2,3',
	'the four nodes hold worker IDs 0 to 3');

# many transactions, so that the old sessions have seen more than the
# restored server will have for a while and are refused
$zk->outrun_sessions(@nodes);

my @old_wid = map { LeafZK::status($_, 'worker_id') } @nodes;

# n4 is cut off from ZooKeeper, restarts, and serves with worker ID 3 from
# its state file
$zk->freeze_proxy($proxy);
$n4->restart;
ok( $n4->poll_query_until('postgres',
		q[SELECT ready AND worker_id_source = 'cache file' FROM leaf_snowflake_status]),
	'n4 restarted without ZooKeeper and serves from its state file');
is(LeafZK::status($n4, 'worker_id'), '3', 'with worker ID 3');

# every node under load while ZooKeeper is stopped and comes back empty;
# n4 reaches it as soon as it is back
my $load = LeafZK::start_load(100, @nodes);
my @offsets = map { -s $_->logfile } @nodes;
$zk->stop_node(1);
$zk->wipe_node(1);
$zk->start_node(1);
$zk->thaw_proxy($proxy);
my $t_up = time();
note 'ZooKeeper is back, empty';

# healed: registered anew since the wipe, connected, serving
my %healed = %{ LeafZK::wait_registered_again($root, \@nodes, \@offsets, $t_up, 90) };
my $load_result = LeafZK::stop_load($load, @nodes);

my $worst = LeafZK::check_healed(\%healed, @nodes);
note sprintf('slowest node serving again %.1f s after ZooKeeper was back', $worst);

my @wids = map { LeafZK::status($_, 'worker_id') } @nodes;
my %distinct = map { $_ => 1 } @wids;
is(scalar(keys %distinct), 4, 'four distinct worker IDs (' . join(',', @wids) . ')');
my $ls = $zk->cli('ls', "$root/forever");
for my $node (@nodes)
{
	my $path = LeafZK::status($node, 'zk_node');
	my ($name) = $path =~ m{/([^/]+)$};
	like($ls, qr/\Q$name\E/, $node->name . " serves with a forever node that exists ($name)");
}
# (it stops as soon as a registration reads the tree without its node,
# before the file stops standing in and a new node is made; or, had the
# registration gone on, when ZooKeeper gives the new worker ID)
ok( $n4->log_contains(
		qr/ZooKeeper holds no forever node of worker ID 3 of "leaf_snowflake.state" \(it lost its data, or the node was deleted\), so that worker ID is no longer used from the file|ZooKeeper gave worker ID \d+ \(a new registration\) instead of 3, restarting the generator/,
		$offsets[3]),
	'n4 stopped serving with worker ID 3 when it registered anew, and logged why');

# how long the old holders went on serving (for the record: the overlap
# with n4's new worker ID depends on how fast ZooKeeper starts)
for my $i (0 .. 2)
{
	my @served = grep {
		$_->[2] eq 'ok' && (($_->[3] >> 12) & 1023) == $old_wid[$i]
	} @{ $load_result->{probes}[$i] };
	my $last = @served ? $served[-1][0] / 1000 - $t_up : -1;
	note sprintf('%s served with its old worker ID %d until %.1f s after ZooKeeper was back',
		$nodes[$i]->name, $old_wid[$i], $last);
}

for my $i (0 .. $#nodes)
{
	my $lies = grep { $_->[1] eq 't' && $_->[2] ne 'ok' } @{ $load_result->{probes}[$i] };
	is($lies, 0, $nodes[$i]->name . ': no probe found ready = t and then a failing call');
}
LeafZK::check_load($load_result);

$_->stop for @nodes;
$zk->stop;
done_testing();
