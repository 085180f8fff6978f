# Copyright (c) leaf contributors

# The registry of copies (test/copy_matrix) names every piece of state
# leaf keeps, so that no way of copying one is left untested by mistake:
#  - every table of extension leaf, as a fresh installation has them
#    (pg_depend, deptype 'e', relkind 'r' or 'p') and as the scripts in
#    src/ create them;
#  - every file leaf writes in a data directory: the string constants of
#    src/**/*.c and *.h that name a file (a LEAF_*_FILE, LEAF_*_TMP or
#    LEAF_*_PATH define, or any LEAF_* define whose value looks like a
#    file name), the string literals passed to the calls that open,
#    rename or remove a file, and the constants those calls name;
#  - every ZooKeeper folder leaf writes under leaf.zk_root (the names
#    src/snowflake/leaf_zk_client.c gives them).
# The registry names no state that is gone, every state's probe is
# declared, every probe has a cell for every operation, cells run by
# test/t/301_copy_matrix.pl are of the probes and clauses it runs, and
# every cell placed in a test file has the line "# copy-matrix: <probe>
# <op>" there (and every such line a cell).
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $registry = 'test/copy_matrix';
my $m = LeafTest::copy_matrix($registry);
is_deeply($m->{errors}, [], "$registry reads") or diag join("\n", @{ $m->{errors} });

my %listed;    # "kind name" => the state line
for my $s (@{ $m->{states} })
{
	my $k = "$s->{kind} $s->{name}";
	ok(!$listed{$k}, "$k is listed once") or next;
	$listed{$k} = $s;
}

sub slurp_all { return map { slurp_file($_) } @_; }

# ---------------------------------------------------------------- tables

my $node = LeafTest::new_node('complete', { max_worker_processes => undef });
my %tables = map { $_ => 'installed' } split /\n/, $node->safe_psql('postgres', q[
SELECT c.relname
  FROM pg_depend d
  JOIN pg_class c ON c.oid = d.objid
 WHERE d.classid = 'pg_class'::regclass
   AND d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'leaf')
   AND d.deptype = 'e'
   AND c.relkind IN ('r', 'p')
 ORDER BY 1]);
$node->stop;
cmp_ok(scalar(keys %tables), '>=', 8, 'a fresh installation has the tables of extension leaf')
  or diag join(', ', sort keys %tables);
my @scripts = glob('src/leaf--*.sql');
ok(@scripts, 'the extension scripts are found in src/');
for my $f (@scripts)
{
	for (split /\n/, slurp_file($f))
	{
		next unless /^\s*CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:\@extschema\@\.)?"?(\w+)"?/i;
		$tables{$1} //= "created in $f";
	}
}
for my $t (sort keys %tables)
{
	ok($listed{"table $t"}, "table $t ($tables{$t}) has a state line in $registry")
	  or diag "add: state table $t <probe>";
}

# ---------------------------------------------------------------- files

my @sources = (glob('src/*.c'), glob('src/*.h'), glob('src/*/*.c'), glob('src/*/*.h'));
ok(@sources, 'the C sources are found in src/');
my (%define, %files);
for my $f (@sources)
{
	my $text = slurp_file($f);
	# a define of a string: its name and value
	while ($text =~ /^[ \t]*#[ \t]*define[ \t]+(LEAF_\w+)[ \t]+"((?:[^"\\]|\\.)*)"/mg)
	{
		my ($name, $value) = ($1, $2);
		$define{$name} = $value;
		$files{$value} = "$name in $f"
		  if $name =~ /_(FILE|TMP|PATH)\b|_(FILE|TMP|PATH)_/
		  || $value =~ /^[A-Za-z_][\w.-]*\.[A-Za-z][\w.-]*$/;
	}
}
# the calls that open, rename or remove a file: their path (and the new
# path of a rename)
my $file_call = qr/\b(AllocateFile|OpenTransientFile|OpenTransientFilePerm|BasicOpenFile|BasicOpenFilePerm|PathNameOpenFile|PathNameOpenFilePerm|durable_rename|durable_unlink|unlink|fopen|open|rename)\s*\(\s*([^,()]+)(?:,\s*([^,()]+))?/;
for my $f (@sources)
{
	my $text = slurp_file($f);
	while ($text =~ /$file_call/g)
	{
		my ($call, @args) = ($1, $2);
		push @args, $3 if $call =~ /rename/ && defined $3;
		for my $arg (@args)
		{
			$arg =~ s/^\s+|\s+$//g;
			if ($arg =~ /^"((?:[^"\\]|\\.)*)"$/)
			{
				$files{$1} //= "a literal $call() takes in $f";
			}
			elsif ($arg =~ /^LEAF_\w+$/)
			{
				# whatever its name: a file it is
				ok(defined $define{$arg},
					"$arg, which $f passes to $call(), is a string define the check reads")
				  or next;
				$files{ $define{$arg} } //= "$arg, passed to $call() in $f";
			}
		}
	}
	# any literal that is a file name of leaf's own (not an #include)
	for my $line (grep { !/^\s*#\s*include/ } split /\n/, $text)
	{
		while ($line =~ /"(leaf_[\w-]*\.[\w.-]+)"/g)
		{
			my $name = $1;
			$files{$name} //= "a literal in $f" unless $name =~ /\.[ch]$/;
		}
	}
}
cmp_ok(scalar(keys %files), '>=', 2, 'the files leaf writes are found in src/')
  or diag join(', ', sort keys %files);
for my $name (sort keys %files)
{
	ok($listed{"file $name"}, "file $name ($files{$name}) has a state line in $registry")
	  or diag "add: state file $name <probe>";
}

# ---------------------------------------------------------------- ZooKeeper

my %zk;
my $zk_src = slurp_file('src/snowflake/leaf_zk_client.c');
$zk{$1} = 1 while $zk_src =~ /\[\s*LEAF_ZK_\w+\s*\]\s*=\s*"([^"]+)"/g;
cmp_ok(scalar(keys %zk), '>=', 1, 'the ZooKeeper folders are found in src/snowflake/leaf_zk_client.c');
for my $name (sort keys %zk)
{
	ok($listed{"zk $name"}, "ZooKeeper folder $name has a state line in $registry")
	  or diag "add: state zk $name <probe>";
}

