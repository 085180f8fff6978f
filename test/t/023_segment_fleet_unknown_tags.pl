
# Copyright (c) leaf contributors

# Fleet mode: a tag takes a slot before the allocation database has said
# whether it knows it.  A plain user calling with made-up tags must not be
# able to fill leaf.max_tags for every database: slots of tags not loaded
# yet are limited per database.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $alloc = LeafTest::new_node('alloc');
$alloc->safe_psql('postgres', "SELECT leaf_segment_create('known', step => 10)");

my $conninfo =
  'host=' . $alloc->host . ' port=' . $alloc->port . ' dbname=postgres';
my $shard = LeafTest::new_node('shard',
	'leaf.max_tags = 16', 'leaf.max_tags_per_database = 0',
	"leaf.alloc_conninfo = '$conninfo'",
	"leaf.tag_refresh_interval = '1h'");
$shard->safe_psql('postgres', 'CREATE DATABASE other');
$shard->safe_psql('other', 'CREATE EXTENSION leaf');
# mallory may take IDs (the grant an application has), nothing more
$shard->safe_psql('postgres',
	'CREATE ROLE mallory LOGIN; GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text) TO mallory');

my %states;
for my $i (1 .. 20)
{
	my ($ret, $out, $err) = $shard->psql('postgres',
		"\\set VERBOSITY verbose\nSET leaf.wait_timeout = 1; SELECT leaf_segment_nextval('made_up_$i')",
		extra_params => [ '-U', 'mallory' ]);
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	$states{ $state // 'none' }++;
}
note 'made-up tags: ' . join(', ', map { "$_ x $states{$_}" } sort keys %states);
ok($states{'53000'}, 'made-up tags are refused with 53000 after a while');
cmp_ok(
	$shard->safe_psql(
		'postgres', "SELECT count(*) FROM leaf_segments WHERE biz_tag LIKE 'made_up_%'"),
	'<=', 4,
	'they hold at most 4 slots');

my ($state, $err) = LeafTest::sqlstate($shard, 'other',
	"SELECT leaf_segment_nextval('known')");
is($state, undef, 'another database still gets a slot for a known tag')
  or diag $err;

$shard->stop;
$alloc->stop;
done_testing();
