--
-- segment mode, with pgTAP: the SQL surface in the catalog, unknown tags
-- and shared memory, and how the step follows the settings
--
\set QUIET on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS leaf;
RESET client_min_messages;
\set QUIET off
\pset format unaligned
\pset tuples_only on
\pset pager off

-- Waiting for a state, not for a fixed time.  await_next_segment(tag):
-- until the next segment of the tag is loaded (no load under way), 10 s at
-- most.  await_setting: the session takes a reloaded setting only between
-- two statements, so the wait is a series of calls (\gexec); each returns
-- at once when the session has the value and sleeps 20 ms when it has not,
-- and the last one (after 5 s) fails.  The allocator worker was signalled
-- with this session and takes the value before its next load.
CREATE FUNCTION pg_temp.await_next_segment(tag text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '10 s';
BEGIN
	WHILE NOT coalesce((SELECT next_ready FROM leaf_segments
						 WHERE biz_tag = tag AND database = current_database()), false) LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'the next segment of "%" not loaded after 10 s', tag;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;
CREATE PROCEDURE pg_temp.await_setting(setting text, want text, last boolean)
LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting(setting) = want THEN
		RETURN;
	ELSIF last THEN
		RAISE EXCEPTION '% is still %, not %', setting, current_setting(setting), want;
	END IF;
	PERFORM pg_sleep(0.02);
END
$$;
-- take_slowly(tag, until): IDs of the tag one at a time, 2 ms apart, until
-- the tag's row of leaf_segments meets condition "until", 10 s at most.
-- With leaf.segment_duration = '1ms' each segment then outlasts twice its
-- duration, which is slow use.
CREATE FUNCTION pg_temp.take_slowly(tag text, until text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '10 s';
	done boolean;
BEGIN
	LOOP
		PERFORM leaf_segment_nextval(tag);
		EXECUTE format('SELECT %s FROM leaf_segments WHERE biz_tag = $1 AND database = current_database()',
					   until) INTO done USING tag;
		EXIT WHEN done;
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'taken slowly for 10 s, "%" does not hold for "%"', until, tag;
		END IF;
		PERFORM pg_sleep(0.002);
	END LOOP;
END
$$;

SELECT plan(13);

-- the SQL surface
SELECT has_table('leaf_alloc');
SELECT col_is_pk('leaf_alloc', 'biz_tag');
SELECT has_view('leaf_segments');
SELECT has_function('leaf_segment_nextval', ARRAY['text']);
SELECT has_function('leaf_segment_nextvals', ARRAY['text', 'integer']);
SELECT volatility_is('leaf_segment_nextval', ARRAY['text'], 'volatile');
SELECT is_strict('leaf_segment_nextval', ARRAY['text']);

-- Bad input, the SQLSTATEs of leaf_alloc's guards and IDs strictly
-- increasing are checked in sql/segment.sql, with the same statements.

-- unknown tags never take shared memory
CREATE TEMP TABLE slots_before AS SELECT count(*) AS n FROM leaf_segments;
DO $$
BEGIN
	FOR i IN 1..50 LOOP
		BEGIN
			PERFORM leaf_segment_nextval('tap unknown ' || i);
		EXCEPTION WHEN SQLSTATE 'LF001' THEN
			NULL;
		END;
	END LOOP;
END
$$;
SELECT is((SELECT count(*) FROM leaf_segments), (SELECT n FROM slots_before),
          '50 unknown tags took no slot');

-- a changed step applies from the next refill
SELECT leaf_segment_create('tap step', 10);
SELECT leaf_segment_nextval('tap step');
SELECT pg_temp.await_next_segment('tap step');
UPDATE leaf_alloc SET step = 100 WHERE biz_tag = 'tap step';
SELECT count(leaf_segment_nextval('tap step')) FROM generate_series(1, 20);
SELECT is((SELECT segment_end - segment_start + 1 FROM leaf_segments
            WHERE biz_tag = 'tap step' AND database = current_database()),
          100::bigint, 'the new step is used from the next refill on');

-- dynamic step: segments used up quickly double the step...
ALTER SYSTEM SET leaf.segment_duration = '1h';
SELECT pg_reload_conf();
\set ECHO none
\set QUIET on
SELECT format('CALL pg_temp.await_setting(%L, %L, %L)', 'leaf.segment_duration', '1h', i = 250)
  FROM generate_series(1, 250) AS i \gexec
\set QUIET off
\set ECHO all
SELECT leaf_segment_create('tap dyn', 10);
SELECT count(leaf_segment_nextval('tap dyn')) FROM generate_series(1, 400);
SELECT pg_temp.await_next_segment('tap dyn');
CREATE TEMP TABLE dyn AS
	SELECT step FROM leaf_segments WHERE biz_tag = 'tap dyn' AND database = current_database();
SELECT cmp_ok((SELECT step FROM dyn), '>', 10::bigint, 'fast use doubles the step');
SELECT cmp_ok((SELECT step FROM dyn), '<=', 1000000::bigint, 'never above 1,000,000');

-- ... and slowly used ones halve it, never below leaf_alloc.step
ALTER SYSTEM SET leaf.segment_duration = '1ms';
SELECT pg_reload_conf();
\set ECHO none
\set QUIET on
SELECT format('CALL pg_temp.await_setting(%L, %L, %L)', 'leaf.segment_duration', '1ms', i = 250)
  FROM generate_series(1, 250) AS i \gexec
\set QUIET off
\set ECHO all
SELECT pg_temp.take_slowly('tap dyn', format('step < %s', (SELECT step FROM dyn)));
SELECT cmp_ok((SELECT step FROM leaf_segments WHERE biz_tag = 'tap dyn' AND database = current_database()),
              '<', (SELECT step FROM dyn), 'slow use halves the step');
SELECT leaf_segment_create('tap floor', 10);
-- six segments used slowly: each refill would halve a step without a floor
SELECT pg_temp.take_slowly('tap floor', 'refills >= 6');
SELECT is((SELECT step FROM leaf_segments WHERE biz_tag = 'tap floor' AND database = current_database()),
          10::bigint, 'the step never goes below leaf_alloc.step');
ALTER SYSTEM RESET leaf.segment_duration;
SELECT pg_reload_conf();

SELECT * FROM finish();
