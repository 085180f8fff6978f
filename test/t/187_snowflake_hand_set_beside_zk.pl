# Snowflake mode: worker IDs set by hand (leaf.worker_id) beside worker IDs
# from ZooKeeper, in one fleet (one leaf.zk_root).  A hand-set ID is
# claimed under <root>/claimed before it is used:
#   - a hand-set ID that ZooKeeper gave to another node is refused, naming
#     that node (before 1.3: both served, 99,383 repeats);
#   - ZooKeeper's numbering skips a claimed ID;
#   - a second node setting the same ID by hand is refused, naming the
#     first (before: 87,024 repeats);
#   - once claimed, a hand-set node restarts and serves while ZooKeeper is
#     down; one that never claimed its ID waits for ZooKeeper.
# IDs are pooled from every node and checked for repeats.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/hand';

sub node
{
	my ($name, $addr, $extra) = @_;
	my $node = $zk->start_pg_node($name, root => $root, wait_timeout => '3s',
		extra => "leaf.node_address = '$addr'\n" . ($extra // ''));
	return $node;
}

# z1 gets worker ID 0 from ZooKeeper
my $z1 = node('hs_z1', 'z1.example:1');
ok($z1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'z1 is ready');
is(LeafZK::status($z1, 'worker_id'), '0', 'ZooKeeper gave z1 worker ID 0');

# h0 sets worker ID 0 by hand: refused, naming z1
my $h0 = node('hs_h0', 'h0.example:1', "leaf.worker_id = 0\n");
ok(LeafZK::wait_decided($h0), 'h0 has decided');
like(LeafZK::status($h0, 'ready, not_ready_reason'),
	qr/^f\|"leaf\.worker_id" is 0, but ZooKeeper gave worker ID 0 to z1\.example:1 \(\/leaf\/hand\/forever\/z1\.example:1-0000000000\)/,
	'h0 (worker ID 0 by hand) is refused, and told which node holds it');
my ($state) = LeafTest::sqlstate($h0, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'h0 hands out no ID');
like($zk->cli('ls', "$root/claimed"), qr/^\[\]$/m, 'and claims nothing');

# h1 claims worker ID 1 by hand, before ZooKeeper gives it to anyone
my $h1 = node('hs_h1', 'h1.example:1', "leaf.worker_id = 1\n");
ok($h1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'h1 (worker ID 1 by hand) is ready');
like($zk->cli('ls', "$root/claimed"), qr/\[0000000001\]/, 'worker ID 1 is claimed in ZooKeeper');
ok($h1->log_contains(qr/claimed worker ID 1 \("leaf\.worker_id"\) in ZooKeeper/), 'h1 logs the claim');

# z2 registers next: ZooKeeper's next number is 1, which is skipped
my $z2 = node('hs_z2', 'z2.example:1');
ok($z2->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'z2 is ready');
my $w2 = LeafZK::status($z2, 'worker_id');
isnt($w2, '1', "z2 did not get the claimed worker ID 1 (it got $w2)");
ok($z2->log_contains(qr/skips worker ID 1: h1\.example:1 claims it with "leaf\.worker_id"/),
	'z2 logs that it skipped the claimed worker ID');

# h1b sets worker ID 1 by hand as well: refused, naming h1
my $h1b = node('hs_h1b', 'h1b.example:1', "leaf.worker_id = 1\n");
ok(LeafZK::wait_decided($h1b), 'h1b has decided');
like(LeafZK::status($h1b, 'ready, not_ready_reason'),
	qr/^f\|"leaf\.worker_id" is 1, but h1\.example:1 \(data directory \S+\) claims worker ID 1 by hand as well/,
	'a second node with worker ID 1 by hand is refused, and told which node claims it');

# every node at once: no repeats (h0 and h1b hand out nothing)
my ($n, $repeats) = LeafZK::repeats_at_once(50000, $z1, $z2, $h0, $h1, $h1b);
cmp_ok($n, '>=', 150000, "z1, z2 and h1 hand out IDs ($n)");
is($repeats, 0, 'no ID is repeated');

# ZooKeeper down: h1 claimed its worker ID before, so it restarts and
# serves from its state file; h5, which never claimed one, waits
$zk->stop_node(1);
$h1->restart;
ok($h1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'h1 restarts and serves with ZooKeeper down, its claim made before');
my $h5 = node('hs_h5', 'h5.example:1', "leaf.worker_id = 5\n");
ok(LeafZK::wait_decided($h5), 'h5 has decided');
like(LeafZK::status($h5, 'ready, not_ready_reason'),
	qr/^f\|"leaf\.worker_id" 5 is not used before it is claimed in ZooKeeper/,
	'h5, never claimed, does not serve while ZooKeeper is down');
$zk->start_node(1);
ok($h5->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'h5 serves once ZooKeeper is back and the claim is made');

# deleting a claim by hand lets the worker ID move: h1 stops for good,
# its claim is deleted, and h1b may have worker ID 1 (restarted)
$h1->stop;
$zk->cli('delete', "$root/claimed/0000000001");
$h1b->restart;
ok($h1b->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'h1b serves with worker ID 1 once the claim of h1 is deleted');

$_->stop for ($z1, $z2, $h0, $h1b, $h5);
$zk->stop;
done_testing();
