# Snowflake mode: moving leaf.snowflake_epoch later must not make IDs go
# backwards.  The state file records the epoch, and the recorded mark holds
# in ID space: the node waits until its IDs are above those it issued, and
# says that the epoch moved (not that its clock is behind), with the way
# out, for a hand-set worker ID and for one from ZooKeeper, across a
# restart during the wait.
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
	like(LeafZK::status($node, 'not_ready_reason'),
		qr/^"leaf\.snowflake_epoch" was moved later, from $epoch to $later, since worker ID 3 recorded its last mark, .* set "leaf\.snowflake_epoch" back to $epoch and restart, or set "leaf\.worker_id" to a worker ID no node ever used$/,
		'the status says the epoch moved, and the ways out');
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

# A worker ID from ZooKeeper: the epoch moved 30 s later waits for 30 s
my $zk = LeafZK->new(nodes => 1);
my $zn = $zk->start_pg_node('sf_epoch_zk', root => '/leaf/epoch',
	extra => "leaf.node_address = 'ep.example:1'\n");
ok($zn->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'the ZooKeeper node serves');
my $zlast = $zn->safe_psql('postgres', 'SELECT max(id) FROM leaf_snowflake_nextvals(1000) AS id');
my $zwid = LeafZK::status($zn, 'worker_id');
$zn->stop;
my $zlater = $epoch + 30000;
$zn->append_conf('postgresql.conf', "leaf.snowflake_epoch = '$zlater'\n");
$zn->start;
my $moved = qr/^"leaf\.snowflake_epoch" was moved later, from $epoch to $zlater, since worker ID $zwid recorded its last mark, so its IDs stay above those it issued only from \d+ ms from now; to serve sooner, set "leaf\.snowflake_epoch" back to $epoch and restart, or call leaf_snowflake_new_worker_id\(\) for another worker ID$/;
ok($zn->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '"leaf.snowflake_epoch" was moved later%' FROM leaf_snowflake_status]),
	'a ZooKeeper node whose epoch moved later waits')
  or note LeafZK::status($zn, 'not_ready_reason');
like(LeafZK::status($zn, 'not_ready_reason'), $moved, '... and says the epoch moved, with the ways out');
unlike(LeafZK::status($zn, 'not_ready_reason'), qr/clock is/, '... not that the clock is behind');

# a restart during the wait says it still (the state file keeps it)
$zn->stop('immediate');
$zn->start;
ok($zn->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '"leaf.snowflake_epoch" was moved later%' FROM leaf_snowflake_status]),
	'after a restart during the wait, it still says the epoch moved')
  or note LeafZK::status($zn, 'not_ready_reason');
like(slurp_file($zn->data_dir . '/leaf_snowflake.state'), qr/^epoch_moved_from $epoch$/m,
	'the state file records the epoch it moved from');

# moved later once more during the wait: the way out is still the epoch
# the marks were written under, not the one the file was written under
$zn->stop('immediate');
my $zlater2 = $epoch + 40000;
$zn->append_conf('postgresql.conf', "leaf.snowflake_epoch = '$zlater2'\n");
$zn->start;
ok($zn->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '"leaf.snowflake_epoch" was moved later%' FROM leaf_snowflake_status]),
	'moved later again during the wait, it says the epoch moved')
  or note LeafZK::status($zn, 'not_ready_reason');
like(LeafZK::status($zn, 'not_ready_reason'),
	qr/^"leaf\.snowflake_epoch" was moved later, from $epoch to $zlater2, .* set "leaf\.snowflake_epoch" back to $epoch and restart/,
	'... from the epoch its last mark was written under, which is the one to set back');

# the way out: the epoch set back serves at once, above the IDs issued
$zn->stop;
$zn->append_conf('postgresql.conf', "leaf.snowflake_epoch = '$epoch'\n");
$zn->start;
ok($zn->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'with the epoch set back, it serves');
cmp_ok($zn->safe_psql('postgres', 'SELECT leaf_snowflake()'), '>', $zlast,
	'above the IDs it issued');
unlike(slurp_file($zn->data_dir . '/leaf_snowflake.state'), qr/^epoch_moved_from/m,
	'the state file no longer says the epoch moved');
$zn->stop;
$zk->stop;
done_testing();
