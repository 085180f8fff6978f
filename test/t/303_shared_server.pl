# Copyright (c) leaf contributors

# What leaf shares between the databases of a server, attacked all at
# once by one hostile tenant, and a victim database that must be served
# all the same.
#
# (1) The list.  test/shared_resources.pl reads from src/ every setting of
# leaf sized or started at server start (PGC_POSTMASTER) or named
# leaf.max_* (a pool or a share of one), every struct or hash of shared
# memory and every kind of background worker.  %attack_of below names,
# for each, the attack of this file that tries it; a resource found with
# no attack, or an attack named for a resource that is gone, fails here
# with its name, so that a new pool cannot come without being tried.
#
# (2) The attacks, on one node with small pools (16 tag slots, 4
# allocators), by a tenant with three faces: tenant_app, a plain role that
# may connect and take IDs; tenant_owner, who owns the tenant's databases
# and administers their tags (INSERT, UPDATE, DELETE on leaf_alloc, as a
# superuser grants a tag administrator); tenant_maker, a CREATEDB member
# of tenant_owner, who copies the tenant's database t3 with CREATE
# DATABASE ... TEMPLATE: the copies are tenant_maker's, a second owner
# acting with the first.
#  - tag_slots: the tenant's databases take as many tag slots as they may,
#    and the copies of t3, whose loads are refused (LF006), are called
#    again and again, and so is t3 once written as a replica (LF012);
#  - allocators: every database of the tenant is called all the time, so
#    that each would hold an allocator (leaf.alloc_idle_timeout is 5min:
#    idling rescues nobody); sampled all along, neither owner may run
#    more than leaf.max_databases_per_owner at once, the two together
#    must leave one allocator free, and an allocator of a copy, whose
#    every load is refused, must go;
#  - warm_start: a prepared transaction holds LOCK TABLE leaf_alloc in
#    the tenant's first database across a restart;
#  - settings: the tenant sets every leaf setting it may, for its
#    databases and its roles, and tries the others; given SET on
#    session_replication_role, it makes replica the default of its
#    second database, where leaf's allocator writes leaf_alloc;
#  - snowflake: the tenant takes snowflake IDs as fast as it can.
# Then a victim database, made by the superuser and owned by another
# role, must get the first ID of a new tag within $bound seconds of the
# request, without an error, and IDs of more tags up to its guaranteed
# share (leaf.max_tags / leaf.max_databases); and again after a restart
# with the lock in place, within $bound seconds of the server being ready.
#
# (3) What each attack took is printed (note), and asserted, so that the
# victim is not served only because the attack did not happen.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

# how long the victim may wait for its first ID, in s
my $bound = 15;
my $max_tags = 16;
my $max_databases = 4;
# every database using segment mode is guaranteed this many tag slots
my $share = int($max_tags / $max_databases);

# ---------------------------------------------------------------- (1) the list

# resource (its kind and name) => the attack of this file that tries it
my %attack_of = (
	'setting leaf.max_tags' => 'tag_slots',
	'setting leaf.max_tags_per_database' => 'tag_slots',
	'setting leaf.max_tags_per_owner' => 'tag_slots',
	'shmem leaf segment state' => 'tag_slots',
	'shmem leaf tag hash' => 'tag_slots',
	'setting leaf.max_databases' => 'allocators',
	'setting leaf.max_databases_per_owner' => 'allocators',
	'shmem leaf allocator slots' => 'allocators',
	'worker leaf allocator' => 'allocators',
	'setting leaf.warm_start' => 'warm_start',
	'worker leaf warm start' => 'warm_start',
	'shmem leaf snowflake' => 'snowflake',
	'shmem leaf snowflake IDs issued' => 'snowflake',
	'worker leaf snowflake worker' => 'snowflake',
	# set at server start by the superuser only: the tenant tries them
	map({ ("setting leaf.$_" => 'settings') }
		qw(max_backward_ms max_clock_drift_ms node_address snowflake_epoch
		  snowflake_layout test_node_clock_offset_ms worker_id worker_id_from
		  worker_id_lease worker_id_offset worker_id_source zk_auth
		  zk_auth_file zk_hosts zk_root)));
