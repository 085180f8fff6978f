
# Copyright (c) leaf contributors

# Fleet mode with the allocation database run by Patroni.
#
# A 3-member Patroni cluster (synchronous_mode: true) on a 3-node
# ZooKeeper ensemble holds leaf_alloc; two shards list every member in
# leaf.alloc_conninfo with target_session_attrs=read-write.  Under load,
# on both shards, on two tags:
#
#   - 'order', step 4000 at about 100 calls/s per shard: a segment lasts
#     about 40 s, so the buffers outlast a failover and no call should
#     wait;
#   - 'tick', step 50 at about 100 calls/s per shard: a refill every half
#     second, so a refill is needed during the failover and callers wait
#     for the new leader (leaf.wait_timeout is 60 s, longer than a
#     failover: they wait, they do not fail).
#
# leaf.segment_duration = 1ms keeps each tag's step at leaf_alloc.step.
#
# 1. kill -9 of the leader's Patroni and postmaster.  Patroni promotes the
#    synchronous standby once the leader key expires (ttl 10 s).  Measured:
#    the time from the crash to each shard's first refill from the new
#    leader, calls that waited, calls that failed.
# 2. The old leader's Patroni started again: it comes back as a replica.
# 3. patronictl switchover to the synchronous standby, same measures.
#
# Checked: no ID repeats over the union of both shards' IDs of each tag,
# no call failed, both shards draw from the final leader, whose max_id
# lies above every ID handed out.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use LeafTest;
use LeafZK;
use LeafPatroni;

my %step = (order => 4000, tick => 50);
my $rate = 100;    # calls/s per shard and tag

# ---------- ZooKeeper and the Patroni allocation cluster ----------

my $zk = LeafZK->new(nodes => 3);
my $pc = LeafPatroni->new(
	zk => $zk,
	members => 3,
	synchronous_mode => 1,
	parameters => { 'leaf.alloc_failover' => 'synchronous' });
my $t0 = time;
$pc->start;
my $leader = $pc->wait_leader;
ok($leader, "the Patroni cluster has a leader ($leader)");
my $sync = $pc->sync_standby;
ok($sync, "and a synchronous standby ($sync)");
note sprintf('Patroni cluster up in %.1fs: %s', time - $t0, $pc->members_text);

$pc->node($leader)->safe_psql('postgres', qq[
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', $step{order}, 1, 'patroni failover test');
SELECT leaf_segment_create('tick', $step{tick}, 1, 'patroni failover test');
]);

my $conninfo = $pc->conninfo('dbname=postgres user=postgres');
note "leaf.alloc_conninfo = '$conninfo'";

# ---------- two shards ----------

