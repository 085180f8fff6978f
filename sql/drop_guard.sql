--
-- DROP EXTENSION leaf would drop leaf_alloc and leaf_alloc_retired, and
-- with them every counter of the database.  It is refused (LF010) while
-- either has rows, unless leaf.allow_drop_with_counters is on (superuser,
-- per session); an empty extension drops as before.  (The guard under
-- load, with the counters saved and restored, is
-- test/t/033_extension_drop_restore_under_load.pl.)
--
SELECT current_database() AS regress_db \gset
CREATE DATABASE leaf_drop_regress;
CREATE ROLE leaf_drop_plain;
\c leaf_drop_regress
CREATE EXTENSION leaf;

-- an empty extension drops as before
DROP EXTENSION leaf;

CREATE EXTENSION leaf;
SELECT leaf_segment_create('kept', 100);
SELECT leaf_segment_nextval('kept');
CREATE TABLE t (id bigint DEFAULT leaf_segment_nextval('kept'));

-- without CASCADE, the column default that depends on leaf stops it first
DROP EXTENSION leaf;
\echo :LAST_ERROR_SQLSTATE

-- refused with counters, however the drop is spelt; the message says why,
-- the detail counts the rows, and the hint says to save them in the
-- transaction of the drop, and how to confirm
DROP EXTENSION leaf CASCADE;
\echo :LAST_ERROR_SQLSTATE
DROP EXTENSION IF EXISTS pg_nope, leaf CASCADE;
\echo :LAST_ERROR_SQLSTATE
SET client_min_messages = warning;
DROP SCHEMA public CASCADE;
\echo :LAST_ERROR_SQLSTATE
RESET client_min_messages;
-- the counter is still there
SELECT max_id > 1 AS counter_kept FROM leaf_alloc WHERE biz_tag = 'kept';

-- only a retired mark left: still refused
DELETE FROM leaf_alloc;
SET client_min_messages = warning;
DROP EXTENSION leaf CASCADE;
\echo :LAST_ERROR_SQLSTATE
RESET client_min_messages;

-- the setting is for superusers only
SET ROLE leaf_drop_plain;
SET leaf.allow_drop_with_counters = on;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- confirmed in the session: dropped, and with CASCADE the column default
-- goes too
SET leaf.allow_drop_with_counters = on;
DROP EXTENSION leaf CASCADE;
SELECT count(*) AS extension_left FROM pg_extension WHERE extname = 'leaf';
SELECT count(*) AS defaults_left FROM pg_attrdef WHERE adrelid = 't'::regclass;

-- the setting lasts for the session only: a new session is refused again
\c leaf_drop_regress
CREATE EXTENSION leaf;
SELECT leaf_segment_create('again', 100);
DROP EXTENSION leaf;
\echo :LAST_ERROR_SQLSTATE

\c :regress_db
DROP DATABASE leaf_drop_regress;
DROP ROLE leaf_drop_plain;
