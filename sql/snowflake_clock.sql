--
-- snowflake mode: a clock that goes back, with the test build's
-- leaf.test_clock_offset_ms (leaf.worker_id = 1 in test/leaf.conf)
--
CREATE DATABASE leaf_snowflake_clock_regress;
\c leaf_snowflake_clock_regress
CREATE EXTENSION leaf;

SELECT name, setting, unit, context FROM pg_settings
 WHERE name = 'leaf.test_clock_offset_ms';

-- the clock goes back 3-4 ms between two calls: wait, then serve
SELECT backward_waits AS waits_before FROM leaf_snowflake_status \gset
SET leaf.test_clock_offset_ms = 4;
SELECT a < b AS second_is_larger
  FROM (SELECT leaf_snowflake() AS a,
               set_config('leaf.test_clock_offset_ms', '0', false) AS reset,
               leaf_snowflake() AS b) s;
SELECT backward_waits - :waits_before AS new_waits FROM leaf_snowflake_status;

-- the clock goes back further than leaf.max_backward_ms: error LF101
SELECT backward_errors AS errors_before FROM leaf_snowflake_status \gset
SET leaf.test_clock_offset_ms = 300;
SELECT leaf_snowflake() AS ahead \gset
RESET leaf.test_clock_offset_ms;
DO $$
BEGIN
  PERFORM leaf_snowflake();
  RAISE NOTICE 'no error';
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'sqlstate %, offset in message: %', SQLSTATE,
    SQLERRM ~ '^clock moved backwards by \d+ ms, refusing to generate snowflake IDs$';
END
$$;
SELECT backward_errors - :errors_before AS new_errors FROM leaf_snowflake_status;
-- once the clock has caught up, IDs continue above the last one
SELECT pg_sleep(0.4);
SELECT leaf_snowflake() > :ahead AS continues_above;

-- the test clock is for superusers only
CREATE ROLE leaf_sf_clock_user;
SET ROLE leaf_sf_clock_user;
SET leaf.test_clock_offset_ms = 1;
RESET ROLE;
DROP ROLE leaf_sf_clock_user;
\c contrib_regression
DROP DATABASE leaf_snowflake_clock_regress;
