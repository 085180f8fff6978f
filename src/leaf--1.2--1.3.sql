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

--
-- Segment mode: leaf_segment_create() refuses a start that is negative,
-- or so close to the end of bigint that not even one segment of the
-- step fits, max_id + step (1.2 took both without a word; the tag then
-- ran out at its first load).
--
CREATE OR REPLACE FUNCTION leaf_segment_create(biz_tag text,
											   step integer DEFAULT 1000,
											   start bigint DEFAULT 1,
											   description text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nsp name;
BEGIN
	-- before the cast to varchar(128), which counts characters; the
	-- trigger leaf_alloc_admit checks the rest
	IF octet_length($1) > 128 THEN
		RAISE EXCEPTION 'biz_tag "%..." is too long', left($1, 32)
			USING ERRCODE = 'LF002',
				  DETAIL = format('A biz_tag is at most 128 bytes; this one has %s.',
								  octet_length($1));
	END IF;
	IF $3 < 0 THEN
		RAISE EXCEPTION 'start of biz_tag "%" must not be negative', $1
			USING ERRCODE = '22023',
				  DETAIL = format('start is %s.', $3);
	END IF;
	IF $2 > 0 AND $3 > 9223372036854775807 - $2 THEN
		RAISE EXCEPTION 'start of biz_tag "%" leaves less than one step of IDs below the end of bigint', $1
			USING ERRCODE = '22023',
				  DETAIL = format('start is %s, step %s; the last ID is 9223372036854775807.', $3, $2),
				  HINT = 'Use a smaller start or a smaller step.';
	END IF;
	SELECT n.nspname INTO STRICT nsp
	  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	 WHERE e.extname = 'leaf';
	EXECUTE format('INSERT INTO %I.leaf_alloc (biz_tag, max_id, step, description) '
				   'VALUES ($1, $2, $3, $4)', nsp)
		USING $1, $3, $2, $4;
END
$$;
