# Snowflake mode: a ZooKeeper sequence number above 1023 is refused (the
# node is not ready, Postgres keeps running), unless worker-ID recycling
# frees an ID that nobody has used for long enough.
use strict;
use warnings;

use IPC::Run;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $hosts = $zk->hosts;
my $root = '/leaf/limit';

# 1024 forever nodes of another address (which bounded its leases by
# ZooKeeper, so they may be taken over), none of them running: the next
# sequence number ZooKeeper hands out is 1024.
my $cmds = "create /leaf\ncreate $root\ncreate $root/forever\ncreate $root/temporary\n";
$cmds .= qq[create -s $root/forever/10.0.0.9:5432- {"addr":"10.0.0.9:5432","ts":1,"hwm":1,"bounded":1}\n]
  for 1 .. 1024;
$cmds .= "ls $root/forever\nquit\n";
my ($out, $err) = ('', '');
IPC::Run::run(
	[
		'java', '-Xmx64m', '-cp',
		'/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar',
		'org.apache.zookeeper.ZooKeeperMain', '-server', $hosts
	],
	'<', \$cmds, '>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
like($out, qr/10\.0\.0\.9:5432-0000001023/, 'ZooKeeper holds forever nodes 0..1023 of another address');

my $node = $zk->start_pg_node('sf_limit', root => $root, wait_timeout => '3s');
LeafZK::wait_decided($node);

like(
	$node->safe_psql('postgres', 'SELECT ready, not_ready_reason FROM leaf_snowflake_status'),
	qr/^f\|ZooKeeper assigned worker ID 1024 to .* above the limit of 1023, and no worker ID under \/leaf\/limit may be taken over: set "leaf\.worker_id_reclaim_after" .* or delete the forever nodes of nodes that will never serve again$/,
	'worker ID 1024 is refused, and the status view says why');
my ($ret, $stdout, $stderr) =
  $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT leaf_snowflake()");
like($stderr, qr/ERROR:  LF102: snowflake generator is not ready\nDETAIL:  The snowflake worker says: ZooKeeper assigned worker ID 1024/,
	'leaf_snowflake raises LF102 with the reason');
$node->safe_psql('postgres', "SELECT leaf_segment_create('still')");
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('still')"),
	'1', 'Postgres and segment mode keep working');

# with recycling on, an ID whose owner has been silent long enough is freed
sleep 2;	# longer than the 1 s set below
$node->append_conf('postgresql.conf', "leaf.worker_id_reclaim_after = '1s'\n");
$node->restart;
ok( $node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'with leaf.worker_id_reclaim_after set, the node becomes ready');
my $wid = $node->safe_psql('postgres',
	'SELECT (leaf_snowflake_decode(leaf_snowflake())).worker_id');
cmp_ok($wid, '<=', 1023, "it took over a dead worker ID ($wid)");
ok($node->log_contains(qr/took over worker ID $wid of 10\.0\.0\.9:5432/),
	'the take-over is logged');

$node->stop;
$zk->stop;
done_testing();
