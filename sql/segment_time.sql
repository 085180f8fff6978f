--
-- segment mode: when a segment ID was issued (leaf_segment_log and its
-- functions), in a database of its own
--
CREATE DATABASE leaf_segment_time;
\c leaf_segment_time
CREATE EXTENSION leaf;
SELECT clock_timestamp() AS t0 \gset
SELECT leaf_segment_create('t', step => 5);

-- 12 IDs over a step of 5: the loads of 1-5 and 6-10 (the table's step),
-- then 11-20 (the dynamic step doubled); last_id is inclusive
SELECT leaf_segment_nextval('t') FROM generate_series(1, 12);
SELECT first_id, last_id FROM leaf_segment_log
 WHERE biz_tag = 't' AND first_id <= 12 ORDER BY first_id;

-- each row was written by this database's allocator during the test
SELECT bool_and(loaded_by = (SELECT system_identifier::text || '.' || data_directory
                               FROM leaf_copy_identity)
                            || '/' || current_database()) AS by_this_database,
       bool_and(loaded_at BETWEEN :'t0' AND clock_timestamp()) AS loaded_during_test
  FROM leaf_segment_log WHERE biz_tag = 't';

-- an ID taken at a known instant: its window holds that instant
SELECT leaf_segment_nextval('t') AS id, clock_timestamp() AS at \gset
SELECT earliest <= :'at' AS earliest_before,
       latest IS NULL OR latest >= :'at' AS latest_after,
       first_id <= :id AND :id <= last_id AS segment_holds_it
  FROM leaf_segment_issued('t', :id);

-- the first segment was used up before the third load was asked for:
-- its window is closed
SELECT earliest IS NOT NULL AND latest IS NOT NULL AND earliest <= latest AS closed,
       first_id, last_id
  FROM leaf_segment_issued('t', 3);

-- the bounds of an interval around that instant hold the ID
SELECT min_id <= :id AS min_below, max_id >= :id AS max_above
  FROM leaf_segment_id_bounds('t', :'at', :'at'::timestamptz + interval '1 millisecond');

-- an interval that starts before the record does has no lower bound; the
-- upper one holds every ID loaded so far
SELECT min_id, max_id >= :id AS max_above
  FROM leaf_segment_id_bounds('t', :'t0', clock_timestamp());

-- an interval before the first load: nothing recorded
SELECT min_id, max_id
  FROM leaf_segment_id_bounds('t', :'t0'::timestamptz - interval '1 day', :'t0');

-- an ID no recorded segment holds, and a tag never loaded: NULLs
SELECT * FROM leaf_segment_issued('t', 1000000000);
SELECT leaf_segment_create('quiet');
SELECT * FROM leaf_segment_issued('quiet', 1);
SELECT * FROM leaf_segment_id_bounds('quiet', :'t0', clock_timestamp());

-- errors: an unknown tag, NULL arguments, from after until
SELECT * FROM leaf_segment_issued('nope', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaf_segment_id_bounds('nope', :'t0', clock_timestamp());
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaf_segment_issued(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaf_segment_issued('t', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaf_segment_id_bounds('t', NULL, clock_timestamp());
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaf_segment_id_bounds('t', '2026-01-02 00:00+00', '2026-01-01 00:00+00');
\echo :LAST_ERROR_SQLSTATE

-- callers cannot write the record; a reader needs SELECT on it
CREATE ROLE leaf_time_caller;
GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO leaf_time_caller;
SET ROLE leaf_time_caller;
INSERT INTO leaf_segment_log VALUES ('t', 100000, 100001, now(), 'me', NULL);
\echo :LAST_ERROR_SQLSTATE
DELETE FROM leaf_segment_log;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaf_segment_issued('t', 3);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT SELECT ON leaf_alloc, leaf_segment_log TO leaf_time_caller;
SET ROLE leaf_time_caller;
SELECT latest IS NOT NULL AS closed FROM leaf_segment_issued('t', 3);
RESET ROLE;

\c postgres
DROP DATABASE leaf_segment_time;
DROP ROLE leaf_time_caller;
