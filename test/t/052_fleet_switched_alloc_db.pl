
# Copyright (c) leaf contributors

# Fleet mode: a shard whose leaf.alloc_conninfo is pointed at another
# allocation database (or emptied, back to its local leaf_alloc) must
# not hand out IDs from there, since that leaf_alloc may hold lower
# max_id values for tags the shard has not used yet; before the fix it
# served such a tag from 1 again.
#
# The shard records the allocation database it draws from (system
# identifier, database, extension) and refuses another one with LF006,
# naming both, until a superuser runs leaf_alloc_source_confirm().  The
# record survives a restart.  A failover to a streaming replica keeps
# the system identifier and is no change (050_fleet_failover.pl).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my @alloc;
for my $i (1, 2)
{
	my $a = LeafTest::new_node("alloc$i", "listen_addresses = '127.0.0.1'");
	$a->safe_psql('postgres', q[
SELECT leaf_segment_create('fresh', 100);
SELECT leaf_segment_create('used', 100);
]);
	push @alloc, $a;
}
my ($a1, $a2) = @alloc;
my $user = $a1->safe_psql('postgres', 'SELECT current_user');
my %sysid = map {
	$_ => $alloc[ $_ - 1 ]->safe_psql('postgres',
		'SELECT system_identifier FROM pg_control_system()')
} (1, 2);
my ($sys1, $sys2) = ($sysid{1}, $sysid{2});
isnt($sys1, $sys2, 'the two allocation servers have different system identifiers');

sub conninfo
{
	my ($a) = @_;
	return 'host=127.0.0.1 port=' . $a->port . " dbname=postgres user=$user";
}

my $t = LeafTest::new_node('shard_t',
	"leaf.alloc_conninfo = '" . conninfo($a1) . "'",
	"leaf.wait_timeout = '3s'");
my $s = LeafTest::new_node('shard_s',
	"leaf.alloc_conninfo = '" . conninfo($a1) . "'",
	"leaf.wait_timeout = '3s'");
# S has tags of its own too, as any database with the extension may
$s->safe_psql('postgres', q[
SELECT leaf_segment_create('fresh', 100);
SELECT leaf_segment_create('used', 100);
]);

sub take
{
	my ($node, $tag, $n) = @_;
	return grep { /^\d+$/ } split /\n/,
	  $node->safe_psql('postgres',
		"SELECT * FROM leaf_segment_nextvals('$tag', $n)");
}

sub source_of
{
	my ($node, $tag) = @_;
	return $node->safe_psql('postgres',
		"SELECT source FROM leaf_segments WHERE biz_tag = '$tag'");
}

# T uses fresh, S uses only used: both from A1
my @fresh = take($t, 'fresh', 500);
my @used = take($s, 'used', 10);
is(scalar(@fresh) + scalar(@used), 510, 'shards T and S take IDs from A1');

# S is pointed at A2 (same tags, max_id 1) and restarted
$s->append_conf('postgresql.conf', "leaf.alloc_conninfo = '" . conninfo($a2) . "'");
$s->restart;
my ($state, $err, $out) = LeafTest::sqlstate($s, 'postgres',
	"SELECT leaf_segment_nextval('fresh')");
my %by_t = map { $_ => 1 } @fresh;
my ($got) = ($out // '') =~ /^(\d+)$/m;
ok(!(defined $got && $by_t{$got}),
	'after the switch to A2, S does not hand out an ID of fresh that T handed out'
	  . (defined $got ? " (got $got)" : ''));
is($state, 'LF006', 'S refuses to serve fresh with LF006');
like($err, qr/refusing to draw segments of biz_tag "fresh" from another allocation database/,
	'the message says why');
like($err, qr/DETAIL:.*came from 127\.0\.0\.1:\d+\/postgres \(system $sys1,.*now leads to 127\.0\.0\.1:\d+\/postgres \(system $sys2,/s,
	'the DETAIL names both allocation databases');
like($err, qr/HINT:.*SELECT leaf_alloc_source_confirm\(\)/s,
	'the HINT gives the command that confirms the change');
note $err;
($state) = LeafTest::sqlstate($s, 'postgres', "SELECT leaf_segment_nextval('used')");
is($state, 'LF006', 'so it does for a tag it had used');
like(source_of($s, 'fresh'), qr/^remote 127\.0\.0\.1:${\ $a2->port}\/postgres \(change not confirmed\)$/,
	'leaf_segments.source shows A2, not confirmed');
is( $s->safe_psql('postgres',
		q[SELECT string_agg(state || ' ' || kind || ' ' || system_identifier, ', ' ORDER BY state) FROM leaf_alloc_source]),
	"current remote $sys1, pending remote $sys2",
	'leaf_alloc_source, written before the restart, keeps A1 as current and shows A2 as pending');

# only a superuser may confirm
$s->safe_psql('postgres', 'CREATE ROLE app LOGIN');
my ($ret, $aout, $aerr) = $s->psql('postgres', 'SELECT leaf_alloc_source_confirm()',
	extra_params => [ '-U', 'app' ]);
like($aerr, qr/permission denied for function leaf_alloc_source_confirm/,
	'a non-superuser cannot confirm the change');

# the operator raises A2's max_id above everything handed out, and confirms
$a2->safe_psql('postgres', 'UPDATE leaf_alloc SET max_id = 100000');
like($s->safe_psql('postgres', 'SELECT leaf_alloc_source_confirm()'),
	qr/^127\.0\.0\.1:\d+\/postgres \(system $sys2,/,
	'leaf_alloc_source_confirm() accepts A2 and says so');
my @after = take($s, 'fresh', 100);
cmp_ok(LeafTest::min_of(@after), '>=', 100000, 'S then serves fresh from A2, above its new max_id');
is(LeafTest::count_repeats([ @fresh, @after ]), 0, 'no ID of fresh repeats');
is(source_of($s, 'fresh'), 'remote 127.0.0.1:' . $a2->port . '/postgres',
	'leaf_segments.source shows A2');
($state, $err) = LeafTest::sqlstate($s, 'postgres', 'SELECT leaf_alloc_source_confirm()');
is($state, '55000', 'confirming with nothing pending is an error');

# back to the shard's local leaf_alloc, by a reload: refused as well
$s->append_conf('postgresql.conf', "leaf.alloc_conninfo = ''");
$s->reload;
# (the buffered IDs of fresh go first)
my $deadline = time + 30;
do
{
	($state, $err) = LeafTest::sqlstate($s, 'postgres',
		"SELECT leaf_segment_nextvals('fresh', 1000)");
} while (($state // '') ne 'LF006' && time < $deadline);
is($state, 'LF006', 'switched back to its local leaf_alloc, S refuses too');
like($err, qr/DETAIL:.*now leads to the local leaf_alloc/s, 'and says so');
is(source_of($s, 'fresh'), 'local (change not confirmed)',
	'leaf_segments.source shows the local leaf_alloc, not confirmed');
$s->safe_psql('postgres', q[UPDATE leaf_alloc SET max_id = 200000]);
$s->safe_psql('postgres', 'SELECT leaf_alloc_source_confirm()');
my @local = take($s, 'fresh', 2000);
cmp_ok(LeafTest::min_of(@local), '>=', 100000, 'once confirmed, the local leaf_alloc serves');
is(source_of($s, 'fresh'), 'local', 'and leaf_segments.source says local');
is(LeafTest::count_repeats([ @fresh, @after, @local ]), 0, 'no ID of fresh repeats in all');

$_->stop for ($s, $t, $a1, $a2);

done_testing();
