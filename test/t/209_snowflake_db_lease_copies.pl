# Worker IDs from the allocation database, with a copy of a node and with
# a row lost while its holder serves: no worker ID is used by two nodes
# for the same timestamps.
#  1. A copy of a data directory that keeps its inode (a block-device or
#     volume clone, or a pg_basebackup onto a fresh volume mounted at
#     PGDATA on another machine: stat() of the data directory gives the
#     same inode there) has the same identity as the original.  Simulated
#     with an LD_PRELOAD shim that gives both data directories one inode
#     as leaf.so sees them.  The row's lease token is not the copy's, so
#     the copy waits while the original renews it.
#  2. A row lost while its holder still serves (TRUNCATE by an operator,
#     or the allocation database restored from a dump), with the holder's
#     clock 4.9 s ahead of the database and the new holder's 4.9 s behind
#     (each within leaf.max_clock_drift_ms = 5 s of the database, so both
#     accepted): the new holder waits a lease and twice the drift, which
#     covers the earlier holder's timestamps.
# copy-matrix: sf_file clone_primary
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
CREATE ROLE leaf_a LOGIN;
CREATE ROLE leaf_b NOLOGIN;
GRANT USAGE ON SCHEMA public TO leaf_a, leaf_b;
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline, leaf_worker_lease_fleet TO leaf_a, leaf_b;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_take, leaf_worker_lease_renew, leaf_worker_lease_release, leaf_worker_lease_give_up, leaf_worker_lease_copy_check, leaf_worker_lease_fleet_check, leaf_worker_lease_pick TO leaf_a, leaf_b;
]);

my $drift_ms = 5000;

sub conf
{
	my ($name, $user, @extra) = @_;
	return ("leaf.worker_id_source = 'database'",
		"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user connect_timeout=2'",
		"leaf.snowflake_layout = '41+2+12'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '${drift_ms}ms'",
		"leaf.wait_timeout = '1s'",
		@extra);
}

sub ts_of
{
	my ($node, $id) = @_;
	return $node->safe_psql('postgres', "SELECT (extract(epoch FROM ts) * 1000)::bigint FROM leaf_snowflake_decode($id)");
}

# ---------------------------------------------------------------------
# 1. a clone that keeps the data directory's inode
# ---------------------------------------------------------------------
my $shim_dir = PostgreSQL::Test::Utils::tempdir;
PostgreSQL::Test::Utils::append_to_file("$shim_dir/shim.c", <<'C');
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void
fix(const char *p, struct stat *st, void *caller)
{
	size_t		n = strlen(p);
	Dl_info		info;

	/* only as leaf sees it: postgres's own shared memory key stays apart */
	if (!dladdr(caller, &info) || info.dli_fname == NULL ||
		strstr(info.dli_fname, "leaf.so") == NULL)
		return;
	if (n >= 7 && strcmp(p + n - 7, "/pgdata") == 0 && S_ISDIR(st->st_mode))
		st->st_ino = 4242;
}

int
stat(const char *p, struct stat *st)
{
	static int	(*real) (const char *, struct stat *);
	int			r;

	if (!real)
		real = dlsym(RTLD_NEXT, "stat");
	r = real(p, st);
	if (r == 0)
		fix(p, st, __builtin_return_address(0));
	return r;
}
C
system("cc -shared -fPIC -o $shim_dir/shim.so $shim_dir/shim.c -ldl") == 0
  or die 'could not build the shim';

