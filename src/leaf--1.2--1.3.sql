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
