# Two shards of a fleet with one system identifier and database name (a
# shard's data directory cloned into a new shard, as pg_basebackup or a
# disk image makes it) are one loader in leaf_segment_log.  The window of
# an ID and the bounds of an interval must still hold the IDs each shard
# hands out.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');
$alloc->safe_psql('postgres', "SELECT leaf_segment_create('clone', 1000)");

my $a = LeafTest::new_node('shard_a', { init => [ allows_streaming => 1 ] },
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user'",
	"leaf.wait_timeout = '5s'");
is($a->safe_psql('postgres', "SELECT leaf_segment_nextval('clone')"),
	'1', 'shard A serves the segment from 1');
$a->backup('clone');
my $b = LeafTest::new_node_from_backup('shard_b', $a, 'clone');
my ($ret, $out, $err) = $b->psql('postgres', "SELECT leaf_segment_nextval('clone')");
is($ret, 0, "the clone serves as a second shard: $out $err");

sleep 1;
my $at = $a->safe_psql('postgres', 'SELECT clock_timestamp()');
my $id = $a->safe_psql('postgres', "SELECT leaf_segment_nextval('clone')");
my $after = $a->safe_psql('postgres', 'SELECT clock_timestamp()');
note "shard A took $id between $at and $after";
note $alloc->safe_psql('postgres',
	'SELECT first_id, last_id, loaded_at, loaded_by, serving_first_id FROM leaf_segment_log ORDER BY first_id');

is($alloc->safe_psql('postgres', qq[
	SELECT earliest <= '$after' AND (latest IS NULL OR latest >= '$at')
	  FROM leaf_segment_issued('clone', $id)]),
	't', 'the window of the ID shard A took holds the instant it took it');
is($alloc->safe_psql('postgres', qq[
	SELECT $id BETWEEN min_id AND max_id
	  FROM leaf_segment_id_bounds('clone', '$at', '$after')]),
	't', 'the bounds of that instant hold the ID');

$b->stop;
$a->stop;
$alloc->stop;
done_testing();
