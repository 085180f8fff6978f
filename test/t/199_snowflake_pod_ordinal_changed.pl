# Snowflake mode, worker IDs from a pod ordinal: a data directory that did
# not serve with the ordinal's worker ID last waits out its earlier holder,
# as a new volume does.  That is a changed leaf.worker_id_offset (or pod
# name) on the same volume, and a volume copied from another pod.  Before,
# only a missing state file made the node wait: a pod whose offset moved
# onto the worker ID that another pod had just stopped serving with, on a
# clock 4 s behind (within leaf.max_clock_drift_ms), served at once and
# repeated that pod's IDs.  Also: a worker ID past the layout's last one
# names the ordinal and the offset, not leaf.worker_id alone.
use strict;
use warnings;

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my @conf = (
	"leaf.worker_id_from = 'env:LEAF_POD'",
	"leaf.heartbeat_interval = '500ms'",
	"leaf.max_clock_drift_ms = '8s'",
	"leaf.wait_timeout = '1s'");

sub wait_ready
{
	my ($node) = @_;
	return $node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status');
}

# Start $node as pod $podname: it has worker ID $wid, says it waits out an
# earlier holder, and serves only after the wait of a new data directory
# (2 heartbeats and 1 s, and leaf.max_clock_drift_ms: 10 s).
sub starts_after_wait
{
	my ($node, $podname, $wid, $what_id, $what_wait, $what_after) = @_;
	my $started = Time::HiRes::time();
	LeafTest::start_pod($node, $podname);
	is($node->safe_psql('postgres', 'SHOW leaf.worker_id'), $wid, $what_id);
	like(LeafZK::status($node, 'not_ready_reason'),
		qr/^(new worker ID $wid is used only from \d+ ms from now|the snowflake worker is starting)/,
		$what_wait);
	ok(wait_ready($node), 'then it serves');
	cmp_ok(Time::HiRes::time() - $started, '>=', 9, $what_after);
	return;
}

# 1. pod ids-3 of a StatefulSet with offset 0: worker ID 3
my $pod = LeafTest::new_node('sf_ord_changed',
	{ max_worker_processes => undef, start => 0, init => [ allows_streaming => 1 ] }, @conf);
LeafTest::start_pod($pod, 'ids-3');
$pod->safe_psql('postgres', 'CREATE EXTENSION leaf');
ok(wait_ready($pod), 'pod ids-3 serves with worker ID 3');
is(LeafZK::state_file($pod)->{worker_id}, '3', 'its state file names worker ID 3');
$pod->stop;

# 2. another server serves with worker ID 13 (pod ids-3 of a StatefulSet
# with offset 10, say), issues IDs for a while and stops
my $other = LeafTest::new_node('sf_ord_other', { max_worker_processes => undef },
	"leaf.worker_id = 13", "leaf.heartbeat_interval = '500ms'");
ok(wait_ready($other), 'another server serves with worker ID 13');
my $ids_file = $other->basedir . '/ids_13';
$other->safe_psql('postgres',
	"COPY (SELECT id FROM generate_series(1, 8) g, LATERAL leaf_snowflake_nextvals(250000 + 0 * g) id) TO '$ids_file'");
$other->stop;

# 3. the first pod comes back with offset 10 (the same volume), on a clock
# 4 s behind: it must not serve before the other server's IDs are past
$pod->append_conf('postgresql.conf',
	"leaf.worker_id_offset = 10\nleaf.test_node_clock_offset_ms = -4000\n");
my $offset = -s $pod->logfile;
starts_after_wait($pod, 'ids-3', 13, 'with offset 10 the pod has worker ID 13',
	'it waits out an earlier holder of worker ID 13', '... after the wait of a new data directory');
like(slurp_file($pod->logfile, $offset),
	qr/worker ID 13 from the pod ordinal is not worker ID 3, which this data directory served with last/,
	'the log says the worker ID changed');

$pod->safe_psql('postgres', "CREATE TABLE other_ids (id bigint); COPY other_ids FROM '$ids_file'");
my ($lo, $hi) = split /\|/, $pod->safe_psql('postgres', 'SELECT min(id), max(id) FROM other_ids');
$pod->safe_psql('postgres', 'CREATE TABLE mine (id bigint)');
# issue IDs until they are past the other server's
for my $i (1 .. 60)
{
	$pod->safe_psql('postgres',
		"INSERT INTO mine SELECT id FROM generate_series(1, 8) g, LATERAL leaf_snowflake_nextvals(250000 + 0 * g) id WHERE id <= $hi");
	last if $pod->safe_psql('postgres', "SELECT leaf_snowflake() > $hi") eq 't';
}
note('the other server issued ', $pod->safe_psql('postgres',
	"SELECT count(*) || ' IDs over ' || ((max(id) >> 22) - (min(id) >> 22)) || ' ms' FROM other_ids"),
	'; this pod then issued ', $pod->safe_psql('postgres',
	"SELECT count(*) || ' IDs up to theirs' || coalesce(', from ' || ((min(id) >> 22) - (${lo}::bigint >> 22)) || ' ms after their first', '') FROM mine"));
is($pod->safe_psql('postgres', 'SELECT count(*) FROM mine JOIN other_ids USING (id)'),
	'0', 'no ID of the other server is repeated');
$pod->stop;

# 4. a restart with the same offset: no wait
my $started = Time::HiRes::time();
LeafTest::start_pod($pod, 'ids-3');
ok(wait_ready($pod), 'a restart with the same ordinal and offset serves');
cmp_ok(Time::HiRes::time() - $started, '<', 8, '... without the wait');

# 5. a new pod's volume copied from this one's (a restored backup, a clone):
# pod ids-4 has worker ID 14, which this data directory never served with
$pod->backup('b');
my $copy = LeafTest::new_node_from_backup('sf_ord_copy', $pod, 'b',
	{ start => 0 },
	"leaf.test_node_clock_offset_ms = 0");
$pod->stop;
starts_after_wait($copy, 'ids-4', 14, 'the copy as pod ids-4 has worker ID 14',
	'a volume copied from another pod waits as a new one does', '... after the wait');
$copy->stop;

# 6. past the layout's last worker ID: the reason names the ordinal and the offset
$copy->append_conf('postgresql.conf', "leaf.worker_id_offset = 1020\n");
LeafTest::start_pod($copy, 'ids-4');
LeafZK::wait_decided($copy);
like(LeafZK::status($copy, 'not_ready_reason'),
	qr/^"leaf\.worker_id" is 1024, the pod ordinal of "leaf\.worker_id_from" plus "leaf\.worker_id_offset", but must be between 0 and 1023; lower "leaf\.worker_id_offset"/,
	'a worker ID past the layout names the ordinal and the offset');
$copy->stop;
done_testing();
