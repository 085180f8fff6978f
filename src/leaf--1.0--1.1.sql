-- leaf 1.0 -> 1.1 (see CHANGELOG.md)
--
-- Also the tail of leaf--1.1.sql, the install script of 1.1, which is
-- 1.0's install script followed by this file: every statement here must
-- work both on an upgraded 1.0 and during CREATE EXTENSION.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION leaf UPDATE TO '1.1'" to load this file. \quit

--
-- Monitoring: members of pg_monitor may read both views (and the
-- functions behind them); everyone else still needs a grant.
--
GRANT SELECT ON leaf_segments TO pg_monitor;
GRANT EXECUTE ON FUNCTION leaf_segments() TO pg_monitor;
GRANT SELECT ON leaf_snowflake_status TO pg_monitor;
GRANT EXECUTE ON FUNCTION leaf_snowflake_status() TO pg_monitor;

--
-- Failovers of the allocation database, and leaf_segments with health.
--
-- leaf_alloc_source.timeline: the timeline of the allocation database on
-- which this database last loaded segments (NULL: recorded by 1.0, and
-- filled in at the next load).  A load on another timeline means that the
-- allocation database was promoted or restored since, and may have lost
-- the last allocations; see leaf.alloc_failover (LF007).
--
ALTER TABLE leaf_alloc_source ADD COLUMN timeline bigint;

COMMENT ON COLUMN leaf_alloc_source.timeline IS
'timeline of the allocation database on which segments were last loaded; a load on another one needs leaf_alloc_source_confirm() unless leaf.alloc_failover = synchronous';

--
-- leaf_segments gains state, ids_issued, last_refill_server and timeline.
-- Dropped and created again, so the grants are given again.
--
DROP VIEW leaf_segments;
DROP FUNCTION leaf_segments();

CREATE FUNCTION leaf_segments(
	OUT database name,
	OUT biz_tag text,
	OUT segment_start bigint,
	OUT segment_end bigint,
	OUT next_id bigint,
	OUT next_ready boolean,
	OUT next_segment_start bigint,
	OUT next_segment_end bigint,
	OUT step bigint,
	OUT refills bigint,
	OUT waits bigint,
	OUT max_wait_ms double precision,
	OUT source text,
	OUT last_refill timestamptz,
	OUT last_failure timestamptz,
	OUT last_error text,
	OUT state text,
	OUT ids_issued bigint,
	OUT last_refill_server text,
	OUT timeline bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'leaf_segments'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW leaf_segments AS SELECT * FROM leaf_segments();

COMMENT ON VIEW leaf_segments IS
'segments of every biz_tag held in shared memory, over all databases';

REVOKE ALL ON FUNCTION leaf_segments() FROM PUBLIC;
REVOKE ALL ON leaf_segments FROM PUBLIC;
GRANT SELECT ON leaf_segments TO pg_monitor;
GRANT EXECUTE ON FUNCTION leaf_segments() TO pg_monitor;

--
-- leaf_snowflake_status: a column ids_issued, the snowflake IDs handed out
-- since the server started.  The view and its function are made again
-- (and granted again to pg_monitor, as above).
--
DROP VIEW leaf_snowflake_status;
DROP FUNCTION leaf_snowflake_status();

CREATE FUNCTION leaf_snowflake_status(
	OUT worker_id integer,
	OUT worker_id_source text,
	OUT ready boolean,
	OUT not_ready_reason text,
	OUT node_address text,
	OUT zk_state text,
	OUT zk_node text,
	OUT last_heartbeat timestamptz,
	OUT last_timestamp timestamptz,
	OUT recorded_until timestamptz,
	OUT not_before timestamptz,
	OUT peers integer,
	OUT peer_clock_offset_ms bigint,
	OUT backward_waits bigint,
	OUT backward_errors bigint,
	OUT epoch_ms bigint,
	OUT ids_issued bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'leaf_snowflake_status'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

CREATE VIEW leaf_snowflake_status AS
	SELECT * FROM leaf_snowflake_status();

COMMENT ON VIEW leaf_snowflake_status IS
'state of the snowflake generator of this node';

REVOKE ALL ON FUNCTION leaf_snowflake_status() FROM PUBLIC;
REVOKE ALL ON leaf_snowflake_status FROM PUBLIC;
GRANT SELECT ON leaf_snowflake_status TO pg_monitor;
GRANT EXECUTE ON FUNCTION leaf_snowflake_status() TO pg_monitor;

-- Public IDs (src/leaf_public_id.c): FF1 (NIST SP 800-38G) with AES,
-- radix 2 over the 63 bits of a non-negative bigint, under the key of
-- leaf.public_id_key_file; the tweak (a biz_tag) separates domains.
-- STABLE: the key changes only on a configuration reload, which a
-- backend applies between statements.
--
CREATE FUNCTION leaf_public_id(id bigint, tweak text DEFAULT '')
RETURNS bigint
AS 'MODULE_PATHNAME', 'leaf_public_id'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION leaf_public_id(bigint, text) IS
'leaf: the public ID of an ID (a keyed permutation of 0 .. 2^63 - 1)';

CREATE FUNCTION leaf_private_id(public_id bigint, tweak text DEFAULT '')
RETURNS bigint
AS 'MODULE_PATHNAME', 'leaf_private_id'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION leaf_private_id(bigint, text) IS
'leaf: the ID of a public ID (inverse of leaf_public_id)';

CREATE FUNCTION leaf_public_id_text(id bigint, tweak text DEFAULT '')
RETURNS text
AS 'MODULE_PATHNAME', 'leaf_public_id_text'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION leaf_public_id_text(bigint, text) IS
'leaf: the public ID of an ID, as 11 characters of base 62';

CREATE FUNCTION leaf_private_id_text(public_id text, tweak text DEFAULT '')
RETURNS bigint
AS 'MODULE_PATHNAME', 'leaf_private_id_text'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION leaf_private_id_text(text, text) IS
'leaf: the ID of a public ID in base 62 (inverse of leaf_public_id_text)';
