
# Copyright (c) leaf contributors

# pg_upgrade from an older PostgreSQL major, with leaf in use in both
# modes.  The older major's installation is named by LEAF_UPGRADE_FROM
# (such as /usr/lib/postgresql/15, the directory that holds bin/), with
# leaf built and installed for it; the newer one is the major under test.
# test/majors.sh sets it in the chroots that have both (15 -> 17, 15 ->
# 18, 15 -> 19).  The Makefile leaves this file out when LEAF_UPGRADE_FROM
# is not set; run without it, the file fails, saying so.
#
# (A) A cluster that failed over: a primary and its streaming standby,
#     the primary stopped cleanly, the standby promoted (timeline 2).  In
#     database postgres the new timeline is confirmed as documented; in
#     database "unconfirmed" it is left waiting (a 'pending' row).
#     Snowflake IDs come from a worker ID set by hand.  pg_upgrade gives
#     the new cluster timeline 1 and a new system identifier: each
#     database is a copy in another cluster (the old cluster could be
#     started again), refused (LF006) until a superuser confirms.  In
#     database postgres the confirmation comes before the first load (no
#     call fails); "unconfirmed" is refused first, then confirmed.
# (B) A cluster on timeline 1 whose snowflake worker ID comes from
#     ZooKeeper: the upgraded cluster keeps its worker ID and its forever
#     node.
#
# In both: leaf_alloc (every max_id) and leaf_alloc_source carry over,
# database OIDs stay, the snowflake state file is copied into the new
# data directory before its first start (pg_upgrade copies only relation
# files), and every ID after the upgrade lies above every ID handed out
# before it, per tag and for snowflake.  While pg_upgrade runs the servers
# (in binary-upgrade mode), leaf's snowflake worker does not start: it
# would write the old state file and register in ZooKeeper under the
# address of pg_upgrade's temporary port.
# copy-matrix: segment pg_upgrade_promote
# copy-matrix: sf_file pg_upgrade_promote
# copy-matrix: zk pg_upgrade_promote
use strict;
use warnings;

use Cwd;
use File::Copy;
use Time::HiRes qw(time);

use LeafTest;
use LeafZK;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $from = $ENV{LEAF_UPGRADE_FROM};
die "LEAF_UPGRADE_FROM is not set: name the installation of an older PostgreSQL major "
  . "with leaf installed (such as /usr/lib/postgresql/15); test/majors.sh does so in its chroots\n"
  unless defined $from && $from ne '';
die "LEAF_UPGRADE_FROM=$from has no bin/postgres\n" unless -x "$from/bin/postgres";

# beside shared_preload_libraries and max_worker_processes, which
# LeafTest::new_node sets
my @conf = (
	"leaf.segment_duration = '1ms'",
	"leaf.wait_timeout = '3s'",
	"leaf.heartbeat_interval = '500ms'");
# 18 and later check data pages by default; pg_upgrade needs both alike
my @init = (extra => ['--data-checksums']);

# $n IDs of a tag in a database, one statement; none if it fails
sub ids
{
	my ($node, $db, $tag, $n) = @_;
	my ($rc, $out, $err) = $node->psql($db,
		"SELECT leaf_segment_nextval('$tag') FROM generate_series(1, $n)");
	diag "$db/$tag on " . $node->name . ": $err" if $rc != 0;
	return map { 0 + $_ } grep { /^\d+$/ } split /\n/, $out;
}

sub sf_ids
{
	my ($node, $n) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT leaf_snowflake() FROM generate_series(1, $n)");
	diag "snowflake on " . $node->name . ": $err" if $rc != 0;
	return map { 0 + $_ } grep { /^\d+$/ } split /\n/, $out;
}

# leaf_alloc_source_confirm() in a database: what it returned, or the error
sub confirm
{
	my ($node, $db) = @_;
	my ($rc, $out, $err) = $node->psql($db, 'SELECT leaf_alloc_source_confirm()');
	return $rc == 0 ? $out : $err;
}

