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
	timeline	bigint NOT NULL,
	bound		boolean NOT NULL DEFAULT false,
	reclaim_after_ms bigint
				CHECK (reclaim_after_ms OPERATOR(pg_catalog.>) 0)
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
COMMENT ON COLUMN @extschema@.leaf_worker_lease.bound IS
'taken with leaf.worker_id_lease = ''bound'': expires_at only says whether the holder runs, and the holder serves with the row while this database is unreachable; another node takes it over only once it is given up, or reclaim_after_ms after renewed_at';
COMMENT ON COLUMN @extschema@.leaf_worker_lease.reclaim_after_ms IS
'of a bound row: how long after its last renewal (renewed_at, plus the clock drift) another node may take it over (leaf.worker_id_reclaim_after of the holder, which stops serving before); NULL: never';

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
-- What it records is an apply: a worker of a subscription, or a session
-- that set session_replication_role = replica itself (SET, or options in
-- its connection string), as a tool that applies changes does.  The role
-- given to every session by the configuration (postgresql.conf, ALTER
-- SYSTEM, the command line, ALTER DATABASE or ALTER ROLE ... SET) tells
-- nothing of who writes: under it, leaf's own writes (the loads of the
-- allocator and of a fleet's shards, the leases of the snowflake workers,
-- which log in to an allocation database as a role that may not set the
-- role back) and every other session would all count as replication.
-- leaf's processes also set it to origin for their own writes.
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
	IF pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.=) 'replica' THEN
		SELECT pg_catalog.format('subscription %s (%s)', s.subname, s.oid),
			   pg_catalog.array_to_string(s.subpublications, ', ')
		  INTO who, pubs
		  FROM pg_catalog.pg_stat_subscription st
		  JOIN pg_catalog.pg_subscription s ON s.oid OPERATOR(pg_catalog.=) st.subid
		 WHERE st.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
		 LIMIT 1;
		-- not a subscription's: an apply only if the session chose the role
		IF who IS NULL AND NOT EXISTS
			(SELECT FROM pg_catalog.pg_settings g
			  WHERE g.name OPERATOR(pg_catalog.=) 'session_replication_role'
				AND g.source OPERATOR(pg_catalog.=) ANY
					('{default,environment variable,configuration file,command line,global,database,user,database user}'::pg_catalog.text[])) THEN
			who := pg_catalog.format('session_replication_role replica (application_name %s)',
									 pg_catalog.quote_literal(pg_catalog.current_setting('application_name')));
		END IF;
	END IF;
	IF pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.<>) 'replica' THEN
		-- the ordinary triggers of leaf_alloc keep its rules
		IF TG_LEVEL OPERATOR(pg_catalog.=) 'STATEMENT' THEN
			RETURN NULL;
		ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
			RETURN OLD;
		END IF;
		RETURN NEW;
	END IF;
	IF who IS NOT NULL THEN
		-- beside leaf_alloc, in the schema the extension is in now
		EXECUTE pg_catalog.format('INSERT INTO %I.leaf_alloc_replicated AS r (origin, publications) '
								  'VALUES ($1, $2) ON CONFLICT (origin) DO UPDATE '
								  'SET last_applied = pg_catalog.now(), '
								  'changes = r.changes OPERATOR(pg_catalog.+) 1',
								  TG_TABLE_SCHEMA)
			USING who, pubs;
	ELSIF TG_TABLE_NAME OPERATOR(pg_catalog.=) ANY ('{leaf_alloc,leaf_alloc_retired}'::pg_catalog.name[]) THEN
		/*
		 * A replica the configuration gives a session that applies nothing
		 * (leaf's own logins, a tag administrator): the ordinary triggers
		 * of leaf_alloc do not fire under it, so their refusals are here.
		 */
		IF TG_LEVEL OPERATOR(pg_catalog.=) 'STATEMENT' THEN
			RAISE EXCEPTION 'cannot truncate %', TG_TABLE_NAME
				USING ERRCODE = 'LF005',
					  DETAIL = 'IDs below the max_id of its rows may have been handed out; forgetting them would repeat IDs.',
					  HINT = 'To retire biz_tags, DELETE their rows from leaf_alloc.';
		ELSIF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' AND TG_TABLE_NAME OPERATOR(pg_catalog.=) 'leaf_alloc' THEN
			IF NEW.biz_tag IS DISTINCT FROM OLD.biz_tag THEN
				RAISE EXCEPTION 'biz_tag "%" cannot be renamed', OLD.biz_tag
					USING ERRCODE = 'LF005',
						  HINT = 'Insert a new row for the new tag instead.';
			END IF;
			IF NEW.max_id OPERATOR(pg_catalog.<) OLD.max_id THEN
				RAISE EXCEPTION 'max_id of biz_tag "%" cannot move backwards', OLD.biz_tag
					USING ERRCODE = 'LF005',
						  DETAIL = pg_catalog.format('max_id is %s; the update would set it to %s.',
													 OLD.max_id, NEW.max_id),
						  HINT = 'IDs below max_id may already have been handed out; lowering it would repeat them.';
			END IF;
		END IF;
	END IF;
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

--
-- The way back for a database that leaf_alloc_replicated takes for a
-- logical replica wrongly: a session that set session_replication_role =
-- replica itself and wrote leaf's tables without applying anything (an
-- administrator's, or leaf's own before 1.5 under a role set by the
-- configuration).  Removes the rows such sessions made and returns their
-- origins.  Refused while a subscription of this database, enabled or
-- not, holds one of leaf's tables, and while a row made by the apply of a
-- subscription is recorded (dropped since): those counters and leases are
-- a publisher's, and only leaf_alloc_cutover() makes them this
-- database's.  Runs as its caller, who needs DELETE on
-- leaf_alloc_replicated (its owner, a superuser); EXECUTE is not
-- PUBLIC's.
--
CREATE FUNCTION @extschema@.leaf_alloc_replicated_clear()
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	ext oid;
	found text;
