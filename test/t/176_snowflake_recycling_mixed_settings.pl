# Worker-ID recycling with mixed settings: n1 (recycling off) is cut off
# from ZooKeeper until its session expires and keeps serving from its local
# lease; n2 (leaf.worker_id_reclaim_after = 3s) starts meanwhile.  n2 must
# not take over n1's worker ID, since n1 never bounded its lease by what
# ZooKeeper holds.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $zk = LeafZK->new(nodes => 1);
my $proxy = $zk->proxy;

my $n1 = $zk->start_pg_node('sf_mixed1', root => '/leaf/mixed', hosts => $proxy->{hosts},
	extra => "leaf.node_address = 'n1.example:1'\nleaf.heartbeat_interval = '2s'\n");
ok($n1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'n1 (recycling off) is ready');
my $wid1 = $n1->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');

# cut n1 off; wait until ZooKeeper has dropped its session (n1's heartbeat
# of 2 s gives a lease margin of 5 s, more than the 4 s a ZooKeeper request
# may block before the client gives up on the connection)
$zk->freeze_proxy($proxy);
my $deadline = time() + 60;
while (time() < $deadline)
{
	last if $zk->cli('ls', '/leaf/mixed/temporary') =~ /^\[\]$/m;
	usleep(500_000);
}
like($zk->cli('ls', '/leaf/mixed/temporary'), qr/^\[\]$/m, "n1's session has expired in ZooKeeper");
sleep 3;	# cut off for a while, within the lease
is($n1->safe_psql('postgres', 'SELECT ready FROM leaf_snowflake_status'), 't',
	'n1 keeps serving from its local lease while cut off');

my $n2 = $zk->start_pg_node('sf_mixed2', root => '/leaf/mixed',
	extra => "leaf.node_address = 'n2.example:1'\nleaf.worker_id_reclaim_after = '3s'\n");
ok($n2->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'n2 is ready');
my $wid2 = $n2->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
isnt($wid2, $wid1, "n2 did not take over n1's worker ID ($wid1)");
ok(!$n2->log_contains(qr/took over worker ID/), 'no take-over is logged');

# both at once: count repeated IDs
my ($nids, $repeats) = LeafZK::repeats_at_once(200000, $n1, $n2);
is($repeats, 0, 'no ID is repeated between n1 and n2');

$zk->thaw_proxy($proxy);
$_->stop for ($n1, $n2);
$zk->stop;
done_testing();
