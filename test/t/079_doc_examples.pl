
# Copyright (c) leaf contributors

# The SQL examples of the pages a new user reads first (README.md,
# docs/segment.md, docs/adopt.md, docs/public-ids.md) run as written: each
# fenced ```sql block, in the order of its page, against a server that
# preloads leaf with a worker ID set by hand, as the demo server of
# ./install.sh does, and a key for public IDs.  A page's blocks share one database, which has the
# extension, so that a block may use what an earlier one made.
#
# A line of HTML just before a block's fence (not shown by a Markdown
# viewer) changes that:
#
#   <!-- doc-example: skip: REASON -->  not run: a fragment (with "..."), a
#                                       signature, or a step that needs
#                                       what one server cannot show
#   <!-- doc-example: new database -->  run in a database of its own
#                                       without the extension (a block that
#                                       creates it)
#   <!-- doc-example: setup: SQL -->    SQL run first, in the page's
#                                       database (a table the example
#                                       assumes)
#
# A block that fails fails the file, named by its page and line, with
# psql's error.  A statement whose line ends in a comment of numbers
# alone ("-- 1", "-- 3 | 10002 | 10000: one call", the words after a
# colon aside) must print them, as the page says it does.
use strict;
use warnings;

use Cwd;
use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = Cwd::getcwd();
my @pages = qw(README.md docs/segment.md docs/adopt.md docs/public-ids.md);

# The ```sql blocks of a page: [ line of the fence, directive, text ]
sub sql_blocks
{
	my ($page) = @_;
	my @blocks;
	my ($in, $start, $text, $directive, $last) = (0, 0, '', '', '');
	my $n = 0;

	open my $fh, '<', "$top/$page" or die "cannot read $page: $!";
	while (my $line = <$fh>)
	{
		$n++;
		if (!$in && $line =~ /^```sql\s*$/)
		{
			($in, $start, $text) = (1, $n, '');
			$directive =
			  $last =~ /^<!-- doc-example: (.*?) -->\s*$/ ? $1 : '';
			die "$page:$start: unknown doc-example directive \"$directive\""
			  if $directive ne ''
			  && $directive !~ /^(skip: .+|new database|setup: .+)$/;
			next;
		}
		if ($in && $line =~ /^```\s*$/)
		{
			push @blocks, [ $start, $directive, $text ];
			$in = 0;
			next;
		}
		if ($in)
		{
			$text .= $line;
		}
		elsif ($line =~ /\S/)
		{
			$last = $line;
		}
	}
	close $fh;
	die "$page:$start: a ```sql block that does not end" if $in;
	return @blocks;
}

# a worker ID for snowflake mode, and a key for public IDs (read at each
# call, so it may come after the start)
# The block with a psql \echo after each line that ends a statement, and
# what the statements ending on such lines must print, by their number
# (none for a block with a dollar-quoted body, whose lines may end in
# ";" within a statement)
sub with_marks
{
	my ($sql) = @_;
	my (@lines, %expect);
	my $n = 0;

	return ($sql, {}) if $sql =~ /\$\$/;
	for my $line (split /\n/, $sql)
	{
		push @lines, $line;
		next unless $line =~ /;\s*(?:--\s*(.*?))?\s*$/;
		my $comment = $1 // '';
		$n++;
		$expect{$n} = $1 =~ s/\s*\|\s*/|/gr
		  if $comment =~ /^(\d+(?:\s*\|\s*\d+)*)(?:\s*:.*)?$/;
		push @lines, "\\echo \@\@mark $n";
	}
	return (join("\n", @lines) . "\n", \%expect);
}

my $node = LeafTest::new_node('doc_examples', { worker_id => 1 },
	"leaf.public_id_key_file = 'leaf_public_id.key'");
my $key = $node->data_dir . '/leaf_public_id.key';
PostgreSQL::Test::Utils::append_to_file($key, 'ab' x 32);
chmod 0600, $key or die "chmod $key: $!";
ok(LeafTest::sf_wait_ready($node), 'the snowflake generator is ready');

my $dbs = 0;
for my $page (@pages)
{
	my @blocks = sql_blocks($page);
	my ($ran, $skipped) = (0, 0);
	my $db = 'doc_' . ++$dbs;

	ok(@blocks > 0, "$page has SQL examples");
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION leaf');
	for my $block (@blocks)
	{
		my ($line, $directive, $sql) = @$block;
		my $where = $db;

		if ($directive =~ /^skip: (.*)$/)
		{
			note "$page:$line not run: $1";
			$skipped++;
			next;
		}
		if ($directive eq 'new database')
		{
			$where = 'doc_' . ++$dbs;
			$node->safe_psql('postgres', "CREATE DATABASE $where");
		}
		if ($directive =~ /^setup: (.*)$/)
		{
			$node->safe_psql($where, $1);
		}
		my ($marked, $expect) = with_marks($sql);
		my ($ret, $out, $err) = (0, '', '');
		$ret = $node->psql(
			$where, $marked,
			stdout => \$out,
			stderr => \$err,
			on_error_stop => 1);
		is($ret, 0, "$page:$line runs") or diag "$page:$line failed:\n$err";
		$ran++;

		# what each statement printed, up to its mark
		my %printed;
		my $from = 0;
		while ($out =~ /^\@\@mark (\d+)$/mg)
		{
			my ($k, $start, $end) = ($1, $-[0], $+[0]);

			$printed{$k} = substr($out, $from, $start - $from) =~ s/^\n+|\n+\z//gr;
			$from = $end + 1;
		}
		for my $k (sort { $a <=> $b } keys %$expect)
		{
			is($printed{$k}, $expect->{$k},
				"$page:$line: statement $k prints what the page says");
		}
	}
	ok($ran > $skipped, "$page: more of its examples run ($ran) than not ($skipped)");
}

done_testing();
