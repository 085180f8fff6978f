--
-- public IDs: leaf_public_id / leaf_private_id and their base-62 text
-- forms, FF1 of NIST SP 800-38G with AES, radix 2 over 63 numerals.
-- test/leaf.conf names the key file leaf_public_id.key in the data
-- directory, and this file writes it.  What needs a reload or a server
-- of its own (no key, bad key files, a new key in an open session, the
-- server log) is in test/t/190_public_id.pl; NIST's sample vectors and
-- the 63-bit FF1 against a general one are in test/ff1_vectors.c.
--
SELECT current_database() AS regress_db \gset
CREATE DATABASE leaf_public_id_regress TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
\c leaf_public_id_regress
CREATE EXTENSION leaf;

-- the file named by the setting does not exist yet: LF009, and a
-- superuser sees its path
SELECT leaf_public_id(1, 'order');
\echo :LAST_ERROR_SQLSTATE

-- the key of the tests (AES-256), written by the server itself, so owned
-- by its OS user, and with mode 0600 (a file COPY writes itself has 0644,
-- which leaf refuses); COPY adds a newline, which is allowed
COPY (SELECT '8f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0')
  TO PROGRAM 'umask 077 && cat > leaf_public_id.key';
SELECT size FROM pg_stat_file('leaf_public_id.key');

-- known answers under this key, worked out apart from leaf with a
-- separate FF1 written from the spec (Python integers, AES-ECB of the
-- "cryptography" package): the numeral string is the ID's 63 bits, most
-- significant first, the tweak the text's UTF-8 bytes
SELECT id, octet_length(tweak) AS tweak_bytes, leaf_public_id(id, tweak) AS public_id,
       leaf_public_id(id, tweak) = want AS known_answer
  FROM (VALUES (0, '', 4615191284205252920),
               (1, 'order', 2716981693456618124),
               (9223372036854775807, 'order', 765289685543211787),
               (12345, 'zamówienie', 2699875716064961524),
               (4611686018427387904, repeat('x', 200), 8247389920325696492))
       AS k(id, tweak, want);
-- leaf_private_id reverses it
SELECT leaf_private_id(2716981693456618124, 'order');

-- round trip: the edges 0, 1, 2^62, 2^63 - 1 come back unchanged, and
-- public IDs are never negative
SELECT count(*) AS wrong FROM unnest(ARRAY[0, 1, 2, 3, 4611686018427387904,
    9223372036854775806, 9223372036854775807]::bigint[]) x
 WHERE leaf_private_id(leaf_public_id(x, 't'), 't') <> x
    OR leaf_private_id_text(leaf_public_id_text(x, 't'), 't') <> x
    OR leaf_public_id(x, 't') < 0;

-- 10,000,000 random IDs come back unchanged (five runs of 2,000,000)
SELECT setseed(0.1);
SELECT count(*) AS wrong FROM (
    SELECT (floor(random() * 2147483648)::bigint << 32) | floor(random() * 4294967296)::bigint AS x
      FROM generate_series(1, 2000000)) s
 WHERE leaf_private_id(leaf_public_id(x, 't'), 't') <> x;
SELECT setseed(0.2);
SELECT count(*) AS wrong FROM (
    SELECT (floor(random() * 2147483648)::bigint << 32) | floor(random() * 4294967296)::bigint AS x
      FROM generate_series(1, 2000000)) s
 WHERE leaf_private_id(leaf_public_id(x, 't'), 't') <> x;
SELECT setseed(0.3);
SELECT count(*) AS wrong FROM (
    SELECT (floor(random() * 2147483648)::bigint << 32) | floor(random() * 4294967296)::bigint AS x
      FROM generate_series(1, 2000000)) s
 WHERE leaf_private_id(leaf_public_id(x, 't'), 't') <> x;
SELECT setseed(0.4);
SELECT count(*) AS wrong FROM (
    SELECT (floor(random() * 2147483648)::bigint << 32) | floor(random() * 4294967296)::bigint AS x
      FROM generate_series(1, 2000000)) s
 WHERE leaf_private_id(leaf_public_id(x, 't'), 't') <> x;
