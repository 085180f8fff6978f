-- leaf 1.4 -> 1.5 (see CHANGELOG.md)
--
-- CREATE EXTENSION leaf runs leaf--1.0.sql and then every upgrade script
-- up to default_version, this one among them: every statement here must
-- work both on an upgraded 1.4 and during CREATE EXTENSION.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION leaf UPDATE TO '1.5'" to load this file. \quit

--
-- Snowflake worker IDs from the allocation database
-- (leaf.worker_id_source = 'database'): one row per worker ID, written
-- by the snowflake worker of the node that holds it, over libpq, in the
-- database that leaf.alloc_conninfo names.  Only that worker's role
-- (a superuser, or the owner of the extension) reads or writes it.
--
CREATE TABLE @extschema@.leaf_worker_lease (
	worker_id	integer PRIMARY KEY
				CHECK (worker_id OPERATOR(pg_catalog.>=) 0),
	holder_identity text NOT NULL,
	holder_address text NOT NULL,
	holder_token bigint NOT NULL,
	hand_set	boolean NOT NULL DEFAULT false,
	layout		text NOT NULL,
	epoch_ms	bigint NOT NULL,
	hwm_ms		bigint NOT NULL,
	expires_at	timestamptz NOT NULL,
	renewed_at	timestamptz NOT NULL,
	held_since	timestamptz NOT NULL,
	timeline	bigint NOT NULL
);

COMMENT ON TABLE @extschema@.leaf_worker_lease IS
'snowflake worker IDs held by nodes with leaf.worker_id_source = ''database'', one row per worker ID';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.holder_identity IS
'data directory of the holder: system identifier and inode';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.holder_token IS
'random number drawn by the holder each time it takes the row; its renewals name it, so that a copy of the holder''s data directory (same identity) is another holder';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.hand_set IS
'claimed with leaf.worker_id: never taken over, delete the row to move it';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.epoch_ms IS
'leaf.snowflake_epoch of the holder (ms since 1970): a holder under a later epoch serves above the mark moved by the difference';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.hwm_ms IS
'high-water mark: no ID of this worker ID carries a later timestamp (ms since 1970) until the holder records a higher one';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.expires_at IS
'end of the lease, on this database''s clock; the holder stops serving before it unless it renews';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.held_since IS
'when the holder took the worker ID (from no row, or from another holder)';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.timeline IS
'timeline of this database when the row was last written';

--
-- Each copy of this database the leases were used in, as
-- leaf_copy_identity tells it: the cluster, the timeline, the data
-- directory and the database, and when a snowflake worker first saw it.
-- A copy not recorded when others are is a move that may have lost rows,
-- or set them back (a promotion that was not synchronous, a restore,
-- pg_upgrade, a cut-over): no worker ID goes to a holder until the
-- longest lease of the former copy has passed.  The same cluster and
-- timeline in another data directory (a clone started as a primary), or
-- another database of the same cluster (CREATE DATABASE ... TEMPLATE),
-- takes none until leaf_worker_lease_confirm() records it.
--
CREATE TABLE @extschema@.leaf_worker_lease_timeline (
	system_identifier bigint NOT NULL,
	timeline	bigint NOT NULL,
	data_directory bigint NOT NULL,
	database_oid oid NOT NULL,
	seen_at		timestamptz NOT NULL,
	synchronous boolean NOT NULL,
	PRIMARY KEY (system_identifier, timeline, data_directory, database_oid)
);

COMMENT ON TABLE @extschema@.leaf_worker_lease_timeline IS
'copies of the allocation database (cluster, timeline, data directory, database) seen by snowflake workers, and when; a new one not confirmed as synchronous holds back new holders of worker IDs';
COMMENT ON COLUMN @extschema@.leaf_worker_lease_timeline.data_directory IS
'inode of the server''s data directory, 0 if unknown';

