--
-- guard: no SQL of leaf binds to a name a tenant can create, and no
-- object of leaf is open to PUBLIC beyond what docs/privileges.md grants.
--
-- 1. Names.  test/guard_names.sh lists every word followed by "(" and
-- every run of operator characters in leaf's SQL files (the PL/pgSQL
-- bodies and the strings they EXECUTE) and in the string literals of its
-- C sources (the statements run through SPI).  Of those, the functions
-- and operators of pg_catalog and of leaf get decoys: for each of their
-- signatures, the same name in schema public with argument types that a
-- caller passing a varchar, a name, a regclass or a narrower integer
-- matches better (text -> varchar, name, bpchar; oid -> regclass;
-- bigint -> integer, smallint; ...).  Each decoy does what the original
-- does and records that it ran.
--
-- 2. A database owner (on PostgreSQL 15 the owner of schema public)
-- plants them in its database before a superuser installs leaf, at this
-- release and at every earlier one then updated, and the superuser uses
-- leaf.  No decoy may have run, and no constraint, default, trigger,
-- view or function body of leaf may depend on anything outside
-- pg_catalog and the extension (pg_depend).
--
-- 3. Privileges: what PUBLIC may do with leaf's objects, from the catalog.
--
SELECT current_user AS superuser \gset
\getenv abs_srcdir PG_ABS_SRCDIR
CREATE ROLE leaf_guard_owner LOGIN;

-- the names, and leaf's own signatures, from a database with leaf
CREATE DATABASE leaf_guard_names;
\c leaf_guard_names
CREATE EXTENSION leaf;
CREATE TEMP TABLE guard_names (kind text, name text);
-- (not echoed: the statement names the directory the tests run in)
\set ECHO none
SELECT pg_catalog.format('COPY guard_names FROM PROGRAM %L WITH (DELIMITER %L)',
						 pg_catalog.format('sh %s/test/guard_names.sh %s', :'abs_srcdir', :'abs_srcdir'),
						 ' ') \gexec
\set ECHO all
CREATE TEMP TABLE guard_sub (orig regtype, sub regtype);
INSERT INTO guard_sub VALUES
	('text', 'varchar'), ('text', 'name'), ('text', 'bpchar'),
	('oid', 'regclass'), ('bigint', 'integer'), ('bigint', 'smallint'),
	('integer', 'smallint'), ('numeric', 'bigint'), ('numeric', 'integer'),
	('double precision', 'real'), ('timestamptz', 'timestamp'),
	('timestamptz', 'date');
CREATE TEMP VIEW guard_members AS
SELECT d.classid, d.objid FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'leaf');
-- the functions and operators the sources name, with their signatures
CREATE TEMP TABLE guard_called AS
SELECT 'f' AS kind, p.proname::text AS name,
	   p.pronamespace = 'pg_catalog'::regnamespace AS builtin,
	   (SELECT array_agg(t ORDER BY o) FROM unnest(p.proargtypes) WITH ORDINALITY u(t, o)) AS args,
	   p.prorettype AS result, p.proisstrict AS strict
  FROM pg_proc p
 WHERE p.proname IN (SELECT name FROM guard_names WHERE kind = 'f')
   AND (p.pronamespace = 'pg_catalog'::regnamespace
		OR p.oid IN (SELECT objid FROM guard_members WHERE classid = 'pg_proc'::regclass))
UNION ALL
SELECT 'o', o.oprname, true,
	   CASE WHEN o.oprleft = 0 THEN ARRAY[o.oprright] ELSE ARRAY[o.oprleft, o.oprright] END,
	   o.oprresult, true
  FROM pg_operator o
 WHERE o.oprname IN (SELECT name FROM guard_names WHERE kind = 'o')
   AND o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprkind IN ('b', 'l');