BEGIN
	SELECT n.nspname, e.oid INTO STRICT nsp, ext
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	-- no apply may record a row while this looks
	EXECUTE pg_catalog.format('LOCK TABLE %I.leaf_alloc_replicated IN SHARE ROW EXCLUSIVE MODE', nsp);
	SELECT s.subname INTO found
	  FROM pg_catalog.pg_subscription s
	  JOIN pg_catalog.pg_subscription_rel r ON r.srsubid OPERATOR(pg_catalog.=) s.oid
	  JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) r.srrelid
	 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
	   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
	   AND d.refobjid OPERATOR(pg_catalog.=) ext
	   AND d.deptype OPERATOR(pg_catalog.=) 'e'
	   AND s.subdbid OPERATOR(pg_catalog.=)
		   (SELECT b.oid FROM pg_catalog.pg_database b
			 WHERE b.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
	 ORDER BY s.subname LIMIT 1;
	IF found IS NOT NULL THEN
		RAISE EXCEPTION 'cannot clear leaf_alloc_replicated while subscription % replicates leaf''s tables into this database',
			pg_catalog.quote_ident(found)
			USING ERRCODE = '55000',
				  HINT = 'Once the publisher hands out no more IDs, disable the subscription and take the counters over with leaf_alloc_cutover(); see docs/copies.md.';
	END IF;
	EXECUTE pg_catalog.format('SELECT r.origin FROM %I.leaf_alloc_replicated r '
							  'WHERE NOT pg_catalog.starts_with(r.origin, $1) '
							  'ORDER BY r.origin LIMIT 1', nsp)
		INTO found USING 'session_replication_role replica ';
	IF found IS NOT NULL THEN
		RAISE EXCEPTION 'cannot clear leaf_alloc_replicated: it records the apply of a subscription'
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('leaf_alloc_replicated records %s.', found),
				  HINT = 'The counters and leases here are a publisher''s: take them over with leaf_alloc_cutover(); see docs/copies.md.';
	END IF;
	RETURN QUERY EXECUTE pg_catalog.format('DELETE FROM %I.leaf_alloc_replicated RETURNING origin', nsp);
END
$$;

REVOKE ALL ON FUNCTION @extschema@.leaf_alloc_replicated_clear() FROM PUBLIC;

--
-- The protocol of the leases, one function per step, each in one
-- transaction: the snowflake worker (src/snowflake/leaf_sf_db.c) calls
-- them over libpq, as the role of leaf.alloc_conninfo, with its settings
-- as arguments.  What needs the caller's clock stays with the caller: it
-- reads leaf_copy_identity.now_ms first and compares its own clock with
-- it, counting half the round trip as unknown; the functions count every
-- time on this database's clock_timestamp().
--
-- They run as their caller (SECURITY INVOKER), so they can do no more
-- than the caller may do with the three tables, and EXECUTE is not
-- PUBLIC's: a role below superuser that holds worker IDs needs EXECUTE on
-- the seven of them besides its grants on the tables (docs/privileges.md).
-- Every statement reaches leaf's tables through the schema the extension
-- is in at the call, found by OID, and search_path is pinned to
-- pg_catalog, so nothing that a tenant creates takes part.
--
-- Each returns what it decided rather than raising an error: result is
-- 'ok', 'wait' (not now: try again soon), 'fail' (refused: try again much
-- later) or, for a renewal, 'lost' (the row is no longer the caller's),
-- and reason says why in words for the node's status.  A refused taking
-- leaves the tables as they were, except for a copy of the database seen
-- for the first time, which stays recorded so that its wait counts from
-- then.
--

--
-- Which copy of the database this is, against leaf_worker_lease_timeline
-- (see that table): 'fail' for a copy beside its original (a clone, a
-- CREATE DATABASE ... TEMPLATE) until leaf_worker_lease_confirm(); 'wait'
-- within earlier_holder_ms after the server started, where it holds
-- leases (a restore may have set them back); 'hold' within
-- earlier_holder_ms after a copy not recorded before was first seen
-- (lost or set back rows: a promotion, unless synchronous_failover says
-- it had every commit, a restore, pg_upgrade, a cut-over), which the
-- taking reports as 'wait' once its other checks have passed.  A copy
-- not recorded is recorded here; new_copy says so where others were
-- (last_timeline: the latest of this cluster, 0 if none; synchronous:
-- as recorded).
--
CREATE FUNCTION @extschema@.leaf_worker_lease_copy_check(
	earlier_holder_ms bigint,
	synchronous_failover boolean,
	OUT result text,
	OUT reason text,
	OUT new_copy boolean,
	OUT last_timeline bigint,
	OUT synchronous boolean)
RETURNS record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	here record;
	k record;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('SELECT * FROM %I.leaf_copy_identity', nsp) INTO STRICT here;
	here.timeline := coalesce(here.timeline, 0);
	-- the rows of this cluster; an unknown data directory (0) is any
	EXECUTE format(
		'SELECT coalesce(max(t.timeline), 0) AS last_timeline, '
		'coalesce(bool_or(t.database_oid = $4), false) AS this_db, '
		'coalesce(bool_or(t.database_oid <> $4), false) AS other_db, '
		'coalesce(bool_or(m), false) AS recorded, '
		'coalesce(bool_or(t.database_oid = $4 AND t.timeline = $2 AND NOT m), false) AS other_dir, '
		'max((date_part(''epoch'', t.seen_at) * 1000)::int8) FILTER (WHERE m) AS seen_ms, '
		'coalesce(bool_and(t.synchronous) FILTER (WHERE m), false) AS synchronous, '
		'EXISTS (SELECT FROM %1$I.leaf_worker_lease_timeline) AS any, '
		'EXISTS (SELECT FROM %1$I.leaf_worker_lease) AS leases '
		'FROM (SELECT NULL) AS d LEFT JOIN (SELECT x.*, x.database_oid = $4 AND x.timeline = $2 '
		'AND (x.data_directory = $3 OR x.data_directory = 0 OR $3 = 0) AS m '
		'FROM %1$I.leaf_worker_lease_timeline x WHERE x.system_identifier = $1) AS t ON true',
		nsp) INTO STRICT k
		USING here.system_identifier, here.timeline, here.data_directory, here.database_oid;
	new_copy := false;
	last_timeline := k.last_timeline;
	synchronous := k.synchronous;
	result := 'ok';
	IF k.leases AND here.now_ms <= here.started_ms + earlier_holder_ms THEN
		result := 'wait';
		reason := format('the allocation database''s server started %s ms ago and holds leases, which a restore may have set back: no worker ID is taken for %s ms more',
						 here.now_ms - here.started_ms,
						 here.started_ms + earlier_holder_ms - here.now_ms + 1);
		RETURN;
	END IF;
	-- another database is a copy only where this one was never recorded
	IF NOT k.recorded AND (k.other_dir OR (k.other_db AND NOT k.this_db)) THEN
		result := 'fail';
		reason := format('the allocation database (database %s of system %s, timeline %s) is a copy of the one the leases were recorded in, %s, whose original may serve the same worker IDs; no worker ID is taken there until a superuser, once the original serves no more, runs SELECT leaf_worker_lease_confirm() in it (docs/copies.md)',
						 here.database_oid, here.system_identifier, here.timeline,
						 CASE WHEN k.other_dir
						 THEN 'in another data directory: a clone started as a primary, or a file-system copy restored'
						 ELSE 'as another database of the same cluster: CREATE DATABASE ... TEMPLATE' END);
		RETURN;
	END IF;
	IF NOT k.recorded THEN
		-- the first copy needs no wait, nor does a synchronous promotion
		IF NOT k.any THEN
			synchronous := NOT k.leases;
		ELSE
			synchronous := k.last_timeline > 0 AND here.timeline > k.last_timeline
				AND coalesce(synchronous_failover, false);
		END IF;
		EXECUTE format('INSERT INTO %I.leaf_worker_lease_timeline (system_identifier, '
					   'timeline, data_directory, database_oid, seen_at, synchronous) '
					   'VALUES ($1, $2, $3, $4, clock_timestamp(), $5) ON CONFLICT DO NOTHING', nsp)
			USING here.system_identifier, here.timeline, here.data_directory,
				  here.database_oid, synchronous;
		k.seen_ms := here.now_ms;
		new_copy := k.any;
	END IF;
	IF NOT synchronous AND here.now_ms <= k.seen_ms + earlier_holder_ms THEN
		result := 'hold';
		reason := format('the allocation database moved to timeline %s of system %s (a promotion, a restore or pg_upgrade, not confirmed as synchronous by "leaf.alloc_failover"), and leases written before may be lost: no worker ID is taken for %s ms more',
						 here.timeline, here.system_identifier,
						 k.seen_ms + earlier_holder_ms - here.now_ms + 1);
	END IF;
END
$$;

--
-- The row of leaf_worker_lease_fleet against the caller: the table of
-- worker IDs is the one its state file names (file_fleet_id, 0 for none),
-- nothing moved it away (moved_to), and the fleet's heartbeat, clock
-- drift and epoch are the caller's.  The first caller makes the row (a
-- new random fleet_id); settings not recorded are recorded by a renewal
-- (renewing: every running node had the recorded ones), or by a taking
-- once no lease is live (recorded says so).
--
CREATE FUNCTION @extschema@.leaf_worker_lease_fleet_check(
	file_fleet_id bigint,
	renewing boolean,
	heartbeat_ms integer,
	max_clock_drift_ms integer,
	epoch_ms bigint,
	OUT result text,
	OUT reason text,
	OUT fleet_id bigint,
	OUT recorded boolean)
RETURNS record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	f record;
	cnt bigint;
	live boolean;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	recorded := false;
	LOOP
		EXECUTE format('SELECT fleet_id, heartbeat_ms, max_clock_drift_ms, epoch_ms, moved_to '
					   'FROM %I.leaf_worker_lease_fleet', nsp) INTO f;
		GET DIAGNOSTICS cnt = ROW_COUNT;
		IF cnt = 0 THEN
			-- the first node: a new table of worker IDs gets its identity
			EXECUTE format('INSERT INTO %I.leaf_worker_lease_fleet (fleet_id) '
						   'VALUES ((random() * 9e18)::int8 + 1) ON CONFLICT (one) DO NOTHING', nsp);
			CONTINUE;
		END IF;
		fleet_id := f.fleet_id;
		IF coalesce(file_fleet_id, 0) <> 0 AND file_fleet_id <> f.fleet_id THEN
			result := 'fail';
			reason := format('the table of worker IDs in the allocation database (fleet %s) is not the one this node held its worker ID in (fleet %s, as "leaf_snowflake.state" says): another database, or one restored from a dump; the nodes of a fleet share one, and a node moves to another only as docs/snowflake.md says ("Moving a fleet")',
							 f.fleet_id, file_fleet_id);
			RETURN;
		END IF;
		IF f.moved_to IS NOT NULL THEN
			-- leaf_alloc_cutover() fenced this table: its subscriber holds it
			result := 'fail';
			reason := format('the fleet''s worker IDs moved from this allocation database to %s with leaf_alloc_cutover(): no worker ID is taken or renewed here; "leaf.alloc_conninfo" should name the new one',
							 f.moved_to);
			RETURN;
		END IF;
		EXIT WHEN f.heartbeat_ms IS NOT NULL AND f.max_clock_drift_ms IS NOT NULL
			AND f.epoch_ms IS NOT NULL;
		IF NOT renewing THEN
			EXECUTE format('SELECT EXISTS (SELECT FROM %1$I.leaf_worker_lease AS l, '
						   '%1$I.leaf_worker_lease_fleet AS f WHERE l.expires_at + '
						   '(coalesce(f.max_clock_drift_ms, 0) * ''1 ms''::interval) >= clock_timestamp())',
						   nsp) INTO live;
			IF live THEN
				result := 'wait';
				reason := 'the fleet''s heartbeat, clock drift and epoch are not recorded in leaf_worker_lease_fleet, and leases are live: their holders record theirs at their next renewal';
				RETURN;
			END IF;
		END IF;
		EXECUTE format('UPDATE %I.leaf_worker_lease_fleet SET heartbeat_ms = $1, '
					   'max_clock_drift_ms = $2, epoch_ms = $3 WHERE heartbeat_ms IS NULL '
					   'OR max_clock_drift_ms IS NULL OR epoch_ms IS NULL', nsp)
			USING heartbeat_ms, max_clock_drift_ms, epoch_ms;
		GET DIAGNOSTICS cnt = ROW_COUNT;
		IF cnt = 1 THEN
			recorded := true;
			result := 'ok';
			RETURN;
		END IF;
		-- recorded meanwhile by another node: compare with those
		renewing := false;
	END LOOP;
	IF f.heartbeat_ms <> heartbeat_ms OR f.max_clock_drift_ms <> max_clock_drift_ms THEN
		result := 'fail';
		reason := format('"leaf.heartbeat_interval" is %s ms and "leaf.max_clock_drift_ms" %s ms here, but the fleet''s table of worker IDs records %s ms and %s ms (leaf_worker_lease_fleet): every node of a fleet uses the same, as they bound how long a holder whose row is gone may still serve',
						 heartbeat_ms, max_clock_drift_ms, f.heartbeat_ms, f.max_clock_drift_ms);
	ELSIF f.epoch_ms <> epoch_ms THEN
		result := 'fail';
		reason := format('"leaf.snowflake_epoch" is %s here, but the fleet''s table of worker IDs records %s (leaf_worker_lease_fleet): the nodes of a fleet share an epoch, as a timestamp of one means another instant under another',
						 epoch_ms, f.epoch_ms);
	ELSE
		result := 'ok';
	END IF;
END
$$;

--
-- Which worker ID a taking takes (see leaf_worker_lease_take), in the
-- caller's transaction, with its row, if any, locked: the hand-set one
-- (want_worker_id >= 0), refused ('fail') while another data directory
-- holds it; the row of this data directory, waited for ('wait') while its
-- lease runs; the lowest free one up to max_worker_id; the one whose
-- lease ended longest ago, more than max_clock_drift_ms ago, and whose
-- mark has passed; else 'wait'.  A bound row's lease does not end by time
-- for other holders: it is taken over only once given up (which unbinds
-- it), or once its reclaim_after_ms and max_clock_drift_ms have passed
-- since its last renewal.  earlier_hwm_ms is the row's mark in the
-- terms of epoch_ms, taken_from 'nobody', 'self' or 'other', and known
-- whether the row is the run of file_token.
--
CREATE FUNCTION @extschema@.leaf_worker_lease_pick(
	holder_identity text,
	want_worker_id integer,
	file_token bigint,
	max_worker_id integer,
	max_clock_drift_ms integer,
	epoch_ms bigint,
	OUT result text,
	OUT reason text,
	OUT worker_id integer,
	OUT taken_from text,
	OUT earlier_hwm_ms bigint,
	OUT known boolean)
RETURNS record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	r record;
	cnt bigint;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	result := 'ok';
	taken_from := 'nobody';
	earlier_hwm_ms := 0;
	known := false;
	-- our own row: a hand-set worker ID's, or the one we were given
	EXECUTE format('SELECT worker_id, hwm_ms, epoch_ms, holder_identity = $1 AS own, '
				   'holder_address, hand_set, holder_token, expires_at < clock_timestamp() AS ended, '
				   '(date_part(''epoch'', expires_at - clock_timestamp()) * 1000)::int8 AS ends_in_ms '
				   'FROM %I.leaf_worker_lease WHERE CASE WHEN $2 >= 0 THEN worker_id = $2 '
				   'ELSE holder_identity = $1 AND NOT hand_set END '
				   'ORDER BY worker_id LIMIT 1 FOR UPDATE', nsp)
		INTO r USING holder_identity, want_worker_id;
	GET DIAGNOSTICS cnt = ROW_COUNT;
	IF cnt > 0 THEN
		worker_id := r.worker_id;
		-- IDs under a later epoch carry the same timestamp lower
		earlier_hwm_ms := r.hwm_ms + greatest(epoch_ms - r.epoch_ms, 0);
		IF NOT r.own THEN
			-- only a hand-set worker ID can be held by another
			result := 'fail';
			reason := format('"leaf.worker_id" is %s, but %s holds worker ID %s in the allocation database%s; to move it, stop that node for good and delete its row of leaf_worker_lease there',
							 want_worker_id, r.holder_address, want_worker_id,
							 CASE WHEN r.hand_set THEN ' (set by hand as well)' ELSE '' END);
			RETURN;
		END IF;
		IF NOT r.ended THEN
			-- a copy of this data directory that runs (a volume clone
			-- keeps the inode), or this node before a stop that did not
			-- end its lease
			result := 'wait';
			reason := format('worker ID %s is held in the allocation database by a node with this data directory''s identity (%s, address %s) whose lease ends in %s ms: a copy of this data directory that is running, or this node before a stop that did not end its lease; waiting for the lease to end',
							 r.worker_id, holder_identity, r.holder_address, r.ends_in_ms);
			RETURN;
		END IF;
		taken_from := 'self';
		-- the run that the state file names, or another one
		known := coalesce(file_token, 0) <> 0 AND r.holder_token = file_token;
	ELSIF want_worker_id >= 0 THEN
		worker_id := want_worker_id;
	ELSE
		-- no row of ours: the lowest free worker ID, or one past its lease
		EXECUTE format('SELECT g FROM generate_series(0, $1) AS g WHERE NOT EXISTS '
					   '(SELECT FROM %I.leaf_worker_lease AS l WHERE l.worker_id = g) '
					   'ORDER BY g LIMIT 1', nsp) INTO worker_id USING max_worker_id;
		IF worker_id IS NULL THEN
			EXECUTE format('SELECT worker_id, hwm_ms, epoch_ms FROM %I.leaf_worker_lease '
						   'WHERE NOT hand_set AND worker_id <= $1 '
						   'AND CASE WHEN bound THEN renewed_at + '
						   '((reclaim_after_ms + $2)::float8 * ''1 ms''::interval) < clock_timestamp() '
						   'ELSE expires_at + ($2::float8 * ''1 ms''::interval) < clock_timestamp() END '
						   'AND hwm_ms < (date_part(''epoch'', clock_timestamp()) * 1000)::int8 '
						   'ORDER BY expires_at LIMIT 1 FOR UPDATE SKIP LOCKED', nsp)
				INTO r USING max_worker_id, max_clock_drift_ms;
			GET DIAGNOSTICS cnt = ROW_COUNT;
			IF cnt = 0 THEN
				result := 'wait';
				EXECUTE format('SELECT count(*) FROM %I.leaf_worker_lease '
							   'WHERE bound AND worker_id <= $1', nsp)
					INTO cnt USING max_worker_id;
				reason := format('every worker ID from 0 to %s is held in the allocation database, and none has a lease that ended and a mark that has passed: waiting for one%s',
								 max_worker_id,
								 CASE WHEN cnt > 0 THEN format(' (%s of them bound to their holders with "leaf.worker_id_lease" = ''bound'': taken over only once given up, or after the holder''s "leaf.worker_id_reclaim_after" without renewal)', cnt) ELSE '' END);
				RETURN;
			END IF;
			worker_id := r.worker_id;
			earlier_hwm_ms := r.hwm_ms + greatest(epoch_ms - r.epoch_ms, 0);
			taken_from := 'other';
		END IF;
	END IF;
END
$$;

--
-- Take a worker ID for the data directory holder_identity (at
-- holder_address): want_worker_id if set by hand (>= 0: a row of its own,
-- refused while another data directory holds it, never taken over), else
-- the row this data directory holds once its lease has ended, else the
-- lowest worker ID up to max_worker_id without a row, else the one whose
-- lease ended longest ago, more than max_clock_drift_ms ago, and whose
-- mark has passed (leaf_worker_lease_pick).  The row gets the new token,
-- whether it is bound (leaf.worker_id_lease = 'bound', taken over by time
-- only reclaim_after_ms after its last renewal, never if NULL), a lease of lease_ms and
-- a mark of at least floor_ms and of its former mark, moved by the
-- difference of the epochs if its holder's was earlier (earlier_hwm_ms).
-- file_token and file_fleet_id are what the caller's state file names
-- (0 for nothing): a row of this data directory with another token is
-- taken back as fresh, as one taken from no row or from another holder
-- (taken_from 'nobody', 'self' or 'other'); a fresh holder serves only
-- past earlier_holder_ms on its clock.  Refused while logical replication
-- writes leaf's tables here, by leaf_worker_lease_copy_check(), by
-- leaf_worker_lease_fleet_check(), and for a layout other than the other
-- holders'.  new_copy, last_timeline and copy_synchronous are the copy
-- check's, fleet_recorded the fleet check's, for the caller's log.
--
CREATE FUNCTION @extschema@.leaf_worker_lease_take(
	holder_identity text,
	holder_address text,
	want_worker_id integer,
	floor_ms bigint,
	file_token bigint,
	file_fleet_id bigint,
	token bigint,
	layout text,
	max_worker_id integer,
	heartbeat_ms integer,
	max_clock_drift_ms integer,
	epoch_ms bigint,
	lease_ms bigint,
	earlier_holder_ms bigint,
	synchronous_failover boolean,
	bound boolean DEFAULT false,
	reclaim_after_ms bigint DEFAULT NULL,
	OUT result text,
	OUT reason text,
	OUT worker_id integer,
	OUT fleet_id bigint,
	OUT fresh boolean,
	OUT taken_from text,
	OUT earlier_hwm_ms bigint,
	OUT recorded_hwm_ms bigint,
	OUT new_copy boolean,
	OUT last_timeline bigint,
	OUT copy_synchronous boolean,
	OUT fleet_recorded boolean)
RETURNS record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	here record;
	cc record;
	fc record;
	r record;
	cnt bigint;
	known boolean := false;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('SELECT replicated, coalesce(timeline, 0) AS timeline '
				   'FROM %I.leaf_copy_identity', nsp) INTO STRICT here;
	IF here.replicated IS NOT NULL THEN
		result := 'fail';
		reason := format('the allocation database is written by logical replication, and its leases are a publisher''s, whose nodes hold the same worker IDs: no worker ID is taken or renewed there until leaf_alloc_cutover() takes the fleet over (docs/copies.md). %s',
						 here.replicated);
		RETURN;
	END IF;
	EXECUTE format('SELECT * FROM %I.leaf_worker_lease_copy_check($1, $2)', nsp)
		INTO STRICT cc USING earlier_holder_ms, synchronous_failover;
	new_copy := cc.new_copy;
	last_timeline := cc.last_timeline;
	copy_synchronous := cc.synchronous;
	IF cc.result IN ('wait', 'fail') THEN
		result := cc.result;
		reason := cc.reason;
		RETURN;
	END IF;
	taken_from := 'nobody';
	earlier_hwm_ms := 0;
	-- a refusal from here on undoes the block (LF199 goes no further)
	BEGIN
		-- one taking at a time (renewals, which take row locks, go on)
		EXECUTE format('LOCK TABLE %I.leaf_worker_lease IN SHARE UPDATE EXCLUSIVE MODE', nsp);
		EXECUTE format('SELECT * FROM %I.leaf_worker_lease_fleet_check($1, false, $2, $3, $4)', nsp)
			INTO STRICT fc USING file_fleet_id, heartbeat_ms, max_clock_drift_ms, epoch_ms;
		fleet_id := fc.fleet_id;
		fleet_recorded := fc.recorded;
		IF fc.result <> 'ok' THEN
			result := fc.result;
			reason := fc.reason;
			RAISE SQLSTATE 'LF199';
		END IF;
		-- never mix layouts among the holders of one table
		EXECUTE format('SELECT layout, worker_id, holder_address FROM %I.leaf_worker_lease '
					   'WHERE layout <> $1 LIMIT 1', nsp) INTO r USING layout;
		GET DIAGNOSTICS cnt = ROW_COUNT;
		IF cnt > 0 THEN
			result := 'fail';
			reason := format('"leaf.snowflake_layout" is %s, but worker ID %s in the allocation database is held under layout %s (by %s): the nodes of one table of worker IDs share a layout',
							 layout, r.worker_id, r.layout, r.holder_address);
			RAISE SQLSTATE 'LF199';
		END IF;
		-- the worker ID: our own row, a free one, or one past its lease
		EXECUTE format('SELECT * FROM %I.leaf_worker_lease_pick($1, $2, $3, $4, $5, $6)', nsp)
			INTO STRICT r USING holder_identity, want_worker_id, file_token,
								max_worker_id, max_clock_drift_ms, epoch_ms;
		worker_id := r.worker_id;
		taken_from := r.taken_from;
		earlier_hwm_ms := r.earlier_hwm_ms;
		known := r.known;
		IF r.result <> 'ok' THEN
			result := r.result;
			reason := r.reason;
			RAISE SQLSTATE 'LF199';
		END IF;
		-- not within the longest lease of a lost timeline or of a restore,
		-- not even our own row: an earlier holder whose row was lost or set
		-- back may still serve with it
		IF cc.result = 'hold' THEN
			result := 'wait';
			reason := cc.reason;
			RAISE SQLSTATE 'LF199';
		END IF;
		EXECUTE format('INSERT INTO %I.leaf_worker_lease AS l (worker_id, holder_identity, '
					   'holder_address, holder_token, hand_set, layout, epoch_ms, hwm_ms, '
					   'expires_at, renewed_at, held_since, timeline, bound, reclaim_after_ms) '
					   'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, '
					   'clock_timestamp() + ($9::float8 * ''1 ms''::interval), '
					   'clock_timestamp(), clock_timestamp(), $10, $11, $12) '
					   'ON CONFLICT (worker_id) DO UPDATE SET '
					   'holder_identity = excluded.holder_identity, '
					   'holder_address = excluded.holder_address, '
					   'holder_token = excluded.holder_token, hand_set = excluded.hand_set, '
					   'layout = excluded.layout, epoch_ms = excluded.epoch_ms, '
					   'hwm_ms = excluded.hwm_ms, expires_at = excluded.expires_at, '
					   'renewed_at = excluded.renewed_at, '
					   'held_since = CASE WHEN l.holder_identity = excluded.holder_identity '
					   'THEN l.held_since ELSE excluded.held_since END, '
					   'timeline = excluded.timeline, bound = excluded.bound, '
					   'reclaim_after_ms = excluded.reclaim_after_ms RETURNING hwm_ms', nsp)
			INTO STRICT recorded_hwm_ms
			USING worker_id, holder_identity, holder_address, token, want_worker_id >= 0,
				  layout, epoch_ms, greatest(earlier_hwm_ms, floor_ms, 1), lease_ms,
				  here.timeline, coalesce(bound, false),
				  CASE WHEN bound AND reclaim_after_ms > 0 THEN reclaim_after_ms END;
	EXCEPTION WHEN SQLSTATE 'LF199' THEN
		RETURN;
	END;
	result := 'ok';
	fresh := NOT known;
END
$$;

--
-- Renew the lease of worker_id held by holder_identity with token: the
-- mark becomes at least hwm_ms (recorded_hwm_ms: what the row holds), and
-- the lease lasts lease_ms from now.  First the fleet check with the
-- holder's fleet_id and settings (renewing); 'lost' where the row is not
-- the holder's any more (deleted, taken over, lost with a failover, given
-- up), where the fleet has moved, or where logical replication writes
-- leaf's tables (the leases are a publisher's: the holder takes anew, and
-- the taking says why).
--
CREATE FUNCTION @extschema@.leaf_worker_lease_renew(
	worker_id integer,
	holder_identity text,
	token bigint,
	hwm_ms bigint,
	lease_ms bigint,
	fleet_id bigint,
	heartbeat_ms integer,
	max_clock_drift_ms integer,
	epoch_ms bigint,
	OUT result text,
	OUT reason text,
	OUT recorded_hwm_ms bigint)
