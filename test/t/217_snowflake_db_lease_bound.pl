# Worker IDs bound to their nodes in the allocation database
# (leaf.worker_id_lease = 'bound'), a weak dependency as ZooKeeper's
# forever nodes are.  The layout has two worker-ID bits, so that four rows
# fill the table of leases.  With the allocation database stopped for a
# minute:
#  - a node of the bound mode serves throughout, called every 100 ms;
#  - a node of the expiring mode stops once its lease can end;
#  - a bound node stopped cleanly before the outage (which released its
#    row, still bound to it) and started during it serves from its state
#    file, with its worker ID, again after a crash during the outage, and
#    holds its row again once the database is back, without the wait of
#    a new holder;
#  - a copy of that node's data directory (cp -a while it was stopped),
#    started beside it with its configuration, does not serve: the state
#    file stands in only for the data directory that wrote it;
# and once it is back, a new node takes the ended lease of a node of the
# expiring mode stopped cleanly, never the bound row of a node that
# crashed before the outage, however long ago that lease ended; no ID is
# repeated across the nodes.
#
# LEAF_BOUND_OUTAGE_S sets the outage's length in seconds (60 unless set):
# LEAF_BOUND_OUTAGE_S=600 runs the ten minutes of docs/snowflake.md by
# hand.  The file notes what the nodes did, for the figures there.
#
# copy-matrix: sf_file cp_datadir
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $outage_s = $ENV{LEAF_BOUND_OUTAGE_S} // 60;
die "LEAF_BOUND_OUTAGE_S must be a whole number of seconds, at least 20"
  unless $outage_s =~ /^\d+$/ && $outage_s >= 20;
my $drift_ms = 2000;
# the sessions that take IDs through the outage run longer than it
$PostgreSQL::Test::Utils::timeout_default = $outage_s + 120
  if $PostgreSQL::Test::Utils::timeout_default < $outage_s + 120;

my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');

sub sf_node
{
	my ($name, $mode) = @_;
	my $node = LeafTest::new_node($name, { max_worker_processes => undef, start => 0 },
		"leaf.worker_id_source = 'database'",
		"leaf.worker_id_lease = '$mode'",
		"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user connect_timeout=2'",
		"leaf.snowflake_layout = '41+2+12'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '${drift_ms}ms'",
		"leaf.wait_timeout = '1s'");
	$node->{started_at} = Time::HiRes::time();
	$node->start;
	$node->safe_psql('postgres',
		'CREATE EXTENSION leaf; CREATE TABLE got (id bigint, at float8); CREATE TABLE stop (at float8)');
	$node->{mode} = $mode;
	return $node;
}

sub wait_ready
{
	ok(LeafTest::sf_wait_ready($_), 'node ' . $_->name . " ($_->{mode}) serves") for @_;
	return;
}

# a session that takes 200 IDs every 100 ms into table got until table
# stop has a row (stop_taking) or for $secs at most, and stops at the
# first error (a call that found the generator not ready)
sub start_taking
{
	my ($node, $secs) = @_;
	return LeafTest::start_psql_script($node, 'postgres', qq[
\\set ON_ERROR_STOP 1
DO \$\$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '$secs s';
BEGIN
	WHILE clock_timestamp() < deadline AND NOT EXISTS (SELECT FROM stop) LOOP
		INSERT INTO got
		SELECT g, extract(epoch FROM clock_timestamp()) FROM leaf_snowflake_nextvals(200) g;
		COMMIT;
		PERFORM pg_sleep(0.1);
	END LOOP;
END \$\$;
]);
}

# the longest time from $from to $to without a call recorded in got
sub longest_gap
{
	my ($node, $from, $to) = @_;
	return $node->safe_psql('postgres', qq[
SELECT max(d) FROM (
  SELECT lead(at) OVER (ORDER BY at) - at AS d
    FROM (SELECT at FROM got WHERE at BETWEEN $from AND $to
          UNION SELECT $from UNION SELECT $to) s) g]);
}

