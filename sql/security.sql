--
-- security: every attack on leaf's SQL surface, made as the role that
-- would try it (a database owner, a CREATEDB role, a role that may only
-- connect), and the refusal it gets
--
\set VERBOSITY default
SELECT current_user AS superuser \gset
CREATE ROLE leaf_sec_owner LOGIN;			-- owns a database, nothing more
CREATE ROLE leaf_sec_creator LOGIN CREATEDB;
CREATE ROLE leaf_sec_plain LOGIN;			-- may connect, nothing more
CREATE ROLE leaf_sec_app LOGIN;				-- granted what an application needs
CREATE DATABASE leaf_sec OWNER leaf_sec_owner;
\c leaf_sec :superuser
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', step => 10);
SELECT leaf_segment_nextval('order');
CREATE FUNCTION public.make_superuser() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('ALTER ROLE %I SUPERUSER', session_user);
	RETURN NEW;
END
$$;

--
-- 1. A database owner: on PostgreSQL 15 it owns schema public, where leaf
-- is.  It moves leaf's schema aside and puts a table of its own, with a
-- trigger that makes it superuser, where leaf_alloc_retired was.
--
\c leaf_sec leaf_sec_owner
ALTER SCHEMA public RENAME TO leaf_home;
CREATE SCHEMA public;
CREATE TABLE public.leaf_alloc_retired (biz_tag varchar(128) PRIMARY KEY,
	max_id bigint, retired_at timestamptz DEFAULT now());
CREATE TRIGGER escalate BEFORE INSERT ON public.leaf_alloc_retired
	FOR EACH ROW EXECUTE FUNCTION leaf_home.make_superuser();
-- leaf's SECURITY DEFINER trigger functions cannot be put on its own table
CREATE TEMP TABLE bait (biz_tag varchar(128), max_id bigint);
INSERT INTO bait VALUES ('order', 9223372036854775000);
CREATE TRIGGER bait BEFORE DELETE ON bait
	FOR EACH ROW EXECUTE FUNCTION leaf_home.leaf_alloc_retire();
CREATE TRIGGER bait BEFORE INSERT ON bait
	FOR EACH ROW EXECUTE FUNCTION leaf_home.leaf_alloc_admit();
CREATE TRIGGER bait BEFORE UPDATE ON bait
	FOR EACH ROW EXECUTE FUNCTION leaf_home.leaf_alloc_guard();
-- (with leaf_alloc_retire attached, this DELETE would write its row into
-- the owner's table, as the extension's owner, and fire the trigger there)
DELETE FROM bait;
SELECT rolsuper FROM pg_roles WHERE rolname = 'leaf_sec_owner';
-- nor can the owner drop the counters, with the schema or the extension
DROP SCHEMA leaf_home CASCADE;
DROP EXTENSION leaf CASCADE;
SELECT rolsuper FROM pg_roles WHERE rolname = 'leaf_sec_owner';

--
-- Even attached by a superuser, they fire on leaf_alloc only.
--
\c leaf_sec :superuser
CREATE TABLE public.bait (biz_tag varchar(128), max_id bigint);
INSERT INTO public.bait VALUES ('order', 9223372036854775000);
CREATE TRIGGER bait BEFORE DELETE ON public.bait
	FOR EACH ROW EXECUTE FUNCTION leaf_home.leaf_alloc_retire();
DELETE FROM public.bait;
DROP TRIGGER bait ON public.bait;
CREATE TRIGGER bait BEFORE INSERT ON public.bait
	FOR EACH ROW EXECUTE FUNCTION leaf_home.leaf_alloc_admit();
INSERT INTO public.bait VALUES ('order', 1);
DROP TABLE public.bait;

--
-- After the rename, leaf works on in its schema: the mark of a deleted tag
-- goes into leaf's own leaf_alloc_retired (the owner's table stays empty,
-- and its trigger never runs), and the tag comes back above it.
--
SELECT leaf_home.leaf_segment_nextval('order') AS before_delete \gset
DELETE FROM leaf_home.leaf_alloc WHERE biz_tag = 'order';
SELECT biz_tag, max_id > :before_delete AS above_every_id_handed_out
  FROM leaf_home.leaf_alloc_retired;
