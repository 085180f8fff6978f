# Copyright (c) leaf contributors

# The warm start: the tags in use are written to leaf_warm_start.tags in
# the data directory, and after a restart (fast or immediate) the first
# segment of each is loaded before any call, so no caller waits for it;
# the IDs still lie above every ID handed out before.  With
# leaf.warm_start off nothing is loaded at start.  A tag deleted, a
# database dropped and a database whose extension was dropped meanwhile
# are skipped with a LOG line; a damaged file is ignored with one.  A
# clone of the data directory, which holds the file too, is refused
# (LF006) as for its callers: the warm start loads nothing there.  A
# standby runs no warm start; promoted, it runs one whose loads the
# timeline check refuses (LF007), as for its callers.
# copy-matrix: warm standby
# copy-matrix: warm promote_async
# copy-matrix: warm clone_primary

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('warm', { init => [ allows_streaming => 1 ] },
	"leaf.warm_start_interval = '1s'", "leaf.segment_duration = '1ms'");
my $file = $node->data_dir . '/leaf_warm_start.tags';

$node->safe_psql('postgres', q[
	SELECT leaf_segment_create('a', step => 100);
	SELECT leaf_segment_create('b', step => 100);
	CREATE DATABASE other;
	CREATE DATABASE gone;
	CREATE DATABASE noext;]);
for my $db (qw(other gone noext))
{
	$node->safe_psql($db, qq[CREATE EXTENSION leaf;
		SELECT leaf_segment_create('t_$db', step => 100)]);
}

# IDs of tag in database db
sub take
{
	my ($db, $tag, $n) = @_;
	return grep { /^\d+$/ } split /\n/,
	  $node->safe_psql($db,
		"SELECT leaf_segment_nextval('$tag') FROM generate_series(1, $n)");
}

my %ids;
push @{ $ids{a} }, take('postgres', 'a', 250);
push @{ $ids{b} }, take('postgres', 'b', 250);
push @{ $ids{"t_$_"} }, take($_, "t_$_", 50) for qw(other gone noext);

# the tags listed in the file, as "dboid tag"
sub listed
{
	return () unless -e $file;
	my @l;
	for (split /\n/, slurp_file($file))
	{
		next unless /^(\d+) \d+ ([0-9a-f]+)$/;
		push @l, "$1 " . pack('H*', $2);
	}
	return sort @l;
}
my %oid = map { $_ => $node->safe_psql('postgres',
		"SELECT oid FROM pg_database WHERE datname = '$_'") }
  qw(postgres other gone noext);
my @all = sort("$oid{postgres} a", "$oid{postgres} b", "$oid{other} t_other",
	"$oid{gone} t_gone", "$oid{noext} t_noext");
ok(LeafTest::wait_until(sub { join(',', listed()) eq join(',', @all) },
		'the file lists the five tags'),
	'leaf_warm_start.tags lists the tags in use, of every database');

# before any call: the tags of db are loaded, and no caller waited
sub loaded_before_call
{
	my ($db, @tags) = @_;
	my $in = join(',', map { "'$_'" } @tags);
	return LeafTest::wait_until(
		sub {
			$node->safe_psql($db, qq[SELECT count(*) FROM leaf_segments
				WHERE database = current_database() AND biz_tag IN ($in)
				  AND next_ready AND refills = 1 AND waits = 0]) == scalar(@tags);
		},
		"the first segments of @tags in $db");
}

# calls after the restart: no wait, IDs above all earlier ones
sub check_after_restart
{
	my ($how) = @_;
	ok(loaded_before_call('postgres', 'a', 'b'),
		"after a $how restart, the first segments of a and b are loaded before any call");
	ok(loaded_before_call('other', 't_other'), 'and that of t_other in another database');
	take('postgres', $_, 1) for qw(a b);
	is($node->safe_psql('postgres',
			q[SELECT sum(waits) FROM leaf_segments WHERE biz_tag IN ('a', 'b')]),
		'0', "$how: the first callers of a and b did not wait");
	for my $t ([ 'postgres', 'a' ], [ 'postgres', 'b' ], [ 'other', 't_other' ])
	{
		my ($db, $tag) = @$t;
		my $max = LeafTest::max_of(@{ $ids{$tag} });
		my @new = take($db, $tag, 150);
		cmp_ok(LeafTest::min_of(@new), '>', $max, "$how: IDs of $tag lie above every earlier one");
		push @{ $ids{$tag} }, @new;
	}
}

