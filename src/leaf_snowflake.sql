
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
