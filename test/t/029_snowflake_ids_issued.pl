# leaf_snowflake_status.ids_issued counts the snowflake IDs handed out
# since the server started, by every process, single and bulk calls
# alike; the view of release 1.0 (no such column) still works with the
# new library until ALTER EXTENSION leaf UPDATE.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('issued', 'leaf.worker_id = 9');

is($node->safe_psql('postgres', 'SELECT ids_issued FROM leaf_snowflake_status'),
	'0', 'no ID issued yet');
$node->safe_psql('postgres', 'SELECT count(leaf_snowflake()) FROM generate_series(1, 1000)');
is($node->safe_psql('postgres', 'SELECT ids_issued FROM leaf_snowflake_status'),
	'1000', '1000 single calls count 1000');
$node->safe_psql('postgres', 'SELECT count(*) FROM leaf_snowflake_nextvals(50000)');
is($node->safe_psql('postgres', 'SELECT ids_issued FROM leaf_snowflake_status'),
	'51000', 'a bulk call of 50000 counts 50000');

# several sessions at once, each a process of its own
my @s = map {
	LeafTest::start_psql_script($node, 'postgres',
		"SELECT count(leaf_snowflake()) FROM generate_series(1, 20000);\n"
		  . "SELECT count(*) FROM leaf_snowflake_nextvals(30000);\n")
} 1 .. 4;
LeafTest::finish_psql_script($_) for @s;
is($node->safe_psql('postgres', 'SELECT ids_issued FROM leaf_snowflake_status'),
	51000 + 4 * 50000, 'four concurrent sessions are all counted');

# release 1.0's view, with the library of this release
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('old', "CREATE EXTENSION leaf VERSION '1.0'");
is($node->safe_psql('old', 'SELECT count(*), min(worker_id) FROM leaf_snowflake_status'),
	'1|9', 'the view of release 1.0 works with the new library');
$node->safe_psql('old', 'ALTER EXTENSION leaf UPDATE');
is($node->safe_psql('old', 'SELECT ids_issued FROM leaf_snowflake_status'),
	51000 + 4 * 50000, 'after the update it shows ids_issued');

$node->stop;
done_testing();