SELECT setseed(0.5);
SELECT count(*) AS wrong FROM (
    SELECT (floor(random() * 2147483648)::bigint << 32) | floor(random() * 4294967296)::bigint AS x
      FROM generate_series(1, 2000000)) s
 WHERE leaf_private_id(leaf_public_id(x, 't'), 't') <> x;

-- other tweaks give other public IDs (100,000 IDs, no two equal)
SELECT count(*) FILTER (WHERE leaf_public_id(x, 'order') = leaf_public_id(x, 'user')) AS same_as_user,
       count(*) FILTER (WHERE leaf_public_id(x, 'order') = leaf_public_id(x, '')) AS same_as_empty,
       count(*) FILTER (WHERE leaf_public_id(x, 'order') = leaf_public_id(x, 'order ')) AS same_as_order_space
  FROM generate_series(1, 100000) x;

-- Uniformity over the IDs 1 to 1,000,000, for n = 1,000,000:
--  - the high bit (bit 62) is set in n/2 +- 2,500 (5 standard deviations);
--  - the low byte and the top byte (bits 55-62) each pass a chi-square
--    test over 256 bins (255 degrees of freedom) at 330.5, its 99.9%
--    quantile;
--  - public IDs of consecutive IDs go up as often as down: the share of
--    pub(x + 1) > pub(x) is 0.5 +- 0.0025 (5 standard deviations).
-- The same statistics on the IDs themselves fail, so the checks can fail.
WITH p AS (SELECT 'public IDs' AS what, x, leaf_public_id(x, 'order') AS v
             FROM generate_series(1, 1000000) x
           UNION ALL
           SELECT 'the IDs themselves', x, x FROM generate_series(1, 1000000) x),
lo AS (SELECT what, count(*) AS c FROM p GROUP BY what, v & 255),
hi AS (SELECT what, count(*) AS c FROM p GROUP BY what, v >> 55),
ud AS (SELECT what, v > lag(v) OVER (PARTITION BY what ORDER BY x) AS up FROM p),
s AS (SELECT w.what,
             (SELECT count(*) FROM p WHERE p.what = w.what AND v >= 4611686018427387904) AS high,
             (SELECT round(sum((c - 3906.25) ^ 2 / 3906.25) + (256 - count(*)) * 3906.25, 1)
                FROM lo WHERE lo.what = w.what) AS chi_low_byte,
             (SELECT round(sum((c - 3906.25) ^ 2 / 3906.25) + (256 - count(*)) * 3906.25, 1)
                FROM hi WHERE hi.what = w.what) AS chi_top_byte,
             (SELECT round(avg(up::int), 5) FROM ud WHERE ud.what = w.what) AS share_up
        FROM (VALUES ('public IDs'), ('the IDs themselves')) w(what))
SELECT what, high, chi_low_byte, chi_top_byte, share_up,
       abs(high - 500000) < 2500 AS high_bit_ok,
       chi_low_byte < 330.5 AS low_byte_ok,
       chi_top_byte < 330.5 AS top_byte_ok,
       abs(share_up - 0.5) < 0.0025 AS up_down_ok,
       abs(high - 500000) >= 2500 AND chi_top_byte >= 330.5 AND abs(share_up - 0.5) >= 0.0025
         AS fails_high_bit_top_byte_and_up_down
  FROM s ORDER BY what;

-- the text form: always 11 base-62 characters, reversible, distinct
SELECT count(*) FILTER (WHERE leaf_public_id_text(x, 'order') !~ '^[0-9A-Za-z]{11}$') AS not_11_base62,
       count(*) FILTER (WHERE leaf_private_id_text(leaf_public_id_text(x, 'order'), 'order') <> x) AS wrong,
       count(DISTINCT leaf_public_id_text(x, 'order')) AS distinct_texts
  FROM generate_series(1, 100000) x;
-- it is the public ID in base 62, digits 0-9 A-Z a-z, most significant first
SELECT p AS public_id, leaf_public_id_text(42, 'order') AS text,
       leaf_public_id_text(42, 'order') =
         (SELECT string_agg(substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz',
                                   mod(div(p::numeric, 62::numeric ^ k), 62)::int + 1, 1), '' ORDER BY k DESC)
            FROM generate_series(0, 10) k) AS is_base_62
  FROM leaf_public_id(42, 'order') p;
