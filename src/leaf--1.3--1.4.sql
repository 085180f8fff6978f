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
