# The metrics of docs/monitoring.md through the exporters that read them:
# Debian's prometheus-postgres-exporter, with
# docs/monitoring/postgres_exporter.yaml as its query file, and
# prometheus-sql-exporter, with docs/monitoring/sql_exporter.yml, both
# logged in as a member of pg_monitor, scraped twice over HTTP while
# sessions take IDs: leaf's metrics are there, and the IDs handed out
# grow.  The views give the runway and the range as leaf_segments shows
# them, a refused load as refusing with its SQLSTATE (LF005) while the
# buffers still serve, and the node's layout (js53) with its horizon and
# the units of time whose sequence ran out.
# promtool checks the alert rules of docs/monitoring/leaf.rules.yml,
# and runs their unit tests.
#
# The exporters and promtool come from Debian's packages
# prometheus-postgres-exporter, prometheus-sql-exporter and prometheus
# (install.sh test and test/majors.sh install them); a missing one fails
# the file.
use strict;
use warnings;

use Cwd ();
use HTTP::Tiny;
use IPC::Run;
use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# prove runs from the top of the tree
my $top = Cwd::getcwd();
my $contrib = "$top/docs/monitoring";
my %bin = (
	postgres_exporter => '/usr/bin/prometheus-postgres-exporter',
	sql_exporter => '/usr/bin/prometheus-sql-exporter',
	promtool => '/usr/bin/promtool');
for my $b (sort keys %bin)
{
	ok(-x $bin{$b}, "$bin{$b} is installed")
	  or BAIL_OUT("$bin{$b} is missing: install Debian's package of it (see install.sh)");
}

# the exporters started here, stopped however the file ends
my @exporters;

END
{
	for my $h (@exporters)
	{
		eval { $h->kill_kill(grace => 2) if $h->pumpable; };
	}
}

my $node = LeafTest::new_node('metrics', 'leaf.worker_id = 3',
	"leaf.snowflake_layout = 'js53'");
$node->safe_psql(
	'postgres', q{
	CREATE ROLE leaf_watch LOGIN;
	GRANT pg_monitor TO leaf_watch;
	SELECT leaf_segment_create('order', step => 100);
	SELECT leaf_segment_create('low', step => 1000);
});
$node->safe_psql('postgres',
	"SELECT leaf_segment_nextval('order'), leaf_segment_nextval('low'), leaf_snowflake()"
);

# what the views say, as a member of pg_monitor, against leaf_segments
my $watch = 'SET ROLE leaf_watch; ';
is( $node->safe_psql(
		'postgres', $watch . q{
	SELECT m.ready, m.refusing, m.error_code IS NULL, m.ids_issued_total,
		   m.runway_ids = (s.segment_end - s.next_id + 1)
			 + CASE WHEN s.next_ready THEN s.next_segment_end - s.next_segment_start + 1 ELSE 0 END,
		   m.range_left_ids = 9223372036854775807::numeric - greatest(s.segment_end, s.next_segment_end)
	  FROM leaf_tag_metrics m JOIN leaf_segments s USING (database, biz_tag)
	 WHERE biz_tag = 'order'}),
	'1|0|t|1|t|t',
	'leaf_tag_metrics: ready, one ID handed out, runway and range as leaf_segments shows them'
);
is( $node->safe_psql(
		'postgres', $watch . q{
	SELECT snowflake_ready, worker_id, layout, snowflake_ids_issued_total,
		   layout_max_id < 2::numeric ^ 53,
		   timestamp_left_seconds BETWEEN 86400.0 * 365 AND 86400.0 * 365 * 70,
		   lease_left_seconds > 0, segment_tags, segment_tags_refusing
	  FROM leaf_node_metrics}),
	'1|3|41+6+6/1ms|1|t|t|t|2|0',
	'leaf_node_metrics: ready, worker ID 3, js53 below 2^53 with its horizon, two tags');

# a bulk call takes 64 IDs per ms under js53: the units of time whose
# sequence ran out are counted, each once
$node->safe_psql('postgres', 'SELECT count(*) FROM leaf_snowflake_nextvals(20000)');
my ($exhausted, $units) = split /\|/, $node->safe_psql('postgres', $watch . q{
	SELECT sequence_exhausted_total, snowflake_ids_issued_total / 64 FROM leaf_node_metrics});
ok($exhausted >= 100 && $exhausted <= $units,
	"units whose sequence ran out counted once each ($exhausted, at most $units)");

