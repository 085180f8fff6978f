
# Copyright (c) leaf contributors

# A clone of the whole data directory (pg_basebackup, started as a
# primary without a signal file) keeps its original's system identifier,
# database OIDs and timeline: only the data directory tells it apart.
# The clone is refused (LF006) at its first load while the original goes
# on serving; once a superuser has raised its counters and confirmed, it
# serves, and no ID is handed out by both.  The original restarted in its
# own data directory is not taken for a clone, and neither is a standby
# promoted with leaf.alloc_failover = 'synchronous' (a new timeline).
# copy-matrix: segment clone_primary
# copy-matrix: segment promote_sync

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @conf = ("leaf.segment_duration = '1ms'", "leaf.alloc_failover = 'synchronous'",
	'wal_level = replica', 'max_wal_senders = 4');
my $orig = LeafTest::new_node('orig', @conf);
$orig->safe_psql('postgres', q[SELECT leaf_segment_create('order', step => 100)]);
my @orig_ids = LeafTest::take_ids($orig, 'order', 300);

$orig->backup('clone');
my $clone = LeafTest::new_node_from_backup('clone', $orig, 'clone');

my $tl_sql = 'SELECT timeline_id FROM pg_control_checkpoint()';
is($clone->safe_psql('postgres', $tl_sql), $orig->safe_psql('postgres', $tl_sql),
	'the clone is on its original\'s timeline');
is($clone->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	$orig->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	'with its system identifier');

my ($ids, $states, $err) = LeafTest::take_each($clone, 'order', 20);
is(scalar(@$ids), 0, 'the clone hands out no ID');
is_deeply([ sort keys %{ { map { $_ => 1 } @$states } } ], ['LF006'],
	'it is refused with LF006');
like($err, qr/DETAIL:.*a clone of the data directory \(pg_basebackup, a file system copy\) started as a primary/,
	'the detail names the clone (for a superuser)');

# the original goes on
push @orig_ids, LeafTest::take_ids($orig, 'order', 300);

# the operator gives the clone counters of its own, and confirms
$clone->safe_psql('postgres', 'UPDATE leaf_alloc SET max_id = 1000000');
like($clone->safe_psql('postgres', 'SELECT leaf_alloc_source_confirm()'),
	qr/^the local leaf_alloc \(database \d+ of system \d+\)$/, 'a superuser confirms the clone');
my @clone_ids = LeafTest::take_ids($clone, 'order', 300);
is(scalar(@clone_ids), 300, 'the confirmed clone serves');
cmp_ok(LeafTest::min_of(@clone_ids), '>=', 1000000, 'from its own counters');

# the original, restarted in its own data directory, is no clone
$orig->restart;
($ids, $states, $err) = LeafTest::take_each($orig, 'order', 300);
is(scalar(@$states), 0, 'the original serves after a restart') or diag $err;
push @orig_ids, @$ids;

# nor is a standby promoted on a new timeline with 'synchronous'
$orig->backup('standby');
my $standby = LeafTest::new_node_from_backup('standby', $orig, 'standby',
	{ init => [ has_streaming => 1 ] });
push @orig_ids, LeafTest::take_ids($orig, 'order', 100);
$orig->wait_for_catchup($standby);
$orig->stop;
$standby->promote;
($ids, $states, $err) = LeafTest::take_each($standby, 'order', 200);
is(scalar(@$states), 0, 'a standby promoted with leaf.alloc_failover = synchronous serves')
  or diag $err;
push @orig_ids, @$ids;
is($standby->safe_psql('postgres', q[SELECT count(*) FROM leaf_alloc_source
		WHERE state = 'current' AND timeline = 2 AND data_directory IS NOT NULL]),
	'1', 'and its timeline and data directory are recorded');

my $shared = LeafTest::count_repeats([ @orig_ids, @clone_ids ]);
diag sprintf('the original (and its standby) handed out %d IDs, the clone %d; shared: %d',
	scalar(@orig_ids), scalar(@clone_ids), $shared);
is($shared, 0, '0 IDs shared between the original and its clone');

done_testing();
