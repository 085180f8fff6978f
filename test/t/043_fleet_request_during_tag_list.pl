# Copyright (c) leaf contributors

# Fleet mode: a caller that asks for a load while the allocator waits for
# the allocation database (here, for its list of tags, made slow by the
# test build's leaf.test_tags_pause_ms) is served as soon as that answer
# is in.  The allocator resets its latch while it waits on the socket; it
# must not then sleep through the request, which left the caller waiting
# until its own wait ran out of its one-second slice and asked again
# (a stall of up to 1 s, seen at 20,000 calls/s with a jittery network).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LeafTest;

my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
$alloc->safe_psql('postgres', "SELECT leaf_segment_create('t', 10)");
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');

# every refill waits (the next segment is asked for only when the current
# one is used up), the step stays 10, and the list of tags is read every
# 3 s after a pause of 2.5 s
my $shard = LeafTest::new_node('shard',
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user'",
	"leaf.preload_percent = 100",
	"leaf.segment_duration = '1ms'",
	"leaf.tag_refresh_interval = '3s'",
	"leaf.wait_timeout = '10s'",
	"log_timezone = 'UTC'",	# the log's times are read below
	"log_line_prefix = '%m [%p] '");
$shard->safe_psql('postgres', 'SELECT leaf_segment_nextval(\'t\')');
$shard->append_conf('postgresql.conf', "leaf.test_tags_pause_ms = 2500\n");
$shard->reload;

my @late;
for my $round (1 .. 3)
{
	my $offset = -s $shard->logfile;
	ok($shard->wait_for_log(qr/reads the list of tags after a pause of 2500 ms/, $offset),
		"round $round: the allocator waits for the list of tags");
	my $began = time();
	# use up what is loaded; the call that needs the next segment waits
	# for a load asked for during the pause
	my $out = $shard->safe_psql('postgres', q[
		SELECT count(*) FROM (SELECT leaf_segment_nextval('t') FROM generate_series(1, 25)) s]);
	my $done = time();
	is($out, '25', "round $round: 25 IDs");
	my $log = slurp_file($shard->logfile, $offset);
	ok($log =~ /pause before the list of tags ended/, "round $round: the pause ended")
	  or next;
	# when the pause ended, from the log's timestamp (ms)
	my ($h, $m, $s) = $log =~ /(\d\d):(\d\d):(\d\d\.\d+) UTC \[\d+\] LOG:  leaf allocator's pause before the list of tags ended/;
	ok(defined $s, "round $round: the log gives the time the pause ended") or next;
	my @now = gmtime($done);
	my $end = $done - ($now[2] * 3600 + $now[1] * 60 + $now[0] + ($done - int($done)))
	  + ($h * 3600 + $m * 60 + $s);
	my $late = $done - $end;
	note sprintf('round %d: began %.3f s before the pause ended, done %.3f s after it',
		$round, $end - $began, $late);
	push @late, $late;
	cmp_ok($late, '<', 0.4, "round $round: the waiting caller was served right after the answer came in");
}

$shard->stop;
$alloc->stop;
done_testing();
