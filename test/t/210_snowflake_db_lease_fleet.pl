# Worker IDs from the allocation database, and what every node of a
# fleet must share.  Each case made two nodes issue the same IDs before
# the fleet's table (leaf_worker_lease_fleet) and the row's epoch:
#  1. leaf.alloc_conninfo reloaded, one node first, to another allocation
#     database (a second database with leaf 1.5, as after moving the
#     allocation database with pg_dump: the lease tables are the
#     extension's and come back empty).  The moved node finds another
#     table of worker IDs than the one its state file names and takes no
#     worker ID there; it stops once its lease ends.
#  2. leaf.snowflake_epoch moved later on a node that takes over the
#     worker ID of a stopped node (its lease ended, every other worker ID
#     held).  The row keeps the epoch its mark was served under, and the
#     new holder serves above the mark moved by the difference.
#  3. leaf.heartbeat_interval raised by a reload on the holder of a worker
#     ID, not on the other nodes: its next renewal is refused (the fleet
#     records the heartbeat every node uses), so it stops within the
#     lease it had, and a new holder of its worker ID, its row deleted,
#     repeats none of its IDs.
#  4. leaf.max_clock_drift_ms other than the fleet's on a new node: it is
#     refused, and says why.
#  5. Neither table is writable by a role without grants or by the owner
#     of the allocation database (who owns schema public in PostgreSQL
#     15), nor can that owner put a trigger or a rule on them or drop
#     them.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use IPC::Run ();
use List::Util ();