-- how many names the sources call (the decoys below are for those of
-- them whose signatures a better match can be made for)
SELECT count(DISTINCT (kind, name)) AS names_called FROM guard_called \gset
SELECT :names_called > 50 AS names_found;
-- the decoys: every signature with at least one argument type replaced
CREATE TEMP TABLE guard_decoys AS
WITH RECURSIVE sig AS (
	SELECT c.*, row_number() OVER () AS n
	  FROM guard_called c
	 WHERE c.args IS NOT NULL AND cardinality(c.args) <= 4
	   AND NOT EXISTS (SELECT FROM pg_type t
						WHERE t.oid = ANY (c.args || c.result) AND t.typtype = 'p')
), v(n, i, args, changed) AS (
	SELECT n, 0, '{}'::oid[], false FROM sig
	UNION ALL
	SELECT v.n, v.i + 1, v.args || x.t, v.changed OR x.sub
	  FROM v JOIN sig ON sig.n = v.n
	 CROSS JOIN LATERAL (SELECT sig.args[v.i + 1]::oid AS t, false AS sub
						 UNION ALL
						 SELECT s.sub::oid, true FROM guard_sub s
						  WHERE s.orig::oid = sig.args[v.i + 1]) x
	 WHERE v.i < cardinality(sig.args)
)
SELECT DISTINCT ON (sig.kind, sig.name, v.args)
	   sig.kind, sig.name, sig.builtin, sig.args AS orig, v.args, sig.result, sig.strict
  FROM v JOIN sig ON sig.n = v.n
 WHERE v.changed AND v.i = cardinality(sig.args)
   -- not a signature that exists already (in pg_catalog it wins; in
   -- leaf's schema the decoy would take leaf's place)
   AND NOT EXISTS (SELECT FROM guard_called c
					WHERE c.kind = sig.kind AND c.name = sig.name AND c.args = v.args);
SELECT count(*) > 500 AS decoys_made FROM guard_decoys;
-- as one script for psql: a table that records the decoys that ran,
-- then the functions and operators
SELECT E'CREATE TABLE public.leaf_guard_decoy_ran (decoy text, by_role name DEFAULT current_user, at timestamptz DEFAULT clock_timestamp());\n'
	   'GRANT INSERT ON public.leaf_guard_decoy_ran TO PUBLIC;\n' ||
	   string_agg(CASE d.kind WHEN 'f' THEN
		format(E'CREATE FUNCTION public.%I(%s) RETURNS %s LANGUAGE plpgsql%s AS $decoy$BEGIN INSERT INTO public.leaf_guard_decoy_ran (decoy) VALUES (%L); RETURN %s.%I(%s); END$decoy$;\n',
			   d.name, sig, d.result::regtype, CASE WHEN d.strict THEN ' STRICT' ELSE '' END,
			   format('%s(%s)', d.name, sig),
			   CASE WHEN d.builtin THEN 'pg_catalog' ELSE 'public' END, d.name, orig_args)
	   ELSE
		format(E'CREATE FUNCTION public.leaf_guard_op_%s(%s) RETURNS %s LANGUAGE plpgsql AS $decoy$BEGIN INSERT INTO public.leaf_guard_decoy_ran (decoy) VALUES (%L); RETURN %s; END$decoy$;\n'
			   'CREATE OPERATOR public.%s (%sRIGHTARG = %s, FUNCTION = public.leaf_guard_op_%s);\n',
			   ord, sig, d.result::regtype, format('operator %s(%s)', d.name, sig),
			   CASE cardinality(d.args)
				WHEN 1 THEN format('OPERATOR(pg_catalog.%s) $1::%s', d.name, d.orig[1]::regtype)
				ELSE format('$1::%s OPERATOR(pg_catalog.%s) $2::%s', d.orig[1]::regtype, d.name, d.orig[2]::regtype) END,
			   d.name,
			   CASE cardinality(d.args) WHEN 2 THEN format('LEFTARG = %s, ', d.args[1]::regtype) ELSE '' END,
			   d.args[cardinality(d.args)]::regtype, ord)
	   END, '' ORDER BY ord) AS decoys
  FROM (SELECT d.*, row_number() OVER (ORDER BY kind, name, args) AS ord,
			   (SELECT string_agg(t::regtype::text, ', ' ORDER BY o) FROM unnest(d.args) WITH ORDINALITY u(t, o)) AS sig,
			   (SELECT string_agg(format('$%s::%s', o, t::regtype), ', ' ORDER BY o) FROM unnest(d.orig) WITH ORDINALITY u(t, o)) AS orig_args
		  FROM guard_decoys d) d \gset
-- the decoys of the reproduced attacks are among them
SELECT name, (SELECT string_agg(t::regtype::text, ', ' ORDER BY o) FROM unnest(args) WITH ORDINALITY u(t, o)) AS args
  FROM guard_decoys
 WHERE (name, args) IN (('octet_length', ARRAY['varchar'::regtype::oid]),
						('<>', ARRAY['varchar'::regtype::oid, 'varchar'::regtype::oid]),
						('leaf_column_default', ARRAY['regclass'::regtype::oid, 'int2'::regtype::oid]))
 ORDER BY 1;

