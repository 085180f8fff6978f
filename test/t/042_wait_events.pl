# From PostgreSQL 17 on, leaf's waits have names of their own in
# pg_stat_activity.wait_event (wait_event_type "Extension"): LeafSegment
# for a caller waiting for a segment, LeafAllocatorMain for the allocator
# waiting for work, LeafSnowflakeMain for the snowflake worker between its
# steps.  Before 17, each is the one event "Extension".
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('waits', 'leaf.worker_id = 4',
	"leaf.wait_timeout = '60s'");
my $named = $node->pg_version >= 17;
sub expect { return $named ? $_[0] : 'Extension'; }

$node->safe_psql('postgres', "SELECT leaf_segment_create('locked', step => 10)");

# the row of the tag locked, so that the allocator skips it and a caller waits
my $locker = LeafTest::start_psql_script($node,
	'dbname=postgres application_name=leaf_locker',
	"BEGIN;\nSELECT 1 FROM leaf_alloc WHERE biz_tag = 'locked' FOR UPDATE;\n"
	  . "SELECT pg_sleep(8);\nCOMMIT;\n");
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'leaf_locker' AND wait_event = 'PgSleep'"
) or die 'the locker did not take its lock';

my $waiter = LeafTest::start_psql_script($node,
	'dbname=postgres application_name=leaf_waiter',
	"SELECT leaf_segment_nextval('locked');\n");
ok( $node->poll_query_until(
		'postgres', qq{
	SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity
	 WHERE application_name = 'leaf_waiter'},
		'Extension/' . expect('LeafSegment')),
	'a caller waiting for a segment shows ' . expect('LeafSegment'));

my ($rc, $out, $err) = LeafTest::finish_psql_script($waiter);
chomp $out;
is($out, '1', 'the caller gets its ID once the row is free') or diag($err);
LeafTest::finish_psql_script($locker);

ok( $node->poll_query_until(
		'postgres', q{
	SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity
	 WHERE backend_type = 'leaf allocator'},
		'Extension/' . expect('LeafAllocatorMain')),
	'the allocator waiting for work shows ' . expect('LeafAllocatorMain'));

$node->safe_psql('postgres', 'SELECT leaf_snowflake()');
ok( $node->poll_query_until(
		'postgres', q{
	SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity
	 WHERE backend_type = 'leaf snowflake worker'},
		'Extension/' . expect('LeafSnowflakeMain')),
	'the snowflake worker between its steps shows ' . expect('LeafSnowflakeMain'));

$node->stop;
done_testing();
