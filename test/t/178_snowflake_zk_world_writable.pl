# Snowflake mode with ZooKeeper: with leaf.zk_auth set, the nodes leaf
# creates are readable and writable only with the same credentials, so that
# nobody else can rewrite a node's address or mark, or take its worker ID.
# The setting is never shown.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);
my $node = $zk->pg_node('sf_auth', root => '/leaf/auth',
	extra => "leaf.zk_auth = 'leaf:s3cret-pw'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION leaf; CREATE ROLE app LOGIN');
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'ready with authentication');
my $path = $node->safe_psql('postgres', 'SELECT zk_node FROM leaf_snowflake_status');

my $get = $zk->cli('get', $path);
unlike($get, qr/"addr"/, 'an unauthenticated client cannot read the forever node');
like($get, qr/Insufficient permission|NoAuth/i, '... it is refused');
my $set = $zk->cli('set', $path, '{"addr":"intruder:1"}');
like($set, qr/Insufficient permission|NoAuth/i, 'nor rewrite it');
like($zk->cli('create', '-s', '/leaf/auth/forever/intruder:1-', 'x'),
	qr/Insufficient permission|NoAuth/i, 'nor register under it');

is($node->safe_psql('postgres', 'SHOW leaf.zk_auth'), '(set)', 'SHOW does not reveal the credentials');
my ($state) = LeafTest::sqlstate($node, 'postgres', 'SET ROLE app; SHOW leaf.zk_auth');
is($state, '42501', 'an ordinary role may not even see that it is set');
ok(!$node->log_contains(qr/s3cret-pw/), 'the credentials are not in the log');

# heartbeats go on with the creator-only ACL
my $hb = $node->safe_psql('postgres', 'SELECT last_heartbeat FROM leaf_snowflake_status');
ok($node->poll_query_until('postgres', "SELECT last_heartbeat > '$hb' AND ready FROM leaf_snowflake_status"),
	'heartbeats go on');

$node->stop;

# Credentials one node at a time: an open tree, one node joins with
# leaf.zk_auth (its nodes are closed to the others); nodes without
# credentials still register next to it (before 1.3 they could no longer
# read the tree), and nobody repeats an ID.
my $root = '/rollout/leaf';
my $o1 = $zk->start_pg_node('sf_open1', root => $root, extra => "leaf.node_address = 'o1.example:1'\n");
ok($o1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'o1 (no credentials) is ready');
# a tree made by an older release has no claimed/: the node with
# credentials that makes it gives it the root's (open) ACL
like($zk->cli('delete', "$root/claimed"), qr/^(?!.*Exception)/s, 'claimed/ deleted, as in a tree of 1.2');

# the credentials in a file, which pg_file_settings does not show
my $authfile = PostgreSQL::Test::Utils::tempdir() . '/zk_auth';
open my $af, '>', $authfile or die $!;
print $af "leaf:r0ll0ut-pw\n";
close $af;
chmod 0644, $authfile;
my $a1 = $zk->start_pg_node('sf_auth1', root => $root,
	extra => "leaf.node_address = 'a1.example:1'\nleaf.zk_auth_file = '$authfile'\n");
ok(LeafZK::wait_decided($a1), 'a1 has decided');
like(LeafZK::status($a1, 'ready, not_ready_reason'),
	qr/^f\|"leaf\.zk_auth_file" "[^"]+" has group or world access/,
	'a credentials file readable by others is refused');
chmod 0600, $authfile;
$a1->restart;
ok($a1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'a1 (credentials from a file) is ready');
my $a1path = LeafZK::status($a1, 'zk_node');
like($zk->cli('get', $a1path), qr/Insufficient permission|NoAuth/i, "a1's forever node is closed to others");
is($a1->safe_psql('postgres', q[SELECT count(*) FROM pg_file_settings WHERE setting LIKE '%r0ll0ut%']), '0',
	'pg_file_settings does not show the password');
ok(!$a1->log_contains(qr/r0ll0ut-pw/), 'nor does the log');

my $o2 = $zk->start_pg_node('sf_open2', root => $root, extra => "leaf.node_address = 'o2.example:1'\n");
ok($o2->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'o2 (no credentials) registers beside a node with credentials');
like($zk->cli('getAcl', "$root/claimed"), qr/world/, 'claimed/ has the open ACL of the root');
$o1->restart;
ok($o1->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'and o1 after a restart');
my %wids = map { (LeafZK::status($_, 'worker_id') => 1) } ($o1, $a1, $o2);
is(scalar(keys %wids), 3, 'the three nodes have three worker IDs');
my ($n, $repeats) = LeafZK::repeats_at_once(50000, $o1, $a1, $o2);
is($repeats, 0, 'no ID is repeated');

$_->stop for ($o1, $a1, $o2);
$zk->stop;
done_testing();
