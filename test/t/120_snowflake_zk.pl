# Snowflake mode with ZooKeeper: worker IDs of three instances, restarts,
# the cache file while ZooKeeper is down, and worker-ID recycling.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);

sub new_node
{
	my ($name, $extra) = @_;
	my $node = $zk->start_pg_node($name, root => '/leaf/zktest', extra => $extra);
	return $node;
}

sub wid_of_id
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		'SELECT (leaf_snowflake_decode(leaf_snowflake())).worker_id');
}

# c keeps its lease within what ZooKeeper holds (recycling on), which is
# what allows a recycling node to take its worker ID over later
my @nodes = (new_node('sf_zk_a'), new_node('sf_zk_b'),
	new_node('sf_zk_c', "leaf.worker_id_reclaim_after = '1h'\n"));
my @wids = map { wid_of_id($_) } @nodes;
note "worker IDs: @wids";
my %seen = map { $_ => 1 } @wids;
is(scalar(keys %seen), 3, 'three instances get three distinct worker IDs');
for my $i (0 .. 2)
{
	is(LeafZK::status($nodes[$i], 'worker_id, worker_id_source, ready, zk_state'),
		"$wids[$i]|zookeeper|t|connected",
		"node $i: status shows its ZooKeeper worker ID");
	like(LeafZK::status($nodes[$i], 'zk_node'),
		qr{^/leaf/zktest/forever/[^/]+:\d+-\d{10}$}, "node $i: forever node path");
}

# heartbeats go on: a new one within a second
my $hb1 = LeafZK::status($nodes[0], 'last_heartbeat');
my $hb2;
LeafTest::wait_until(
	sub { ($hb2 = LeafZK::status($nodes[0], 'last_heartbeat')) ne $hb1 },
	'a new heartbeat', 1);
isnt($hb2, $hb1, 'heartbeat advances');

# restarts keep the worker ID
for my $i (0 .. 2)
{
	$nodes[$i]->restart;
	is(wid_of_id($nodes[$i]), $wids[$i], "node $i keeps its worker ID across a restart");
}

# the cache file holds the ID and the time
my $state = slurp_file($nodes[0]->data_dir . '/leaf_snowflake.state');
like($state, qr/^worker_id $wids[0]$/m, 'cache file has the worker ID');
like($state, qr/^source zookeeper$/m, 'cache file says it came from ZooKeeper');
like($state, qr/^high_water_ms \d{13}$/m, 'cache file has the high-water mark');

# ZooKeeper down: a restart uses the cached worker ID
my $before = $nodes[0]->safe_psql('postgres', 'SELECT leaf_snowflake()');
$zk->stop;
$nodes[0]->restart;
$nodes[0]->poll_query_until('postgres', 'SELECT worker_id IS NOT NULL FROM leaf_snowflake_status');
is(LeafZK::status($nodes[0], 'worker_id, worker_id_source, ready'),
	"$wids[0]|cache file|t", 'with ZooKeeper down, the cached worker ID is used');
my $after = $nodes[0]->safe_psql('postgres', 'SELECT leaf_snowflake()');
cmp_ok($after, '>', $before, 'and IDs go on increasing');
is(wid_of_id($nodes[0]), $wids[0], 'IDs carry the cached worker ID');

# a second restart with ZooKeeper still down: the file, written meanwhile
# by the node that served from it, still stands in
like(slurp_file($nodes[0]->data_dir . '/leaf_snowflake.state'),
	qr/^source cache file$/m, 'the file written while serving from it says so');
$nodes[0]->restart;
$nodes[0]->poll_query_until('postgres',
	q[SELECT worker_id IS NOT NULL OR not_ready_reason LIKE 'could not connect%' FROM leaf_snowflake_status]);
is(LeafZK::status($nodes[0], 'worker_id, worker_id_source, ready, not_ready_reason'),
	"$wids[0]|cache file|t|", 'a second restart with ZooKeeper still down uses the cached worker ID too');
is(wid_of_id($nodes[0]), $wids[0], 'and its IDs carry it');
is(LeafZK::status($nodes[1], 'ready'), 't', 'a running node keeps serving while ZooKeeper is down');

# ZooKeeper back: the node registers again
$zk->start_node(1);
ok( $nodes[0]->poll_query_until('postgres',
		q[SELECT worker_id_source = 'zookeeper' AND zk_state = 'connected' FROM leaf_snowflake_status]),
	'node registers once ZooKeeper is back');
is(wid_of_id($nodes[0]), $wids[0], 'with the same worker ID');
ok( $nodes[1]->poll_query_until('postgres',
		q[SELECT zk_state = 'connected' AND last_heartbeat > now() - interval '2 s' FROM leaf_snowflake_status]),
	'a running node resumes heartbeats');

# Worker-ID recycling: node c stops; after leaf.worker_id_reclaim_after
# a new node may take its worker ID over, and then starts above c's last
# recorded time.
my $c_last = $nodes[2]->safe_psql('postgres', 'SELECT leaf_snowflake()');
$nodes[2]->stop;
my ($c_hwm) = slurp_file($nodes[2]->data_dir . '/leaf_snowflake.state') =~ /^high_water_ms (\d+)$/m;
sleep 3;	# c's node goes without heartbeat for longer than 2 s
my $d = new_node('sf_zk_d', "leaf.worker_id_reclaim_after = '2s'\nleaf.node_address = 'reclaimer.example:1'\n");
my $d_first = $d->safe_psql('postgres', 'SELECT leaf_snowflake()');
is($d->safe_psql('postgres', "SELECT (leaf_snowflake_decode($d_first)).worker_id"),
	$wids[2], 'new node took over the worker ID of the stopped node');
cmp_ok($d_first, '>', $c_last, "the new owner's first ID is above the old owner's last");
cmp_ok($d->safe_psql('postgres',
		"SELECT (extract(epoch FROM (leaf_snowflake_decode($d_first)).ts) * 1000)::bigint"),
	'>', $c_hwm, "... and its timestamp above the old owner's recorded high-water mark");
ok($d->log_contains(qr/took over worker ID $wids[2] of /), 'the take-over is logged');

# a live node's worker ID is never taken over
my $e = new_node('sf_zk_e', "leaf.worker_id_reclaim_after = '1s'\nleaf.node_address = 'reclaimer.example:2'\n");
my $e_wid = wid_of_id($e);
ok(!(grep { $_ == $e_wid } @wids[0, 1], $wids[2]), 'no live worker ID is taken over');

# the old owner comes back and gets a new worker ID
$nodes[2]->start;
my $c_new = wid_of_id($nodes[2]);
ok(!(grep { $_ == $c_new } @wids, $e_wid), "the old owner gets a fresh worker ID ($c_new)");

$_->stop for @nodes, $d, $e;
$zk->stop;
done_testing();
