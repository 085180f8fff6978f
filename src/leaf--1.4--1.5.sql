-- leaf 1.4 -> 1.5 (see CHANGELOG.md)
--
-- Also the tail of leaf--1.5.sql, the install script of 1.5, which is
-- 1.4's install script followed by this file: every statement here must
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
-- The timelines the snowflake workers have seen this database on, and
-- when.  A row written on a former primary may be lost by a promotion
-- that was not synchronous: after a new timeline, no new holder takes a
-- worker ID until the longest lease of the old timeline has passed.
--
CREATE TABLE @extschema@.leaf_worker_lease_timeline (
	timeline	bigint PRIMARY KEY,
	seen_at		timestamptz NOT NULL,
	synchronous boolean NOT NULL
);

COMMENT ON TABLE @extschema@.leaf_worker_lease_timeline IS
'timelines of the allocation database seen by snowflake workers, and when; a new one not confirmed as synchronous holds back new holders of worker IDs';

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
	epoch_ms	bigint
);

COMMENT ON TABLE @extschema@.leaf_worker_lease_fleet IS
'the fleet of leaf_worker_lease: its identity, and leaf.heartbeat_interval, leaf.max_clock_drift_ms and leaf.snowflake_epoch, which every node must share (recorded by the first node; to change them, stop every node, set them to NULL here, change them on every node)';

REVOKE ALL ON @extschema@.leaf_worker_lease_fleet FROM PUBLIC;
REVOKE ALL ON @extschema@.leaf_worker_lease FROM PUBLIC;
REVOKE ALL ON @extschema@.leaf_worker_lease_timeline FROM PUBLIC;
