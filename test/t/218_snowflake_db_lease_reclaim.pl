# The reclaim window of a bound worker ID in the allocation database
# (leaf.worker_id_lease = 'bound' with leaf.worker_id_reclaim_after).
# The layout has one worker-ID bit: r holds one worker ID, bound with a
# window of 8 s, s the other, bound for good.  r is then cut off from
# the allocation database (its role may no longer log in) while it runs:
#  - r serves on, until its window less the drift has passed since its
#    last renewal;
#  - a new node n takes neither row while r's window runs, and says why;
#  - once r's window and the drift have passed, n takes r's worker ID,
#    and serves only past every timestamp r used;
#  - r, reached again, finds its row taken: it does not serve with its
#    old worker ID, and, none being free, waits and says why;
#  - restarted while cut off, r does not serve from its state file, as
#    its row could be taken over;
# and no ID is repeated across the nodes.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $reclaim_ms = 8000;
my $drift_ms = 500;

my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');
$alloc->safe_psql('postgres', 'CREATE ROLE r_holder LOGIN SUPERUSER');

sub sf_node
{
	my ($name, $role, @conf) = @_;
	my $node = LeafTest::new_node($name, { max_worker_processes => undef, start => 0 },
		"leaf.worker_id_source = 'database'",
		"leaf.worker_id_lease = 'bound'",
		"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$role connect_timeout=2'",
		"leaf.snowflake_layout = '41+1+12'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '${drift_ms}ms'",
		"leaf.wait_timeout = '1s'", @conf);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION leaf; CREATE TABLE got (id bigint, at float8)');
	return $node;
}

# r loses, or gets back, the allocation database
sub cut_off
{
	my ($off) = @_;
	$alloc->safe_psql('postgres', 'ALTER ROLE r_holder ' . ($off ? 'NOLOGIN' : 'LOGIN'));
	$alloc->safe_psql('postgres',
		q[SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'r_holder'])
	  if $off;
	return;
}

sub ids_of { return split /\n/, $_[0]->safe_psql('postgres', 'SELECT id FROM got'); }

# the millisecond of a snowflake ID of this layout
sub ms_of { return $_[0] >> 13; }

my $r = sf_node('r', 'r_holder', "leaf.worker_id_reclaim_after = '${reclaim_ms}ms'");
my $s = sf_node('s', $user);
ok(LeafTest::sf_wait_ready($_), $_->name . ' serves') for $r, $s;
my %wid = map { $_->name => LeafTest::sf_status($_, 'worker_id') } $r, $s;
is(join(',', sort values %wid), '0,1', 'r and s hold the two worker IDs');
is($alloc->safe_psql('postgres',
		"SELECT bound || '/' || coalesce(reclaim_after_ms::text, 'never') FROM leaf_worker_lease ORDER BY worker_id = $wid{r} DESC"),
	"true/$reclaim_ms\ntrue/never",
	"r's row is bound with its reclaim window, s's for good");
my @ids = map { LeafTest::sf_ids($_, 2000) } $r, $s;

# r is called every 100 ms until it refuses
my $taking_r = LeafTest::start_psql_script($r, 'postgres', q[
\set ON_ERROR_STOP 1
\set VERBOSITY verbose
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 s';
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		INSERT INTO got
		SELECT g, extract(epoch FROM clock_timestamp()) FROM leaf_snowflake_nextvals(200) g;
		COMMIT;
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;
]);
ok(LeafTest::wait_until(sub { $r->safe_psql('postgres', 'SELECT count(*) FROM got') > 0 },
	'r to be called'), 'r is called every 100 ms');

# a new node waits: both rows are held
my $n = sf_node('n', $user);
ok(LeafTest::sf_wait_reason($n, qr/every worker ID from 0 to 1 is held.*2 of them bound to their holders/, 30),
	'a new node takes neither row, and says they are bound');

cut_off(1);
my $cut_at = Time::HiRes::time();

