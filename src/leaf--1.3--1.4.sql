-- leaf 1.3 -> 1.4 (see CHANGELOG.md)
--
-- Also the tail of leaf--1.4.sql, the install script of 1.4, which is
-- 1.3's install script followed by this file: every statement here must
-- work both on an upgraded 1.3 and during CREATE EXTENSION.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION leaf UPDATE TO '1.4'" to load this file. \quit

--
-- Segment mode: a database's own counters belong to the cluster as well
-- as to the database.  A local row of leaf_alloc_source records the
-- cluster's system identifier beside the database's OID, so that a copy
-- in another cluster (a dump restored into a new server, whose database
-- may well have the same OID, a logical replica, pg_upgrade) is told
-- from the original.  The rows recorded before 1.4 are of this cluster:
-- the update fills it in.  A local row without it in a database at 1.4
-- comes from a dump of an older release, and is taken for a copy.
--
UPDATE @extschema@.leaf_alloc_source
   SET system_identifier = (SELECT c.system_identifier
							  FROM pg_catalog.pg_control_system() c)
 WHERE kind OPERATOR(pg_catalog.=) 'local'
   AND system_identifier IS NULL;

COMMENT ON COLUMN @extschema@.leaf_alloc_source.system_identifier IS
'system identifier of the cluster holding the counters (pg_control_system()), for a local source as for a remote one';

--
-- A clone of the whole data directory (pg_basebackup, a file system copy)
-- started as a primary keeps the cluster, the database and the timeline
-- of its original: what tells it apart is the data directory, recorded
-- (its inode) for a local source.  A promoted standby is in another data
-- directory too, but on a new timeline: the rules of leaf.alloc_failover
-- apply to it, and the data directory is recorded with the timeline.
--
ALTER TABLE @extschema@.leaf_alloc_source ADD COLUMN data_directory bigint;

COMMENT ON COLUMN @extschema@.leaf_alloc_source.timeline IS
'timeline of the allocation database on which segments were last loaded; a load on a higher one needs leaf_alloc_source_confirm() unless leaf.alloc_failover = synchronous (a lower one is taken only for a local row recorded before 1.4, without its cluster: pg_upgrade is confirmed as a copy)';

COMMENT ON COLUMN @extschema@.leaf_alloc_source.data_directory IS
'local source: inode of the data directory segments were last loaded in; another one on the same timeline is a clone started as a primary (LF006)';

--
-- leaf_alloc_replicated: which logical replication wrote leaf_alloc in
-- this database.  A row stays until leaf_alloc_cutover() takes the
-- counters over from the publisher; while there is one, the allocator
-- loads no segment (LF012): the counters are the publisher's, which may
-- go on handing out the same IDs, and they lag behind it.
--
-- The trigger leaf_alloc_replicated fires only where
-- session_replication_role is 'replica', as in the apply and table
-- synchronisation workers of a subscription (and in other replication
-- tools that apply changes that way).  Not dumped: a restored copy is
-- refused as a copy anyway.
--
CREATE TABLE @extschema@.leaf_alloc_replicated (
	origin		text PRIMARY KEY,
	publications text,
	first_applied timestamptz NOT NULL DEFAULT pg_catalog.now(),
	last_applied timestamptz NOT NULL DEFAULT pg_catalog.now(),
	changes		bigint NOT NULL DEFAULT 1
);

COMMENT ON TABLE @extschema@.leaf_alloc_replicated IS
'leaf segment mode: logical replication that wrote leaf_alloc; segments are refused (LF012) until leaf_alloc_cutover()';

REVOKE ALL ON @extschema@.leaf_alloc_replicated FROM PUBLIC;

--
-- Runs as the extension's owner (the apply may run as a role that can
-- write leaf_alloc and nothing else), with built-ins qualified and
-- search_path pinned.  A trigger function cannot be called directly.
--
-- Under the apply, a counter of this database never moves backwards
-- either (the subscriber may have handed out IDs from counters of its own
-- before it subscribed): an UPDATE keeps the higher max_id, a DELETE
-- leaves its mark in leaf_alloc_retired, an INSERT starts at the mark,
-- as leaf_alloc_guard, leaf_alloc_retire and leaf_alloc_admit do for
-- everyone else.  The trigger is enabled ALWAYS and acts only where
-- session_replication_role is 'replica': a data-only pg_restore with
-- --disable-triggers (ALTER TABLE ... ENABLE TRIGGER ALL) turns it into
-- an ordinary trigger, which then does nothing.
--
CREATE FUNCTION @extschema@.leaf_alloc_replicated_mark()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	who text;
	pubs text;
	mark bigint;
