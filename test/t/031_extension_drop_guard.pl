# DROP EXTENSION leaf would drop leaf_alloc and leaf_alloc_retired, and
# with them every counter of the database.  It is refused (LF010) while
# either has rows, unless leaf.allow_drop_with_counters is on (superuser,
# per session); an empty extension drops as before.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../lib";

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('dropguard');

# an empty extension drops as before
my ($state, $err) = LeafTest::sqlstate($node, 'postgres', 'DROP EXTENSION leaf');
is($state, undef, 'an empty extension drops') or diag $err;

$node->safe_psql('postgres', q[
	CREATE EXTENSION leaf;
	SELECT leaf_segment_create('kept', 100);
	SELECT leaf_segment_nextval('kept');
	CREATE TABLE t (id bigint DEFAULT leaf_segment_nextval('kept'));]);

# without CASCADE, the column default that depends on leaf stops it first
($state, $err) = LeafTest::sqlstate($node, 'postgres', 'DROP EXTENSION leaf');
is($state, '2BP01', 'refused without CASCADE: a column default depends on it');
for my $sql ('DROP EXTENSION leaf CASCADE',
	'DROP EXTENSION IF EXISTS pg_nope, leaf CASCADE',
	'DROP SCHEMA public CASCADE')
{
	($state, $err) = LeafTest::sqlstate($node, 'postgres', $sql);
	is($state, 'LF010', "refused with counters: $sql");
}
($state, $err) = LeafTest::sqlstate($node, 'postgres', 'DROP EXTENSION leaf CASCADE');
like($err, qr/cannot drop extension leaf while leaf_alloc holds counters/, 'the message says why');
like($err, qr/leaf_alloc \(1 rows\) and leaf_alloc_retired \(0 rows\)/, 'the detail counts the rows');
like($err, qr/HINT:.*save the counters in the same transaction.*SET LOCAL leaf\.allow_drop_with_counters = on/,
	'the hint says to save them in the transaction of the drop, and how to confirm');
is($node->safe_psql('postgres', q[SELECT max_id > 1 FROM leaf_alloc WHERE biz_tag = 'kept']),
	't', 'the counter is still there');

# only a retired mark: still refused
$node->safe_psql('postgres', q[DELETE FROM leaf_alloc]);
($state, $err) = LeafTest::sqlstate($node, 'postgres', 'DROP EXTENSION leaf CASCADE');
is($state, 'LF010', 'refused with only a retired mark left');

# the setting is for superusers only
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
($state, $err) = LeafTest::sqlstate($node, 'postgres',
	'SET ROLE plain; SET leaf.allow_drop_with_counters = on');
is($state, '42501', 'a plain role cannot set leaf.allow_drop_with_counters');

# confirmed: dropped, and with CASCADE the column default goes too
($state, $err) = LeafTest::sqlstate($node, 'postgres',
	'SET leaf.allow_drop_with_counters = on; DROP EXTENSION leaf CASCADE');
is($state, undef, 'dropped once confirmed in the session') or diag $err;
is($node->safe_psql('postgres', q[SELECT count(*) FROM pg_extension WHERE extname = 'leaf']),
	'0', 'the extension is gone');

# the setting lasts for the session only
$node->safe_psql('postgres', q[
	CREATE EXTENSION leaf;
	SELECT leaf_segment_create('again', 100);]);
($state, $err) = LeafTest::sqlstate($node, 'postgres', 'DROP EXTENSION leaf');
is($state, 'LF010', 'a new session is refused again');

$node->stop;
done_testing();
