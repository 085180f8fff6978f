# Snowflake worker IDs from the allocation database across a promotion
# of an asynchronous standby (leaf.alloc_failover = 'confirm', the
# default): the promoted server may have lost leases written on the
# former primary, so no worker ID goes to a new holder until a lease and
# leaf.max_clock_drift_ms have passed since the new timeline was first
# seen; a holder goes on renewing its row on the new timeline.
# copy-matrix: lease promote_async
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $lease_ms = 2000;		# heartbeat 500 ms
my $drift_ms = 3000;

my $primary = LeafTest::new_node('alloc1',
	{ max_worker_processes => undef, init => [ allows_streaming => 1 ] },
	"listen_addresses = '127.0.0.1'");
$primary->backup('b');
my $standby = LeafTest::new_node_from_backup('alloc2', $primary, 'b',
	{ init => [ has_streaming => 1 ] });
my ($p1, $p2) = ($primary->port, $standby->port);
my $user = $primary->safe_psql('postgres', 'SELECT current_user');

sub sf_node
{
	my ($name) = @_;
	my $node = LeafTest::new_node($name, { max_worker_processes => undef, start => 0 },
		"leaf.worker_id_source = 'database'",
		"leaf.alloc_conninfo = 'host=127.0.0.1,127.0.0.1 port=$p1,$p2 dbname=postgres user=$user target_session_attrs=read-write connect_timeout=2'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '${drift_ms}ms'",
		"leaf.wait_timeout = '1s'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
	return $node;
}

sub status
{
	my ($node, $cols) = @_;
	return $node->safe_psql('postgres', "SELECT $cols FROM leaf_snowflake_status");
}

my $a = sf_node('a');
ok($a->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'node a serves');
is(status($a, 'worker_id'), '0', '... with worker ID 0');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT count(*) FROM leaf_worker_lease'), '1',
	'the standby has the row of a');

# the primary fails; the asynchronous standby is promoted
$primary->stop('immediate');
$standby->promote;
my $promoted = Time::HiRes::time();
ok($a->poll_query_until('postgres', q[
	SELECT ready AND last_heartbeat > now() - interval '1 s' FROM leaf_snowflake_status]),
	'a renews its lease on the promoted server');
ok($standby->poll_query_until('postgres', q[
	SELECT timeline = 2 FROM leaf_worker_lease WHERE worker_id = 0]),
	'... and its row records the new timeline');

# a new node: held back for a lease and twice the drift
my $b = sf_node('b');
my $reason = '';
ok(LeafTest::wait_until(sub {
	$reason = status($b, "coalesce(not_ready_reason, '')");
	return $reason =~ /^the allocation database moved to timeline 2 .*no worker ID is taken for \d+ ms more/;
}, 'b to be held back', 60), 'a new node takes no worker ID right after the promotion, and says why')
  or diag("not_ready_reason: $reason");
is($standby->safe_psql('postgres',
	'SELECT synchronous FROM leaf_worker_lease_timeline WHERE timeline = 2'),
	'f', 'the new timeline is recorded as not synchronous');
ok($b->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'b serves later');
is(status($b, 'worker_id'), '1', '... with worker ID 1, a holding 0');
my $gap = $standby->safe_psql('postgres', q[
	SELECT extract(epoch FROM l.held_since - t.seen_at) * 1000
	  FROM leaf_worker_lease l, leaf_worker_lease_timeline t
	 WHERE l.worker_id = 1 AND t.timeline = 2]);
cmp_ok($gap, '>=', $lease_ms + 2 * $drift_ms,
	'b took its worker ID only a lease and twice the drift after the new timeline was first seen');
ok($a->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'), 'a still serves');

$_->stop for ($b, $a, $standby);
done_testing();