SELECT count(*) AS rows_in_the_owners_table FROM public.leaf_alloc_retired;
SET client_min_messages = warning;	-- the NOTICE names the mark
SELECT leaf_home.leaf_segment_create('order', step => 10);
RESET client_min_messages;
SELECT a.max_id = r.max_id AS starts_at_its_mark
  FROM leaf_home.leaf_alloc a JOIN leaf_home.leaf_alloc_retired r USING (biz_tag);
SELECT leaf_home.leaf_segment_nextval('order') > :before_delete AS above_every_earlier_id;
SELECT rolsuper FROM pg_roles WHERE rolname = 'leaf_sec_owner';
\set VERBOSITY terse
UPDATE leaf_home.leaf_alloc SET max_id = 1 WHERE biz_tag = 'order';
\set VERBOSITY default
SELECT leaf_home.leaf_alloc_source_confirm();
DROP SCHEMA public CASCADE;
ALTER SCHEMA leaf_home RENAME TO public;

--
-- 2. A role that may only connect: it may take no IDs, compute no public
-- IDs, lock or write no counters, and read no view.
--
\c leaf_sec leaf_sec_plain
SELECT leaf_segment_nextval('order');
SELECT count(*) FROM leaf_segment_nextvals('order', 1000000);
SELECT leaf_snowflake();
SELECT count(*) FROM leaf_snowflake_nextvals(1000);
SELECT leaf_public_id(1);
SELECT leaf_private_id(1);
SELECT leaf_public_id_text(1);
SELECT leaf_private_id_text('00000000000');
CREATE TEMP TABLE bait (biz_tag varchar(128), max_id bigint);
CREATE TRIGGER bait BEFORE INSERT ON bait
	FOR EACH ROW EXECUTE FUNCTION leaf_alloc_admit();
CREATE TRIGGER bait BEFORE DELETE ON bait
	FOR EACH ROW EXECUTE FUNCTION leaf_alloc_retire();
BEGIN;
LOCK TABLE leaf_alloc IN ACCESS SHARE MODE;
ROLLBACK;
BEGIN;
LOCK TABLE leaf_alloc_retired IN ACCESS SHARE MODE;
ROLLBACK;
SELECT leaf_segment_create('plain');
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('plain', 1, 10);
UPDATE leaf_alloc SET max_id = 9223372036854775000;
DELETE FROM leaf_alloc;
SELECT * FROM leaf_alloc_retired;
SELECT * FROM leaf_alloc_source;
SELECT leaf_alloc_source_confirm();
SELECT count(*) FROM leaf_segments;
SELECT count(*) FROM leaf_segments();
SELECT count(*) FROM leaf_snowflake_status;
SELECT count(*) FROM leaf_snowflake_status();
SELECT count(*) FROM leaf_tag_metrics;
SELECT count(*) FROM leaf_node_metrics;
SELECT count(*) FROM leaf_segment_errors();
SELECT count(*) FROM leaf_segment_refills();
SELECT leaf_snowflake_units_exhausted();
-- what stays open to everyone: it reads nothing and takes nothing
SELECT worker_id, sequence FROM leaf_snowflake_decode((1::bigint << 22) | (5 << 12) | 7);
SELECT layout FROM leaf_snowflake_layout();
SELECT leaf_check_tag('fine');

--
-- 3. An application role, granted EXECUTE: it takes IDs, through a column
-- default too; a role with INSERT on the table but no grant does not.
--
\c leaf_sec :superuser
GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO leaf_sec_app;
GRANT EXECUTE ON FUNCTION leaf_snowflake() TO leaf_sec_app;
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('order'),
	sf bigint NOT NULL DEFAULT leaf_snowflake(), note text);
GRANT INSERT, SELECT ON orders TO leaf_sec_app, leaf_sec_plain;
\c leaf_sec leaf_sec_app
INSERT INTO orders (note) VALUES ('by the application');
SELECT id > :before_delete AS segment_id, sf > 0 AS snowflake_id
  FROM orders WHERE note = 'by the application';
