# Copyright (c) leaf contributors

# The warm start of one database does not wait for another's: a prepared
# transaction that holds LOCK TABLE leaf_alloc in database "locked"
# survives the restart, and the first segment of the tag of database
# "free" is still loaded, with no call, within a few seconds of the
# server being ready, while the tags of "locked" wait for the lock.
# "locked" is the more recently used database, so a warm start that went
# one database after the other would come to "free" last.

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

# how soon after the server is ready the tag of "free" must be loaded, in s
my $soon = 5;

my $node = LeafTest::new_node('warm_locked', "max_prepared_transactions = 2",
	"leaf.warm_start_interval = '1s'");
my $file = $node->data_dir . '/leaf_warm_start.tags';
my @ltags = map { "l$_" } 1 .. 8;

for my $db (qw(locked free))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION leaf');
}
$node->safe_psql('free', q[SELECT leaf_segment_create('f', step => 100)]);
$node->safe_psql('locked',
	join('', map { "SELECT leaf_segment_create('$_', step => 100);" } @ltags));

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

# f first, then (a second later at least) the tags of "locked"
my %ids;
$ids{f} = [ take('free', 'f', 10) ];
my $f_used;
ok(LeafTest::wait_until(sub { my %l = listed(); $f_used = $l{f}; defined $f_used },
		'the file lists f'), 'the file lists f');
LeafTest::wait_until(sub { time() > $f_used + 1 }, 'a later second');
$ids{$_} = [ take('locked', $_, 10) ] for @ltags;
ok(LeafTest::wait_until(
		sub {
			my %l = listed();
			!grep { !defined $l{$_} || $l{$_} <= $f_used } @ltags;
		},
		'the file lists the tags of locked, used after f'),
	'the file lists the tags of "locked", used after f');

# the lock that survives the restart
$node->safe_psql('locked', q[BEGIN;
	LOCK TABLE leaf_alloc;
	PREPARE TRANSACTION 'hold']);

$node->stop('fast');
$node->start;
my $ready = Time::HiRes::time();

# the segment of f is loaded with no call, soon; "locked" still waits
my $f_loaded = LeafTest::wait_until(
	sub {
		$node->safe_psql('free', q[SELECT count(*) FROM leaf_segments
			WHERE database = 'free' AND biz_tag = 'f'
			  AND next_ready AND refills = 1 AND waits = 0]) eq '1';
	},
	'the first segment of f',
	60);
my $took = Time::HiRes::time() - $ready;
note(sprintf('the first segment of f was loaded %.2f s after the server was ready', $took));
ok($f_loaded, 'the warm start loads the first segment of f with no call');
cmp_ok($took, '<=', $soon,
	"within $soon s of the server being ready, though \"locked\" waits for a lock");
is($node->safe_psql('free',
		q[SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'hold']),
	'1', 'the transaction holding leaf_alloc of "locked" is still prepared');
is($node->safe_psql('free', q[SELECT count(*) FROM leaf_segments
		WHERE database = 'locked' AND refills > 0]),
	'0', 'and no segment of "locked" is loaded');

# the lock gone, "locked" is served as before, above its earlier IDs
$node->safe_psql('locked', q[ROLLBACK PREPARED 'hold']);
for my $t ((map { [ 'locked', $_ ] } @ltags), [ 'free', 'f' ])
{
	my ($db, $tag) = @$t;
	my @new = take($db, $tag, 5);
	is(scalar(@new), 5, "$tag is served after the lock is released");
	cmp_ok(LeafTest::min_of(@new), '>', LeafTest::max_of(@{ $ids{$tag} }),
		"IDs of $tag lie above every earlier one");
}

my $log = slurp_file($node->logfile);
unlike($log, qr/PANIC/, 'no panic in the log');

$node->stop;
done_testing();
