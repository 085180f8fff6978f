# Snowflake clock safety with shifted node clocks
# (leaf.test_node_clock_offset_ms shifts the clock of every process of an
# instance, as a wrong system clock would):
#  - a node whose clock is behind its own record in ZooKeeper waits;
#  - a new node whose clock is far from its running peers' is refused.
use strict;
use warnings;


use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use POSIX ();


my $zk = LeafZK->new(nodes => 1);

sub new_node
{
	my ($name, $root, $extra) = @_;
	return $zk->pg_node($name, root => $root,
		extra => "leaf.max_clock_drift_ms = '2s'\n" . ($extra // ''));
}

# Start a node with its snowflake clock shifted (every process of the
# instance: the worker and the backends).
sub start_faked
{
	my ($node, $offset) = @_;
	my ($sign, $secs) = $offset =~ /^([+-])(\d+)s$/ or die "bad offset $offset";
	$node->append_conf('postgresql.conf',
		"leaf.test_node_clock_offset_ms = '${sign}${secs}000'\n");
	$node->start;
	return;
}

sub unfake
{
	my ($node) = @_;
	$node->append_conf('postgresql.conf', "leaf.test_node_clock_offset_ms = 0\n");
	return;
}

sub q1
{
	my ($node, $sql) = @_;
	return $node->safe_psql('postgres', $sql, timeout => 60);
}

# 1. Clock behind this node's record in ZooKeeper.  Run with +12 s, so
#    the record lies in the future, then restart with the real clock.
my $a = new_node('sf_clock_a', '/leaf/clock_record');
start_faked($a, '+12s');
q1($a, 'CREATE EXTENSION leaf');
ok($a->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'node runs with a clock 12 s ahead');
my $ahead_ms = q1($a, q[
SELECT max((extract(epoch FROM (leaf_snowflake_decode(id)).ts) * 1000)::bigint)
  FROM (SELECT leaf_snowflake() AS id FROM generate_series(1, 1000)) s]);
cmp_ok($ahead_ms, '>', int(time() * 1000) + 10_000, 'its IDs carry the shifted time');
my $wid = q1($a, 'SELECT worker_id FROM leaf_snowflake_status');
$a->stop;

# without the cache file, only ZooKeeper remembers the time
unfake($a);
unlink($a->data_dir . '/leaf_snowflake.state') or die $!;
$a->start;
LeafZK::wait_decided($a);
my $status = q1($a, 'SELECT worker_id, worker_id_source, ready, not_ready_reason, not_before IS NOT NULL FROM leaf_snowflake_status');
like($status, qr/^$wid\|zookeeper\|f\|clock is \d+ ms behind the last time recorded for this node, waiting for it to pass\|t$/,
	'restarted with the real clock: refused, the status view says why');
my ($ret, $out, $err) = $a->psql('postgres', "\\set VERBOSITY verbose\nSELECT leaf_snowflake()");
like($err, qr/ERROR:  LF102: snowflake generator is not ready\nDETAIL:  The snowflake worker says: clock is \d+ ms behind the last time recorded/,
	'leaf_snowflake raises LF102 with the reason');
ok($a->log_contains(qr/leaf snowflake generator not ready: clock is \d+ ms behind the last time recorded/),
	'the wait is logged');
ok($a->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'ready once the clock has passed the record');
my $first_ms = q1($a, q[
SELECT (extract(epoch FROM (leaf_snowflake_decode(leaf_snowflake())).ts) * 1000)::bigint]);
cmp_ok($first_ms, '>', $ahead_ms, 'first ID after the wait is above every ID issued with the fast clock');
$a->stop;

# 2. Peer clock check: b runs with the real clock; c starts 20 s ahead.
my $b = new_node('sf_clock_b', '/leaf/clock_peers');
$b->start;
q1($b, 'CREATE EXTENSION leaf');
LeafZK::wait_decided($b);
is(q1($b, 'SELECT ready, peers FROM leaf_snowflake_status'), 't|0', 'first node: no peers, ready');

my $c = new_node('sf_clock_c', '/leaf/clock_peers');
start_faked($c, '+20s');
q1($c, 'CREATE EXTENSION leaf');
ok( $c->poll_query_until('postgres',
		q[SELECT not_ready_reason LIKE 'clock differs from the median of 1 running peers by %' FROM leaf_snowflake_status]),
	'node 20 s ahead of its peer is refused');
my $offset = q1($c, 'SELECT peer_clock_offset_ms FROM leaf_snowflake_status');
cmp_ok($offset, '>', 19_000, "measured offset ($offset ms) is about 20 s");
cmp_ok($offset, '<', 21_000, 'and not more');
($ret, $out, $err) = $c->psql('postgres', "\\set VERBOSITY verbose\nSELECT leaf_snowflake()");
like($err, qr/LF102: snowflake generator is not ready\nDETAIL:  The snowflake worker says: clock differs from the median of 1 running peers/,
	'leaf_snowflake raises LF102 on the skewed node');
$c->stop;

# a node with the real clock passes the same check
my $d = new_node('sf_clock_d', '/leaf/clock_peers');
$d->start;
q1($d, 'CREATE EXTENSION leaf');
LeafZK::wait_decided($d);
is(q1($d, 'SELECT ready, peers, abs(peer_clock_offset_ms) < 1000 FROM leaf_snowflake_status'),
	't|1|t', 'node with a good clock passes the peer check');
isnt(q1($d, 'SELECT worker_id FROM leaf_snowflake_status'),
	q1($b, 'SELECT worker_id FROM leaf_snowflake_status'), 'and gets its own worker ID');

$b->stop;
$d->stop;
$zk->stop;
done_testing();
