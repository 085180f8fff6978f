
# Copyright (c) leaf contributors

# Segment mode across immediate shutdowns: while many clients take IDs of
# a tag with a tiny step (the allocator commits a new segment every few
# IDs), the server is stopped in immediate mode and started again, three
# times.  After each restart every new ID lies above every ID handed out
# before (the first segment, which the warm start loads, too), and no ID
# ever repeats.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('immediate', "leaf.segment_duration = '1ms'");

$node->safe_psql(
	'postgres', q{
SELECT leaf_segment_create('imm', step => 5);
CREATE TABLE it (
	id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('imm'),
	cycle int NOT NULL);});

my @all;         # every ID seen so far, whatever its source
my $max_seen;    # the largest of them

for my $cycle (1 .. 3)
{
	my $bench = LeafTest::start_pgbench(
		$node, 'postgres',
		"INSERT INTO it (cycle) VALUES (:cycle);\n",
		[ '-c', 8, '-j', 2, '-T', 60, '-D', "cycle=$cycle" ]);
	my @streams =
	  map { LeafTest::start_id_stream($node, 'postgres', 'imm', 200000) }
	  1 .. 2;

	ok( LeafTest::wait_until(
			sub {
				LeafTest::id_stream_count($streams[0]) >= 1500
				  && LeafTest::id_stream_count($streams[1]) >= 1500
				  && $node->safe_psql('postgres',
					"SELECT count(*) >= 1500 FROM it WHERE cycle = $cycle") eq
				  't';
			},
			"cycle $cycle to get going"),
		"cycle $cycle: clients are taking IDs");

	my ($refills, $waits) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT refills, waits FROM leaf_segments WHERE biz_tag = 'imm'");
	note "cycle $cycle: $refills refills and $waits waits before the stop";

	$node->stop('immediate');

	my @cycle_ids;
	for my $s (@streams)
	{
		push @cycle_ids, LeafTest::finish_id_stream($s);
	}
	my $r = LeafTest::finish_pgbench($bench);
	isnt($r->{rc}, 0, "cycle $cycle: pgbench was cut off by the stop");

	$node->start;

	push @cycle_ids, split /\n/,
	  $node->safe_psql('postgres', "SELECT id FROM it WHERE cycle = $cycle");
	note "cycle $cycle: "
	  . scalar(@cycle_ids)
	  . ' IDs seen, from '
	  . LeafTest::min_of(@cycle_ids) . ' to '
	  . LeafTest::max_of(@cycle_ids);

	if (defined $max_seen)
	{
		cmp_ok(LeafTest::min_of(@cycle_ids), '>', $max_seen,
			"cycle $cycle: every ID is above every ID of the cycles before ($max_seen)"
		);
	}
	push @all, @cycle_ids;
	$max_seen = LeafTest::max_of(@all);
	is(LeafTest::count_repeats(\@all),
		0, "cycle $cycle: no repeats among the " . scalar(@all) . ' IDs so far');
	# the segments of before are gone; the warm start may have loaded one
	is($node->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments WHERE refills > 1'),
		0, "cycle $cycle: shared memory holds no segment of before the restart");
}

# the tag keeps working after the last restart, above everything before
my @last = split /\n/,
  $node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('imm') FROM generate_series(1, 100)");
is(scalar(@last), 100, 'the tag works after the last restart');
cmp_ok(LeafTest::min_of(@last), '>', $max_seen,
	"its IDs are above every ID handed out before ($max_seen)");
cmp_ok(
	LeafTest::max_of(@last), '<',
	$node->safe_psql(
		'postgres', "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'imm'"),
	'and below leaf_alloc.max_id');
is($node->safe_psql('postgres', 'SELECT count(*) - count(DISTINCT id) FROM it'),
	0, 'the committed rows hold no duplicate');

done_testing();
