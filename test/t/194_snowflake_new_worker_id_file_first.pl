# Snowflake mode: leaf_snowflake_new_worker_id() gives the node's worker ID
# up in ZooKeeper, where recycling may hand it to another node once its
# mark has passed.  The state file must stop naming that worker ID before
# ZooKeeper is told, as it does before a registration takes another one:
# otherwise a registration that does not get as far as that (here the
# list of running nodes cannot be read), then ZooKeeper becoming
# unreachable, or a crash and a start with ZooKeeper unreachable, serve the
# given-up worker ID from the state file.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/newid';
my $node = $zk->start_pg_node('sf_newid', root => $root, wait_timeout => '2s',
	extra => "leaf.node_address = 'ni.example:1'\n");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
my $old = LeafZK::status($node, 'worker_id');

ok(LeafZK::wait_state_file_names($node, $old),
	"the state file names worker ID $old");

# the running nodes cannot be listed: the registration after the
# give-up stops before it looks for its forever node
like($zk->cli('setAcl', "$root/temporary", 'world:anyone:cdwa'), qr/^(?!.*Exception)/s, 'setAcl');

my $offset = -s $node->logfile;
$node->safe_psql('postgres', 'SELECT leaf_snowflake_new_worker_id()');
ok($node->wait_for_log(qr/gave up worker ID \Q$old\E on request/, $offset),
	'the worker ID was given up in ZooKeeper');
# time for the registration that follows to write the state file again,
# which it must not do with the given-up worker ID
sleep 2;
note 'log since the request: ' . slurp_file($node->logfile, $offset);
note 'state file after the give-up: ' . join(' ', map { "$_=" . LeafZK::state_file($node)->{$_} } qw(worker_id source));
isnt(LeafZK::state_file($node)->{source}, 'zookeeper',
	'the state file no longer stands in with the given-up worker ID');

# ZooKeeper goes away; then the node crashes and starts again
$zk->stop_node(1);
LeafTest::wait_until(sub { LeafZK::status($node, 'ready') eq 't' }, 'serving', 10);
my $st = LeafZK::status($node, q[ready, worker_id, worker_id_source, not_ready_reason]);
note "status with ZooKeeper away: $st";
my ($ready, $wid) = split /\|/, $st;
ok(!($ready eq 't' && $wid eq $old),
	"the node does not serve with the given-up worker ID $old");
$node->stop('immediate');
$node->start;
LeafTest::wait_until(sub { LeafZK::status($node, 'ready') eq 't' }, 'serving', 10);
$st = LeafZK::status($node, q[ready, worker_id, worker_id_source, not_ready_reason]);
note "status after the restart with ZooKeeper away: $st";
($ready, $wid) = split /\|/, $st;
ok(!($ready eq 't' && $wid eq $old),
	"nor after a restart with ZooKeeper away");
my ($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102');

$node->stop;
$zk->stop;
done_testing();
