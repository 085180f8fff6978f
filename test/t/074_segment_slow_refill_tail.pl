# Copyright (c) leaf contributors

# Segment mode: one slow refill, among fast ones, makes no caller wait,
# and leaf_segment_refills() shows it.  A tag of step 1,000 (held there
# by leaf.segment_duration = 1ms) is taken at up to 1,000 IDs a second:
# a segment lasts about a second, and with leaf.preload_percent = 90
# the next one is asked for with about 100 ms left, which its fast
# refills (a few ms) never outlast.  Then one refill takes 400 ms longer
# (a trigger on leaf_alloc sleeps once), as a commit behind a slow WAL
# flush would: planned with the recent refill times, every caller would
# wait for it.  The trigger plans with leaf.preload_floor (here 1 s)
# instead, and asks for the next segment as the current one comes into
# use.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $node = LeafTest::new_node('tail',
	"leaf.segment_duration = '1ms'",	# keep the step at 1000
	"leaf.preload_percent = 90",
	"leaf.preload_floor = '1s'",
	"leaf.wait_timeout = '10s'");
$node->safe_psql('postgres', q[
	SELECT leaf_segment_create('tail', 1000);
	CREATE TABLE slow_once (x int);
	CREATE FUNCTION slow_refill() RETURNS trigger LANGUAGE plpgsql AS
	  $$BEGIN
		DELETE FROM slow_once;
		IF FOUND THEN PERFORM pg_sleep(0.4); END IF;
		RETURN NEW;
	  END$$;
	CREATE TRIGGER slow_refill BEFORE UPDATE ON leaf_alloc
	  FOR EACH ROW WHEN (NEW.biz_tag = 'tail') EXECUTE FUNCTION slow_refill();
	SELECT leaf_segment_nextval('tail');]);
# the slot's refill times start again with the allocator running (its
# start is the first refill's queue, which may be long on a busy machine)
$node->safe_psql('postgres', q[SELECT leaf_segment_discard('tail')]);

# up to 1,000 calls a second for about the given seconds, from one
# session: 10 calls, then 10 ms of sleep
sub take_for
{
	my ($seconds) = @_;
	$node->safe_psql('postgres', qq[
		DO \$\$
		DECLARE
			stop timestamptz := clock_timestamp() + interval '$seconds s';
		BEGIN
			WHILE clock_timestamp() < stop LOOP
				FOR i IN 1 .. 10 LOOP
					PERFORM leaf_segment_nextval('tail');
				END LOOP;
				PERFORM pg_sleep(0.01);
			END LOOP;
		END
		\$\$;]);
}

sub counters
{
	return split /\|/, $node->safe_psql('postgres',
		q[SELECT refills, waits, ids_issued FROM leaf_segments
		   WHERE biz_tag = 'tail' AND database = current_database()]);
}

# the first seconds teach it the rate and the refill times
take_for(3);
my ($r0, $w0, $i0) = counters();

# one refill 400 ms slower, asked for while IDs are taken
$node->safe_psql('postgres', 'INSERT INTO slow_once VALUES (1)');
take_for(4);
my ($r1, $w1, $i1) = counters();
note sprintf('%d IDs, %d refills, %d waits', $i1 - $i0, $r1 - $r0, $w1 - $w0);

is($node->safe_psql('postgres', 'SELECT count(*) FROM slow_once'),
	'0', 'the slow refill happened');
# below 250 IDs a second, the 100 IDs that leaf.preload_percent leaves
# would last 400 ms
cmp_ok(($i1 - $i0) / 4, '>', 300,
	'IDs were taken faster than the 100 left by leaf.preload_percent last a refill of 400 ms');
cmp_ok($r1 - $r0, '>=', 2, 'the tag was refilled');
is($w1 - $w0, 0, 'no caller waited for the slow refill');

# the views report it: the longest refill, its work, its bucket, the
# tail; the commit of a local load is timed apart
my $row = $node->safe_psql('postgres', q[
	SELECT max_refill_ms >= 400, max_refill_work_ms >= 400,
	       max_refill_commit_ms IS NOT NULL,
	       refill_buckets[9] + refill_buckets[10] + refill_buckets[11] >= 1,
	       refill_tail_ms >= 200, refill_p99_ms > 0
	  FROM leaf_segment_refills()
	 WHERE biz_tag = 'tail' AND database = current_database()]);
is($row, 't|t|t|t|t|t',
	'leaf_segment_refills shows the slow refill, spent in its work');
is($node->safe_psql('postgres', q[
	SELECT refill_max_seconds >= 0.4 AND refill_tail_seconds > 0
	  FROM leaf_tag_metrics WHERE biz_tag = 'tail'
	   AND database = current_database()]),
	't', 'leaf_tag_metrics shows it in seconds');

$node->stop;
done_testing();
