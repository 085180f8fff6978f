# Snowflake mode: moving leaf.snowflake_epoch later must not make IDs go
# backwards.  The state file records the epoch, and the recorded mark holds
# in ID space: the node waits until its IDs are above those it issued.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('sf_epoch', { worker_id => 3, max_worker_processes => undef },
	"leaf.heartbeat_interval = '500ms'",
	"leaf.wait_timeout = '1s'");
my $last = $node->safe_psql('postgres', 'SELECT max(id) FROM leaf_snowflake_nextvals(200000) AS id');
my $epoch = $node->safe_psql('postgres', 'SELECT epoch_ms FROM leaf_snowflake_status');
$node->stop;

like(slurp_file($node->data_dir . '/leaf_snowflake.state'), qr/^epoch_ms $epoch$/m,
	'the state file records the epoch');

# 6 s later: every new ID would be below the old ones for a while
my $later = $epoch + 6000;
$node->append_conf('postgresql.conf', "leaf.snowflake_epoch = '$later'\n");
$node->start;
LeafZK::wait_decided($node);
my ($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
my $first;
if (defined $state)
{
	is($state, 'LF102', 'right after the epoch moved later, the node does not serve');
	ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
		'it serves once its IDs are above the ones it issued');
	$first = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');
}
else
{
	fail('right after the epoch moved later, the node does not serve');
	$first = $node->safe_psql('postgres', 'SELECT leaf_snowflake()');
}
cmp_ok($first, '>', $last, 'the first ID under the new epoch is above the last one issued');
ok($node->log_contains(qr/"leaf\.snowflake_epoch" changed from $epoch to $later/),
	'the log says the epoch changed');

$node->stop;
done_testing();