BEGIN
	IF pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.<>) 'replica' THEN
		IF TG_LEVEL OPERATOR(pg_catalog.=) 'STATEMENT' THEN
			RETURN NULL;
		ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
			RETURN OLD;
		END IF;
		RETURN NEW;
	END IF;
	SELECT pg_catalog.format('subscription %s (%s)', s.subname, s.oid),
		   pg_catalog.array_to_string(s.subpublications, ', ')
	  INTO who, pubs
	  FROM pg_catalog.pg_stat_subscription st
	  JOIN pg_catalog.pg_subscription s ON s.oid OPERATOR(pg_catalog.=) st.subid
	 WHERE st.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
	 LIMIT 1;
	IF who IS NULL THEN
		who := pg_catalog.format('session_replication_role replica (application_name %s)',
								 pg_catalog.quote_literal(pg_catalog.current_setting('application_name')));
	END IF;
	-- beside leaf_alloc, in the schema the extension is in now
	EXECUTE pg_catalog.format('INSERT INTO %I.leaf_alloc_replicated AS r (origin, publications) '
							  'VALUES ($1, $2) ON CONFLICT (origin) DO UPDATE '
							  'SET last_applied = pg_catalog.now(), '
							  'changes = r.changes OPERATOR(pg_catalog.+) 1',
							  TG_TABLE_SCHEMA)
		USING who, pubs;
	IF TG_LEVEL OPERATOR(pg_catalog.=) 'STATEMENT' THEN
		RETURN NULL;
	ELSIF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
		IF NEW.max_id OPERATOR(pg_catalog.<) OLD.max_id THEN
			NEW.max_id := OLD.max_id;
		END IF;
		RETURN NEW;
	ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
		EXECUTE pg_catalog.format('INSERT INTO %I.leaf_alloc_retired AS r (biz_tag, max_id) '
								  'VALUES ($1, $2) ON CONFLICT (biz_tag) DO UPDATE '
								  'SET max_id = GREATEST(r.max_id, excluded.max_id), '
								  'retired_at = pg_catalog.now()',
								  TG_TABLE_SCHEMA)
			USING OLD.biz_tag, OLD.max_id;
		RETURN OLD;
	END IF;
	EXECUTE pg_catalog.format('SELECT r.max_id FROM %I.leaf_alloc_retired r '
							  'WHERE r.biz_tag OPERATOR(pg_catalog.=) $1', TG_TABLE_SCHEMA)
		INTO mark USING NEW.biz_tag;
	IF mark IS NOT NULL AND NEW.max_id OPERATOR(pg_catalog.<) mark THEN
		NEW.max_id := mark;
	END IF;
	RETURN NEW;
END
$$;

REVOKE ALL ON FUNCTION @extschema@.leaf_alloc_replicated_mark() FROM PUBLIC;

CREATE TRIGGER leaf_alloc_replicated
	BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.leaf_alloc
	FOR EACH ROW EXECUTE FUNCTION @extschema@.leaf_alloc_replicated_mark();

CREATE TRIGGER leaf_alloc_replicated_truncate
	AFTER TRUNCATE ON @extschema@.leaf_alloc
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.leaf_alloc_replicated_mark();

ALTER TABLE @extschema@.leaf_alloc ENABLE ALWAYS TRIGGER leaf_alloc_replicated;
ALTER TABLE @extschema@.leaf_alloc ENABLE ALWAYS TRIGGER leaf_alloc_replicated_truncate;

--
-- The cut-over of a logical replica, in one step: see docs/copies.md.
-- Fences the publisher's leaf (its allocator loads no more segments),
-- reads its counters, raises this database's to at least them (and by
-- raise_by more), forgets the replication, and records this database as
-- the owner of its counters.  Superusers only.
--
CREATE FUNCTION @extschema@.leaf_alloc_cutover(subscription text,
											  publisher text DEFAULT NULL,
											  raise_by bigint DEFAULT 0)
RETURNS TABLE (biz_tag text, max_id_before bigint, max_id bigint,
			   publisher_max_id bigint)
LANGUAGE C
AS 'MODULE_PATHNAME', 'leaf_alloc_cutover';

REVOKE ALL ON FUNCTION @extschema@.leaf_alloc_cutover(text, text, bigint) FROM PUBLIC;