SELECT count(*) FROM leaf_segment_nextvals('order', 10);
\c leaf_sec leaf_sec_plain
INSERT INTO orders (note) VALUES ('by a role without the grant');

--
-- 4. A CREATEDB role, and a template with leaf in it (as template1 may
-- be): the database it creates is its own, and schema public with it.
--
\c leaf_sec :superuser
CREATE DATABASE leaf_sec_template;
\c leaf_sec_template :superuser
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', step => 10);
SELECT leaf_segment_nextval('order');
ALTER DATABASE leaf_sec_template IS_TEMPLATE true;
-- Roles that CREATE DATABASE refuses stop nothing: one without CREATEDB,
-- and one with CREATEDB that names an owner it is no member of (whose
-- message differs between majors).  The allocator of the template keeps
-- serving.
\c leaf_sec leaf_sec_plain
CREATE DATABASE leaf_sec_nope TEMPLATE leaf_sec_template;
\c leaf_sec leaf_sec_creator
\set VERBOSITY sqlstate
CREATE DATABASE leaf_sec_nope TEMPLATE leaf_sec_template OWNER :"superuser";
\set VERBOSITY default
\c leaf_sec :superuser
SELECT count(*) AS allocators_of_the_template FROM pg_stat_activity
 WHERE backend_type = 'leaf allocator' AND datname = 'leaf_sec_template';
\c leaf_sec leaf_sec_creator
CREATE DATABASE leaf_sec_mine TEMPLATE leaf_sec_template;
\c leaf_sec_mine leaf_sec_creator
ALTER SCHEMA public RENAME TO leaf_home;
CREATE SCHEMA public;
CREATE TEMP TABLE bait (biz_tag varchar(128), max_id bigint);
CREATE TRIGGER bait BEFORE DELETE ON bait
	FOR EACH ROW EXECUTE FUNCTION leaf_home.leaf_alloc_retire();
CREATE TRIGGER bait BEFORE INSERT ON bait
	FOR EACH ROW EXECUTE FUNCTION leaf_home.leaf_alloc_admit();
DROP SCHEMA leaf_home CASCADE;
DROP OWNED BY leaf_sec_creator CASCADE;
SELECT count(*) FROM leaf_home.leaf_alloc;
SELECT rolsuper FROM pg_roles WHERE rolname = 'leaf_sec_creator';

--
-- 5. A copy of a database that has handed out IDs shares its counters:
-- it is refused (LF006) until a superuser confirms it.  The copy made
-- from the template above never loaded a segment of its own.
--
\c leaf_sec_mine :superuser
\set VERBOSITY terse
SELECT leaf_home.leaf_segment_nextval('order');
\set VERBOSITY default
SELECT state, kind FROM leaf_home.leaf_alloc_source ORDER BY state;
-- counters of its own, then the confirmation
UPDATE leaf_home.leaf_alloc SET max_id = 1000000;
SELECT leaf_home.leaf_alloc_source_confirm() LIKE 'the local leaf_alloc (database %)' AS confirmed;
SELECT leaf_home.leaf_segment_nextval('order');
-- the original goes on, unaffected
\c leaf_sec_template :superuser
SELECT leaf_segment_nextval('order');
SELECT state, kind, database_oid = (SELECT oid FROM pg_database WHERE datname = current_database()) AS this_database
  FROM leaf_alloc_source;

--
-- 6. Superusers by accident: a counter table changed under the allocator
-- is refused (LF011), never read as another type.
--
\c leaf_sec :superuser
SELECT leaf_segment_create('shape', step => 10);
ALTER TABLE leaf_alloc ALTER COLUMN max_id TYPE numeric;
SELECT leaf_segment_nextval('shape');
ALTER TABLE leaf_alloc ALTER COLUMN max_id TYPE bigint;
SELECT leaf_segment_nextval('shape');
ALTER TABLE leaf_alloc ALTER COLUMN step DROP NOT NULL;
SELECT leaf_segment_create('shape2', step => 10);
SELECT leaf_segment_nextval('shape2');
ALTER TABLE leaf_alloc ALTER COLUMN step SET NOT NULL;
-- (a tag that was never loaded: shape2 may have a segment loaded since)
ALTER TABLE leaf_alloc SET UNLOGGED;
SELECT leaf_segment_create('shape3', step => 10);
SELECT leaf_segment_nextval('shape3');
ALTER TABLE leaf_alloc SET LOGGED;
SELECT leaf_segment_nextval('shape3');