my %attacks = map { $_ => 1 } qw(tag_slots allocators warm_start settings snowflake);
my %ran;

my $lister = 'test/shared_resources.pl';
my $listed = `$^X $lister .`;
is($?, 0, "$lister reads src/");
my %found;
for (split /\n/, $listed)
{
	my ($kind, $name) = /^(\w+) (.+)$/ or next;
	my $context = '';
	($name, $context) = split / /, $name if $kind eq 'setting';
	$found{"$kind $name"} = $context;
}
cmp_ok(scalar(keys %found), '>=', 10, 'the shared resources are found in src/')
  or diag $listed;
for my $known ('setting leaf.max_tags', 'setting leaf.max_databases',
	'shmem leaf segment state', 'shmem leaf allocator slots',
	'worker leaf allocator', 'worker leaf warm start', 'setting leaf.warm_start')
{
	ok(exists $found{$known}, "$lister finds $known");
}
for my $r (sort keys %found)
{
	ok($attack_of{$r}, "shared resource $r has an attack in this file")
	  or diag "add to %attack_of: '$r' => <attack>";
}
for my $r (sort keys %attack_of)
{
	ok(exists $found{$r}, "$r, which this file attacks, is defined in src/");
	ok($attacks{ $attack_of{$r} }, "$r: its attack $attack_of{$r} is one of this file's");
}

# ---------------------------------------------------------------- the node

my $node = LeafTest::new_node('shared_server', { worker_id => 1 },
	"leaf.max_tags = $max_tags", "leaf.max_databases = $max_databases",
	'max_prepared_transactions = 4', "leaf.alloc_idle_timeout = '5min'",
	"leaf.warm_start_interval = '1s'");
ok(LeafTest::sf_wait_ready($node), 'the snowflake generator is ready');

my $per_owner = $node->safe_psql('postgres',
	q[SELECT setting FROM pg_settings WHERE name = 'leaf.max_databases_per_owner']);
$per_owner = $max_databases > 1 ? int($max_databases / 2) : 1
  if $per_owner eq '' || $per_owner < 0;
$per_owner = $max_databases if $per_owner == 0;
note "guaranteed tag slots per database: $share; allocators per owner: $per_owner";

$node->safe_psql('postgres', q[
	CREATE ROLE tenant_app LOGIN;
	CREATE ROLE tenant_owner LOGIN;
	CREATE ROLE tenant_maker LOGIN CREATEDB;
	GRANT tenant_owner TO tenant_maker;
	CREATE ROLE victim_owner LOGIN;
	CREATE DATABASE t1 OWNER tenant_owner;
	CREATE DATABASE t2 OWNER tenant_owner;
	CREATE DATABASE t3 OWNER tenant_owner;
	CREATE DATABASE victim OWNER victim_owner;]);
# 5 + 2 + 1: the tag slots one owner may hold (half of 16)
my @t1_tags = map { "a$_" } 1 .. 5;
my @t2_tags = map { "b$_" } 1 .. 2;
my @t3_tags = ('k');
my %tags_of = (t1 => \@t1_tags, t2 => \@t2_tags, map { $_ => \@t3_tags } qw(t3 c1 c2 c3));
for my $db (qw(t1 t2 t3 victim))
{
	$node->safe_psql($db, q[CREATE EXTENSION leaf;
		GRANT SELECT, INSERT, UPDATE, DELETE ON leaf_alloc TO tenant_owner;
		GRANT EXECUTE ON FUNCTION leaf_segment_nextval(text),
			leaf_segment_nextvals(text, integer), leaf_snowflake(),
			leaf_snowflake_nextvals(integer) TO tenant_app, tenant_owner;])
	  if $db ne 'victim';
	$node->safe_psql($db, 'CREATE EXTENSION leaf') if $db eq 'victim';
}