COMMENT ON FUNCTION @extschema@.leaf_alloc_cutover(text, text, bigint) IS
'takes the counters of a logical replication publisher (or of the database a copy was made from) over: fences it, raises every counter above it, and lets this database serve';

--
-- leaf_alloc_source_confirm() also takes a local source that no load has
-- been refused for yet: after pg_upgrade, say, the recorded cluster is
-- the old one, and a superuser confirms before the first load instead of
-- after an LF006.
--
CREATE OR REPLACE FUNCTION @extschema@.leaf_alloc_source_confirm()
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	src text;
	pending text;
	moved boolean;
	sysid bigint;
	dboid oid;
BEGIN
	-- the schema the extension is in now (it may have been renamed)
	SELECT pg_catalog.format('%I.leaf_alloc_source', n.nspname) INTO STRICT src
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	IF COALESCE(pg_catalog.current_setting('leaf.alloc_conninfo', true), '')
	   OPERATOR(pg_catalog.=) '' THEN
		SELECT c.system_identifier INTO sysid FROM pg_catalog.pg_control_system() c;
		SELECT d.oid INTO dboid FROM pg_catalog.pg_database d
		 WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
		-- a local change that waited in another cluster or database (it
		-- came along with pg_upgrade or a dump) is not this one's
		EXECUTE pg_catalog.format('DELETE FROM %s WHERE state OPERATOR(pg_catalog.=) ''pending'' '
								  'AND kind OPERATOR(pg_catalog.=) ''local'' '
								  'AND (system_identifier IS DISTINCT FROM $1 '
								  'OR database_oid IS DISTINCT FROM $2)', src)
			USING sysid, dboid;
	END IF;
	-- leaf_alloc_cutover() fenced this database: its counters lie below
	-- the ones of the database that took them over
	EXECUTE pg_catalog.format('SELECT description FROM %s WHERE state OPERATOR(pg_catalog.=) ''current'' '
							  'AND pg_catalog.starts_with(description, ''moved: '')', src)
		INTO pending;
	IF pending IS NOT NULL THEN
		RAISE EXCEPTION 'the counters of this database were taken over by another database'
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.substr(pending, 8),
				  HINT = 'Confirming would hand out the IDs that database hands out.  Take the counters back with leaf_alloc_cutover() here, replicating from it; if it is gone for good, raise every max_id above it and delete the current row of leaf_alloc_source.';
	END IF;
	EXECUTE pg_catalog.format('SELECT description FROM %s WHERE state OPERATOR(pg_catalog.=) ''pending'' FOR UPDATE', src)
		INTO pending;
	IF pending IS NULL AND sysid IS NOT NULL THEN
		EXECUTE pg_catalog.format('SELECT true FROM %s WHERE state OPERATOR(pg_catalog.=) ''current'' '
								  'AND (kind OPERATOR(pg_catalog.<>) ''local'' '
								  'OR system_identifier IS DISTINCT FROM $1 '
								  'OR database_oid IS DISTINCT FROM $2)', src)
			INTO moved USING sysid, dboid;
		IF moved THEN
			pending := pg_catalog.format('the local leaf_alloc (database %s of system %s)',
										 dboid, sysid);
			EXECUTE pg_catalog.format('INSERT INTO %s (state, kind, system_identifier, database_oid, description) '
									  'VALUES (''pending'', ''local'', $1, $2, $3)', src)
				USING sysid, dboid, pending;
		END IF;
	END IF;
	IF pending IS NULL THEN
		RAISE EXCEPTION 'no change of allocation database is waiting for confirmation'
			USING ERRCODE = '55000',
				  HINT = 'leaf_alloc_source shows the source this database draws its segments from.';
	END IF;
	EXECUTE pg_catalog.format('DELETE FROM %s WHERE state OPERATOR(pg_catalog.=) ''current''', src);
	EXECUTE pg_catalog.format('UPDATE %s SET state = ''current'', recorded_at = pg_catalog.now() '
							  'WHERE state OPERATOR(pg_catalog.=) ''pending''', src);
	RETURN pending;
END
$$;

