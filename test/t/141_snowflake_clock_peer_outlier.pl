# Snowflake mode: one wrong clock among the running peers must not keep
# correct nodes out.  c1, c2 and c3 run with the right clock, w with its
# clock 30 s ahead (it started with the peer check off).  A restarting c3
# compares itself with the median of its peers (c1, c2, w), is let in, and
# names w in the log; before 1.3 it compared with their average and was
# refused, while w kept serving.  A node with the wrong clock is refused.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/outlier';

sub node
{
	my ($name, $extra) = @_;
	my $node = $zk->start_pg_node($name, root => $root,
		extra => "leaf.node_address = '$name.example:1'\nleaf.max_clock_drift_ms = '2s'\n" . ($extra // ''));
	ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), "$name is ready");
	return $node;
}

my @c = map { node("c$_") } 1 .. 3;
my $w = node('w', "leaf.test_node_clock_offset_ms = '30000'\nleaf.max_clock_drift_ms = 0\n");
# every peer has heartbeated since, so their offsets are current
my $t = $c[0]->safe_psql('postgres', 'SELECT clock_timestamp()');
$_->poll_query_until('postgres', "SELECT last_heartbeat > '$t'::timestamptz + interval '1 s' FROM leaf_snowflake_status")
  for (@c, $w);

my $offset = -s $c[2]->logfile;
$c[2]->restart;
ok($c[2]->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'c3 restarts and is let in, with one of three peers 30 s ahead');
is(LeafZK::status($c[2], 'peers'), '3', 'it compared itself with 3 running peers');
cmp_ok(abs(LeafZK::status($c[2], 'peer_clock_offset_ms')), '<', 2000, 'its offset from their median is small');
ok($c[2]->log_contains(qr/the clock of running peer w\.example:1 differs from the median of 3 running peers by \d+ ms/, $offset),
	'and the log names the peer with the wrong clock');

# a new node with a wrong clock is refused
my $w2 = $zk->start_pg_node('w2', root => $root,
	extra => "leaf.node_address = 'w2.example:1'\nleaf.max_clock_drift_ms = '2s'\nleaf.test_node_clock_offset_ms = '-20000'\n");
ok($w2->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE 'clock differs from the median of 4 running peers by %' FROM leaf_snowflake_status]),
	'a node 20 s behind is refused');

my ($n, $repeats) = LeafZK::repeats_at_once(30000, @c, $w);
is($repeats, 0, 'no ID is repeated');

$_->stop for (@c, $w, $w2);
$zk->stop;
done_testing();
