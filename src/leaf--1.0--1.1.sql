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
