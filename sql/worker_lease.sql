--
-- worker_lease: the protocol of snowflake worker IDs held as leases in
-- the allocation database (leaf.worker_id_source = 'database'), called
-- as the snowflake worker calls it, in one database: taking, renewing,
-- ending and giving up a lease, the fleet's checks, the copies of the
-- database, logical replication and who may call it.  Time is moved by
-- the arguments and by the rows (expires_at, seen_at), never waited for.
--
CREATE DATABASE leaf_worker_lease_regress;
\c leaf_worker_lease_regress
CREATE EXTENSION leaf;

-- the call of a node: its data directory, a fresh token, and what
-- differs from the defaults (a heartbeat of 500 ms and a drift of 1000 ms,
-- so a lease of 2000 ms; a floor of 100; worker IDs 0 and 1); in the
-- reasons, numbers of three digits or more (times, system identifiers)
-- are N, and the time logical replication last wrote is left out
CREATE FUNCTION masked(reason text) RETURNS text
LANGUAGE sql AS $$
SELECT regexp_replace(regexp_replace(reason, ', last at .*$', ', last at T.'),
					  '\d{3,}', 'N', 'g')
$$;
CREATE FUNCTION take(identity text, token bigint, want integer DEFAULT -1,
					 file_token bigint DEFAULT 0, file_fleet bigint DEFAULT 0,
					 earlier_holder_ms bigint DEFAULT 0,
					 heartbeat_ms integer DEFAULT 500,
					 layout text DEFAULT '41+10+12')
RETURNS TABLE (result text, reason text, worker_id integer, fresh boolean,
			   taken_from text, earlier_hwm_ms bigint, recorded_hwm_ms bigint)
LANGUAGE sql AS $$
SELECT t.result, masked(t.reason), t.worker_id,
	   t.fresh, t.taken_from, t.earlier_hwm_ms, t.recorded_hwm_ms
  FROM leaf_worker_lease_take(identity, identity || '.example:5432', want, 100,
							  file_token, file_fleet, token, layout, 1,
							  heartbeat_ms, 1000, 0, 2000, earlier_holder_ms,
							  false) AS t
$$;
CREATE FUNCTION renew(identity text, token bigint, wid integer, hwm bigint)
RETURNS TABLE (result text, reason text, recorded_hwm_ms bigint)
LANGUAGE sql AS $$
SELECT r.result, masked(r.reason), r.recorded_hwm_ms
  FROM leaf_worker_lease_renew(wid, identity, token, hwm, 2000,
							   (SELECT fleet_id FROM leaf_worker_lease_fleet),
							   500, 1000, 0) AS r
$$;
CREATE VIEW leases AS
SELECT worker_id, holder_identity, holder_token, hand_set, hwm_ms,
	   expires_at > clock_timestamp() AS live
  FROM leaf_worker_lease ORDER BY worker_id;

--
-- 1. Taking, renewing, a second holder.
--
-- a takes the lowest free worker ID, new to it; the first node records
-- the fleet's settings
SELECT * FROM take('a', 11);
SELECT heartbeat_ms, max_clock_drift_ms, epoch_ms, moved_to,
	   fleet_id > 0 AS has_identity
  FROM leaf_worker_lease_fleet;
-- renewed with its token: the mark rises, and never falls
SELECT * FROM renew('a', 11, 0, 500);
SELECT * FROM renew('a', 11, 0, 400);
-- a wrong token is another holder: lost, and the row is untouched
SELECT * FROM renew('a', 99, 0, 600);
SELECT * FROM leases;
-- b takes the next free one; c finds none while the leases run
SELECT * FROM take('b', 22);
SELECT * FROM take('c', 33);
-- a hand-set worker ID that another data directory holds is refused
SELECT * FROM take('c', 33, want => 0);

--
-- 2. Take-over once a lease has ended.
--
-- a's lease ends now: not before leaf.max_clock_drift_ms has passed too
UPDATE leaf_worker_lease SET expires_at = clock_timestamp() WHERE worker_id = 0;
SELECT * FROM take('c', 33);
-- ended long ago, but its mark still ahead: not yet
UPDATE leaf_worker_lease
   SET expires_at = clock_timestamp() - interval '1 minute',
	   hwm_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 60000
 WHERE worker_id = 0;