# psql as $role in $db, going on after errors: (stdout, stderr)
sub as_role
{
	my ($role, $db, $sql) = @_;
	my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
		on_error_stop => 0, extra_params => [ '-U', $role ]);
	return ($out, $err);
}

# the SQLSTATEs of the errors in $err, each once, sorted
sub states
{
	my %s = map { $_ => 1 } ($_[0] =~ /ERROR:\s+([0-9A-Z]{5}):/g);
	return join(',', sort keys %s) || 'none';
}

# $role calls each tag of $tags in $db, $rounds times: (IDs, SQLSTATEs)
sub call_tags
{
	my ($role, $db, $tags, $rounds) = @_;
	my $sql = "SET leaf.wait_timeout = '2s';\n"
	  . join('', map { "SELECT leaf_segment_nextval('$_');\n" } (@$tags) x $rounds);
	my ($out, $err) = as_role($role, $db, $sql);
	return (scalar(() = $out =~ /^\d+$/mg), states($err));
}

for my $db (qw(t1 t2 t3))
{
	my ($out, $err) = as_role('tenant_owner', $db,
		join('', map { "SELECT leaf_segment_create('$_', step => 10);\n" } @{ $tags_of{$db} }));
	is(states($err), 'none', "the tenant's owner creates the tags of $db") or diag $err;
}

# tag slots by database (every database's, as the superuser sees them)
sub slots
{
	my %n = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
		q[SELECT database, count(*) FROM leaf_segments WHERE state <> 'refused' GROUP BY 1]);
	return \%n;
}

# allocators by database; the peaks of what the tenant held, over every
# sample taken
my @tenant_dbs = qw(t1 t2 t3 c1 c2 c3);
my %tenant_db = map { $_ => 1 } @tenant_dbs;
my ($peak_all, $peak_tenant, $peak_owner) = (0, 0, 0);
my %owner_of = ((map { $_ => 'tenant_owner' } qw(t1 t2 t3)),
	(map { $_ => 'tenant_maker' } qw(c1 c2 c3)));

sub allocators
{
	my %n = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
		q[SELECT datname, count(*) FROM pg_stat_activity
		   WHERE backend_type = 'leaf allocator' GROUP BY 1]);
	my $all = 0;
	$all += $_ for values %n;
	my $tenant = 0;
	$tenant += $n{$_} // 0 for @tenant_dbs;
	my %by_owner;
	$by_owner{ $owner_of{$_} } += $n{$_} // 0 for @tenant_dbs;
	for (values %by_owner)
	{
		$peak_owner = $_ if $_ > $peak_owner;
	}
	$peak_all = $all if $all > $peak_all;
	$peak_tenant = $tenant if $tenant > $peak_tenant;
	return \%n;
}

sub show { my ($h) = @_; return join(', ', map { "$_ $h->{$_}" } sort keys %$h) || 'none'; }

# ---------------------------------------------------------------- settings

# The tenant sets every leaf setting it may, to the end of its range, for
# its databases (as their owner) and for its roles (each for itself), and
# tries the others; only settings of context user may be set so.
$ran{settings} = 1;
my @settings = map { [ split /\|/, $_, -1 ] } split /\n/, $node->safe_psql('postgres', q[
	SELECT name, context, vartype, setting, coalesce(max_val, ''), coalesce(enumvals[1], '')
	  FROM pg_settings WHERE name LIKE 'leaf.%' ORDER BY name]);