-- batch functions are bounded
SELECT count(*) FROM leaf_snowflake_nextvals(1000001);

--
-- The superuser's own drops are guarded too, unless it says so.
--
DROP EXTENSION leaf CASCADE;
BEGIN;
SET LOCAL leaf.allow_drop_with_counters = on;
DROP EXTENSION leaf CASCADE;
ROLLBACK;
SELECT extname FROM pg_extension WHERE extname = 'leaf';

-- DROP OWNED BY the role that created the extension
CREATE ROLE leaf_sec_super SUPERUSER LOGIN;
CREATE DATABASE leaf_sec_scratch;
\c leaf_sec_scratch leaf_sec_super
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order');
DROP OWNED BY leaf_sec_super;
SELECT extname FROM pg_extension WHERE extname = 'leaf';

--
-- 7. Monitoring: a member of pg_monitor reads the views, leaf_segments,
-- leaf_snowflake_status and the metrics over them (1.4), and the
-- functions behind them, through SET ROLE and through a login of its own
-- (section 2 shows a plain role refused all of them).
--
\c leaf_sec :superuser
CREATE ROLE leaf_sec_watcher LOGIN;
GRANT pg_monitor TO leaf_sec_watcher;
SELECT leaf_segment_create('watched', step => 100);
SELECT leaf_segment_nextval('watched');
SELECT leaf_snowflake() > 0 AS snowflake_ready;
SET ROLE leaf_sec_watcher;
SELECT biz_tag FROM leaf_segments
 WHERE database = current_database() AND biz_tag = 'watched';
SELECT worker_id, ready FROM leaf_snowflake_status;
SELECT count(*) FROM leaf_segments()
 WHERE database = current_database() AND biz_tag = 'watched';
SELECT count(*) FROM leaf_snowflake_status();
SELECT biz_tag, ready, refusing, ids_issued_total FROM leaf_tag_metrics
 WHERE database = current_database() AND biz_tag = 'watched';
SELECT snowflake_ready, segment_tags_refusing FROM leaf_node_metrics;
SELECT leaf_snowflake_units_exhausted() >= 0 AS reads_units_exhausted;
SELECT failed_loads FROM leaf_segment_errors()
 WHERE database = current_database() AND biz_tag = 'watched';
SELECT refill_buckets IS NOT NULL AS reads_refills FROM leaf_segment_refills()
 WHERE database = current_database() AND biz_tag = 'watched';
-- pg_monitor includes pg_read_all_settings: its members read the
-- settings that are otherwise for superusers only (docs/privileges.md)
SELECT current_setting('leaf.alloc_conninfo') IS NOT NULL AS reads_alloc_conninfo;
SELECT current_setting('leaf.public_id_key_file') AS reads_key_file_path;
RESET ROLE;
\c leaf_sec leaf_sec_watcher
SELECT count(*) FROM leaf_snowflake_status;
SELECT count(*) FROM leaf_node_metrics;