$node->stop('fast');
my $log_at = -s $node->logfile;
$node->start;
check_after_restart('fast');
ok(LeafTest::wait_until(sub { slurp_file($node->logfile, $log_at) =~
			/leaf warm start asked for the first segments of 2 biz_tags of database "postgres"/ },
		'the LOG line of the warm start'),
	'the log says how many tags the warm start asked for');

# immediate: the file written while the server ran is what is there
ok(LeafTest::wait_until(sub { join(',', listed()) eq join(',', @all) },
		'the file lists the five tags again'), 'the file lists them after the restart');
$node->stop('immediate');
$node->start;
check_after_restart('immediate');

# leaf.warm_start off: nothing is loaded at start
$node->append_conf('postgresql.conf', "leaf.warm_start = off\n");
$node->restart;
$node->safe_psql('postgres', 'SELECT 1');
is($node->safe_psql('postgres',
		q[SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'leaf warm start']),
	'0', 'with leaf.warm_start off no warm start runs');
is($node->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments'),
	'0', 'and no segment is loaded');
is(join(',', listed()), join(',', @all), 'the file stays as it was');

# meanwhile: b is deleted, database gone dropped, noext loses the extension
$node->safe_psql('postgres', q[DELETE FROM leaf_alloc WHERE biz_tag = 'b';
	DROP DATABASE gone]);
$node->safe_psql('noext', q[BEGIN;
	SET LOCAL leaf.allow_drop_with_counters = on;
	DROP EXTENSION leaf CASCADE;
	COMMIT]);

$node->append_conf('postgresql.conf', "leaf.warm_start = on\n");
$node->stop;
$log_at = -s $node->logfile;
$node->start;
ok(loaded_before_call('postgres', 'a'), 'warm start on again: a is loaded before any call');
ok(LeafTest::wait_until(sub {
			my $l = slurp_file($node->logfile, $log_at);
			$l =~ /skips database "noext"/ && $l =~ /asked for the first segments of \d+ biz_tags of database "postgres"/ },
		'the warm start of noext and postgres'), 'all databases were seen');
my $log = slurp_file($node->logfile, $log_at);
like($log, qr/leaf warm start skips biz_tag "b" of database "postgres"\n.*DETAIL:\s+biz_tag "b" does not exist/,
	'the deleted tag b is skipped with a LOG line');
like($log, qr/leaf warm start skips the database with OID $oid{gone}: it no longer exists/,
	'the dropped database is skipped');
like($log, qr/leaf warm start skips database "noext": extension "leaf" is not installed there/,
	'the database without the extension is skipped');
like($log, qr/leaf warm start asked for the first segments of 1 biz_tags of database "postgres"/,
	'a alone was asked for in postgres');
is($node->safe_psql('postgres', q[SELECT count(*) FROM leaf_segments WHERE biz_tag = 'b']),
	'0', 'b has no slot');
unlike($log, qr/ERROR|FATAL|PANIC/, 'no error, fatal or panic in the log');
ok(LeafTest::wait_until(sub {
			join(',', listed()) eq join(',', sort("$oid{postgres} a", "$oid{other} t_other")) },
		'the file without b, gone and noext'),
	'the file lists only the tags that have a slot');

# a damaged file: ignored with a LOG line, the server starts as usual
$node->stop('fast');
my $content = slurp_file($file);
open(my $fh, '>', $file) or die "could not write $file: $!";
print $fh substr($content, 0, length($content) - 10);
close $fh;
$log_at = -s $node->logfile;
$node->start;
my @after = take('postgres', 'a', 10);
cmp_ok(LeafTest::min_of(@after), '>', LeafTest::max_of(@{ $ids{a} }),
	'after a start with a damaged file a is served, above its earlier IDs');
push @{ $ids{a} }, @after;
like(slurp_file($node->logfile, $log_at),
	qr/leaf warm start ignores file "leaf_warm_start.tags": [^\n]*\(line \d+\)/,
	'the damaged file is ignored with a LOG line');
ok(LeafTest::wait_until(sub { join(',', listed()) eq "$oid{postgres} a" },
		'the file written again'), 'and written again');

# a clone of the data directory holds the file, and is refused at the load
# its warm start asks for: nothing is loaded there
take('other', 't_other', 1);
ok(LeafTest::wait_until(sub {
			join(',', listed()) eq join(',', sort("$oid{postgres} a", "$oid{other} t_other")) },
		'the file lists a and t_other'), 'the file lists a and t_other before the backup');