cmp_ok(scalar(@settings), '>=', 10, 'the leaf settings are in pg_settings');
# and those that pg_settings hides (leaf.zk_auth), as the list has them
my %in_view = map { $_->[0] => 1 } @settings;
for my $r (sort keys %found)
{
	my ($name) = $r =~ /^setting (\S+)$/ or next;
	push @settings, [ $name, $found{$r}, 'string', '', '', '' ] unless $in_view{$name};
}
my (@set, @refused);
my @tries = (
	[ 'tenant_owner', 't1', 'ALTER DATABASE t1 SET %s = %s' ],
	[ 'tenant_owner', 't2', 'ALTER DATABASE t2 SET %s = %s' ],
	[ 'tenant_app', 't1', 'ALTER ROLE tenant_app SET %s = %s' ],
	[ 'tenant_maker', 't1', 'ALTER ROLE tenant_maker SET %s = %s' ]);
for my $try (@tries)
{
	my ($role, $db, $form) = @$try;
	my @lines;
	for my $s (@settings)
	{
		my ($name, $context, $type, $value, $max, $enum) = @$s;
		my $hostile =
		    $type eq 'bool' ? ($value eq 'on' ? 'off' : 'on')
		  : $type eq 'integer' || $type eq 'real' ? ($max ne '' && $max ne $value ? $max : 0)
		  : $type eq 'enum' ? $enum
		  : 'x';
		push @lines, sprintf($form, $name, "'$hostile'");
	}
	# one statement a line, after as_role's first line
	my ($out, $err) = as_role($role, $db, join('', map { "$_;\n" } @lines));
	my %failed = map { $_ - 2 => 1 } ($err =~ /^psql:<stdin>:(\d+): ERROR/mg);
	for my $i (0 .. $#settings)
	{
		my ($name, $context) = @{ $settings[$i] };
		push @{ $failed{$i} ? \@refused : \@set }, "$role: $lines[$i]";
		ok($failed{$i}, "$role may not set $name ($context): $lines[$i]")
		  if $context ne 'user';
	}
}
my %tried = map { $_->[0] => 1 } @settings;
for my $r (grep { $attack_of{$_} eq 'settings' } sort keys %attack_of)
{
	(my $name = $r) =~ s/^setting //;
	ok($tried{$name}, "the tenant tried $name");
}
note 'the tenant set: ' . join('; ', @set);
note 'the tenant was refused: ' . join('; ', @refused);
cmp_ok(scalar(@set), '>=', 1, 'the tenant set some leaf setting of its own');

# session_replication_role: superuser only, unless granted
my ($srr_out, $srr_err) = as_role('tenant_owner', 't2',
	q[ALTER DATABASE t2 SET session_replication_role = replica]);
is(states($srr_err), '42501',
	'the tenant may not make replica the default of its database without a grant');
$node->safe_psql('postgres',
	'GRANT SET ON PARAMETER session_replication_role TO tenant_owner');
($srr_out, $srr_err) = as_role('tenant_owner', 't2',
	q[ALTER DATABASE t2 SET session_replication_role = replica]);
is(states($srr_err), 'none',
	'granted SET on it, the tenant makes replica the default of its database t2');

# ---------------------------------------------------------------- tag slots, copies, allocators

# t1 takes its slots and an allocator; t3, with one tag, takes an
# allocator, and is copied three times (which stops its allocator)
$ran{tag_slots} = 1;
$ran{allocators} = 1;
my ($ids, $st) = call_tags('tenant_app', 't1', \@t1_tags, 2);
note "t1: $ids IDs, errors $st";
allocators();
my $t1_slots = slots()->{t1} // 0;
note "t1 holds $t1_slots tag slots";
cmp_ok($t1_slots, '>=', $share, "the tenant holds at least the guaranteed share ($share) in t1");
($ids, $st) = call_tags('tenant_app', 't3', \@t3_tags, 2);
note "t3: $ids IDs, errors $st";
allocators();

for my $c (qw(c1 c2 c3))
{
	my ($out, $err) = as_role('tenant_maker', 'postgres',
		"CREATE DATABASE $c TEMPLATE t3");
	is(states($err), 'none', "the tenant's CREATEDB role copies t3 to $c") or diag $err;
}

# the copies are called, again and again: refused (LF006)
my %copy_states;
for my $c (qw(c1 c2 c3))
{
	my ($n, $s) = call_tags('tenant_app', $c, \@t3_tags, 5);
	$copy_states{$_} = 1 for split /,/, $s;
	is($n, 0, "copy $c hands out no ID in 5 calls");
	allocators();
}
note 'the calls of the copies got: ' . join(',', sort keys %copy_states);
ok($copy_states{LF006}, 'the copies are refused with LF006');
my $copy_slots = sub { my $s = slots(); my $n = 0; $n += $s->{$_} // 0 for qw(c1 c2 c3); $n };
my $copy_allocators = sub { my $al = allocators(); my $n = 0; $n += $al->{$_} // 0 for qw(c1 c2 c3); $n };
note 'after the calls of the copies: slots ' . show(slots()) . '; allocators ' . show(allocators());
ok(LeafTest::wait_until(sub { $copy_slots->() == 0 }, 'the copies hold no tag slot', 5),
	'a tag whose loads are refused (a copy, LF006) holds no slot (refused: it counts in no share)');
ok(LeafTest::wait_until(sub { $copy_allocators->() == 0 }, 'no allocator of a copy', 5),
	'an allocator whose every load is refused exits');

# t3 gets the mark of a logical replica: its owner, granted SET on
# session_replication_role, writes leaf_alloc as a replica would; its
# loads are refused from then on (LF012)
my ($rep_out, $rep_err) = as_role('tenant_owner', 't3', q[SET session_replication_role = replica;
	UPDATE leaf_alloc SET step = step;]);
is(states($rep_err), 'none', "t3's owner writes its leaf_alloc as a replica");
my $log_at = -s $node->logfile;
my $refused_calls = 0;
for my $round (1 .. 3)
{
	# past what its two buffers hold (step 10)
	($ids, $st) = call_tags('tenant_app', 't3', \@t3_tags, 25);
	note "t3, marked: $ids IDs, errors $st";
	$refused_calls += 25 - $ids;
	allocators();
}
is($st, 'LF012', 't3 is refused with LF012');
# a caller told a refusal asks for no load again: the next ones within
# the hold are told it at once, and start no allocator
my $t3_starts = () = substr(slurp_file($node->logfile), $log_at)
  =~ /leaf allocator started for database "t3"/g;
note "$refused_calls refused calls of t3 started $t3_starts allocators";
cmp_ok($t3_starts, '<=', 10,
	"$refused_calls refused calls of t3 in three sessions start few allocators (a refusal is held for its callers)");
note 'after the calls of t3: slots ' . show(slots()) . '; allocators ' . show(allocators());
ok(LeafTest::wait_until(sub { (slots()->{t3} // 0) == 0 }, 't3 holds no tag slot', 5),
	'a tag whose loads are refused (written by logical replication, LF012) holds no slot (refused: it counts in no share)')
  or diag $node->safe_psql('postgres', q[SELECT * FROM leaf_segments WHERE database = 't3'], extra_params => ['-x']);

# t2 (replica by default) takes what it may, t1 is called again
for my $db (qw(t2 t1))
{
	($ids, $st) = call_tags('tenant_app', $db, $tags_of{$db}, 2);
	note "$db: $ids IDs, errors $st";
	allocators();
}

# ---------------------------------------------------------------- the lock

$ran{warm_start} = 1;
my ($lock_out, $lock_err) = as_role('tenant_owner', 't1',
	"BEGIN;\nLOCK TABLE leaf_alloc;\nPREPARE TRANSACTION 'tenant_hold';");
is(states($lock_err), 'none',
	"the tenant's owner holds LOCK TABLE leaf_alloc of t1 in a prepared transaction")
  or diag $lock_err;

# ---------------------------------------------------------------- all at once

# The tenant's callers, in every database of it, until stopped: each
# call gives up after 200ms, errors are counted and the loop goes on.
sub start_pressure
{
	my @h;
	for my $db (@tenant_dbs)
	{
		my $tags = join(',', map { "'$_'" } @{ $tags_of{$db} });
		push @h, LeafTest::start_psql_script($node,
			"dbname=$db user=tenant_app application_name=tenant_pressure",
			qq[SET leaf.wait_timeout = '200ms';
DO \$\$
DECLARE t text;
BEGIN
	WHILE clock_timestamp() < now() + interval '60 s' LOOP
		FOREACH t IN ARRAY ARRAY[$tags] LOOP
			BEGIN
				PERFORM leaf_segment_nextval(t);
			EXCEPTION WHEN OTHERS THEN NULL;
			END;
		END LOOP;
		PERFORM pg_sleep(0.02);
	END LOOP;
END \$\$;
]);
	}
	$ran{snowflake} = 1;
	push @h, LeafTest::start_psql_script($node,
		'dbname=t1 user=tenant_app application_name=tenant_pressure',
		"SELECT count(*) FROM leaf_snowflake_nextvals(1000000);\n" x 20);
	return \@h;
}

sub stop_pressure
{
	my ($h) = @_;
	$node->safe_psql('postgres', q[SELECT count(pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE application_name = 'tenant_pressure']);
	my $snowflake_ids = 0;
	for (@$h)
	{
		my ($rc, $out, $err) = LeafTest::finish_psql_script($_);
		$snowflake_ids += $1 while $out =~ /^(\d+)$/mg;
	}
	return $snowflake_ids;
}

# The victim's request, by the superuser: a new tag and its first ID;
# returns (the server's clock at the request and when the ID came, the
# ID, stderr), sampling the allocators while it waits.
sub victim_first
{
	my ($tag) = @_;
	my $h = LeafTest::start_psql_script($node, 'victim', qq[\\set ON_ERROR_STOP 1
\\set VERBOSITY verbose
SET leaf.wait_timeout = '${bound}s';
SELECT 'start ' || extract(epoch FROM clock_timestamp());
SELECT leaf_segment_create('$tag', step => 10);
SELECT 'id ' || leaf_segment_nextval('$tag');
SELECT 'end ' || extract(epoch FROM clock_timestamp());
]);
	LeafTest::wait_until(
		sub {
			allocators();
			my ($out, $err) = LeafTest::psql_output($h);
			$out =~ /^end /m || $err =~ /ERROR/;
		},
		'the victim request', 2 * $bound);
	my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
	my ($start) = $out =~ /^start ([\d.]+)$/m;
	my ($id) = $out =~ /^id (\d+)$/m;
	my ($end) = $out =~ /^end ([\d.]+)$/m;
	return ($start, $end, $id, $err);
}

# the victim's other tags, up to its share: the SQLSTATEs of their calls
sub victim_more
{
	my (@tags) = @_;
	my ($rc, $out, $err) = $node->psql('victim', "\\set VERBOSITY verbose\n"
		  . "SET leaf.wait_timeout = '${bound}s';\n"
		  . join('', map { "SELECT leaf_segment_create('$_', step => 10);\n"
				  . "SELECT leaf_segment_nextval('$_');\n" } @tags),
		on_error_stop => 0);
	return (scalar(() = $out =~ /^\d+$/mg), states($err), $err);
}

my $pressure = start_pressure();
# the callers come up and take what they can
LeafTest::wait_until(
	sub {
		allocators();
		$node->safe_psql('postgres', q[SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'tenant_pressure' AND state = 'active']) >= @tenant_dbs;
	},
	'the tenant calls all its databases', 10);
allocators() for 1 .. 5;

my ($start, $end, $id, $err) = victim_first('v0');
my $took = defined $start && defined $end ? $end - $start : undef;
note sprintf('the victim\'s first ID came %s s after the request; error: %s',
	defined $took ? sprintf('%.2f', $took) : '(none)', states($err));
ok(defined $id, 'under attack, the victim gets the first ID of a new tag') or diag $err;
is(states($err), 'none', 'without an error');
ok(defined $took && $took <= $bound, "within $bound s of the request");
my ($n, $vstates, $verr) = victim_more(map { "v$_" } 1 .. $share - 1);
note "the victim's other tags: $n IDs, errors $vstates";
is($n, $share - 1, "and IDs of its other tags up to its guaranteed share ($share)")
  or diag $verr;
is($vstates, 'none', 'without an error');

# t2, replica by default, is served: leaf's allocator writes as origin
my ($t2_out, $t2_err) = as_role('tenant_app', 't2',
	"SET leaf.wait_timeout = '${bound}s';\nSELECT leaf_segment_nextval('b1');");
is(states($t2_err), 'none',
	"t2, whose default session_replication_role is replica, is served (leaf's workers run as origin)")
  or diag $t2_err;

my $slots = slots();
my $allocs = allocators();
note 'under attack: tag slots ' . show($slots) . '; allocators ' . show($allocs)
  . "; peak allocators $peak_all of $max_databases, the tenant's $peak_tenant";
cmp_ok($peak_owner, '>=', $per_owner,
	"one of the tenant's owners held as many allocators as one owner may ($per_owner) at some point");
cmp_ok($peak_owner, '<=', $per_owner,
	"no owner of the tenant ever held more than $per_owner allocators at once");
cmp_ok($peak_tenant, '<', $max_databases,
	"the tenant's two owners together never held every allocator ($max_databases)");

my ($sf_rc, $sf_out, $sf_err) = $node->psql('victim', 'SELECT leaf_snowflake() > 0');
is($sf_out, 't', 'the victim gets snowflake IDs') or diag $sf_err;
my $sf = stop_pressure($pressure);
note "the tenant took $sf snowflake IDs";
cmp_ok($sf, '>=', 1000000, 'the tenant took snowflake IDs as fast as it could');

# ---------------------------------------------------------------- the restart

# the victim's tags beyond the first go, so that after the restart it
# asks again for its whole share
$node->safe_psql('victim',
	'DELETE FROM leaf_alloc WHERE biz_tag <> ' . q['v0']);
$node->stop('fast');
$node->start;
my $ready = Time::HiRes::time();
$pressure = start_pressure();
($start, $end, $id, $err) = victim_first('w0');
$took = defined $end ? $end - $ready : undef;
my $asked = defined $start && defined $end ? $end - $start : undef;
note sprintf('after the restart, the victim\'s first ID came %s s after the server was ready, %s s after the request; error: %s',
	(map { defined $_ ? sprintf('%.2f', $_) : '(none)' } $took, $asked), states($err));
ok(defined $id, 'after a restart with the lock in place, the victim gets the first ID of a new tag')
  or diag $err;
is(states($err), 'none', 'without an error');
ok(defined $took && $took <= $bound, "within $bound s of the server being ready");
ok(defined $asked && $asked <= $bound, "and of the request");
($n, $vstates, $verr) = victim_more(map { "w$_" } 1 .. $share - 2);
my ($rc0, $v0_out, $v0_err) = $node->psql('victim',
	"SET leaf.wait_timeout = '${bound}s';\nSELECT leaf_segment_nextval('v0')");
$n++ if $v0_out =~ /^\d+$/m;
is($n, $share - 1, "and IDs of its other tags up to its guaranteed share ($share)")
  or diag $verr . $v0_err;

is($node->safe_psql('postgres', q[SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'tenant_hold']),
	'1', "the tenant's prepared transaction still holds leaf_alloc of t1");
$slots = slots();
$allocs = allocators();
note 'after the restart: tag slots ' . show($slots) . '; allocators ' . show($allocs)
  . "; peak allocators $peak_all of $max_databases, the tenant's $peak_tenant";
stop_pressure($pressure);

for my $a (sort keys %attacks)
{
	ok($ran{$a}, "attack $a ran");
}

$node->safe_psql('t1', q[ROLLBACK PREPARED 'tenant_hold']);
$node->stop;
done_testing();