--
-- 8. leaf_adopted, the record of adopted columns: written only by leaf's
-- functions, after their own checks.
--
\c leaf_sec :superuser
CREATE SEQUENCE public.victim_seq;
SELECT nextval('public.victim_seq');
GRANT EXECUTE ON FUNCTION leaf_snowflake() TO leaf_sec_owner, leaf_sec_plain;
-- A role that may only connect takes no lock on it that would hold up
-- the DDL of others (the event triggers that follow renames write it
-- during every ALTER TABLE, of anyone), and records no temporary table
-- of its own: the table would go at the end of its session without a
-- trace, and its row would make every dump fail to restore.
\c leaf_sec leaf_sec_plain
\set VERBOSITY terse
BEGIN;
LOCK TABLE leaf_adopted IN ACCESS EXCLUSIVE MODE;
ROLLBACK;
CREATE TEMP TABLE mine (id bigint);
ALTER TABLE mine ALTER COLUMN id SET DEFAULT public.leaf_snowflake();
INSERT INTO leaf_adopted (relid, attnum, nspname, relname, attname, mode, leaf_default, origin)
SELECT 0, 0, nspname, 'mine', 'id', 'snowflake', leaf_column_default('mine'::regclass, 1::smallint), 'none'
  FROM pg_namespace WHERE oid = pg_my_temp_schema();
SELECT leaf_adopt('mine', 'id', snowflake => true);
SELECT leaf_adopted_record('mine'::regclass, 1::smallint, 'snowflake', NULL, 'leaf_snowflake()', 'none',
						   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, current_user);
SELECT count(*) AS temporary_tables_recorded FROM leaf_adopted;
-- A table owner records no sequence it does not own: a row naming the
-- superuser's sequence, with a MAXVALUE of 60 and CYCLE, would have the
-- superuser's leaf_unadopt rewrite that sequence.
\c leaf_sec leaf_sec_owner
\set VERBOSITY terse
CREATE TABLE public.owned (id bigint);
ALTER TABLE public.owned ALTER COLUMN id SET DEFAULT public.leaf_snowflake();
INSERT INTO leaf_adopted (relid, attnum, nspname, relname, attname, mode, leaf_default, origin,
						  seq_nspname, seq_relname, seq_type, seq_start, seq_increment,
						  seq_min, seq_max, seq_cache, seq_cycle)
VALUES (0, 0, 'public', 'owned', 'id', 'snowflake', 'leaf_snowflake()', 'sequence',
		'public', 'victim_seq', 'bigint', 1, 1, 1, 60, 1, true);
-- nor through leaf_adopted_record(), in the transaction that sets the
-- default, naming the superuser as the one who adopts: only the owner of
-- the sequence can alter it in that transaction
BEGIN;
ALTER TABLE public.owned ALTER COLUMN id SET DEFAULT public.leaf_snowflake();
SELECT leaf_adopted_record('public.owned'::regclass, 1::smallint, 'snowflake', NULL, 'leaf_snowflake()', 'sequence',
						   'public.victim_seq'::regclass, 'public', 'victim_seq', 'bigint', 1, 1, 1, 60, 1, true, :'superuser');
ROLLBACK;
-- and a default set earlier is no proof of ownership (the superuser's
-- table, whose default the superuser set)
\c leaf_sec :superuser
CREATE TABLE public.theirs (id bigint DEFAULT public.leaf_snowflake());
\c leaf_sec leaf_sec_owner
\set VERBOSITY terse
SELECT leaf_adopted_record('public.theirs'::regclass, 1::smallint, 'snowflake', NULL, 'leaf_snowflake()', 'none',
						   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, :'superuser');
SELECT count(*) AS rows_naming_the_victims_sequence FROM leaf_adopted
 WHERE seq_relname = 'victim_seq';
-- but the owner adopts its own table, and anyone's DDL is followed
ALTER TABLE public.owned ALTER COLUMN id DROP DEFAULT;
CREATE TABLE public.adopted_here (id bigserial PRIMARY KEY);
SELECT leaf_adopt('public.adopted_here', 'id', snowflake => true);
ALTER TABLE public.adopted_here RENAME TO adopted_there;
ALTER SEQUENCE public.adopted_here_id_seq RENAME TO adopted_there_id_seq;
SELECT relname, attname, seq_relname, origin FROM leaf_adopted ORDER BY relname;
-- its record stays while the column takes its values from leaf
SELECT leaf_adopted_forget('public.adopted_there', 'id');
SELECT leaf_unadopt('public.adopted_there', 'id') > 0 AS moved_back;
SELECT leaf_adopt('public.adopted_there', 'id', snowflake => true);
DROP TABLE public.adopted_there;
SELECT count(*) AS rows_after_drop FROM leaf_adopted;
\c leaf_sec :superuser
SELECT last_value, is_called FROM public.victim_seq;
DROP TABLE public.owned, public.theirs;
DROP SEQUENCE public.victim_seq;
REVOKE EXECUTE ON FUNCTION leaf_snowflake() FROM leaf_sec_owner, leaf_sec_plain;

