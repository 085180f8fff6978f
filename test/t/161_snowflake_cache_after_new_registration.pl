# Snowflake mode: the state file names a new registration's worker ID at
# once.  A node whose forever node was deleted registers again and gets a
# new worker ID, then waits out earlier holders before it serves.  If it
# crashes in that wait and starts while ZooKeeper is unreachable, the
# state file must not hand it the old worker ID, which ZooKeeper may have
# given to another node meanwhile (found by the fault-injection run:
# 1,100 repeated IDs).
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/newreg';
my $node = $zk->start_pg_node('sf_newreg', root => $root, wait_timeout => '2s',
	extra => "leaf.node_address = 'nr.example:1'\nrestart_after_crash = on\n");
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

# ZooKeeper goes away, and the node crashes in its wait
$zk->stop_node(1);
my $pid = LeafZK::worker_pid($node);
kill 'KILL', $pid;
ok($node->poll_query_until('postgres',
	q[SELECT worker_id_source = 'cache file' FROM leaf_snowflake_status]),
	'after the crash, the node takes its worker ID from the state file');
is(LeafZK::status($node, 'worker_id'), $new, 'the worker ID of the last registration, not the old one');

$zk->start_node(1);
$node->stop;
$zk->stop;
done_testing();
