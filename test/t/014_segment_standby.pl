
# Copyright (c) leaf contributors

# Segment mode on a hot standby: allocation writes leaf_alloc, so a call on
# the standby fails with SQLSTATE 25006 and says it needs a primary, while
# the primary keeps handing out IDs.
# copy-matrix: segment standby

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $primary = LeafTest::new_node('primary', { init => [ allows_streaming => 1 ] });
$primary->safe_psql('postgres', "SELECT leaf_segment_create('order', step => 10)");
is( $primary->safe_psql(
		'postgres', "SELECT leaf_segment_nextval('order') FROM generate_series(1, 3)"),
	"1\n2\n3",
	'the primary hands out IDs');

$primary->backup('bkp');
my $standby = LeafTest::new_node_from_backup('standby', $primary, 'bkp',
	{ init => [ has_streaming => 1 ] });
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');
is( $standby->safe_psql(
		'postgres', "SELECT count(*) FROM leaf_alloc WHERE biz_tag = 'order'"),
	1, 'the standby sees the leaf_alloc row');

my ($state, $err) = LeafTest::sqlstate($standby, 'postgres',
	"SELECT leaf_segment_nextval('order')");
is($state, '25006', 'leaf_segment_nextval on the standby fails with 25006');
like($err, qr/cannot allocate IDs of biz_tag "order" during recovery/,
	'the error names the tag and the recovery');
like($err, qr/needs a primary/, 'and says that allocation needs a primary');
note $err;

# unknown tags and the bulk function are refused the same way
($state) = LeafTest::sqlstate($standby, 'postgres',
	"SELECT leaf_segment_nextval('no such tag')");
is($state, '25006', 'an unknown tag on the standby: also 25006');
($state) = LeafTest::sqlstate($standby, 'postgres',
	"SELECT count(*) FROM leaf_segment_nextvals('order', 10)");
is($state, '25006', 'leaf_segment_nextvals on the standby: 25006');

# a column default fails the same way, inside a read-write attempt
($state) = LeafTest::sqlstate($standby, 'postgres',
	'SELECT leaf_segment_nextval(biz_tag) FROM leaf_alloc');
is($state, '25006', 'called from a query over leaf_alloc: 25006');

is($standby->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments'),
	0, 'the standby took no slot in shared memory');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'leaf allocator'"),
	0, 'no allocator worker runs on the standby');

# the primary goes on, and the standby replays its allocations
is( $primary->safe_psql(
		'postgres', "SELECT leaf_segment_nextval('order') FROM generate_series(1, 20)"),
	join("\n", 4 .. 23),
	'the primary keeps handing out IDs');
$primary->wait_for_catchup($standby);
is( $standby->safe_psql(
		'postgres', "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order'"),
	$primary->safe_psql(
		'postgres', "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order'"),
	'the standby replays the allocations of the primary');

done_testing();
