--
-- segment mode: the SQL surface
--
CREATE EXTENSION leaf;

-- a tag added with a plain INSERT, as in Leaf: 1, 2, 3, ...
INSERT INTO leaf_alloc (biz_tag, max_id, step, description)
VALUES ('order', 1, 1000, 'orders');
SELECT leaf_segment_nextval('order') FROM generate_series(1, 5);

-- a refill sets max_id = max_id + step
SELECT biz_tag, max_id, step FROM leaf_alloc;

-- the convenience function; tags are independent
SELECT leaf_segment_create('user', step => 5);
SELECT leaf_segment_create('invoice', 10, 1000, 'invoices');
SELECT leaf_segment_nextval('user') FROM generate_series(1, 12);
SELECT leaf_segment_nextval('invoice');
SELECT leaf_segment_nextval('order');

-- a fresh tag yields exactly 1..N, across many refills of a tiny step
SELECT leaf_segment_create('exact', step => 3);
SELECT count(*) AS n, min(id), max(id), count(DISTINCT id) AS distinct_ids,
       bool_and(id = rn) AS one_to_n
  FROM (SELECT id, row_number() OVER (ORDER BY ord) AS rn
          FROM (SELECT leaf_segment_nextval('exact') AS id, g AS ord
                  FROM generate_series(1, 2000) g) s) t;

-- usable as a column default
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('order'),
                     note text);
INSERT INTO orders (note) VALUES ('a'), ('b'), ('c');
SELECT id, note FROM orders ORDER BY id;

-- a caller's rollback does not give IDs back
BEGIN;
INSERT INTO orders (note) VALUES ('rolled back');
ROLLBACK;
INSERT INTO orders (note) VALUES ('d') RETURNING id;

-- many IDs in one call
SELECT count(*), count(DISTINCT id), min(id) > 10, max(id) - min(id) + 1 AS span
  FROM leaf_segment_nextvals('order', 100000) AS id;
SELECT count(*) FROM leaf_segment_nextvals('order', 0);
-- at most a million in one call, so that a call is short and small
SELECT count(*) FROM leaf_segment_nextvals('order', 1000000);
SELECT count(*) FROM leaf_segment_nextvals('order', 1000001);

-- NULL in, NULL out
SELECT leaf_segment_nextval(NULL) IS NULL AS null_tag;
SELECT count(*) FROM leaf_segment_nextvals(NULL, 5);