--
-- Names a tenant can create.  SQL that a superuser runs must not resolve
-- a name through a schema that another role can write: on PostgreSQL 15
-- the owner of a database owns schema public, and a function or operator
-- planted there that matches the argument types better than the built-in
-- one is chosen instead of it.  (sql/guard.sql plants such decoys for
-- every name leaf's sources call.)
--
-- The checks of leaf_alloc, as 1.0 wrote them, bound to whatever
-- octet_length(varchar) and <>(varchar, varchar) the schemas on the
-- search_path of CREATE EXTENSION held; they are written again with the
-- built-ins named.  Whatever they bound to before is released: the
-- update drops them first.
--
ALTER TABLE @extschema@.leaf_alloc
	DROP CONSTRAINT leaf_alloc_biz_tag_check,
	DROP CONSTRAINT leaf_alloc_biz_tag_length,
	DROP CONSTRAINT leaf_alloc_step_check;

ALTER TABLE @extschema@.leaf_alloc
	ADD CONSTRAINT leaf_alloc_biz_tag_check
		CHECK (biz_tag OPERATOR(pg_catalog.<>) ''::pg_catalog.text),
	-- shared memory holds tags of up to 128 bytes, as the functions check
	ADD CONSTRAINT leaf_alloc_biz_tag_length
		CHECK (pg_catalog.octet_length(biz_tag) OPERATOR(pg_catalog.<=) 128),
	ADD CONSTRAINT leaf_alloc_step_check
		CHECK (step OPERATOR(pg_catalog.>) 0);

--
-- leaf_adopt and leaf_unadopt call leaf_column_default(oid, smallint) in
-- leaf's schema by the schema's name; 1.3 passed a regclass, and a
-- leaf_column_default(regclass, smallint) that a role with CREATE on that
-- schema planted was the better match.  The arguments are cast to the
-- exact types now, so that only leaf's own function matches them (every
-- other call of leaf's functions by name passes the exact types already).
-- The bodies are 1.3's otherwise, but for the writes of leaf_adopted,
-- which go through the functions of the next section.
--
CREATE OR REPLACE FUNCTION @extschema@.leaf_adopt(tbl regclass, col name,
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

	EXECUTE format('SELECT %I.leaf_column_default($1::pg_catalog.oid, $2::pg_catalog.int2)', nsp)
		INTO adopted_default USING tbl, t.attnum;
	-- the record, written by leaf_adopted_record(), which checks that this
	-- transaction set the default (and altered the sequence) it names
	EXECUTE format('SELECT %I.leaf_adopted_record($1::pg_catalog.oid, $2::pg_catalog.int2, '
				   '$3::pg_catalog.text, $4::pg_catalog.text, $5::pg_catalog.text, $6::pg_catalog.text, '
				   '$7::pg_catalog.oid, $8::pg_catalog.name, $9::pg_catalog.name, $10::pg_catalog.name, '
				   '$11::pg_catalog.int8, $12::pg_catalog.int8, $13::pg_catalog.int8, $14::pg_catalog.int8, '
				   '$15::pg_catalog.int8, $16::pg_catalog.bool, $17::pg_catalog.name)', nsp)
		USING tbl::oid, t.attnum,
			  CASE WHEN leaf_adopt.snowflake THEN 'snowflake' ELSE 'segment' END,
			  tag, adopted_default, origin,
			  CASE WHEN origin = 'sequence' THEN seq END,
			  s_nspname, s_relname, s_type, s_start, s_increment, s_min, s_max, s_cache, s_cycle,
			  current_user;
	RETURN adopted_default;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.leaf_unadopt(tbl regclass, col name)
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
	EXECUTE format('SELECT %I.leaf_column_default($1::pg_catalog.oid, $2::pg_catalog.int2)', nsp)
		INTO current_default USING tbl, t.attnum;
	IF current_default IS DISTINCT FROM rec.leaf_default THEN
		RAISE EXCEPTION 'the default of column "%" of table % is no longer the one leaf_adopt set', t.attname, tbl
			USING ERRCODE = '55000',
				  DETAIL = format('It is %s; leaf_adopt set %s.', coalesce(current_default, 'none'), rec.leaf_default),
				  HINT = 'Set the default back, or, if the column was moved back by hand, forget its adoption with leaf_adopted_forget().';
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

	-- the column takes its values from leaf no more: its record may go
	EXECUTE format('SELECT %I.leaf_adopted_forget($1::pg_catalog.regclass, $2::pg_catalog.name)', nsp)
		USING tbl, t.attname;
	RETURN next_value;
END
$$;

--
-- leaf_adopted is written by leaf's functions only, after their own
-- checks.  In 1.3 PUBLIC could insert, delete and update names in it,
-- which the trigger leaf_adopted_check limited; but DELETE let a role
-- that may only connect LOCK it in ACCESS EXCLUSIVE mode, which held up
-- the DDL of everyone (the event triggers write it during every ALTER
-- TABLE), a row for a temporary table stayed after the table went
-- without a sql_drop event (and made every dump fail to restore), and a
-- table owner could record a sequence of another role's, which a
-- superuser's leaf_unadopt then rewrote.
--
-- Everyone may still read it.  leaf_adopt and leaf_unadopt, which run as
-- their caller, write it through leaf_adopted_record() and
-- leaf_adopted_forget(), which run as the extension's owner and admit
-- only what the caller has shown it may do; the event triggers, whose
-- writes follow the catalogs, run as the extension's owner too.
--
REVOKE ALL ON @extschema@.leaf_adopted FROM PUBLIC;
REVOKE UPDATE (nspname, relname, attname, seq_nspname, seq_relname)
	ON @extschema@.leaf_adopted FROM PUBLIC;
GRANT SELECT ON @extschema@.leaf_adopted TO PUBLIC;

ALTER FUNCTION @extschema@.leaf_adopted_follow() SECURITY DEFINER;

-- rows 1.3 let anyone write that name no permanent table of this
-- database: of temporary tables, or of tables dropped without an event
DELETE FROM @extschema@.leaf_adopted a
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
					WHERE c.oid OPERATOR(pg_catalog.=) a.relid
					  AND c.relpersistence OPERATOR(pg_catalog.=) 'p');

--
-- leaf_adopted_record(): the record of an adoption, for leaf_adopt.
-- Runs as the extension's owner, so it cannot ask whether its caller
-- owns the table: it asks for what only an owner can have done, in this
-- very transaction.  The default of the column was set in it (a row of
-- pg_attrdef this transaction wrote: it sees the row, and the row's
-- writer is still in progress), as ALTER TABLE does for the owner of
-- the table only; so was the sequence it names altered (its row of
-- pg_sequence), as ALTER SEQUENCE does for the sequence's owner only.
-- The table is a permanent one, the default is the one the row records
-- (leaf_segment_nextval of its tag, or leaf_snowflake), and the names
-- come from the catalogs, by OID.
--
CREATE FUNCTION @extschema@.leaf_adopted_record(relid oid, attnum smallint,
												mode text, biz_tag text,
												leaf_default text, origin text,
												seq_relid oid, seq_nspname name,
												seq_relname name, seq_type name,
												seq_start bigint, seq_increment bigint,
												seq_min bigint, seq_max bigint,
												seq_cache bigint, seq_cycle boolean,
												adopted_by name)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
	nsp name;
	c record;
	s record;
	dflt text;
	expected text;
	s_nspname name;
	s_relname name;
	top numeric;				-- this transaction's ID, with its epoch
	unit constant numeric := 4294967296;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	top := pg_catalog.pg_current_xact_id()::pg_catalog.text::pg_catalog.numeric;

	SELECT cl.relkind, cl.relpersistence, cl.relowner, n.nspname, cl.relname, a.attname,
		   d.xmin::pg_catalog.text::pg_catalog.numeric AS written_by
	  INTO c
	  FROM pg_catalog.pg_class cl
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) cl.relnamespace
	  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) cl.oid
	  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid OPERATOR(pg_catalog.=) cl.oid
									   AND d.adnum OPERATOR(pg_catalog.=) a.attnum
	 WHERE cl.oid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.=) $2
	   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no column % of relation with OID % to record an adoption for', $2, $1
			USING ERRCODE = '42703';
	END IF;
	IF c.relkind OPERATOR(pg_catalog.<>) 'r' OR c.relpersistence OPERATOR(pg_catalog.<>) 'p' THEN
		RAISE EXCEPTION 'only a column of a permanent table is recorded as adopted'
			USING ERRCODE = '0A000',
				  DETAIL = pg_catalog.format('%s.%s is not one.',
											 pg_catalog.quote_ident(c.nspname),
											 pg_catalog.quote_ident(c.relname));
	END IF;
	IF c.written_by IS NULL
	   OR c.written_by OPERATOR(pg_catalog.<) pg_catalog.mod(top, unit)
	   OR pg_catalog.pg_xact_status((pg_catalog.div(top, unit) OPERATOR(pg_catalog.*) unit
									 OPERATOR(pg_catalog.+) c.written_by)::pg_catalog.text::pg_catalog.xid8)
		  IS DISTINCT FROM 'in progress'
	   OR NOT pg_catalog.pg_has_role($17, c.relowner, 'USAGE') THEN
		RAISE EXCEPTION 'permission denied to record the adoption of column %.%.%',
			pg_catalog.quote_ident(c.nspname), pg_catalog.quote_ident(c.relname),
			pg_catalog.quote_ident(c.attname)
			USING ERRCODE = '42501',
				  DETAIL = 'An adoption is recorded by leaf_adopt, in the transaction in which the owner of the table sets the default of the column.';
	END IF;
	EXECUTE pg_catalog.format('SELECT %I.leaf_column_default($1::pg_catalog.oid, $2::pg_catalog.int2)', nsp)
		INTO dflt USING $1, $2;
	-- the default of the mode and tag recorded, as leaf_column_default() gives it
	expected := CASE $3
		WHEN 'segment' THEN pg_catalog.format('leaf_segment_nextval(%L::text)', $4)
		WHEN 'snowflake' THEN 'leaf_snowflake()' END;
	IF dflt IS DISTINCT FROM $5 OR dflt IS DISTINCT FROM expected THEN
		RAISE EXCEPTION 'column %.%.% does not take its values from leaf as recorded',
			pg_catalog.quote_ident(c.nspname), pg_catalog.quote_ident(c.relname),
			pg_catalog.quote_ident(c.attname)
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('Its default is %s.', COALESCE(dflt, 'none'));
	END IF;

	IF $6 OPERATOR(pg_catalog.=) 'sequence' THEN
		SELECT sc.relowner, n.nspname, sc.relname,
			   q.xmin::pg_catalog.text::pg_catalog.numeric AS written_by
		  INTO s
		  FROM pg_catalog.pg_class sc
		  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) sc.relnamespace
		  JOIN pg_catalog.pg_sequence q ON q.seqrelid OPERATOR(pg_catalog.=) sc.oid
		 WHERE sc.oid OPERATOR(pg_catalog.=) $7;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'no sequence with OID % to record an adoption with', $7
				USING ERRCODE = '42P01';
		END IF;
		IF s.written_by OPERATOR(pg_catalog.<) pg_catalog.mod(top, unit)
		   OR pg_catalog.pg_xact_status((pg_catalog.div(top, unit) OPERATOR(pg_catalog.*) unit
										 OPERATOR(pg_catalog.+) s.written_by)::pg_catalog.text::pg_catalog.xid8)
			  IS DISTINCT FROM 'in progress'
		   OR NOT pg_catalog.pg_has_role($17, s.relowner, 'USAGE') THEN
			RAISE EXCEPTION 'permission denied to record sequence %.% with the adoption of column %.%.%',
				pg_catalog.quote_ident(s.nspname), pg_catalog.quote_ident(s.relname),
				pg_catalog.quote_ident(c.nspname), pg_catalog.quote_ident(c.relname),
				pg_catalog.quote_ident(c.attname)
				USING ERRCODE = '42501',
					  DETAIL = 'A sequence is recorded by leaf_adopt, in the transaction in which the owner of the sequence lowers its MAXVALUE.';
		END IF;
		s_nspname := s.nspname;
		s_relname := s.relname;
	ELSIF $7 IS NOT NULL THEN
		RAISE EXCEPTION 'only an adoption of origin sequence records a sequence'
			USING ERRCODE = '22023';
	ELSE
		-- an identity: the names of its sequence, made again by
		-- leaf_unadopt (by its caller, in that schema)
		s_nspname := $8;
		s_relname := $9;
	END IF;

	-- rows of dropped tables (when no event trigger removed them)
	EXECUTE pg_catalog.format('DELETE FROM %I.leaf_adopted a WHERE NOT EXISTS '
							  '(SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) a.relid)',
							  nsp);
	-- the trigger leaf_adopted_check ties the row to its column again
	EXECUTE pg_catalog.format('INSERT INTO %I.leaf_adopted (relid, attnum, nspname, relname, attname, mode, '
							  'biz_tag, leaf_default, origin, seq_relid, seq_nspname, seq_relname, seq_type, '
							  'seq_start, seq_increment, seq_min, seq_max, seq_cache, seq_cycle, adopted_by) '
							  'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, '
							  '$17, $18, $19, $20)', nsp)
		USING $1, $2, c.nspname, c.relname, c.attname, $3, $4, $5, $6, $7,
			  s_nspname, s_relname, $10, $11, $12, $13, $14, $15, $16, $17;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_adopted_record(oid, smallint, text, text, text, text, oid, name, name, name, bigint, bigint, bigint, bigint, bigint, boolean, name) IS
