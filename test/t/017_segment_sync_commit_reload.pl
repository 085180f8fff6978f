
# Copyright (c) leaf contributors

# A segment must be durable before its IDs are handed out, whatever
# synchronous_commit says, including after a reload.  The server starts
# with synchronous_commit = on, so the allocator starts with the default;
# then synchronous_commit = off is set with ALTER SYSTEM and a reload, the
# WAL writer is made slow, a tag with a tiny step is refilled many times
# (with leaf.preload_percent = 100, so that the IDs handed out last come
# from the segment committed last), and the server is stopped in
# immediate mode.  After the restart, every
# new ID must lie above every ID handed out before.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('synccommit',
	"wal_writer_delay = '10s'", "wal_writer_flush_after = '1GB'",
	"leaf.segment_duration = '1ms'", 'leaf.preload_percent = 100');

$node->safe_psql('postgres', "SELECT leaf_segment_create('sc', step => 5)");

# the allocator is running, started under synchronous_commit = on
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('sc')"),
	'1', 'the first ID is 1');
ok( LeafTest::wait_until(
		sub { scalar(LeafTest::allocator_pids($node, 'postgres')) == 1 },
		'the allocator to run'),
	'the allocator runs');

$node->safe_psql('postgres',
	'ALTER SYSTEM SET synchronous_commit = off; SELECT pg_reload_conf()');
ok( LeafTest::wait_until(
		sub {
			$node->safe_psql('postgres', 'SHOW synchronous_commit') eq 'off';
		},
		'the reload'),
	'synchronous_commit is off after the reload');
# the allocator rereads its settings when it wakes up for the next load

my @ids = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('sc') FROM generate_series(1, 2000)");
my $max_seen = LeafTest::max_of(@ids);
note "handed out up to $max_seen before the stop";
cmp_ok($max_seen, '>=', 2001, '2000 more IDs, over about 400 refills');

$node->stop('immediate');
$node->start;

my $first = $node->safe_psql('postgres', "SELECT leaf_segment_nextval('sc')");
note "first ID after the restart: $first";
cmp_ok($first, '>', $max_seen,
	"after an immediate stop, the first ID is above every ID handed out before ($max_seen)"
);

done_testing();
