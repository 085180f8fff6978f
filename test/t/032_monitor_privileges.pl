# Monitoring: a role in pg_monitor reads both views, leaf_segments and
# leaf_snowflake_status; a plain role may read neither the views nor the
# functions behind them (42501).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../lib";

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('monitor', 'leaf.worker_id = 5');

$node->safe_psql('postgres', q[
	INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('watched', 1, 100);
	SELECT leaf_segment_nextval('watched');
	SELECT leaf_snowflake();
	CREATE ROLE watcher LOGIN;
	GRANT pg_monitor TO watcher;
	CREATE ROLE plain LOGIN;
]);

is($node->safe_psql('postgres', q[SET ROLE watcher;
	SELECT biz_tag FROM leaf_segments]),
	'watched', 'a member of pg_monitor reads leaf_segments');
is($node->safe_psql('postgres', q[SET ROLE watcher;
	SELECT worker_id, ready FROM leaf_snowflake_status]),
	'5|t', 'a member of pg_monitor reads leaf_snowflake_status');
is($node->safe_psql('postgres', q[SET ROLE watcher;
	SELECT count(*) FROM leaf_segments(); SELECT count(*) FROM leaf_snowflake_status()]),
	"1\n1", 'a member of pg_monitor may call the functions behind them');

for my $q ('SELECT * FROM leaf_segments', 'SELECT * FROM leaf_segments()',
	'SELECT * FROM leaf_snowflake_status', 'SELECT * FROM leaf_snowflake_status()')
{
	my ($state, $err) = LeafTest::sqlstate($node, 'postgres', "SET ROLE plain; $q");
	is($state, '42501', "a plain role is refused: $q");
}

# the same through a login of its own, not only SET ROLE
my ($ret, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM leaf_snowflake_status',
	extra_params => [ '-U', 'watcher' ]);
is($out, '1', 'pg_monitor membership works for a login');

$node->stop;
done_testing();
