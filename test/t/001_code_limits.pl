# Copyright (c) leaf contributors

# The limits of CONTRIBUTING.md that a reader of a diff misses, kept by
# reading the tree (no server):
#  - no C function of src/ (every folder, .c and .h) is over 100 lines,
#    _PG_init aside: from the line of its opening brace to the line of its
#    closing one, found by the braces of the code itself (comments, string
#    and character literals left out; of an #if, its first branch only),
#    so that the layout of a definition does not matter;
#  - no Perl file under test/ (TAP files and helpers) finds its helpers
#    with FindBin: prove runs from the top of the tree with -I test/lib,
#    and paths are relative to it;
#  - a pgTAP file (sql/*_tap.sql, and any SQL file under test/ that uses
#    pgTAP) calls pg_sleep only inside a poll: a function, procedure or
#    DO block that tests a condition (WHILE, EXIT WHEN, IF ... RETURN)
#    and raises an error at its bound.  A pg_sleep elsewhere waits for a
#    fixed time rather than for the state the test needs;
#  - no TAP file or helper outside test/lib builds a server by hand
#    (PostgreSQL::Test::Cluster's new, init or init_from_backup, or
#    initdb): LeafTest's new_node, new_node_from_backup and
#    new_node_from_data_dir make every node, so that each gets the same
#    settings and a test says only what it changes.
# Each failure names every offender with its file and line.
use strict;
use warnings;

use File::Find;
use Test::More;

# the files under $dir (relative to the top of the tree) whose names
# match $re, sorted
sub files_under
{
	my ($dir, $re) = @_;
	my @f;
	return () unless -d $dir;
	find({ no_chdir => 1, wanted => sub { push @f, $_ if -f $_ && $_ =~ $re; } }, $dir);
	return sort @f;
}

sub slurp
{
	my ($path) = @_;
	open my $fh, '<', $path or die "$path: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

# ---------------------------------------------------------------- C

# $text with its comments, string literals and character literals made
# blanks (newlines kept, so that line numbers stay)
sub c_code_only
{
	my ($text) = @_;
	my $blank = sub { (my $s = $_[0]) =~ s/[^\n]/ /g; return $s; };
	$text =~ s{
		(/\*.*?\*/)                 # block comment
	  | (//[^\n]*)                  # line comment
	  | ("(?:[^"\\\n]|\\.)*")       # string literal
	  | ('(?:[^'\\\n]|\\.)*')       # character literal
	}{ defined $1 ? $blank->($1) : defined $2 ? $blank->($2)
	   : defined $3 ? '"' . $blank->(substr($3, 1, -1)) . '"'
	   : "'" . $blank->(substr($4, 1, -1)) . "'" }gsex;
	return $text;
}

