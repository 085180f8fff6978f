# A leaf setting given at server start whose value is rejected (out of
# range, not a number, not a valid epoch) stops the server from starting,
# with a FATAL that names it, instead of a WARNING and the default.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('settings', { max_worker_processes => undef, extension => 0 });
$node->stop;

my @bad = (
	[ 'leaf.max_tags',           '5',        qr/5 is outside the valid range for parameter "leaf\.max_tags" \(16 \.\. 1000000\)/ ],
	[ 'leaf.max_databases',      '0',        qr/outside the valid range for parameter "leaf\.max_databases"/ ],
	[ 'leaf.wait_timeout',       '0',        qr/outside the valid range for parameter "leaf\.wait_timeout"/ ],
	[ 'leaf.heartbeat_interval', "'lots'",   qr/invalid value for parameter "leaf\.heartbeat_interval"/ ],
	[ 'leaf.snowflake_epoch',    "'yesterday'", qr/invalid value for parameter "leaf\.snowflake_epoch"/ ]);

for my $b (@bad)
{
	my ($name, $value, $warning) = @$b;
	$node->append_conf('postgresql.conf', "$name = $value\n");
	my $offset = -s $node->logfile;
	ok(!$node->start(fail_ok => 1), "the server does not start with $name = $value");
	my $log = slurp_file($node->logfile, $offset);
	like($log, $warning, "the log says what is wrong with $name");
	(my $bare = $value) =~ s/'//g;
	like($log, qr/FATAL:  invalid value for parameter "\Q$name\E": "\Q$bare\E"/,
		"a FATAL names $name");
	# take the line out again
	my $conf = slurp_file($node->data_dir . '/postgresql.conf');
	$conf =~ s/^\Q$name = $value\E\n//m;
	open my $fh, '>', $node->data_dir . '/postgresql.conf' or die $!;
	print $fh $conf;
	close $fh;
}

# valid values, with units, start as before
$node->append_conf('postgresql.conf', "leaf.max_tags = 16\nleaf.wait_timeout = '2s'\nleaf.heartbeat_interval = '1s'\n");
ok($node->start(fail_ok => 1), 'the server starts with valid values');
is($node->safe_psql('postgres', 'SHOW leaf.wait_timeout'), '2s', 'and uses them');
$node->stop;
done_testing();
