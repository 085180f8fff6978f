--
-- time in the key: leaf_snowflake_min_id and leaf_snowflake_time, under
-- the server's layout and epoch (test/leaf.conf: the default layout,
-- 41+10+12/1ms, and the default epoch) and with both given
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

-- leaf_snowflake_time: the start of the unit of an ID; decode agrees
SELECT leaf_snowflake_time(0) = :'epoch' AS zero_is_epoch,
       leaf_snowflake_time((1::bigint << 22) - 1) = :'epoch' AS same_ms,
       leaf_snowflake_time(1::bigint << 22) = :'epoch'::timestamptz + interval '1 ms' AS next_ms,
       leaf_snowflake_time(:id) = (leaf_snowflake_decode(:id)).ts AS decode_agrees,
       leaf_snowflake_time(9223372036854775807) = (leaf_snowflake_decode(9223372036854775807)).ts AS largest_agrees;
-- a negative ID: 22023, as decode has it
SELECT leaf_snowflake_time(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_snowflake_time(NULL) IS NULL AS null_is_null;
-- the way back: the unit of the bound of t holds t, for instants at and
-- around the start and the middle of units
SELECT bool_and(leaf_snowflake_time(leaf_snowflake_min_id(t)) <= t AND
                t < leaf_snowflake_time(leaf_snowflake_min_id(t)) + interval '1 ms') AS unit_holds_t,
       bool_and(leaf_snowflake_min_id(leaf_snowflake_time(leaf_snowflake_min_id(t))) = leaf_snowflake_min_id(t)) AS round_trip
  FROM (SELECT :'epoch'::timestamptz + n * interval '1 us' + d * interval '1 day' AS t
          FROM generate_series(0, 2500, 7) n, generate_series(0, 5000, 997) d) s;

-- the explicit forms under the server's own layout and epoch agree with
-- the server's forms
SELECT bool_and(leaf_snowflake_min_id(t, 'default', :'epoch') = leaf_snowflake_min_id(t)) AS min_id_agrees,
       bool_and(leaf_snowflake_min_id(t, '41+10+12/1ms', :'epoch') = leaf_snowflake_min_id(t)) AS canonical_name_agrees,
       bool_and(leaf_snowflake_time(leaf_snowflake_min_id(t) + 4097, 'default', :'epoch') =
                leaf_snowflake_time(leaf_snowflake_min_id(t) + 4097)) AS time_agrees
  FROM (SELECT clock_timestamp() - n * interval '3 days 7 hours 13.0017 s' AS t
          FROM generate_series(0, 1000) n) s;
-- they are IMMUTABLE, the server's forms STABLE; all STRICT and parallel safe
SELECT p.oid::regprocedure AS function, provolatile, proisstrict, proparallel
  FROM pg_proc p
 WHERE proname IN ('leaf_snowflake_min_id', 'leaf_snowflake_time')
 ORDER BY 1::text;

-- another epoch moves the bound by the difference
SELECT leaf_snowflake_min_id('2024-01-01 00:00:00.005+00', 'default', '2024-01-01 00:00:00+00') = 5::bigint << 22 AS five_ms,
       leaf_snowflake_time(5::bigint << 22, 'default', '2024-01-01 00:00:00+00') = '2024-01-01 00:00:00.005+00' AS back,
       leaf_snowflake_min_id('2023-12-31 23:59:59.999+00', 'default', '2024-01-01 00:00:00+00') AS before_epoch;
-- js53 (41+6+6): 12 bits below the time
SELECT leaf_snowflake_min_id('2024-01-01 00:00:01+00', 'js53', '2024-01-01 00:00:00+00') = 1000::bigint << 12 AS js53_second,
       leaf_snowflake_time((1000::bigint << 12) + 4095, 'js53', '2024-01-01 00:00:00+00') = '2024-01-01 00:00:01+00' AS js53_back;
-- a unit of 10 ms rounds down to the unit; the unit of the bound holds t
SELECT leaf_snowflake_min_id('2024-01-01 00:00:00.019999+00', '38+12+13/10ms', '2024-01-01 00:00:00+00') = 1::bigint << 25 AS ten_ms,
       leaf_snowflake_min_id('2024-01-01 00:00:00.02+00', '38+12+13/10ms', '2024-01-01 00:00:00+00') = 2::bigint << 25 AS next_unit,
       leaf_snowflake_time((2::bigint << 25) - 1, '38+12+13/10ms', '2024-01-01 00:00:00+00') = '2024-01-01 00:00:00.01+00' AS unit_start;
SELECT bool_and(leaf_snowflake_time(leaf_snowflake_min_id(t, l, e), l, e) <= t AND
                t < leaf_snowflake_time(leaf_snowflake_min_id(t, l, e), l, e) + u) AS unit_holds_t
  FROM (VALUES ('38+12+13/10ms', interval '10 ms'), ('30+8+8/1s', interval '1 s'),
               ('40+10+12/7ms', interval '7 ms')) v(l, u),
       LATERAL (SELECT timestamptz '2024-01-01 00:00:00.001+00' AS e) ep,
       LATERAL (SELECT e + n * interval '997 us' + n * interval '1 day' AS t
                  FROM generate_series(0, 3000) n) s;
-- the last unit of a 20-bit field of seconds, and the instant after it
SELECT leaf_snowflake_min_id('2024-01-01 00:00:00+00'::timestamptz + ((1 << 20) - 1) * interval '1 s' + interval '0.5 s',
                             '20+1+1/1s', '2024-01-01 00:00:00+00') = ((1::bigint << 20) - 1) << 2 AS last_unit;
SELECT leaf_snowflake_min_id('2024-01-01 00:00:00+00'::timestamptz + (1 << 20) * interval '1 s',
                             '20+1+1/1s', '2024-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_snowflake_min_id('infinity', 'default', '2024-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_snowflake_min_id('-infinity', 'default', '2024-01-01 00:00:00+00') AS minus_infinity;
-- an ID whose time is past what timestamptz holds: 22008
SELECT leaf_snowflake_time(1::bigint << 53, '52+1+1/1s', '2024-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_snowflake_time(9223372036854775807, '20+1+1/1s', '2024-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_snowflake_time(-1, 'default', '2024-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
-- a layout that does not parse, or is out of bounds: 22023 with the forms
SELECT leaf_snowflake_min_id(now(), '41-10-12', '2024-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_snowflake_time(0, '60+10+12', '2024-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
-- an epoch leaf.snowflake_epoch could not be: 22023
SELECT leaf_snowflake_min_id(now(), 'default', '2024-01-01 00:00:00.0005+00');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_snowflake_min_id(now(), 'default', 'infinity');
\echo :LAST_ERROR_SQLSTATE
-- NULL in any argument: STRICT
SELECT leaf_snowflake_min_id(NULL, 'default', now()) IS NULL AS null_ts,
       leaf_snowflake_min_id(now(), NULL, now()) IS NULL AS null_layout,
       leaf_snowflake_time(0, 'default', NULL) IS NULL AS null_epoch;

\c contrib_regression
DROP DATABASE leaf_snowflake_time_regress;
