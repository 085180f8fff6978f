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
