# Snowflake mode with ZooKeeper: with leaf.zk_auth set, the nodes leaf
# creates are readable and writable only with the same credentials, so that
# nobody else can rewrite a node's address or mark, or take its worker ID.
# The setting is never shown.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../lib";

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
$zk->stop;
done_testing();