my $alloc = LeafTest::new_node('alloc', { max_worker_processes => undef },
	"listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
$alloc->safe_psql('postgres', q[
CREATE ROLE leaf_b SUPERUSER NOLOGIN;
CREATE DATABASE alloc2;
]);
$alloc->safe_psql('alloc2', 'CREATE EXTENSION leaf');

my $drift_ms = 1000;

sub conninfo
{
	my ($db, $user) = @_;
	$user = $user ? " user=$user" : '';
	return "leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=$db connect_timeout=2$user'";
}

sub conf
{
	my ($name, $db, @extra) = @_;
	return ("leaf.worker_id_source = 'database'",
		conninfo($db),
		"leaf.snowflake_layout = '41+2+12'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '${drift_ms}ms'",
		"leaf.wait_timeout = '1s'",
		@extra);
}

sub leases
{
	my ($db) = @_;
	return $alloc->safe_psql($db,
		"SELECT worker_id, holder_address, holder_token, hwm_ms, expires_at - renewed_at FROM leaf_worker_lease ORDER BY 1");
}

# ---------------------------------------------------------------------
# 1. leaf.alloc_conninfo of one node reloaded to another allocation
#    database, while the other node still uses the first
# ---------------------------------------------------------------------
my $a = LeafTest::new_node('a', { max_worker_processes => undef }, conf('a', 'postgres'));
ok(LeafTest::sf_wait_ready($a), 'node a serves');
my $wa = LeafTest::sf_status($a, 'worker_id');
my $b = LeafTest::new_node('b', { max_worker_processes => undef }, conf('b', 'postgres'));
ok(LeafTest::sf_wait_ready($b), 'node b serves');
my $wb = LeafTest::sf_status($b, 'worker_id');
isnt($wb, $wa, "a and b hold different worker IDs ($wa, $wb)");

# b is pointed at the second allocation database first
$b->append_conf('postgresql.conf', conninfo('alloc2') . "\n");
$b->reload;
ok(LeafTest::wait_until(sub {
	return slurp_file($b->logfile) =~ /the table of worker IDs in the allocation database \(fleet \d+\) is not the one this node held its worker ID in/;
}, 'the refusal of b', 30), 'b finds that the allocation database it is pointed at now holds another table of worker IDs');
ok(LeafTest::wait_until(sub {
	return LeafTest::sf_status($b, 'coalesce(ready, false)') eq 'f';
}, 'b to stop serving', 30), '... and stops serving');
my $sa = LeafTest::sf_status($a, "ready::text || '/' || worker_id");
my $sb = LeafTest::sf_status($b, "ready::text || '/' || coalesce(worker_id::text, '')");
diag("a: $sa, b: $sb");
diag("first allocation database:\n" . leases('postgres'));
diag("second allocation database:\n" . leases('alloc2'));
ok(!($sa eq "true/$wa" && $sb eq "true/$wa"),
	"after b's leaf.alloc_conninfo moved to another allocation database, a and b do not both serve with worker ID $wa (a: $sa, b: $sb)");
{
	my @g = (LeafTest::sf_start_cover($a, 4), LeafTest::sf_start_cover($b, 4));
	$_->[0]->finish for @g;
	my ($rep, $ms_rep, $first) = LeafTest::sf_repeats(LeafTest::sf_cover($a), LeafTest::sf_cover($b));
	diag("a and b, 4 s at once: $rep IDs repeated, in $ms_rep ms" . ($first ? " (first ms code $first)" : ''));
	is($rep, 0, "a and b, one on each allocation database, issue no ID twice ($rep repeated, in $ms_rep ms)");
}
$a->stop;
$b->stop;
$alloc->safe_psql('postgres', 'TRUNCATE leaf_worker_lease');
$alloc->safe_psql('alloc2', 'TRUNCATE leaf_worker_lease');

# ---------------------------------------------------------------------
# 2. leaf.snowflake_epoch moved later, and a stopped node's worker ID
#    taken over
# ---------------------------------------------------------------------
my $epoch = 1288834974657;
my $clear = 'UPDATE leaf_worker_lease_fleet SET heartbeat_ms = NULL, max_clock_drift_ms = NULL, epoch_ms = NULL';
my $c = LeafTest::new_node('c', { max_worker_processes => undef },
	conf('c', 'postgres', "leaf.snowflake_epoch = '$epoch'"));
ok(LeafTest::sf_wait_ready($c), 'node c serves');
my $wc = LeafTest::sf_status($c, 'worker_id');
# the other worker IDs of the layout (0-3) are held by stopped nodes
# whose marks lie an hour ahead: none can be taken over
$alloc->safe_psql('postgres', qq[
INSERT INTO leaf_worker_lease (worker_id, holder_identity, holder_address, holder_token,
	layout, epoch_ms, hwm_ms, expires_at, renewed_at, held_since, timeline)
SELECT g, 'other ' || g, 'other' || g || '.example:5432', g, '41+2+12/1ms', $epoch,
	(extract(epoch FROM now()) * 1000)::bigint + 3600000, now() - interval '1 min', now(), now(), 1
FROM generate_series(0, 3) g WHERE g <> $wc;
]);
# c issues IDs for 12 s, then is stopped cleanly (its lease ends)
LeafTest::sf_start_cover($c, 12)->[0]->finish;
my $cc = LeafTest::sf_cover($c);
$c->stop;
# d, with the epoch 10 s later: refused while the fleet records c's
my $d = LeafTest::new_node('d', { max_worker_processes => undef },
	conf('d', 'postgres', "leaf.snowflake_epoch = '" . ($epoch + 10000) . "'"));
ok(LeafTest::sf_wait_reason($d, qr/^"leaf\.snowflake_epoch" is ${\ ($epoch + 10000)} here, but the fleet's table of worker IDs records $epoch/),
	'a node with another epoch than the fleet\'s is refused, and says why');
# the documented change: every node stopped, the fleet's settings
# cleared; d then records its epoch and takes c's worker ID over
$d->stop;
$alloc->safe_psql('postgres', $clear);
$d->start;
ok(LeafTest::sf_wait_ready($d), 'node d (epoch 10 s later) serves');
is(LeafTest::sf_status($d, 'worker_id'), $wc, "... with worker ID $wc, c's");
diag(leases('postgres'));
LeafTest::sf_start_cover($d, 4)->[0]->finish;
{
	my $cd = LeafTest::sf_cover($d);
	my ($rep, $ms_rep, $first) = LeafTest::sf_repeats($cc, $cd);
	diag("c's ms codes " . List::Util::min(keys %$cc) . '..' . List::Util::max(keys %$cc)
		  . ", d's " . List::Util::min(keys %$cd) . '..' . List::Util::max(keys %$cd));
	is($rep, 0, "d, under an epoch moved 10 s later, repeats none of c's IDs ($rep repeated, in $ms_rep ms)");
}
$d->stop;
$alloc->safe_psql('postgres', 'TRUNCATE leaf_worker_lease');
$alloc->safe_psql('postgres', $clear);

# ---------------------------------------------------------------------
# 3. leaf.heartbeat_interval raised on the holder, a row deleted
# ---------------------------------------------------------------------
my $e = LeafTest::new_node('e', { max_worker_processes => undef }, conf('e', 'postgres'));
ok(LeafTest::sf_wait_ready($e), 'node e serves');
my $we = LeafTest::sf_status($e, 'worker_id');
# f: started now, its worker kept out (leaf_b NOLOGIN) until e's row is gone
my $f = LeafTest::new_node('f', { max_worker_processes => undef },
	conf('f', 'postgres', conninfo('postgres', 'leaf_b')));
# a reload on e: heartbeats every 10 s (a lease of 21 s)
$e->append_conf('postgresql.conf', "leaf.heartbeat_interval = '10s'\n");
$e->reload;
my $eg = LeafTest::sf_start_cover($e, 40);	# ends with an error once e stops serving
ok(LeafTest::wait_until(sub {
	return slurp_file($e->logfile) =~ /could not renew its lease in the allocation database: "leaf\.heartbeat_interval" is 10000 ms and "leaf\.max_clock_drift_ms" 1000 ms here, but the fleet's table of worker IDs records 500 ms and 1000 ms/;
}, 'the refusal of e', 30), 'e, its heartbeat reloaded to 10 s, is refused at its next renewal');
is($alloc->safe_psql('postgres',
	"SELECT expires_at - renewed_at < interval '3 s' FROM leaf_worker_lease WHERE worker_id = $we"),
	't', '... and its row keeps the lease of the fleet\'s heartbeat');
$alloc->safe_psql('postgres', qq[
DELETE FROM leaf_worker_lease WHERE worker_id = $we;
ALTER ROLE leaf_b LOGIN;
]);
my $t_del = Time::HiRes::time();
ok(LeafTest::sf_wait_ready($f, 30), 'node f serves');
diag(sprintf('f ready %.1f s after the delete', Time::HiRes::time() - $t_del));
is(LeafTest::sf_status($f, 'worker_id'), $we, "... with worker ID $we, e's");
my $fg = LeafTest::sf_start_cover($f, 6);
$fg->[0]->finish;
$eg->[0]->finish;
diag('e: ' . ${ $eg->[2] });
{
	my ($ce, $cf) = (LeafTest::sf_cover($e), LeafTest::sf_cover($f));
	my ($rep, $ms_rep, $first) = LeafTest::sf_repeats($ce, $cf);
	diag("e's last ms code " . List::Util::max(keys %$ce) . ", f's first " . List::Util::min(keys %$cf));
	is($rep, 0, "f repeats none of e's IDs ($rep repeated, in $ms_rep ms)");
}
$f->stop;
$e->stop;
$alloc->safe_psql('postgres', 'TRUNCATE leaf_worker_lease');

# ---------------------------------------------------------------------
# 4. leaf.max_clock_drift_ms lower on the new holder, a row deleted
# ---------------------------------------------------------------------
my $g = LeafTest::new_node('g', { max_worker_processes => undef },
	conf('g', 'postgres', "leaf.max_clock_drift_ms = '5s'"));
ok(LeafTest::sf_wait_reason($g, qr/"leaf\.heartbeat_interval" is 500 ms and "leaf\.max_clock_drift_ms" 5000 ms here, but the fleet's table of worker IDs records 500 ms and 1000 ms/),
	'a node whose leaf.max_clock_drift_ms is not the fleet\'s takes no worker ID, and says why');
my ($st) = LeafTest::sqlstate($g, 'postgres', 'SELECT leaf_snowflake()');
is($st, 'LF102', '... its calls fail with LF102');
$g->stop;

# ---------------------------------------------------------------------
# 5. roles of the allocation database
# ---------------------------------------------------------------------
$alloc->safe_psql('postgres', q[
CREATE ROLE tenant LOGIN;
CREATE ROLE dbowner LOGIN;
ALTER DATABASE alloc2 OWNER TO dbowner;
]);
for my $role ('tenant', 'dbowner')
{
	for my $sql (
		'INSERT INTO leaf_worker_lease SELECT 9, holder_identity, holder_address, holder_token, hand_set, layout, epoch_ms, hwm_ms, expires_at, renewed_at, held_since, timeline FROM leaf_worker_lease',
		'UPDATE leaf_worker_lease_fleet SET heartbeat_ms = 60000',
		'UPDATE leaf_worker_lease SET hwm_ms = 0',
		'DELETE FROM leaf_worker_lease',
		'TRUNCATE leaf_worker_lease',
		'DELETE FROM leaf_worker_lease_timeline',
		'INSERT INTO leaf_worker_lease_timeline VALUES (99, now(), true)',
		'DROP TABLE leaf_worker_lease CASCADE',
		'ALTER TABLE leaf_worker_lease RENAME TO x',
		'CREATE RULE r AS ON UPDATE TO leaf_worker_lease DO INSTEAD NOTHING',
		'CREATE FUNCTION pg_temp.f() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$; CREATE TRIGGER t BEFORE UPDATE ON leaf_worker_lease FOR EACH ROW EXECUTE FUNCTION pg_temp.f()')
	{
		my ($rc, $out, $err) = $alloc->psql('alloc2', "SET ROLE $role; $sql");
		isnt($rc, 0, "$role cannot: " . substr($sql, 0, 50)) or diag($out);
	}
}
$alloc->stop;
done_testing();
