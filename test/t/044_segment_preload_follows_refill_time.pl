# Copyright (c) leaf contributors

# Segment mode: the next segment is asked for early enough for a load to
# arrive before the current segment runs out, when loads are slower than
# leaf.preload_percent leaves room for.  Here every load takes 200 ms (a
# trigger on leaf_alloc sleeps), a segment of 300 IDs lasts 300 ms at
# 1,000 calls/s, and leaf.preload_percent = 50 alone would leave a load
# 150 ms: every refill would make callers wait.  (Between 750 and 1,500
# calls/s the two triggers differ so; pgbench's rate is checked.)  The trigger derived from
# the tag's rate and its loads' time leaves it the whole segment.  With
# leaf.preload_percent = 100 (the double buffer off, as configured) every
# refill still waits.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('preload',
	"leaf.preload_percent = 50",
	"leaf.segment_duration = '1ms'",	# keep the step at 300
	"leaf.wait_timeout = '10s'");
$node->safe_psql('postgres', q[
	SELECT leaf_segment_create('slow', 300);
	CREATE FUNCTION slow_load() RETURNS trigger LANGUAGE plpgsql AS
	  $$BEGIN PERFORM pg_sleep(0.2); RETURN NEW; END$$;
	CREATE TRIGGER slow_load BEFORE UPDATE ON leaf_alloc
	  FOR EACH ROW WHEN (NEW.biz_tag = 'slow') EXECUTE FUNCTION slow_load();
	SELECT leaf_segment_nextval('slow');]);

my $script = $node->basedir . '/slow.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"SELECT leaf_segment_nextval('slow');\n");

# 2 clients at 1,000 calls/s for the given seconds; the tag's refills and
# waits over the run
sub run_load
{
	my ($seconds) = @_;
	my ($r0, $w0) = split /\|/, $node->safe_psql('postgres',
		q[SELECT refills, waits FROM leaf_segments WHERE biz_tag = 'slow']);
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'pgbench', '-n', '-c', '2', '-j', '1', '-R', '1000', '-T', $seconds,
			'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \$out, '2>', \$err);
	my ($tps) = $out =~ /tps = ([\d.]+)/;
	my ($r1, $w1) = split /\|/, $node->safe_psql('postgres',
		q[SELECT refills, waits FROM leaf_segments WHERE biz_tag = 'slow']);
	note sprintf('%s s at %s calls/s: %d refills, %d waits', $seconds,
		$tps // '?', $r1 - $r0, $w1 - $w0);
	return ($r1 - $r0, $w1 - $w0, $tps // 0);
}

# the first seconds teach it the rate and the load time
run_load(3);
my ($refills, $waits, $tps) = run_load(8);
cmp_ok($tps, '>', 800, 'pgbench kept close to 1,000 calls/s');
cmp_ok($refills, '>=', 20, "the tag was refilled $refills times");
# (before the trigger followed the load time: 2 waits a refill; on a
# machine loaded by other work a few loads take longer than 200 ms)
cmp_ok($waits, '<=', $refills / 2,
	'loads of 200 ms, which leaf.preload_percent = 50 leaves 150 ms, made few callers wait');

# the double buffer off: every refill waits
$node->append_conf('postgresql.conf', "leaf.preload_percent = 100\n");
$node->reload;
run_load(1);
($refills, $waits, $tps) = run_load(5);
cmp_ok($waits, '>=', $refills, 'with leaf.preload_percent = 100, every refill makes callers wait');

$node->stop;
done_testing();
