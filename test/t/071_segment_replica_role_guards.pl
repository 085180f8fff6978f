
# Copyright (c) leaf contributors

# The guards of leaf_alloc under a session_replication_role = replica
# given by the configuration.  leaf_alloc_guard, leaf_alloc_retire,
# leaf_alloc_admit and leaf_alloc_no_truncate are ordinary triggers, which
# do not fire under replica; leaf_alloc_replicated_mark (ENABLE ALWAYS)
# keeps their rules for every replica session, records a mark only for
# an apply, and refuses what the guards refuse (LF005) for a session that
# applies nothing.  A role with INSERT, UPDATE, DELETE on leaf_alloc never
# lowers max_id, renames a tag or truncates, and a retired tag leaves its
# mark (docs/privileges.md, docs/segment.md):
#  1. A tag administrator lowers max_id with leaf_segment_alter(): LF005,
#     and no ID is handed out twice.
#  2. The same with a plain UPDATE, and a rename.
#  3. A retired tag leaves its mark in leaf_alloc_retired, and a tag made
#     again starts there.
#  4. TRUNCATE leaf_alloc is refused (LF005), for a superuser too.
#  5. A role granted SET on session_replication_role that gives it to
#     itself with ALTER ROLE ... SET (source 'user') is held the same.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('guards',
	"leaf.segment_duration = '1ms'",
	'session_replication_role = replica');

$node->safe_psql('postgres', q[
CREATE ROLE tag_admin LOGIN;
GRANT SELECT, INSERT, UPDATE, DELETE ON leaf_alloc TO tag_admin;
SET session_replication_role = origin;
SELECT leaf_segment_create('order', step => 10);
SELECT leaf_segment_create('gone', step => 10);
]);

# takes $n IDs of $tag; returns them as a list
sub take
{
	my ($tag, $n) = @_;
	return split /\n/, $node->safe_psql('postgres',
		"SELECT leaf_segment_nextval('$tag') FROM generate_series(1, $n)");
}

my %seen;
$seen{$_}++ for take('order', 25);

# 1. leaf_segment_alter as the tag administrator
my ($state, $err) = LeafTest::sqlstate($node, 'postgres',
	q[SET ROLE tag_admin; SELECT leaf_segment_alter('order', max_id => 1)]);
is($state, 'LF005', '1: leaf_segment_alter() may not lower max_id')
  or diag $err;
$node->safe_psql('postgres', q[SELECT leaf_segment_discard('order')]);
my @again = take('order', 40);
is(scalar(grep { $seen{$_} } @again), 0, '1: no ID of order is handed out twice');
$seen{$_}++ for @again;

# 2. plain statements
($state, $err) = LeafTest::sqlstate($node, 'postgres',
	q[SET ROLE tag_admin; UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order']);
is($state, 'LF005', '2: UPDATE may not lower max_id') or diag $err;
($state, $err) = LeafTest::sqlstate($node, 'postgres',
	q[SET ROLE tag_admin; UPDATE leaf_alloc SET biz_tag = 'other' WHERE biz_tag = 'order']);
is($state, 'LF005', '2: UPDATE may not rename a tag') or diag $err;

# 3. retire and create again
my %gone;
$gone{$_}++ for take('gone', 25);
$node->safe_psql('postgres', q[
SET ROLE tag_admin;
SELECT leaf_segment_retire('gone');
SELECT leaf_segment_create('gone', step => 10, start => 1);
]);
is($node->safe_psql('postgres', q[SELECT count(*) FROM leaf_alloc_retired WHERE biz_tag = 'gone']),
	'1', '3: the retired tag left its mark');
$node->safe_psql('postgres', q[SELECT leaf_segment_discard('gone')]);
is(scalar(grep { $gone{$_} } take('gone', 40)), 0,
	'3: no ID of gone is handed out twice');

# 4. TRUNCATE
($state, $err) = LeafTest::sqlstate($node, 'postgres', 'TRUNCATE leaf_alloc');
is($state, 'LF005', '4: TRUNCATE leaf_alloc is refused') or diag $err;

# 5. ALTER ROLE ... SET by the role itself, on a server without the setting
$node->append_conf('postgresql.conf', 'session_replication_role = origin');
$node->reload;
$node->safe_psql('postgres', q[
CREATE ROLE self_setter LOGIN;
GRANT SET ON PARAMETER session_replication_role TO self_setter;
GRANT SELECT, UPDATE ON leaf_alloc TO self_setter;
SELECT leaf_segment_create('third', step => 10);
]);
$node->safe_psql('postgres',
	'ALTER ROLE self_setter SET session_replication_role = replica',
	extra_params => [ '-U', 'self_setter' ]);
is($node->safe_psql('postgres',
	q[SELECT source FROM pg_settings WHERE name = 'session_replication_role'],
	extra_params => [ '-U', 'self_setter' ]), 'user',
	'5: the role is given replica by ALTER ROLE ... SET');
my %third;
$third{$_}++ for take('third', 25);
my ($ret, $out, $err5) = $node->psql('postgres',
	q[SELECT leaf_segment_alter('third', max_id => 1)],
	extra_params => [ '-U', 'self_setter' ]);
like($err5, qr/cannot move backwards/, '5: leaf_segment_alter() may not lower max_id');
note('5: marks: ' . $node->safe_psql('postgres', 'SELECT count(*) FROM leaf_alloc_replicated'));
$node->safe_psql('postgres', q[SELECT leaf_segment_discard('third')]);
is(scalar(grep { $third{$_} } take('third', 40)), 0,
	'5: no ID of third is handed out twice');

$node->stop;
done_testing();
