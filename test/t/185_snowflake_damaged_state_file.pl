# Snowflake mode with leaf.worker_id: a damaged state file (random bytes,
# truncated, empty) is not taken for a missing one.  The file is the only
# record of the last timestamp issued with a hand-set worker ID: served
# without it, a node whose clock is now behind would hand out the IDs of
# before the crash again.  After a crash and a damaged file, the node
# refuses to serve (LF102, with the reason and the way out).  Once the
# operator has moved the file away, it serves, above every earlier ID.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('sf_damaged', { worker_id => 7, max_worker_processes => undef },
	"leaf.heartbeat_interval = '500ms'",
	"leaf.wait_timeout = '2s'");
my $state_file = $node->data_dir . '/leaf_snowflake.state';

my @all;
my %damage = (
	'random bytes' => sub { open my $f, '>', $state_file or die; print $f join('', map { chr(int(rand(256))) } 1 .. 300); close $f },
	'truncated'    => sub { my $t = slurp_file($state_file); open my $f, '>', $state_file or die; print $f substr($t, 0, int(length($t) / 3)); close $f },
	'empty'        => sub { open my $f, '>', $state_file or die; close $f },
);
for my $kind (sort keys %damage)
{
	push @all, grep { /^\d+$/ } split /\n/,
	  $node->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(50000)');
	ok(-s $state_file, "$kind: the state file is there before the crash");
	$node->stop('immediate');
	$damage{$kind}->();
	$node->start;

	ok( $node->poll_query_until('postgres',
			q[SELECT not_ready_reason LIKE '%is damaged%' FROM leaf_snowflake_status]),
		"$kind: the node does not serve");
	my ($ready, $reason) = split /\|/,
	  $node->safe_psql('postgres', 'SELECT ready, not_ready_reason FROM leaf_snowflake_status');
	is($ready, 'f', "$kind: not ready");
	like($reason, qr/"leaf_snowflake\.state" is damaged, so the last timestamp issued with worker ID 7 is not known/,
		"$kind: the reason says why");
	like($reason, qr/move the file away and restart the snowflake worker/, "$kind: and what to do");
	my ($state) = LeafTest::sqlstate($node, 'postgres', 'SELECT leaf_snowflake()');
	is($state, 'LF102', "$kind: leaf_snowflake() fails with LF102");
	ok($node->log_contains(qr/leaf snowflake generator not ready: "leaf_snowflake\.state" is damaged/),
		"$kind: the log says so");

	# the way out: the file moved away, the snowflake worker restarted
	rename $state_file, "$state_file.damaged" or die;
	$node->safe_psql('postgres',
		q[SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'leaf snowflake worker']);
	ok($node->poll_query_until('postgres', 'SELECT ready FROM leaf_snowflake_status'),
		"$kind: serves again once the file is moved away");
	my @after = grep { /^\d+$/ } split /\n/,
	  $node->safe_psql('postgres', 'SELECT leaf_snowflake_nextvals(1000)');
	cmp_ok(LeafTest::min_of(@after), '>', LeafTest::max_of(@all),
		"$kind: above every earlier ID");
	push @all, @after;
	unlink "$state_file.damaged";
}
is(LeafTest::count_repeats(\@all), 0, '0 repeats over all the runs (' . scalar(@all) . ' IDs)');

$node->stop;
done_testing();