SELECT * FROM take('c', 33);
-- both passed: c takes it over above a's mark, as a fresh holder
UPDATE leaf_worker_lease SET hwm_ms = 1000 WHERE worker_id = 0;
SELECT * FROM take('c', 33);
-- a's renewal finds the row no longer its own
SELECT * FROM renew('a', 11, 0, 700);

--
-- 3. A clean stop, and taking the row back.
--
-- b ends its lease with a mark; with another token, nothing is ended
SELECT leaf_worker_lease_release(1, 'b', 22, 800);
SELECT leaf_worker_lease_release(1, 'b', 99, 2000);
SELECT * FROM leases;
-- b's next run, whose state file names the lease: its row at once, not
-- fresh
SELECT * FROM take('b', 44, file_token => 22);
-- while that lease runs, a run with the same identity waits for it (a
-- copy of the data directory)
SELECT * FROM take('b', 55, file_token => 44);
-- after a stop, a run whose state file names another lease takes the row
-- back as fresh
SELECT leaf_worker_lease_release(1, 'b', 44, 850);
SELECT * FROM take('b', 55, file_token => 11);

--
-- 4. Giving up.
--
-- the row becomes no data directory's: b does not take it back as its own
SELECT leaf_worker_lease_give_up(1, 'b', 55, 900);
SELECT * FROM renew('b', 55, 1, 950);
SELECT * FROM leases;
-- once its lease and the drift have passed, the next taking takes it over
UPDATE leaf_worker_lease SET expires_at = clock_timestamp() - interval '1 minute'
 WHERE worker_id = 1;
SELECT * FROM take('b', 66);

--
-- 5. The fleet.
--
-- another table of worker IDs than the state file's is refused
SELECT * FROM take('d', 77, file_fleet => 1);
-- other settings than the fleet's are refused, when taking and renewing
SELECT * FROM take('d', 77, heartbeat_ms => 1000);
SELECT r.result, r.reason
  FROM leaf_worker_lease_renew(1, 'b', 66, 1000, 2000,
							   (SELECT fleet_id FROM leaf_worker_lease_fleet),
							   500, 1000, 5) AS r;
-- another layout than the holders' is refused
SELECT * FROM take('d', 77, layout => '41+8+14');
-- the fence of leaf_alloc_cutover(): nothing is taken or renewed here
UPDATE leaf_worker_lease_fleet SET moved_to = 'host=elsewhere dbname=ids';
SELECT * FROM take('d', 77);
SELECT * FROM renew('b', 66, 1, 1000);
SELECT leaf_worker_lease_release(1, 'b', 66, 1000) AS released;
SELECT * FROM leases;
UPDATE leaf_worker_lease_fleet SET moved_to = NULL;
SELECT * FROM renew('b', 66, 1, 1000);

--
-- 6. Copies of the database (leaf_worker_lease_timeline).
--
-- this copy was recorded by the first taking, which needed no wait
SELECT (t.system_identifier, t.timeline, t.data_directory, t.database_oid)
	   = (i.system_identifier, i.timeline, i.data_directory, i.database_oid) AS this_copy,
	   t.synchronous
  FROM leaf_worker_lease_timeline t, leaf_copy_identity i;
-- within the longest lease after the server started, where it holds
-- leases, nothing is taken (a restore may have set them back)
SELECT * FROM take('d', 77, earlier_holder_ms => 1000000000000);
-- the leases were recorded in another cluster: this copy, new, is
-- recorded, and holds every taking back, even of one's own row after a
-- clean stop, for the longest lease of an earlier holder
SELECT leaf_worker_lease_release(1, 'b', 66, 1050);
UPDATE leaf_worker_lease_timeline SET system_identifier = system_identifier + 1;
SELECT * FROM take('b', 88, file_token => 66);
SELECT count(*) AS copies, count(*) FILTER (WHERE synchronous) AS synchronous
  FROM leaf_worker_lease_timeline;
