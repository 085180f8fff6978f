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
-- a long one is quoted up to a layout's length (32 bytes), between characters
SELECT leaf_snowflake_min_id(now(), repeat('é', 100), '2024-01-01 00:00:00+00');
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

--
-- A table partitioned by day on its snowflake key, the bounds from the
-- IMMUTABLE form under the server's layout and epoch.  The days are those
-- of a fixed UTC offset (to the second) chosen so that a midnight, B,
-- falls 4 to 5 s from now (time enough to create the
-- table and issue the first IDs on a busy machine): the IDs issued before and after B cross a day
-- boundary in real time, whatever the date.
--
SELECT date_trunc('second', clock_timestamp()) + interval '5 s' AS b \gset
SELECT set_config('leaf_test.b', :'b', false) IS NOT NULL AS b_set,
       set_config('leaf_test.epoch', :'epoch', false) IS NOT NULL AS epoch_set;
CREATE TABLE events (id bigint PRIMARY KEY DEFAULT leaf_snowflake(), note text)
	PARTITION BY RANGE (id);
-- events_1 .. events_4: the day before the day that ends at B, that day,
-- the day that starts at B, the day after
DO $$
DECLARE
	b timestamptz := current_setting('leaf_test.b')::timestamptz;
	epoch text := current_setting('leaf_test.epoch');
	secs int := (extract(epoch FROM b)::bigint % 86400)::int;
	off int := CASE WHEN secs <= 43200 THEN -secs ELSE 86400 - secs END;
	tz text := CASE WHEN off < 0 THEN '-' ELSE '+' END ||
		to_char(abs(off) * interval '1 s', 'HH24:MI:SS');
	first_day date := ((b + off * interval '1 s') AT TIME ZONE 'UTC')::date - 2;
BEGIN
	IF format('%s 00:00:00%s', first_day + 2, tz)::timestamptz <> b THEN
		RAISE EXCEPTION 'day % at % is not B', first_day + 2, tz;
	END IF;
	FOR k IN 1..4 LOOP
		EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES '
					   'FROM (leaf_snowflake_min_id(%L::timestamptz, %L, %L)) '
					   'TO (leaf_snowflake_min_id(%L::timestamptz, %L, %L))',
					   'events_' || k,
					   format('%s 00:00:00%s', first_day + k - 1, tz), 'default', epoch,
					   format('%s 00:00:00%s', first_day + k, tz), 'default', epoch);
	END LOOP;
END
$$;
-- IDs issued before B, then after it
INSERT INTO events (note) SELECT 'before' FROM generate_series(1, 3);
SELECT leaf_snowflake_time(max(id)) < :'b' AS issued_before_b FROM events;
DO $$
BEGIN
	WHILE clock_timestamp() < current_setting('leaf_test.b')::timestamptz + interval '5 ms' LOOP
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
INSERT INTO events (note) SELECT 'after' FROM generate_series(1, 3);
-- and the two IDs on either side of the bound of B (worker 0, which no
-- node of this test uses)
INSERT INTO events VALUES (leaf_snowflake_min_id(:'b') - 1, 'edge'),
						  (leaf_snowflake_min_id(:'b'), 'edge');
-- where the rows went: the day that ends at B, and the day that starts
SELECT tableoid::regclass AS partition, note, count(*)
  FROM events GROUP BY 1, 2 ORDER BY 1, 2;
-- every row is in the partition of the day of its time
SELECT bool_and(tableoid::regclass::text =
				'events_' || (3 + floor(extract(epoch FROM leaf_snowflake_time(id) - :'b'::timestamptz) / 86400))::int)
	   AS in_its_day
  FROM events;

-- a range of time is a range of the key: exactly the rows whose time is
-- in the range, for the day that starts at B and for the one that ends
-- there
SELECT (SELECT array_agg(id ORDER BY id) FROM events
		 WHERE id >= leaf_snowflake_min_id(lo) AND id < leaf_snowflake_min_id(hi)) =
	   (SELECT array_agg(id ORDER BY id) FROM events
		 WHERE leaf_snowflake_time(id) >= lo AND leaf_snowflake_time(id) < hi) AS same_rows,
	   (SELECT count(*) FROM events
		 WHERE id >= leaf_snowflake_min_id(lo) AND id < leaf_snowflake_min_id(hi)) AS n
  FROM (VALUES (:'b'::timestamptz, :'b'::timestamptz + interval '1 day'),
			   (:'b'::timestamptz - interval '1 day', :'b'::timestamptz)) r(lo, hi);

-- pruning: scans that the plans show are sequential, whatever the sizes
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SET enable_indexonlyscan = off;
-- the STABLE form: the partitions are pruned when the executor starts
-- (here in a generic plan, whose parameters are known only then)
PREPARE day_rows(timestamptz, timestamptz) AS
	SELECT id FROM events
	 WHERE id >= leaf_snowflake_min_id($1) AND id < leaf_snowflake_min_id($2);
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE day_rows(:'b', :'b'::timestamptz + interval '1 day');
RESET plan_cache_mode;
-- the IMMUTABLE form with constants: pruned when the query is planned
-- (the bounds, folded into constants, are shown as N)
CREATE FUNCTION pg_temp.plan_of(q text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		RETURN NEXT regexp_replace(line, '''\d+''::bigint', 'N', 'g');
	END LOOP;
END
$$;
SELECT pg_temp.plan_of(format(
	'SELECT id FROM events WHERE id >= leaf_snowflake_min_id(%L, %L, %L) AND id < leaf_snowflake_min_id(%L, %L, %L)',
	:'b', 'default', :'epoch', :'b'::timestamptz + interval '1 day', 'default', :'epoch')) AS plan;
RESET enable_indexscan;
RESET enable_bitmapscan;
RESET enable_indexonlyscan;
DROP TABLE events;

-- the IMMUTABLE form in a generated column and an expression index; the
-- STABLE one is refused there (42P17)
CREATE TABLE stamped (id bigint PRIMARY KEY DEFAULT leaf_snowflake(),
	created_at timestamptz GENERATED ALWAYS AS (leaf_snowflake_time(id, 'default', '2010-11-04 01:42:54.657+00')) STORED);
CREATE INDEX stamped_time ON stamped (leaf_snowflake_time(id, 'default', '2010-11-04 01:42:54.657+00'));
INSERT INTO stamped DEFAULT VALUES;
SELECT created_at = leaf_snowflake_time(id) AS generated_agrees FROM stamped;
CREATE TABLE stamped_stable (id bigint,
	created_at timestamptz GENERATED ALWAYS AS (leaf_snowflake_time(id)) STORED);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE stamped;

\c contrib_regression
DROP DATABASE leaf_snowflake_time_regress;