my @shards;
for my $i (1 .. 2)
{
	my $s = LeafTest::new_node("shard$i",
		"leaf.alloc_conninfo = '$conninfo'",
		"leaf.alloc_failover = 'synchronous'",
		"leaf.segment_duration = '1ms'",
		"leaf.wait_timeout = '60s'",
		"max_connections = 30");
	my $sql = q[
CREATE TABLE call_errors (
	biz_tag text,
	started_at timestamptz NOT NULL,
	failed_at timestamptz NOT NULL,
	sqlstate text,
	message text);
];
	for my $tag (sort keys %step)
	{
		$sql .= qq[
CREATE TABLE ids_$tag (
	started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
	id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('$tag'),
	done_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION call_$tag() RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE
	t0 timestamptz := clock_timestamp();
	st text; msg text;
BEGIN
	INSERT INTO ids_$tag DEFAULT VALUES;
EXCEPTION WHEN others THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	INSERT INTO call_errors VALUES ('$tag', t0, clock_timestamp(), st, msg);
END
\$\$;
];
	}
	$s->safe_psql('postgres', $sql);
	push @shards, $s;
}

sub source_of { return 'remote 127.0.0.1:' . $pc->port($_[0]) . '/postgres'; }

for my $i (0 .. $#shards)
{
	$shards[$i]->safe_psql('postgres',
		"SELECT leaf_segment_nextval('order'), leaf_segment_nextval('tick')");
	is( $shards[$i]->safe_psql('postgres',
			q[SELECT DISTINCT source FROM leaf_segments]),
		source_of($leader),
		'shard ' . ($i + 1) . " draws segments from the leader $leader");
}

# leaf_segments of a shard: { tag => { source, last_refill (epoch), waits, max_wait_ms, refills } }
sub segments
{
	my ($s) = @_;
	my %r;
	for my $line (split /\n/, $s->safe_psql('postgres', q[
SELECT biz_tag, source, coalesce(extract(epoch FROM last_refill), 0), waits,
       round(max_wait_ms), refills
  FROM leaf_segments]))
	{
		my ($tag, $source, $lr, $waits, $mw, $refills) = split /\|/, $line;
		$r{$tag} = { source => $source, last_refill => $lr, waits => $waits,
			max_wait_ms => $mw, refills => $refills };
	}
	return \%r;
}

sub all_segments { return [ map { segments($_) } @shards ]; }

# Wait until every shard's 'tick' tag was refilled from $new after $since;
# returns the refill times (epoch), one per shard (undef if none came).
sub first_refills
{
	my ($new, $since) = @_;
	my @first;
	$pc->wait_until(
		sub {
			for my $i (0 .. $#shards)
			{
				next if defined $first[$i];
				my $t = segments($shards[$i])->{tick};
				$first[$i] = $t->{last_refill}
				  if $t && $t->{source} eq source_of($new)
				  && $t->{last_refill} > $since;
			}
			return !grep { !defined } @first[ 0 .. $#shards ];
		},
		180, "refills from $new");
	return @first;
}

# ---------- the run ----------

my @bench;
for my $i (0 .. $#shards)
{
	for my $tag (sort keys %step)
	{
		push @bench,
		  LeafTest::start_pgbench($shards[$i], 'postgres', "SELECT call_$tag();\n",
			[ '-c', 2, '-j', 1, '-R', $rate, '-T', 600 ]);
	}
}
my $t_load = time;
usleep(5_000_000);	# load before the first event

my %event;

# 1. kill -9 of the leader
my $before = all_segments();
my $old = $leader;
my $t_crash = $pc->kill9($old);
my $new = $pc->wait_leader(120, $old);
my $t_promoted = time;
ok($new, "after kill -9 of $old, Patroni promotes $new");
is($new, $sync, 'the new leader is the member that was the synchronous standby');
my @first = first_refills($new, $t_crash);
ok(!grep({ !defined } @first), "every shard refills from the new leader $new");
$event{crash} = {
	before => $before, after => all_segments(), at => $t_crash,
	promoted => $t_promoted - $t_crash, first => [ map { defined $_ ? $_ - $t_crash : undef } @first ],
};

# 2. the old leader comes back as a replica
$pc->start_member($old);
ok($pc->wait_replica($old, 150), "the old leader $old, started again, runs as a replica");
note 'members: ' . $pc->members_text;
usleep(3_000_000);	# load with the old leader back, before the next event

# 3. switchover to the synchronous standby
$leader = $pc->leader;
$pc->wait_until(sub { $sync = $pc->sync_standby; defined $sync }, 60, 'a synchronous standby');
ok($sync && $sync ne $leader, 'there is a synchronous standby (' . ($sync // 'none') . ') to switch over to');
$before = all_segments();
my $t_sw = time;
my ($rc, $out) = $pc->switchover($sync);
is($rc, 0, "patronictl switchover from $leader to $sync succeeds");
my $new2 = $pc->wait_leader(120, $leader);
my $t_sw_done = time;
is($new2, $sync, "$sync leads after the switchover");
@first = first_refills($sync, $t_sw);
ok(!grep({ !defined } @first), "every shard refills from the new leader $sync");
$event{switchover} = {
	before => $before, after => all_segments(), at => $t_sw,
	promoted => $t_sw_done - $t_sw, first => [ map { defined $_ ? $_ - $t_sw : undef } @first ],
};
ok($pc->wait_replica($leader, 150), "the former leader $leader runs as a replica after the switchover");
usleep(3_000_000);	# load after the last event, before the clients stop

for my $b (@bench)
{
	$b->{run}->signal('TERM');
	eval { $b->{run}->finish };
}
my $t_end = time;
note 'members at the end: ' . $pc->members_text;

# ---------- checks ----------

my $final = $pc->leader;
my %ids;
my $total_ids = 0;
for my $tag (sort keys %step)
{
	for my $s (@shards)
	{
		my @ids = grep { /^\d+$/ } split /\n/,
		  $s->safe_psql('postgres', "SELECT id FROM ids_$tag");
		push @{ $ids{$tag} }, @ids;
	}
	$total_ids += @{ $ids{$tag} };
	is(LeafTest::count_repeats($ids{$tag}), 0,
		"tag $tag: no ID repeats over the " . scalar(@{ $ids{$tag} }) . ' IDs of both shards');
	my $max_id = $pc->node($final)->safe_psql('postgres',
		"SELECT max_id FROM leaf_alloc WHERE biz_tag = '$tag'");
	my $largest = LeafTest::max_of(@{ $ids{$tag} });
	cmp_ok($max_id, '>', $largest,
		"tag $tag: the leader's max_id ($max_id) lies above every ID handed out ($largest)");
}

my $failed = 0;
for my $i (0 .. $#shards)
{
	my $errs = $shards[$i]->safe_psql('postgres', q[
SELECT biz_tag || '|' || sqlstate || '|' || count(*) || '|' || min(message)
  FROM call_errors GROUP BY biz_tag, sqlstate]);
	for my $line (grep { length } split /\n/, $errs)
	{
		my ($tag, $st, $n, $msg) = split /\|/, $line, 4;
		$failed += $n;
		diag "shard " . ($i + 1) . ": $n calls of $tag failed with $st: $msg";
	}
	is( $shards[$i]->safe_psql('postgres', q[SELECT DISTINCT source FROM leaf_segments]),
		source_of($final), 'shard ' . ($i + 1) . " draws from the final leader $final");
}
is($failed, 0, 'no call failed');

for my $ev (qw(crash switchover))
{
	my $e = $event{$ev};
	my @parts;
	for my $tag (sort keys %step)
	{
		my $waits = 0;
		for my $i (0 .. $#shards)
		{
			$waits += $e->{after}[$i]{$tag}{waits} - $e->{before}[$i]{$tag}{waits};
		}
		push @parts, "$tag: $waits calls waited for a segment";
		is($waits, 0, "$ev: no call of tag order waited: its buffers outlast the failover")
		  if $tag eq 'order';
	}
	# calls made from the event until the next one: how many took over
	# 100 ms, and the longest
	my $until = $ev eq 'crash' ? $event{switchover}{at} : $t_end;
	my @slow;
	for my $tag (sort keys %step)
	{
		my ($n, $ms) = (0, 0);
		for my $s (@shards)
		{
			my ($sn, $sms) = split /\|/, $s->safe_psql('postgres', qq[
SELECT count(*) FILTER (WHERE done_at - started_at > interval '100ms'),
       coalesce(round(max(extract(epoch FROM done_at - started_at)) * 1000), 0)
  FROM ids_$tag
 WHERE done_at > to_timestamp($e->{at}) AND started_at < to_timestamp($until)]);
			$n += $sn;
			$ms = $sms if $sms > $ms;
		}
		push @slow, "$tag: $n calls over 100ms, longest ${ms}ms";
	}
	diag sprintf('%s: new leader after %.1fs; first refill from it %s; %s; %s',
		$ev, $e->{promoted},
		join(', ', map { defined $_ ? sprintf('%.1fs', $_) : 'none' } @{ $e->{first} }),
		join('; ', @parts), join('; ', @slow));
}
diag sprintf('%d IDs in all over %.0fs of load (%s); %d calls failed',
	$total_ids, $t_end - $t_load,
	join(', ', map { "$_: " . scalar(@{ $ids{$_} }) } sort keys %ids), $failed);

$_->stop for @shards;
$pc->stop;
$zk->stop;

done_testing();
