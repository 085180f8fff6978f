
# Copyright (c) leaf contributors

# A query cancel that reaches the allocator between loads has nothing to
# cancel: the worker must go on serving, not die with FATAL.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('cancel');

$node->safe_psql('postgres', "SELECT leaf_segment_create('c', step => 10)");
is($node->safe_psql('postgres', "SELECT leaf_segment_nextval('c')"),
	'1', 'the first ID is 1');
ok( LeafTest::wait_until(
		sub { scalar(LeafTest::allocator_pids($node, 'postgres')) == 1 },
		'the allocator to run'),
	'the allocator runs');
my ($pid) = LeafTest::allocator_pids($node, 'postgres');

my $log_offset = -s $node->logfile;
for (1 .. 3)
{
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)"),
		't', "cancel $_ sent to the idle allocator");
	# let it handle the signal, then give it a load to do
	$node->safe_psql('postgres',
		"SELECT count(*) FROM leaf_segment_nextvals('c', 25)");
}

is_deeply([ LeafTest::allocator_pids($node, 'postgres') ],
	[$pid], 'the same allocator is still running');
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/FATAL/, 'no FATAL in the server log');
unlike($log, qr/leaf allocator.*exited with exit code 1/,
	'the allocator did not exit');
is( $node->safe_psql(
		'postgres', "SELECT count(DISTINCT x) FROM leaf_segment_nextvals('c', 100) x"),
	'100',
	'the tag still works');

done_testing();
