--
-- admin_acts: what an administrator does to the counters of a database
-- that another role owns.  The owner sets the database's search_path to
-- a schema of its own, with operators that stand in for the built-in
-- ones of the statements on leaf_alloc, leaf_alloc_retired and the
-- tables of worker IDs and record who ran them.  The statements by hand
-- run them as the superuser; leaf's functions for the same acts (retire,
-- alter, raise, forget a tag's mark, forget a worker ID, reset the
-- fleet's settings) run none.
--
\set VERBOSITY default
SELECT current_user AS superuser \gset
CREATE ROLE leaf_acts_owner LOGIN;			-- owns the database, nothing more
CREATE ROLE leaf_acts_admin LOGIN;			-- a tag administrator
CREATE ROLE leaf_acts_plain LOGIN;			-- may connect, nothing more
CREATE DATABASE leaf_acts OWNER leaf_acts_owner;
\c leaf_acts :superuser
CREATE EXTENSION leaf;
GRANT SELECT, INSERT, UPDATE, DELETE ON leaf_alloc TO leaf_acts_admin;
SELECT leaf_segment_create('keep', step => 10, start => 100);
SELECT leaf_segment_create('gone', step => 10, start => 200);
SELECT leaf_segment_create('old', step => 10, start => 300);
SELECT leaf_segment_create('spare', step => 10, start => 400);
-- a mark in leaf_alloc_retired, from before the owner planted anything
DELETE FROM leaf_alloc WHERE biz_tag = 'old';

--
-- 1. The owner plants its operators, for the types that the statements
-- compare and add, and puts its schema first.
--
\c leaf_acts leaf_acts_owner
CREATE SCHEMA mine;
CREATE TABLE mine.ran (op text,
	superuser boolean DEFAULT pg_catalog.current_setting('is_superuser')::boolean);
GRANT INSERT ON mine.ran TO PUBLIC;
CREATE FUNCTION mine.eq_varchar(varchar, varchar) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mine.ran (op) VALUES ('=(varchar, varchar)');
	RETURN $1::text OPERATOR(pg_catalog.=) $2::text;
END
$$;
CREATE OPERATOR mine.= (LEFTARG = varchar, RIGHTARG = varchar,
	FUNCTION = mine.eq_varchar);
