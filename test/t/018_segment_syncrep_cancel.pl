
# Copyright (c) leaf contributors

# A segment whose commit did not reach the synchronous standby must never
# be used.  With synchronous_standby_names = 'sb' and the standby sb
# stopped, the allocator's commit waits for it; a query cancel or a
# terminate of the allocator ends that wait with a WARNING only, and the
# commit stands locally.  The caller must not get IDs of that segment: it
# keeps waiting, and gets its IDs once the standby is back.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $primary = LeafTest::new_node('primary', { init => [ allows_streaming => 1 ] },
	"leaf.segment_duration = '1h'");
$primary->safe_psql('postgres', "SELECT leaf_segment_create('o', step => 100)");

$primary->backup('bkp');
my $standby = LeafTest::new_node_from_backup('sb', $primary, 'bkp',
	{ init => [ has_streaming => 1 ] },
	"primary_conninfo = '" . $primary->connstr . " application_name=sb'");

$primary->safe_psql('postgres',
	"ALTER SYSTEM SET synchronous_standby_names = 'sb'; SELECT pg_reload_conf()");
ok( $primary->poll_query_until(
		'postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'sb'"
	),
	'sb is the synchronous standby');

is( $primary->safe_psql(
		'postgres', "SELECT count(DISTINCT x) FROM leaf_segment_nextvals('o', 150) x"),
	'150',
	'150 IDs while the standby is up');

$standby->stop('fast');

# how the allocator stands
sub allocator_in_syncrep
{
	return $primary->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'leaf allocator' AND wait_event = 'SyncRep'"
	);
}

my $caller = LeafTest::start_psql_script($primary, 'postgres',
	"SET leaf.wait_timeout = '120s';\n"
	  . "SELECT count(DISTINCT x) || ' ' || min(x) || ' ' || max(x) FROM leaf_segment_nextvals('o', 1000) x;\n"
);

# no answer for the caller during $secs seconds
sub no_answer_for
{
	my ($secs) = @_;
	my $deadline = time + $secs;
	while (time < $deadline)
	{
		my ($out) = LeafTest::psql_output($caller);
		return 0 if $out =~ /\d/;
		select(undef, undef, undef, 0.1);
	}
	return 1;
}

my $pid;
ok( LeafTest::wait_until(sub { ($pid = allocator_in_syncrep()) ne '' },
		'the allocator to wait for the standby'),
	'the allocator waits for the standby');

my $log_offset = -s $primary->logfile;
$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok( LeafTest::wait_until(
		sub {
			slurp_file($primary->logfile, $log_offset) =~
			  /canceling wait for synchronous replication/;
		},
		'the cancelled wait'),
	'the cancel ended the wait for synchronous replication');
ok(no_answer_for(3),
	'after the cancel, the caller got no IDs of the unconfirmed segment');
ok( LeafTest::wait_until(sub { allocator_in_syncrep() ne '' },
		'the allocator to wait again'),
	'the allocator tries again and waits for the standby');

$pid = allocator_in_syncrep();
$log_offset = -s $primary->logfile;
$primary->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok( LeafTest::wait_until(
		sub {
			slurp_file($primary->logfile, $log_offset) =~
			  /canceling the wait for synchronous replication and terminating/;
		},
		'the terminated wait'),
	'the terminate ended the wait for synchronous replication');
ok(no_answer_for(3),
	'after the terminate, the caller got no IDs of the unconfirmed segment');
ok( LeafTest::wait_until(sub { allocator_in_syncrep() ne '' },
		'a new allocator to wait'),
	'a new allocator waits for the standby');
my ($out) = LeafTest::psql_output($caller);
is($out, '', 'still no answer while the standby is down');

$standby->start;
my ($rc, $res, $err) = LeafTest::finish_psql_script($caller);
is($rc, 0, 'the caller ends once the standby is back') or diag $err;
my ($n, $min, $max) = split / /, $res;
is($n, 1000, 'the caller got 1000 distinct IDs');
cmp_ok($min, '>', 150, 'above the IDs handed out before');

# every ID handed out is below max_id on the standby
$primary->wait_for_catchup($standby);
cmp_ok(
	$max, '<',
	$standby->safe_psql(
		'postgres', "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'o'"),
	'the standby has every segment an ID came from');

$standby->stop;
$primary->stop;
done_testing();
