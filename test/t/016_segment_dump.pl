
# Copyright (c) leaf contributors

# leaf_alloc is an extension configuration table: its rows survive
# pg_dump and restore, and a restored tag goes on above every ID handed
# out before the dump, once a superuser has confirmed that the restored
# database is not a copy beside a running original.
# copy-matrix: segment dump_same_cluster

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('dump');

$node->safe_psql('postgres', q{
CREATE DATABASE src;
CREATE DATABASE dst;});
$node->safe_psql('src', q{
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', 100, 1, 'orders');
SELECT leaf_segment_create('user', 10, 5000);
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('order'), note text);
INSERT INTO orders (note) SELECT 'n' || g FROM generate_series(1, 250) g;});
my $max_before = $node->safe_psql('src', 'SELECT max(id) FROM orders');
is($max_before, 250, 'IDs 1..250 handed out before the dump');

my $before = $node->safe_psql('src',
	'SELECT biz_tag, max_id, step, description FROM leaf_alloc ORDER BY biz_tag');

my $dump = $node->basedir . '/src.dump';
$node->command_ok(
	[ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('src') ],
	'pg_dump of a database with leaf');
$node->command_ok(
	[ 'pg_restore', '-d', $node->connstr('dst'), $dump ],
	'pg_restore into another database');

is( $node->safe_psql('dst',
		'SELECT biz_tag, max_id, step, description FROM leaf_alloc ORDER BY biz_tag'),
	$before,
	'the rows of leaf_alloc survive pg_dump and restore');
is($node->safe_psql('dst', 'SELECT count(*) FROM orders'),
	250, 'and so does the table that uses the tag');

# The restore is another database with the same counters: were the
# original to go on, both would hand out the same IDs.  So it is refused
# (LF006) until a superuser confirms it, as for a change of allocation
# database.
my ($refused, $why) = LeafTest::sqlstate($node, 'dst',
	q{INSERT INTO orders (note) VALUES ('before the confirmation')});
is($refused, 'LF006', 'the restored database is refused as a copy until confirmed');
like($why, qr/a copy \(CREATE DATABASE \.\.\. TEMPLATE, a restored dump/, 'and the detail says why');
like($node->safe_psql('dst', 'SELECT leaf_alloc_source_confirm()'),
	qr/^the local leaf_alloc \(database \d+ of system \d+\)$/, 'a superuser confirms it');

# the restored database hands out IDs above everything handed out before
$node->safe_psql('dst', q{INSERT INTO orders (note) VALUES ('after restore')});
my $first_after = $node->safe_psql('dst',
	q{SELECT id FROM orders WHERE note = 'after restore'});
cmp_ok($first_after, '>', $max_before,
	"the first ID after the restore ($first_after) is above every ID before it");
is($node->safe_psql('dst', "SELECT leaf_segment_nextval('user') >= 5000"),
	't', 'a tag never used before the dump starts at its max_id');

# the trigger that guards max_id came back with the extension
my ($state) = LeafTest::sqlstate($node, 'dst',
	"UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order'");
is($state, 'LF005', 'max_id still cannot move backwards after the restore');

$node->stop;
done_testing();
