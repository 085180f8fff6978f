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