my ($p, $q);
{
	local $ENV{LD_PRELOAD} = "$shim_dir/shim.so";
	$p = LeafTest::new_node('p', { max_worker_processes => undef, init => [ allows_streaming => 1 ] },
		conf('p', 'leaf_a'));
	ok(LeafTest::sf_wait_ready($p), 'node p serves');
	$p->backup('clone');
	$q = LeafTest::new_node_from_backup('q', $p, 'clone', "leaf.node_address = 'q.example:5432'");
}
my $wp = LeafTest::sf_status($p, 'worker_id');
# the clone, were it seen as new, would wait lease + drift (7 s) or more
Time::HiRes::sleep(4);
my $pr = LeafTest::sf_status($p, "ready::text || '/' || worker_id");
my $qr = LeafTest::sf_status($q, "coalesce(ready::text, '') || '/' || coalesce(worker_id::text, '')");
isnt($qr, "true/$wp", "the clone q ($qr) does not serve with p's worker ID ($pr)");
like(LeafTest::sf_status($q, "coalesce(not_ready_reason, '')"),
	qr/^worker ID $wp is held in the allocation database by a node with this data directory's identity .* waiting for the lease to end/,
	'... and says that a node with its identity holds it');
diag($alloc->safe_psql('postgres', 'SELECT worker_id, holder_identity, holder_address FROM leaf_worker_lease'));
{
	# the same milliseconds on both: ask both at once
	my @out;
	for my $n ($p, $q)
	{
		my $o = '';
		my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $n->connstr('postgres'), '-c',
			'SELECT leaf_snowflake_nextvals(20000) FROM generate_series(1, 20)' ], '>', \$o, '2>', \my $e);
		push @out, [ $h, \$o ];
	}
	$_->[0]->finish for @out;
	my %both;
	for my $i (0, 1)
	{
		my %mine = map { $_ => 1 } split /\n/, ${ $out[$i][1] };
		$both{$_}++ for keys %mine;
	}
	my $dup = grep { $both{$_} > 1 } keys %both;
	is($dup, 0, "p and its clone q issue no ID twice (run at once: $dup repeated)");
}
$q->stop;
$p->stop;
$alloc->safe_psql('postgres', 'TRUNCATE leaf_worker_lease');

# ---------------------------------------------------------------------
# 2. a row lost while its holder serves; clocks 2 x drift apart
# ---------------------------------------------------------------------
my $a = LeafTest::new_node('a', { max_worker_processes => undef },
	conf('a', 'leaf_a', "leaf.test_node_clock_offset_ms = '4900'"));
ok(LeafTest::sf_wait_ready($a), 'node a (clock 4.9 s ahead of the database) serves');
my $wa = LeafTest::sf_status($a, 'worker_id');
# b: started now, its worker kept out (leaf_b NOLOGIN) until a's row is gone
my $b = LeafTest::new_node('b', { max_worker_processes => undef },
	conf('b', 'leaf_b', "leaf.test_node_clock_offset_ms = '-4900'"));

# a issues IDs as fast as it can, until its lease ends
my $agen = LeafTest::sf_start_cover($a, 20);
Time::HiRes::sleep(1.5);
# a loses the allocation database (a network cut), and its row is lost
# (TRUNCATE, or the database restored from a dump)
$alloc->safe_psql('postgres', q[
ALTER ROLE leaf_a NOLOGIN;
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'leaf_a';
TRUNCATE leaf_worker_lease;
ALTER ROLE leaf_b LOGIN;
]);
# b, let in at once, takes a's worker ID, whose row is gone
$agen->[0]->finish;
like(${ $agen->[2] }, qr/not ready/, 'a stops once its lease can end');
ok(LeafTest::sf_wait_ready($b), 'node b (clock 4.9 s behind the database) serves');
is(LeafTest::sf_status($b, 'worker_id'), $wa, "... with worker ID $wa, a's");
LeafTest::sf_start_cover($b, 5)->[0]->finish;
my ($ca, $cb) = (LeafTest::sf_cover($a), LeafTest::sf_cover($b));
my $a_last = List::Util::max(keys %$ca);
my $b_first = List::Util::min(keys %$cb);
cmp_ok($b_first, '>', $a_last,
	"b's first millisecond with worker ID $wa is later than a's last (by " . ($b_first - $a_last) . ' ms)');
my ($rep, $ms_rep) = LeafTest::sf_repeats($ca, $cb);
is($rep, 0, "b repeats none of a's IDs ($rep repeated, in $ms_rep ms)");

$b->stop;
$a->stop;
$alloc->stop;
done_testing();