-- still within it
UPDATE leaf_worker_lease_timeline t SET seen_at = clock_timestamp() + interval '1 minute'
  FROM leaf_copy_identity i WHERE t.system_identifier = i.system_identifier;
SELECT * FROM take('b', 88, file_token => 66);
-- past it
UPDATE leaf_worker_lease_timeline SET seen_at = seen_at - interval '2 minutes';
SELECT * FROM take('b', 88, file_token => 66);
-- a copy recorded in another data directory of the same cluster and
-- timeline only (a clone started as a primary): refused
DELETE FROM leaf_worker_lease_timeline;
INSERT INTO leaf_worker_lease_timeline
SELECT system_identifier, timeline, data_directory + 1, database_oid,
	   clock_timestamp() - interval '1 hour', false
  FROM leaf_copy_identity;
SELECT * FROM take('d', 77);
-- recorded in another database of the cluster only (CREATE DATABASE ...
-- TEMPLATE): refused
UPDATE leaf_worker_lease_timeline
   SET data_directory = data_directory - 1, database_oid = 1;
SELECT * FROM take('d', 77);
-- until a superuser confirms it, once the original serves no more
SELECT leaf_worker_lease_confirm();
UPDATE leaf_worker_lease_timeline SET seen_at = seen_at - interval '1 minute';
SELECT leaf_worker_lease_release(1, 'b', 88, 1100);
SELECT * FROM take('b', 90, file_token => 88);

--
-- 7. Logical replication writes leaf's tables here: nothing is taken, and
-- a renewal finds the lease not its own (the taking says why)
--
INSERT INTO leaf_alloc_replicated (origin, publications)
VALUES ('subscription leaf_sub (1)', 'leaf_pub');
SELECT * FROM take('e', 99);
SELECT * FROM renew('b', 90, 1, 1200);
DELETE FROM leaf_alloc_replicated;
SELECT * FROM renew('b', 90, 1, 1200);

--
-- 8. Who may call the functions: their owner and superusers.  They run
-- as their caller, who needs the grants of the tables too.
--
SELECT p.oid::regprocedure AS function, p.prosecdef AS security_definer,
	   p.proconfig AS settings,
	   has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
  FROM pg_proc p
 WHERE p.proname LIKE 'leaf\_worker\_lease\_%'
 ORDER BY p.proname;
CREATE ROLE leaf_lease_plain;
CREATE ROLE leaf_lease_node;
GRANT USAGE ON SCHEMA public TO leaf_lease_node;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_copy_check(bigint, boolean),
	leaf_worker_lease_fleet_check(bigint, boolean, integer, integer, bigint),
	leaf_worker_lease_pick(text, integer, bigint, integer, integer, bigint),
	leaf_worker_lease_take(text, text, integer, bigint, bigint, bigint, bigint, text,
						   integer, integer, integer, bigint, bigint, bigint, boolean,
						   boolean, bigint),
	leaf_worker_lease_renew(integer, text, bigint, bigint, bigint, bigint, integer,
							integer, bigint),
	leaf_worker_lease_release(integer, text, bigint, bigint),
	leaf_worker_lease_give_up(integer, text, bigint, bigint)
	TO leaf_lease_node;
