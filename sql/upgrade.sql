--
-- upgrades: leaf created at every earlier release and brought up with
-- ALTER EXTENSION leaf UPDATE has exactly the objects and definitions of a
-- new installation (functions with their privileges, tables with their
-- columns and defaults, views, triggers, constraints, event triggers).
-- Upgrades in use, with IDs and under load, are test/t/024 and 033.
--
-- what makes up the extension, one line per object; its md5 in :objects
\set describe 'SELECT md5(string_agg(line, E''\n'' ORDER BY line)) AS objects, count(*) AS n FROM (SELECT pg_describe_object(d.classid, d.objid, d.objsubid) || '' '' || coalesce(md5(CASE d.classid WHEN ''pg_proc''::regclass THEN pg_get_functiondef(d.objid) || coalesce(p.proacl::text, '''') WHEN ''pg_class''::regclass THEN coalesce(pg_get_viewdef(d.objid), '''') || coalesce(c.relacl::text, '''') || (SELECT string_agg(a.attname || '' '' || format_type(a.atttypid, a.atttypmod) || coalesce('' default '' || pg_get_expr(ad.adbin, ad.adrelid), ''''), '', '' ORDER BY a.attnum) FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum WHERE a.attrelid = d.objid AND a.attnum > 0 AND NOT a.attisdropped) END), '''') AS line FROM pg_depend d LEFT JOIN pg_proc p ON d.classid = ''pg_proc''::regclass AND p.oid = d.objid LEFT JOIN pg_class c ON d.classid = ''pg_class''::regclass AND c.oid = d.objid WHERE d.refclassid = ''pg_extension''::regclass AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = ''leaf'') AND d.deptype = ''e'' UNION ALL SELECT tgname || '' '' || pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal AND tgrelid::regclass::text LIKE ''leaf%'' UNION ALL SELECT conrelid::regclass || '' '' || conname || '' '' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid::regclass::text LIKE ''leaf%'' UNION ALL SELECT evtname || '' '' || evtevent || '' '' || evtfoid::regproc || '' '' || coalesce(evttags::text, '''') FROM pg_event_trigger) s'

-- a new installation of the current release
CREATE DATABASE leaf_upgrade_new;
\c leaf_upgrade_new
CREATE EXTENSION leaf;
SELECT extversion FROM pg_extension WHERE extname = 'leaf';
:describe \gset fresh_
SELECT :fresh_n > 40 AS has_its_objects;

-- every earlier release, upgraded, with a tag in use
SELECT version FROM pg_available_extension_versions
 WHERE name = 'leaf' ORDER BY version;

CREATE DATABASE leaf_upgrade_from_1_0;
\c leaf_upgrade_from_1_0
CREATE EXTENSION leaf VERSION '1.0';
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100);
ALTER EXTENSION leaf UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaf';
SELECT biz_tag, max_id, step FROM leaf_alloc;
:describe \gset up_
SELECT :'up_objects' = :'fresh_objects' AS from_1_0_same_as_new,
       :up_n = :fresh_n AS same_number_of_objects;

CREATE DATABASE leaf_upgrade_from_1_1;
\c leaf_upgrade_from_1_1
CREATE EXTENSION leaf VERSION '1.1';
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100);
ALTER EXTENSION leaf UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaf';
SELECT biz_tag, max_id, step FROM leaf_alloc;
:describe \gset up_
SELECT :'up_objects' = :'fresh_objects' AS from_1_1_same_as_new,
       :up_n = :fresh_n AS same_number_of_objects;

CREATE DATABASE leaf_upgrade_from_1_2;
\c leaf_upgrade_from_1_2
CREATE EXTENSION leaf VERSION '1.2';
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100);
ALTER EXTENSION leaf UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaf';
SELECT biz_tag, max_id, step FROM leaf_alloc;
:describe \gset up_
SELECT :'up_objects' = :'fresh_objects' AS from_1_2_same_as_new,
       :up_n = :fresh_n AS same_number_of_objects;

CREATE DATABASE leaf_upgrade_from_1_3;
\c leaf_upgrade_from_1_3
CREATE EXTENSION leaf VERSION '1.3';
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100);
ALTER EXTENSION leaf UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaf';
SELECT biz_tag, max_id, step FROM leaf_alloc;
:describe \gset up_
SELECT :'up_objects' = :'fresh_objects' AS from_1_3_same_as_new,
       :up_n = :fresh_n AS same_number_of_objects;

\c postgres
DROP DATABASE leaf_upgrade_new;
DROP DATABASE leaf_upgrade_from_1_0;
DROP DATABASE leaf_upgrade_from_1_1;
DROP DATABASE leaf_upgrade_from_1_2;
DROP DATABASE leaf_upgrade_from_1_3;
