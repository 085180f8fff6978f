--
-- snowflake mode: the SQL surface (leaf.worker_id = 1 in test/leaf.conf)
--
CREATE DATABASE leaf_snowflake_regress;
\c leaf_snowflake_regress
CREATE EXTENSION leaf;
SET TimeZone = 'UTC';

-- the settings and their defaults
SELECT name, setting, unit, context FROM pg_settings
 WHERE name IN ('leaf.worker_id', 'leaf.zk_hosts', 'leaf.zk_root',
                'leaf.node_address', 'leaf.snowflake_epoch',
                'leaf.heartbeat_interval', 'leaf.max_backward_ms',
                'leaf.max_clock_drift_ms', 'leaf.worker_id_reclaim_after',
                'leaf.snowflake_layout', 'leaf.worker_id_from',
                'leaf.worker_id_offset')
 ORDER BY name;

-- the generator is ready with the worker ID set by hand
SELECT leaf_snowflake() > 0 AS positive;
SELECT worker_id, worker_id_source, ready, not_ready_reason, zk_state,
       last_heartbeat IS NOT NULL AS heartbeat,
       recorded_until > now() AS recorded_ahead,
       epoch_ms
  FROM leaf_snowflake_status;

-- layout: 41 bits of time, 10 bits worker ID, 12 bits sequence
SELECT (id >> 12) & 1023 AS worker_bits,
       id >> 63 AS sign_bit,
       abs(extract(epoch FROM (leaf_snowflake_decode(id)).ts - clock_timestamp())) < 5 AS ts_is_now
  FROM leaf_snowflake() AS id;

-- the layout, as leaf_snowflake_layout() describes it
SELECT * FROM leaf_snowflake_layout();

-- decode uses the configured epoch
SELECT * FROM leaf_snowflake_decode(0);
SELECT * FROM leaf_snowflake_decode((1000::bigint << 22) | (5 << 12) | 7);
SELECT * FROM leaf_snowflake_decode(9223372036854775807);
SELECT * FROM leaf_snowflake_decode(-1);

-- IDs increase strictly in the order handed out, all with our worker ID
SELECT count(*) AS n,
       count(DISTINCT id) AS distinct_ids,
       bool_and(id > prev) AS increasing,
       bool_and((leaf_snowflake_decode(id)).worker_id = 1) AS our_worker_id
  FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev
          FROM (SELECT n, leaf_snowflake() AS id
                  FROM generate_series(1, 200000) AS n) s) t;

-- each new millisecond starts its sequence at 0..99
SELECT bool_and(first_seq < 100) AS random_start_below_100
  FROM (SELECT (d).ts, min((d).sequence) AS first_seq,
               max((d).sequence) AS last_seq
          FROM (SELECT leaf_snowflake_decode(leaf_snowflake()) AS d
                  FROM generate_series(1, 200000)) s
         GROUP BY (d).ts) t;

-- bulk: unique, increasing, after the last single ID
SELECT leaf_snowflake() AS before_bulk \gset
SELECT count(*) AS n, count(DISTINCT id) AS distinct_ids,
       min(id) > :before_bulk AS after_previous,
       bool_and(id > prev) AS increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY ord) AS prev
          FROM leaf_snowflake_nextvals(100000) WITH ORDINALITY AS t(id, ord)) s;
-- bulk reserves whole milliseconds: each one but the last is used from
-- its random start (0..99) up to 4095
SELECT count(*) > 20 AS enough_ms,
       bool_and(first_seq < 100) AS random_start_below_100,
       bool_and(last_seq = 4095 AND n = 4096 - first_seq)
         FILTER (WHERE ts < max_ts) AS full_milliseconds
  FROM (SELECT (d).ts, min((d).sequence) AS first_seq,
               max((d).sequence) AS last_seq, count(*) AS n,
               max((d).ts) OVER () AS max_ts
          FROM (SELECT leaf_snowflake_decode(id) AS d
                  FROM leaf_snowflake_nextvals(100000) AS id) s
         GROUP BY (d).ts) t;
SELECT leaf_snowflake() > max(id) AS later_than_bulk
  FROM leaf_snowflake_nextvals(10) AS id;
SELECT count(*) FROM leaf_snowflake_nextvals(0);
SELECT count(*) FROM leaf_snowflake_nextvals(-1);

-- taking IDs needs EXECUTE, as a sequence needs USAGE
CREATE ROLE leaf_sf_user;
SET ROLE leaf_sf_user;
SELECT leaf_snowflake() > 0 AS ungranted_users_may_generate;
RESET ROLE;
GRANT EXECUTE ON FUNCTION leaf_snowflake() TO leaf_sf_user;
SET ROLE leaf_sf_user;
SELECT leaf_snowflake() > 0 AS granted_users_may_generate;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION leaf_snowflake() FROM leaf_sf_user;
DROP ROLE leaf_sf_user;

-- settings that need a restart cannot be changed in a session
SET leaf.worker_id = 2;
SET leaf.snowflake_epoch = '0';

\c contrib_regression
DROP DATABASE leaf_snowflake_regress;