sub rows
{
	my ($node, $db, $sql) = @_;
	return $node->safe_psql($db, $sql);
}

my $alloc_sql = q[SELECT biz_tag, max_id, step FROM leaf_alloc ORDER BY 1;
	SELECT biz_tag, max_id FROM leaf_alloc_retired ORDER BY 1;
	SELECT extversion FROM pg_extension WHERE extname = 'leaf'];
my $source_sql = q[SELECT state, kind, database_oid, description, timeline FROM leaf_alloc_source ORDER BY 1];
my $dboid_sql = q[SELECT datname, oid FROM pg_database ORDER BY 1];

# pg_upgrade of $old (stopped) into $new (initialised, stopped), on ports
# of its own; returns the seconds it took.  With --retain its server log
# stays in the new data directory.
sub upgrade
{
	my ($old, $new, $what) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir_short();
	my $cwd = getcwd();
	my @cmd = ('pg_upgrade', '--no-sync', '--retain',
		'-b', $old->config_data('--bindir'), '-B', $new->config_data('--bindir'),
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-p', PostgreSQL::Test::Cluster::get_free_port(),
		'-P', PostgreSQL::Test::Cluster::get_free_port(),
		'-s', $dir);
	my $t0 = time;
	chdir $dir or die "chdir $dir: $!";
	my $ok = command_ok(\@cmd, "$what: pg_upgrade");
	chdir $cwd or die "chdir $cwd: $!";
	if (!$ok)
	{
		my $why = join('', map { slurp_file($_) }
			  glob($new->data_dir . '/pg_upgrade_output.d/*/log/pg_upgrade_dump_*.log'));
		diag "$what: the older major gives every column an attribute option pg_attver "
		  . "that this major refuses: pg_upgrade fails so for any table, not only leaf's"
		  if $why =~ /unrecognized parameter "pg_attver"/;
	}
	my $took = time - $t0;
	note sprintf('%s: pg_upgrade took %.1f s', $what, $took);
	my $log = join('', map { slurp_file($_) }
		  glob($new->data_dir . '/pg_upgrade_output.d/*/log/pg_upgrade_server.log'));
	isnt($log, '', "$what: pg_upgrade's server log is there");
	my @sf = grep { /leaf snowflake (worker|generator)/ } split /\n/, $log;
	is(scalar(@sf), 0, "$what: no snowflake worker ran while pg_upgrade ran the servers")
	  or diag join("\n", @sf[0 .. ($#sf < 3 ? $#sf : 3)]);
	return $took;
}

my $t_start = time;

# ---------- (A) a cluster that failed over, worker ID set by hand ----------

# streaming set by hand: allows_streaming of a newer Cluster.pm may add
# settings the older server does not know
my $p = LeafTest::new_node('a_primary',
	{ install_path => $from, init => [@init], worker_id => 9 },
	@conf, 'wal_level = replica', 'max_wal_senders = 4');
# the new cluster, made now for its major, upgraded into in (A)
my $a_new = LeafTest::new_node('a_new',
	{ init => [@init], worker_id => 10, start => 0 }, @conf);
my $old_major = $p->pg_version->major;
my $new_major = $a_new->pg_version->major;
my $pair = "$old_major -> $new_major";
note "upgrading from $old_major ($from) to $new_major";
cmp_ok($old_major, '<', $new_major, "LEAF_UPGRADE_FROM is an older major: $pair");

$p->safe_psql('postgres', q[
SELECT leaf_segment_create('order', step => 10);
SELECT leaf_segment_create('user', step => 100);
SELECT leaf_segment_create('gone', step => 10);
CREATE DATABASE unconfirmed;]);
$p->safe_psql('unconfirmed', q[
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', step => 10);]);

my %before;    # "db/tag" => [IDs]
push @{ $before{'postgres/order'} }, ids($p, 'postgres', 'order', 55);
push @{ $before{'postgres/user'} }, ids($p, 'postgres', 'user', 250);
push @{ $before{'unconfirmed/order'} }, ids($p, 'unconfirmed', 'order', 35);
# a retired tag: its mark in leaf_alloc_retired must come along
push @{ $before{'postgres/gone'} }, ids($p, 'postgres', 'gone', 25);
$p->safe_psql('postgres', q[DELETE FROM leaf_alloc WHERE biz_tag = 'gone']);
my @sf_before = sf_ids($p, 2000);

$p->backup('a_base');
# a copy must not serve with its original's worker ID
my $s = LeafTest::new_node_from_backup('a_standby', $p, 'a_base',
	{ install_path => $from, init => [ has_streaming => 1 ] },
	'leaf.worker_id = 10');
push @{ $before{'postgres/order'} }, ids($p, 'postgres', 'order', 40);
# by hand: wait_for_catchup of a newer Cluster.pm may use SQL the older
# standby does not know
my $lsn = $p->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok($s->poll_query_until('postgres', "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn"),
	'(A) the standby has replayed all of it');

# a switchover: the primary stops cleanly, the standby has all of it
$p->stop;
$s->promote;
ok($s->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'(A) the standby is promoted');
my ($st) = LeafTest::sqlstate($s, 'postgres', "SELECT leaf_segment_nextval('order')");
is($st, 'LF007', '(A) on the new timeline loads wait for confirmation');
like($s->safe_psql('postgres', 'SELECT leaf_alloc_source_confirm()'),
	qr/^the local leaf_alloc/, '(A) database postgres: the new timeline is confirmed');
push @{ $before{'postgres/order'} }, ids($s, 'postgres', 'order', 45);
push @{ $before{'postgres/user'} }, ids($s, 'postgres', 'user', 150);
is(rows($s, 'postgres', q[SELECT string_agg(state || ' ' || timeline, ', ') FROM leaf_alloc_source]),
	'current 2', '(A) database postgres records timeline 2');
($st) = LeafTest::sqlstate($s, 'unconfirmed', "SELECT leaf_segment_nextval('order')");
is($st, 'LF007', '(A) database unconfirmed: refused as well, and left so');
is(rows($s, 'unconfirmed', q[SELECT string_agg(state || ' ' || timeline, ', ' ORDER BY state) FROM leaf_alloc_source]),
	'current 1, pending 2', '(A) database unconfirmed: timeline 2 waits for confirmation');
$s->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status')
  or die 'the promoted standby does not generate snowflake IDs';
push @sf_before, sf_ids($s, 2000);

my %alloc_before = map { $_ => rows($s, $_, $alloc_sql) } qw(postgres unconfirmed);
my %source_before = map { $_ => rows($s, $_, $source_sql) } qw(postgres unconfirmed);
my $dboids = rows($s, 'postgres', $dboid_sql);
like($alloc_before{postgres}, qr/^gone\|\d+$/m, '(A) the retired tag has its mark');
$s->stop;
my $state_file = $s->data_dir . '/leaf_snowflake.state';
my $state_before = slurp_file($state_file);
my ($mark_before) = $state_before =~ /^mark 10 (\d+)$/m;
ok(defined $mark_before, '(A) the old state file has a mark for worker ID 10');

my $took_a = upgrade($s, $a_new, "(A) $pair");
ok(slurp_file($state_file) eq $state_before, '(A) pg_upgrade left the old state file as it was');
# pg_upgrade copies relation files only: the state file is copied by hand
copy($state_file, $a_new->data_dir . '/leaf_snowflake.state') or die "copy: $!";
$a_new->start;

is(rows($a_new, 'postgres', $dboid_sql), $dboids, '(A) database OIDs carry over');
for my $db (qw(postgres unconfirmed))
{
	is(rows($a_new, $db, $alloc_sql), $alloc_before{$db},
		"(A) $db: leaf_alloc, leaf_alloc_retired and the extension's version carry over");
	is(rows($a_new, $db, $source_sql), $source_before{$db},
		"(A) $db: leaf_alloc_source carries over");
}
is(rows($a_new, 'postgres', q[SELECT timeline_id FROM pg_control_checkpoint()]), '1',
	'(A) the upgraded cluster is on timeline 1');

my $newsys = rows($a_new, 'postgres', q[SELECT system_identifier FROM pg_control_system()]);
like(confirm($a_new, 'postgres'),
	qr/^the local leaf_alloc \(database \d+ of system \Q$newsys\E\)$/,
	'(A) database postgres: the upgraded cluster is confirmed before the first load');
my %after;
my ($got, $states, $err) = LeafTest::take_each($a_new, 'order', 30);
is(scalar(@$states), 0, '(A) database postgres: no call fails after the confirmation')
  or diag $err;
push @{ $after{'postgres/order'} }, @$got;
push @{ $after{'postgres/order'} }, ids($a_new, 'postgres', 'order', 40);
push @{ $after{'postgres/user'} }, ids($a_new, 'postgres', 'user', 120);
# the retired tag, created again, continues above its mark
$a_new->safe_psql('postgres', q[SELECT leaf_segment_create('gone', step => 10)]);
push @{ $after{'postgres/gone'} }, ids($a_new, 'postgres', 'gone', 20);
is(rows($a_new, 'postgres', q[SELECT string_agg(state || ' ' || timeline || ' ' || system_identifier, ', ') FROM leaf_alloc_source]),
	"current 1 $newsys", '(A) database postgres now records timeline 1 of the new cluster');

my ($ust, $uerr) = LeafTest::sqlstate($a_new, 'unconfirmed', "SELECT leaf_segment_nextval('order')");
is($ust, 'LF006', '(A) database unconfirmed: refused after the upgrade, as a copy');
like($uerr, qr/this is database \d+ of system \Q$newsys\E: a copy .*pg_upgrade/,
	'(A) the detail names the new cluster and pg_upgrade');
like(confirm($a_new, 'unconfirmed'),
	qr/^the local leaf_alloc/, '(A) database unconfirmed: confirmed');
push @{ $after{'unconfirmed/order'} }, ids($a_new, 'unconfirmed', 'order', 30);

LeafZK::wait_decided($a_new);
is(rows($a_new, 'postgres', 'SELECT worker_id, worker_id_source, ready, not_ready_reason FROM leaf_snowflake_status'),
	'10|setting|t|', '(A) snowflake: the upgraded cluster serves with worker ID 10, set by hand');
my @sf_after = sf_ids($a_new, 2000);

for my $k (sort keys %before)
{
	cmp_ok(LeafTest::min_of(@{ $after{$k} }), '>', LeafTest::max_of(@{ $before{$k} }),
		sprintf('(A) %s: the %d IDs after the upgrade lie above the %d before (%d > %d)',
			$k, scalar(@{ $after{$k} }), scalar(@{ $before{$k} }),
			LeafTest::min_of(@{ $after{$k} }), LeafTest::max_of(@{ $before{$k} })));
}
cmp_ok(LeafTest::min_of(@sf_after), '>', LeafTest::max_of(@sf_before),
	sprintf('(A) snowflake: the %d IDs after lie above the %d before', scalar(@sf_after), scalar(@sf_before)));
my $state_after = slurp_file($a_new->data_dir . '/leaf_snowflake.state');
my ($mark_after) = $state_after =~ /^mark 10 (\d+)$/m;
cmp_ok($mark_after // 0, '>=', $mark_before, '(A) the state file keeps the mark of worker ID 10');
my ($bound_old) = $state_before =~ /^bound_to (\S+)$/m;
my ($bound_new) = $state_after =~ /^bound_to (\S+)$/m;
isnt($bound_new, $bound_old, '(A) and is bound to the new data directory');
ok($a_new->log_contains(qr/"leaf_snowflake.state" was written by data directory \Q$bound_old\E of another cluster/),
	'(A) the log says that the state file was taken over');
$a_new->stop;

# ---------- (B) timeline 1, worker ID from ZooKeeper ----------

my $zk = LeafZK->new(nodes => 1);
my $root = '/leaf/upgrade';
# the forever nodes under the root, as ZooKeeper's client lists them
sub forever_nodes
{
	my ($list) = $zk->cli('ls', "$root/forever") =~ /^\[(.*)\]$/m;
	return $list // '(no list)';
}
my $zconf = join("\n", 'max_worker_processes = 16', @conf,
	"leaf.node_address = 'upgraded.example:5432'") . "\n";
my $z = $zk->pg_node('z_old', root => $root, install_path => $from, init => [@init], extra => $zconf);
$z->start;
$z->safe_psql('postgres', q[
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', step => 10);]);
LeafZK::wait_decided($z);
my $wid = LeafZK::status($z, 'worker_id');
is(LeafZK::status($z, 'worker_id_source, ready'), 'zookeeper|t', "(B) worker ID $wid from ZooKeeper");
my @zb = ids($z, 'postgres', 'order', 75);
my @zsf = sf_ids($z, 2000);
my $zalloc = rows($z, 'postgres', $alloc_sql);
my $zsource = rows($z, 'postgres', $source_sql);
my $forever = forever_nodes();
like($forever, qr/^upgraded\.example:5432-\d{10}$/, "(B) one forever node: $forever");
$z->stop;
my $zstate = slurp_file($z->data_dir . '/leaf_snowflake.state');

my $z_new = $zk->pg_node('z_new', root => $root, init => [@init], extra => $zconf);
my $took_b = upgrade($z, $z_new, "(B) $pair");
ok(slurp_file($z->data_dir . '/leaf_snowflake.state') eq $zstate, '(B) pg_upgrade left the old state file as it was');
is(forever_nodes(), $forever, '(B) nothing registered in ZooKeeper while pg_upgrade ran');
copy($z->data_dir . '/leaf_snowflake.state', $z_new->data_dir . '/leaf_snowflake.state') or die "copy: $!";
$z_new->start;
is(rows($z_new, 'postgres', $alloc_sql), $zalloc, '(B) leaf_alloc carries over');
is(rows($z_new, 'postgres', $source_sql), $zsource, '(B) leaf_alloc_source carries over');
my ($zst) = LeafTest::sqlstate($z_new, 'postgres', "SELECT leaf_segment_nextval('order')");
is($zst, 'LF006', '(B) refused as a copy until confirmed');
like(confirm($z_new, 'postgres'), qr/^the local leaf_alloc/, '(B) confirmed after the upgrade');
my @za = ids($z_new, 'postgres', 'order', 75);
cmp_ok(LeafTest::min_of(@za), '>', LeafTest::max_of(@zb),
	sprintf('(B) order: the IDs after the upgrade lie above those before (%d > %d)',
		LeafTest::min_of(@za), LeafTest::max_of(@zb)));
LeafZK::wait_decided($z_new);
is(LeafZK::status($z_new, 'worker_id, worker_id_source, ready, not_ready_reason'), "$wid|zookeeper|t|",
	"(B) the upgraded cluster keeps worker ID $wid from ZooKeeper");
is(forever_nodes(), $forever, '(B) and its forever node: none was added');
my @zsa = sf_ids($z_new, 2000);
cmp_ok(LeafTest::min_of(@zsa), '>', LeafTest::max_of(@zsf),
	'(B) snowflake: the IDs after the upgrade lie above those before');
$z_new->stop;
$zk->stop;

diag sprintf('%s: pg_upgrade took %.1f s (A) and %.1f s (B); the whole file %.0f s',
	$pair, $took_a, $took_b, time - $t_start);
done_testing();