-- a role without the grants is refused every step
SET ROLE leaf_lease_plain;
SELECT * FROM take('f', 111);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaf_worker_lease_renew(1, 'b', 88, 1300, 2000, 1, 500, 1000, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_worker_lease_release(1, 'b', 88, 1300);
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_worker_lease_give_up(1, 'b', 88, 1300);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaf_worker_lease_copy_check(0, false);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- EXECUTE alone is not enough: the tables are not the role's
SET ROLE leaf_lease_node;
\set VERBOSITY terse
SELECT * FROM take('f', 111);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
RESET ROLE;
-- with the grants of the tables too (docs/privileges.md), the steps work
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline,
	leaf_worker_lease_fleet TO leaf_lease_node;
SET ROLE leaf_lease_node;
SELECT * FROM renew('b', 90, 1, 1300);
SELECT leaf_worker_lease_release(1, 'b', 90, 1300);
SELECT * FROM take('b', 111, file_token => 90);
RESET ROLE;
SELECT * FROM leases;

--
-- 9. Bound leases (leaf.worker_id_lease = 'bound'): a row that no other
-- node takes over by time alone, only once given up, or once the reclaim
-- window it was taken with (leaf.worker_id_reclaim_after) and the drift
-- have passed since its last renewal.
--
CREATE FUNCTION take_bound(identity text, token bigint,
						   reclaim_ms bigint DEFAULT NULL,
						   file_token bigint DEFAULT 0)
RETURNS TABLE (result text, reason text, worker_id integer, fresh boolean,
			   taken_from text)
LANGUAGE sql AS $$
SELECT t.result, masked(t.reason), t.worker_id, t.fresh, t.taken_from
  FROM leaf_worker_lease_take(identity, identity || '.example:5432', -1, 100,
							  file_token, 0, token, '41+10+12', 1, 500, 1000,
							  0, 2000, 0, false, true, reclaim_ms) AS t
$$;
DELETE FROM leaf_worker_lease;
-- g and h take both worker IDs, bound: g with a reclaim window of a
-- minute, h for good
SELECT * FROM take_bound('g', 1, reclaim_ms => 60000);
SELECT * FROM take_bound('h', 2);
SELECT worker_id, holder_identity, bound, reclaim_after_ms
  FROM leaf_worker_lease ORDER BY worker_id;
-- the database was unreachable for an hour, and g's window has not
-- passed: a new node takes neither row, bound or expiring itself, and
-- says why
UPDATE leaf_worker_lease
   SET expires_at = clock_timestamp() - interval '1 hour',
	   renewed_at = clock_timestamp() - interval '59 seconds';
SELECT * FROM take_bound('k', 3);
SELECT result, reason, worker_id FROM take('k', 3);
-- g's window and the drift have passed: its row is taken over, as by a
-- fresh holder, and g's renewal finds it lost; h's row never is
UPDATE leaf_worker_lease SET renewed_at = clock_timestamp() - interval '62 seconds';
SELECT * FROM take_bound('k', 3);
SELECT * FROM renew('g', 1, 0, 2000);
SELECT * FROM take_bound('m', 4);
-- h renews after any length of outage
SELECT * FROM renew('h', 2, 1, 2000);
-- h's next run, whose state file names the lease, takes its row back, not
-- fresh, once its lease has ended (before that, a copy may run)
SELECT * FROM take_bound('h', 5, file_token => 2);
UPDATE leaf_worker_lease SET expires_at = clock_timestamp() - interval '1 minute'
 WHERE worker_id = 1;
SELECT * FROM take_bound('h', 5, file_token => 2);
-- given up, the row is bound no more: taken over once its lease and the
-- drift have passed
SELECT leaf_worker_lease_give_up(1, 'h', 5, 2100);
SELECT worker_id, holder_identity, bound FROM leaf_worker_lease WHERE worker_id = 1;
UPDATE leaf_worker_lease SET expires_at = clock_timestamp() - interval '1 minute'
 WHERE worker_id = 1;
SELECT * FROM take_bound('m', 4);
-- a take as before 1.5's bound leases (no binding given): expiring
SELECT leaf_worker_lease_release(1, 'm', 4, 2200);
SELECT result, worker_id FROM take('m', 6, file_token => 4);
SELECT worker_id, bound, reclaim_after_ms FROM leaf_worker_lease WHERE worker_id = 1;
-- binding a row takes no privilege of its own: a role without the grants
-- is refused, the fleet's login with them (section 8) goes as before
UPDATE leaf_worker_lease SET expires_at = clock_timestamp() + interval '1 hour'
 WHERE worker_id = 1;
SET ROLE leaf_lease_plain;
SELECT * FROM take_bound('p', 7);
\echo :LAST_ERROR_SQLSTATE
SET ROLE leaf_lease_node;
SELECT result, worker_id FROM take_bound('p', 7);
RESET ROLE;

\c postgres
DROP DATABASE leaf_worker_lease_regress;
DROP ROLE leaf_lease_plain;
DROP ROLE leaf_lease_node;