--
-- 3. Privileges: everything PUBLIC may do with an object of leaf (tables,
-- views, sequences, their columns, functions), read from the catalog.
-- docs/privileges.md says why each is open.
--
SELECT kind, object, privileges
  FROM (SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view'
						   WHEN 'S' THEN 'sequence' ELSE c.relkind::text END AS kind,
			   c.oid::regclass::text AS object,
			   (SELECT string_agg(a.privilege_type, ', ' ORDER BY a.privilege_type)
				  FROM aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
				 WHERE a.grantee = 0) AS privileges
		  FROM pg_class c
		 WHERE c.oid IN (SELECT objid FROM guard_members WHERE classid = 'pg_class'::regclass)
		UNION ALL
		SELECT 'column', format('%s.%s', c.oid::regclass, a.attname),
			   (SELECT string_agg(x.privilege_type, ', ' ORDER BY x.privilege_type)
				  FROM aclexplode(a.attacl) x WHERE x.grantee = 0)
		  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		 WHERE c.oid IN (SELECT objid FROM guard_members WHERE classid = 'pg_class'::regclass)
		   AND a.attacl IS NOT NULL
		UNION ALL
		SELECT 'function', p.oid::regprocedure::text,
			   (SELECT string_agg(a.privilege_type, ', ' ORDER BY a.privilege_type)
				  FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
				 WHERE a.grantee = 0)
		  FROM pg_proc p
		 WHERE p.oid IN (SELECT objid FROM guard_members WHERE classid = 'pg_proc'::regclass)) x
 WHERE privileges IS NOT NULL
 ORDER BY 1, 2;
-- and no sequence of leaf's at all, nor anything of leaf in another schema
SELECT pg_describe_object(m.classid, m.objid, 0) AS outside_leafs_schema
  FROM guard_members m
 WHERE (pg_identify_object(m.classid, m.objid, 0)).schema IS DISTINCT FROM 'public'
   AND m.classid IN ('pg_class'::regclass, 'pg_proc'::regclass, 'pg_type'::regclass);
\c postgres

