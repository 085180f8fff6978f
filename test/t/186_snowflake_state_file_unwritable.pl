# Snowflake mode: while the state file cannot be replaced (here a
# directory stands where its temporary file goes), the worker retries at
# every heartbeat and whenever a caller finds the lease run out, but logs
# the failure once a minute, not each time (it was about 100 lines a
# second).  Callers are refused while the lease cannot be extended; once
# the file can be written again, the node says so and serves.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('sf_unwritable', { worker_id => 3, max_worker_processes => undef },
	"leaf.heartbeat_interval = '100ms'",
	"leaf.wait_timeout = '200ms'");
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'ready');

my $tmp = $node->data_dir . '/leaf_snowflake.state.tmp';
my $offset = -s $node->logfile;
mkdir $tmp or die "mkdir $tmp: $!";
ok($node->wait_for_log(qr/could not create file "leaf_snowflake\.state\.tmp"/, $offset),
	'the failure is logged');

# about 5 s of callers that keep finding the lease run out, and wake the
# worker each time
my $after_first = -s $node->logfile;
my $h = LeafTest::start_psql_script($node, 'postgres',
	"SELECT leaf_snowflake();\nSELECT pg_sleep(0.2);\n" x 25);
my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
my $refused = () = $err =~ /not ready/g;
my $log = slurp_file($node->logfile, $after_first);
my $lines = () = $log =~ /could not create file "leaf_snowflake\.state\.tmp"/g;
note "calls refused: $refused of 25; lines about the state file in the 5 s after the first: $lines";
is($lines, 0, 'the failure is not logged again within a minute');
cmp_ok($refused, '>', 0, 'callers are refused while the lease cannot be extended');

rmdir $tmp or die "rmdir $tmp: $!";
ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
	'ready again once the file can be written');
ok($node->wait_for_log(qr/wrote "leaf_snowflake\.state" again, after \d+ failed attempts/, $offset),
	'and the log says so');

$node->stop;
done_testing();