# past the end of r's lease and the drift, which would free an expiring
# row, but within r's window: the new node still takes neither row
Time::HiRes::sleep(4);
ok(LeafTest::sf_wait_ready($r, 1), 'r, cut off for 4 s, still serves');
is(LeafTest::sf_status($n, 'coalesce(ready, false)'), 'f', '... and the new node does not');

# r stops once its window less the drift has passed since its last renewal
my ($rc_r, undef, $err_r) = LeafTest::finish_psql_script($taking_r);
like($err_r, qr/LF102/, 'r stops serving, cut off from the allocation database');
my $r_last = $r->safe_psql('postgres', 'SELECT max(at) FROM got');
cmp_ok($r_last - $cut_at, '<', ($reclaim_ms - $drift_ms) / 1000 + 1,
	'... within its window less the drift of being cut off');
cmp_ok($r_last - $cut_at, '>', ($reclaim_ms - $drift_ms) / 1000 - 2,
	'... and not long before');
like(slurp_file($r->logfile),
	qr/has not confirmed the lease for longer than "leaf.worker_id_reclaim_after" \($reclaim_ms ms\)/,
	'... and says why');

# past the window and the drift, the new node takes r's worker ID
ok(LeafTest::sf_wait_ready($n, 30), "the new node serves once r's window has passed");
my $n_ready = Time::HiRes::time();
is(LeafTest::sf_status($n, 'worker_id'), $wid{r}, "... with r's worker ID $wid{r}");
cmp_ok($n_ready - $cut_at, '>', ($reclaim_ms + $drift_ms) / 1000 - 1,
	'... not before the window and the drift have passed');
note(sprintf('r served %.1f s after it was cut off; the new node served %.1f s after the cut (window %d ms, drift %d ms)',
	$r_last - $cut_at, $n_ready - $cut_at, $reclaim_ms, $drift_ms));
my @r_ids = ids_of($r);
push @ids, @r_ids;
my @n_ids = LeafTest::sf_ids($n, 2000);
my $r_max = LeafTest::max_of(map { ms_of($_) } grep { (($_ >> 12) & 1) == $wid{r} } @ids);
my $n_min = LeafTest::min_of(map { ms_of($_) } @n_ids);
cmp_ok($n_min, '>', $r_max, "the new node's first timestamp is past every one r used");
push @ids, @n_ids;
is($alloc->safe_psql('postgres', "SELECT holder_address FROM leaf_worker_lease WHERE worker_id = $wid{s}"),
	's.example:5432', "s's row, bound for good, is s's still");

# r is reached again: it finds its row taken
cut_off(0);
ok(LeafTest::sf_wait_reason($r, qr/every worker ID from 0 to 1 is held/, 30),
	'r, reached again, finds its row taken and, none being free, waits for one');
my ($st) = LeafTest::sqlstate($r, 'postgres', 'SELECT leaf_snowflake()');
is($st, 'LF102', '... and serves no ID');
Time::HiRes::sleep(2);
($st) = LeafTest::sqlstate($r, 'postgres', 'SELECT leaf_snowflake()');
is($st, 'LF102', '... nor 2 s later');

# restarted while cut off, r does not serve from its state file
cut_off(1);
$r->restart;
ok(LeafTest::sf_wait_reason($r,
		qr/does not stand in for it, as "leaf.worker_id_reclaim_after" lets another node take a worker ID over/, 30),
	'r restarted while cut off does not serve from its state file');
($st) = LeafTest::sqlstate($r, 'postgres', 'SELECT leaf_snowflake()');
is($st, 'LF102', '... and serves no ID');

push @ids, map { LeafTest::sf_ids($_, 2000) } $n, $s;
is(LeafTest::count_repeats(\@ids), 0, sprintf('no repeat among %d IDs of r, s and the new node', scalar @ids));

$_->stop for $r, $n, $s, $alloc;
done_testing();
