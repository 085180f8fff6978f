
# Copyright (c) leaf contributors

# leaf_segments.state says what a call would do now, and ids_issued
# counts the IDs handed out: a tag whose loads fail (leaf_alloc locked by
# another session, past the allocator's lock_timeout) is 'failing' once
# its buffers are empty, and 'ok' again once a load works; the old
# last_error stays, but no longer counts.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('main',
	"leaf.wait_timeout = '1s'",
	"leaf.segment_duration = '1h'");
$node->safe_psql('postgres', q[
SELECT leaf_segment_create('h', step => 5);
CREATE ROLE mon LOGIN IN ROLE pg_monitor;]);

sub row
{
	return $node->safe_psql('postgres',
		"SELECT $_[0] FROM leaf_segments WHERE biz_tag = 'h'");
}

is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('h')"), '1', 'first ID');
ok($node->poll_query_until('postgres',
		q[SELECT next_ready FROM leaf_segments WHERE biz_tag = 'h']),
	'the second buffer is loaded');
is(row(q[state || ' ' || ids_issued || ' ' || last_refill_server || ' ' || timeline]),
	'ok 1 local 1', "state 'ok', 1 ID issued, last refill local on timeline 1");

# another session locks leaf_alloc for a while
my $locker = LeafTest::start_psql_script($node, 'postgres', q[
BEGIN;
LOCK TABLE leaf_alloc IN EXCLUSIVE MODE;
SELECT pg_sleep(8);
COMMIT;
]);
ok($node->poll_query_until('postgres',
		q[SELECT count(*) > 0 FROM pg_locks WHERE relation = 'leaf_alloc'::regclass AND mode = 'ExclusiveLock' AND granted]),
	'leaf_alloc is locked');

# both buffers are used up, and the next load cannot take its row
is($node->safe_psql('postgres', "SELECT count(leaf_segment_nextval('h')) FROM generate_series(1, 9)"),
	'9', 'IDs 2 to 10 come from the buffers');
ok($node->poll_query_until('postgres',
		q[SELECT state = 'failing' FROM leaf_segments WHERE biz_tag = 'h']),
	"with both buffers empty and the last load failed, state is 'failing'");
my ($state) = LeafTest::sqlstate($node, 'postgres', "SELECT leaf_segment_nextval('h')");
is($state, 'LF003', 'a call fails with LF003');
like(row('last_error'), qr/lock timeout/, 'last_error says why');
is(row('ids_issued'), '10', 'ids_issued counts the 10 IDs handed out');
is($node->safe_psql('postgres', q[SELECT state FROM leaf_segments WHERE biz_tag = 'h'],
		extra_params => [ '-U', 'mon' ]),
	'failing', 'a member of pg_monitor reads the state');

# the lock goes away: the worker's next retry mends it
my ($rc) = LeafTest::finish_psql_script($locker);
is($rc, 0, 'the locking session committed');
ok($node->poll_query_until('postgres',
		q[SELECT state = 'ok' FROM leaf_segments WHERE biz_tag = 'h']),
	"after a load works again, state is 'ok'");
isnt(row('last_error'), '', 'the old last_error is still shown');
is(row('last_refill > last_failure'), 't', 'and last_refill is later than last_failure');
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('h')"), '11',
	'the next call is served');
is(row('ids_issued'), '11', 'ids_issued is 11');

$node->stop;
done_testing();
