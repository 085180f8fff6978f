# Logs and process titles name the allocator's database by name: the log
# line of its start, pg_stat_activity.application_name and the process
# title (ps) all say "leaf allocator ... <name>", not an OID.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('dbnames');
$node->safe_psql('postgres', 'CREATE DATABASE "shop orders"');
my $oid = $node->safe_psql('postgres', q[SELECT oid FROM pg_database WHERE datname = 'shop orders']);

my $log_offset = -s $node->logfile;
$node->safe_psql('shop orders', q[
	CREATE EXTENSION leaf;
	INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10);
	SELECT leaf_segment_nextval('t');
]);

ok($node->wait_for_log(qr/leaf allocator started for database "shop orders"/, $log_offset),
	'the start of the allocator is logged with the database name');
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/database with OID $oid/, 'no log line names the database by its OID');

my $row = $node->safe_psql('postgres', q[
	SELECT pid || '|' || application_name FROM pg_stat_activity
	 WHERE backend_type = 'leaf allocator' AND datname = 'shop orders']);
my ($pid, $app) = split /\|/, $row, 2;
is($app, 'leaf allocator shop orders', 'pg_stat_activity.application_name names the database');

SKIP:
{
	skip 'no /proc', 1 unless -r "/proc/$pid/cmdline";
	my $title = slurp_file("/proc/$pid/cmdline");
	$title =~ s/\0/ /g;
	like($title, qr/leaf allocator for database "shop orders"/, "the process title names the database: $title");
}

# dropping the extension: the worker's last words name the database too
$log_offset = -s $node->logfile;
$node->safe_psql('shop orders', 'SET leaf.allow_drop_with_counters = on; DROP EXTENSION leaf');
ok($node->wait_for_log(qr/no longer installed in database "shop orders"/, $log_offset),
	'the exit of the allocator is logged with the database name');

$node->stop;
done_testing();