# A refused load while the buffers still serve: max_id lowered behind
# the guards, so the next load finds it below the segments held (LF005).
$node->safe_psql(
	'postgres', q{
	ALTER TABLE leaf_alloc DISABLE TRIGGER USER;
	UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'low';
	ALTER TABLE leaf_alloc ENABLE TRIGGER USER;
	ALTER TABLE leaf_alloc ENABLE ALWAYS TRIGGER leaf_alloc_replicated;
	ALTER TABLE leaf_alloc ENABLE ALWAYS TRIGGER leaf_alloc_replicated_truncate;
	SELECT count(leaf_segment_nextval('low')) FROM generate_series(1, 150);
});
$node->poll_query_until('postgres',
	"SELECT refusing = 1 FROM leaf_tag_metrics WHERE biz_tag = 'low'")
  or die 'the load of "low" was not refused';
is( $node->safe_psql(
		'postgres', $watch . q{
	SELECT refusing, error_code, ready, failed_refills_total >= 1
	  FROM leaf_tag_metrics WHERE biz_tag = 'low'}),
	'1|LF005|1|t',
	'a refused load shows as refusing with LF005 while the buffers still serve');
is($node->safe_psql('postgres', $watch . 'SELECT segment_tags_refusing FROM leaf_node_metrics'),
	'1', 'leaf_node_metrics counts the tag as refusing');

# load: two sessions taking IDs of "order" for the rest of the file
my $bench = LeafTest::start_pgbench($node, 'postgres',
	"SELECT leaf_segment_nextval('order');\n",
	[ '-c', 2, '-j', 2, '-T', 30 ]);

# a scrape: the lines of leaf's metrics, or '' while there are none
my $http = HTTP::Tiny->new(timeout => 10);

sub scrape
{
	my ($port) = @_;
	my $r = $http->get("http://127.0.0.1:$port/metrics");
	return '' unless $r->{success};
	return join '', grep { /^(?:sql_)?leaf_/ } split /^/m, $r->{content};
}

# the value of the first sample of metric whose labels match $labels_re
sub sample
{
	my ($text, $metric, $labels_re) = @_;
	for my $line (split /\n/, $text)
	{
		next unless $line =~ /^\Q$metric\E\{([^}]*)\}\s+(\S+)$/;
		my ($labels, $value) = ($1, $2);
		return $value + 0 if $labels =~ $labels_re;
	}
	return undef;
}

sub start_exporter
{
	my ($name, $cmd, $env) = @_;
	my $log = $node->basedir . "/$name.log";
	local %ENV = (%ENV, %$env);
	note 'running: ' . join(' ', @$cmd);
	my $h = IPC::Run::start($cmd, '<', \undef, '>>', $log, '2>>', $log);
	push @exporters, $h;
	return ($h, $log);
}

# two scrapes, a second apart, once the first shows the metrics
sub scrape_twice
{
	my ($name, $port, $log) = @_;
	my $first = '';
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		$first = scrape($port);
		last if $first =~ /leaf_tag_ids_issued_total\{[^}]*biz_tag="order"/;
		sleep 0.5;
	}
	ok($first ne '', "$name: leaf's metrics scraped")
	  or diag(slurp_file($log));
	sleep 1.5;
	return ($first, scrape($port));
}

# prometheus-postgres-exporter with the query file
my $dsn = sprintf('host=%s port=%d user=leaf_watch dbname=postgres sslmode=disable',
	$node->host, $node->port);
my $pe_port = PostgreSQL::Test::Cluster::get_free_port();
my ($pe, $pe_log) = start_exporter(
	'postgres_exporter',
	[
		$bin{postgres_exporter}, "--web.listen-address=127.0.0.1:$pe_port",
		"--extend.query-path=$contrib/postgres_exporter.yaml"
	],
	{ DATA_SOURCE_NAME => $dsn });
my ($s1, $s2) = scrape_twice('postgres_exporter', $pe_port, $pe_log);
note "postgres_exporter, second scrape:\n$s2";