RETURNS record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	here record;
	fc record;
	cnt bigint;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('SELECT * FROM %I.leaf_worker_lease_fleet_check($1, true, $2, $3, $4)', nsp)
		INTO STRICT fc USING fleet_id, heartbeat_ms, max_clock_drift_ms, epoch_ms;
	IF fc.result <> 'ok' THEN
		result := fc.result;
		reason := fc.reason;
		RETURN;
	END IF;
	EXECUTE format('SELECT replicated, timeline FROM %I.leaf_copy_identity', nsp)
		INTO STRICT here;
	IF here.replicated IS NOT NULL THEN
		result := 'lost';
		reason := format('the allocation database is written by logical replication, and its leases are a publisher''s, whose nodes hold the same worker IDs: no worker ID is taken or renewed there until leaf_alloc_cutover() takes the fleet over (docs/copies.md). %s',
						 here.replicated);
		RETURN;
	END IF;
	EXECUTE format('UPDATE %1$I.leaf_worker_lease SET hwm_ms = greatest(hwm_ms, $4), '
				   'expires_at = clock_timestamp() + ($5::float8 * ''1 ms''::interval), '
				   'renewed_at = clock_timestamp(), timeline = $6 '
				   'WHERE worker_id = $1 AND holder_identity = $2 AND holder_token = $3 '
				   'AND NOT EXISTS (SELECT FROM %1$I.leaf_worker_lease_fleet AS f '
				   'WHERE f.moved_to IS NOT NULL) RETURNING hwm_ms', nsp)
		INTO recorded_hwm_ms
		USING worker_id, holder_identity, token, hwm_ms, lease_ms, here.timeline;
	GET DIAGNOSTICS cnt = ROW_COUNT;
	IF cnt <> 1 THEN
		result := 'lost';
		reason := format('the allocation database no longer holds worker ID %s for this node (its row was deleted, taken over, or lost with a failover)',
						 worker_id);
		RETURN;
	END IF;
	result := 'ok';
