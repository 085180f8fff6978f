
# Copyright (c) leaf contributors

# Segment mode under concurrency: many pgbench clients take IDs from one
# tag with a tiny step (so the allocator refills all the time) while a
# quarter of the transactions roll back.  No client may fail, no ID may
# repeat, every ID lies in the range leaf_alloc has given out, and IDs
# increase within each session.  A second run drives two tags in two
# databases at once to show that their counters are independent.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

# A 1ms segment duration keeps the dynamic step near leaf_alloc.step, so
# that a step of 5 really means a refill every few IDs.
my $node = LeafTest::new_node('concurrency',
	"leaf.segment_duration = '1ms'",
	"max_connections = 40");

# Sets up, in one database, a table per tag whose key defaults to
# leaf_segment_nextval(tag), plus counters that survive rollbacks.
sub setup_tables
{
	my ($dbname, @tables) = @_;
	my $sql = "CREATE SEQUENCE row_seq;\n"
	  . "CREATE SEQUENCE committed_txn;\n"
	  . "CREATE SEQUENCE rolled_back_txn;\n";
	for my $t (@tables)
	{
		my ($table, $tag) = @$t;
		$sql .= qq{
CREATE TABLE $table (
	id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('$tag'),
	pid int NOT NULL DEFAULT pg_backend_pid(),
	seq bigint NOT NULL DEFAULT nextval('row_seq'),
	at timestamptz NOT NULL DEFAULT clock_timestamp());
};
	}
	$node->safe_psql($dbname, $sql);
}

# A pgbench script: one transaction inserts $rows rows into each table,
# then rolls back one time in four; after the outcome it bumps the
# counter of committed or rolled-back transactions.
sub bench_script
{
	my ($rows, @tables) = @_;
	my $s = "\\set r random(1, 4)\nBEGIN;\n";
	for my $t (@tables)
	{
		$s .= "INSERT INTO $t->[0] (at) SELECT clock_timestamp() FROM generate_series(1, $rows);\n";
	}
	$s .= "\\if :r = 1\nROLLBACK;\nSELECT nextval('rolled_back_txn');\n"
	  . "\\else\nCOMMIT;\nSELECT nextval('committed_txn');\n\\endif\n";
	return $s;
}

sub seq_count
{
	my ($dbname, $seq) = @_;
	return $node->safe_psql($dbname,
		"SELECT coalesce(last_value, 0) FROM pg_sequences WHERE sequencename = '$seq'"
	);
}

