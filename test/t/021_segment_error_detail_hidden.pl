
# Copyright (c) leaf contributors

# When a caller times out (LF003) after a failed allocation, the reason
# may name the allocation server, its port, user and database (fleet
# mode).  Only superusers see it in the DETAIL; other callers get a
# generic one, and the full text goes to the server log, as leaf_segments
# shows it to privileged roles.  The failure here is a row lock held on
# leaf_alloc, which makes the allocator's load hit its lock_timeout.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('detail');
$node->safe_psql(
	'postgres', q{
SELECT leaf_segment_create('held', step => 10);
CREATE ROLE app LOGIN;
GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO app;});

my $holder = LeafTest::start_psql_script($node, 'postgres',
	"BEGIN;\nSELECT 'locked' FROM leaf_alloc WHERE biz_tag = 'held' FOR UPDATE;\n"
	  . "SELECT pg_sleep(60);\n");
ok( LeafTest::wait_until(
		sub { (LeafTest::psql_output($holder))[0] =~ /locked/ },
		'the row lock'),
	'a session holds the row of the tag');

my $log_offset = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSET leaf.wait_timeout = '3s'; SELECT leaf_segment_nextval('held')",
	extra_params => [ '-U', 'app' ]);
my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
is($state, 'LF003', 'a plain user times out with LF003');
like($err, qr/DETAIL:\s+The last allocation failed; the server log/,
	'and gets the generic DETAIL');
unlike($err, qr/is locked by another transaction/, 'which does not carry the reason');
ok( LeafTest::wait_until(
		sub {
			slurp_file($node->logfile, $log_offset) =~
			  /DETAIL:\s+The last allocation failed: the row of biz_tag "held" in leaf_alloc is locked by another transaction/;
		},
		'the reason in the server log'),
	'the server log has the full reason for that error');

($state, $err) = LeafTest::sqlstate($node, 'postgres',
	"SET leaf.wait_timeout = '3s'; SELECT leaf_segment_nextval('held')");
is($state, 'LF003', 'a superuser times out with LF003');
like($err, qr/DETAIL:\s+The last allocation failed: the row of biz_tag "held" in leaf_alloc is locked by another transaction/,
	'and sees the reason in the DETAIL');
like(
	$node->safe_psql(
		'postgres', "SELECT last_error FROM leaf_segments WHERE biz_tag = 'held'"),
	qr/is locked by another transaction/,
	'leaf_segments shows the reason');

$holder->{run}->kill_kill;
$node->stop;
done_testing();
