
# Copyright (c) leaf contributors

# Snowflake worker IDs from an allocation database that is a logical
# replica (CREATE PUBLICATION ... FOR ALL TABLES on the publisher's
# allocation database, a subscription in a database of another cluster
# with leaf installed too).  The subscription copies
# leaf_worker_lease_fleet (the same fleet) and every row of
# leaf_worker_lease: a node pointed at the subscriber would take a worker
# ID that a node pointed at the publisher takes as well, and the two would
# hand out the same IDs.
#  1. A publisher and a subscriber; node a, on the publisher, serves with
#     worker ID 0, and its row reaches the subscriber.
#  2. Node b, on the subscriber, does not serve while the subscription is
#     enabled, and says that logical replication writes the table there;
#     node c, on the publisher, serves with worker ID 1.
#  3. The subscription disabled: b still does not serve (logical
#     replication has written leaf's tables there, as
#     leaf_alloc_replicated records, until a cut-over).
#  4. At every point no two serving nodes hold one worker ID, and the IDs
#     of the nodes never repeat.
#  5. leaf_alloc_cutover() on the subscriber is refused (55000) while
#     nodes hold worker IDs on the publisher; once they stopped cleanly
#     (which ends their leases) it succeeds, and b serves.  c, started
#     again on the publisher, does not serve: the publisher's table of
#     worker IDs has moved to the subscriber.
#  6. Switching back: the subscriber publishes to the publisher (no
#     initial copy); once b stopped, leaf_alloc_cutover() on the publisher
#     takes the fleet back: c serves there again, and b, on the former
#     subscriber, does not.
#  7. The owner of the schema leaf is in (a role that may create there,
#     not a superuser) creates an overload of leaf_copy_status(): the
#     nodes read the view leaf_copy_identity, which is bound to leaf's
#     function, and go on.
#  8. A subscription of leaf_alloc alone, into another database: it holds
#     none of the leases, so its cut-over neither waits for c nor fences
#     the publisher's table of worker IDs, and c goes on serving.
#  9. A subscription of leaf_worker_lease alone into that database,
#     dropped before the cut-over: the rows it copied are the publisher's
#     (their tokens are), so the cut-over waits for c, then fences the
#     publisher.
# 10. leaf_worker_lease_confirm() after the schema of leaf was renamed and
#     objects of leaf's names made under its old name: it records the copy
#     in leaf's table, through leaf's view, and runs nothing of another.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $t_start = Time::HiRes::time();

# heartbeat 500 ms: the lease is 2 s; a new holder's hold after a start
# or a new timeline is the lease and twice the drift, 4 s
my $drift_ms = 1000;

my $pub = LeafTest::new_node('publisher', { init => [ allows_streaming => 'logical' ] },
	"listen_addresses = '127.0.0.1'");
my $sub = LeafTest::new_node('subscriber', { init => [ allows_streaming => 'logical' ] },
	"listen_addresses = '127.0.0.1'");
# the nodes log in as a role with no more than they need, on both
for my $alloc ($pub, $sub)
{
	$alloc->safe_psql('postgres', q[
CREATE ROLE leaf_node LOGIN;
GRANT USAGE ON SCHEMA public TO leaf_node;
GRANT SELECT, INSERT, UPDATE ON leaf_worker_lease, leaf_worker_lease_timeline, leaf_worker_lease_fleet TO leaf_node;
GRANT EXECUTE ON FUNCTION leaf_worker_lease_take, leaf_worker_lease_renew, leaf_worker_lease_release, leaf_worker_lease_give_up, leaf_worker_lease_copy_check, leaf_worker_lease_fleet_check, leaf_worker_lease_pick TO leaf_node;
]);
}

my %running;

