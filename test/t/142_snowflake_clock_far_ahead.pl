# Snowflake mode: a node's clock ran far ahead, then was set right.  Its
# worker ID cannot serve until the clock passes the mark recorded for it
# again (in production, hours).  leaf_snowflake_new_worker_id() is the way
# out: the node gives that worker ID up in ZooKeeper (the forever node
# keeps its mark) and serves within seconds with a new one, and a restart
# no longer waits.  Recycling does not pick the given-up worker ID while
# its mark is ahead of the clock.  (leaf.test_node_clock_offset_ms shifts
# the clock of every process of an instance.)
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/far_ahead';

my $a = $zk->pg_node('sf_far_a', root => $root, wait_timeout => '2s',
	extra => "leaf.node_address = 'a.example:1'\nleaf.worker_id_reclaim_after = '1s'\n");
$a->append_conf('postgresql.conf', "leaf.test_node_clock_offset_ms = '50000'\n");
$a->start;
$a->safe_psql('postgres', 'CREATE EXTENSION leaf; CREATE ROLE app LOGIN');
ok($a->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'a runs with its clock 50 s ahead');
my $old = LeafZK::status($a, 'worker_id');
my @ids = split /\n/, $a->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(50000)');

# the clock is set right: a waits for the mark, 50 s ahead
$a->stop;
$a->append_conf('postgresql.conf', "leaf.test_node_clock_offset_ms = 0\n");
$a->start;
ok($a->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE 'clock is % ms behind the last time recorded for this node, waiting for it to pass' FROM leaf_snowflake_status]),
	'with its clock set right, a waits for the mark of its worker ID');
my ($state) = LeafTest::sqlstate($a, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail meanwhile');

($state) = LeafTest::sqlstate($a, 'postgres', 'SET ROLE app; SELECT leaf_snowflake_new_worker_id()');
is($state, '42501', 'an ordinary role may not ask for a new worker ID');

my $t0 = time();
$a->safe_psql('postgres', 'SELECT leaf_snowflake_new_worker_id()');
ok($a->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'after leaf_snowflake_new_worker_id(), a serves again');
my $took = time() - $t0;
note sprintf('serving %.1f s after the request', $took);
cmp_ok($took, '<', 20, 'within 20 s, not after the 50 s the old worker ID needs');
my $new = LeafZK::status($a, 'worker_id');
isnt($new, $old, "with a new worker ID ($new, was $old)");
like($zk->cli('get', sprintf('%s/forever/a.example:1-%010d', $root, $old)),
	qr/"addr":"abandoned by a\.example:1"/, 'the old forever node is marked as given up, with its mark');
ok($a->log_contains(qr/gave up worker ID $old on request/), 'and the log says so');
push @ids, split /\n/, $a->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(50000)');

# a restart does not wait for the old mark
$a->restart;
$t0 = time();
ok($a->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'a is ready after a restart');
cmp_ok(time() - $t0, '<', 15, 'soon');
is(LeafZK::status($a, 'worker_id'), $new, 'with the new worker ID');

# a recycling node does not take the given-up worker ID, whose mark is
# still ahead of the clock
my $r = $zk->start_pg_node('sf_far_r', root => $root,
	extra => "leaf.node_address = 'r.example:1'\nleaf.worker_id_reclaim_after = '1s'\n");
$t0 = time();
ok($r->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'a recycling node r is ready');
cmp_ok(time() - $t0, '<', 20, 'soon');
isnt(LeafZK::status($r, 'worker_id'), $old, 'r did not take the given-up worker ID with a mark ahead');

my ($n, $repeats) = LeafZK::repeats_at_once(50000, $a, $r);
push @ids, split /\n/, $a->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(10000)');
is(LeafTest::count_repeats(\@ids), 0, 'no ID of a repeats another, before or after the new worker ID');
is($repeats, 0, 'none between a and r');

$_->stop for ($a, $r);
$zk->stop;
done_testing();