# $code without its preprocessor lines, and of each #if only the first
# branch (the others made blank lines): the braces of a definition that
# differs between majors are then counted once
sub c_first_branches
{
	my ($code) = @_;
	my @lines = split /\n/, $code, -1;
	my @skip;    # per open #if: true while in a branch after the first
	my $cont = 0;
	for my $l (@lines)
	{
		my $directive = $cont || $l =~ /^\s*#/;
		my $was_cont = $cont;
		$cont = $directive && $l =~ /\\\s*$/;
		if ($directive && !$was_cont)
		{
			if ($l =~ /^\s*#\s*if/) { push @skip, 0; }
			elsif ($l =~ /^\s*#\s*(elif|else)\b/) { $skip[-1] = 1 if @skip; }
			elsif ($l =~ /^\s*#\s*endif\b/) { pop @skip; }
		}
		$l = '' if $directive || grep { $_ } @skip;
	}
	return join("\n", @lines);
}

# The function definitions of C source $text: a list of { name, line (of
# the name), open, close (lines of the braces), lines }
sub c_functions
{
	my ($text) = @_;
	my $code = c_first_branches(c_code_only($text));
	my (@funcs, $depth, $line, $header, $header_line, $open);
	($depth, $line, $header) = (0, 1, '');
	for my $ch (split //, $code)
	{
		if ($ch eq "\n")
		{
			$line++;
		}
		if ($depth == 0)
		{
			if ($ch eq '{')
			{
				$open = $line;
				$depth = 1;
				my $f = c_definition($header);
				push @funcs, { name => $f, open => $open, line => $header_line->{$f} // $open }
				  if defined $f;
				$header = '';
				$header_line = {};
				next;
			}
			if ($ch eq ';' || $ch eq '}')
			{
				$header = '';
				$header_line = {};
				next;
			}
			$header .= $ch;
			# the line each identifier of the header was first seen on
			if ($ch eq '(' && $header =~ /(\w+)\s*\($/)
			{
				$header_line->{$1} //= $line - (() = $& =~ /\n/g);
			}
			next;
		}
		if ($ch eq '{')
		{
			$depth++;
		}
		elsif ($ch eq '}')
		{
			$depth--;
			if ($depth == 0 && @funcs && !defined $funcs[-1]{close} && $funcs[-1]{open} == $open)
			{
				$funcs[-1]{close} = $line;
				$funcs[-1]{lines} = $line - $open + 1;
			}
		}
	}
	return grep { defined $_->{close} } @funcs;
}

# the name of the function whose definition has header $h (the text from
# the end of the previous declaration to the opening brace), or undef if
# the brace opens something else (an initializer, a struct, an enum)
sub c_definition
{
	my ($h) = @_;
	return undef if $h =~ /=\s*$/ || $h !~ /\)\s*$/;
	# the last identifier called at parenthesis depth 0: the function's
	# name, after any attribute macro
	my ($depth, $name) = (0, undef);
	while ($h =~ /(\w+)?\s*([()])/g)
	{
		if ($2 eq '(')
		{
			$name = $1 if $depth == 0 && defined $1;
			$depth++;
		}
		else
		{
			$depth--;
		}
	}
	return undef if !defined $name || $name =~ /^(if|while|for|switch|sizeof|return)$/;
	return $name;
}

# the measure itself, on a definition laid out every way it may be
{
	my $sample = join("\n",
		'/* a comment with a brace { */',
		'static const int leaf_tab[] = {1, 2};',
		'struct leaf_s',
		'{',
		'	int a;',
		'};',
		'static int',
		'leaf_f(int a)',
		'{',
		'	const char *s = "}";',
		"	char c = '{';",
		'#if PG_VERSION_NUM >= 170000',
		'	if (a) {',
		'#else',
		'	if (!a) {',
		'#endif',
		'		a++;',
		'	}',
		'	return a;',
		'}',
		'pg_attribute_unused() static int leaf_g(void) {',
		'	return 0; }',
		'');
	my @f = c_functions($sample);
	is_deeply([ map { "$_->{name} $_->{line} $_->{lines}" } @f ],
		[ 'leaf_f 8 12', 'leaf_g 21 2' ],
		'the measure of a function: its name, its line and its lines from brace to brace');
}

my @c_files = files_under('src', qr/\.[ch]$/);
ok(scalar(@c_files) > 20, 'the C files of src/ are found (' . scalar(@c_files) . ')');
my ($n_funcs, @long) = (0);
for my $f (@c_files)
{
	for my $fn (c_functions(slurp($f)))
	{
		$n_funcs++;
		next if $fn->{name} eq '_PG_init' || $fn->{lines} <= 100;
		push @long, "$f:$fn->{line}: $fn->{name} is $fn->{lines} lines";
	}
}
ok($n_funcs > 200, "the C functions of src/ are found ($n_funcs)");
is(scalar(@long), 0, 'no C function of src/ is over 100 lines (_PG_init aside)')
  or diag join("\n", 'over 100 lines:', @long);

# ---------------------------------------------------------------- Perl

# the lines of a Perl file, with its comments and POD blanked
sub perl_code_lines
{
	my ($path) = @_;
	my @lines = split /\n/, slurp($path), -1;
	my $pod = 0;
	for my $l (@lines)
	{
		if ($l =~ /^=(\w+)/)
		{
			$pod = $1 ne 'cut';
			$l = '';
			next;
		}
		$l = '' if $pod || $l =~ /^\s*#/;
	}
	return @lines;
}

# "file:line: text" of every code line of @files that matches $re
sub offenders
{
	my ($re, @files) = @_;
	my @o;
	for my $f (@files)
	{
		my $n = 0;
		for my $l (perl_code_lines($f))
		{
			$n++;
			push @o, "$f:$n: " . ($l =~ s/^\s+//r) if $l =~ $re;
		}
	}
	return @o;
}

my @perl = files_under('test', qr/\.(pl|pm|t)$/);
ok(scalar(@perl) > 50, 'the Perl files of test/ are found (' . scalar(@perl) . ')');
my $findbin = 'Find' . 'Bin';    # not named here as such
my @findbin = offenders(qr/\b$findbin\b/, @perl);
is(scalar(@findbin), 0, "no Perl file under test/ uses $findbin (paths are relative to the top of the tree)")
  or diag join("\n", "$findbin:", @findbin);

# outside test/lib, no server is made by hand
my $by_hand = qr{
	PostgreSQL::Test::Cluster\s*(?:->\s*new\b|::new\b)
  | ->\s*init(?:_from_backup)?\s*(?:\(|;)
  | \binit[d]b\b
}x;
my @outside_lib = grep { !m{^test/lib/} } @perl;
ok(scalar(grep { m{^test/t/} } @outside_lib) > 50, 'the TAP files of test/t are found');
my @hand = offenders($by_hand, @outside_lib);
is(scalar(@hand), 0, 'no TAP file or helper outside test/lib builds a server by hand (LeafTest does)')
  or diag join("\n", 'by hand:', @hand);

# ---------------------------------------------------------------- pgTAP

my @pgtap = (glob('sql/*_tap.sql'),
	grep { slurp($_) =~ /\bpgtap\b|\bplan\s*\(|\bno_plan\s*\(/i } files_under('test', qr/\.sql$/));
ok(scalar(@pgtap) > 0, 'the pgTAP files are found (' . join(', ', @pgtap) . ')');

# The pg_sleep calls of SQL text $sql that are not inside a poll, as
# line numbers.  A poll is a dollar-quoted body that tests a condition and
# raises an error at its bound.
sub fixed_sleeps
{
	my ($sql) = @_;
	my @out;
	my $pos = 0;
	# the dollar-quoted bodies, by their offsets
	my @bodies;
	while ($sql =~ /(\$(\w*)\$)(.*?)\1/gs)
	{
		push @bodies, [ $-[3], $+[3], $3 ];
	}
	while ($sql =~ /\bpg_sleep(?:_for|_until)?\s*\(/gi)
	{
		my $at = $-[0];
		my ($body) = grep { $_->[0] <= $at && $at < $_->[1] } @bodies;
		my $poll = $body
		  && $body->[2] =~ /\bRAISE\s+EXCEPTION\b/i
		  && $body->[2] =~ /\bWHILE\b|\bEXIT\s+WHEN\b|\bIF\b[^;]*\bTHEN\s+RETURN\b/is;
		next if $poll;
		push @out, 1 + (() = substr($sql, 0, $at) =~ /\n/g);
	}
	return @out;
}

{
	my $sample = join("\n",
		'SELECT pg_sleep(0.1);',
		'CREATE FUNCTION pg_temp.w() RETURNS void LANGUAGE plpgsql AS $$',
		'DECLARE d timestamptz := clock_timestamp() + interval \'5 s\';',
		'BEGIN',
		'	WHILE NOT cond() LOOP',
		'		IF clock_timestamp() > d THEN RAISE EXCEPTION \'timed out\'; END IF;',
		'		PERFORM pg_sleep(0.01);',
		'	END LOOP;',
		'END $$;',
		'DO $$ BEGIN FOR i IN 1..10 LOOP PERFORM pg_sleep(0.01); END LOOP; END $$;',
		'');
	is_deeply([ fixed_sleeps($sample) ], [ 1, 10 ],
		'a pg_sleep outside a poll is found, one inside a poll is not');
}

my @sleeps;
for my $f (@pgtap)
{
	push @sleeps, map { "$f:$_: pg_sleep outside a poll" } fixed_sleeps(slurp($f));
}
is(scalar(@sleeps), 0, 'no pgTAP file waits a fixed time with pg_sleep (it polls for a condition)')
  or diag join("\n", 'fixed sleeps:', @sleeps);

done_testing();
