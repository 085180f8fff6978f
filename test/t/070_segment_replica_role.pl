
# Copyright (c) leaf contributors

# session_replication_role = replica given to every session (in
# postgresql.conf, or for a database) says nothing of who writes: leaf's
# own writes there are never taken for logical replication.
#  1. A server with session_replication_role = replica in postgresql.conf:
#     its allocator loads segment after segment, in a database of its own
#     and in one with ALTER DATABASE ... SET session_replication_role =
#     replica too; no load is refused (LF012), and leaf_alloc_replicated
#     stays empty.
#  2. A snowflake node takes and renews a worker ID in an allocation
#     database on that server (a database of its own), logged in as a
#     role that is not a superuser and may not set
#     session_replication_role: it serves, and leaf_alloc_replicated
#     stays empty.
#  3. A shard of a fleet draws segments from an allocation database on
#     that server, logged in as such a role: no load is refused, and
#     leaf_alloc_replicated stays empty.
#  4. A session that sets session_replication_role = replica itself and
#     writes leaf_alloc is recorded as before, and the loads are refused
#     (LF012).
#  5. The way back: leaf_alloc_replicated_clear() is refused to a role
#     without EXECUTE (42501) and while a subscription's mark is recorded
#     (55000); then a superuser clears the mark, and the loads go on.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# a segment duration this short keeps the step near the tag's 10, so that
# a few dozen IDs are a load (10 IDs used within 1 ms still double it)
my $alloc = LeafTest::new_node('alloc',
	"listen_addresses = '127.0.0.1'",
	"leaf.segment_duration = '1ms'",
	'session_replication_role = replica');
is($alloc->safe_psql('postgres', 'SHOW session_replication_role'), 'replica',
	'sessions run as replica');

sub marks
{
	my ($db) = @_;
	return $alloc->safe_psql($db,
		q[SELECT coalesce(string_agg(origin, '; '), '') FROM leaf_alloc_replicated]);
}

# takes $n IDs of tag 'order' in $db, 10 per segment; returns the
# SQLSTATE of the first refusal (undef if none) and its error
sub take
{
	my ($db, $n) = @_;
	my ($state, $err) = LeafTest::sqlstate($alloc, $db,
		"SELECT count(DISTINCT leaf_segment_nextval('order')) FROM generate_series(1, $n)");
	return ($state, $err);
}

############################################################################
# 1. the allocator's loads
############################################################################