'leaf: records an adoption for leaf_adopt, in the transaction that set the default';

--
-- leaf_adopted_forget(table, column): forgets the adoption of a column
-- that takes its values from leaf no more (leaf_unadopt calls it; so may
-- the owner of a column moved back by hand).  The record of a column
-- that still has the recorded default stays: leaf_unadopt needs it.
-- Runs as the extension's owner; a row it may delete says nothing true.
--
CREATE FUNCTION @extschema@.leaf_adopted_forget(tbl regclass, col name)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
	nsp name;
	num smallint;
	recorded text;
	dflt text;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	SELECT a.attnum INTO num
	  FROM pg_catalog.pg_attribute a
	 WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attname OPERATOR(pg_catalog.=) $2
	   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'column "%" of relation % does not exist', $2, $1
			USING ERRCODE = '42703';
	END IF;
	EXECUTE pg_catalog.format('SELECT leaf_default FROM %I.leaf_adopted '
							  'WHERE relid OPERATOR(pg_catalog.=) $1 AND attnum OPERATOR(pg_catalog.=) $2', nsp)
		INTO recorded USING $1::pg_catalog.oid, num;
	IF recorded IS NULL THEN
		RETURN false;
	END IF;
	EXECUTE pg_catalog.format('SELECT %I.leaf_column_default($1::pg_catalog.oid, $2::pg_catalog.int2)', nsp)
		INTO dflt USING $1, num;
	IF dflt IS NOT DISTINCT FROM recorded THEN
		RAISE EXCEPTION 'column "%" of table % still takes its values from leaf as recorded', $2, $1
			USING ERRCODE = '55000',
				  HINT = 'leaf_unadopt() moves it back, and forgets its adoption.';
	END IF;
	EXECUTE pg_catalog.format('DELETE FROM %I.leaf_adopted '
							  'WHERE relid OPERATOR(pg_catalog.=) $1 AND attnum OPERATOR(pg_catalog.=) $2', nsp)
		USING $1::pg_catalog.oid, num;
	RETURN true;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_adopted_forget(regclass, name) IS
