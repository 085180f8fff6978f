# Snowflake mode: the state file stops naming its worker ID before a
# registration takes another one (test 161), also in the run of the
# worker that wrote the file: here a node that started without a state
# file registers, writes the file, loses its forever node and registers
# again, all in one run of its worker, then crashes right after ZooKeeper
# made its new forever node and starts with ZooKeeper unreachable.  The
# worker ID of the file was given up by ZooKeeper and must not serve.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/samerun';
my $node = $zk->start_pg_node('sf_samerun', root => $root, wait_timeout => '2s',
	extra => "leaf.node_address = 'sr.example:1'
restart_after_crash = on
");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
my $old = LeafZK::status($node, 'worker_id');
my $path = LeafZK::status($node, 'zk_node');
my $worker = LeafZK::worker_pid($node);

ok(LeafZK::wait_state_file_names($node, $old),
	"the state file names worker ID $old");

# hold the worker after its next new forever node
$node->append_conf('postgresql.conf', "leaf.test_register_pause_ms = 6000\n");
$node->reload;
ok(LeafTest::wait_setting($node, 'leaf.test_register_pause_ms', '6000'),
	'the worker is told of the pause');

my $offset = -s $node->logfile;
$zk->cli('delete', $path);
ok(LeafTest::wait_until(sub { $node->log_contains(qr/registered sr\.example:1 as "\Q$root\E\/forever\/sr\.example:1-\d+"/, $offset) },
	'registered again'), 'the node made a new forever node');
is(LeafZK::worker_pid($node), $worker, 'in the same run of the worker');
my $f = LeafZK::state_file($node);
note "state file while the registration is held: worker_id=$f->{worker_id} source=$f->{source}";
isnt($f->{source}, 'zookeeper', 'before it did, the state file stopped naming its worker ID');

$zk->stop_node(1);
kill 'KILL', $worker;
$node->append_conf('postgresql.conf', "leaf.test_register_pause_ms = 0\n");
ok(LeafZK::wait_decided($node), 'the node decided after the crash');
sleep 3;	# time for it to start serving, which it must not do with $old
my $st = LeafZK::status($node, q[ready, worker_id, worker_id_source, not_ready_reason]);
note "status after the crash with ZooKeeper away: $st";
my ($ready, $wid) = split /\|/, $st;
ok(!($ready eq 't' && $wid eq $old),
	"after the crash, with ZooKeeper away, the node does not serve with worker ID $old");

$zk->start_node(1);
$node->stop;
$zk->stop;
done_testing();