END
$$;

--
-- End the lease of worker_id held by holder_identity with token now,
-- recording mark hwm_ms: at a clean stop the row stays the holder's, for
-- its data directory to take back at once (leaf_worker_lease_release);
-- given up (leaf_worker_lease_give_up), it becomes no data directory's,
-- so that no node takes it back as its own, and is taken over once its
-- mark has passed, bound or not.  False if the row is not the holder's.
--
CREATE FUNCTION @extschema@.leaf_worker_lease_release(
	worker_id integer,
	holder_identity text,
	token bigint,
	hwm_ms bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	cnt bigint;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('UPDATE %I.leaf_worker_lease SET hwm_ms = greatest(hwm_ms, $4), '
				   'expires_at = clock_timestamp() '
				   'WHERE worker_id = $1 AND holder_identity = $2 AND holder_token = $3', nsp)
		USING worker_id, holder_identity, token, hwm_ms;
	GET DIAGNOSTICS cnt = ROW_COUNT;
	RETURN cnt = 1;
END
$$;

CREATE FUNCTION @extschema@.leaf_worker_lease_give_up(
	worker_id integer,
	holder_identity text,
	token bigint,
	hwm_ms bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp text;
	cnt bigint;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('UPDATE %I.leaf_worker_lease SET hwm_ms = greatest(hwm_ms, $4), '
				   'expires_at = clock_timestamp(), bound = false, '
				   'holder_identity = ''given up by '' || holder_identity '
				   'WHERE worker_id = $1 AND holder_identity = $2 AND holder_token = $3', nsp)
		USING worker_id, holder_identity, token, hwm_ms;
	GET DIAGNOSTICS cnt = ROW_COUNT;
	RETURN cnt = 1;
END
$$;

REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_copy_check(bigint, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_fleet_check(bigint, boolean, integer, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_pick(text, integer, bigint, integer, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_take(text, text, integer, bigint, bigint, bigint, bigint, text, integer, integer, integer, bigint, bigint, bigint, boolean, boolean, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_renew(integer, text, bigint, bigint, bigint, bigint, integer, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_release(integer, text, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_give_up(integer, text, bigint, bigint) FROM PUBLIC;

--
-- Segment mode: what an administrator does to the counters by hand, as
-- functions.  A statement such as DELETE FROM leaf_alloc WHERE biz_tag =
-- '...' resolves its table, its operators and its functions through the
-- caller's search_path, which the owner of the database chooses (ALTER
-- DATABASE ... SET search_path): an operator = for varchar of the
-- owner's ran as the superuser who followed the documentation.  These
-- functions pin search_path to pg_catalog, name every operator, and reach
-- leaf's tables through the schema the extension is in at the call,
-- found by OID; they run as their caller (SECURITY INVOKER), so each
-- needs the privileges of the statement it stands for.
--

--
-- Retire a tag: delete its row of leaf_alloc, whose trigger keeps its
-- max_id in leaf_alloc_retired.  Returns that max_id.
--
CREATE FUNCTION @extschema@.leaf_segment_retire(biz_tag text)
RETURNS bigint
LANGUAGE plpgsql STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
	mark bigint;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format('DELETE FROM %I.leaf_alloc '
							  'WHERE biz_tag OPERATOR(pg_catalog.=) $1 '
							  'RETURNING max_id', nsp)
		INTO mark USING $1;
	IF mark IS NULL THEN
		RAISE EXCEPTION 'biz_tag "%" does not exist', $1
			USING ERRCODE = 'LF001',
				  DETAIL = 'leaf_alloc holds no row for it.';
	END IF;
	RETURN mark;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_segment_retire(text) IS
'deletes a biz_tag from leaf_alloc, leaving its max_id in leaf_alloc_retired; returns that max_id';

--
-- Create a tag.  1.3's leaf_segment_create let the INSERT raise what it
-- met: a tag that exists gave the unique violation 23505 of leaf_alloc's
-- key, a step that is not positive the check violation 23514, both from
-- inside PL/pgSQL.  They are refused here first, with leaf's codes and a
-- hint; a tag that exists is LF013.  With if_not_exists => true, a tag
-- that exists with the same step and description is taken as created
-- (with a notice), for scripts that run more than once; start is not
-- compared, as max_id moves on once IDs are handed out.  The INSERT takes
-- ON CONFLICT DO NOTHING, so that a tag created at the same time by
-- another session is found as well.
--
-- The old signature is renamed, not dropped, until its grants are
-- carried over to the new one below.
ALTER FUNCTION @extschema@.leaf_segment_create(text, integer, bigint, text)
	RENAME TO leaf_segment_create_1_4;

CREATE FUNCTION @extschema@.leaf_segment_create(biz_tag text,
												step integer DEFAULT 1000,
												start bigint DEFAULT 1,
												description text DEFAULT NULL,
												if_not_exists boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
	cnt bigint;
	old_step integer;
	old_description text;
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'biz_tag must not be null'
			USING ERRCODE = '22004';
	END IF;
	-- before the cast to varchar(128), which counts characters; the
	-- trigger leaf_alloc_admit checks the rest
	IF pg_catalog.octet_length($1) OPERATOR(pg_catalog.>) 128 THEN
		RAISE EXCEPTION 'biz_tag "%..." is too long', pg_catalog.left($1, 32)
			USING ERRCODE = 'LF002',
				  DETAIL = pg_catalog.format('A biz_tag is at most 128 bytes; this one has %s.',
											 pg_catalog.octet_length($1));
	END IF;
	IF $2 IS NULL OR $2 OPERATOR(pg_catalog.<=) 0 THEN
		RAISE EXCEPTION 'step of biz_tag "%" must be positive', $1
			USING ERRCODE = '22023',
				  DETAIL = pg_catalog.format('step is %s.', COALESCE($2::pg_catalog.text, 'NULL')),
				  HINT = 'A step is the number of IDs each load takes from leaf_alloc: 1 or more (1000 if left out).';
	END IF;
	IF $3 IS NULL OR $3 OPERATOR(pg_catalog.<) 0 THEN
		RAISE EXCEPTION 'start of biz_tag "%" must not be negative', $1
			USING ERRCODE = '22023',
				  DETAIL = pg_catalog.format('start is %s.', COALESCE($3::pg_catalog.text, 'NULL')),
				  HINT = 'start is the first ID of the tag: 0 or more (1 if left out).';
	END IF;
	IF $3 OPERATOR(pg_catalog.>) (9223372036854775807 OPERATOR(pg_catalog.-) $2) THEN
		RAISE EXCEPTION 'start of biz_tag "%" leaves less than one step of IDs below the end of bigint', $1
			USING ERRCODE = '22023',
				  DETAIL = pg_catalog.format('start is %s, step %s; the last ID is 9223372036854775807.', $3, $2),
				  HINT = 'Use a smaller start or a smaller step.';
	END IF;
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format('INSERT INTO %I.leaf_alloc (biz_tag, max_id, step, description) '
							  'VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING', nsp)
		USING $1, $3, $2, $4;
	GET DIAGNOSTICS cnt = ROW_COUNT;
	IF cnt OPERATOR(pg_catalog.=) 1 THEN
		RETURN;
	END IF;
	IF NOT COALESCE($5, false) THEN
		RAISE EXCEPTION 'biz_tag "%" already exists', $1
			USING ERRCODE = 'LF013',
				  DETAIL = 'leaf_alloc holds a row for it.',
				  HINT = 'Pass if_not_exists => true to accept a tag that exists with the same step and description, or change it with leaf_segment_alter().';
	END IF;
	EXECUTE pg_catalog.format('SELECT a.step, a.description FROM %I.leaf_alloc a '
							  'WHERE a.biz_tag OPERATOR(pg_catalog.=) $1', nsp)
		INTO old_step, old_description USING $1;
	IF old_step IS DISTINCT FROM $2 OR old_description IS DISTINCT FROM $4 THEN
		RAISE EXCEPTION 'biz_tag "%" already exists with other settings', $1
			USING ERRCODE = 'LF013',
				  DETAIL = pg_catalog.format('leaf_alloc holds step %s and description %s for it; step %s and description %s were given.',
											 COALESCE(old_step::pg_catalog.text, 'NULL'),
											 COALESCE(pg_catalog.quote_literal(old_description), 'NULL'),
											 $2, COALESCE(pg_catalog.quote_literal($4), 'NULL')),
				  HINT = 'Give the step and description it has, or change them with leaf_segment_alter().';
	END IF;
	RAISE NOTICE 'biz_tag "%" already exists, skipping', $1;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_segment_create(text, integer, bigint, text, boolean) IS
'adds a biz_tag to leaf_alloc with max_id = start; if_not_exists accepts one that exists with the same step and description';

--
-- Whoever could run the old leaf_segment_create can run the new one, and
-- no one else: an administrator who revoked it from PUBLIC and granted it
-- to a role keeps that after ALTER EXTENSION leaf UPDATE.
--
DO $$
DECLARE
	old_acl pg_catalog.aclitem[];
	g record;
BEGIN
	SELECT p.proacl INTO old_acl FROM pg_catalog.pg_proc p
	 WHERE p.oid OPERATOR(pg_catalog.=)
		   '@extschema@.leaf_segment_create_1_4(text, integer, bigint, text)'::pg_catalog.regprocedure;
	IF old_acl IS NULL THEN
		RETURN;					-- the default: EXECUTE for PUBLIC, as now
	END IF;
	REVOKE ALL ON FUNCTION @extschema@.leaf_segment_create(text, integer, bigint, text, boolean) FROM PUBLIC;
	FOR g IN SELECT a.grantee, a.is_grantable
			   FROM pg_catalog.aclexplode(old_acl) a
			  WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.leaf_segment_create(text, integer, bigint, text, boolean) TO %s%s',
								  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
								  ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
								  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
	END LOOP;
END
$$;

DROP FUNCTION @extschema@.leaf_segment_create_1_4(text, integer, bigint, text);

--
-- Change a tag: its step, its max_id (raised only: the trigger
-- leaf_alloc_guard refuses a lower one with LF005) and its description;
-- what is NULL stays as it is.
--
CREATE FUNCTION @extschema@.leaf_segment_alter(biz_tag text,
											   step integer DEFAULT NULL,
											   max_id bigint DEFAULT NULL,
											   description text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
	cnt bigint;
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'biz_tag must not be null'
			USING ERRCODE = '22004';
	END IF;
	IF $2 OPERATOR(pg_catalog.<=) 0 THEN
		RAISE EXCEPTION 'step of biz_tag "%" must be positive', $1
			USING ERRCODE = '22023',
				  DETAIL = pg_catalog.format('step is %s.', $2);
	END IF;
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format('UPDATE %I.leaf_alloc '
							  'SET step = COALESCE($2, step), '
							  'max_id = COALESCE($3, max_id), '
							  'description = COALESCE($4, description) '
							  'WHERE biz_tag OPERATOR(pg_catalog.=) $1', nsp)
		USING $1, $2, $3, $4;
	GET DIAGNOSTICS cnt = ROW_COUNT;
	IF cnt OPERATOR(pg_catalog.=) 0 THEN
		RAISE EXCEPTION 'biz_tag "%" does not exist', $1
			USING ERRCODE = 'LF001',
				  DETAIL = 'leaf_alloc holds no row for it.',
				  HINT = 'Add it with leaf_segment_create().';
	END IF;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_segment_alter(text, integer, bigint, text) IS
'changes the step, max_id (upwards only) or description of a biz_tag in leaf_alloc; NULL leaves a column as it is';

--
-- Raise the max_id of one tag, or of every tag of leaf_alloc (biz_tag
-- NULL), by raise_by.  Returns how many tags it raised.
--
CREATE FUNCTION @extschema@.leaf_segment_raise(raise_by bigint,
											   biz_tag text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
	cnt bigint;
BEGIN
	IF $1 IS NULL OR $1 OPERATOR(pg_catalog.<=) 0 THEN
		RAISE EXCEPTION 'raise_by must be positive'
			USING ERRCODE = '22023',
				  DETAIL = pg_catalog.format('raise_by is %s.', COALESCE($1::text, 'NULL')),
				  HINT = 'max_id never moves backwards.';
	END IF;
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format('UPDATE %I.leaf_alloc '
							  'SET max_id = max_id OPERATOR(pg_catalog.+) $1 '
							  'WHERE $2 IS NULL OR biz_tag OPERATOR(pg_catalog.=) $2', nsp)
		USING $1, $2;
	GET DIAGNOSTICS cnt = ROW_COUNT;
	IF $2 IS NOT NULL AND cnt OPERATOR(pg_catalog.=) 0 THEN
		RAISE EXCEPTION 'biz_tag "%" does not exist', $2
			USING ERRCODE = 'LF001',
				  DETAIL = 'leaf_alloc holds no row for it.',
				  HINT = 'Add it with leaf_segment_create().';
	END IF;
	RETURN cnt;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_segment_raise(bigint, text) IS
'raises max_id of a biz_tag, or of every biz_tag when it is NULL, by raise_by; returns how many it raised';

--
-- Forget the mark a retired tag left in leaf_alloc_retired, so that the
-- name starts over when it is created again.  Returns the mark.  For the
-- owner of leaf_alloc_retired, as the DELETE it stands for.
--
CREATE FUNCTION @extschema@.leaf_segment_forget(biz_tag text)
RETURNS bigint
LANGUAGE plpgsql STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
	mark bigint;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format('DELETE FROM %I.leaf_alloc_retired '
							  'WHERE biz_tag OPERATOR(pg_catalog.=) $1 '
							  'RETURNING max_id', nsp)
		INTO mark USING $1;
	IF mark IS NULL THEN
		RAISE EXCEPTION 'biz_tag "%" has no mark in leaf_alloc_retired', $1
			USING ERRCODE = 'LF001';
	END IF;
	RETURN mark;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_segment_forget(text) IS
'deletes the mark of a retired biz_tag from leaf_alloc_retired, so that the name starts over; returns the mark';

REVOKE ALL ON FUNCTION @extschema@.leaf_segment_forget(text) FROM PUBLIC;

--
-- The acts on the tables of worker IDs that the documentation gives a
-- superuser of the allocation database, as functions for the same
-- reason: forgetting the row of a worker ID (a node stopped for good, or
-- every row after a move back to ZooKeeper) and forgetting the settings
-- the fleet recorded (before the nodes start with new ones).  For the
-- owner of the tables, as the statements they stand for.
--

--
-- Delete the row of worker_id from leaf_worker_lease, or every row when
-- worker_id is NULL.  Returns the highest mark (hwm_ms) of the rows
-- deleted, NULL if there were none.  A bound row is refused (55000)
-- unless force is true: its holder serves on while cut off from this
-- database, and, started again while it is unreachable, serves from its
-- state file, beside whoever takes the worker ID next.
--
CREATE FUNCTION @extschema@.leaf_worker_lease_forget(worker_id integer,
													 force boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
	mark bigint;
	cnt bigint;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	IF NOT COALESCE($2, false) THEN
		EXECUTE pg_catalog.format('SELECT pg_catalog.count(*), pg_catalog.min(worker_id) '
								  'FROM %I.leaf_worker_lease '
								  'WHERE ($1 IS NULL OR worker_id OPERATOR(pg_catalog.=) $1) AND bound', nsp)
			INTO cnt, mark USING $1;
		IF cnt OPERATOR(pg_catalog.>) 0 THEN
			RAISE EXCEPTION 'worker ID % is bound to its holder', mark
				USING ERRCODE = '55000',
					  DETAIL = pg_catalog.format('%s row(s) to forget were taken with "leaf.worker_id_lease" = ''bound'': a holder cut off from this database serves on, and one started again while it is unreachable serves from its state file.', cnt),
					  HINT = 'Stop the holder for good and delete its "leaf_snowflake.state" first, then pass force => true.';
		END IF;
	END IF;
	EXECUTE pg_catalog.format('WITH d AS (DELETE FROM %I.leaf_worker_lease '
							  'WHERE $1 IS NULL OR worker_id OPERATOR(pg_catalog.=) $1 '
							  'RETURNING hwm_ms) '
							  'SELECT pg_catalog.max(hwm_ms), pg_catalog.count(*) FROM d', nsp)
		INTO mark, cnt USING $1;
	IF $1 IS NOT NULL AND cnt OPERATOR(pg_catalog.=) 0 THEN
		RAISE EXCEPTION 'worker ID % has no row in leaf_worker_lease', $1
			USING ERRCODE = '22023';
	END IF;
	RETURN mark;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_worker_lease_forget(integer, boolean) IS
'deletes the row of a worker ID from leaf_worker_lease, or every row for NULL (a bound row only with force); returns the highest mark deleted';

--
-- Forget the heartbeat, the clock drift and the epoch that the fleet
-- recorded, so that the first node to take a worker ID records its own.
--
CREATE FUNCTION @extschema@.leaf_worker_lease_fleet_reset()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
BEGIN
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format('UPDATE %I.leaf_worker_lease_fleet '
							  'SET heartbeat_ms = NULL, max_clock_drift_ms = NULL, '
							  'epoch_ms = NULL', nsp);
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_worker_lease_fleet_reset() IS
'sets the heartbeat, clock drift and epoch recorded in leaf_worker_lease_fleet to NULL, for the first node to record its own';

REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_forget(integer, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.leaf_worker_lease_fleet_reset() FROM PUBLIC;

--
-- Time in the key: the smallest snowflake ID at or after an instant, under
-- the server's layout and epoch, for range scans by time on the key.
--
CREATE FUNCTION @extschema@.leaf_snowflake_min_id(ts timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'leaf_snowflake_min_id'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.leaf_snowflake_min_id(timestamptz) IS
'smallest snowflake ID any node may issue at or after ts, under leaf.snowflake_layout and leaf.snowflake_epoch (0 before the epoch)';

--
-- The same with the layout and the epoch given, for partition bounds,
-- indexes and generated columns (IMMUTABLE: they must match the server's
-- settings), and the way back: the start of the unit of time of an ID.
--
CREATE FUNCTION @extschema@.leaf_snowflake_min_id(ts timestamptz,
	layout text, epoch timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'leaf_snowflake_min_id_in'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.leaf_snowflake_min_id(timestamptz, text, timestamptz) IS
'smallest snowflake ID any node may issue at or after ts, under the layout (as leaf.snowflake_layout is written) and the epoch given (0 before the epoch)';

CREATE FUNCTION @extschema@.leaf_snowflake_time(id bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'leaf_snowflake_time'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.leaf_snowflake_time(bigint) IS
'start of the unit of time a snowflake ID was issued in, under leaf.snowflake_layout and leaf.snowflake_epoch';

CREATE FUNCTION @extschema@.leaf_snowflake_time(id bigint,
	layout text, epoch timestamptz)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'leaf_snowflake_time_in'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.leaf_snowflake_time(bigint, text, timestamptz) IS
'start of the unit of time a snowflake ID was issued in, under the layout and the epoch given';

-- When a segment ID was issued: one row per segment load, written by the
-- allocator in the transaction of the load (leaf_alloc_local.c), or by a
-- shard in the allocation database's own transaction of the load
-- (leaf_alloc_remote.c).  last_id is inclusive.  serving_first_id is the
-- first ID of the segment the loader was still handing out when it asked
-- for this load (NULL: none); see docs/segment.md.
--
CREATE TABLE @extschema@.leaf_segment_log (
	biz_tag varchar(128) NOT NULL,
	first_id bigint NOT NULL,
	last_id bigint NOT NULL,
	loaded_at timestamptz NOT NULL,
	loaded_by text NOT NULL,
	serving_first_id bigint,
	PRIMARY KEY (biz_tag, first_id),
	CHECK (last_id OPERATOR(pg_catalog.>=) first_id)
);

-- a load's pruning, and a loader's last load before an instant, scan
-- only the rows they need
CREATE INDEX leaf_segment_log_loader
	ON @extschema@.leaf_segment_log (biz_tag, loaded_by, loaded_at);

COMMENT ON TABLE @extschema@.leaf_segment_log IS
'one row per segment load: the IDs first_id to last_id (inclusive) of biz_tag, loaded at loaded_at by loaded_by (system identifier/database); written by the allocator only, pruned after leaf.segment_log_retention';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.leaf_segment_log', '');

REVOKE ALL ON @extschema@.leaf_segment_log FROM PUBLIC;

--
-- The window in which an ID of biz_tag can have been handed out: from the
-- load of its segment (earliest) until the first later load of the same
-- loader that was not asked for while the segment was still in use
-- (latest; NULL while there is none).  A row of NULLs when no recorded
-- segment holds the ID.
--
CREATE FUNCTION @extschema@.leaf_segment_issued(biz_tag text, id bigint,
	OUT earliest timestamptz, OUT latest timestamptz,
	OUT first_id bigint, OUT last_id bigint, OUT loaded_by text)
RETURNS record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
	found_tag boolean;
BEGIN
	IF $1 IS NULL OR $2 IS NULL THEN
		RAISE EXCEPTION 'biz_tag and id must not be null'
			USING ERRCODE = '22004';
	END IF;
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format(
		'SELECT s.loaded_at, '
		'(SELECT c.loaded_at FROM %1$I.leaf_segment_log c '
		' WHERE c.biz_tag OPERATOR(pg_catalog.=) s.biz_tag '
		' AND c.loaded_by OPERATOR(pg_catalog.=) s.loaded_by '
		' AND c.first_id OPERATOR(pg_catalog.>) s.first_id '
		' AND c.serving_first_id IS DISTINCT FROM s.first_id '
		' ORDER BY c.first_id LIMIT 1), '
		's.first_id, s.last_id, s.loaded_by '
		'FROM %1$I.leaf_segment_log s '
		'WHERE s.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar '
		'AND s.first_id OPERATOR(pg_catalog.<=) $2 '
		'AND s.last_id OPERATOR(pg_catalog.>=) $2 '
		'ORDER BY s.first_id DESC LIMIT 1', nsp)
		INTO earliest, latest, first_id, last_id, loaded_by USING $1, $2;
	IF first_id IS NULL THEN
		EXECUTE pg_catalog.format(
			'SELECT EXISTS (SELECT FROM %1$I.leaf_alloc a '
			'WHERE a.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar) '
			'OR EXISTS (SELECT FROM %1$I.leaf_segment_log s '
			'WHERE s.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar)', nsp)
			INTO STRICT found_tag USING $1;
		IF NOT found_tag THEN
			RAISE EXCEPTION 'biz_tag "%" does not exist', $1
				USING ERRCODE = 'LF001',
					  DETAIL = 'Neither leaf_alloc nor leaf_segment_log holds a row for it.';
		END IF;
	END IF;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_segment_issued(text, bigint) IS
'the window (earliest, latest) in which an ID of a biz_tag can have been handed out, from leaf_segment_log; NULLs when no recorded segment holds it';

--
-- Bounds on the IDs of biz_tag handed out in [from, until): every such ID
-- lies in [min_id, max_id].  For each loader, the segments it could still
-- hand out at "from" are its last load at or before "from" and the
-- segment it was serving then; later loads only give higher IDs.  min_id
-- is NULL when a loader of the tag has no row at or before "from" (the
-- record does not reach back far enough), max_id when no row was loaded
-- before "until".
--
CREATE FUNCTION @extschema@.leaf_segment_id_bounds(biz_tag text,
	"from" timestamptz, until timestamptz,
	OUT min_id bigint, OUT max_id bigint)
RETURNS record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
	found_tag boolean;
BEGIN
	IF $1 IS NULL OR $2 IS NULL OR $3 IS NULL THEN
		RAISE EXCEPTION 'biz_tag, from and until must not be null'
			USING ERRCODE = '22004';
	END IF;
	IF $2 OPERATOR(pg_catalog.>) $3 THEN
		RAISE EXCEPTION 'from must not be later than until'
			USING ERRCODE = '22023',
				  DETAIL = pg_catalog.format('from is %s, until is %s.', $2, $3);
	END IF;
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	 WHERE e.extname OPERATOR(pg_catalog.=) 'leaf';
	EXECUTE pg_catalog.format(
		'SELECT EXISTS (SELECT FROM %1$I.leaf_alloc a '
		'WHERE a.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar) '
		'OR EXISTS (SELECT FROM %1$I.leaf_segment_log s '
		'WHERE s.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar)', nsp)
		INTO STRICT found_tag USING $1;
	IF NOT found_tag THEN
		RAISE EXCEPTION 'biz_tag "%" does not exist', $1
			USING ERRCODE = 'LF001',
				  DETAIL = 'Neither leaf_alloc nor leaf_segment_log holds a row for it.';
	END IF;
	EXECUTE pg_catalog.format(
		'WITH l AS (SELECT DISTINCT s.loaded_by FROM %1$I.leaf_segment_log s '
		' WHERE s.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar), '
		'a AS (SELECT (SELECT LEAST(s.first_id, s.serving_first_id) '
		'  FROM %1$I.leaf_segment_log s '
		'  WHERE s.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar '
		'  AND s.loaded_by OPERATOR(pg_catalog.=) l.loaded_by '
		'  AND s.loaded_at OPERATOR(pg_catalog.<=) $2 '
		'  ORDER BY s.loaded_at DESC, s.first_id DESC LIMIT 1) AS low FROM l) '
		'SELECT CASE WHEN pg_catalog.bool_and(a.low IS NOT NULL) '
		' THEN pg_catalog.min(a.low) END, '
		'(SELECT pg_catalog.max(s.last_id) FROM %1$I.leaf_segment_log s '
		' WHERE s.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar '
		' AND s.loaded_at OPERATOR(pg_catalog.<) $3) '
		'FROM a', nsp)
		INTO min_id, max_id USING $1, $2, $3;
	IF max_id IS NULL THEN
		min_id := NULL;
	END IF;
END
$$;

COMMENT ON FUNCTION @extschema@.leaf_segment_id_bounds(text, timestamptz, timestamptz) IS
'bounds (min_id, max_id) on every ID of a biz_tag handed out in [from, until), from leaf_segment_log; NULL where the record cannot tell';

--
-- How long the refills of each biz_tag took, from the moment a caller
-- asked for one to the moment its segment was published, split into the
-- wait for the allocator to pick it up (queue), the work of the load
-- (work: its statements; a fleet's round trip and row lock) and a local
-- load's commit (commit: its WAL flush and synchronous standbys; NULL in
-- a fleet, whose commit is part of its statement); the longest one since
-- the tag's slot was taken and its parts; an upper bound of the 99th
-- percentile; the tail (the longest refill, halving every minute); and
-- the number of refills under 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000
-- and 5000 ms, and longer.  Times in ms, NULL before the first refill.
-- leaf_tag_metrics shows them in seconds (docs/monitoring.md).
--
CREATE FUNCTION @extschema@.leaf_segment_refills(
	OUT database name,
	OUT biz_tag text,
	OUT last_refill_ms double precision,
	OUT last_refill_queue_ms double precision,
	OUT last_refill_work_ms double precision,
	OUT last_refill_commit_ms double precision,
	OUT max_refill_ms double precision,
	OUT max_refill_queue_ms double precision,
	OUT max_refill_work_ms double precision,
	OUT max_refill_commit_ms double precision,
	OUT max_refill_at timestamptz,
	OUT refill_p99_ms double precision,
	OUT refill_tail_ms double precision,
	OUT refill_buckets bigint[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'leaf_segment_refills'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION @extschema@.leaf_segment_refills() IS
'leaf segment mode: how long the refills of every biz_tag held in shared memory took, and where the time went';

REVOKE ALL ON FUNCTION @extschema@.leaf_segment_refills() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.leaf_segment_refills() TO pg_monitor;

-- leaf_tag_metrics gains the refill times, in seconds, after its columns
-- of 1.4 (its grants stay)
CREATE OR REPLACE VIEW @extschema@.leaf_tag_metrics AS
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
		 AS last_refill_age_seconds,
	   -- refill times (leaf_segment_refills), from the ask to the segment
	   r.last_refill_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8
		 AS refill_last_seconds,
	   r.max_refill_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8
		 AS refill_max_seconds,
	   r.max_refill_queue_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8
		 AS refill_max_queue_seconds,
	   r.max_refill_work_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8
		 AS refill_max_work_seconds,
	   r.max_refill_commit_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8
		 AS refill_max_commit_seconds,
	   r.refill_p99_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8
		 AS refill_p99_seconds,
	   r.refill_tail_ms OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8
		 AS refill_tail_seconds
  FROM @extschema@.leaf_segments() s
  LEFT JOIN @extschema@.leaf_segment_errors() e
	ON e.database OPERATOR(pg_catalog.=) s.database
   AND e.biz_tag OPERATOR(pg_catalog.=) s.biz_tag
  LEFT JOIN @extschema@.leaf_segment_refills() r
	ON r.database OPERATOR(pg_catalog.=) s.database
   AND r.biz_tag OPERATOR(pg_catalog.=) s.biz_tag;

--
-- Loaded any other way than through shared_preload_libraries, leaf
-- defines nothing, yet CREATE EXTENSION succeeds, and so do
-- leaf_segment_create() and the rest of what only writes tables: the
-- first ID was the first sign (55000).  Say so when the extension is
-- created or updated.  The setting shows what the server was started
-- with, not what postgresql.conf says now.
--
DO $$
BEGIN
	IF NOT EXISTS (
		SELECT FROM pg_catalog.regexp_split_to_table(
				pg_catalog.current_setting('shared_preload_libraries'), ',') l
		 WHERE pg_catalog.btrim(l, ' "') OPERATOR(pg_catalog.~) '(^|/)leaf(\.so)?$') THEN
		RAISE WARNING 'leaf is not loaded via "shared_preload_libraries"'
			USING ERRCODE = '55000',
				  DETAIL = 'The extension is created, but taking IDs fails with SQLSTATE 55000 until the server is started with leaf preloaded.',
				  HINT = 'Add shared_preload_libraries = ''leaf'' to postgresql.conf and restart the server. A server that only holds the allocation database of a fleet does without.';
	END IF;
END
$$;