$node->backup('clone');
my $max_at_backup = $node->safe_psql('postgres',
	q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'a']);
my $clone = LeafTest::new_node_from_backup('clone', $node, 'clone');
ok(LeafTest::wait_until(sub {
			$clone->safe_psql('postgres', q[SELECT count(*) FROM leaf_segments
				WHERE biz_tag = 'a' AND last_failure IS NOT NULL]) eq '1' },
		'the clone\'s warm start of a'), 'the clone\'s warm start asked for a');
is($clone->safe_psql('postgres', q[SELECT refills FROM leaf_segments WHERE biz_tag = 'a']),
	'0', 'the clone loaded no segment of a');
like($clone->safe_psql('postgres', q[SELECT last_error FROM leaf_segments WHERE biz_tag = 'a']),
	qr/clone of the data directory/, 'it was refused as a clone of the data directory');
is($clone->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'a']),
	$max_at_backup, 'the clone\'s leaf_alloc is as the backup left it');
my ($cids, $states) = LeafTest::take_each($clone, 'a', 3);
is(scalar(@$cids), 0, 'the clone hands out no ID of a');
is_deeply([ sort keys %{ { map { $_ => 1 } @$states } } ], ['LF006'],
	'its callers are refused with LF006');
$clone->stop;

# a standby runs no warm start; promoted (a new timeline), it reads the
# file the base backup copied, and its loads meet the timeline check
# (leaf.alloc_failover = 'confirm'): refused, as for its callers
$node->backup('standby');
my $standby = LeafTest::new_node_from_backup('standby', $node, 'standby',
	{ init => [ has_streaming => 1 ] });
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres',
		q[SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'leaf warm start']),
	'0', 'a standby runs no warm start');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM leaf_segments'),
	'0', 'and loads nothing');
$standby->promote;
ok(LeafTest::wait_until(sub {
			$standby->safe_psql('postgres', q[SELECT count(*) FROM leaf_segments
				WHERE biz_tag = 'a' AND last_failure IS NOT NULL]) eq '1' },
		'the promoted standby\'s warm start of a'),
	'promoted, it runs the warm start of the file the base backup copied');
is($standby->safe_psql('postgres', q[SELECT refills FROM leaf_segments WHERE biz_tag = 'a']),
	'0', 'which loads nothing on the new timeline');
($cids, $states) = LeafTest::take_each($standby, 'a', 3);
is_deeply([ sort keys %{ { map { $_ => 1 } @$states } } ], ['LF007'],
	'its callers are refused with LF007 until a superuser confirms');
$standby->stop;

# the budget: each database warmed keeps its allocator until
# leaf.alloc_idle_timeout, so the warm start takes half of
# leaf.max_databases at most, the most recently used databases first;
# here one of two, and a database whose callers come first after the
# restart (not in the file) finds the other allocator free
$node->safe_psql('postgres', 'CREATE DATABASE third');
$node->safe_psql('third', q[CREATE EXTENSION leaf;
	SELECT leaf_segment_create('t_third', step => 100)]);
push @{ $ids{a} }, take('postgres', 'a', 1);
push @{ $ids{t_other} }, take('other', 't_other', 1);
ok(LeafTest::wait_until(sub { my %l = map { $_ => 1 } listed();
			$l{"$oid{postgres} a"} && $l{"$oid{other} t_other"} },
		'the file lists a and t_other'), 'two databases are listed');
$node->append_conf('postgresql.conf', "leaf.max_databases = 2\n");
$node->stop('fast');
$log_at = -s $node->logfile;
$node->start;
ok(LeafTest::wait_until(sub { slurp_file($node->logfile, $log_at) =~
			/leaf warm start skips the database with OID \d+: it warmed as many databases as half of "leaf.max_databases" \(1\)/ },
		'the LOG line of the budget'),
	'with leaf.max_databases = 2 the warm start warms one database');
my ($ret, $out, $err) = $node->psql('third',
	q[SELECT count(leaf_segment_nextval('t_third')) FROM generate_series(1, 5)]);
is($out, '5', 'a database not warmed gets an allocator at its first call')
  or diag($err);

# every ID of a tag handed out by the original, once
for my $tag (sort keys %ids)
{
	is(LeafTest::count_repeats($ids{$tag}), 0, "no ID of $tag was handed out twice");
}

$node->stop;
done_testing();
