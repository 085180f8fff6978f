# Copyright (c) leaf contributors

# Worker IDs from the allocation database: the fleet's shared settings
# (leaf_worker_lease_fleet) when an operator clears them, or moves a
# worker ID to a node of another epoch.
#  1. The fleet's settings cleared (set to NULL) while a node with a long
#     heartbeat (10 s, a lease of 21 s) holds a worker ID.  A node with a
#     short heartbeat (500 ms) that starts then must not record its own
#     while that lease is live (a new holder would wait by them, shorter
#     than the lease in use): it waits, the holder records the fleet's
#     settings again at its next renewal, and the new node is refused for
#     its other heartbeat.  So, when the holder's row is deleted, no node
#     with a shorter wait takes its worker ID.
#  2. A hand-set worker ID moved the documented way (its node stopped for
#     good, its row deleted) to a node whose leaf.snowflake_epoch is 15 s
#     later: the row that is gone cannot say which instants its holder
#     used, so the epoch is the fleet's, and the new node is refused until
#     the fleet's settings are changed with every node stopped.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
my $epoch = 1288834974657;

sub conf
{
	my ($name, $hb, @extra) = @_;
	return ("leaf.worker_id_source = 'database'",
		"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres connect_timeout=2'",
		"leaf.snowflake_layout = '41+2+12'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '$hb'",
		"leaf.max_clock_drift_ms = '1000ms'",
		"leaf.snowflake_epoch = '$epoch'",
		"leaf.wait_timeout = '1s'",
		@extra);
}

sub fleet
{
	return $alloc->safe_psql('postgres',
		"SELECT coalesce(heartbeat_ms::text, 'null') || '/' || coalesce(max_clock_drift_ms::text, 'null') FROM leaf_worker_lease_fleet");
}

# 1. the fleet's settings cleared while a node holds a long lease
my $a = LeafTest::new_node('a', { max_worker_processes => undef }, conf('a', '10s'));
ok(LeafTest::sf_wait_ready($a), 'node a (heartbeat 10 s) serves');
my $wa = LeafTest::sf_status($a, 'worker_id');
is(fleet(), '10000/1000', 'the fleet records a\'s heartbeat and drift');
$alloc->safe_psql('postgres',
	'UPDATE leaf_worker_lease_fleet SET heartbeat_ms = NULL, max_clock_drift_ms = NULL');
my $b = LeafTest::new_node('b', { max_worker_processes => undef }, conf('b', '500ms'));
ok(LeafTest::sf_wait_reason($b,
	qr/^the fleet's heartbeat, clock drift and epoch are not recorded in leaf_worker_lease_fleet, and leases are live|"leaf\.heartbeat_interval" is 500 ms and "leaf\.max_clock_drift_ms" 1000 ms here, but the fleet's table of worker IDs records 10000 ms/),
	'a node with a shorter heartbeat, started while the settings are cleared and a lease is live, does not record its own');
ok($alloc->poll_query_until('postgres',
	"SELECT heartbeat_ms = 10000 FROM leaf_worker_lease_fleet"),
	'the holder records the fleet\'s settings again at its next renewal');
ok(LeafTest::sf_wait_reason($b,
	qr/^"leaf\.heartbeat_interval" is 500 ms and "leaf\.max_clock_drift_ms" 1000 ms here, but the fleet's table of worker IDs records 10000 ms and 1000 ms/),
	'... after which the new node is refused for its heartbeat');
$alloc->safe_psql('postgres', "DELETE FROM leaf_worker_lease WHERE worker_id = $wa");
is(LeafTest::sf_status($b, 'coalesce(worker_id::text, \'none\') || \'/\' || coalesce(ready, false)'),
	'none/false', '... and takes no worker ID, a\'s row deleted or not');
ok(LeafTest::sf_wait_ready($a, 60), 'a takes a worker ID anew once its row is gone');
$b->stop;
$a->stop;

# 2. a hand-set worker ID moved to a node whose epoch is 15 s later
my $c = LeafTest::new_node('c', { max_worker_processes => undef },
	conf('c', '10s', "leaf.worker_id = 2"));
ok(LeafTest::sf_wait_ready($c), 'node c (worker ID 2 by hand) serves');
$c->stop;
$alloc->safe_psql('postgres', 'DELETE FROM leaf_worker_lease WHERE worker_id = 2');
my $d = LeafTest::new_node('d', { max_worker_processes => undef },
	conf('d', '10s', "leaf.worker_id = 2", "leaf.snowflake_epoch = '" . ($epoch + 15000) . "'"));
ok(LeafTest::sf_wait_reason($d,
	qr/^"leaf\.snowflake_epoch" is ${\ ($epoch + 15000)} here, but the fleet's table of worker IDs records $epoch/),
	'the node that gets the worker ID moved to it, under an epoch 15 s later, is refused, and says why');
my ($st) = LeafTest::sqlstate($d, 'postgres', 'SELECT leaf_snowflake()');
is($st, 'LF102', '... its calls fail with LF102');
$d->stop;
$alloc->stop;
done_testing();