sub stop_taking
{
	$_->safe_psql('postgres', 'INSERT INTO stop VALUES (extract(epoch FROM clock_timestamp()))') for @_;
	return;
}

sub ids_of { return split /\n/, $_[0]->safe_psql('postgres', 'SELECT id FROM got'); }

# started together: the new holders wait out earlier ones at once
my ($a, $b, $c, $e) = map { sf_node($_, $_ eq 'e' ? 'expiring' : 'bound') } qw(a b c e);
wait_ready($a, $b, $c, $e);
my %wid = map { $_->name => LeafTest::sf_status($_, 'worker_id') } $a, $b, $c, $e;
is(join(',', sort values %wid), '0,1,2,3', 'the four nodes hold the four worker IDs');
$alloc->psql('postgres',
	"SELECT string_agg(bound::text, ',' ORDER BY worker_id) FROM leaf_worker_lease",
	stdout => \my $bound_rows);
is($bound_rows, join(',', map { $_ == $wid{e} ? 'false' : 'true' } 0 .. 3),
	'the rows of the bound nodes are bound, the row of the expiring one is not');
my @ids = map { LeafTest::sf_ids($_, 2000) } $a, $b, $c, $e;

# c crashes before the outage and stays down: its row stays bound; b
# stops cleanly, which releases its row, bound to it still
$c->stop('immediate');
$b->stop;
like(slurp_file($b->logfile), qr/released worker ID $wid{b} in the allocation database/,
	'b, stopped cleanly, released its row');

my $taking_a = start_taking($a, $outage_s + 120);
ok(LeafTest::wait_until(sub { $a->safe_psql('postgres', 'SELECT count(*) FROM got') > 0 },
	'a to be called'), 'a is called every 100 ms');

# the outage
$alloc->stop('fast');
my $stopped_at = Time::HiRes::time();
ok(LeafTest::wait_until(sub {
	my ($st) = LeafTest::sqlstate($e, 'postgres', 'SELECT leaf_snowflake()');
	return defined $st && $st eq 'LF102';
}, 'e to stop serving', 15), 'the expiring node stops serving once its lease can end');
note(sprintf('the expiring node stopped serving within %.1f s of the stop',
	Time::HiRes::time() - $stopped_at));
like(LeafTest::sf_status($e, 'not_ready_reason'), qr/the lease ran out/, '... and says why');

# b is started while the database is down, and crashes and starts again
Time::HiRes::sleep(5);
my $b_copy = LeafTest::new_node_from_data_dir('b_copy', $b);
$b->start;
my $b_started = Time::HiRes::time();
ok(LeafTest::sf_wait_ready($b, 20),
	'a bound node stopped cleanly before the outage and started during it serves');
my $b_wait = Time::HiRes::time() - $b_started;
is(LeafTest::sf_status($b, 'worker_id || \'/\' || worker_id_source'), "$wid{b}/database file",
	"... with its worker ID $wid{b}, from its state file");
like(slurp_file($b->logfile), qr/the allocation database is unreachable, using worker ID $wid{b}, bound to this node there, from "leaf_snowflake\.state"/,
	'... and its log says so');
push @ids, LeafTest::sf_ids($b, 2000);
$b->stop('immediate');
$b->start;
my $b_crash_started = Time::HiRes::time();
ok(LeafTest::sf_wait_ready($b, 20), '... and again after a crash during the outage');
my $b_crash_wait = Time::HiRes::time() - $b_crash_started;
is(LeafTest::sf_status($b, 'worker_id || \'/\' || worker_id_source'), "$wid{b}/database file",
	"... with its worker ID $wid{b}, from its state file");
my $taking_b = start_taking($b, $outage_s + 120);

