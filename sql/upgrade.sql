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
SELECT extversion = default_version AS at_the_default_version
  FROM pg_extension, pg_available_extensions
 WHERE extname = 'leaf' AND name = 'leaf';
:describe \gset fresh_
SELECT :fresh_n > 40 AS has_its_objects;

-- every earlier release, created with a tag in use and upgraded.  The
-- steps for each release are written into a script that runs silently
-- and records its outcome, so that this file and its output name no
-- release: a new release needs no change here.
\c postgres
CREATE TABLE leaf_upgrade_result (version text, extversion text,
	tag_kept bool, same_objects bool, same_n bool);
\getenv abs_builddir PG_ABS_BUILDDIR
\set steps :abs_builddir '/results/upgrade_steps.sql'
SELECT string_agg(format($step$
CREATE DATABASE %1$I;
\c %1$I
CREATE EXTENSION leaf VERSION %2$L;
INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100);
ALTER EXTENSION leaf UPDATE;
SELECT extversion AS up_ext FROM pg_extension WHERE extname = 'leaf' \gset
SELECT array_agg(row(biz_tag, max_id, step)::text) = ARRAY['(orders,1,100)'] AS up_kept FROM leaf_alloc \gset
:describe \gset up_
\c postgres
INSERT INTO leaf_upgrade_result VALUES (%2$L, :'up_ext', :'up_kept',
	:'up_objects' = :'fresh_objects', :up_n = :fresh_n);
DROP DATABASE %1$I;
$step$, 'leaf_upgrade_from_' || translate(version, '.', '_'), version), '')
  FROM pg_available_extension_versions, pg_available_extensions
 WHERE pg_available_extension_versions.name = 'leaf'
   AND pg_available_extensions.name = 'leaf' AND version <> default_version
\g (format=unaligned tuples_only=on) :steps
\set ECHO none
\i :steps
\set ECHO all

-- one row per earlier release, each upgraded to the default version with
-- its tag kept and with exactly the objects of a new installation
SELECT count(*) = (SELECT count(*) - 1 FROM pg_available_extension_versions
                    WHERE name = 'leaf') AS every_earlier_release,
       count(*) >= 4 AS at_least_four,
       bool_and(extversion = (SELECT default_version FROM pg_available_extensions
                               WHERE name = 'leaf')) AS at_the_default_version,
       bool_and(tag_kept) AS tag_kept,
       bool_and(same_objects AND same_n) AS same_as_new
  FROM leaf_upgrade_result;
-- the releases that fell short, if any
SELECT version FROM leaf_upgrade_result
 WHERE NOT (tag_kept AND same_objects AND same_n) ORDER BY version;
DROP TABLE leaf_upgrade_result;
DROP DATABASE leaf_upgrade_new;

-- grants an administrator made on leaf_segment_create, whose signature
-- 1.5 changed, are kept across the update: revoked from PUBLIC and given
-- to one role at 1.4, it stays that way at the new signature
CREATE ROLE regress_leaf_tag_maker;
CREATE ROLE regress_leaf_bystander;
CREATE DATABASE leaf_upgrade_grants;
\c leaf_upgrade_grants
CREATE EXTENSION leaf VERSION '1.4';
REVOKE EXECUTE ON FUNCTION leaf_segment_create(text, integer, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION leaf_segment_create(text, integer, bigint, text) TO regress_leaf_tag_maker;
ALTER EXTENSION leaf UPDATE;
SELECT p.oid::regprocedure AS signature,
       has_function_privilege('regress_leaf_tag_maker', p.oid, 'EXECUTE') AS tag_maker_may,
       has_function_privilege('regress_leaf_bystander', p.oid, 'EXECUTE') AS bystander_may
  FROM pg_proc p WHERE p.proname = 'leaf_segment_create';
\c postgres
DROP DATABASE leaf_upgrade_grants;
DROP ROLE regress_leaf_tag_maker;
DROP ROLE regress_leaf_bystander;
