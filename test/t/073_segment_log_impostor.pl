# The record of segment loads is leaf's own table: in a database still at
# 1.4 under the 1.5 library, a table named leaf_segment_log that a tenant
# made in the extension's schema is not leaf's, and the allocator, which
# loads as the bootstrap superuser, must neither write it nor run the
# tenant's trigger on it.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('impostor', { extension => 0 });

$node->safe_psql('postgres', 'CREATE ROLE tenant LOGIN');
$node->safe_psql('postgres', 'CREATE DATABASE app OWNER tenant');
$node->safe_psql('app', q[
	CREATE EXTENSION leaf VERSION '1.4';
	SELECT leaf_segment_create('orders', 10);
	GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO tenant;
]);

# the database's owner may create in public (PostgreSQL 15), leaf's schema
$node->safe_psql('app', q[
	CREATE TABLE public.leaf_segment_log (biz_tag varchar(128),
		first_id bigint, last_id bigint, loaded_at timestamptz,
		loaded_by text, serving_first_id bigint);
	CREATE FUNCTION public.grab() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		NEW.loaded_by := NEW.loaded_by || ' as ' || current_user;
		IF (SELECT rolsuper FROM pg_catalog.pg_roles
		     WHERE rolname = current_user) THEN
			EXECUTE 'ALTER ROLE tenant SUPERUSER';
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER grab BEFORE INSERT ON public.leaf_segment_log
		FOR EACH ROW EXECUTE FUNCTION public.grab();
], extra_params => [ '-U', 'tenant' ]);

is($node->safe_psql('app',
		"SELECT count(*) FROM (SELECT leaf_segment_nextval('orders') FROM generate_series(1, 25)) s",
		extra_params => [ '-U', 'tenant' ]),
	'25', 'the tenant takes IDs of a database at 1.4');

is($node->safe_psql('postgres',
		"SELECT rolsuper FROM pg_roles WHERE rolname = 'tenant'"),
	'f', 'the tenant did not become a superuser through the allocator');
is($node->safe_psql('app', 'SELECT count(*) FROM public.leaf_segment_log'),
	'0', 'the allocator wrote nothing into a table that is not leaf\'s');

# the same at 1.3, through leaf_alloc_replicated (1.4), which a load reads
# as the bootstrap superuser: a view another tenant made runs its code
$node->safe_psql('postgres', 'CREATE ROLE tenant2 LOGIN');
$node->safe_psql('postgres', 'CREATE DATABASE app13 OWNER tenant2');
$node->safe_psql('app13', q[
	CREATE EXTENSION leaf VERSION '1.3';
	SELECT leaf_segment_create('orders', 10);
	GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO tenant2;
]);
$node->safe_psql('app13', q[
	CREATE FUNCTION public.grab13() RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
		IF (SELECT rolsuper FROM pg_catalog.pg_roles
		     WHERE rolname = current_user) THEN
			EXECUTE 'ALTER ROLE tenant2 CREATEROLE';
		END IF;
		RETURN NULL;
	END $$;
	CREATE VIEW public.leaf_alloc_replicated AS
		SELECT g AS origin, NULL::text AS publications,
		       now() AS last_applied
		  FROM (SELECT public.grab13() AS g) s WHERE g IS NOT NULL;
], extra_params => [ '-U', 'tenant2' ]);
$node->psql('app13', "SELECT leaf_segment_nextval('orders')",
	extra_params => [ '-U', 'tenant2' ]);
is($node->safe_psql('postgres',
		"SELECT rolcreaterole FROM pg_roles WHERE rolname = 'tenant2'"),
	'f', 'a view named leaf_alloc_replicated ran nothing as a superuser');

done_testing();
