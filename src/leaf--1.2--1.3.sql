-- leaf 1.2 -> 1.3 (see CHANGELOG.md)
--
-- Also the tail of leaf--1.3.sql, the install script of 1.3, which is
-- 1.2's install script followed by this file: every statement here must
-- work both on an upgraded 1.2 and during CREATE EXTENSION.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION leaf UPDATE TO '1.3'" to load this file. \quit

--
-- Snowflake mode: the way out for a node whose clock ran far ahead and
-- was set right.  Its worker ID cannot serve until the clock passes the
-- mark recorded for it again; this gives the worker ID up in ZooKeeper
-- (keeping its mark, for recycling) and registers a new one, which serves
-- within seconds.  Only for worker IDs from ZooKeeper.
--
CREATE FUNCTION leaf_snowflake_new_worker_id()
RETURNS void
AS 'MODULE_PATHNAME', 'leaf_snowflake_new_worker_id'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION leaf_snowflake_new_worker_id() FROM PUBLIC;

COMMENT ON FUNCTION leaf_snowflake_new_worker_id() IS
'gives up this node''s worker ID from ZooKeeper and registers a new one';

--
-- Snowflake mode: the layout of this node's IDs (leaf.snowflake_layout),
-- what it allows, and when its timestamps run out.  As harmless as
-- leaf_snowflake_decode(), which follows the same layout.
--
CREATE FUNCTION leaf_snowflake_layout(OUT layout text,
									  OUT timestamp_bits integer,
									  OUT worker_bits integer,
									  OUT sequence_bits integer,
									  OUT time_unit_ms integer,
									  OUT max_worker_id integer,
									  OUT ids_per_unit integer,
									  OUT max_id bigint,
									  OUT ends_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'leaf_snowflake_layout'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION leaf_snowflake_layout() IS
'the layout of snowflake IDs on this node (leaf.snowflake_layout)';

--
-- Segment mode: leaf_segment_create() refuses a start that is negative,
-- or so close to the end of bigint that not even one segment of the
-- step fits, max_id + step (1.2 took both without a word; the tag then
-- ran out at its first load).
--
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
	IF $3 < 0 THEN
		RAISE EXCEPTION 'start of biz_tag "%" must not be negative', $1
			USING ERRCODE = '22023',
				  DETAIL = format('start is %s.', $3);
	END IF;
	IF $2 > 0 AND $3 > 9223372036854775807 - $2 THEN
		RAISE EXCEPTION 'start of biz_tag "%" leaves less than one step of IDs below the end of bigint', $1
			USING ERRCODE = '22023',
				  DETAIL = format('start is %s, step %s; the last ID is 9223372036854775807.', $3, $2),
				  HINT = 'Use a smaller start or a smaller step.';
	END IF;
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('INSERT INTO %I.leaf_alloc (biz_tag, max_id, step, description) '
				   'VALUES ($1, $2, $3, $4)', nsp)
		USING $1, $3, $2, $4;
END
$$;


--
-- Adopting a column: leaf_adopt(table, column) moves a serial, bigserial
-- or identity column onto a segment tag (or onto leaf_snowflake()), and
-- leaf_unadopt(table, column) moves it back onto its sequence.
--
-- Nothing here runs as anyone but the caller: every statement is one the
-- caller could run by hand (ALTER TABLE as the table's owner, INSERT and
-- UPDATE on leaf_alloc as a tag admin), so the functions give no role
-- more than it has.  Their search_path is pg_catalog alone (pg_temp
-- last), and they reach leaf's objects through the schema the extension
-- is in now, found by OID at each call.
--

--
-- The cached segments of a tag: raising max_id by hand moves only the
-- segments loaded after the raise.  leaf_segment_discard() drops the ones
-- this database holds, so that the next ID of the tag lies above its
-- max_id.  It needs UPDATE on leaf_alloc (checked in the function), as a
-- raise does.
--
CREATE FUNCTION leaf_segment_discard(biz_tag text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'leaf_segment_discard'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION leaf_segment_discard(text) IS
'drops the segments of a biz_tag that this database holds in shared memory; the next ID comes from a segment loaded at its max_id then';

CREATE FUNCTION leaf_alloc_local()
RETURNS boolean
AS 'MODULE_PATHNAME', 'leaf_alloc_local'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION leaf_alloc_local() IS
'whether segments come from this database''s own leaf_alloc (not from an allocation database: leaf.alloc_conninfo is empty)';

--
-- leaf_adopted: one row per adopted column, with what leaf_unadopt needs
-- to put the column back.
--
-- A column is named by its OID and number (relid, attnum), which survive
-- renames, and by its names, which survive pg_dump and restore.  The
-- names follow renames (the event trigger leaf_adopted_follow), and a row
-- that is restored (or inserted) is tied to the column of that name in
-- the database it arrives in: the trigger leaf_adopted_check sets relid
-- and attnum.  So a restored leaf_adopted never names OIDs of the
-- database it was dumped from.
--
-- origin says what the column took its values from before:
--   'sequence'             a default nextval() of a sequence (serial,
--                          bigserial, or by hand).  The sequence is kept;
--                          leaf_adopt only lowers its MAXVALUE to the
--                          value it had reached (seq_max and seq_cycle
--                          keep what they were), so that code that calls
--                          nextval() on it gets an error rather than IDs
--                          that leaf hands out as well.
--   'identity always'      an identity column.  Dropping the identity
--   'identity by default'  drops its sequence: its definition is kept
--                          here, and leaf_unadopt makes the identity again.
--   'none'                 no default (leaf_adopt(..., allow_no_sequence
--                          => true)).
--
CREATE TABLE leaf_adopted (
	relid		oid NOT NULL,
	attnum		smallint NOT NULL,
	nspname		name NOT NULL,
	relname		name NOT NULL,
	attname		name NOT NULL,
	mode		text NOT NULL,
	biz_tag		varchar(128),
	leaf_default text NOT NULL,
	origin		text NOT NULL,
	seq_relid	oid,
	seq_nspname	name,
	seq_relname	name,
	seq_type	name,
	seq_start	bigint,
	seq_increment bigint,
	seq_min		bigint,
	seq_max		bigint,
	seq_cache	bigint,
	seq_cycle	boolean,
	adopted_at	timestamptz NOT NULL DEFAULT now(),
	adopted_by	name NOT NULL DEFAULT current_user,
	PRIMARY KEY (relid, attnum),
	CONSTRAINT leaf_adopted_mode_check CHECK (mode IN ('segment', 'snowflake')),
	CONSTRAINT leaf_adopted_tag_check CHECK ((mode = 'segment') = (biz_tag IS NOT NULL)),
	CONSTRAINT leaf_adopted_origin_check
		CHECK (origin IN ('sequence', 'identity always', 'identity by default', 'none')),
	CONSTRAINT leaf_adopted_sequence_check
		CHECK ((origin = 'none') = (seq_relname IS NULL)
			   AND (origin = 'sequence') = (seq_relid IS NOT NULL))
);

COMMENT ON TABLE leaf_adopted IS
'leaf: columns moved onto leaf by leaf_adopt, and what leaf_unadopt needs to move them back';

-- rows survive pg_dump and restore
SELECT pg_catalog.pg_extension_config_dump('leaf_adopted', '');

-- Everyone may read it (it holds catalog facts, no values of any table).
-- A row is written by the owner of its table (leaf_adopt, leaf_unadopt),
-- or by anyone to keep its names true (the event trigger), as the trigger
-- leaf_adopted_check enforces.
REVOKE ALL ON leaf_adopted FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON leaf_adopted TO PUBLIC;
GRANT UPDATE (nspname, relname, attname, seq_nspname, seq_relname) ON leaf_adopted TO PUBLIC;

--
-- The default of a column as leaf compares it: pg_get_expr() with leaf's
-- schema on the search_path (so that leaf's functions appear by their
-- name alone, whatever the schema is called) and standard conforming
-- strings.
--
CREATE FUNCTION leaf_column_default(relid oid, attnum smallint)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
DECLARE
	nsp name;
	expr text;
BEGIN
	SELECT n.nspname INTO nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	-- the function's SET clause puts the search_path back on return
	PERFORM set_config('search_path', format('pg_catalog, %I, pg_temp', nsp), true);
	SELECT pg_get_expr(d.adbin, d.adrelid) INTO expr
	  FROM pg_attrdef d
	 WHERE d.adrelid = $1 AND d.adnum = $2;
	RETURN expr;
END
$$;

COMMENT ON FUNCTION leaf_column_default(oid, smallint) IS
'leaf: the default of a column, as leaf_adopt records and compares it';

--
-- What may be written to leaf_adopted, by whom.
--
CREATE FUNCTION leaf_adopted_check()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	live record;
	dflt text;
	seq oid;
BEGIN
	IF TG_OP = 'DELETE' THEN
		-- the owner of the table forgets its adoption; a row whose table
		-- is gone may be deleted by anyone
		SELECT c.relowner INTO live FROM pg_class c WHERE c.oid = OLD.relid;
		IF FOUND AND NOT pg_has_role(live.relowner, 'USAGE') THEN
			RAISE EXCEPTION 'permission denied to forget the adoption of column %.%.%',
				OLD.nspname, OLD.relname, OLD.attname
				USING ERRCODE = '42501',
					  DETAIL = 'Only the owner of an adopted table may delete its row of leaf_adopted.';
		END IF;
		RETURN OLD;
	END IF;

	IF TG_OP = 'UPDATE' AND current_setting('is_superuser') <> 'on' THEN
		-- others may only make the names true again (after a rename)
		IF (NEW.relid, NEW.attnum, NEW.mode, NEW.biz_tag, NEW.leaf_default, NEW.origin,
			NEW.seq_relid, NEW.seq_type, NEW.seq_start, NEW.seq_increment, NEW.seq_min,
			NEW.seq_max, NEW.seq_cache, NEW.seq_cycle, NEW.adopted_at, NEW.adopted_by)
		   IS DISTINCT FROM
		   (OLD.relid, OLD.attnum, OLD.mode, OLD.biz_tag, OLD.leaf_default, OLD.origin,
			OLD.seq_relid, OLD.seq_type, OLD.seq_start, OLD.seq_increment, OLD.seq_min,
			OLD.seq_max, OLD.seq_cache, OLD.seq_cycle, OLD.adopted_at, OLD.adopted_by) THEN
			RAISE EXCEPTION 'only the names in leaf_adopted may be updated'
				USING ERRCODE = '42501';
		END IF;
		IF NOT EXISTS (
			SELECT FROM pg_class c
			  JOIN pg_namespace n ON n.oid = c.relnamespace
			  JOIN pg_attribute a ON a.attrelid = c.oid
			 WHERE c.oid = NEW.relid AND a.attnum = NEW.attnum
			   AND n.nspname = NEW.nspname AND c.relname = NEW.relname
			   AND a.attname = NEW.attname)
		   OR (NEW.seq_relid IS NOT NULL AND NOT EXISTS (
			SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			 WHERE c.oid = NEW.seq_relid
			   AND n.nspname = NEW.seq_nspname AND c.relname = NEW.seq_relname)) THEN
			RAISE EXCEPTION 'the names in leaf_adopted may only be set to those the column and its sequence have'
				USING ERRCODE = '42501';
		END IF;
		RETURN NEW;
	END IF;

	-- a new row (leaf_adopt, or a restore): tie it to the column of that
	-- name in this database, which the caller must own
	SELECT c.oid, a.attnum, c.relowner INTO live
	  FROM pg_namespace n
	  JOIN pg_class c ON c.relnamespace = n.oid
	  JOIN pg_attribute a ON a.attrelid = c.oid
	 WHERE n.nspname = NEW.nspname AND c.relname = NEW.relname
	   AND a.attname = NEW.attname AND a.attnum > 0 AND NOT a.attisdropped
	   AND c.relkind = 'r';
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no column %.%.% to record an adoption for',
			quote_ident(NEW.nspname), quote_ident(NEW.relname), quote_ident(NEW.attname)
			USING ERRCODE = '42703';
	END IF;
	IF NOT pg_has_role(live.relowner, 'USAGE') THEN
		RAISE EXCEPTION 'must be owner of table %', live.oid::regclass
			USING ERRCODE = '42501';
	END IF;
	EXECUTE format('SELECT %I.leaf_column_default($1, $2)', TG_TABLE_SCHEMA)
		INTO dflt USING live.oid, live.attnum;
	IF dflt IS DISTINCT FROM NEW.leaf_default THEN
		RAISE EXCEPTION 'column %.%.% does not take its values from leaf as recorded',
			quote_ident(NEW.nspname), quote_ident(NEW.relname), quote_ident(NEW.attname)
			USING ERRCODE = '55000',
				  DETAIL = format('Its default is %s, not %s.',
								  coalesce(dflt, 'none'), NEW.leaf_default);
	END IF;
	NEW.relid := live.oid;
	NEW.attnum := live.attnum;
	IF NEW.origin = 'sequence' THEN
		SELECT c.oid INTO seq
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = NEW.seq_nspname AND c.relname = NEW.seq_relname
		   AND c.relkind = 'S';
		IF NOT FOUND THEN
			RAISE EXCEPTION 'no sequence %.% for the adoption of column %.%.%',
				quote_ident(NEW.seq_nspname), quote_ident(NEW.seq_relname),
				quote_ident(NEW.nspname), quote_ident(NEW.relname), quote_ident(NEW.attname)
				USING ERRCODE = '42P01';
		END IF;
		NEW.seq_relid := seq;
	ELSE
		NEW.seq_relid := NULL;
	END IF;
	RETURN NEW;
END
$$;

REVOKE ALL ON FUNCTION leaf_adopted_check() FROM PUBLIC;

CREATE TRIGGER leaf_adopted_check
	BEFORE INSERT OR UPDATE OR DELETE ON leaf_adopted
	FOR EACH ROW EXECUTE FUNCTION @extschema@.leaf_adopted_check();

--
-- leaf_adopted follows its columns: a rename (of the table, the column,
-- its schema or the sequence) renames them in leaf_adopted too, so that
-- a dump names them as they are; a dropped table or column takes its
-- row with it.  A failure here never fails the user's command: it is
-- reported as a WARNING.
--
CREATE FUNCTION leaf_adopted_follow()
RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	adopted text;
BEGIN
	SELECT format('%I.leaf_adopted', n.nspname) INTO adopted
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	IF adopted IS NULL THEN
		RETURN;
	END IF;
	BEGIN
		IF TG_EVENT = 'sql_drop' THEN
			EXECUTE format(
				'DELETE FROM %s a USING pg_event_trigger_dropped_objects() o '
				'WHERE o.classid = ''pg_class''::regclass AND o.objid = a.relid '
				'  AND o.objsubid IN (0, a.attnum)', adopted);
		ELSE
			EXECUTE format(
				'UPDATE %s a SET nspname = n.nspname, relname = c.relname, attname = t.attname '
				'  FROM pg_class c '
				'  JOIN pg_namespace n ON n.oid = c.relnamespace '
				'  JOIN pg_attribute t ON t.attrelid = c.oid '
				' WHERE c.oid = a.relid AND t.attnum = a.attnum '
				'   AND (a.nspname, a.relname, a.attname) IS DISTINCT FROM (n.nspname, c.relname, t.attname)',
				adopted);
			EXECUTE format(
				'UPDATE %s a SET seq_nspname = n.nspname, seq_relname = c.relname '
				'  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace '
				' WHERE c.oid = a.seq_relid '
				'   AND (a.seq_nspname, a.seq_relname) IS DISTINCT FROM (n.nspname, c.relname)',
				adopted);
		END IF;
	EXCEPTION WHEN OTHERS THEN
		RAISE WARNING 'leaf_adopted could not follow this command: %', SQLERRM;
	END;
END
$$;

REVOKE ALL ON FUNCTION leaf_adopted_follow() FROM PUBLIC;

CREATE EVENT TRIGGER leaf_adopted_follow_renames ON ddl_command_end
	WHEN TAG IN ('ALTER TABLE', 'ALTER SEQUENCE', 'ALTER SCHEMA')
	EXECUTE FUNCTION @extschema@.leaf_adopted_follow();

CREATE EVENT TRIGGER leaf_adopted_follow_drops ON sql_drop
	EXECUTE FUNCTION @extschema@.leaf_adopted_follow();

--
-- What leaf_adopt and leaf_unadopt check about the table before they
-- lock it: the transaction, the kind of table, its owner, the column.
-- Returns the column's names, number and type.
--
CREATE FUNCTION leaf_adopt_target(tbl regclass, col name, fn text,
								  OUT nspname name, OUT relname name,
								  OUT attname name, OUT attnum smallint,
								  OUT atttypid oid)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
BEGIN
	-- Under REPEATABLE READ or SERIALIZABLE every statement sees the
	-- snapshot of the transaction's first one, from before the lock:
	-- max() of the column would miss rows inserted since.
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION '% must run in a READ COMMITTED transaction', fn
			USING ERRCODE = '25000',
				  DETAIL = format('This transaction is %s: its snapshot may be older than the lock on the table, and miss the rows inserted before the lock.',
								  upper(current_setting('transaction_isolation'))),
				  HINT = 'Call it in a transaction of its own, or in one begun with ISOLATION LEVEL READ COMMITTED.';
	END IF;

	SELECT cl.relkind, cl.relpersistence, cl.relispartition, cl.relowner,
		   n.nspname, cl.relname
	  INTO c
	  FROM pg_class cl JOIN pg_namespace n ON n.oid = cl.relnamespace
	 WHERE cl.oid = tbl;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid
			USING ERRCODE = '42P01';
	END IF;
	IF c.relkind = 'p' THEN
		RAISE EXCEPTION '% does not work on partitioned table %', fn, tbl
			USING ERRCODE = '0A000',
				  DETAIL = 'Each partition has a default of its own, and rows of one partition could move to another.';
	END IF;
	IF c.relispartition THEN
		RAISE EXCEPTION '% does not work on partition %', fn, tbl
			USING ERRCODE = '0A000',
				  DETAIL = 'Rows of one partition can move to another, whose default leaf_adopt would not see.';
	END IF;
	IF c.relkind <> 'r' THEN
		RAISE EXCEPTION '"%" is not a table', tbl
			USING ERRCODE = '42809';
	END IF;
	IF c.relpersistence = 't' THEN
		RAISE EXCEPTION '% does not work on temporary table %', fn, tbl
			USING ERRCODE = '0A000';
	END IF;
	IF EXISTS (SELECT FROM pg_inherits i WHERE i.inhrelid = tbl OR i.inhparent = tbl) THEN
		RAISE EXCEPTION '% does not work on table %, which has inheritance parents or children', fn, tbl
			USING ERRCODE = '0A000',
				  DETAIL = 'A change of the default of a parent would reach its children too.';
	END IF;
	-- as for ALTER TABLE: the owner, or a member of the owning role
	IF NOT pg_has_role(c.relowner, 'USAGE') THEN
		RAISE EXCEPTION 'must be owner of table %', tbl
			USING ERRCODE = '42501',
				  DETAIL = format('%s changes the default of a column, which only the owner of the table may do.', fn);
	END IF;

	SELECT a.attname, a.attnum, a.atttypid INTO attname, attnum, atttypid
	  FROM pg_attribute a
	 WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0
	   AND NOT a.attisdropped;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'column "%" of relation "%" does not exist', col, c.relname
			USING ERRCODE = '42703';
	END IF;
	nspname := c.nspname;
	relname := c.relname;
END
$$;

COMMENT ON FUNCTION leaf_adopt_target(regclass, name, text) IS
'leaf: what leaf_adopt and leaf_unadopt check about a table before they lock it';

--
-- leaf_adopt(table, column): move a serial, bigserial or identity column
-- onto a segment tag (or onto leaf_snowflake()).  See doc-drafts/adopt.md.
--
CREATE FUNCTION leaf_adopt(tbl regclass, col name,
						   biz_tag text DEFAULT NULL,
						   step integer DEFAULT 1000,
						   snowflake boolean DEFAULT false,
						   allow_no_sequence boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
	nsp name;					-- leaf's schema
	t record;					-- the column (leaf_adopt_target)
	typmax bigint;
	fn regprocedure;			-- the function of the new default
	new_default text;
	missing text;
	adopted_default text;
	attrdef oid;
	ident "char";
	seq oid;
	s_type name;				-- the sequence's definition
	s_start bigint;
	s_increment bigint;
	s_min bigint;
	s_max bigint;
	s_cache bigint;
	s_cycle boolean;
	s_nspname name;
	s_relname name;
	seq_last bigint;
	clamp bigint;
	origin text;
	colmax bigint;
	start_above bigint;
	tag text;
	tag_max bigint;
	tag_step integer;
	probe bigint;
	local boolean;
	shared text;
	rec record;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('SELECT * FROM %I.leaf_adopt_target($1, $2, $3)', nsp)
		INTO t USING tbl, col, 'leaf_adopt';

	--
	-- Before the lock: what the caller may do, and whether the column's
	-- type can take the IDs.
	--
	typmax := CASE t.atttypid
		WHEN 'int2'::regtype THEN 32767
		WHEN 'int4'::regtype THEN 2147483647
		WHEN 'int8'::regtype THEN 9223372036854775807 END;
	IF typmax IS NULL THEN
		RAISE EXCEPTION 'column "%" of table % is of type %, not smallint, integer or bigint',
			t.attname, tbl, format_type(t.atttypid, NULL)
			USING ERRCODE = '42804',
				  DETAIL = 'leaf hands out bigint IDs.';
	END IF;
	IF leaf_adopt.snowflake AND t.atttypid <> 'int8'::regtype THEN
		RAISE EXCEPTION 'column "%" of table % is of type %: snowflake IDs need bigint',
			t.attname, tbl, format_type(t.atttypid, NULL)
			USING ERRCODE = '42804',
				  DETAIL = 'A snowflake ID is a 64-bit number; those of today are above 2^62.',
				  HINT = 'ALTER TABLE ... ALTER COLUMN ... TYPE bigint first, or adopt the column onto a segment tag.';
	END IF;
	IF NOT leaf_adopt.snowflake AND (leaf_adopt.step IS NULL OR leaf_adopt.step <= 0) THEN
		RAISE EXCEPTION 'step must be positive'
			USING ERRCODE = '22023';
	END IF;

	IF leaf_adopt.snowflake THEN
		fn := format('%I.leaf_snowflake()', nsp)::regprocedure;
		new_default := format('%I.leaf_snowflake()', nsp);
	ELSE
		tag := coalesce(leaf_adopt.biz_tag, format('%s.%s.%s', t.nspname, t.relname, t.attname));
		EXECUTE format('SELECT %I.leaf_check_tag($1)', nsp) USING tag;
		fn := format('%I.leaf_segment_nextval(text)', nsp)::regprocedure;
		new_default := format('%I.leaf_segment_nextval(%L::text)', nsp, tag);
		IF NOT (has_table_privilege(format('%I.leaf_alloc', nsp), 'SELECT')
				AND has_table_privilege(format('%I.leaf_alloc', nsp), 'INSERT')
				AND has_table_privilege(format('%I.leaf_alloc', nsp), 'UPDATE')) THEN
			RAISE EXCEPTION 'permission denied to create or raise biz_tag "%"', tag
				USING ERRCODE = '42501',
					  DETAIL = 'leaf_adopt writes the row of the tag in leaf_alloc: it needs SELECT, INSERT and UPDATE on leaf_alloc, as creating a tag or raising its max_id by hand does.',
					  HINT = 'Ask the owner of the extension to GRANT SELECT, INSERT, UPDATE ON leaf_alloc to you, or to adopt the column.';
		END IF;
		EXECUTE format('SELECT %I.leaf_alloc_local()', nsp) INTO local;
		IF NOT local THEN
			RAISE EXCEPTION 'leaf_adopt cannot raise biz_tag "%" in the allocation database', tag
				USING ERRCODE = '0A000',
					  DETAIL = 'Segments come from the allocation database (leaf.alloc_conninfo is set), whose leaf_alloc leaf_adopt does not write.',
					  HINT = 'Adopt the column onto leaf_snowflake() (snowflake => true), or set the default by hand after raising max_id of the tag in the allocation database above every value of the column.';
		END IF;
	END IF;

	-- the caller will take IDs through the default, and so will every role
	-- that may insert into the table
	IF NOT has_function_privilege(fn::oid, 'EXECUTE') THEN
		RAISE EXCEPTION 'permission denied for function %', fn
			USING ERRCODE = '42501',
				  DETAIL = 'The new default of the column calls it.';
	END IF;
	SELECT string_agg(CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END,
					  ', ' ORDER BY r.rolname NULLS FIRST)
	  INTO missing
	  FROM (SELECT DISTINCT x.grantee
			  FROM (SELECT (aclexplode(coalesce(c.relacl, acldefault('r', c.relowner)))).*
					  FROM pg_class c WHERE c.oid = tbl
					UNION ALL
					SELECT (aclexplode(a.attacl)).*
					  FROM pg_attribute a
					 WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
					   AND a.attacl IS NOT NULL) x
			 WHERE x.privilege_type = 'INSERT') g
	  LEFT JOIN pg_roles r ON r.oid = g.grantee
	 WHERE NOT has_function_privilege(CASE WHEN g.grantee = 0 THEN 'public' ELSE r.rolname END::name,
									  fn::oid, 'EXECUTE');
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'roles that may insert into table % may not execute %', tbl, fn
			USING ERRCODE = '42501',
				  DETAIL = format('Their inserts would fail once the default of column "%s" calls it: %s.',
								  t.attname, missing),
				  HINT = format('GRANT EXECUTE ON FUNCTION %s TO them first, as a sequence needs USAGE.', fn);
	END IF;

	--
	-- The lock.  ALTER TABLE ... SET DEFAULT and ... DROP IDENTITY take
	-- ACCESS EXCLUSIVE themselves; taking it first, rather than a weaker
	-- lock and then that one, means no deadlock with a transaction that
	-- reads the table and then writes it.  Inserts wait from here to the
	-- end of the transaction; lock_timeout limits the wait for the lock.
	--
	EXECUTE format('LOCK TABLE ONLY %s IN ACCESS EXCLUSIVE MODE', tbl);

	-- everything below reads the catalogs and the table as they are now
	EXECUTE format('SELECT * FROM %I.leaf_adopt_target($1, $2, $3)', nsp)
		INTO t USING tbl, col, 'leaf_adopt';
	IF row_security_active(tbl) THEN
		RAISE EXCEPTION 'row-level security of table % applies to you', tbl
			USING ERRCODE = '42501',
				  DETAIL = 'leaf_adopt must see every row to start above the largest value of the column.',
				  HINT = 'Call it as a role with BYPASSRLS, or while the table does not FORCE ROW LEVEL SECURITY.';
	END IF;

	-- rows of dropped tables (when no event trigger removed them)
	EXECUTE format('DELETE FROM %I.leaf_adopted a '
				   'WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = a.relid)', nsp);
	EXECUTE format('SELECT * FROM %I.leaf_adopted WHERE relid = $1 AND attnum = $2', nsp)
		INTO rec USING tbl, t.attnum;
	IF rec.relid IS NOT NULL THEN
		RAISE EXCEPTION 'column "%" of table % is adopted already', t.attname, tbl
			USING ERRCODE = '42710',
				  DETAIL = format('leaf_adopt moved it onto %s.',
								  CASE rec.mode WHEN 'segment' THEN format('biz_tag "%s"', rec.biz_tag)
												ELSE 'leaf_snowflake()' END),
				  HINT = 'leaf_unadopt() moves it back.';
	END IF;

	SELECT d.oid INTO attrdef FROM pg_attrdef d WHERE d.adrelid = tbl AND d.adnum = t.attnum;
	SELECT a.attidentity, a.attgenerated = 's' AS generated INTO rec
	  FROM pg_attribute a WHERE a.attrelid = tbl AND a.attnum = t.attnum;
	ident := rec.attidentity;
	IF rec.generated THEN
		RAISE EXCEPTION 'column "%" of table % is a generated column', t.attname, tbl
			USING ERRCODE = '55000';
	END IF;
	IF attrdef IS NOT NULL AND EXISTS (
		SELECT FROM pg_depend d
		 WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = attrdef
		   AND d.refclassid = 'pg_proc'::regclass
		   AND d.refobjid IN (format('%I.leaf_segment_nextval(text)', nsp)::regprocedure,
							  format('%I.leaf_snowflake()', nsp)::regprocedure)) THEN
		RAISE EXCEPTION 'column "%" of table % takes its values from leaf already', t.attname, tbl
			USING ERRCODE = '42710',
				  DETAIL = format('Its default is %s.', pg_get_expr((SELECT adbin FROM pg_attrdef WHERE oid = attrdef), tbl));
	END IF;

	IF ident IN ('a', 'd') THEN
		origin := CASE ident WHEN 'a' THEN 'identity always' ELSE 'identity by default' END;
		SELECT d.objid INTO STRICT seq
		  FROM pg_depend d
		 WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
		   AND d.refobjid = tbl AND d.refobjsubid = t.attnum AND d.deptype = 'i';
	ELSIF attrdef IS NOT NULL THEN
		origin := 'sequence';
		SELECT min(d.refobjid) INTO seq
		  FROM pg_depend d JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'
		 WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = attrdef
		   AND d.refclassid = 'pg_class'::regclass;
		IF seq IS NULL OR pg_get_expr((SELECT adbin FROM pg_attrdef WHERE oid = attrdef), tbl)
						  <> format('nextval(%L::regclass)', seq::regclass::text) THEN
			RAISE EXCEPTION 'the default of column "%" of table % is not nextval() of a sequence',
				t.attname, tbl
				USING ERRCODE = '55000',
					  DETAIL = format('Its default is %s.', pg_get_expr((SELECT adbin FROM pg_attrdef WHERE oid = attrdef), tbl)),
					  HINT = 'leaf_adopt replaces a serial default or an identity. To adopt a column with another default, drop the default first and pass allow_no_sequence => true.';
		END IF;
		SELECT string_agg(format('column "%s" of table %s', a.attname, ad.adrelid::regclass), ', ')
		  INTO shared
		  FROM pg_depend d
		  JOIN pg_attrdef ad ON ad.oid = d.objid
		  JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
		 WHERE d.classid = 'pg_attrdef'::regclass AND d.refclassid = 'pg_class'::regclass
		   AND d.refobjid = seq AND d.objid <> attrdef;
		IF shared IS NOT NULL THEN
			RAISE EXCEPTION 'sequence % is the default of other columns too', seq::regclass
				USING ERRCODE = '0A000',
					  DETAIL = format('It is the default of %s.', shared),
					  HINT = 'leaf_adopt stops the sequence, which those columns would need.';
		END IF;
		IF NOT pg_has_role((SELECT relowner FROM pg_class WHERE oid = seq), 'USAGE') THEN
			RAISE EXCEPTION 'must be owner of sequence %', seq::regclass
				USING ERRCODE = '42501',
					  DETAIL = 'leaf_adopt lowers its MAXVALUE, so that nextval() hands out no ID that leaf hands out too.';
		END IF;
	ELSIF leaf_adopt.allow_no_sequence THEN
		origin := 'none';
	ELSE
		RAISE EXCEPTION 'column "%" of table % takes no values from a sequence', t.attname, tbl
			USING ERRCODE = '55000',
				  DETAIL = 'It has no default and is no identity column.',
				  HINT = 'Pass allow_no_sequence => true to adopt it anyway; leaf then starts above its largest value.';
	END IF;

	IF seq IS NOT NULL THEN
		SELECT format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
			   s.seqcache, s.seqcycle, n.nspname, c.relname
		  INTO STRICT s_type, s_start, s_increment, s_min, s_max, s_cache, s_cycle, s_nspname, s_relname
		  FROM pg_sequence s
		  JOIN pg_class c ON c.oid = s.seqrelid
		  JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE s.seqrelid = seq;
		IF s_increment < 0 THEN
			RAISE EXCEPTION 'sequence % counts down', seq::regclass
				USING ERRCODE = '0A000',
					  DETAIL = 'leaf hands out increasing IDs.';
		END IF;
		-- The sequence's last value covers the values that sessions hold
		-- in their caches (CACHE > 1): nextval() writes the end of what a
		-- session takes into the sequence before handing out any of it.
		EXECUTE format('SELECT last_value FROM %s', seq::regclass) INTO seq_last;
	END IF;

	--
	-- Where leaf starts: above every value of the column, and above every
	-- value the sequence has handed out or may still hand out.
	--
	EXECUTE format('SELECT max(%I) FROM ONLY %s', t.attname, tbl) INTO colmax;
	IF origin = 'sequence' THEN
		-- what nextval() may still return once MAXVALUE is lowered
		clamp := greatest(seq_last, s_start, s_min + 1);
	END IF;
	start_above := greatest(colmax, seq_last, clamp, 0);

	IF leaf_adopt.snowflake THEN
		-- the IDs of this server only increase: all later ones lie above
		EXECUTE format('SELECT %I.leaf_snowflake()', nsp) INTO probe;
		IF probe <= start_above THEN
			RAISE EXCEPTION 'snowflake IDs are below the values of column "%" of table %', t.attname, tbl
				USING ERRCODE = '55000',
					  DETAIL = format('The next snowflake ID is about %s; the column or its sequence reached %s.', probe, start_above);
		END IF;
	ELSE
		-- create the tag at start_above + 1, or raise it there; the row stays
		-- locked to the end of the transaction, so no segment is loaded
		-- below it meanwhile
		EXECUTE format('INSERT INTO %I.leaf_alloc AS a (biz_tag, max_id, step, description) '
					   'VALUES ($1, $2, $3, $4) '
					   'ON CONFLICT (biz_tag) DO UPDATE SET max_id = greatest(a.max_id, excluded.max_id) '
					   'RETURNING a.max_id, a.step', nsp)
			INTO tag_max, tag_step
			USING tag, start_above + 1, leaf_adopt.step,
				  format('leaf_adopt of column %s of table %s', t.attname, tbl);
		-- a segment may hold up to 1,000,000 IDs (the dynamic step)
		IF tag_max - 1 > typmax - greatest(tag_step, 1000000) THEN
			RAISE EXCEPTION 'IDs of biz_tag "%" could pass the range of column "%" of table % (%)',
				tag, t.attname, tbl, format_type(t.atttypid, NULL)
				USING ERRCODE = '22003',
					  DETAIL = format('The tag would start at %s, and one segment may hold up to %s IDs; the column holds values up to %s.',
									  tag_max, greatest(tag_step, 1000000), typmax),
					  HINT = 'ALTER TABLE ... ALTER COLUMN ... TYPE bigint first.';
		END IF;
		-- segments of the tag cached below the new max_id are dropped
		EXECUTE format('SELECT %I.leaf_segment_discard($1)', nsp) USING tag;
	END IF;

	--
	-- The column: stop the sequence (or drop the identity, which drops its
	-- sequence), then the new default.
	--
	IF origin = 'sequence' THEN
		EXECUTE format('ALTER SEQUENCE %s MAXVALUE %s NO CYCLE', seq::regclass, clamp);
	ELSIF origin LIKE 'identity%' THEN
		EXECUTE format('ALTER TABLE ONLY %s ALTER COLUMN %I DROP IDENTITY', tbl, t.attname);
	END IF;
	EXECUTE format('ALTER TABLE ONLY %s ALTER COLUMN %I SET DEFAULT %s', tbl, t.attname, new_default);

	EXECUTE format('SELECT %I.leaf_column_default($1, $2)', nsp)
		INTO adopted_default USING tbl, t.attnum;
	EXECUTE format('INSERT INTO %I.leaf_adopted (relid, attnum, nspname, relname, attname, mode, '
				   'biz_tag, leaf_default, origin, seq_relid, seq_nspname, seq_relname, seq_type, '
				   'seq_start, seq_increment, seq_min, seq_max, seq_cache, seq_cycle) '
				   'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)', nsp)
		USING tbl::oid, t.attnum, t.nspname, t.relname, t.attname,
			  CASE WHEN leaf_adopt.snowflake THEN 'snowflake' ELSE 'segment' END,
			  tag, adopted_default, origin,
			  CASE WHEN origin = 'sequence' THEN seq END,
			  s_nspname, s_relname, s_type, s_start, s_increment, s_min, s_max, s_cache, s_cycle;
	RETURN adopted_default;
END
$$;

COMMENT ON FUNCTION leaf_adopt(regclass, name, text, integer, boolean, boolean) IS
'moves a serial, bigserial or identity column onto a biz_tag above its values (or onto leaf_snowflake()); leaf_unadopt moves it back';

--
-- leaf_unadopt(table, column): the column takes its values from its
-- sequence again, which continues above every ID leaf handed out.
-- Returns the next value of the sequence (NULL for a column adopted
-- without one, which is left with no default).
--
CREATE FUNCTION leaf_unadopt(tbl regclass, col name)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
	nsp name;
	t record;
	rec record;
	current_default text;
	bound bigint;
	colmax bigint;
	tag_max bigint;
	seq oid;
	seq_last bigint;
	next_value bigint;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('SELECT * FROM %I.leaf_adopt_target($1, $2, $3)', nsp)
		INTO t USING tbl, col, 'leaf_unadopt';

	EXECUTE format('SELECT * FROM %I.leaf_adopted WHERE relid = $1 AND attnum = $2', nsp)
		INTO rec USING tbl, t.attnum;
	IF rec.relid IS NULL THEN
		RAISE EXCEPTION 'column "%" of table % is not adopted', t.attname, tbl
			USING ERRCODE = '42704',
				  DETAIL = 'leaf_adopted has no row for it.';
	END IF;
	IF rec.mode = 'segment' AND NOT has_table_privilege(format('%I.leaf_alloc', nsp), 'SELECT') THEN
		RAISE EXCEPTION 'permission denied to read max_id of biz_tag "%"', rec.biz_tag
			USING ERRCODE = '42501',
				  DETAIL = 'leaf_unadopt raises the sequence above max_id of the tag: it needs SELECT on leaf_alloc.';
	END IF;

	-- the same lock as leaf_adopt, for the same reasons
	EXECUTE format('LOCK TABLE ONLY %s IN ACCESS EXCLUSIVE MODE', tbl);

	EXECUTE format('SELECT * FROM %I.leaf_adopt_target($1, $2, $3)', nsp)
		INTO t USING tbl, col, 'leaf_unadopt';
	IF row_security_active(tbl) THEN
		RAISE EXCEPTION 'row-level security of table % applies to you', tbl
			USING ERRCODE = '42501',
				  DETAIL = 'leaf_unadopt must see every row to raise the sequence above the largest value of the column.',
				  HINT = 'Call it as a role with BYPASSRLS, or while the table does not FORCE ROW LEVEL SECURITY.';
	END IF;
	EXECUTE format('SELECT * FROM %I.leaf_adopted WHERE relid = $1 AND attnum = $2', nsp)
		INTO rec USING tbl, t.attnum;
	IF rec.relid IS NULL THEN
		RAISE EXCEPTION 'column "%" of table % is not adopted', t.attname, tbl
			USING ERRCODE = '42704',
				  DETAIL = 'leaf_adopted has no row for it.';
	END IF;
	EXECUTE format('SELECT %I.leaf_column_default($1, $2)', nsp)
		INTO current_default USING tbl, t.attnum;
	IF current_default IS DISTINCT FROM rec.leaf_default THEN
		RAISE EXCEPTION 'the default of column "%" of table % is no longer the one leaf_adopt set', t.attname, tbl
			USING ERRCODE = '55000',
				  DETAIL = format('It is %s; leaf_adopt set %s.', coalesce(current_default, 'none'), rec.leaf_default),
				  HINT = 'Set the default back, or, if the column was moved back by hand, DELETE its row from leaf_adopted.';
	END IF;

	--
	-- Above every ID handed out: for a tag, everything it handed out lies
	-- below its max_id; snowflake IDs only increase, so a new one lies
	-- above all earlier ones.  And above every value of the column.
	--
	EXECUTE format('SELECT max(%I) FROM ONLY %s', t.attname, tbl) INTO colmax;
	IF rec.mode = 'segment' THEN
		EXECUTE format('SELECT max_id FROM %I.leaf_alloc WHERE biz_tag = $1', nsp)
			INTO tag_max USING rec.biz_tag;
		IF tag_max IS NULL THEN
			RAISE EXCEPTION 'biz_tag "%" does not exist', rec.biz_tag
				USING ERRCODE = 'LF001',
					  DETAIL = 'leaf_unadopt raises the sequence above max_id of the tag, and the tag was deleted since.',
					  HINT = 'Insert the tag again (it starts at the mark it was deleted at, see leaf_alloc_retired), then call leaf_unadopt.';
		END IF;
		bound := greatest(colmax, tag_max - 1);
	ELSE
		EXECUTE format('SELECT %I.leaf_snowflake()', nsp) INTO bound;
		bound := greatest(colmax, bound);
	END IF;

	IF rec.origin = 'none' THEN
		EXECUTE format('ALTER TABLE ONLY %s ALTER COLUMN %I DROP DEFAULT', tbl, t.attname);
	ELSIF rec.origin = 'sequence' THEN
		seq := rec.seq_relid;
		IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = seq AND c.relkind = 'S') THEN
			RAISE EXCEPTION 'sequence %.% of column "%" of table % does not exist any more',
				quote_ident(rec.seq_nspname), quote_ident(rec.seq_relname), t.attname, tbl
				USING ERRCODE = '42P01',
					  HINT = 'Create it again, then call leaf_unadopt.';
		END IF;
		IF bound >= rec.seq_max THEN
			RAISE EXCEPTION 'sequence % cannot go above the IDs leaf handed out', seq::regclass
				USING ERRCODE = '2200H',
					  DETAIL = format('Its MAXVALUE was %s; the IDs reached %s.', rec.seq_max, bound),
					  HINT = 'Raise its MAXVALUE (ALTER SEQUENCE ... AS bigint MAXVALUE ...), then call leaf_unadopt.';
		END IF;
		EXECUTE format('ALTER SEQUENCE %s MAXVALUE %s %s', seq::regclass, rec.seq_max,
					   CASE WHEN rec.seq_cycle THEN 'CYCLE' ELSE 'NO CYCLE' END);
		EXECUTE format('ALTER TABLE ONLY %s ALTER COLUMN %I SET DEFAULT nextval(%L::regclass)',
					   tbl, t.attname, seq::regclass::text);
	ELSE
		IF bound >= rec.seq_max THEN
			RAISE EXCEPTION 'the identity of column "%" of table % cannot go above the IDs leaf handed out', t.attname, tbl
				USING ERRCODE = '2200H',
					  DETAIL = format('Its MAXVALUE was %s; the IDs reached %s.', rec.seq_max, bound),
					  HINT = 'Change seq_max of its row in leaf_adopted (as a superuser), then call leaf_unadopt.';
		END IF;
		EXECUTE format('ALTER TABLE ONLY %s ALTER COLUMN %I DROP DEFAULT', tbl, t.attname);
		EXECUTE format('ALTER TABLE ONLY %s ALTER COLUMN %I ADD GENERATED %s AS IDENTITY '
					   '(SEQUENCE NAME %I.%I START WITH %s INCREMENT BY %s '
					   'MINVALUE %s MAXVALUE %s CACHE %s %s)',
					   tbl, t.attname,
					   CASE rec.origin WHEN 'identity always' THEN 'ALWAYS' ELSE 'BY DEFAULT' END,
					   rec.seq_nspname, rec.seq_relname, rec.seq_start,
					   rec.seq_increment, rec.seq_min, rec.seq_max, rec.seq_cache,
					   CASE WHEN rec.seq_cycle THEN 'CYCLE' ELSE 'NO CYCLE' END);
		SELECT d.objid INTO STRICT seq
		  FROM pg_depend d
		 WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
		   AND d.refobjid = tbl AND d.refobjsubid = t.attnum AND d.deptype = 'i';
	END IF;

	IF seq IS NOT NULL THEN
		EXECUTE format('SELECT last_value FROM %s', seq::regclass) INTO seq_last;
		bound := greatest(bound, seq_last);
		IF bound < rec.seq_min THEN
			PERFORM setval(seq::regclass, rec.seq_min, false);
			next_value := rec.seq_min;
		ELSE
			PERFORM setval(seq::regclass, bound, true);
			next_value := bound + rec.seq_increment;
		END IF;
	END IF;

	EXECUTE format('DELETE FROM %I.leaf_adopted WHERE relid = $1 AND attnum = $2', nsp)
		USING tbl, t.attnum;
	RETURN next_value;
END
$$;

COMMENT ON FUNCTION leaf_unadopt(regclass, name) IS
'moves a column adopted by leaf_adopt back onto its sequence or identity, which continues above every ID leaf handed out';

--
-- A lower timeline of the local leaf_alloc (pg_upgrade) is taken without
-- a confirmation since 1.3; the comment says so.
--
COMMENT ON COLUMN leaf_alloc_source.timeline IS
'timeline of the allocation database on which segments were last loaded; a load on a higher one needs leaf_alloc_source_confirm() unless leaf.alloc_failover = synchronous (a lower one, as pg_upgrade gives a local leaf_alloc, is taken)';
