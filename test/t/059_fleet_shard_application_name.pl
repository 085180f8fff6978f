# Fleet mode: on the allocation server, each shard's session says which
# shard it is, application_name 'leaf shard <cluster_name>', unless the
# shard's leaf.alloc_conninfo sets application_name itself.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
$alloc->safe_psql('postgres', "SELECT leaf_segment_create('named', 100)");
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');
my $conninfo = "host=127.0.0.1 port=$aport dbname=postgres user=$user";

# PostgreSQL::Test::Cluster starts each node with --cluster-name=<its name>
my $east = LeafTest::new_node('shard_east', "leaf.alloc_conninfo = '$conninfo'");
my $west = LeafTest::new_node('shard_west',
	"leaf.alloc_conninfo = '$conninfo application_name=west_by_hand'");

for my $s ($east, $west)
{
	like($s->safe_psql('postgres', "SELECT leaf_segment_nextval('named')"),
		qr/^\d+$/, $s->name . ' draws an ID from the allocation server');
}

my $sessions = $alloc->safe_psql('postgres', q[
	SELECT string_agg(application_name, ',' ORDER BY application_name)
	  FROM pg_stat_activity
	 WHERE backend_type = 'client backend' AND application_name <> ''
	   AND application_name NOT LIKE '%.pl' AND pid <> pg_backend_pid()]);
is($sessions, 'leaf shard shard_east,west_by_hand',
	'pg_stat_activity on the allocation server names each shard');

$_->stop for ($east, $west, $alloc);
done_testing();
