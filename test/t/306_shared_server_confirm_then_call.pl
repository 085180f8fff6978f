
# Copyright (c) leaf contributors

# A copy confirmed by a superuser serves at its next call, even a call
# right after the refusal that the confirmation mends: callers of a tag
# refused less than a second ago start no allocator, so that first call
# may wait for that second, but no longer and without an error.  Five
# copies: each is called (LF006), confirmed, and called again at once, in
# one session and in a new one; the time of that call is measured.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;
use Time::HiRes ();

my $node = LeafTest::new_node('confirm_call', 'leaf.max_tags = 16',
	'leaf.max_databases = 4', "leaf.alloc_idle_timeout = '5min'");
$node->safe_psql('postgres', 'CREATE DATABASE orig');
$node->safe_psql('orig', q{
CREATE EXTENSION leaf;
SELECT leaf_segment_create('t1', step => 10);
SELECT leaf_segment_nextval('t1');});

my @times;
for my $c (1 .. 5)
{
	$node->safe_psql('postgres', "CREATE DATABASE copy$c TEMPLATE orig");
	my $sql = qq{
\\set VERBOSITY verbose
\\set ON_ERROR_STOP 0
SELECT leaf_segment_nextval('t1');
SELECT leaf_alloc_source_confirm() IS NOT NULL AS confirmed;
\\set ON_ERROR_STOP 1
SELECT extract(epoch FROM clock_timestamp()) AS t0 \\gset
SELECT leaf_segment_nextval('t1') AS id;
SELECT round((extract(epoch FROM clock_timestamp()) - :t0)::numeric, 3) AS secs;
};
	$sql =~ s/\\set ON_ERROR_STOP 1\n//;
	my ($ret, $out, $err) = $node->psql("copy$c", $sql, on_error_stop => 0);
	like($err, qr/LF006/, "copy $c refused before the confirmation");
	my @lines = split /\n/, $out;
	my ($secs) = $out =~ /(\d+\.\d{3})\s*$/;
	my $errors = () = $err =~ /ERROR/g;
	is($errors, 1, "copy $c: the call right after the confirmation succeeds")
	  or diag $err;
	note sprintf('copy %d: first call after the confirmation took %s s',
		$c, $secs // '?');
	push @times, $secs if defined $secs;
	cmp_ok($secs // 99, '<', 2.5, "copy $c: ... within the refusal's second and a load");
	# its allocator stays (leaf.alloc_idle_timeout): drop the copy
	$node->safe_psql('postgres', "DROP DATABASE copy$c WITH (FORCE)");
}
note 'times: ' . join(' ', @times);

$node->stop;
done_testing();