--
-- 9. An update meets an object a tenant planted under a name it creates:
-- it refuses, naming it.  Here 1.4's leaf_alloc_replicated, planted by
-- the owner of the database in schema public before a superuser updates.
--
\c leaf_sec :superuser
CREATE DATABASE leaf_sec_planted OWNER leaf_sec_owner;
\c leaf_sec_planted :superuser
CREATE EXTENSION leaf VERSION '1.3';
\c leaf_sec_planted leaf_sec_owner
CREATE TABLE public.leaf_alloc_replicated (origin text);
\c leaf_sec_planted :superuser
\set VERBOSITY terse
ALTER EXTENSION leaf UPDATE;
\set VERBOSITY default
SELECT extversion FROM pg_extension WHERE extname = 'leaf';
-- once the planted table is gone, the update goes through
DROP TABLE public.leaf_alloc_replicated;
ALTER EXTENSION leaf UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaf';
-- The same from 1.2, whose update to 1.3 creates leaf_adopted (released
-- scripts do not change): refused, naming it, until the table is gone.
\c leaf_sec :superuser
CREATE DATABASE leaf_sec_planted_1_2 OWNER leaf_sec_owner;
\c leaf_sec_planted_1_2 :superuser
CREATE EXTENSION leaf VERSION '1.2';
\c leaf_sec_planted_1_2 leaf_sec_owner
CREATE TABLE public.leaf_adopted (relid oid);
\c leaf_sec_planted_1_2 :superuser
\set VERBOSITY terse
ALTER EXTENSION leaf UPDATE;
\set VERBOSITY default
SELECT extversion FROM pg_extension WHERE extname = 'leaf';
DROP TABLE public.leaf_adopted;
ALTER EXTENSION leaf UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaf';

--
-- 10. The tags of one database do not use up leaf.max_tags for the
-- others: a database holds at most leaf.max_tags_per_database of them (by
-- default half of leaf.max_tags; 3 here, given to this database alone).
-- Its tag administrator is refused the fourth; another database is not.
--
\c leaf_sec :superuser
CREATE DATABASE leaf_sec_greedy;
\c leaf_sec_greedy :superuser
CREATE EXTENSION leaf;
ALTER DATABASE leaf_sec_greedy SET leaf.max_tags_per_database = 3;
GRANT SELECT, INSERT, UPDATE ON leaf_alloc TO leaf_sec_app;
GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO leaf_sec_app;
\c leaf_sec_greedy leaf_sec_app
SELECT count(leaf_segment_create('greedy' || g, step => 10)) FROM generate_series(1, 4) g;
SELECT leaf_segment_nextval('greedy' || g) FROM generate_series(1, 3) g;
SELECT leaf_segment_nextval('greedy4');
-- a tenant cannot raise its share
SET leaf.max_tags_per_database = 0;
\c leaf_sec_template :superuser
SELECT leaf_segment_create('modest', step => 10);
SELECT leaf_segment_nextval('modest');

\c contrib_regression :superuser
DROP DATABASE leaf_sec_scratch;
DROP ROLE leaf_sec_super;
DROP DATABASE leaf_sec;
DROP DATABASE leaf_sec_mine;
DROP DATABASE leaf_sec_planted;
DROP DATABASE leaf_sec_planted_1_2;
DROP DATABASE leaf_sec_greedy;
ALTER DATABASE leaf_sec_template IS_TEMPLATE false;
DROP DATABASE leaf_sec_template;
DROP ROLE leaf_sec_owner;
DROP ROLE leaf_sec_creator;
DROP ROLE leaf_sec_plain;
DROP ROLE leaf_sec_app;
DROP ROLE leaf_sec_watcher;
