# Snowflake mode: the state file names a new registration's worker ID at
# once.  A node whose forever node was deleted registers again and gets a
# new worker ID, then waits out earlier holders before it serves.  If it
# crashes in that wait and starts while ZooKeeper is unreachable, the
# state file must not hand it the old worker ID, which ZooKeeper may have
# given to another node meanwhile (found by the fault-injection run:
# 1,100 repeated IDs).  Nor may it, if the node crashes after ZooKeeper
# gave it the new worker ID and before the state file names it: the file
# stops naming the old worker ID before the new node is made.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/newreg';
# leaf.test_register_pause_ms holds the worker for 6 s after it made a
# new forever node, before the state file names its worker ID
my $node = $zk->start_pg_node('sf_newreg', root => $root, wait_timeout => '2s',
	extra => "leaf.node_address = 'nr.example:1'
restart_after_crash = on
"
	  . "leaf.test_register_pause_ms = 6000
");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
my $old = LeafZK::status($node, 'worker_id');
my $path = LeafZK::status($node, 'zk_node');

# an operator's cleanup: the node registers again, with a new worker ID,
# and waits before it serves with it
my $offset = -s $node->logfile;
$zk->cli('delete', $path);
ok(LeafTest::wait_until(sub { $node->log_contains(qr/registered nr\.example:1 as "\Q$root\E\/forever\/nr\.example:1-\d+"/, $offset) },
	'registered again'), 'the node registered again');
my ($new) = slurp_file($node->logfile, $offset) =~ /registered nr\.example:1 as "[^"]+-0*(\d+)"/;
isnt($new, $old, "with a new worker ID ($new, was $old)");

ok(LeafZK::wait_state_file_names($node, $new),
	'the state file names the new worker ID once the registration went on');

# ZooKeeper goes away, and the node crashes in its wait
$zk->stop_node(1);
my $pid = LeafZK::worker_pid($node);
kill 'KILL', $pid;
ok($node->poll_query_until('postgres',
	q[SELECT worker_id_source = 'cache file' FROM leaf_snowflake_status]),
	'after the crash, the node takes its worker ID from the state file');
is(LeafZK::status($node, 'worker_id'), $new, 'the worker ID of the last registration, not the old one');

# ZooKeeper back: the node confirms worker ID $new there.  Then its node is
# deleted again, and the node crashes while ZooKeeper has just made its
# next one: the state file, which still named $new, no longer stands in.
$zk->start_node(1);
ok($node->poll_query_until('postgres',
	q[SELECT worker_id_source = 'zookeeper' AND ready FROM leaf_snowflake_status]),
	'ZooKeeper back: the node serves with its registration there');
$path = LeafZK::status($node, 'zk_node');
$offset = -s $node->logfile;
$zk->cli('delete', $path);
ok(LeafTest::wait_until(sub { $node->log_contains(qr/registered nr\.example:1 as "\Q$root\E\/forever\/nr\.example:1-\d+"/, $offset) },
	'registered again'), 'the node made a new forever node');
is(LeafZK::state_file($node)->{source}, 'superseded',
	'before it did, the state file stopped naming its worker ID');
$zk->stop_node(1);
$pid = LeafZK::worker_pid($node);
kill 'KILL', $pid;
ok($node->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '%superseded by a registration in ZooKeeper that did not finish%' FROM leaf_snowflake_status]),
	'after the crash, with ZooKeeper away, the node does not serve from the state file');
my ($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102');

$zk->start_node(1);
$node->stop;
$zk->stop;
done_testing();
