# Snowflake mode: a worker ID given up with leaf_snowflake_new_worker_id()
# is taken over again once its mark has passed, with
# leaf.worker_id_reclaim_after at 0 (the default), so that asking for new
# worker IDs does not use up a layout's worker IDs for good.  When none is
# left yet, the node waits for the first given-up one whose mark passes,
# and says so.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);

# Ask for a new worker ID and wait until the node serves with another
# one; return it.
sub new_worker_id
{
	my ($node, $old) = @_;
	$node->safe_psql('postgres', 'SELECT leaf_snowflake_new_worker_id()');
	LeafTest::wait_until(sub {
			LeafZK::status($node, q[ready AND worker_id IS DISTINCT FROM ] . $old) eq 't';
		}, 'a new worker ID', 60);
	return LeafZK::status($node, 'worker_id');
}

# IDs of the node now, with the worker ID in them checked
sub ids_of
{
	my ($node, $wid, $shift, $bits) = @_;
	my @ids = split /\n/, $node->safe_psql('postgres',
		'SELECT leaf_snowflake() FROM generate_series(1, 500)');
	my $bad = grep { (($_ >> $shift) & ((1 << $bits) - 1)) != $wid } @ids;
	is($bad, 0, "IDs carry worker ID $wid");
	return @ids;
}

# 1. One node, four worker IDs (41+2+20): six new worker IDs in a row.
my $node = $zk->start_pg_node('sf_recycle', root => '/leaf/recycle',
	extra => "leaf.node_address = 'rc.example:1'\nleaf.snowflake_layout = '41+2+20'\n");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');
my $wid = LeafZK::status($node, 'worker_id');
my @all = ids_of($node, $wid, 20, 2);
my %seen_wid = ($wid => 1);
for my $i (1 .. 6)
{
	my $new = new_worker_id($node, $wid);
	ok($new >= 0 && $new <= 3, "new worker ID $i is $new, within the layout's 0-3");
	isnt($new, $wid, '... another than before');
	$seen_wid{$new} = 1;
	$wid = $new;
	push @all, ids_of($node, $wid, 20, 2);
}
my %u;
is(scalar(grep { $u{$_}++ } @all), 0, scalar(@all) . ' IDs, none repeated');
ok($node->log_contains(qr/took over worker ID \d+, which rc\.example:1 gave up on request/),
	'a given-up worker ID was taken over again');
unlike(slurp_file($node->logfile), qr/above the limit/, 'the node never ran out of worker IDs');
$node->stop;

# 2. Two nodes, two worker IDs (41+1+21): the second gives its worker ID
# up while the first holds the other, so none is left until the mark of
# the given-up one passes (2 heartbeats and 1 s: 7 s).
my $root = '/leaf/recycle2';
my $na = $zk->start_pg_node('sf_recycle_a', root => $root,
	extra => "leaf.node_address = 'ra.example:1'\nleaf.snowflake_layout = '41+1+21'\n");
ok($na->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'node a ready');
my $nb = $zk->start_pg_node('sf_recycle_b', root => $root,
	extra => "leaf.node_address = 'rb.example:1'\nleaf.snowflake_layout = '41+1+21'\n"
	  . "leaf.heartbeat_interval = '3s'\n");
ok($nb->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'node b ready');
my $wa = LeafZK::status($na, 'worker_id');
my $wb = LeafZK::status($nb, 'worker_id');
isnt($wa, $wb, "nodes a and b hold worker IDs $wa and $wb");
my @before = ids_of($nb, $wb, 21, 1);

my $offset = -s $nb->logfile;
$nb->safe_psql('postgres', 'SELECT leaf_snowflake_new_worker_id()');
ok($nb->poll_query_until('postgres',
	qq[SELECT not_ready_reason ~ 'above the limit of 1; worker ID $wb, given up on request, is taken over once its mark passes, in \\d+ ms' FROM leaf_snowflake_status]),
	'with no worker ID left, node b waits for the mark of the one it gave up')
  or note LeafZK::status($nb, 'not_ready_reason');
my ($state) = LeafTest::sqlstate($nb, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'calls fail with LF102 meanwhile');
ok($nb->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'node b serves again once that mark has passed');
is(LeafZK::status($nb, 'worker_id'), $wb, "with worker ID $wb, taken over again");
my @after = ids_of($nb, $wb, 21, 1);
my $max_before = (sort { $b <=> $a } @before)[0];
my $min_after = (sort { $a <=> $b } @after)[0];
cmp_ok($min_after, '>', $max_before, 'its IDs are above those it issued before');
like($zk->cli('ls', "$root/forever"), qr/\[[^,\]]+, [^,\]]+\]/,
	'the node above the limit, made while waiting, was removed: two forever nodes');
unlike(slurp_file($nb->logfile, $offset), qr/above the limit of 1, and no worker ID/,
	'never refused for good');
is(LeafZK::status($na, 'ready'), 't', 'node a served throughout');

$na->stop;
$nb->stop;
$zk->stop;
done_testing();
