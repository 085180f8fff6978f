
# Copyright (c) leaf contributors

# Fleet mode: leaf_alloc moving to another schema on the allocation
# database.  Before the fix the shard kept using the schema it had
# looked up when its connection opened, and failed for good with
# 'relation "public.leaf_alloc" does not exist' until someone ended its
# remote session.
#
# (a) the schema of the extension is renamed: the shard finds
#     leaf_alloc again by itself (same extension, so no confirmation);
# (b) the extension is dropped and created again in another schema,
#     its rows restored with higher max_id values: a new extension is
#     another allocation database, so the shard says so (LF006) rather
#     than "does not exist", and serves again once confirmed.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
$alloc->safe_psql('postgres', "SELECT leaf_segment_create('k', 100)");
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');

my $s = LeafTest::new_node('shard',
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user'",
	"leaf.segment_duration = '1ms'",	# keep the step at 100
	"leaf.wait_timeout = '2s'");

sub take
{
	my ($n) = @_;
	return grep { /^\d+$/ } split /\n/,
	  $s->safe_psql('postgres', "SELECT * FROM leaf_segment_nextvals('k', $n)");
}

my @ids = take(150);
is(scalar(@ids), 150, 'the shard takes IDs of k');

# ---------- (a) the extension's schema is renamed ----------

$alloc->safe_psql('postgres', 'ALTER SCHEMA public RENAME TO leaf_a');
my $t0 = time;
my @a;
my $last_err = '';
while (time < $t0 + 20)
{
	my ($ret, $out, $err) = $s->psql('postgres',
		"SELECT * FROM leaf_segment_nextvals('k', 100)");
	if ($ret == 0)
	{
		push @a, grep { /^\d+$/ } split /\n/, $out;
		last if @a >= 400;
	}
	else
	{
		$last_err = $err;
	}
}
cmp_ok(scalar(@a), '>=', 400,
	'(a) after the schema was renamed, the shard loads segments again by itself');
diag "(a) last error on the way: $last_err" if $last_err;
push @ids, @a;
like($alloc->safe_psql('postgres',
		q[SELECT max_id FROM leaf_a.leaf_alloc WHERE biz_tag = 'k']),
	qr/^\d+$/, '(a) from leaf_a.leaf_alloc');

# ---------- (b) the extension is created again in another schema ----------

my $max = $alloc->safe_psql('postgres',
	q[SELECT max_id FROM leaf_a.leaf_alloc WHERE biz_tag = 'k']);
$alloc->safe_psql('postgres', qq[
SET leaf.allow_drop_with_counters = on;
DROP EXTENSION leaf;
CREATE SCHEMA leaf_b;
CREATE EXTENSION leaf SCHEMA leaf_b;
SELECT leaf_b.leaf_segment_create('k', 100, $max + 1000);
]);

my ($state, $err);
$t0 = time;
my $seen_missing = 0;
while (time < $t0 + 20)
{
	($state, $err) = LeafTest::sqlstate($s, 'postgres',
		"SELECT count(*) FROM leaf_segment_nextvals('k', 100)");
	$seen_missing++ if ($err // '') =~ /does not exist/;
	last if ($state // '') eq 'LF006';
}
is($state, 'LF006',
	'(b) the shard finds the new extension and refuses it as another allocation database');
like($err, qr/DETAIL:.*extension \d+\).*now leads to .*extension \d+\)/s,
	'(b) the DETAIL names the old and the new extension');
diag "(b) $seen_missing calls failed with \"does not exist\" on the way" if $seen_missing;

$s->safe_psql('postgres', 'SELECT leaf_alloc_source_confirm()');
my @b = take(300);
is(scalar(@b), 300, '(b) once confirmed, the shard serves k from leaf_b.leaf_alloc');
cmp_ok(LeafTest::min_of(@b), '>', LeafTest::max_of(@ids), '(b) above every earlier ID');
push @ids, @b;
is(LeafTest::count_repeats(\@ids), 0, 'no ID repeats');

$_->stop for ($s, $alloc);

done_testing();