--
-- What every node of the fleet must agree on, one row, written by the
-- first snowflake worker that comes (none here, so that a publication of
-- all tables does not copy one onto a subscriber's): a random number
-- that tells this table of worker IDs from any other (a restored dump or
-- another database gets a new one), and the heartbeat and the clock
-- drift, recorded by the first node, that bound how long a holder whose
-- row is gone may still serve, and the epoch its timestamps count from.
--
CREATE TABLE @extschema@.leaf_worker_lease_fleet (
	one			boolean PRIMARY KEY DEFAULT true CHECK (one),
	fleet_id	bigint NOT NULL,
	heartbeat_ms integer,
	max_clock_drift_ms integer,
	epoch_ms	bigint,
	moved_to	text
);

COMMENT ON TABLE @extschema@.leaf_worker_lease_fleet IS
'the fleet of leaf_worker_lease: its identity, and leaf.heartbeat_interval, leaf.max_clock_drift_ms and leaf.snowflake_epoch, which every node must share (recorded by the first node; to change them, stop every node, set them to NULL here, change them on every node)';
COMMENT ON COLUMN @extschema@.leaf_worker_lease_fleet.moved_to IS
'set by leaf_alloc_cutover() of a logical replica of this database: the fleet''s worker IDs are held there now, and no node takes or renews one here';

REVOKE ALL ON @extschema@.leaf_worker_lease_fleet FROM PUBLIC;
REVOKE ALL ON @extschema@.leaf_worker_lease FROM PUBLIC;
REVOKE ALL ON @extschema@.leaf_worker_lease_timeline FROM PUBLIC;

--
-- Which copy of this database this is, for the snowflake workers that
-- hold worker IDs here over libpq: the cluster, the data directory's
-- inode, the timeline (NULL in recovery), the database, when the server
-- started and its clock (ms since 1970), and what says that logical
-- replication writes leaf's tables here or has written them since the
-- last cut-over (NULL if nothing does).  It tells no more than
-- pg_control_system(), pg_postmaster_start_time() and pg_subscription
-- tell anyone.  The workers read the view, not the function: a view is
-- bound to the function when it is created, while a call by name could
-- be made ambiguous by an overload that the owner of the schema creates.
--
CREATE FUNCTION @extschema@.leaf_copy_status(
	OUT system_identifier bigint,
	OUT data_directory bigint,
	OUT timeline bigint,
	OUT database_oid oid,
	OUT in_recovery boolean,
	OUT started_ms bigint,
	OUT now_ms bigint,
	OUT replicated text)
RETURNS record
AS 'MODULE_PATHNAME', 'leaf_copy_status'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE VIEW @extschema@.leaf_copy_identity AS
	SELECT * FROM @extschema@.leaf_copy_status();

COMMENT ON VIEW @extschema@.leaf_copy_identity IS
'which copy of this database this is: what the snowflake workers that hold worker IDs here compare with leaf_worker_lease_timeline';

GRANT SELECT ON @extschema@.leaf_copy_identity TO PUBLIC;

--
-- A clone of this database's cluster started as a primary (the same
-- system and timeline in another data directory), or a copy of the
-- database in its cluster (CREATE DATABASE ... TEMPLATE), holds the
-- leases of its original, which may still serve: the snowflake workers
-- take no worker ID in it until a superuser, once the original serves no
-- more, records it as a copy of its own here.  New holders then wait out the
-- longest lease, as after a promotion.
--
CREATE FUNCTION @extschema@.leaf_worker_lease_confirm()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	here record;
BEGIN
	-- the schema the extension is in now, not the name it had at CREATE
	-- EXTENSION: the owner of a renamed schema may have put objects of
	-- its own under that name
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format('SELECT * FROM %I.leaf_copy_identity', nsp)
		INTO STRICT here;
	IF here.in_recovery THEN
		RAISE EXCEPTION 'cannot confirm a copy in recovery'
			USING ERRCODE = '25006',
				  HINT = 'Confirm it once it is promoted.';
	END IF;
	EXECUTE pg_catalog.format('INSERT INTO %I.leaf_worker_lease_timeline '
							  '(system_identifier, timeline, data_directory, database_oid, '
							  'seen_at, synchronous) '
							  'VALUES ($1, $2, $3, $4, pg_catalog.clock_timestamp(), false) '
							  'ON CONFLICT DO NOTHING', nsp)
		USING here.system_identifier, here.timeline, here.data_directory,
			  here.database_oid;
END
$$;

REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_confirm() FROM PUBLIC;

--
-- Logical replication of the leases is recorded as of leaf_alloc: the
-- trigger leaf_alloc_replicated_mark() fires on the three tables of
-- worker IDs too (and keeps its rules of the counters for leaf_alloc), so
-- that a subscriber of the allocation database refuses leases after its
-- subscription is disabled, until leaf_alloc_cutover().
--
CREATE OR REPLACE FUNCTION @extschema@.leaf_alloc_replicated_mark()
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
	ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
		IF TG_TABLE_NAME OPERATOR(pg_catalog.=) 'leaf_alloc' THEN
			EXECUTE pg_catalog.format('INSERT INTO %I.leaf_alloc_retired AS r (biz_tag, max_id) '
									  'VALUES ($1, $2) ON CONFLICT (biz_tag) DO UPDATE '
									  'SET max_id = GREATEST(r.max_id, excluded.max_id), '
									  'retired_at = pg_catalog.now()',
									  TG_TABLE_SCHEMA)
				USING OLD.biz_tag, OLD.max_id;
		END IF;
		RETURN OLD;
	ELSIF TG_TABLE_NAME OPERATOR(pg_catalog.<>) 'leaf_alloc' THEN
		RETURN NEW;
	ELSIF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
		IF NEW.max_id OPERATOR(pg_catalog.<) OLD.max_id THEN
			NEW.max_id := OLD.max_id;
		END IF;
		RETURN NEW;
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

CREATE TRIGGER leaf_worker_lease_replicated
	BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.leaf_worker_lease
	FOR EACH ROW EXECUTE FUNCTION @extschema@.leaf_alloc_replicated_mark();
CREATE TRIGGER leaf_worker_lease_replicated_truncate
	AFTER TRUNCATE ON @extschema@.leaf_worker_lease
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.leaf_alloc_replicated_mark();
CREATE TRIGGER leaf_worker_lease_fleet_replicated
	BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.leaf_worker_lease_fleet
	FOR EACH ROW EXECUTE FUNCTION @extschema@.leaf_alloc_replicated_mark();
CREATE TRIGGER leaf_worker_lease_timeline_replicated
	BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.leaf_worker_lease_timeline
	FOR EACH ROW EXECUTE FUNCTION @extschema@.leaf_alloc_replicated_mark();

ALTER TABLE @extschema@.leaf_worker_lease ENABLE ALWAYS TRIGGER leaf_worker_lease_replicated;
ALTER TABLE @extschema@.leaf_worker_lease ENABLE ALWAYS TRIGGER leaf_worker_lease_replicated_truncate;
ALTER TABLE @extschema@.leaf_worker_lease_fleet ENABLE ALWAYS TRIGGER leaf_worker_lease_fleet_replicated;
ALTER TABLE @extschema@.leaf_worker_lease_timeline ENABLE ALWAYS TRIGGER leaf_worker_lease_timeline_replicated;