sub sf_node
{
	my ($name, $alloc) = @_;
	my $port = $alloc->port;
	my $node = LeafTest::new_node($name, { max_worker_processes => undef, start => 0 },
		"leaf.worker_id_source = 'database'",
		"leaf.alloc_conninfo = 'host=127.0.0.1 port=$port dbname=postgres user=leaf_node connect_timeout=2'",
		"leaf.snowflake_layout = '41+2+12'",
		"leaf.node_address = '$name.example:5432'",
		"leaf.heartbeat_interval = '500ms'",
		"leaf.max_clock_drift_ms = '${drift_ms}ms'",
		"leaf.wait_timeout = '1s'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION leaf');
	$running{$name} = 1;
	return $node;
}

sub status
{
	my ($node) = @_;
	my ($ready, $wid, $reason) = split /\|/,
	  LeafTest::sf_status($node,
		"coalesce(ready, false), coalesce(worker_id::text, ''), coalesce(not_ready_reason, '')"),
	  3;
	return ($ready eq 't', $wid, $reason // '');
}

# Waits until $node's reason matches $re, or until it serves; returns
# (serves, reason)
sub held_back
{
	my ($node, $re, $secs) = @_;
	my ($ready, $wid, $reason);
	LeafTest::wait_until(
		sub {
			($ready, $wid, $reason) = status($node);
			return $ready || $reason =~ $re;
		},
		$node->name . ' to be held back or to serve',
		$secs // 120);
	note $node->name . ($ready ? " serves with worker ID $wid" : " does not serve: $reason");
	return ($ready, $reason);
}

# Waits until subscription $name in $db of $node has synchronised its
# tables; returns whether it did
sub synchronised
{
	my ($node, $db, $name) = @_;
	return $node->poll_query_until($db, qq[
	SELECT count(*) > 0 AND bool_and(r.srsubstate IN ('r', 's'))
	  FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid
	 WHERE s.subname = '$name']);
}

# Disables subscription $name in $db of $node and waits until its apply
# worker is gone; returns whether it is
sub disabled
{
	my ($node, $db, $name) = @_;
	$node->safe_psql($db, "ALTER SUBSCRIPTION $name DISABLE");
	return $node->poll_query_until($db, qq[
	SELECT count(*) = 0 FROM pg_stat_subscription WHERE subname = '$name' AND pid IS NOT NULL]);
}

my ($a, $b, $c);

# 4. no two serving nodes hold one worker ID
sub distinct_holders
{
	my ($when) = @_;
	my %by;
	my @seen;
	for my $n (grep { defined $_ && $running{ $_->name } } $a, $b, $c)
	{
		my ($ready, $wid) = status($n);
		push @seen, $n->name . ($ready ? " serves with worker ID $wid" : ' does not serve');
		push @{ $by{$wid} }, $n->name if $ready;
	}
	my @shared = map { "worker ID $_ is held by " . join(' and ', @{ $by{$_} }) }
	  grep { @{ $by{$_} } > 1 } sort keys %by;
	is(join('; ', @shared), '', "$when: no two serving nodes hold one worker ID")
	  or diag join('; ', @seen);
	return;
}

# 4. the IDs of the serving nodes, taken at once for 1.5 s each, recorded
# per millisecond and worker ID (shift 12: the sequence bits); no ID of
# one node is also an ID of another, in this round or any earlier one
my %cover;    # node name => { ms and worker ID => [ [lo, hi], ... ] }

sub read_cover
{
	my ($node) = @_;
	my %c;
	my $rows = $node->safe_psql('postgres',
		q[SELECT ms, lo, hi FROM cover]);
	for (split /\n/, $rows)
	{
		my ($k, $lo, $hi) = split /\|/;
		push @{ $c{$k} }, [ $lo, $hi ];
	}
	$cover{ $node->name } = \%c;
	return;
}

sub repeats
{
	my ($rep, $where, $first) = (0, '', undef);
	my @names = sort keys %cover;
	for my $i (0 .. $#names)
	{
		for my $j ($i + 1 .. $#names)
		{
			my ($ci, $cj) = ($cover{ $names[$i] }, $cover{ $names[$j] });
			for my $k (keys %$ci)
			{
				next unless $cj->{$k};
				for my $ri (@{ $ci->{$k} })
				{
					for my $rj (@{ $cj->{$k} })
					{
						my $lo = $ri->[0] > $rj->[0] ? $ri->[0] : $rj->[0];
						my $hi = $ri->[1] < $rj->[1] ? $ri->[1] : $rj->[1];
						next if $hi < $lo;
						$rep += $hi - $lo + 1;
						next if defined $first && $first <= $k;
						$first = $k;
						$where = sprintf('%s and %s, worker ID %d, first in ms %d',
							$names[$i], $names[$j], $k & 3, $k >> 2);
					}
				}
			}
		}
	}
	return ($rep, $where);
}

sub take_ids
{
	my ($when) = @_;
	my @serving = grep {
		defined $_ && $running{ $_->name } && (status($_))[0]
	} $a, $b, $c;
	my @gens = map { LeafTest::sf_start_cover($_, 1.5, 12) } @serving;
	$_->[0]->finish for @gens;
	read_cover($_) for @serving;
	my ($rep, $where) = repeats();
	is($rep, 0, "$when: the IDs of " . join(', ', map { $_->name } @serving)
		  . ' and those taken before repeat none of another node\'s')
	  or diag "$rep IDs repeated: $where";
	return;
}

# ---------------------------------------------------------------------
# 1. the publisher, node a, the subscriber
# ---------------------------------------------------------------------
$a = sf_node('a', $pub);
ok(LeafTest::sf_wait_ready($a), 'node a, on the publisher, serves');
is((status($a))[1], '0', '... with worker ID 0');

$pub->safe_psql('postgres', 'CREATE PUBLICATION leaf_pub FOR ALL TABLES');
# by a superuser, as the test's user is
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION leaf_sub CONNECTION '" . $pub->connstr
	  . " dbname=postgres' PUBLICATION leaf_pub");
ok(synchronised($sub, 'postgres', 'leaf_sub'), 'the subscription has synchronised its tables');
ok( $sub->poll_query_until('postgres', q[
	SELECT count(*) = 1 FROM leaf_worker_lease
	 WHERE worker_id = 0 AND holder_address = 'a.example:5432']),
	'the subscriber has the row of a');
is($sub->safe_psql('postgres', 'SELECT fleet_id FROM leaf_worker_lease_fleet'),
	$pub->safe_psql('postgres', 'SELECT fleet_id FROM leaf_worker_lease_fleet'),
	'... and the publisher\'s fleet');
distinct_holders('1');

# ---------------------------------------------------------------------
# 2. b on the subscriber, c on the publisher
# ---------------------------------------------------------------------
$b = sf_node('b', $sub);
my ($ready, $reason) = held_back($b, qr/written by logical replication/);
ok(!$ready, '2: node b, on the subscriber, does not serve while the subscription is enabled')
  or diag 'b serves with worker ID ' . (status($b))[1];
like($reason, qr/written by logical replication/, '2: ... and says that logical replication writes the table there');

$c = sf_node('c', $pub);
ok(LeafTest::sf_wait_ready($c), '2: node c, on the publisher, serves');
is((status($c))[1], '1', '2: ... with worker ID 1');
ok(!(status($b))[0], '2: b still does not serve');
distinct_holders('2');
take_ids('2');

# ---------------------------------------------------------------------
# 3. the subscription disabled
# ---------------------------------------------------------------------
ok(disabled($sub, 'postgres', 'leaf_sub'), '3: the subscription is disabled, its apply worker gone');
isnt($sub->safe_psql('postgres', 'SELECT count(*) FROM leaf_alloc_replicated'), '0',
	'3: leaf_alloc_replicated records the logical replication');
# a few heartbeats for b to act on it
Time::HiRes::sleep(1.5);
($ready, $reason) = held_back($b, qr/written by logical replication/);
ok(!$ready, '3: with the subscription disabled, b still does not serve')
  or diag 'b serves with worker ID ' . (status($b))[1];
like($reason, qr/written by logical replication/, '3: ... and says why');
distinct_holders('3');
take_ids('3');

# ---------------------------------------------------------------------
# 5. the cut-over
# ---------------------------------------------------------------------
my ($state, $err) = LeafTest::sqlstate($sub, 'postgres',
	q[SELECT * FROM leaf_alloc_cutover('leaf_sub')]);
is($state, '55000', '5: leaf_alloc_cutover() is refused while a and c hold worker IDs on the publisher');
like($err, qr/worker ID/, '5: ... and the message says so') or diag $err;
distinct_holders('5, after the refused cut-over');

# a clean stop ends a lease
for my $n ($a, $c)
{
	read_cover($n) if $n->safe_psql('postgres', q[SELECT to_regclass('cover') IS NOT NULL]) eq 't';
	$n->stop;
	delete $running{ $n->name };
}
is($pub->safe_psql('postgres',
	'SELECT count(*) FROM leaf_worker_lease WHERE expires_at > clock_timestamp()'),
	'0', '5: a and c stopped cleanly: no lease is live on the publisher');
# (a lease ended at a clean stop may still count for the clock drift: the
# cut-over may be called again for a few seconds)
LeafTest::wait_until(
	sub {
		($state, $err) = LeafTest::sqlstate($sub, 'postgres',
			q[SELECT * FROM leaf_alloc_cutover('leaf_sub')]);
		return !defined $state || $state ne '55000' || $err !~ /worker ID/;
	},
	'the cut-over once a and c stopped', 60);
is($state, undef, '5: then leaf_alloc_cutover() succeeds') or diag $err;
ok(LeafTest::sf_wait_ready($b, 120), '5: b, on the subscriber, serves after the cut-over');
my $wb = (status($b))[1];
note "b serves with worker ID $wb";
distinct_holders('5, after the cut-over');
take_ids('5, after the cut-over');

# c, started again on the publisher, which the cut-over fenced
$c->start;
$running{c} = 1;
($ready, $reason) = held_back($c, qr/moved/);
ok(!$ready, '5: c, started again on the publisher, does not serve')
  or diag 'c serves with worker ID ' . (status($c))[1];
like($reason, qr/moved/, '5: ... and says that the table of worker IDs moved');
# a few heartbeats: it does not start serving later
Time::HiRes::sleep(1.5);
ok(!(status($c))[0], '5: c still does not serve');
distinct_holders('5, c started again');
take_ids('5, c started again');

# ---------------------------------------------------------------------
# 6. switching back
# ---------------------------------------------------------------------
$sub->safe_psql('postgres', 'CREATE PUBLICATION leaf_pub_back FOR ALL TABLES');
$pub->safe_psql('postgres',
	"CREATE SUBSCRIPTION leaf_back CONNECTION '" . $sub->connstr
	  . " dbname=postgres' PUBLICATION leaf_pub_back WITH (copy_data = false)");
$b->stop;
delete $running{b};
$sub->wait_for_catchup('leaf_back');
ok(disabled($pub, 'postgres', 'leaf_back'), '6: the reverse subscription is disabled');
LeafTest::wait_until(
	sub {
		($state, $err) = LeafTest::sqlstate($pub, 'postgres',
			q[SELECT * FROM leaf_alloc_cutover('leaf_back')]);
		return !defined $state || $state ne '55000' || $err !~ /worker ID/;
	},
	'the cut-over back once b stopped', 60);
is($state, undef, '6: leaf_alloc_cutover() on the publisher takes the fleet back') or diag $err;
is($pub->safe_psql('postgres', 'SELECT moved_to IS NULL FROM leaf_worker_lease_fleet'),
	't', '6: ... and clears the mark of the move there');
isnt($sub->safe_psql('postgres', 'SELECT moved_to FROM leaf_worker_lease_fleet'),
	'', '6: ... and fences the former subscriber');
ok(LeafTest::sf_wait_ready($c, 120), '6: c serves on the publisher again');
$b->start;
$running{b} = 1;
($ready, $reason) = held_back($b, qr/moved/);
ok(!$ready, '6: b, started again on the former subscriber, does not serve')
  or diag 'b serves with worker ID ' . (status($b))[1];
distinct_holders('6');
take_ids('6');
$b->stop;
delete $running{b};

# ---------------------------------------------------------------------
# 7. an overload of leaf_copy_status() by the owner of the schema
# ---------------------------------------------------------------------
$pub->safe_psql('postgres', q[
CREATE ROLE schema_owner LOGIN;
GRANT CREATE ON SCHEMA public TO schema_owner;
SET ROLE schema_owner;
CREATE FUNCTION public.leaf_copy_status(x integer DEFAULT 0) RETURNS integer
	LANGUAGE sql AS 'SELECT 1';
RESET ROLE;
]);
($state, $err) = LeafTest::sqlstate($pub, 'postgres', 'SELECT * FROM leaf_copy_status()');
is($state, '42725', '7: a call of leaf_copy_status() by name is ambiguous now');
# a restart takes the worker ID again, through the view
$c->restart;
ok(LeafTest::sf_wait_ready($c, 120), '7: c takes its worker ID again and serves');
Time::HiRes::sleep(1.5);
ok((status($c))[0], '7: ... and renews it');
$pub->safe_psql('postgres', 'DROP FUNCTION public.leaf_copy_status(integer)');

# ---------------------------------------------------------------------
# 8. a subscription of leaf_alloc alone
# ---------------------------------------------------------------------
$sub->safe_psql('postgres', 'CREATE DATABASE counters');
$sub->safe_psql('counters', 'CREATE EXTENSION leaf');
$pub->safe_psql('postgres', 'CREATE PUBLICATION leaf_pub_alloc FOR TABLE leaf_alloc');
$sub->safe_psql('counters',
	"CREATE SUBSCRIPTION leaf_sub_alloc CONNECTION '" . $pub->connstr
	  . " dbname=postgres' PUBLICATION leaf_pub_alloc");
ok(synchronised($sub, 'counters', 'leaf_sub_alloc'), '8: the subscription of leaf_alloc has synchronised');
ok(disabled($sub, 'counters', 'leaf_sub_alloc'), '8: ... and is disabled');
ok((status($c))[0], '8: c holds a worker ID on the publisher');
($state, $err) = LeafTest::sqlstate($sub, 'counters',
	q[SELECT * FROM leaf_alloc_cutover('leaf_sub_alloc')]);
is($state, undef, '8: the cut-over of leaf_alloc alone does not wait for c') or diag $err;
is($pub->safe_psql('postgres', 'SELECT moved_to IS NULL FROM leaf_worker_lease_fleet'),
	't', '8: ... nor fences the publisher\'s table of worker IDs');
Time::HiRes::sleep(1.5);
ok((status($c))[0], '8: c goes on serving');

# ---------------------------------------------------------------------
# 9. a subscription of leaf_worker_lease alone, dropped
# ---------------------------------------------------------------------
$pub->safe_psql('postgres', 'CREATE PUBLICATION leaf_pub_lease FOR TABLE leaf_worker_lease');
$sub->safe_psql('counters',
	"CREATE SUBSCRIPTION leaf_sub_lease CONNECTION '" . $pub->connstr
	  . " dbname=postgres' PUBLICATION leaf_pub_lease");
ok( $sub->poll_query_until('counters', q[
	SELECT count(*) > 0 FROM leaf_worker_lease WHERE holder_address = 'c.example:5432']),
	'9: the subscription of leaf_worker_lease copied the row of c');
$sub->safe_psql('counters', q[
ALTER SUBSCRIPTION leaf_sub_lease DISABLE;
ALTER SUBSCRIPTION leaf_sub_lease SET (slot_name = NONE);
DROP SUBSCRIPTION leaf_sub_lease;
]);
$pub->safe_psql('postgres', q[SELECT pg_drop_replication_slot('leaf_sub_lease')]);
my $cutover_lease = "SELECT * FROM leaf_alloc_cutover('leaf_sub_lease', publisher => '"
  . $pub->connstr . " dbname=postgres')";
($state, $err) = LeafTest::sqlstate($sub, 'counters', $cutover_lease);
is($state, '55000', '9: the cut-over is refused while c holds its copied worker ID');
like($err, qr/worker ID/, '9: ... and says so') or diag $err;
$c->stop;
delete $running{c};
($state, $err) = LeafTest::sqlstate($sub, 'counters', $cutover_lease);
is($state, undef, '9: once c stopped, the cut-over succeeds') or diag $err;
isnt($pub->safe_psql('postgres', 'SELECT moved_to FROM leaf_worker_lease_fleet'),
	'', '9: ... and fences the publisher\'s table of worker IDs');

# ---------------------------------------------------------------------
# 10. leaf_worker_lease_confirm() in a renamed schema
# ---------------------------------------------------------------------
$sub->safe_psql('counters', q[
ALTER SCHEMA public RENAME TO leafs;
CREATE SCHEMA public;
CREATE TABLE public.decoy_ran (x int);
CREATE FUNCTION public.decoy() RETURNS bigint LANGUAGE sql
	AS 'INSERT INTO public.decoy_ran VALUES (1) RETURNING 1::bigint';
CREATE VIEW public.leaf_copy_identity AS
	SELECT public.decoy() AS system_identifier, 1::bigint AS data_directory,
		   1::bigint AS timeline, 1::oid AS database_oid, false AS in_recovery;
CREATE TABLE public.leaf_worker_lease_timeline (LIKE leafs.leaf_worker_lease_timeline);
]);
($state, $err) = LeafTest::sqlstate($sub, 'counters', 'SELECT leafs.leaf_worker_lease_confirm()');
is($state, undef, '10: leaf_worker_lease_confirm() in the renamed schema') or diag $err;
is($sub->safe_psql('counters', q[
	SELECT (SELECT count(*) FROM public.decoy_ran) || '/'
		|| (SELECT count(*) FROM public.leaf_worker_lease_timeline) || '/'
		|| (SELECT count(*) FROM leafs.leaf_worker_lease_timeline t, leafs.leaf_copy_identity i
			 WHERE (t.system_identifier, t.timeline, t.data_directory, t.database_oid)
				 = (i.system_identifier, i.timeline, i.data_directory, i.database_oid))]),
	'0/0/1', '10: ... recorded this copy in leaf\'s table, and ran nothing under the old name');

$_->stop for grep { $running{ $_->name } } $b, $c;
$sub->stop;
$pub->stop;
note sprintf('the file took %.0f s', Time::HiRes::time() - $t_start);
done_testing();