# the copy of b's data directory, beside it while the database is down
$b_copy->start;
ok(LeafTest::sf_wait_reason($b_copy, qr/"leaf_snowflake\.state" does not stand in for it/, 20),
	"a copy of b's data directory does not serve from the state file it copied");
like(slurp_file($b_copy->logfile), qr/"leaf_snowflake\.state" was written by another data directory/,
	'... which its log says is the original\'s');
my ($copy_st) = LeafTest::sqlstate($b_copy, 'postgres', 'SELECT leaf_snowflake()');
is($copy_st, 'LF102', '... and it serves no ID');
$b_copy->stop('immediate');

my $left = $stopped_at + $outage_s - Time::HiRes::time();
Time::HiRes::sleep($left) if $left > 0;
ok(LeafTest::sf_wait_ready($a, 1), "a still serves $outage_s s into the outage");
$alloc->start;
my $back_at = Time::HiRes::time();
# a few calls more once it is back, then the sessions end
Time::HiRes::sleep(3);
stop_taking($a, $b);

my ($rc_a, undef, $err_a) = LeafTest::finish_psql_script($taking_a);
is($rc_a, 0, 'a served every call, all through the outage') or diag($err_a);
my $gap = longest_gap($a, $stopped_at, $back_at);
cmp_ok($gap, "<", 1.5, "... never 1.5 s without a call served, from the stop until the database was back (longest: ${gap} s)");
my $last_a = $a->safe_psql('postgres', 'SELECT max(at) FROM got');
note(sprintf('a served from %.1f s before the stop to %.1f s after the database came back (outage %.1f s); b served %.1f s after its start, %.1f s after its start after the crash',
	$stopped_at - $a->safe_psql('postgres', 'SELECT min(at) FROM got'),
	$last_a - $back_at, $back_at - $stopped_at, $b_wait, $b_crash_wait));

note(sprintf('IDs taken while the allocation database was down: %d by a, %d by b (started %.1f s into the outage, and again after a crash %.1f s into it)',
	map({ $_->safe_psql('postgres', "SELECT count(*) FROM got WHERE at BETWEEN $stopped_at AND $back_at") } $a, $b),
	$b_started - $stopped_at, $b_crash_started - $stopped_at));

my ($rc_b, undef, $err_b) = LeafTest::finish_psql_script($taking_b);
is($rc_b, 0, 'b served every call from its start until after the outage') or diag($err_b);
ok($b->poll_query_until('postgres',
	"SELECT worker_id_source = 'database' AND worker_id = $wid{b} FROM leaf_snowflake_status"),
	'once the database is back, b holds its row there again, with the same worker ID');
unlike(slurp_file($b->logfile), qr/restarting the generator|took back worker ID/,
	'... as the lease its state file names, without restarting its generator');
ok(LeafTest::sf_wait_ready($e), 'the expiring node serves again');

# e stops cleanly: its lease ends; a new node takes it, not c's bound row
push @ids, LeafTest::sf_ids($e, 2000);
$e->stop;
my $n = sf_node('n', 'bound');
wait_ready($n);
my $n_wait = Time::HiRes::time() - $n->{started_at};
is(LeafTest::sf_status($n, 'worker_id'), $wid{e},
	"a new node takes the ended lease of the expiring node, worker ID $wid{e}, not c's bound $wid{c}");
like($alloc->safe_psql('postgres', "SELECT holder_address FROM leaf_worker_lease WHERE worker_id = $wid{c}"),
	qr/^c\.example/, "... c's row is still c's");
note(sprintf('n served %.1f s after its start (the database back %.1f s before)',
	$n_wait, $n->{started_at} - $back_at));

push @ids, ids_of($a), ids_of($b), LeafTest::sf_ids($n, 2000),
  map { LeafTest::sf_ids($_, 2000) } $a, $b;
is(LeafTest::count_repeats(\@ids), 0, sprintf('no repeat among %d IDs of all the nodes', scalar @ids));

$_->stop for $n, $b, $a, $alloc;
done_testing();
