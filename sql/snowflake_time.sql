--
-- time in the key: leaf_snowflake_min_id under the server's layout and
-- epoch (test/leaf.conf: the default layout, 41+10+12/1ms, and the
-- default epoch)
--
CREATE DATABASE leaf_snowflake_time_regress;
\c leaf_snowflake_time_regress
CREATE EXTENSION leaf;
-- the server's epoch as a timestamptz
SELECT timestamptz 'epoch' + current_setting('leaf.snowflake_epoch')::bigint * interval '1 ms'
       AS epoch \gset

-- the epoch itself is the first ID; the next ms starts at 1 << 22; an
-- instant inside a ms rounds down to its ms
SELECT leaf_snowflake_min_id(:'epoch') AS at_epoch,
       leaf_snowflake_min_id(:'epoch'::timestamptz + interval '1 ms') = 1::bigint << 22 AS next_ms,
       leaf_snowflake_min_id(:'epoch'::timestamptz + interval '1.999 ms') = 1::bigint << 22 AS rounds_down;
-- before the epoch, and -infinity: every ID is at or after it
SELECT leaf_snowflake_min_id(:'epoch'::timestamptz - interval '1 ms') AS before_epoch,
       leaf_snowflake_min_id('-infinity') AS minus_infinity;
-- the last ms of the 41-bit field: the largest timestamp field, worker 0,
-- sequence 0
SELECT leaf_snowflake_min_id(:'epoch'::timestamptz + ((1::bigint << 41) - 1) * interval '1 ms')
       = ((1::bigint << 41) - 1) << 22 AS last_unit;
-- past the last unit, and +infinity: no ID, error 22008
SELECT leaf_snowflake_min_id(:'epoch'::timestamptz + (1::bigint << 41) * interval '1 ms');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_snowflake_min_id('infinity');
\echo :LAST_ERROR_SQLSTATE
-- NULL: STRICT
SELECT leaf_snowflake_min_id(NULL) IS NULL AS null_is_null;
-- an ID issued now is at or above the bound of an instant before it, and
-- below the bound of the next second
SELECT clock_timestamp() AS t0 \gset
SELECT leaf_snowflake() AS id \gset
SELECT :id >= leaf_snowflake_min_id(:'t0') AS above_bound_before,
       :id < leaf_snowflake_min_id(clock_timestamp() + interval '1 s') AS below_bound_after;

\c contrib_regression
DROP DATABASE leaf_snowflake_time_regress;