'leaf: forgets the adoption of a column that takes its values from leaf no more';

--
-- Metrics: the facts an operator alerts on, one number per column, named
-- as Prometheus names them (_total for counters, the unit last), so that
-- a collector maps a column to a metric without arithmetic of its own.
-- Built over leaf_segments, leaf_snowflake_status and
-- leaf_snowflake_layout(); leaf_segment_errors() adds what leaf_segments
-- does not show: the SQLSTATE of a tag's last failed load and how many
-- failed; leaf_snowflake_units_exhausted() the units of time whose
-- sequence ran out.  Readable by pg_monitor, as the views below them (a view's
-- functions run with the privileges of its reader, who needs EXECUTE on
-- them too).  Built-ins are named with their schema: the views run for
-- superusers as well.  docs/monitoring.md describes every column.
--
CREATE FUNCTION @extschema@.leaf_segment_errors(
	OUT database name,
	OUT biz_tag text,
	OUT failed_loads bigint,
	OUT last_error_code text,
	OUT error_current boolean,
	OUT error_final boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'leaf_segment_errors'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.leaf_segment_errors() IS
'leaf segment mode: failed loads of every biz_tag held in shared memory, with the SQLSTATE of the last one';

REVOKE ALL ON FUNCTION @extschema@.leaf_segment_errors() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.leaf_segment_errors() TO pg_monitor;

CREATE VIEW @extschema@.leaf_tag_metrics AS
SELECT s.database,
	   s.biz_tag,
	   s.state,
	   -- a call made now returns an ID at once
	   CASE WHEN s.state OPERATOR(pg_catalog.=) 'ok' THEN 1 ELSE 0 END AS ready,
	   -- the last load was refused and only a person can mend it
	   -- (docs/errors.md); the buffers may still serve
	   CASE WHEN e.error_current
				 AND e.last_error_code OPERATOR(pg_catalog.=) ANY
					 (ARRAY['LF005', 'LF006', 'LF007', 'LF012']::pg_catalog.text[])
			THEN 1 ELSE 0 END AS refusing,
	   CASE WHEN e.error_current THEN e.last_error_code END AS error_code,
	   s.ids_issued AS ids_issued_total,
	   s.refills AS refills_total,
	   COALESCE(e.failed_loads, 0) AS failed_refills_total,
	   s.waits AS waits_total,
	   s.max_wait_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8 AS wait_max_seconds,
	   -- IDs left in both buffers
	   COALESCE(s.segment_end OPERATOR(pg_catalog.-) s.next_id
				OPERATOR(pg_catalog.+) 1, 0)
	   OPERATOR(pg_catalog.+)
	   CASE WHEN s.next_ready
			THEN s.next_segment_end OPERATOR(pg_catalog.-) s.next_segment_start
				 OPERATOR(pg_catalog.+) 1
			ELSE 0 END AS runway_ids,
	   s.step AS step_ids,
	   -- IDs above the highest one loaded, up to the end of bigint
	   9223372036854775807::pg_catalog.numeric OPERATOR(pg_catalog.-)
	   GREATEST(s.segment_end, s.next_segment_end)::pg_catalog.numeric AS range_left_ids,
	   pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) s.last_refill)
		 AS last_refill_age_seconds
  FROM @extschema@.leaf_segments() s
  LEFT JOIN @extschema@.leaf_segment_errors() e
	ON e.database OPERATOR(pg_catalog.=) s.database
   AND e.biz_tag OPERATOR(pg_catalog.=) s.biz_tag;

