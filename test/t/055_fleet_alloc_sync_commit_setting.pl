
# Copyright (c) leaf contributors

# Fleet mode: every load must commit with synchronous_commit = on on the
# allocation database, whatever that server's configuration says and
# whenever it is changed.  Before the fix the shard's session sent
# SET synchronous_commit = on only if it saw off or local when it
# connected: a reload to off afterwards, or remote_write at connect,
# left allocations that a crash (or a failover) could lose.
#
# A trigger on the allocation database's leaf_alloc records the level in
# force in each load's transaction.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
$alloc->safe_psql('postgres', q[
SELECT leaf_segment_create('d', 100);
CREATE TABLE load_levels (at timestamptz DEFAULT clock_timestamp(), level text);
CREATE FUNCTION record_level() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO load_levels (level) VALUES (current_setting('synchronous_commit'));
	RETURN NULL;
END
$$;
CREATE TRIGGER record_level AFTER UPDATE ON leaf_alloc
	FOR EACH ROW EXECUTE FUNCTION record_level();
]);
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');

my $s = LeafTest::new_node('shard',
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user'",
	"leaf.segment_duration = '1ms'",	# keep the step at 100
	"leaf.wait_timeout = '5s'");

# takes IDs enough for several loads; returns the levels they committed with
sub loads_with
{
	my ($n) = @_;
	$alloc->safe_psql('postgres', 'TRUNCATE load_levels');
	my $got = $s->safe_psql('postgres',
		"SELECT count(*) FROM leaf_segment_nextvals('d', $n)");
	is($got, $n, "the shard hands out $n IDs");
	return $alloc->safe_psql('postgres',
		q[SELECT string_agg(DISTINCT level, ',') || ' (' || count(*) || ' loads)' FROM load_levels]);
}

sub set_level
{
	my ($level) = @_;
	$alloc->safe_psql('postgres', "ALTER SYSTEM SET synchronous_commit = '$level'");
	$alloc->safe_psql('postgres', 'SELECT pg_reload_conf()');
	# every backend has read the file once its next command is done;
	# wait for the postmaster's new value to show in a new session
	$alloc->poll_query_until('postgres',
		"SELECT current_setting('synchronous_commit') = '$level'")
	  or die "synchronous_commit did not become $level";
}

like(loads_with(500), qr/^on \(\d+ loads\)$/,
	'with the server at synchronous_commit = on, loads commit with on');

set_level('off');
like(loads_with(500), qr/^on \(\d+ loads\)$/,
	'after a reload to off, loads over the open connection still commit with on');

set_level('remote_write');
# a new remote session, which connects seeing remote_write
$alloc->safe_psql('postgres',
	q[SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'leaf shard %']);
like(loads_with(500), qr/^on \(\d+ loads\)$/,
	'connected with the server at remote_write, loads commit with on');

$alloc->safe_psql('postgres', "ALTER ROLE $user SET synchronous_commit = off");
$alloc->safe_psql('postgres',
	q[SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'leaf shard %']);
like(loads_with(500), qr/^on \(\d+ loads\)$/,
	'with a role setting of off, loads commit with on');

$_->stop for ($s, $alloc);

done_testing();
