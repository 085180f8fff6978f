# Snowflake mode with worker IDs from the allocation database
# (leaf.worker_id_source = 'database'), no ZooKeeper.  The layout has two
# worker-ID bits, so that four rows fill the table of leases:
#  1. two nodes get distinct worker IDs, and their IDs are unique;
#  2. a hand-set worker ID is claimed there, and a second node with the
#     same one is refused with a clear error;
#  3. kill -9 of a node: the restart takes its row back, above its IDs;
#  4. a node whose worker is frozen (SIGSTOP) stops serving once its
#     lease can end, and a waiting node takes its worker ID over only past
#     the end of that lease plus leaf.max_clock_drift_ms, above its mark;
#  5. the allocation database stopped: running nodes serve until their
#     lease can end, then stop; a node restarted meanwhile does not serve
#     from its state file (a worker ID held there may be taken over), and
#     takes its row back once the database is up;
#  6. a node whose clock is off by more than leaf.max_clock_drift_ms
#     from the database's is refused;
#  7. leaf_snowflake_new_worker_id() gives a row up and takes another.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use Time::Local ();

my @started;
END
{
	# a frozen worker would keep its node from stopping
	kill 'CONT', $_ for grep { defined } map { $_->{leaf_frozen} } @started;
}

my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
push @started, $alloc;
my $aport = $alloc->port;
# the nodes log in as a role with no more than they need
$alloc->safe_psql('postgres', q[
CREATE ROLE leaf_node LOGIN;
GRANT USAGE ON SCHEMA public TO leaf_node;
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline, leaf_worker_lease_fleet TO leaf_node;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_take, leaf_worker_lease_renew, leaf_worker_lease_release, leaf_worker_lease_give_up, leaf_worker_lease_copy_check, leaf_worker_lease_fleet_check, leaf_worker_lease_pick TO leaf_node;
]);
my $user = 'leaf_node';

# heartbeat 500 ms: the lease (and the margin of a mark) is 2 s
my $lease_ms = 2000;
my $drift_ms = 2000;

sub sf_node
{
	my ($name, @extra) = @_;
	my $node = LeafTest::new_node($name, { max_worker_processes => undef, start => 0 },
		"leaf.worker_id_source = 'database'",
		"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user connect_timeout=2'",
		"leaf.snowflake_layout = '41+2+12'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '${drift_ms}ms'",
		"leaf.wait_timeout = '1s'",
		# part 5 reads when the generator stopped from the log
		"log_timezone = 'UTC'",
		@extra);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
	push @started, $node;
	return $node;
}

# kill -9 of the postmaster; its processes then exit as well
sub crash
{
	my ($node) = @_;
	my @pids = split /\n/, $node->safe_psql('postgres', 'SELECT pid FROM pg_stat_activity');
	my $pm = $node->{_pid};
	$node->kill9;
	ok(LeafTest::wait_until(sub { !grep { kill 0, $_ } $pm, @pids }, 'the processes of ' . $node->name . ' to exit'),
		'kill -9 of ' . $node->name);
	return;
}

sub wid_of { return ($_[0] >> 12) & 3; }

sub holders
{
	return $alloc->safe_psql('postgres',
		'SELECT string_agg(worker_id || \'=\' || holder_address, \',\' ORDER BY worker_id) FROM leaf_worker_lease');
}

# the table is the extension's, and PUBLIC may not touch it
is($alloc->safe_psql('postgres',
	"SELECT has_table_privilege('public', 'leaf_worker_lease', 'SELECT') OR has_table_privilege('public', 'leaf_worker_lease', 'UPDATE')"),
	'f', 'PUBLIC may neither read nor write leaf_worker_lease');

