
# Copyright (c) leaf contributors

# Snowflake worker IDs from an allocation database: a request made on the
# connection kept from the one before waits until its own deadline, not
# the earlier one's.  Every request first checks leaf's schema there
# (leaf_pq_leaf_schema()); that check must not run under the deadline the
# connection still carries from the request before, which has passed by
# the time of the next one.
#  1. A node serves after the wait of a new holder, and no renewal fails
#     on its way, neither the first one (on the connection the taking
#     made, seconds before) nor those after it.
#  2. Stopped cleanly later than its last renewal's deadline, before the
#     next heartbeat (leaf.heartbeat_interval 10 s, a renewal's deadline
#     5 s), the node ends its lease on that kept connection, and says so.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $t_start = Time::HiRes::time();

my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
$alloc->safe_psql('postgres', q[
CREATE ROLE leaf_node LOGIN;
GRANT USAGE ON SCHEMA public TO leaf_node;
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline, leaf_worker_lease_fleet TO leaf_node;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_take, leaf_worker_lease_renew, leaf_worker_lease_release, leaf_worker_lease_give_up, leaf_worker_lease_copy_check, leaf_worker_lease_fleet_check, leaf_worker_lease_pick TO leaf_node;
]);
my $aport = $alloc->port;

# heartbeat 10 s: a renewal's deadline is 5 s after it starts, the next
# one comes 10 s after it ends; a new holder waits out the lease, 21 s,
# and twice the drift
my $a = LeafTest::new_node('a', { max_worker_processes => undef, start => 0 },
	"leaf.worker_id_source = 'database'",
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=leaf_node connect_timeout=2'",
	"leaf.snowflake_layout = '41+2+12'",
	"leaf.node_address = 'a.example:5432'",
	"leaf.heartbeat_interval = '10s'",
	"leaf.max_clock_drift_ms = '100ms'",
	"leaf.wait_timeout = '1s'");
$a->start;
$a->safe_psql('postgres', 'CREATE EXTENSION leaf');

# ---------------------------------------------------------------------
# 1. serving, every renewal made
# ---------------------------------------------------------------------
ok(LeafTest::sf_wait_ready($a, 120), '1: node a serves');
my $ready_at = Time::HiRes::time();
my $wid = LeafTest::sf_status($a, 'worker_id');
is($wid, '0', '1: ... with worker ID 0');
my $log = slurp_file($a->logfile);
unlike($log, qr/could not renew its lease/,
	'1: no renewal failed, the first one on the connection of the taking neither')
  or diag join("\n", $log =~ /^.*could not renew.*$/mg);

# ---------------------------------------------------------------------
# 2. a clean stop past the last renewal's deadline
# ---------------------------------------------------------------------
# the renewal that made a serve started before $ready_at: 6 s on, its
# deadline has passed, and the next heartbeat is 4 s away
Time::HiRes::sleep(6 - (Time::HiRes::time() - $ready_at));
my $log_from = -s $a->logfile;
$a->stop;
my $late = Time::HiRes::time() - $ready_at;
note sprintf('a stopped %.1f s after it was seen serving', $late);
is($alloc->safe_psql('postgres',
	"SELECT count(*) FROM leaf_worker_lease WHERE worker_id = $wid AND expires_at > clock_timestamp()"),
	'0', '2: a clean stop past the last renewal\'s deadline ends the lease');
$log = substr(slurp_file($a->logfile), $log_from);
like($log, qr/released worker ID $wid in the allocation database, with mark \d+/,
	'2: ... and the node says that it released its worker ID')
  or diag $log;
unlike($log, qr/could not release/, '2: ... and nothing of a failed release');

$alloc->stop;
note sprintf('the file took %.0f s', Time::HiRes::time() - $t_start);
done_testing();
