
# Copyright (c) leaf contributors

# A tag's counter never goes backwards, whatever happens to its row:
# TRUNCATE of leaf_alloc is refused, and a tag that is deleted and
# inserted again with a lower max_id starts where it was, at once (while
# its segments are still cached) and after a restart.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('truncate', "leaf.tag_refresh_interval = '100ms'");

$node->safe_psql('postgres', "SELECT leaf_segment_create('t', step => 10)");
my @before = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('t') FROM generate_series(1, 25)");
my $max_seen = LeafTest::max_of(@before);
is($max_seen, 25, '25 IDs of t');

# TRUNCATE
my ($state, $err) =
  LeafTest::sqlstate($node, 'postgres', 'TRUNCATE leaf_alloc');
is($state, 'LF005', 'TRUNCATE leaf_alloc is refused with LF005');
is($node->safe_psql('postgres', "SELECT count(*) FROM leaf_alloc"),
	'1', 'the row is still there');
($state) = LeafTest::sqlstate($node, 'postgres', 'TRUNCATE leaf_alloc_retired');
is($state, 'LF005', 'TRUNCATE leaf_alloc_retired is refused with LF005');

# DELETE, wait until the slot is gone, INSERT again with max_id = 1
$node->safe_psql('postgres', "DELETE FROM leaf_alloc WHERE biz_tag = 't'");
ok( LeafTest::wait_until(
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM leaf_segments WHERE biz_tag = 't'") eq
			  '0';
		},
		'the slot of t to be freed'),
	'the deleted tag left shared memory');
$node->safe_psql('postgres',
	"INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)");
cmp_ok(
	$node->safe_psql(
		'postgres', "SELECT max_id FROM leaf_alloc WHERE biz_tag = 't'"),
	'>', $max_seen,
	'inserted again with max_id = 1, it starts above every ID handed out');
my @after = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('t') FROM generate_series(1, 25)");
cmp_ok(LeafTest::min_of(@after), '>', $max_seen,
	"its IDs are above every ID handed out before ($max_seen)");
$max_seen = LeafTest::max_of(@after);

# DELETE and INSERT in one transaction while segments are cached
$node->safe_psql(
	'postgres', q{
BEGIN;
DELETE FROM leaf_alloc WHERE biz_tag = 't';
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10);
COMMIT;});
my @same_txn = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('t') FROM generate_series(1, 25)");
is(scalar(@same_txn), 25,
	'deleted and inserted again in one transaction: the tag goes on working');
cmp_ok(LeafTest::min_of(@same_txn), '>', $max_seen,
	"and its IDs are above every ID handed out before ($max_seen)");
$max_seen = LeafTest::max_of(@same_txn);

# the same after a restart
$node->safe_psql(
	'postgres', q{
BEGIN;
DELETE FROM leaf_alloc WHERE biz_tag = 't';
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10);
COMMIT;});
$node->restart;
my @restarted = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('t') FROM generate_series(1, 25)");
cmp_ok(LeafTest::min_of(@restarted), '>', $max_seen,
	"after a restart, its IDs are above every ID handed out before ($max_seen)");

# a user who may write leaf_alloc needs no privilege on leaf_alloc_retired
$node->safe_psql(
	'postgres', q{
CREATE ROLE tag_admin LOGIN;
GRANT SELECT, INSERT, DELETE ON leaf_alloc TO tag_admin;
});
$node->safe_psql('postgres',
	"SET ROLE tag_admin; DELETE FROM leaf_alloc WHERE biz_tag = 't'; "
	  . "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)");
cmp_ok(
	$node->safe_psql(
		'postgres', "SELECT max_id FROM leaf_alloc WHERE biz_tag = 't'"),
	'>', LeafTest::max_of(@restarted),
	'a role with DELETE and INSERT on leaf_alloc gets the same protection');

$node->stop;
done_testing();
