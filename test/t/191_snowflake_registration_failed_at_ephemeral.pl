# Snowflake mode: a registration that creates its forever node (a new
# worker ID) and then fails at the ephemeral node has not registered.  Its
# worker ID must not be used as if it had: not by leaf_sf_try_serve, and not
# by the state file, from which a node serves while ZooKeeper is down.
# Such a worker ID is used only once a later registration finishes, after
# the wait of a new worker ID (its earlier holder may still be running).
#
# The node waits for the mark of its state file, with ZooKeeper down,
# when ZooKeeper comes back without its forever node and refuses to let
# it make its ephemeral node; then ZooKeeper is down again.  Before this
# was so, the node served at the mark with the worker ID of the failed
# registration, "from the cache file", without that wait.  Nor does it
# serve with the state file's worker ID: the registration read a tree
# without that forever node, and another node may be given its worker ID.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/failedreg';

# leaf.max_clock_drift_ms = 40s makes the wait of a new registration
# 6.5 s (session timeout and a heartbeat) + 40 s; the state file names its
# worker ID at once, with the end of that wait as its mark
my $node = $zk->start_pg_node('sf_failed_reg', root => $root, wait_timeout => '1s',
	extra => "leaf.node_address = 'fr.example:1'\nleaf.max_clock_drift_ms = '40s'\n");
ok($node->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '%new worker ID % is used only from%' FROM leaf_snowflake_status]),
	'the node waits before it serves with a new worker ID');
my ($wid, $nb, $path) = split /\|/, $node->safe_psql('postgres',
	q[SELECT worker_id, extract(epoch FROM not_before), zk_node FROM leaf_snowflake_status]);
$node->stop;

# its forever node gone, and no ephemeral node may be made any more
my $out = $zk->cli_script("delete $path\nsetAcl $root/temporary world:anyone:rwda\n");
# (the client may log an EndOfStreamException as it quits: not a failure)
unlike($out, qr/KeeperErrorCode|Insufficient permission|does not exist/,
	'the forever node is deleted, and the running nodes\' folder is closed to new nodes');
$zk->stop_node(1);

# ZooKeeper down: the node takes its worker ID from the state file and
# waits for the file's mark
my $offset = -s $node->logfile;
$node->start;
ok($node->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE 'clock is % ms behind the last time recorded for this node%' FROM leaf_snowflake_status]),
	'ZooKeeper down, the node waits for the mark of its state file');
is(LeafZK::status($node, 'worker_id, worker_id_source'), "$wid|cache file",
	'with the worker ID of the state file');

# ZooKeeper back: the registration creates a forever node, a new worker
# ID, and fails at the ephemeral node
$zk->start_node(1);
ok($node->wait_for_log(qr{registered fr\.example:1 as "\Q$root\E/forever/fr\.example:1-\d+"}, $offset),
	'a registration creates a new forever node');
ok($node->wait_for_log(qr/ZooKeeper request failed \(create ephemeral node\)/, $offset),
	'... and fails at the ephemeral node');
my ($wid2) = slurp_file($node->logfile, $offset) =~ m{as "\Q$root\E/forever/fr\.example:1-(\d+)"};
$wid2 += 0;
isnt($wid2, $wid, "the failed registration chose another worker ID ($wid2)");
$zk->stop_node(1);
cmp_ok(time(), '<', $nb, '... before the mark of the state file');

# ZooKeeper down again.  The registration read a tree without the state
# file's forever node: the file's worker ID no longer stands in (another
# node may be given it), and the node does not serve, past the mark or not
ok($node->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '%no forever node of worker ID % of "leaf_snowflake.state"%' FROM leaf_snowflake_status]),
	'the state file no longer stands in for a tree without its forever node');
sleep 1 while time() < $nb + 2;
is(LeafZK::status($node, 'ready'), 'f', 'past the mark, ZooKeeper down, the node does not serve');
my ($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102');
ok(!$node->log_contains(qr/generator ready with worker ID ($wid|$wid2) /, $offset),
	"neither worker ID $wid nor $wid2 was served");

# ZooKeeper back, open again: the registration finishes with the forever
# node of the failed one, and its worker ID waits as a new one
$zk->start_node(1);
$out = $zk->cli('setAcl', "$root/temporary", 'world:anyone:cdrwa');
unlike($out, qr/KeeperErrorCode|Insufficient permission/,
	'the running nodes\' folder is open again');
ok($node->poll_query_until('postgres',
	qq[SELECT not_ready_reason LIKE '%new worker ID $wid2 is used only from%' FROM leaf_snowflake_status]),
	"registered with worker ID $wid2, it waits before serving with it");
ok(!$node->log_contains(qr/generator ready with worker ID $wid2 /, $offset),
	"worker ID $wid2 was not served before that wait");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'after the wait, it serves');
is(LeafZK::status($node, 'worker_id, worker_id_source'), "$wid2|zookeeper",
	"with worker ID $wid2 from ZooKeeper");

# That registration rewrote the state file: restarted with ZooKeeper down,
# the node serves from the file again, with the worker ID ZooKeeper
# confirmed
$zk->stop_node(1);
$node->restart;
ok($node->poll_query_until('postgres',
	q[SELECT worker_id_source = 'cache file' AND ready FROM leaf_snowflake_status]),
	'restarted with ZooKeeper down, the node serves from the state file');
is(LeafZK::status($node, 'worker_id'), $wid2,
	"with worker ID $wid2, which ZooKeeper confirmed");

$node->stop;
$zk->stop;
done_testing();
