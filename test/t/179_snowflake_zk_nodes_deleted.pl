# Snowflake mode with ZooKeeper: an operator deletes <root>/forever while a
# node serves.  The node must stop at once and register again, and a node
# registering meanwhile must not repeat its IDs: a new registration uses
# its worker ID only past the longest lease an earlier holder could use.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);

my $n1 = $zk->start_pg_node('sf_del1', root => '/leaf/del');
ok($n1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'n1 is ready');
my $wid1 = $n1->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');

note $zk->cli('deleteall', '/leaf/del/forever');

my $n2 = $zk->start_pg_node('sf_del2', root => '/leaf/del');
ok($n2->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'n2 is ready');

ok($n1->log_contains(qr/forever node \S+ is gone from ZooKeeper/),
	'n1 noticed that its forever node is gone');
ok($n1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'n1 registered again and serves');
my $w1 = $n1->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
my $w2 = $n2->safe_psql('postgres', 'SELECT worker_id FROM leaf_snowflake_status');
isnt($w1, $w2, "n1 and n2 serve with different worker IDs ($w1, $w2)");

# both at once: count repeated IDs
my ($nids, $repeats) = LeafZK::repeats_at_once(200000, $n1, $n2);
cmp_ok($nids, '>=', 200000, 'both nodes generated');
is($repeats, 0, 'no ID is repeated');

$_->stop for ($n1, $n2);
$zk->stop;
done_testing();