sub check_pgbench
{
	my ($r, $expected, $label) = @_;

	is($r->{rc}, 0, "$label: pgbench exits with status 0")
	  or diag("pgbench stdout:\n$r->{out}\npgbench stderr:\n$r->{err}");
	is($r->{failed} // 0, 0, "$label: no failed transactions");
	is($r->{processed}, $expected,
		"$label: all $expected transactions processed");
	unlike($r->{err}, qr/ERROR|FATAL/,
		"$label: pgbench reported no server errors");
	note "$label: "
	  . ($r->{processed} // '?')
	  . " transactions, tps "
	  . ($r->{tps} // '?');
}

# Checks one table filled with IDs of one tag: counts, uniqueness, range
# and per-session order.  Returns (min id, max id).
sub check_table
{
	my ($dbname, $table, $tag, $rows_per_txn, $nclients, $label) = @_;

	my $committed = seq_count($dbname, 'committed_txn');
	my ($n, $ndistinct, $min, $max, $npids) = split /\|/,
	  $node->safe_psql($dbname,
		"SELECT count(*), count(DISTINCT id), min(id), max(id), count(DISTINCT pid) FROM $table"
	  );
	my $max_id = $node->safe_psql($dbname,
		"SELECT max_id FROM leaf_alloc WHERE biz_tag = '$tag'");

	is($n, $committed * $rows_per_txn,
		"$label: committed rows = $rows_per_txn x committed transactions ($committed)"
	);
	is($ndistinct, $n, "$label: $n rows, all IDs distinct");
	cmp_ok($min, '>', 0, "$label: smallest ID $min is positive");
	cmp_ok($max, '<', $max_id,
		"$label: largest ID $max is below leaf_alloc.max_id $max_id");
	is($npids, $nclients, "$label: rows come from $nclients sessions");

	# within one backend, rows were inserted in seq order; their IDs must
	# increase in that order
	my $out_of_order = $node->safe_psql(
		$dbname, qq{
SELECT count(*) FROM (
	SELECT id, lag(id) OVER (PARTITION BY pid ORDER BY seq) AS prev
	  FROM $table) s
 WHERE prev >= id});
	is($out_of_order, 0, "$label: IDs increase within every session");

	return ($min, $max);
}

sub report_segments
{
	my ($label) = @_;
	my $out = $node->safe_psql('postgres',
		q{SELECT database, biz_tag, refills, waits, round(max_wait_ms::numeric, 3), step
		    FROM leaf_segments ORDER BY database, biz_tag});
	for my $line (split /\n/, $out)
	{
		my ($db, $tag, $refills, $waits, $maxwait, $step) = split /\|/,
		  $line;
		diag
		  "$label: $db/$tag: $refills refills, $waits waits for a segment, longest wait $maxwait ms, current step $step";
	}
}

############################################################################
# run 1: 8 clients, one tag of step 5, one transaction in four rolled back
############################################################################

$node->safe_psql('postgres', "SELECT leaf_segment_create('order', step => 5)");
setup_tables('postgres', [ 'orders', 'order' ]);

my $clients = 8;
my $txns = 2500;    # per client, 2 IDs each
my $t0 = time;
my $bench = LeafTest::start_pgbench($node, 'postgres',
	bench_script(2, [ 'orders', 'order' ]),
	[ '-c', $clients, '-j', 2, '-t', $txns ]);
my $r = LeafTest::finish_pgbench($bench);
note "run 1 took " . (time - $t0) . " s";

check_pgbench($r, $clients * $txns, 'run 1');
is( seq_count('postgres', 'committed_txn') +
	  seq_count('postgres', 'rolled_back_txn'),
	$clients * $txns,
	'run 1: every transaction either committed or rolled back');
cmp_ok(seq_count('postgres', 'rolled_back_txn'),
	'>', 0, 'run 1: some transactions rolled back');
my (undef, $run1_max) =
  check_table('postgres', 'orders', 'order', 2, $clients, 'run 1');

my ($refills) = $node->safe_psql('postgres',
	"SELECT refills FROM leaf_segments WHERE biz_tag = 'order' AND database = 'postgres'"
);
cmp_ok($refills, '>=', ($clients * $txns * 2) / 1000,
	"run 1: the allocator refilled the tag all along ($refills refills)");
report_segments('run 1');

############################################################################
# run 2: two tags in two databases at once
############################################################################

$node->safe_psql('postgres', 'CREATE DATABASE shop2');
$node->safe_psql('shop2', 'CREATE EXTENSION leaf');
$node->safe_psql('postgres',
	"SELECT leaf_segment_create('invoice', step => 7)");
$node->safe_psql('shop2',
	"SELECT leaf_segment_create('order', step => 5); SELECT leaf_segment_create('invoice', step => 7)"
);
# fresh counters for run 2 (the table of run 1 stays as it is)
$node->safe_psql('postgres',
	'DROP SEQUENCE row_seq, committed_txn, rolled_back_txn CASCADE');
setup_tables('postgres', [ 'orders_b', 'order' ], [ 'invoices', 'invoice' ]);
setup_tables('shop2', [ 'orders_b', 'order' ], [ 'invoices', 'invoice' ]);

my $clients2 = 4;
my $txns2 = 1500;
my $script2 = bench_script(1, [ 'orders_b', 'order' ], [ 'invoices', 'invoice' ]);
$t0 = time;
my $bench_a = LeafTest::start_pgbench($node, 'postgres', $script2,
	[ '-c', $clients2, '-j', 1, '-t', $txns2 ]);
my $bench_b = LeafTest::start_pgbench($node, 'shop2', $script2,
	[ '-c', $clients2, '-j', 1, '-t', $txns2 ]);
my $ra = LeafTest::finish_pgbench($bench_a);
my $rb = LeafTest::finish_pgbench($bench_b);
note "run 2 took " . (time - $t0) . " s";

check_pgbench($ra, $clients2 * $txns2, 'run 2, postgres');
check_pgbench($rb, $clients2 * $txns2, 'run 2, shop2');

my %range;
for my $db ('postgres', 'shop2')
{
	is( seq_count($db, 'committed_txn') + seq_count($db, 'rolled_back_txn'),
		$clients2 * $txns2,
		"run 2, $db: every transaction either committed or rolled back");
	for my $t ([ 'orders_b', 'order' ], [ 'invoices', 'invoice' ])
	{
		$range{$db}{ $t->[1] } = [
			check_table($db, $t->[0], $t->[1], 1, $clients2,
				"run 2, $db/$t->[1]")
		];
	}
}

# postgres/order went on from run 1; the others started from 1 and
# never saw each other's IDs
cmp_ok($range{postgres}{order}[0],
	'>', $run1_max, 'run 2: postgres/order continues above run 1');
for my $c ([ 'shop2', 'order' ], [ 'shop2', 'invoice' ],
	[ 'postgres', 'invoice' ])
{
	my ($db, $tag) = @$c;
	cmp_ok($range{$db}{$tag}[0], '<=', 20,
		"run 2: $db/$tag starts from its own counter (first committed ID $range{$db}{$tag}[0])"
	);
}
my $a_max = $node->safe_psql('postgres',
	"SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order'");
my $b_max = $node->safe_psql('shop2',
	"SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order'");
cmp_ok($b_max, '<', $a_max,
	"run 2: leaf_alloc of shop2 ($b_max) is apart from that of postgres ($a_max)"
);

is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(database || '/' || biz_tag, ',' ORDER BY database, biz_tag)
		    FROM leaf_segments}),
	'postgres/invoice,postgres/order,shop2/invoice,shop2/order',
	'run 2: shared memory holds one slot per database and tag');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(DISTINCT datname) || '/' || count(*)
		    FROM pg_stat_activity WHERE backend_type = 'leaf allocator'}),
	'2/2',
	'run 2: one allocator worker per database');
report_segments('run 2');

done_testing();