-- what a superuser does with leaf, in a database where decoys wait: the
-- statements give every argument its exact type, and the queries of this
-- file qualify their operators, so that only leaf's own SQL could reach
-- a decoy
\set use 'SELECT public.leaf_segment_create(''guard''::text, 10, 1::bigint, ''guard tag''::text); SELECT public.leaf_segment_nextval(''guard''::text) AS first_id; SELECT pg_catalog.count(*) AS ids FROM public.leaf_segment_nextvals(''guard''::text, 25); UPDATE public.leaf_alloc SET max_id = max_id OPERATOR(pg_catalog.+) 1000, step = 20 WHERE biz_tag OPERATOR(pg_catalog.=) ''guard''::text; SELECT public.leaf_segment_discard(''guard''::text); SELECT public.leaf_segment_nextval(''guard''::text) OPERATOR(pg_catalog.>) 1000 AS raised; SELECT public.leaf_segment_alter(''guard''::text, 30, 5000::bigint, ''guard tag''::text); SELECT public.leaf_segment_raise(10::bigint, ''guard''::text) AS raised_tags, public.leaf_segment_raise(1::bigint) AS raised_every; SELECT public.leaf_segment_create(''gone2''::text, 10, 1::bigint, NULL::text); SELECT public.leaf_segment_retire(''gone2''::text) AS retired_at; SELECT public.leaf_segment_forget(''gone2''::text) AS forgotten; SELECT public.leaf_segment_create(''gone''::text); DELETE FROM public.leaf_alloc WHERE biz_tag OPERATOR(pg_catalog.=) ''gone''::text; SELECT public.leaf_check_tag(''fine''::text); SELECT public.leaf_snowflake() OPERATOR(pg_catalog.>) 0 AS snowflake; SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 AS segments FROM public.leaf_segments; SELECT m.ready, m.refusing, m.runway_ids OPERATOR(pg_catalog.>) 0 AS runway FROM public.leaf_tag_metrics m WHERE m.biz_tag OPERATOR(pg_catalog.=) ''guard''::text AND m.database OPERATOR(pg_catalog.=) pg_catalog.current_database(); SELECT n.snowflake_ready FROM public.leaf_node_metrics n; CREATE TABLE public.guard_t (id bigserial PRIMARY KEY, v text); INSERT INTO public.guard_t (v) SELECT ''x'' FROM pg_catalog.generate_series(1, 5); SELECT public.leaf_adopt(''public.guard_t''::regclass, ''id''::name); INSERT INTO public.guard_t (v) VALUES (''y''); ALTER TABLE public.guard_t RENAME TO guard_t2; ALTER SEQUENCE public.guard_t_id_seq RENAME TO guard_t2_id_seq; SELECT public.leaf_unadopt(''public.guard_t2''::regclass, ''id''::name) OPERATOR(pg_catalog.>) 6 AS unadopted; SELECT public.leaf_adopt(''public.guard_t2''::regclass, ''id''::name, ''guard_t2''::text, 10, false, false); DROP TABLE public.guard_t2; SELECT pg_catalog.count(*) AS adopted FROM public.leaf_adopted; SELECT t.result, t.worker_id FROM public.leaf_worker_lease_take(''guard''::text, ''guard:1''::text, -1, 0::bigint, 0::bigint, 0::bigint, 7::bigint, ''41+10+12''::text, 1023, 500, 1000, 0::bigint, 2000::bigint, 0::bigint, false) t; SELECT t.result, t.worker_id FROM public.leaf_worker_lease_take(''guard2''::text, ''guard:2''::text, -1, 0::bigint, 0::bigint, 0::bigint, 8::bigint, ''41+10+12''::text, 0, 500, 1000, 0::bigint, 2000::bigint, 0::bigint, false, true, 60000::bigint) t; SELECT t.result, t.worker_id FROM public.leaf_worker_lease_take(''guard2''::text, ''guard:2''::text, -1, 0::bigint, 0::bigint, 0::bigint, 8::bigint, ''41+10+12''::text, 1023, 500, 1000, 0::bigint, 2000::bigint, 0::bigint, false, true, 60000::bigint) t; SELECT r.result, r.recorded_hwm_ms FROM public.leaf_worker_lease_renew(0, ''guard''::text, 7::bigint, 5::bigint, 2000::bigint, (SELECT f.fleet_id FROM public.leaf_worker_lease_fleet f), 500, 1000, 0::bigint) r; SELECT public.leaf_worker_lease_release(0, ''guard''::text, 7::bigint, 6::bigint) AS released, public.leaf_worker_lease_give_up(0, ''guard''::text, 7::bigint, 6::bigint) AS given_up; SELECT public.leaf_worker_lease_fleet_reset(); SELECT public.leaf_worker_lease_forget(0) AS forgotten_mark; SELECT i.latest IS NOT NULL AS issued_closed FROM public.leaf_segment_issued(''guard''::text, 1::bigint) i; SELECT b.max_id OPERATOR(pg_catalog.>) 0 AS bounded FROM public.leaf_segment_id_bounds(''guard''::text, pg_catalog.now() OPERATOR(pg_catalog.-) ''1 day''::interval, pg_catalog.clock_timestamp()) b;'
\set check 'SELECT DISTINCT decoy, by_role FROM public.leaf_guard_decoy_ran ORDER BY decoy; SELECT pg_catalog.pg_describe_object(r.classid, r.objid, r.objsubid) AS object, pg_catalog.pg_describe_object(d.refclassid, d.refobjid, 0) AS depends_on FROM (SELECT m.classid, m.objid, 0 AS objsubid FROM pg_catalog.pg_depend m WHERE m.refclassid OPERATOR(pg_catalog.=) ''pg_extension''::regclass AND m.deptype OPERATOR(pg_catalog.=) ''e'' AND m.refobjid OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) ''leaf'') UNION SELECT p.classid, p.objid, 0 FROM pg_catalog.pg_depend p JOIN pg_catalog.pg_depend m ON m.classid OPERATOR(pg_catalog.=) p.refclassid AND m.objid OPERATOR(pg_catalog.=) p.refobjid WHERE m.refclassid OPERATOR(pg_catalog.=) ''pg_extension''::regclass AND m.deptype OPERATOR(pg_catalog.=) ''e'' AND m.refobjid OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) ''leaf'') AND p.classid OPERATOR(pg_catalog.=) ANY (ARRAY[''pg_constraint''::regclass, ''pg_attrdef''::regclass, ''pg_trigger''::regclass, ''pg_rewrite''::regclass])) r JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) r.classid AND d.objid OPERATOR(pg_catalog.=) r.objid WHERE (pg_catalog.pg_identify_object(d.refclassid, d.refobjid, 0)).schema IS DISTINCT FROM ''pg_catalog'' AND d.refclassid OPERATOR(pg_catalog.=) ANY (ARRAY[''pg_proc''::regclass, ''pg_operator''::regclass, ''pg_type''::regclass, ''pg_collation''::regclass, ''pg_class''::regclass, ''pg_opclass''::regclass, ''pg_opfamily''::regclass]) AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend e WHERE e.refclassid OPERATOR(pg_catalog.=) ''pg_extension''::regclass AND e.deptype OPERATOR(pg_catalog.=) ''e'' AND e.refobjid OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) ''leaf'') AND ((e.classid OPERATOR(pg_catalog.=) d.refclassid AND e.objid OPERATOR(pg_catalog.=) d.refobjid) OR (d.refclassid OPERATOR(pg_catalog.=) ''pg_type''::regclass AND e.classid OPERATOR(pg_catalog.=) ''pg_class''::regclass AND e.objid OPERATOR(pg_catalog.=) (SELECT t.typrelid FROM pg_catalog.pg_type t WHERE t.oid OPERATOR(pg_catalog.=) d.refobjid)))) ORDER BY 1, 2;'

