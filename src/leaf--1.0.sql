-- leaf: segment mode (see src/leaf_segment.c and src/leaf_alloc_worker.c)
--
-- Part of the install script of release 1.0, kept as released: later
-- changes to SQL objects go into upgrade scripts (see the Makefile).

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION leaf" to load this file. \quit

--
-- leaf_alloc: one row per biz_tag, as in Leaf.  Each refill moves max_id
-- up by the step and serves [new max_id - step, new max_id - 1].
--
CREATE TABLE leaf_alloc (
	biz_tag		varchar(128) PRIMARY KEY,
	max_id		bigint NOT NULL DEFAULT 1,
	step		int NOT NULL,
	description	varchar(256),
	update_time	timestamp NOT NULL DEFAULT now(),
	CONSTRAINT leaf_alloc_biz_tag_check CHECK (biz_tag <> ''),
	-- shared memory holds tags of up to 128 bytes, as the functions check
	CONSTRAINT leaf_alloc_biz_tag_length CHECK (octet_length(biz_tag) <= 128),
	CONSTRAINT leaf_alloc_step_check CHECK (step > 0)
);

COMMENT ON TABLE leaf_alloc IS 'leaf segment mode: one row per biz_tag';

--
-- leaf_alloc_retired: the high-water mark of every biz_tag deleted from
-- leaf_alloc.  A tag inserted again starts at or above it, so deleting a
-- row and adding it back never repeats an ID.
--
CREATE TABLE leaf_alloc_retired (
	biz_tag		varchar(128) PRIMARY KEY,
	max_id		bigint NOT NULL,
	retired_at	timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE leaf_alloc_retired IS
'leaf segment mode: max_id of biz_tags deleted from leaf_alloc';

-- rows added by users survive pg_dump and restore
SELECT pg_catalog.pg_extension_config_dump('leaf_alloc', '');
SELECT pg_catalog.pg_extension_config_dump('leaf_alloc_retired', '');

--
-- What makes a biz_tag valid, in the words of leaf_segment_nextval: not
-- empty, and at most 128 bytes (the size of its key in shared memory).
--
CREATE FUNCTION leaf_check_tag(biz_tag text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog
AS $$
BEGIN
	IF biz_tag = '' THEN
		RAISE EXCEPTION 'biz_tag must not be empty'
			USING ERRCODE = 'LF002';
	END IF;
	IF octet_length(biz_tag) > 128 THEN
		RAISE EXCEPTION 'biz_tag "%..." is too long', left(biz_tag, 32)
			USING ERRCODE = 'LF002',
				  DETAIL = format('A biz_tag is at most 128 bytes; this one has %s.',
								  octet_length(biz_tag));
	END IF;
END
$$;

--
-- max_id must never move backwards, or IDs already handed out would be
-- handed out again.  Renaming a tag would do the same to the old name.
--
CREATE FUNCTION leaf_alloc_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
BEGIN
	IF NEW.biz_tag IS DISTINCT FROM OLD.biz_tag THEN
		RAISE EXCEPTION 'biz_tag "%" cannot be renamed', OLD.biz_tag
			USING ERRCODE = 'LF005',
				  HINT = 'Insert a new row for the new tag instead.';
	END IF;
	IF NEW.max_id < OLD.max_id THEN
		RAISE EXCEPTION 'max_id of biz_tag "%" cannot move backwards', OLD.biz_tag
			USING ERRCODE = 'LF005',
				  DETAIL = format('max_id is %s; the update would set it to %s.',
								  OLD.max_id, NEW.max_id),
				  HINT = 'IDs below max_id may already have been handed out; lowering it would repeat them.';
	END IF;
	NEW.update_time := now();
	RETURN NEW;
END
$$;

CREATE TRIGGER leaf_alloc_guard
	BEFORE UPDATE ON leaf_alloc
	FOR EACH ROW EXECUTE FUNCTION leaf_alloc_guard();

--
-- A deleted tag leaves its max_id in leaf_alloc_retired; a tag inserted
-- again starts there if it would start lower.  Both run as the owner of
-- the extension, so that whoever may write leaf_alloc need not be able to
-- write leaf_alloc_retired; and both lock leaf_alloc_retired, so that an
-- INSERT waits for a concurrent DELETE of the same tag to end and then
-- sees its mark.
--
CREATE FUNCTION leaf_alloc_retire()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog
AS $$
BEGIN
	LOCK TABLE @extschema@.leaf_alloc_retired IN SHARE ROW EXCLUSIVE MODE;
	INSERT INTO @extschema@.leaf_alloc_retired AS r (biz_tag, max_id)
	VALUES (OLD.biz_tag, OLD.max_id)
	ON CONFLICT (biz_tag) DO UPDATE
		SET max_id = greatest(r.max_id, excluded.max_id),
			retired_at = now();
	RETURN OLD;
END
$$;

CREATE TRIGGER leaf_alloc_retire
	BEFORE DELETE ON leaf_alloc
	FOR EACH ROW EXECUTE FUNCTION leaf_alloc_retire();

CREATE FUNCTION leaf_alloc_admit()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog
AS $$
DECLARE
	mark bigint;
BEGIN
	PERFORM @extschema@.leaf_check_tag(NEW.biz_tag);
	LOCK TABLE @extschema@.leaf_alloc_retired IN SHARE ROW EXCLUSIVE MODE;
	SELECT r.max_id INTO mark
	  FROM @extschema@.leaf_alloc_retired r
	 WHERE r.biz_tag = NEW.biz_tag;
	IF mark IS NOT NULL AND NEW.max_id < mark THEN
		RAISE NOTICE 'biz_tag "%" starts at %, where it was when it was deleted',
			NEW.biz_tag, mark
			USING DETAIL = format('The new row asked for max_id %s; IDs below %s may have been handed out already.',
								  NEW.max_id, mark);
		NEW.max_id := mark;
	END IF;
	RETURN NEW;
END
$$;

CREATE TRIGGER leaf_alloc_admit
	BEFORE INSERT ON leaf_alloc
	FOR EACH ROW EXECUTE FUNCTION leaf_alloc_admit();

--
-- TRUNCATE would forget every max_id at once, and fires no DELETE
-- trigger: it is refused on both tables.
--
CREATE FUNCTION leaf_alloc_no_truncate()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
BEGIN
	RAISE EXCEPTION 'cannot truncate %', TG_TABLE_NAME
		USING ERRCODE = 'LF005',
			  DETAIL = 'IDs below the max_id of its rows may have been handed out; forgetting them would repeat IDs.',
			  HINT = 'To retire biz_tags, DELETE their rows from leaf_alloc.';
END
$$;

CREATE TRIGGER leaf_alloc_no_truncate
	BEFORE TRUNCATE ON leaf_alloc
	FOR EACH STATEMENT EXECUTE FUNCTION leaf_alloc_no_truncate();

CREATE TRIGGER leaf_alloc_no_truncate
	BEFORE TRUNCATE ON leaf_alloc_retired
	FOR EACH STATEMENT EXECUTE FUNCTION leaf_alloc_no_truncate();

CREATE FUNCTION leaf_segment_create(biz_tag text,
									step integer DEFAULT 1000,
									start bigint DEFAULT 1,
									description text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
BEGIN
	-- before the cast to varchar(128), which counts characters
	PERFORM @extschema@.leaf_check_tag($1);
	INSERT INTO @extschema@.leaf_alloc (biz_tag, max_id, step, description)
	VALUES ($1, $3, $2, $4);
END
$$;

COMMENT ON FUNCTION leaf_segment_create(text, integer, bigint, text) IS
'adds a biz_tag to leaf_alloc; its first ID is start';

CREATE FUNCTION leaf_segment_nextval(biz_tag text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'leaf_segment_nextval'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION leaf_segment_nextval(text) IS
'returns the next ID of a biz_tag, from segments held in shared memory';

CREATE FUNCTION leaf_segment_nextvals(biz_tag text, n integer)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'leaf_segment_nextvals'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE ROWS 1000;

COMMENT ON FUNCTION leaf_segment_nextvals(text, integer) IS
'returns n IDs of a biz_tag in one call';

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
	OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'leaf_segments'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW leaf_segments AS SELECT * FROM leaf_segments();

COMMENT ON VIEW leaf_segments IS
'segments of every biz_tag held in shared memory, over all databases';

REVOKE ALL ON FUNCTION leaf_segments() FROM PUBLIC;
REVOKE ALL ON leaf_segments FROM PUBLIC;

--
-- leaf_alloc_source: the allocation database this database draws its
-- segments from (state 'current'), written by the allocator in a
-- committed transaction before the first segment from it is used.  Its
-- system identifier survives a failover to a streaming replica, so only
-- a real change (another server, database or extension, or a change
-- between fleet mode and the local leaf_alloc) differs.  The allocator
-- refuses such a change (LF006) and writes the new source as 'pending'
-- until a superuser confirms it with leaf_alloc_source_confirm().
--
CREATE TABLE leaf_alloc_source (
	state		text PRIMARY KEY,
	kind		text NOT NULL,
	system_identifier bigint,
	database_oid oid,
	extension_oid oid,
	description	text NOT NULL,
	recorded_at	timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT leaf_alloc_source_state_check CHECK (state IN ('current', 'pending')),
	CONSTRAINT leaf_alloc_source_kind_check CHECK (kind IN ('local', 'remote'))
);

COMMENT ON TABLE leaf_alloc_source IS
'leaf segment mode: the allocation database segments come from, and a change waiting for confirmation';

SELECT pg_catalog.pg_extension_config_dump('leaf_alloc_source', '');

REVOKE ALL ON leaf_alloc_source FROM PUBLIC;

CREATE FUNCTION leaf_alloc_source_confirm()
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
DECLARE
	pending text;
BEGIN
	SELECT description INTO pending
	  FROM @extschema@.leaf_alloc_source
	 WHERE state = 'pending'
	   FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no change of allocation database is waiting for confirmation'
			USING ERRCODE = '55000',
				  HINT = 'leaf_alloc_source shows the source this database draws its segments from.';
	END IF;
	DELETE FROM @extschema@.leaf_alloc_source WHERE state = 'current';
	UPDATE @extschema@.leaf_alloc_source
	   SET state = 'current', recorded_at = now()
	 WHERE state = 'pending';
	RETURN pending;
END
$$;

COMMENT ON FUNCTION leaf_alloc_source_confirm() IS
'accepts the allocation database that the allocator refused as a change, so that segments are drawn from it';

REVOKE ALL ON FUNCTION leaf_alloc_source_confirm() FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Snowflake mode (part of the install script of release 1.0, kept as
-- released: later changes go into upgrade scripts, see the Makefile)
-- ---------------------------------------------------------------------

CREATE FUNCTION leaf_snowflake()
RETURNS bigint
AS 'MODULE_PATHNAME', 'leaf_snowflake'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION leaf_snowflake() IS
'next snowflake ID of this node: 41 bits of ms since leaf.snowflake_epoch, 10 bits worker ID, 12 bits sequence';

CREATE FUNCTION leaf_snowflake_nextvals(n integer)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'leaf_snowflake_nextvals'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE
ROWS 1000;

COMMENT ON FUNCTION leaf_snowflake_nextvals(integer) IS
'n new snowflake IDs, in increasing order, for bulk loads';

CREATE FUNCTION leaf_snowflake_decode(id bigint,
	OUT ts timestamptz, OUT worker_id integer, OUT sequence integer)
RETURNS record
AS 'MODULE_PATHNAME', 'leaf_snowflake_decode'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION leaf_snowflake_decode(bigint) IS
'timestamp, worker ID and sequence of a snowflake ID, using leaf.snowflake_epoch';

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
	OUT epoch_ms bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'leaf_snowflake_status'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

CREATE VIEW leaf_snowflake_status AS
	SELECT * FROM leaf_snowflake_status();

COMMENT ON VIEW leaf_snowflake_status IS
'state of the snowflake generator of this node';

-- node address, ZooKeeper paths and lease times are for administrators
REVOKE ALL ON FUNCTION leaf_snowflake_status() FROM PUBLIC;
REVOKE ALL ON leaf_snowflake_status FROM PUBLIC;