# ---------------------------------------------------------------- no stale state

my %known = (table => \%tables, file => \%files, zk => \%zk);
for my $k (sort keys %listed)
{
	my $s = $listed{$k};
	ok($known{ $s->{kind} }{ $s->{name} }, "$k (line $s->{line}) is state leaf keeps");
	ok($m->{probes}{ $s->{probe} }, "$k: its probe $s->{probe} is declared");
}
my %probe_used = map { $_->{probe} => 1 } @{ $m->{states} };
for my $p (@{ $m->{probe_order} })
{
	ok($probe_used{$p}, "probe $p probes some state");
}

# ---------------------------------------------------------------- cells

my %cell;
my %markers_wanted;    # file => { "probe op" => 1 }
my @gaps;
for my $c (@{ $m->{cells} })
{
	my $k = "$c->{probe} $c->{op}";
	my $at = "cell $k (line $c->{line})";
	ok($m->{probes}{ $c->{probe} }, "$at: probe $c->{probe} is declared");
	ok($m->{ops}{ $c->{op} }, "$at: operation $c->{op} is declared");
	ok(!$cell{$k}, "$at: the only cell of $k") or next;
	$cell{$k} = $c;
	my @what = map { $_->{what} } @{ $c->{outcome} };
	my $not_copied = grep { $_ eq 'not_copied' } @what;
	ok(!$not_copied || @what == 1, "$at: not_copied stands alone");
	my %where = map { $_ => 1 } @{ $c->{where} };
	if ($where{'-'})
	{
		ok($not_copied && keys(%where) == 1, "$at: '-' only for a state not copied");
		next;
	}
	if ($where{none})
	{
		ok(keys(%where) == 1, "$at: 'none' stands alone");
		push @gaps, "$k: $c->{text}";
		next;
	}
	if ($where{matrix})
	{
		ok($LeafTest::copy_matrix_runtime{ $c->{probe} },
			"$at: test/t/301_copy_matrix.pl runs probe $c->{probe}");
		for my $cl (@{ $c->{outcome} })
		{
			ok($LeafTest::copy_matrix_runtime_clause{"$cl->{who} $cl->{what}"},
				"$at: test/t/301_copy_matrix.pl checks \"$cl->{text}\"");
		}
		my @holds = grep { $c->{outcome}[$_]{what} =~ /^(hold|never)$/ } 0 .. $#{ $c->{outcome} };
		ok(!grep({ $_ == $#{ $c->{outcome} } || $c->{outcome}[ $_ + 1 ]{what} ne 'serves' } @holds),
			"$at: a hold (or never) is followed by serves");
	}
	for my $w (grep { $_ ne 'matrix' } sort keys %where)
	{
		if (!ok($w =~ m{^test/t/\d+_\w+\.pl$} && -f $w, "$at: $w is a test file"))
		{
			next;
		}
		$markers_wanted{$w}{$k} = 1;
	}
}
for my $p (@{ $m->{probe_order} })
{
	for my $o (@{ $m->{op_order} })
	{
		ok($cell{"$p $o"}, "probe $p has a cell for operation $o");
	}
}

# the markers, both ways
my %markers_found;
for my $f (glob('test/t/*.pl'))
{
	for (split /\n/, slurp_file($f))
	{
		next unless /^#\s*copy-matrix:\s*(.*?)\s*$/;
		my $k = $1;
		ok($k =~ /^\w+ \w+$/ && $cell{$k}, "$f: its marker \"$k\" names a cell");
		$markers_found{$f}{$k} = 1;
	}
}
for my $f (sort keys %markers_wanted)
{
	for my $k (sort keys %{ $markers_wanted{$f} })
	{
		ok($markers_found{$f}{$k}, "$f has the marker of cell $k")
		  or diag "add to its header: # copy-matrix: $k";
	}
}
for my $f (sort keys %markers_found)
{
	for my $k (sort keys %{ $markers_found{$f} })
	{
		next unless $cell{$k};
		ok(grep({ $_ eq $f } @{ $cell{$k}{where} }),
			"$f: the cell $k names it");
	}
}

diag scalar(@gaps) . " cells no test covers:\n  " . join("\n  ", @gaps) if @gaps;

done_testing();
