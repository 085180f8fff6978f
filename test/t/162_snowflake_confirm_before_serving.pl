# Snowflake mode: a node that registered in ZooKeeper waits before it
# serves with a new worker ID.  If its forever node is deleted (or
# ZooKeeper loses its data) during that wait and ZooKeeper is then
# unreachable, it must not serve with that worker ID, which another node
# may hold by then: it serves only once a heartbeat finds its node still
# there.  (Found by the fault-injection run: a node frozen in that wait
# repeated 749 IDs of a node that ZooKeeper, restored empty, gave the same
# worker ID.)
#
# Two orders, each made certain here rather than left to timing:
#  1. the session of the registration is given up during the wait
#     (unconnected for longer than its timeout), so that no heartbeat is
#     even tried at the end of the wait;
#  2. the worker is frozen through the end of the wait, and its first
#     heartbeat after that fails.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/confirm';

# leaf.max_clock_drift_ms = 10s makes the wait of a new registration
# 6.5 s (session timeout and a heartbeat) + 10 s: the session, unconnected
# from the moment ZooKeeper stops, is given up 6 s later (and a connection
# attempt of up to 4 s), inside the wait even when deleting the node with
# the command-line client and stopping ZooKeeper took seconds on a busy
# machine (12.8 s from the start of the wait to the give-up was seen).
my $node = $zk->start_pg_node('sf_confirm', root => $root, wait_timeout => '1s',
	extra => "leaf.node_address = 'cf.example:1'\nleaf.max_clock_drift_ms = '10s'\n");

# Wait until the node waits with a new worker ID; return that worker ID
# and the end of its wait (epoch seconds).
sub waiting_with_new_id
{
	ok($node->poll_query_until('postgres',
		q[SELECT not_ready_reason LIKE '%new worker ID % is used only from%' FROM leaf_snowflake_status]),
		'the node waits before it serves with a new worker ID');
	my ($wid, $nb) = split /\|/, $node->safe_psql('postgres',
		q[SELECT worker_id, extract(epoch FROM not_before) FROM leaf_snowflake_status]);
	return ($wid, $nb);
}

# 1. the session is given up during the wait
my ($wid, $nb) = waiting_with_new_id();
my $path = LeafZK::status($node, 'zk_node');
my $offset = -s $node->logfile;
$zk->cli('delete', $path);
$zk->stop_node(1);
ok($node->wait_for_log(qr/has not connected for \d+ ms, more than its timeout, opening a new one/, $offset),
	'the session of the registration is given up');
cmp_ok(Time::HiRes::time(), '<', $nb, '... during the wait');
# the worker tries to connect for up to 4 s at a time: poll
ok($node->poll_query_until('postgres',
	qq[SELECT not_ready_reason LIKE 'worker ID $wid is used once ZooKeeper confirms its registration%' FROM leaf_snowflake_status]),
	'past the wait, it does not serve with a registration whose session is gone');
cmp_ok(Time::HiRes::time(), '>=', $nb, '... once the wait is over');
my ($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102');

# ZooKeeper back: the node registers again (its node is gone) and waits
$zk->start_node(1);
my ($wid2, $nb2) = waiting_with_new_id();
isnt($wid2, $wid, 'registered again, with another worker ID');

# 2. frozen through the end of the wait: the first heartbeat fails
my $pid = LeafZK::worker_pid($node);
ok($pid, 'the snowflake worker runs');
$path = LeafZK::status($node, 'zk_node');
kill 'STOP', $pid;
$zk->cli('delete', $path);
$zk->stop_node(1);
sleep 1 while time() < $nb2 + 1;
kill 'CONT', $pid;
ok($node->poll_query_until('postgres',
	qq[SELECT not_ready_reason LIKE 'worker ID $wid2 is used once ZooKeeper confirms its registration%' FROM leaf_snowflake_status]),
	'after the wait, a failed heartbeat keeps it from serving');
($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102');
my $served = grep { /generator ready with worker ID ($wid|$wid2) / }
  split /\n/, slurp_file($node->logfile);
is($served, 0, "worker IDs $wid and $wid2 were never served");

# ZooKeeper back: registered a third time, and it serves
$zk->start_node(1);
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'it serves once ZooKeeper is back, registered again');
my $wid3 = LeafZK::status($node, 'worker_id');
ok($wid3 ne $wid && $wid3 ne $wid2, 'with a third worker ID');
my $id = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');
is(($id >> 12) & 1023, $wid3, 'its IDs carry that worker ID');

$node->stop;
$zk->stop;
done_testing();
