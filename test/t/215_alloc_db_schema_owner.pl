
# Copyright (c) leaf contributors

# The owner of leaf's schema in the allocation database decides what the
# statements of leaf's connections there run: they name leaf's objects
# by that schema's name, and its owner may rename it (or drop it) and put
# look-alikes under the old name.  public is owned by pg_database_owner,
# so with the allocation database owned by a tenant, the tenant could run
# code as the role leaf connects as (here a superuser) and forge the
# answers of the worker-ID leases and of the fleet's loads.
#
# 1. the allocation database is owned by a tenant: the snowflake worker
#    takes no worker ID and the fleet's loads are refused, both saying why;
# 2. the tenant renames public and plants a view and a table under the old
#    name, each of which would make it a superuser if leaf's connections
#    read them: it stays a plain role;
# 3. a superuser takes the database back: leaf follows its schema to the
#    new name, serves, and never reads the tenant's look-alikes.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
my $super = $alloc->safe_psql('postgres', 'SELECT current_user');
$alloc->safe_psql('postgres', q[
CREATE ROLE tenant LOGIN;
CREATE DATABASE allocdb OWNER tenant;
]);
$alloc->safe_psql('allocdb', q[
CREATE EXTENSION leaf;
SELECT leaf_segment_create('k', 100);
]);

my $n = LeafTest::new_node('n', { max_worker_processes => undef },
	"leaf.worker_id_source = 'database'",
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=allocdb user=$super connect_timeout=2'",
	"leaf.snowflake_layout = '41+2+12'",
	"leaf.node_address = 'n.example:5432'",
	"leaf.heartbeat_interval = '500ms'",
	"leaf.max_clock_drift_ms = '2000ms'",
	"leaf.wait_timeout = '2s'");

sub tenant_is_super
{
	return $alloc->safe_psql('postgres',
		q[SELECT rolsuper FROM pg_roles WHERE rolname = 'tenant']) eq 't';
}

# ---------------------------------------------------------------------
# 1. a tenant owns the allocation database
# ---------------------------------------------------------------------
ok(LeafTest::sf_wait_reason($n, qr/belongs to role "tenant", which is neither a superuser nor the role leaf connects as/, 30),
	'1: no worker ID is taken while a tenant owns leaf\'s schema, and the reason says so');
my ($st, $err) = LeafTest::sqlstate($n, 'postgres', q[SELECT leaf_segment_nextval('k')]);
ok(defined $st, '1: the fleet\'s load is refused too') or diag $err;
like($err, qr/belongs to role "tenant"/, '1: ... and says why');

# ---------------------------------------------------------------------
# 2. the tenant plants look-alikes under the old name
# ---------------------------------------------------------------------
$alloc->safe_psql('allocdb', q[
SET ROLE tenant;
ALTER SCHEMA public RENAME TO leafs;
CREATE SCHEMA public;
CREATE FUNCTION public.evil() RETURNS bigint LANGUAGE plpgsql AS $f$
BEGIN
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
		EXECUTE 'ALTER ROLE tenant SUPERUSER';
	END IF;
	RETURN 0;
END
$f$;
CREATE VIEW public.leaf_copy_identity AS
	SELECT i.*, public.evil() AS x FROM leafs.leaf_copy_identity i;
CREATE TABLE public.leaf_alloc (biz_tag varchar(128) PRIMARY KEY,
	max_id bigint NOT NULL, step integer NOT NULL, description text,
	update_time timestamptz);
INSERT INTO public.leaf_alloc (biz_tag, max_id, step) VALUES ('k', 1000000, 100);
CREATE FUNCTION public.evil_trigger() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM public.evil();
	NEW.max_id := 100;
	RETURN NEW;
END
$f$;
CREATE TRIGGER evil BEFORE UPDATE ON public.leaf_alloc
	FOR EACH ROW EXECUTE FUNCTION public.evil_trigger();
]);
# several heartbeats and loads
LeafTest::sqlstate($n, 'postgres', q[SELECT leaf_segment_nextval('k')]) for 1 .. 3;
ok(LeafTest::sf_wait_reason($n, qr/belongs to role "tenant"/, 10),
	'2: still no worker ID after the rename');
ok(!tenant_is_super(), '2: the tenant is still a plain role');

# ---------------------------------------------------------------------
# 3. a superuser takes the database back
# ---------------------------------------------------------------------
$alloc->safe_psql('postgres', "ALTER DATABASE allocdb OWNER TO $super");
ok(LeafTest::sf_wait_ready($n, 30), '3: the worker takes a worker ID once a superuser owns leaf\'s schema');
my $id = $n->safe_psql('postgres', q[SELECT leaf_segment_nextval('k')]);
cmp_ok($id, '>', 0, '3: the fleet serves segment IDs again');
cmp_ok($id, '<', 1000000, '3: ... from leaf\'s leaf_alloc');
is($alloc->safe_psql('allocdb', q[SELECT max_id FROM public.leaf_alloc WHERE biz_tag = 'k']),
	'1000000', '3: ... and the look-alike was never written');
ok(!tenant_is_super(), '3: the tenant is still a plain role');
like($n->safe_psql('postgres', 'SELECT leaf_snowflake()'), qr/^\d+$/,
	'3: snowflake IDs come out');

$n->stop;
$alloc->stop;
done_testing();
