# Copyright (c) leaf contributors

# However many databases hold leaf_alloc locked across a restart, another
# database is warm within a few seconds of the server being ready.  Five
# "tenant" databases, each with a prepared transaction holding LOCK TABLE
# leaf_alloc and three tags, were used after "victim", so the warm start,
# the most recently used database first, comes to "victim" last; and
# there are more of them than the warm start has places (half of
# leaf.max_databases, 8 by default).  A locked database gives its place
# back after one short lock wait, so "victim" is warmed all the same.
# Once the transactions are rolled back, every tag is served above its
# earlier IDs.

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

# how soon after the server is ready the tags of "victim" must be loaded,
# in s
my $soon = 3;

my @tenants = map { "tenant$_" } 1 .. 5;
my @vtags = qw(v1 v2);
my %tags_of = (victim => [@vtags]);
for my $i (1 .. @tenants)
{
	$tags_of{"tenant$i"} = [ map { "t${i}_$_" } 1 .. 3 ];
}

my $node = LeafTest::new_node('warm_tenants',
	'max_prepared_transactions = ' . scalar(@tenants),
	"leaf.warm_start_interval = '1s'");
my $file = $node->data_dir . '/leaf_warm_start.tags';

for my $db ('victim', @tenants)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION leaf;'
		  . join('', map { "SELECT leaf_segment_create('$_', step => 100);" }
			  @{ $tags_of{$db} }));
}

# the tags of the file, tag => last use
sub listed
{
	return () unless -e $file;
	my %l;
	for (split /\n/, slurp_file($file))
	{
		$l{ pack('H*', $2) } = $1 if /^\d+ (\d+) ([0-9a-f]+)$/;
	}
	return %l;
}

# IDs of tag in database db
sub take
{
	my ($db, $tag, $n) = @_;
	return grep { /^\d+$/ } split /\n/,
	  $node->safe_psql($db,
		"SELECT leaf_segment_nextval('$tag') FROM generate_series(1, $n)");
}

# the tags of "victim" first, then (a second later at least) the tenants'
my %ids;
$ids{$_} = [ take('victim', $_, 10) ] for @vtags;
my $v_used;
ok( LeafTest::wait_until(
		sub {
			my %l = listed();
			return 0 if grep { !defined $l{$_} } @vtags;
			$v_used = LeafTest::max_of(map { $l{$_} } @vtags);
			return 1;
		},
		'the file lists the tags of victim'),
	'the file lists the tags of "victim"');
LeafTest::wait_until(sub { time() > $v_used + 1 }, 'a later second');
my @ttags = map { @{ $tags_of{$_} } } @tenants;
for my $db (@tenants)
{
	$ids{$_} = [ take($db, $_, 10) ] for @{ $tags_of{$db} };
}
ok( LeafTest::wait_until(
		sub {
			my %l = listed();
			!grep { !defined $l{$_} || $l{$_} <= $v_used } @ttags;
		},
		'the file lists the tenants\' tags, used after victim'),
	'the file lists the tenants\' tags, used after "victim"');

# the locks that survive the restart, one per tenant
for my $db (@tenants)
{
	$node->safe_psql($db, qq[BEGIN;
		LOCK TABLE leaf_alloc;
		PREPARE TRANSACTION 'hold_$db']);
}

$node->stop('fast');
$node->start;
my $ready = Time::HiRes::time();

# the first segments of victim's tags are loaded with no call, soon
my $in = join(', ', map { "'$_'" } @vtags);
my $v_loaded = LeafTest::wait_until(
	sub {
		$node->safe_psql('victim', qq[SELECT count(*) FROM leaf_segments
			WHERE database = 'victim' AND biz_tag IN ($in)
			  AND next_ready AND refills = 1 AND waits = 0]) eq scalar(@vtags);
	},
	'the first segments of the tags of victim',
	20);
my $took = Time::HiRes::time() - $ready;
note($v_loaded
	? sprintf('the tags of victim were loaded %.2f s after the server was ready', $took)
	: sprintf('the tags of victim were not loaded %.2f s after the server was ready', $took));
ok($v_loaded, 'the warm start loads the first segments of victim with no call');
cmp_ok($took, '<=', $soon,
	"within $soon s of the server being ready, though "
	  . scalar(@tenants) . ' databases wait for a lock');
is($node->safe_psql('victim',
		q[SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'hold_%']),
	scalar(@tenants), 'the transactions holding the tenants\' leaf_alloc are still prepared');
is($node->safe_psql('victim', q[SELECT count(*) FROM leaf_segments
		WHERE database LIKE 'tenant%' AND refills > 0]),
	'0', 'and no segment of a tenant is loaded');

# the locks gone, the tenants are served as before, above their earlier IDs
$node->safe_psql($_, "ROLLBACK PREPARED 'hold_$_'") for @tenants;
for my $db ('victim', @tenants)
{
	for my $tag (@{ $tags_of{$db} })
	{
		my @new = take($db, $tag, 5);
		is(scalar(@new), 5, "$tag is served after the locks are released");
		cmp_ok(LeafTest::min_of(@new), '>', LeafTest::max_of(@{ $ids{$tag} }),
			"IDs of $tag lie above every earlier one");
		push @{ $ids{$tag} }, @new;
		is(LeafTest::count_repeats($ids{$tag}), 0, "no ID of $tag was handed out twice");
	}
}

my $log = slurp_file($node->logfile);
unlike($log, qr/PANIC/, 'no panic in the log');

$node->stop;
done_testing();