COMMENT ON VIEW @extschema@.leaf_tag_metrics IS
'leaf segment mode: metrics of every biz_tag held in shared memory, one row per tag (docs/monitoring.md)';

REVOKE ALL ON @extschema@.leaf_tag_metrics FROM PUBLIC;
GRANT SELECT ON @extschema@.leaf_tag_metrics TO pg_monitor;

CREATE FUNCTION @extschema@.leaf_snowflake_units_exhausted()
RETURNS bigint
AS 'MODULE_PATHNAME', 'leaf_snowflake_units_exhausted'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.leaf_snowflake_units_exhausted() IS
'leaf snowflake mode: units of time whose sequence ran out since the server started (callers waited for the next unit)';

REVOKE ALL ON FUNCTION @extschema@.leaf_snowflake_units_exhausted() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.leaf_snowflake_units_exhausted() TO pg_monitor;

CREATE VIEW @extschema@.leaf_node_metrics AS
SELECT CASE WHEN st.ready THEN 1 ELSE 0 END AS snowflake_ready,
	   st.not_ready_reason,
	   st.worker_id,
	   l.layout,
	   st.ids_issued AS snowflake_ids_issued_total,
	   st.backward_waits AS backward_waits_total,
	   st.backward_errors AS backward_errors_total,
	   @extschema@.leaf_snowflake_units_exhausted() AS sequence_exhausted_total,
	   pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) st.last_heartbeat)
		 AS heartbeat_age_seconds,
	   pg_catalog.date_part('epoch', st.recorded_until OPERATOR(pg_catalog.-) pg_catalog.now())
		 AS lease_left_seconds,
	   st.peer_clock_offset_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8
		 AS peer_clock_offset_seconds,
	   -- until the layout's timestamps run out (js53: its IDs reach 2^53)
	   pg_catalog.date_part('epoch', l.ends_at OPERATOR(pg_catalog.-) pg_catalog.now())
		 AS timestamp_left_seconds,
	   l.max_id AS layout_max_id,
	   t.tags AS segment_tags,
	   t.not_ready AS segment_tags_not_ready,
	   t.refusing AS segment_tags_refusing
  FROM @extschema@.leaf_snowflake_status() st,
	   @extschema@.leaf_snowflake_layout() l,
	   (SELECT pg_catalog.count(*) AS tags,
			   pg_catalog.count(*) FILTER (WHERE m.ready OPERATOR(pg_catalog.=) 0) AS not_ready,
			   pg_catalog.count(*) FILTER (WHERE m.refusing OPERATOR(pg_catalog.=) 1) AS refusing
		  FROM @extschema@.leaf_tag_metrics m) t;

COMMENT ON VIEW @extschema@.leaf_node_metrics IS
'leaf: metrics of this server, one row: the snowflake generator and a summary of the segment tags (docs/monitoring.md)';

REVOKE ALL ON @extschema@.leaf_node_metrics FROM PUBLIC;
GRANT SELECT ON @extschema@.leaf_node_metrics TO pg_monitor;
