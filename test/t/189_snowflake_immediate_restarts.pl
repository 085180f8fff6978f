# Snowflake mode: two immediate restarts 1.5 s apart.  The second finds
# the ephemeral node of the first restart's ZooKeeper session, which the
# state file may not name yet (the node had not served).  It names our
# forever node, of our data directory: it is ours, and is replaced at
# once.  Before 1.3 the node said "in use by another running node" and
# was down for 12 s.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $zk = LeafZK->new(nodes => 1);
my $node = $zk->start_pg_node('sf_immed', root => '/leaf/immediate',
	extra => "leaf.node_address = 'imm.example:1'\n");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
my $wid = LeafZK::status($node, 'worker_id');
my @ids = split /\n/, $node->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(20000)');

$node->stop('immediate');
$node->start;
usleep(1_500_000);	# the second restart 1.5 s after the first
$node->stop('immediate');
my $offset = -s $node->logfile;
my $t0 = time();
$node->start;
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready after the second restart');
my $down = time() - $t0;
note sprintf('ready %.1f s after the second immediate restart', $down);
cmp_ok($down, '<', 7, 'within 7 s of the second restart');
ok(!$node->log_contains(qr/in use by another running node/, $offset),
	'the earlier session\'s ephemeral node is not taken for another node\'s');
is(LeafZK::status($node, 'worker_id'), $wid, 'the node keeps its worker ID');
push @ids, split /\n/, $node->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(20000)');
is(LeafTest::count_repeats(\@ids), 0, 'no ID is repeated across the restarts');

$node->stop;
$zk->stop;
done_testing();