-- 'AzL8n0Y58m7' is 2^63 - 1, the largest public ID
SELECT leaf_private_id_text('AzL8n0Y58m7', '') = leaf_private_id(9223372036854775807, '') AS largest;

-- anything but 11 characters of 0-9A-Za-z up to 'AzL8n0Y58m7': 22P02, with why
SELECT leaf_private_id_text('abc', 'order');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_private_id_text('0000000000-', 'order');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_private_id_text(' 0000000000', 'order');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_private_id_text('AzL8n0Y58m8', 'order');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_private_id_text('zzzzzzzzzzz', 'order');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_private_id_text(repeat('a', 100), 'order');
\echo :LAST_ERROR_SQLSTATE

-- a negative ID or public ID: 22003
SELECT leaf_public_id(-1, 'order');
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_private_id(-5, 'order');
\echo :LAST_ERROR_SQLSTATE
-- a tweak over 256 bytes: 22023, counted in UTF-8 bytes (129 two-byte
-- characters are too many)
SELECT leaf_public_id(1, repeat('x', 257));
\echo :LAST_ERROR_SQLSTATE
SELECT leaf_public_id(1, repeat('ł', 129));
\echo :LAST_ERROR_SQLSTATE
-- NULL in, NULL out; the tweak defaults to the empty string
SELECT leaf_public_id(NULL, 'order') IS NULL AND leaf_public_id(1, NULL) IS NULL
   AND leaf_private_id(NULL) IS NULL AND leaf_private_id_text(NULL) IS NULL
   AND leaf_public_id_text(NULL) IS NULL AS null_in_null_out;
SELECT leaf_public_id(7) = leaf_public_id(7, '') AS empty_tweak_by_default;

--
-- another role: it needs EXECUTE (not granted to PUBLIC since 1.2), and
-- sees neither the key nor the setting that names its file
--
CREATE ROLE leaf_pubid_app;
CREATE TABLE orders (id bigint PRIMARY KEY, note text);
INSERT INTO orders SELECT g, 'o' || g FROM generate_series(1, 1000) g;
GRANT SELECT ON orders TO leaf_pubid_app;
SET ROLE leaf_pubid_app;
SELECT leaf_public_id(1);
RESET ROLE;
GRANT EXECUTE ON FUNCTION leaf_public_id(bigint, text), leaf_private_id(bigint, text)
   TO leaf_pubid_app;
SET ROLE leaf_pubid_app;
-- SHOW and current_setting() are refused (42501; the message differs
-- between majors: "must be superuser or have privileges of
-- pg_read_all_settings" on 15, "permission denied to examine" on 16 and
-- later, with the role in the detail), and pg_settings does not list it
DO $$
DECLARE
	msg text;
	det text;
BEGIN
	EXECUTE 'SHOW leaf.public_id_key_file';
	RAISE NOTICE 'SHOW was allowed';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RAISE NOTICE 'SHOW: %, names pg_read_all_settings: %', SQLSTATE,
		(msg || ' ' || det) ~ '(must be superuser|permission denied to examine).*pg_read_all_settings';
END
$$;
SELECT count(*) AS listed FROM pg_settings WHERE name = 'leaf.public_id_key_file';
DO $$
BEGIN
	PERFORM current_setting('leaf.public_id_key_file');
	RAISE NOTICE 'current_setting() was allowed';
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'current_setting(): %', SQLSTATE;
END
$$;
-- it uses the functions: a lookup by public ID
SELECT note FROM orders WHERE id = leaf_private_id(leaf_public_id(123, 'order'), 'order');
RESET ROLE;
-- the functions are STABLE, so WHERE id = leaf_private_id(...) uses the index
EXPLAIN (COSTS OFF) SELECT note FROM orders WHERE id = leaf_private_id(987654321, 'order');

\c :regress_db
DROP DATABASE leaf_public_id_regress;
DROP ROLE leaf_pubid_app;
