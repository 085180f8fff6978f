
# Copyright (c) leaf contributors

# Fleet mode: the shard's SQL on the allocation database must not pick up
# operators that someone created in a schema on the search path.  An
# "=" for (varchar, varchar) in public matches biz_tag = $1::varchar
# exactly, so an unqualified "=" resolves to it rather than to
# pg_catalog's texteq.  Before the fix, such an operator that answers
# true made the shard's load lock and update every tag's row, and the
# load failed.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
$alloc->safe_psql('postgres', q[
SELECT leaf_segment_create('x', 100, 1000);
SELECT leaf_segment_create('y', 100, 5000);
CREATE FUNCTION public.always_equal(varchar, varchar) RETURNS boolean
	LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = varchar,
	FUNCTION = public.always_equal);
]);
is( $alloc->safe_psql('postgres',
		q[SELECT count(*) FROM leaf_alloc WHERE biz_tag = 'x'::varchar]),
	'2', 'on the allocation database, an unqualified = now matches every row');
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');

my $s = LeafTest::new_node('shard',
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user'",
	"leaf.wait_timeout = '3s'");

for my $tag ('x', 'y')
{
	my ($ret, $out, $err) = $s->psql('postgres',
		"SELECT min(i), max(i), count(*) FROM leaf_segment_nextvals('$tag', 250) i");
	is($ret, 0, "the shard hands out IDs of $tag") or diag $err;
	is($out, $tag eq 'x' ? '1000|1249|250' : '5000|5249|250',
		"IDs of $tag come from its own row");
}
is( $alloc->safe_psql('postgres',
		q[SELECT bool_and(CASE WHEN biz_tag::text = 'x'::text THEN max_id BETWEEN 1250 AND 4999
										 ELSE max_id >= 5250 END) FROM leaf_alloc]),
	't', 'each load moved only its own row');

$_->stop for ($s, $alloc);

done_testing();
