--
-- metrics_encoding: leaf_segments, leaf_segment_errors() and the metrics
-- views show the tags of every database of the server, and a tag is
-- stored in the encoding of its own database.  Read from a database of
-- another encoding, a tag is valid text there (bytes outside ASCII as
-- \xNN, a backslash doubled), so that neither the conversion to the
-- client's encoding nor a collector that needs UTF-8 fails on it.
--
SELECT current_user AS superuser \gset
CREATE DATABASE leaf_enc_utf8 ENCODING 'UTF8' TEMPLATE template0
	LC_COLLATE 'C' LC_CTYPE 'C';
CREATE DATABASE leaf_enc_latin1 ENCODING 'LATIN1' TEMPLATE template0
	LC_COLLATE 'C' LC_CTYPE 'C';

-- tags of a LATIN1 database: e with acute accent (0xe9), and a backslash
\c leaf_enc_latin1 :superuser
CREATE EXTENSION leaf;
SELECT leaf_segment_create(convert_from('\x636166e9'::bytea, 'LATIN1'), 10);
SELECT leaf_segment_nextval(convert_from('\x636166e9'::bytea, 'LATIN1'));
SELECT leaf_segment_create('a\b', 10);
SELECT leaf_segment_nextval('a\b');
-- its own database shows the tags as they are
SELECT encode(convert_to(biz_tag, 'LATIN1'), 'hex') AS tag_bytes
  FROM leaf_tag_metrics
 WHERE database = current_database()
 ORDER BY 1;

\c leaf_enc_utf8 :superuser
CREATE EXTENSION leaf;
SELECT leaf_segment_create('café', 10);
SELECT leaf_segment_nextval('café');
SELECT database, biz_tag, ready, runway_ids > 0 AS runway
  FROM leaf_tag_metrics
 WHERE database IN ('leaf_enc_latin1', 'leaf_enc_utf8')
 ORDER BY 1, 2;
SELECT database, biz_tag, failed_loads
  FROM leaf_segment_errors()
 WHERE database = 'leaf_enc_latin1'
 ORDER BY 1, 2;
SELECT database, biz_tag, state
  FROM leaf_segments
 WHERE database = 'leaf_enc_latin1'
 ORDER BY 1, 2;
-- functions that check their input's encoding take it
SELECT upper(biz_tag) FROM leaf_tag_metrics
 WHERE database = 'leaf_enc_latin1' ORDER BY 1;
-- and so does a client of another encoding
SET client_encoding = 'LATIN1';
SELECT database, biz_tag FROM leaf_tag_metrics
 WHERE database = 'leaf_enc_latin1' ORDER BY 1, 2;
SELECT segment_tags >= 3 AS counted FROM leaf_node_metrics;
RESET client_encoding;

\c contrib_regression :superuser
DROP DATABASE leaf_enc_latin1;
DROP DATABASE leaf_enc_utf8;
