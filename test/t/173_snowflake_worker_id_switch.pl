# Snowflake mode with leaf.worker_id: switching to another worker ID and
# back must keep the mark of the first one.  After a crash with worker 2, a
# run with worker 3 and a return to worker 2, the node waits past worker
# 2's recorded mark.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# a long heartbeat: the mark lies 2 x 4 s + 1 s ahead of the clock
my $node = LeafTest::new_node('sf_switch', { worker_id => 2, max_worker_processes => undef },
	"leaf.heartbeat_interval = '4s'",
	"leaf.wait_timeout = '1s'");
$node->safe_psql('postgres', 'SELECT count(leaf_snowflake()) FROM generate_series(1, 1000)');
my ($mark2) = slurp_file($node->data_dir . '/leaf_snowflake.state') =~ /^high_water_ms (\d+)$/m;
$node->stop('immediate');

$node->append_conf('postgresql.conf', "leaf.worker_id = 3\n");
$node->start;
ok($node->poll_query_until('postgres', 'SELECT ready AND worker_id = 3 FROM leaf_snowflake_status'),
	'serves with worker ID 3');
$node->stop;
like(slurp_file($node->data_dir . '/leaf_snowflake.state'), qr/^mark 2 $mark2$/m,
	'the state file still has the mark of worker ID 2');

$node->append_conf('postgresql.conf', "leaf.worker_id = 2\n");
$node->start;
ok($node->poll_query_until('postgres', 'SELECT ready AND worker_id = 2 FROM leaf_snowflake_status'),
	'serves with worker ID 2 again');
my $first = $node->safe_psql('postgres', q[
SELECT (extract(epoch FROM (leaf_snowflake_decode(leaf_snowflake())).ts) * 1000)::bigint]);
cmp_ok($first, '>', $mark2, "worker ID 2's first ID is above its mark from before the switch");

$node->stop;
done_testing();