# 1. two nodes, distinct worker IDs, unique IDs
my $a = sf_node('a');
my $b = sf_node('b');
ok(LeafTest::sf_wait_ready($a), 'node a serves');
ok(LeafTest::sf_wait_ready($b), 'node b serves');
is(LeafTest::sf_status($a, 'worker_id_source'), 'database', 'its worker ID comes from the allocation database');
my ($wa, $wb) = (LeafTest::sf_status($a, 'worker_id'), LeafTest::sf_status($b, 'worker_id'));
isnt($wa, $wb, "a and b hold distinct worker IDs ($wa, $wb)");
like(holders(), qr/\b$wa=a\.example:5432\b/, "the allocation database holds worker ID $wa for a");
my @ia = LeafTest::sf_ids($a, 20000);
my @ib = LeafTest::sf_ids($b, 20000);
my %seen;
$seen{$_}++ for @ia, @ib;
is(scalar(keys %seen), 40000, '40,000 IDs of the two nodes are unique');
is(scalar(grep { wid_of($_) != $wa } @ia), 0, "a's IDs carry worker ID $wa");

# 2. a hand-set worker ID: claimed; a second node with it is refused
my $h = sf_node('h', 'leaf.worker_id = 3');
ok(LeafTest::sf_wait_ready($h), 'a node with leaf.worker_id = 3 serves');
like(holders(), qr/\b3=h\.example/, '... its worker ID is claimed in the allocation database');
my $h2 = sf_node('h2', 'leaf.worker_id = 3');
ok(LeafTest::sf_wait_reason($h2, qr/^"leaf\.worker_id" is 3, but h\.example:5432 holds worker ID 3 in the allocation database/),
	'a second node with the same hand-set worker ID is refused, and says who holds it');
my ($state) = LeafTest::sqlstate($h2, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', '... its calls fail with LF102');
ok(LeafTest::sf_wait_ready($h), '... and the first one still serves');
$h2->stop;
@started = grep { $_ != $h2 } @started;

# 3. kill -9: the restart takes its row back, above its IDs
my $last_a = $ia[-1];
crash($a);
$a->start;
my $t0 = Time::HiRes::time();
ok(LeafTest::sf_wait_ready($a), 'after kill -9, a serves again');
is(LeafTest::sf_status($a, 'worker_id'), $wa, "... with its worker ID $wa");
cmp_ok(Time::HiRes::time() - $t0, '<', ($lease_ms + $drift_ms) / 1000,
	'... without the wait of a new holder');
cmp_ok(($a->safe_psql('postgres', 'SELECT leaf_snowflake()')) + 0, '>', $last_a,
	'... above the IDs it issued before');

# a clean stop ends the lease: the next start takes the row back at once
$last_a = ($a->safe_psql('postgres', 'SELECT leaf_snowflake()')) + 0;
$a->stop;
is($alloc->safe_psql('postgres',
	"SELECT expires_at <= clock_timestamp() FROM leaf_worker_lease WHERE worker_id = $wa"),
	't', 'a clean stop ends the lease in the allocation database');
$a->start;
ok(LeafTest::sf_wait_ready($a), '... and the restart serves');
is(LeafTest::sf_status($a, 'worker_id'), $wa, "... with its worker ID $wa");
cmp_ok(($a->safe_psql('postgres', 'SELECT leaf_snowflake()')) + 0, '>', $last_a,
	'... above the IDs it issued before');
unlike(slurp_file($a->logfile), qr/took back worker ID/,
	'... as the run its state file names (no wait of a new holder)');

# 4. all four worker IDs held: a fourth node waits; a's worker frozen
my $c_started = Time::HiRes::time();
my $c = sf_node('c');
ok(LeafTest::sf_wait_ready($c), 'a third node serves');
cmp_ok(Time::HiRes::time() - $c_started, '>=', ($lease_ms + 2 * $drift_ms) / 1000 - 0.2,
	'... once the longest lease an earlier holder could still use has passed (a lease, on a clock up to twice the drift away)');
my $wc = LeafTest::sf_status($c, 'worker_id');
my $d = sf_node('d');
ok(LeafTest::sf_wait_reason($d, qr/^every worker ID from 0 to 3 is held in the allocation database/),
	'with all worker IDs held, a fourth node waits');

@ia = LeafTest::sf_ids($a, 1000);
# the instant of a's first refusal, taken by a loop in the server, in a
# session that runs from before the freeze: the time a client's polls
# take on a loaded machine is no part of it
$a->safe_psql('postgres', q{
CREATE FUNCTION first_refusal(seconds float8) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + make_interval(secs => seconds);
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		BEGIN
			PERFORM leaf_snowflake();
		EXCEPTION WHEN SQLSTATE 'LF102' THEN
			RETURN extract(epoch FROM clock_timestamp());
		END;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN NULL;
END $$});
my ($refusal_out, $refusal_err) = ('', '');
my $refusal = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $a->connstr('postgres'), '-c', 'SELECT first_refusal(30)' ],
	'>', \$refusal_out, '2>', \$refusal_err);
