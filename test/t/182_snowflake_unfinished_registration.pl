# Snowflake mode with ZooKeeper: a registration that did not finish (its
# forever node was created, then the connection was lost before the node
# ever recorded a heartbeat) is found again by the next attempt.  That node
# is as new as one created now: ZooKeeper may have just lost an earlier
# holder of the same worker ID, so the worker ID must wait out the longest
# lease such a holder could still use, exactly as for a fresh node.  Before
# this was so, the second attempt served at once; the fault-injection run
# (seed 7) found repeats that way after ZooKeeper was restored empty.
use strict;
use warnings;

use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $zk = LeafZK->new(nodes => 1);

# the forever node of an unfinished registration: no heartbeat, no mark
my $out = $zk->cli_script(
	"create /leaf x\ncreate /leaf/unf x\ncreate /leaf/unf/forever x\n"
	  . "create -s /leaf/unf/forever/unf.example:5432- x\n");
like($out, qr{Created /leaf/unf/forever/unf\.example:5432-0000000000},
	'an unfinished registration left worker ID 0 behind');

my $node = $zk->pg_node('sf_unfinished', root => '/leaf/unf',
	extra => "leaf.node_address = 'unf.example:5432'\n");
my $t0 = time();
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'the node serves');
my $waited = time() - $t0;
is($node->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status'),
	'0', 'with the worker ID of the node it found');

# the wait of a new registration: the session timeout (6 s) and a
# heartbeat, plus leaf.max_clock_drift_ms (1 s in these tests)
my $first = $node->safe_psql('postgres',
	'SELECT extract(epoch FROM ts) FROM leaf_snowflake_decode(leaf_snowflake())');
cmp_ok($first - $t0, '>=', 6.5,
	sprintf('its first ID is at least 6.5 s past the start (%.1f s; ready after %.1f s)',
		$first - $t0, $waited));

$node->stop;
$zk->stop;
done_testing();
