# Snowflake mode: a registration that is about to take another worker ID
# than the one the state file may stand in with writes the file as
# superseded first (test 161).  If the file cannot be written then, the
# registration must not go on: the file on disk still names the old worker
# ID, and a crash after ZooKeeper made the new forever node, then a start
# with ZooKeeper unreachable once the file can be written again, would
# serve the old worker ID, which ZooKeeper may give to another node.  A
# node whose state file cannot be written does not serve anyway (test 186).
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/supunw';
my $node = $zk->start_pg_node('sf_supunw', root => $root, wait_timeout => '2s',
	extra => "leaf.node_address = 'su.example:1'
restart_after_crash = on
");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
my $old = LeafZK::status($node, 'worker_id');
my $path = LeafZK::status($node, 'zk_node');

ok(LeafZK::wait_state_file_names($node, $old),
	"the state file names worker ID $old");

# while the node is stopped, its forever node is deleted and the state
# file can no longer be replaced (a directory where its temporary file
# goes); it starts with a pause after a new forever node
$node->stop;
$zk->cli('delete', $path);
my $tmp = $node->data_dir . '/leaf_snowflake.state.tmp';
mkdir $tmp or die "mkdir $tmp: $!";
$node->append_conf('postgresql.conf', "leaf.test_register_pause_ms = 8000\n");
my $offset = -s $node->logfile;
$node->start;
LeafTest::wait_until(sub { $node->log_contains(qr/registered su\.example:1 as/, $offset) },
	'a new forever node', 10);
my $made = $node->log_contains(qr/registered su\.example:1 as/, $offset);
my $f = LeafZK::state_file($node);
note "state file worker_id=$f->{worker_id} source=$f->{source}; new forever node made: "
  . ($made ? 'yes' : 'no');
ok(!($made && $f->{source} eq 'zookeeper' && $f->{worker_id} eq $old),
	'no new forever node while the state file still stands in with the old worker ID');

# ZooKeeper goes away, the node crashes, and its state file can be written
# again
$zk->stop_node(1);
$node->stop('immediate');
rmdir $tmp or die "rmdir $tmp: $!";
$node->append_conf('postgresql.conf', "leaf.test_register_pause_ms = 0\n");
$node->start;
ok(LeafZK::wait_decided($node), 'the node decided after the restart');
sleep 3;	# time for it to start serving, which it must not do with $old
my $st = LeafZK::status($node, q[ready, worker_id, worker_id_source, not_ready_reason]);
note "status after the restart with ZooKeeper away: $st";
my ($ready, $wid) = split /\|/, $st;
ok(!($made && $ready eq 't' && $wid eq $old),
	"the node does not serve with worker ID $old, whose forever node is gone, after it made another");

$node->stop;
$zk->stop;
done_testing();