ok( LeafTest::wait_until(
		sub {
			$a->safe_psql('postgres',
				q{SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT first_refusal(30)'}) == 1;
		},
		'the session that watches a for its first refusal'),
	'a session watches a for its first refusal');
my $apid = $a->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'leaf snowflake worker'");
my $frozen_at = Time::HiRes::time();
kill 'STOP', $apid;
$a->{leaf_frozen} = $apid;
# the row is final now (a renewal under way may still land)
Time::HiRes::sleep(0.3);
my ($expires, $mark) = split /\|/, $alloc->safe_psql('postgres',
	"SELECT extract(epoch FROM expires_at) * 1000, hwm_ms FROM leaf_worker_lease WHERE worker_id = $wa");
$refusal->finish;
my ($refused_at) = $refusal_out =~ /^([0-9.]+)$/m;
ok(defined $refused_at, 'a node whose worker is frozen stops serving')
  or diag "the watching session printed: $refusal_out $refusal_err";
cmp_ok(($refused_at // 1e12) - $frozen_at, '<=', ($lease_ms + 1000) / 1000 + 1,
	'... within its lease');
ok(LeafTest::sf_wait_ready($d), "the fourth node then serves");
is(LeafTest::sf_status($d, 'worker_id'), $wa, "... with a's worker ID $wa, taken over");
my $since = $alloc->safe_psql('postgres',
	"SELECT extract(epoch FROM held_since) * 1000 FROM leaf_worker_lease WHERE worker_id = $wa");
cmp_ok($since - $expires, '>=', $drift_ms,
	"d took a's worker ID over only past the end of a's lease plus leaf.max_clock_drift_ms, on the database's clock");
my $first_d = ($d->safe_psql('postgres', 'SELECT leaf_snowflake()')) + 0;
cmp_ok($d->safe_psql('postgres', "SELECT extract(epoch FROM ts) * 1000 FROM leaf_snowflake_decode($first_d)"),
	'>', $mark, "d's IDs are above a's mark");
my %ia = map { $_ => 1 } @ia;
is(scalar(grep { $ia{$_} } LeafTest::sf_ids($d, 5000)), 0, "d repeats none of a's IDs");
ok(LeafTest::wait_until(sub {
	my $log = slurp_file($d->logfile);
	return $log =~ /took over worker ID $wa, whose lease in the allocation database had ended/;
}, 'the takeover in the log'), 'the log of d names the takeover');
kill 'CONT', $apid;
delete $a->{leaf_frozen};
ok(LeafTest::sf_wait_reason($a, qr/no longer holds worker ID $wa for this node|every worker ID from 0 to 3 is held/),
	'a, thawed, finds its worker ID gone and does not serve');
$a->stop;
@started = grep { $_ != $a } @started;

# 5. the allocation database stopped.  When b stopped serving is read
# from its log, as a loaded machine may answer the test's calls late.
ok(LeafTest::sf_wait_ready($b), 'b serves before the allocation database stops');
my $log_from = -s $b->logfile;
$alloc->stop('fast');
my $stopped_at = Time::HiRes::time();
my $served = defined eval { $b->safe_psql('postgres', 'SELECT leaf_snowflake()') };
SKIP:
{
	# its last renewal was up to a heartbeat before the stop
	my $late = Time::HiRes::time() - $stopped_at;
	skip sprintf('the call came %.1f s after the stop, past the grace', $late), 1
	  if !$served && $late > ($lease_ms - 500) / 1000;
	ok($served, 'right after the allocation database stopped, b still serves');
}
ok(LeafTest::wait_until(sub {
	my ($st) = LeafTest::sqlstate($b, 'postgres', 'SELECT leaf_snowflake()');
	return defined $st && $st eq 'LF102';
}, 'b to stop serving', 15), 'b stops serving once its lease can end');
my ($ran_out) = substr(slurp_file($b->logfile), $log_from) =~
  /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC \[\d+\] LOG:  leaf snowflake generator not ready: the lease ran out/m;
ok(defined $ran_out, '... and its log says when');
my $ran_out_at = 0;
if (defined $ran_out && $ran_out =~ /^(\d+)-(\d+)-(\d+) (\d+):(\d+):(\d+)(\.\d+)$/)
{
	$ran_out_at = Time::Local::timegm($6, $5, $4, $3, $2 - 1, $1) + $7;
}
cmp_ok($ran_out_at - $stopped_at, '<=', ($lease_ms + 1500) / 1000 + 1,
	'... within its lease and a heartbeat');
like(LeafTest::sf_status($b, 'not_ready_reason'), qr/the lease ran out.*the allocation database has not recorded a new high-water mark/,
	'... and says why');
$c->stop;
$c->start;
ok(LeafTest::sf_wait_reason($c, qr/^could not take a worker ID from the allocation database: .*"leaf_snowflake\.state" does not stand in for it/),
	'a node restarted while the allocation database is down does not serve from its state file, and says why');
$alloc->start;
ok(LeafTest::sf_wait_ready($c), 'once the allocation database is back, c serves');
is(LeafTest::sf_status($c, 'worker_id'), $wc, '... with its worker ID');
ok(LeafTest::sf_wait_ready($b), '... and b serves again');

# 6. a clock off by more than leaf.max_clock_drift_ms
$c->stop;
$c->append_conf('postgresql.conf', "leaf.test_node_clock_offset_ms = '5000'\n");
$c->start;
ok(LeafTest::sf_wait_reason($c, qr/^this node's clock differs from the allocation database's by \d+ ms, give or take \d+ ms of the round trip, and "leaf\.max_clock_drift_ms" is $drift_ms/),
	'a node whose clock is 5 s ahead of the database is refused');
($state) = LeafTest::sqlstate($c, 'postgres', 'SELECT leaf_snowflake()');
is($state, 'LF102', '... with LF102');

# 7. leaf_snowflake_new_worker_id(): b gives its row up and takes another
$wb = LeafTest::sf_status($b, 'worker_id');
@ib = LeafTest::sf_ids($b, 2000);
$b->safe_psql('postgres', 'SELECT leaf_snowflake_new_worker_id()');
ok($b->poll_query_until('postgres',
	"SELECT ready AND worker_id <> $wb FROM leaf_snowflake_status"),
	'after leaf_snowflake_new_worker_id(), b serves with another worker ID');
is(LeafTest::sf_status($b, 'worker_id'), $wc, "... c's, whose lease ended at its stop and whose mark has passed");
like($alloc->safe_psql('postgres', "SELECT holder_identity FROM leaf_worker_lease WHERE worker_id = $wb"),
	qr/^given up by /, "... and its former row, worker ID $wb, is given up");
my %ib = map { $_ => 1 } @ib;
is(scalar(grep { $ib{$_} } LeafTest::sf_ids($b, 5000)), 0, '... its new IDs repeat none of its earlier ones');
like(slurp_file($b->logfile), qr/gave up worker ID $wb in the allocation database, with mark \d+/,
	'... the log says so');

$_->stop for reverse @started;
done_testing();
