
# Copyright (c) leaf contributors

# DROP DATABASE frees the database's tag slots at once.  Before, they
# waited for the allocator of another database to free them, and if they
# filled leaf.max_tags no allocator could start anywhere to do it.  Also,
# ALTER DATABASE ... SET TABLESPACE stops the database's allocator first,
# as DROP DATABASE and RENAME do, so that it does not stand in the way.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('dropdb', 'leaf.max_tags = 16', 'leaf.max_tags_per_database = 0');

$node->safe_psql('postgres', 'CREATE DATABASE d1');
$node->safe_psql(
	'd1', q{
CREATE EXTENSION leaf;
SELECT leaf_segment_create('t' || g, step => 10) FROM generate_series(1, 16) g;
SELECT leaf_segment_nextval('t' || g) FROM generate_series(1, 16) g;});
is($node->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments'),
	'16', 'd1 holds all 16 slots');

$node->safe_psql('postgres', 'DROP DATABASE d1');
$node->safe_psql('postgres', "SELECT leaf_segment_create('p', step => 10)");
my ($state, $err) = LeafTest::sqlstate($node, 'postgres',
	"SELECT leaf_segment_nextval('p')");
is($state, undef, 'after DROP DATABASE d1, another database gets a slot')
  or diag $err;
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM leaf_segments WHERE biz_tag LIKE 't%'"),
	'0',
	'no slot of d1 is left');

$node->stop;

# ALTER DATABASE ... SET TABLESPACE with the allocator connected (on a
# node of its own, so that it does not depend on the part above)
my $node2 = LeafTest::new_node('settablespace');
my $tsdir = PostgreSQL::Test::Utils::tempdir_short();
$node2->safe_psql('postgres', "CREATE TABLESPACE leaf_ts LOCATION '$tsdir'");
$node2->safe_psql('postgres', 'CREATE DATABASE d2');
$node2->safe_psql(
	'd2', q{
CREATE EXTENSION leaf;
SELECT leaf_segment_create('m', step => 10);
SELECT leaf_segment_nextval('m');});
ok( LeafTest::wait_until(
		sub {
			$node2->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'leaf allocator' AND datname = 'd2'"
			) eq '1';
		},
		'the allocator of d2'),
	'the allocator of d2 is connected');
($state, $err) = LeafTest::sqlstate($node2, 'postgres',
	'ALTER DATABASE d2 SET TABLESPACE leaf_ts');
is($state, undef, 'ALTER DATABASE d2 SET TABLESPACE works') or diag $err;
cmp_ok($node2->safe_psql('d2', "SELECT leaf_segment_nextval('m')"),
	'>', 1, 'd2 serves IDs again afterwards');
$node2->safe_psql('postgres', 'DROP DATABASE d2');
$node2->safe_psql('postgres', 'DROP TABLESPACE leaf_ts');
$node2->stop;
done_testing();