# the tag of postgres is made as origin, so that the allocator is the
# only writer there as replica; app's under the role of the database
$alloc->safe_psql('postgres', q[
CREATE DATABASE app;
ALTER DATABASE app SET session_replication_role = replica;
CREATE DATABASE leases;
SET session_replication_role = origin;
SELECT leaf_segment_create('order', step => 10);
]);
$alloc->safe_psql('app', q[
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', step => 10);
]);
for my $db ('postgres', 'app')
{
	my ($state, $err) = take($db, 100);
	is($state, undef, "1 ($db): 100 IDs in 10 segments, none refused") or diag $err;
	is(marks($db), '', "1 ($db): leaf_alloc_replicated stays empty");
	cmp_ok($alloc->safe_psql($db, q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']),
		'>=', 100, "1 ($db): the counter moved with the loads");
}

############################################################################
# 2. worker IDs of the database source
############################################################################

$alloc->safe_psql('postgres', 'CREATE ROLE leaf_node LOGIN');
$alloc->safe_psql('leases', q[
CREATE EXTENSION leaf;
GRANT USAGE ON SCHEMA public TO leaf_node;
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline, leaf_worker_lease_fleet TO leaf_node;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_take, leaf_worker_lease_renew, leaf_worker_lease_release, leaf_worker_lease_give_up, leaf_worker_lease_copy_check, leaf_worker_lease_fleet_check, leaf_worker_lease_pick TO leaf_node;
]);
my $port = $alloc->port;
my $sf = LeafTest::new_node('sf', { max_worker_processes => undef, start => 0 },
	"leaf.worker_id_source = 'database'",
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$port dbname=leases user=leaf_node connect_timeout=2'",
	"leaf.node_address = 'sf.example:5432'",
	"leaf.heartbeat_interval = '500ms'",
	"leaf.max_clock_drift_ms = '1000ms'",
	"leaf.wait_timeout = '1s'");
$sf->start;
$sf->safe_psql('postgres', 'CREATE EXTENSION leaf');
ok(LeafTest::sf_wait_ready($sf, 60), '2: the snowflake node serves')
  or diag LeafTest::sf_status($sf, 'not_ready_reason');
ok( LeafTest::wait_until(
		sub {
			$alloc->safe_psql('leases',
				q[SELECT count(*) FROM leaf_worker_lease WHERE renewed_at > held_since + interval '1 s'])
			  eq '1';
		},
		'a renewal of the lease', 30),
	'2: its lease is renewed');
is(marks('leases'), '', '2: leaf_alloc_replicated stays empty');
is(LeafTest::sf_status($sf, 'coalesce(ready, false)'), 't', '2: the node still serves');
$sf->stop;

############################################################################
# 3. a shard of a fleet
############################################################################

$alloc->safe_psql('postgres', 'CREATE DATABASE fleet');
# the tag made as origin: the shard's loads are the only writes as replica
$alloc->safe_psql('fleet', q[
CREATE EXTENSION leaf;
SET session_replication_role = origin;
SELECT leaf_segment_create('order', step => 10);
GRANT USAGE ON SCHEMA public TO leaf_node;
GRANT SELECT, UPDATE ON leaf_alloc TO leaf_node;
]);
my $shard = LeafTest::new_node('shard',
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$port dbname=fleet user=leaf_node'",
	"leaf.segment_duration = '1ms'");
my ($state, $err) = LeafTest::sqlstate($shard, 'postgres',
	"SELECT count(DISTINCT leaf_segment_nextval('order')) FROM generate_series(1, 100)");
is($state, undef, '3: the shard takes 100 IDs in 10 segments, none refused') or diag $err;
is(marks('fleet'), '', '3: leaf_alloc_replicated stays empty');
cmp_ok($alloc->safe_psql('fleet', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']),
	'>=', 100, '3: the counter moved with the loads');
$shard->stop;

############################################################################
# 4. a session that applies changes as a replica
############################################################################

$alloc->safe_psql('postgres', q[
SET application_name = 'copier';
SET session_replication_role = replica;
UPDATE leaf_alloc SET description = 'copied' WHERE biz_tag = 'order';
]);
is(marks('postgres'), q[session_replication_role replica (application_name 'copier')],
	'4: a session that sets the role itself is recorded');
# past what both buffers hold: a fast machine may have doubled the step
# (10 IDs used within leaf.segment_duration), up to a few hundred
($state, $err) = take('postgres', 100000);
is($state, 'LF012', '4: the loads are refused with LF012')
  or diag $alloc->safe_psql('postgres', q[SELECT * FROM leaf_segments], extra_params => ['-x']);
like($err, qr/leaf_alloc is written by logical replication/, '4: the message says why');
is(marks('app'), '', '4: the other database is not marked');

############################################################################
# 5. the way back
############################################################################

$alloc->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
($state, $err) = LeafTest::sqlstate($alloc, 'postgres',
	'SET ROLE plain; SELECT leaf_alloc_replicated_clear()');
is($state, '42501', '5: a role without EXECUTE may not clear the mark');

$alloc->safe_psql('postgres', q[
INSERT INTO leaf_alloc_replicated (origin, publications)
VALUES ('subscription other_sub (90002)', 'other_pub')]);
($state, $err) = LeafTest::sqlstate($alloc, 'postgres', 'SELECT leaf_alloc_replicated_clear()');
is($state, '55000', '5: a subscription\'s mark is not cleared');
like($err, qr/HINT:.*leaf_alloc_cutover/, '5: the hint names leaf_alloc_cutover');
$alloc->safe_psql('postgres',
	q[DELETE FROM leaf_alloc_replicated WHERE origin LIKE 'subscription %']);

is($alloc->safe_psql('postgres', 'SELECT * FROM leaf_alloc_replicated_clear()'),
	q[session_replication_role replica (application_name 'copier')],
	'5: a superuser clears the mark, which it names');
is(marks('postgres'), '', '5: leaf_alloc_replicated is empty');
my $max_id = $alloc->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
ok( LeafTest::wait_until(sub { !defined((take('postgres', 100))[0]) },
		'the loads to go on', 30),
	'5: the loads go on');
cmp_ok($alloc->safe_psql('postgres', q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']),
	'>', $max_id, '5: ... from new segments');
is(marks('postgres'), '', '5: and leaf_alloc_replicated stays empty');

$alloc->stop;
done_testing();