CREATE FUNCTION mine.eq_text(text, text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mine.ran (op) VALUES ('=(text, text)');
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$$;
CREATE OPERATOR mine.= (LEFTARG = text, RIGHTARG = text,
	FUNCTION = mine.eq_text);
CREATE FUNCTION mine.plus(bigint, integer) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mine.ran (op) VALUES ('+(bigint, integer)');
	RETURN $1 OPERATOR(pg_catalog.+) $2;
END
$$;
CREATE OPERATOR mine.+ (LEFTARG = bigint, RIGHTARG = integer,
	FUNCTION = mine.plus);
CREATE FUNCTION mine.plus(bigint, bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mine.ran (op) VALUES ('+(bigint, bigint)');
	RETURN $1 OPERATOR(pg_catalog.+) $2;
END
$$;
CREATE OPERATOR mine.+ (LEFTARG = bigint, RIGHTARG = bigint,
	FUNCTION = mine.plus);
ALTER DATABASE leaf_acts SET search_path = mine, public, pg_catalog;

--
-- 2. The statements by hand, as a superuser under the owner's
-- search_path: every one of them runs an operator of the owner's, as the
-- superuser.  (Undone: this only shows what happened.)
--
\c leaf_acts :superuser
SHOW search_path;
BEGIN;
DELETE FROM leaf_alloc WHERE biz_tag = 'gone';
UPDATE leaf_alloc SET max_id = 5000 WHERE biz_tag = 'keep';
UPDATE leaf_alloc SET max_id = max_id + 1000000000;
DELETE FROM leaf_alloc_retired WHERE biz_tag = 'old';
SELECT op, superuser, pg_catalog.count(*) > 0 AS ran
  FROM mine.ran GROUP BY op, superuser ORDER BY op;
ROLLBACK;

--
-- 3. The same acts through leaf's functions, under the owner's
-- search_path: none of the owner's operators runs.
--
SELECT public.leaf_segment_alter('keep', max_id => 5000, step => 50,
								 description => 'kept');
SELECT public.leaf_segment_raise(1000000000);
SELECT public.leaf_segment_raise(7, 'keep');
SELECT public.leaf_segment_retire('gone');
SELECT public.leaf_segment_forget('old');
-- as the docs give them: search_path pinned first
SET search_path = pg_catalog, pg_temp;
SELECT public.leaf_segment_retire('spare'::text);
RESET search_path;
SELECT pg_catalog.count(*) AS owners_operators_ran FROM mine.ran;
SELECT biz_tag, max_id, step, description FROM public.leaf_alloc ORDER BY 1;
SELECT biz_tag, max_id FROM public.leaf_alloc_retired ORDER BY 1;
-- a retired tag created again starts at its mark; a forgotten one does not
SELECT public.leaf_segment_create('gone', step => 10, start => 1);
SELECT public.leaf_segment_create('old', step => 10, start => 1);
SELECT biz_tag, max_id FROM public.leaf_alloc ORDER BY 1;
SELECT pg_catalog.count(*) AS owners_operators_ran FROM mine.ran;

--
-- 4. What they refuse.
--
SELECT public.leaf_segment_retire('nothing');
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_alter('nothing', step => 5);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_raise(5, 'nothing');
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_forget('nothing');
\echo :LAST_ERROR_SQLSTATE
-- max_id never moves backwards, a step is positive
SELECT public.leaf_segment_alter('keep', max_id => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_alter('keep', step => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_raise(0);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_raise(-5, 'keep');
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_raise(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_alter(NULL, step => 5);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_retire(NULL) IS NULL AS strict_retire,
	   public.leaf_segment_forget(NULL) IS NULL AS strict_forget;
SELECT biz_tag, max_id, step FROM public.leaf_alloc ORDER BY 1;

--
-- 5. Who may: a tag administrator (privileges on leaf_alloc) retires,
-- alters and raises; forgetting a mark is for superusers, as
-- leaf_alloc_retired is; a role that may only connect may do none.
--
\c leaf_acts leaf_acts_admin
SET search_path = pg_catalog, pg_temp;
SELECT public.leaf_segment_alter('keep', step => 20);
SELECT public.leaf_segment_raise(3, 'keep');
SELECT public.leaf_segment_retire('gone');
SELECT public.leaf_segment_forget('gone');
\echo :LAST_ERROR_SQLSTATE
\c leaf_acts leaf_acts_plain
SET search_path = pg_catalog, pg_temp;
SELECT public.leaf_segment_alter('keep', step => 30);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_raise(3, 'keep');
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_retire('keep');
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_segment_forget('old');
\echo :LAST_ERROR_SQLSTATE
\c leaf_acts :superuser
SET search_path = pg_catalog, pg_temp;
SELECT biz_tag, max_id, step FROM public.leaf_alloc ORDER BY 1;
SELECT biz_tag, max_id FROM public.leaf_alloc_retired ORDER BY 1;
SELECT pg_catalog.count(*) AS owners_operators_ran FROM mine.ran;

--
-- 6. The tables of worker IDs, as on an allocation database that another
-- role owns: the owner adds an operator = for integers, and a table of
-- leaf's name whose trigger records who updated it.
--
\c leaf_acts leaf_acts_owner
CREATE FUNCTION mine.eq_integer(integer, integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mine.ran (op) VALUES ('=(integer, integer)');
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$$;
CREATE OPERATOR mine.= (LEFTARG = integer, RIGHTARG = integer,
	FUNCTION = mine.eq_integer);
CREATE TABLE mine.leaf_worker_lease_fleet (heartbeat_ms integer,
	max_clock_drift_ms integer, epoch_ms bigint);
CREATE FUNCTION mine.updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mine.ran (op) VALUES ('trigger of mine.leaf_worker_lease_fleet');
	RETURN NULL;
END
$$;
CREATE TRIGGER updated BEFORE UPDATE ON mine.leaf_worker_lease_fleet
	FOR EACH STATEMENT EXECUTE FUNCTION mine.updated();
\c leaf_acts :superuser
SET search_path = pg_catalog, pg_temp;
INSERT INTO public.leaf_worker_lease (worker_id, holder_identity,
	holder_address, holder_token, hand_set, layout, epoch_ms, hwm_ms,
	expires_at, renewed_at, held_since, timeline)
VALUES (3, 'a', 'a:1', 1, true, '41+10+12', 0, 1000,
		'2026-01-01', '2026-01-01', '2026-01-01', 1),
	   (4, 'b', 'b:1', 2, false, '41+10+12', 0, 2000,
		'2026-01-01', '2026-01-01', '2026-01-01', 1);
INSERT INTO public.leaf_worker_lease_fleet (fleet_id, heartbeat_ms,
	max_clock_drift_ms, epoch_ms)
VALUES (42, 500, 1000, 0);
RESET search_path;
-- by hand, under the owner's search_path (undone)
BEGIN;
DELETE FROM leaf_worker_lease WHERE worker_id = 3;
UPDATE leaf_worker_lease_fleet
   SET heartbeat_ms = NULL, max_clock_drift_ms = NULL, epoch_ms = NULL;
SELECT op, superuser, pg_catalog.count(*) > 0 AS ran
  FROM mine.ran GROUP BY op, superuser ORDER BY op;
ROLLBACK;
-- leaf's functions
SELECT public.leaf_worker_lease_forget(3);
SELECT public.leaf_worker_lease_fleet_reset();
SELECT public.leaf_worker_lease_forget(3);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_worker_lease_forget(NULL);
SELECT public.leaf_worker_lease_forget(NULL) IS NULL AS none_left;
-- a bound row: refused without force, alone or among every row
SET search_path = pg_catalog, pg_temp;
INSERT INTO public.leaf_worker_lease (worker_id, holder_identity,
	holder_address, holder_token, hand_set, layout, epoch_ms, hwm_ms,
	expires_at, renewed_at, held_since, timeline, bound)
VALUES (6, 'c', 'c:1', 3, false, '41+10+12', 0, 3000,
		'2026-01-01', '2026-01-01', '2026-01-01', 1, true);
RESET search_path;
SELECT public.leaf_worker_lease_forget(6);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_worker_lease_forget(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_worker_lease_forget(6, force => true);
SELECT fleet_id, heartbeat_ms, max_clock_drift_ms, epoch_ms
  FROM public.leaf_worker_lease_fleet;
SELECT pg_catalog.count(*) AS owners_operators_ran FROM mine.ran;
-- for superusers, as the tables
\c leaf_acts leaf_acts_admin
SELECT public.leaf_worker_lease_forget(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT public.leaf_worker_lease_fleet_reset();
\echo :LAST_ERROR_SQLSTATE

\c contrib_regression :superuser
DROP DATABASE leaf_acts;
DROP ROLE leaf_acts_owner;
DROP ROLE leaf_acts_admin;
DROP ROLE leaf_acts_plain;
