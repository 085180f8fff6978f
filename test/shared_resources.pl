#!/usr/bin/perl
#
# shared_resources.pl [TOPDIR]: what leaf shares between the databases of
# a server, read from the C sources of TOPDIR/src (the current directory
# by default), for test/t/303_shared_server.pl, which attacks each.  One
# resource a line, sorted:
#
#   setting NAME CONTEXT   a setting of leaf defined PGC_POSTMASTER (sized
#                          or started once, at server start), or named
#                          leaf.max_* whatever its context (a pool or a
#                          share of one); CONTEXT is the PGC_ word, lower
#                          case
#   shmem NAME             a struct or hash of shared memory
#                          (ShmemInitStruct, ShmemInitHash)
#   worker TYPE            a kind of background worker (its bgw_type),
#                          static or dynamic
#
# What cannot be named so is still listed, so that the test fails on it
# rather than miss it: a setting, shared memory or worker registered with
# a name that is not a string literal ("setting ?FILE", "shmem ?FILE",
# "worker ?FILE"), and shared memory that is not sized at server start
# (DSM, DSA, dshash: "shmem dynamic:FILE").
#
use strict;
use warnings;

my $top = $ARGV[0] // '.';
my @files = sort(glob("$top/src/*.c"), glob("$top/src/*/*.c"));
die "no C source under $top/src\n" unless @files;

my %out;
for my $path (@files)
{
	(my $file = $path) =~ s{^\Q$top\E/}{};
	open my $fh, '<', $path or die "$path: $!\n";
	local $/;
	my $text = <$fh>;
	close $fh;

	# comments out, string literals kept
	$text =~ s{("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|/\*.*?\*/|//[^\n]*}
			  {defined $1 ? $1 : ' '}gse;

	# settings: the arguments of the whole call (strings and parentheses
	# inside it skipped)
	while ($text =~ /\bDefineCustom\w+Variable\s*\(((?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^()"']|(\((?:[^()]|(?-1))*\)))*)\)/gs)
	{
		my $args = $1;
		if ($args !~ /^\s*"([^"]+)"/)
		{
			$out{"setting ?$file"} = 1;
			next;
		}
		my $name = $1;
		my ($context) = $args =~ /\bPGC_(\w+)\b/;
		$context = defined $context ? lc $context : '?';
		$out{"setting $name $context"} = 1
		  if $context eq 'postmaster' || $context eq '?' || $name =~ /^leaf\.max_/;
	}

	# shared memory of fixed size
	while ($text =~ /\bShmemInit(?:Struct|Hash)\s*\(\s*("[^"]*"|[^,]*)/g)
	{
		my $arg = $1;
		$out{ $arg =~ /^"(.*)"$/ ? "shmem $1" : "shmem ?$file" } = 1;
	}

	# shared memory of no fixed size
	$out{"shmem dynamic:$file"} = 1
	  if $text =~ /\b(dsm_create|dsa_create\w*|dshash_create|GetNamedDSMSegment|GetNamedDSA|GetNamedDSHash)\s*\(/;

	# workers: each registration needs a bgw_type of its own in the file
	my $registrations = () =
	  $text =~ /\bRegister(?:Dynamic)?BackgroundWorker\s*\(/g;
	my @types = $text =~ /\bbgw_type\s*,\s*BGW_MAXLEN\s*,\s*"([^"]+)"/g;
	$out{"worker $_"} = 1 for @types;
	$out{"worker ?$file"} = 1 if $registrations > @types;
}
print "$_\n" for sort keys %out;