--
-- A new installation.
--
CREATE DATABASE leaf_guard_new OWNER leaf_guard_owner;
\c leaf_guard_new leaf_guard_owner
:decoys
\c leaf_guard_new :superuser
CREATE EXTENSION leaf;
:use
:check

--
-- Every earlier release, installed where the decoys wait and updated:
-- the update leaves nothing bound to them.  The steps for each release
-- are written into a script, whose output for each release goes into a
-- file of its own and must be that of a new installation, made the same
-- way; so this file and its output name no release.
--
\getenv abs_builddir PG_ABS_BUILDDIR
\set results :abs_builddir '/results/'
\set steps :results 'guard_steps.sql'
\c postgres
SELECT string_agg(format($step$
CREATE DATABASE %1$I OWNER leaf_guard_owner;
\c %1$I leaf_guard_owner
:decoys
\c %1$I :superuser
CREATE EXTENSION leaf%2$s
\o %3$s
:use
:check
\o
\c postgres
$step$, 'leaf_guard_' || CASE WHEN version = default_version THEN 'ref'
                         ELSE 'from_' || translate(version, '.', '_') END,
        CASE WHEN version = default_version THEN ';'
             ELSE format(E' VERSION %L;\nALTER EXTENSION leaf UPDATE;', version) END,
        :'results' || 'leaf_guard_' || CASE WHEN version = default_version THEN 'ref'
                         ELSE 'from_' || translate(version, '.', '_') END || '.out'), '')
  FROM pg_available_extension_versions v, pg_available_extensions e
 WHERE v.name = 'leaf' AND e.name = 'leaf'
\g (format=unaligned tuples_only=on) :steps
\set ECHO none
\i :steps
\set ECHO all
-- one file per earlier release, each with what a new installation shows
SELECT count(*) = (SELECT count(*) - 1 FROM pg_available_extension_versions
                    WHERE name = 'leaf') AS every_earlier_release,
       count(*) >= 4 AS at_least_four,
       bool_and(pg_read_file(:'results' || datname || '.out')
                = pg_read_file(:'results' || 'leaf_guard_ref.out')) AS same_as_new,
       pg_read_file(:'results' || 'leaf_guard_ref.out') LIKE '%unadopted%' AS the_new_one_used_leaf
  FROM pg_database WHERE datname LIKE 'leaf\_guard\_from\_%';
-- the releases that fell short, if any
SELECT datname FROM pg_database
 WHERE datname LIKE 'leaf\_guard\_from\_%'
   AND pg_read_file(:'results' || datname || '.out')
       IS DISTINCT FROM pg_read_file(:'results' || 'leaf_guard_ref.out')
 ORDER BY 1;
\set ECHO none
SELECT format('DROP DATABASE %I', datname) FROM pg_database
 WHERE datname LIKE 'leaf\_guard\_from\_%' OR datname = 'leaf_guard_ref'
\gexec
\set ECHO all

--
-- 4. No body of a function of leaf names the schema leaf was created in:
-- the owner of that schema may rename it and make objects of leaf's
-- names under the old one, which a superuser's call would then use.  A
-- body finds leaf's schema through pg_extension, or takes the trigger's
-- TG_TABLE_SCHEMA; a view or a default is bound to its objects.
--
\c leaf_guard_names
SELECT p.oid::regprocedure AS names_its_schema
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid
 WHERE d.deptype = 'e' AND e.extname = 'leaf'
   AND p.prosrc ~* ('\m' || e.extnamespace::regnamespace::text || '\s*\.')
 ORDER BY 1;

\c postgres
DROP DATABASE leaf_guard_names;
DROP DATABASE leaf_guard_new;
DROP ROLE leaf_guard_owner;