my $order = qr/biz_tag="order"/;
my $v1 = sample($s1, 'leaf_tag_ids_issued_total', $order);
my $v2 = sample($s2, 'leaf_tag_ids_issued_total', $order);
ok(defined $v1 && defined $v2 && $v2 > $v1,
	'postgres_exporter: leaf_tag_ids_issued_total of "order" grows between scrapes ('
	  . ($v1 // 'none') . ' -> ' . ($v2 // 'none') . ')');
ok(sample($s2, 'leaf_tag_refills_total', $order) > 1,
	'postgres_exporter: refills of "order" counted');
for my $m (
	qw(leaf_tag_ready leaf_tag_refusing leaf_tag_failed_refills_total
	leaf_tag_waits_total leaf_tag_wait_max_seconds leaf_tag_runway_ids
	leaf_tag_step_ids leaf_tag_range_left_ids leaf_tag_last_refill_age_seconds))
{
	ok(defined sample($s2, $m, $order), "postgres_exporter: $m of \"order\"");
}
is(sample($s2, 'leaf_tag_error_current', qr/biz_tag="low".*code="LF005"|code="LF005".*biz_tag="low"/),
	1, 'postgres_exporter: leaf_tag_error_current names LF005 for "low"');
is(sample($s2, 'leaf_tag_refusing', qr/biz_tag="low"/),
	1, 'postgres_exporter: leaf_tag_refusing of "low"');
is(sample($s2, 'leaf_node_snowflake_ready', qr/layout="41\+6\+6\/1ms"/),
	1, 'postgres_exporter: leaf_node_snowflake_ready, with the layout');
for my $m (
	qw(leaf_node_worker_id leaf_node_snowflake_ids_issued_total
	leaf_node_backward_waits_total leaf_node_backward_errors_total
	leaf_node_sequence_exhausted_total leaf_node_heartbeat_age_seconds leaf_node_lease_left_seconds
	leaf_node_timestamp_left_seconds leaf_node_layout_max_id
	leaf_node_segment_tags leaf_node_segment_tags_refusing))
{
	ok(defined sample($s2, $m, qr/./), "postgres_exporter: $m");
}

# prometheus-sql-exporter with its configuration, the connection filled in
my $se_conf = slurp_file("$contrib/sql_exporter.yml");
my $url = sprintf('postgres://leaf_watch@:%d/postgres?host=%s&sslmode=disable',
	$node->port, $node->host);
$se_conf =~ s{'postgres://prometheus\@/postgres\?host=/var/run/postgresql&sslmode=disable'}{'$url'}
  or die "no connection to replace in sql_exporter.yml";
my $se_file = $node->basedir . '/sql_exporter.yml';
PostgreSQL::Test::Utils::append_to_file($se_file, $se_conf);
my $se_port = PostgreSQL::Test::Cluster::get_free_port();
my ($se, $se_log) = start_exporter(
	'sql_exporter',
	[
		$bin{sql_exporter}, '-config.file', $se_file,
		'-web.listen-address', "127.0.0.1:$se_port"
	],
	{});
($s1, $s2) = scrape_twice('sql_exporter', $se_port, $se_log);
note "sql_exporter, second scrape:\n$s2";
$v1 = sample($s1, 'sql_leaf_tag_ids_issued_total', $order);
$v2 = sample($s2, 'sql_leaf_tag_ids_issued_total', $order);
ok(defined $v1 && defined $v2 && $v2 > $v1,
	'sql_exporter: sql_leaf_tag_ids_issued_total of "order" grows between scrapes ('
	  . ($v1 // 'none') . ' -> ' . ($v2 // 'none') . ')');
is(sample($s2, 'sql_leaf_tag_error_current', qr/code="LF005"/),
	1, 'sql_exporter: sql_leaf_tag_error_current names LF005');
is(sample($s2, 'sql_leaf_node_snowflake_ready', qr/layout="41\+6\+6\/1ms"/),
	1, 'sql_exporter: sql_leaf_node_snowflake_ready, with the layout');

for my $h ($pe, $se)
{
	$h->kill_kill(grace => 2);
}
@exporters = ();

my $r = LeafTest::finish_pgbench($bench);
is($r->{rc}, 0, 'the load ran without errors') or diag($r->{err});

# the alert rules
my ($out, $err) = ('', '');
IPC::Run::run([ $bin{promtool}, 'check', 'rules', "$contrib/leaf.rules.yml" ],
	'>', \$out, '2>', \$err);
like($out, qr/SUCCESS: \d+ rules found/, 'promtool check rules accepts leaf.rules.yml')
  or diag("$out$err");
# their unit tests: each alert fires on the series it is for (run from
# the directory, which the test file names its rule file in)
($out, $err) = ('', '');
IPC::Run::run(
	[ $bin{promtool}, 'test', 'rules', 'leaf.rules.test.yml' ],
	'>', \$out, '2>', \$err,
	init => sub { chdir $contrib or die "chdir $contrib: $!"; });
like($out, qr/SUCCESS/, 'promtool test rules: the alerts fire as leaf.rules.test.yml expects')
  or diag("$out$err");

$node->stop;
done_testing();
