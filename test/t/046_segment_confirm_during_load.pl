# Copyright (c) leaf contributors

# A copy of a database (CREATE DATABASE ... TEMPLATE) is refused (LF006)
# until a superuser confirms it with leaf_alloc_source_confirm().  A load
# that the allocator picked up before the confirmation read the source as
# it was then, and fails with LF006 after it: a call made after the
# confirmation must not get that failure, but a segment of a load picked
# up after it came.  leaf.test_source_pause_ms holds the first load after
# its read of leaf_alloc_source, so that the confirmation and the next
# call come while it is under way.

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $pause_ms = 3000;
# the load after the confirmation may be held too, until the allocator
# sees the setting reset: callers wait long enough for both
my $node = LeafTest::new_node('confirm', {}, "leaf.segment_duration = '1ms'",
	"leaf.wait_timeout = '30s'");

$node->safe_psql('postgres', q[
	CREATE DATABASE original;]);
$node->safe_psql('original', q[
	CREATE EXTENSION leaf;
	SELECT leaf_segment_create('order', step => 10);
	SELECT leaf_segment_nextval('order');]);
$node->safe_psql('postgres', 'CREATE DATABASE copy TEMPLATE original');
$node->safe_psql('copy', 'UPDATE leaf_alloc SET max_id = 1000000');

$node->safe_psql('postgres',
	"ALTER SYSTEM SET leaf.test_source_pause_ms = '${pause_ms}ms'; SELECT pg_reload_conf()");
LeafTest::wait_setting($node, 'leaf.test_source_pause_ms', $pause_ms);

# the first call asks for a load, and gives up waiting for it
my ($ret, $out, $err) = $node->psql('copy',
	"SET statement_timeout = '300ms'; SELECT leaf_segment_nextval('order')");
like($err, qr/canceling statement due to statement timeout/,
	'the first call in the copy waits for a load that is held after its check read the source');
my $t_first = Time::HiRes::time();

# the load has read leaf_alloc_source by now (it is paused after that)
ok($node->poll_query_until('copy', q[
	SELECT count(*) > 0 FROM pg_stat_activity
	 WHERE backend_type = 'leaf allocator' AND datname = 'copy'
	   AND wait_event = 'Extension']),
	'... the allocator of the copy is in that pause');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET leaf.test_source_pause_ms; SELECT pg_reload_conf()');

like($node->safe_psql('copy', 'SELECT leaf_alloc_source_confirm()'),
	qr/^the local leaf_alloc \(database \d+ of system \d+\)$/,
	'a superuser confirms the copy while that load is under way');
cmp_ok(Time::HiRes::time() - $t_first, '<', $pause_ms / 1000,
	'... before the load picked up earlier ends');

# the next call: the held load fails with LF006 (it read the source
# before the confirmation), and the call is served by the next one
my $t0 = Time::HiRes::time();
($ret, $out, $err) = $node->psql('copy', "SELECT leaf_segment_nextval('order')");
is($ret, 0, 'the first call after the confirmation is served')
  or diag($err);
is($out, '1000000', '... from the copy\'s own counters');
diag(sprintf('it waited %.1f s', Time::HiRes::time() - $t0));
is($node->safe_psql('copy', q[
	SELECT failed_loads || ' ' || last_error_code || ' ' || error_current
	  FROM leaf_segment_errors() WHERE database = 'copy' AND biz_tag = 'order']),
	'1 LF006 false', '... after the held load had failed with LF006, the only failure');

# and the original is not affected
is($node->safe_psql('original', "SELECT leaf_segment_nextval('order') < 1000000"),
	't', 'the original goes on with its own counters');

$node->stop;
done_testing();
