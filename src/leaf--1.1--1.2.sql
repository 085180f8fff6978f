-- leaf 1.1 -> 1.2 (see CHANGELOG.md)
--
-- Also the tail of leaf--1.2.sql, the install script of 1.2, which is
-- 1.1's install script followed by this file: every statement here must
-- work both on an upgraded 1.1 and during CREATE EXTENSION.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION leaf UPDATE TO '1.2'" to load this file. \quit

--
-- Privileges, as for a sequence: taking IDs needs a grant.
--
-- In 1.1 every role that could connect could take IDs from every tag (and
-- so burn a tag's range, or hold the allocator up), and compute public
-- IDs under the server's key.  From 1.2 these functions need EXECUTE,
-- which the owner of the extension grants:
--
--   GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO app;
--
-- The trigger functions of leaf_alloc are not for anyone to call or to
-- attach to a table of their own.
--
REVOKE ALL ON FUNCTION leaf_segment_nextval(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_segment_nextvals(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_snowflake() FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_snowflake_nextvals(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_public_id(bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_private_id(bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_public_id_text(bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_private_id_text(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_alloc_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_alloc_retire() FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_alloc_admit() FROM PUBLIC;
REVOKE ALL ON FUNCTION leaf_alloc_no_truncate() FROM PUBLIC;

--
-- The functions below reach leaf's tables through the schema the
-- extension is in now, found by OID at each call, never through a schema
-- name fixed at install: after ALTER SCHEMA ... RENAME they still write
-- to leaf's own tables, and a table made under the old name is never
-- touched.  Their search_path is pg_catalog alone (pg_temp last), so no
-- function or operator of anyone else's can stand in for a built-in one.
--
-- The two SECURITY DEFINER trigger functions also check that they fire on
-- leaf_alloc itself, a member of this extension.
--
CREATE OR REPLACE FUNCTION leaf_alloc_retire()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	retired text;
BEGIN
	IF TG_TABLE_NAME <> 'leaf_alloc' OR NOT EXISTS (
		SELECT FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		 WHERE d.classid = 'pg_class'::regclass AND d.objid = TG_RELID
		   AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		   AND e.extname = 'leaf') THEN
		RAISE EXCEPTION 'trigger function % may only fire on table leaf_alloc of extension leaf',
			'leaf_alloc_retire' USING ERRCODE = '42501';
	END IF;
	retired := format('%I.leaf_alloc_retired', TG_TABLE_SCHEMA);
	EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', retired);
	EXECUTE format('INSERT INTO %s AS r (biz_tag, max_id) VALUES ($1, $2) '
				   'ON CONFLICT (biz_tag) DO UPDATE '
				   'SET max_id = greatest(r.max_id, excluded.max_id), retired_at = now()',
				   retired)
		USING OLD.biz_tag, OLD.max_id;
	RETURN OLD;
END
$$;

CREATE OR REPLACE FUNCTION leaf_alloc_admit()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	retired text;
	mark bigint;
BEGIN
	IF TG_TABLE_NAME <> 'leaf_alloc' OR NOT EXISTS (
		SELECT FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		 WHERE d.classid = 'pg_class'::regclass AND d.objid = TG_RELID
		   AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		   AND e.extname = 'leaf') THEN
		RAISE EXCEPTION 'trigger function % may only fire on table leaf_alloc of extension leaf',
			'leaf_alloc_admit' USING ERRCODE = '42501';
	END IF;
	-- what leaf_check_tag() says, in its words (it is not called by name)
	IF NEW.biz_tag = '' THEN
		RAISE EXCEPTION 'biz_tag must not be empty'
			USING ERRCODE = 'LF002';
	END IF;
	IF octet_length(NEW.biz_tag) > 128 THEN
		RAISE EXCEPTION 'biz_tag "%..." is too long', left(NEW.biz_tag, 32)
			USING ERRCODE = 'LF002',
				  DETAIL = format('A biz_tag is at most 128 bytes; this one has %s.',
								  octet_length(NEW.biz_tag));
	END IF;
	retired := format('%I.leaf_alloc_retired', TG_TABLE_SCHEMA);
	EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', retired);
	EXECUTE format('SELECT r.max_id FROM %s r WHERE r.biz_tag = $1', retired)
		INTO mark USING NEW.biz_tag;
	IF mark IS NOT NULL AND NEW.max_id < mark THEN
		RAISE NOTICE 'biz_tag "%" starts at %, where it was when it was deleted',
			NEW.biz_tag, mark
			USING DETAIL = format('The new row asked for max_id %s; IDs below %s may have been handed out already.',
								  NEW.max_id, mark);
		NEW.max_id := mark;
	END IF;
	RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION leaf_segment_create(biz_tag text,
											   step integer DEFAULT 1000,
											   start bigint DEFAULT 1,
											   description text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
BEGIN
	-- before the cast to varchar(128), which counts characters; the
	-- trigger leaf_alloc_admit checks the rest
	IF octet_length($1) > 128 THEN
		RAISE EXCEPTION 'biz_tag "%..." is too long', left($1, 32)
			USING ERRCODE = 'LF002',
				  DETAIL = format('A biz_tag is at most 128 bytes; this one has %s.',
								  octet_length($1));
	END IF;
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('INSERT INTO %I.leaf_alloc (biz_tag, max_id, step, description) '
				   'VALUES ($1, $2, $3, $4)', nsp)
		USING $1, $3, $2, $4;
END
$$;

CREATE OR REPLACE FUNCTION leaf_alloc_source_confirm()
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	src text;
	pending text;
BEGIN
	SELECT format('%I.leaf_alloc_source', n.nspname) INTO STRICT src
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('SELECT description FROM %s WHERE state = ''pending'' FOR UPDATE', src)
		INTO pending;
	IF pending IS NULL THEN
		RAISE EXCEPTION 'no change of allocation database is waiting for confirmation'
			USING ERRCODE = '55000',
				  HINT = 'leaf_alloc_source shows the source this database draws its segments from.';
	END IF;
	EXECUTE format('DELETE FROM %s WHERE state = ''current''', src);
	EXECUTE format('UPDATE %s SET state = ''current'', recorded_at = now() '
				   'WHERE state = ''pending''', src);
	RETURN pending;
END
$$;

--
-- leaf_alloc_source records, in local mode too, which database the
-- counters belong to (database_oid): a copy of the database (CREATE
-- DATABASE ... TEMPLATE, or a dump restored elsewhere) is refused with
-- LF006 until a superuser confirms it, as a change of allocation database
-- is in fleet mode.
--
COMMENT ON TABLE leaf_alloc_source IS
'leaf segment mode: the allocation database segments come from (in local mode, the database itself), and a change waiting for confirmation';
