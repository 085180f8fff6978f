# Snowflake mode: a ZooKeeper root records the layout of its IDs
# (<root>/layout), and a node of another layout neither registers nor
# claims there.
#  - the first node of a root records its layout; a node of another
#    layout is refused (LF102, naming both), whether its worker ID comes
#    from ZooKeeper or is set by hand and claimed;
#  - a root that older releases numbered (forever nodes, no layout node)
#    is of the default layout: a js53 node is refused there, a default
#    node records the default;
#  - with 13 worker bits (41+13+9), ZooKeeper's numbering goes past 1023:
#    with 1,100 forever nodes there already, a new node gets worker ID
#    1100 and its IDs carry it.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $zk = LeafZK->new(nodes => 1);

# the first node of a root records its layout
my $a = $zk->start_pg_node('sf_lz_a', root => '/leaf/js53',
	extra => "leaf.snowflake_layout = 'js53'\nleaf.node_address = 'a.example:1'\n");
ok($a->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'a js53 node registers under a new root');
like($zk->cli('get', '/leaf/js53/layout'), qr/^41\+6\+6\/1ms$/m,
	'the root records layout 41+6+6/1ms');
my $id = $a->safe_psql('postgres', 'SELECT leaf_snowflake()');
cmp_ok($id, '<', 2**53, 'its IDs are below 2^53');
is($a->safe_psql('postgres', 'SELECT (leaf_snowflake_decode(leaf_snowflake())).worker_id'),
	LeafZK::status($a, 'worker_id'), 'and carry its worker ID');

# a node of the default layout under that root: refused
my $b = $zk->start_pg_node('sf_lz_b', root => '/leaf/js53', wait_timeout => '2s',
	extra => "leaf.node_address = 'b.example:1'\n");
LeafZK::wait_decided($b);
my ($state, $err) = LeafTest::sqlstate($b, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', 'a default node under the js53 root: LF102');
like($err, qr/ZooKeeper root \/leaf\/js53 records layout 41\+6\+6\/1ms, but "leaf\.snowflake_layout" is 41\+10\+12\/1ms/,
	'... naming both layouts');
unlike($zk->cli('ls', '/leaf/js53/forever'), qr/b\.example/,
	'it made no forever node there');

# a hand-set worker ID of the default layout, claimed there: refused too
my $c = $zk->start_pg_node('sf_lz_c', root => '/leaf/js53', wait_timeout => '2s',
	extra => "leaf.worker_id = 5\nleaf.node_address = 'c.example:1'\n");
ok($c->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '%records layout 41+6+6/1ms, but "leaf.snowflake_layout" is 41+10+12/1ms%' FROM leaf_snowflake_status]),
	'a hand-set node of another layout does not claim its worker ID there');
is(LeafTest::sqlstate($c, 'postgres', 'SELECT leaf_snowflake()'), 'LF102', '... and does not serve');
unlike($zk->cli('ls', '/leaf/js53/claimed'), qr/0000000005/, '... nor is worker ID 5 claimed');
$b->stop;
$c->stop;

# a root numbered before roots recorded layouts
my $out = $zk->cli_script(
	"create /leaf/old\ncreate /leaf/old/forever\ncreate /leaf/old/temporary\n"
	  . qq[create -s /leaf/old/forever/10.0.0.8:5432- {"addr":"10.0.0.8:5432","ts":1,"hwm":1}\n]);
unlike($out, qr/KeeperErrorCode/, 'a root with a forever node and no layout node');
my $d = $zk->start_pg_node('sf_lz_d', root => '/leaf/old', wait_timeout => '2s',
	extra => "leaf.snowflake_layout = 'js53'\nleaf.node_address = 'd.example:1'\n");
ok($d->poll_query_until('postgres',
	q[SELECT not_ready_reason LIKE '%ZooKeeper root /leaf/old holds nodes that registered before it recorded a layout, so its IDs have the default layout 41+10+12/1ms, but "leaf.snowflake_layout" is 41+6+6/1ms%' FROM leaf_snowflake_status]),
	'a js53 node is refused under a root older releases numbered');
unlike($zk->cli('ls', '/leaf/old'), qr/\blayout\b/, 'and records no layout there');
$d->stop;
my $e = $zk->start_pg_node('sf_lz_e', root => '/leaf/old',
	extra => "leaf.node_address = 'e.example:1'\n");
ok($e->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'a default node registers there');
like($zk->cli('get', '/leaf/old/layout'), qr/^41\+10\+12\/1ms$/m,
	'and records the default layout');
is(LeafZK::status($e, 'worker_id'), '1', 'with the next worker ID');
$e->stop;

# 13 worker bits: past worker ID 1023.  1,100 forever nodes of another
# address, which never bounded their leases (so none is taken over).
my $cmds = "create /leaf/wide\ncreate /leaf/wide/forever\ncreate /leaf/wide/temporary\n"
  . "create /leaf/wide/layout 41+13+9/1ms\n";
$cmds .= qq[create -s /leaf/wide/forever/10.0.0.9:5432- {"addr":"10.0.0.9:5432","ts":1,"hwm":1}\n]
  for 1 .. 1100;
$out = $zk->cli_script($cmds . "ls /leaf/wide/forever\n");
like($out, qr/10\.0\.0\.9:5432-0000001099/, 'ZooKeeper holds forever nodes 0..1099 of another address');
my $f = $zk->start_pg_node('sf_lz_f', root => '/leaf/wide',
	extra => "leaf.snowflake_layout = '41+13+9'\nleaf.node_address = 'f.example:1'\n");
ok($f->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'a node with 13 worker bits registers');
is(LeafZK::status($f, 'worker_id'), '1100', 'with worker ID 1100');
is( $f->safe_psql('postgres',
		'SELECT count(DISTINCT id), bool_and((leaf_snowflake_decode(id)).worker_id = 1100), max((leaf_snowflake_decode(id)).sequence) < 512 FROM leaf_snowflake_nextvals(20000) AS id'),
	'20000|t|t', 'its IDs carry worker ID 1100, with 9-bit sequences');
$f->stop;

$a->stop;
$zk->stop;
done_testing();