-- bad tags: errors that name the tag, and take no shared memory (after an
-- error, :LAST_ERROR_SQLSTATE shows its SQLSTATE)
SELECT leaf_segment_nextval('');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_segment_nextval(repeat('x', 129));
SELECT leaf_segment_nextval('no such tag');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_segment_nextval('''); DROP TABLE leaf_alloc; --');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS leaf_alloc_still_there FROM leaf_alloc;
-- a tag that a column already takes IDs from (a table restored or
-- replicated without its tag): the hint starts the tag above them
CREATE TABLE ghost_orders (id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('ghost'), note text);
INSERT INTO ghost_orders VALUES (41, 'a'), (42, 'b');
INSERT INTO ghost_orders (note) VALUES ('c');
\echo :LAST_ERROR_SQLSTATE
-- the statement the hint gives
SELECT leaf_segment_create('ghost', start => (SELECT COALESCE(max(id), 0) + 1 FROM public.ghost_orders));
INSERT INTO ghost_orders (note) VALUES ('c') RETURNING id;
SELECT leaf_segment_discard('ghost') AS discarded;
DROP TABLE ghost_orders;
DELETE FROM leaf_alloc WHERE biz_tag = 'ghost';
SELECT leaf_segment_nextvals('order', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS tags_in_shared_memory FROM leaf_segments;

-- a 128-byte tag is fine
SELECT leaf_segment_create(repeat('y', 128));
SELECT leaf_segment_nextval(repeat('y', 128));

-- tags are at most 128 bytes for leaf_alloc as for the functions, and
-- leaf_segment_create and INSERT say so with LF002
\set VERBOSITY sqlstate
SELECT leaf_segment_create(repeat('é', 100));
SELECT leaf_segment_create(repeat('y', 129));
SELECT leaf_segment_create('');
INSERT INTO leaf_alloc (biz_tag, step) VALUES (repeat('é', 100), 10);
INSERT INTO leaf_alloc (biz_tag, step) VALUES ('', 10);
SELECT leaf_segment_nextval(repeat('é', 100));
\set VERBOSITY default
SELECT leaf_segment_create(repeat('é', 100));
SELECT leaf_segment_create(repeat('é', 64));
SELECT leaf_segment_nextval(repeat('é', 64));

-- step must be positive; nothing is written
\set VERBOSITY terse
INSERT INTO leaf_alloc (biz_tag, step) VALUES ('zero', 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaf_alloc (biz_tag, step) VALUES ('negative', -5);
SELECT leaf_segment_create('', 10);
\set VERBOSITY default
SELECT count(*) FROM leaf_alloc WHERE biz_tag IN ('zero', 'negative', '');

-- max_id never moves backwards, and tags are not renamed
UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order';
\echo :LAST_ERROR_SQLSTATE
UPDATE leaf_alloc SET biz_tag = 'order2' WHERE biz_tag = 'order';
\echo :LAST_ERROR_SQLSTATE
UPDATE leaf_alloc SET max_id = max_id + 1000 WHERE biz_tag = 'invoice';
SELECT leaf_segment_nextval('invoice') < 2000 AS still_from_cached_segment;

-- past the bigint range: an error, no wraparound, nothing written
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('huge', 9223372036854775000, 1000);
SELECT leaf_segment_nextval('huge');
\echo :LAST_ERROR_SQLSTATE
SELECT max_id FROM leaf_alloc WHERE biz_tag = 'huge';
SELECT leaf_segment_create('nearly', 100, 9223372036854775707);
SELECT max(id), count(*) FROM leaf_segment_nextvals('nearly', 100) id;
SELECT leaf_segment_nextval('nearly');
SELECT max_id FROM leaf_alloc WHERE biz_tag = 'nearly';
-- near the end, a dynamic step that has grown past what is left (400 of
-- 300) gives way to the rest: every ID up to 2^63 - 2 is handed out
SELECT leaf_segment_create('end', 100, 9223372036854775107);
SELECT count(*), count(DISTINCT id), max(id)
  FROM (SELECT leaf_segment_nextval('end') AS id FROM generate_series(1, 700)) s;
\set VERBOSITY terse
SELECT leaf_segment_nextval('end');
\set VERBOSITY default
-- a start that is negative, or leaves less than one step (max_id + step
-- past the end, 'nearly' above has exactly one): refused (22023)
SELECT leaf_segment_create('negative', 100, -5);
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_segment_create('past_end', 100, 9223372036854775708);
\echo :LAST_ERROR_SQLSTATE
-- a tag that exists: LF013 with a hint (1.3 let the unique violation of
-- leaf_alloc's key through); with if_not_exists, the same step and
-- description are accepted with a notice, other ones refused, and the
-- row stays as it was
SELECT leaf_segment_create('user', step => 5);
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_segment_create('user', step => 5, if_not_exists => true);
SELECT leaf_segment_create('user', step => 50, if_not_exists => true);
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_segment_create('user', step => 5, description => 'users', if_not_exists => true);
\echo :LAST_ERROR_SQLSTATE
SELECT step, description FROM leaf_alloc WHERE biz_tag = 'user';
-- a tag that does not exist is created with if_not_exists as without it
BEGIN;
SELECT leaf_segment_create('fresh', step => 7, start => 3, if_not_exists => true);
SELECT max_id, step FROM leaf_alloc WHERE biz_tag = 'fresh';
ROLLBACK;
-- a step that is not positive, or no step: 22023 with a hint (1.3 let
-- the check violation of leaf_alloc through, or the not-null one)
SELECT leaf_segment_create('minus', step => -5);
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_segment_create('nothing', step => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM leaf_alloc WHERE biz_tag IN ('minus', 'nothing');

-- TRUNCATE would forget every max_id: refused
TRUNCATE leaf_alloc;
TRUNCATE leaf_alloc_retired;

-- a deleted tag keeps its max_id in leaf_alloc_retired; added back with a
-- lower one, it starts there
SELECT leaf_segment_create('again', step => 10);
SELECT leaf_segment_nextval('again') FROM generate_series(1, 3);
-- the next segment comes from the allocator in the background once the
-- first is 10 % used: wait for it, so that max_id does not depend on how
-- busy the machine is
DO $$
BEGIN
    FOR i IN 1..600 LOOP
        EXIT WHEN (SELECT next_ready FROM leaf_segments WHERE biz_tag = 'again');
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;
DELETE FROM leaf_alloc WHERE biz_tag = 'again';
SELECT biz_tag, max_id FROM leaf_alloc_retired WHERE biz_tag = 'again';
SELECT leaf_segment_create('again', step => 10);
SELECT max_id FROM leaf_alloc WHERE biz_tag = 'again';
SELECT leaf_segment_nextval('again') > 3 AS above_before;
-- a higher start is kept
DELETE FROM leaf_alloc WHERE biz_tag = 'again';
SELECT leaf_segment_create('again', 10, 5000);
SELECT max_id FROM leaf_alloc WHERE biz_tag = 'again';

-- a deleted tag stops being served once its cached segments are gone
SELECT leaf_segment_create('gone', step => 5);
SELECT leaf_segment_nextval('gone');
DELETE FROM leaf_alloc WHERE biz_tag = 'gone';
DO $$
DECLARE
	n int := 0;
BEGIN
	LOOP
		PERFORM leaf_segment_nextval('gone');
		n := n + 1;
		IF n > 100 THEN
			RAISE 'deleted tag still served after 100 calls';
		END IF;
	END LOOP;
EXCEPTION WHEN SQLSTATE 'LF001' THEN
	RAISE NOTICE 'served at most two cached segments after the delete: %', n <= 9;
END
$$;
-- and it works again as a new tag once it is added back
SELECT leaf_segment_create('gone', 5, 1000);
SELECT leaf_segment_nextval('gone');

-- the same tag in another database is another counter
SELECT current_database() AS regress_db \gset
CREATE DATABASE leaf_regress_other;
\c leaf_regress_other
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', 1000);
SELECT leaf_segment_nextval('order') FROM generate_series(1, 3);
SELECT count(*) FROM leaf_segments WHERE biz_tag = 'order';
\c :regress_db
SELECT leaf_segment_nextval('order') > 100000 AS own_counter;
-- its allocator worker does not stand in the way of DROP DATABASE
SELECT count(*) FROM pg_stat_activity
 WHERE backend_type = 'leaf allocator' AND datname = 'leaf_regress_other';
DROP DATABASE leaf_regress_other;
SELECT count(*) FROM pg_stat_activity
 WHERE backend_type = 'leaf allocator' AND datname = 'leaf_regress_other';

-- the view
SELECT database = current_database() AS this_db, biz_tag, segment_start,
       segment_end, refills > 0 AS refilled, source
  FROM leaf_segments WHERE biz_tag IN ('order', 'user', 'invoice')
 ORDER BY biz_tag;

-- settings
SHOW leaf.wait_timeout;
SHOW leaf.preload_percent;
SHOW leaf.preload_floor;
SHOW leaf.segment_duration;
SHOW leaf.max_tags;
SET leaf.max_tags = 10;

-- dropping the extension and creating it again starts over, with no
-- segment of the old leaf_alloc left in shared memory
-- refused while leaf_alloc holds counters, unless confirmed
\set VERBOSITY sqlstate
DROP EXTENSION leaf CASCADE;
\set VERBOSITY default
SET leaf.allow_drop_with_counters = on;
SET client_min_messages = warning;
DROP EXTENSION leaf CASCADE;
RESET client_min_messages;
RESET leaf.allow_drop_with_counters;
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', step => 10);
SELECT leaf_segment_nextval('order') FROM generate_series(1, 25);
SELECT max_id > 25 AS above_every_id FROM leaf_alloc WHERE biz_tag = 'order';

-- a data-only pg_restore with --disable-triggers enables every trigger of
-- leaf_alloc as an ordinary one afterwards (ENABLE TRIGGER ALL): the
-- trigger that records logical replication then acts on nothing, and the
-- loads go on (no LF012); ENABLE ALWAYS puts it back
ALTER TABLE leaf_alloc DISABLE TRIGGER ALL;
ALTER TABLE leaf_alloc ENABLE TRIGGER ALL;
SELECT tgname, tgenabled FROM pg_trigger
 WHERE tgrelid = 'leaf_alloc'::regclass AND tgname LIKE 'leaf_alloc_replicated%' ORDER BY 1;
SELECT count(*) AS ids FROM (SELECT leaf_segment_nextval('order') FROM generate_series(1, 25)) s;
SELECT count(*) AS recorded_as_replicated FROM leaf_alloc_replicated;
ALTER TABLE leaf_alloc ENABLE ALWAYS TRIGGER leaf_alloc_replicated;
ALTER TABLE leaf_alloc ENABLE ALWAYS TRIGGER leaf_alloc_replicated_truncate;
SELECT count(*) AS ids FROM (SELECT leaf_segment_nextval('order') FROM generate_series(1, 25)) s;
SELECT count(*) AS recorded_as_replicated FROM leaf_alloc_replicated;
