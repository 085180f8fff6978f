#!/usr/bin/perl
#
# test/chaos/check.pl: check every ID the clients of a fault-injection run
# received.
#
#   check.pl RUN_DIR [README]
#
# Reads RUN_DIR/ids/*.ids (one file per client, see client.pl),
# RUN_DIR/faults.tsv (one line per fault: start_ms end_ms kind target
# outcome) and RUN_DIR/logs/*.log (server logs), prints one table and
# writes RUN_DIR/summary (key value lines).  Exits 1 if the promise was
# broken: a duplicate, an ID at or below an earlier one of the same client
# and tag, a failed call whose SQLSTATE is neither documented in README nor
# a lost connection, or a server that crashed on its own.
#
use strict;
use warnings;

use File::Basename;
use File::Temp qw(tempdir);

my ($run, $readme) = @ARGV;
die "usage: $0 RUN_DIR [README]\n" unless defined $run && -d $run;
$readme //= dirname($0) . '/../../README.md';

# ---------- documented SQLSTATEs ----------

my %documented;
if (open my $r, '<', $readme)
{
	while (<$r>)
	{
		# LF codes anywhere, core codes where the errors table names them
		$documented{$1} = 1 while /\b(LF\d{3})\b/g;
		$documented{$1} = 1 if /^\|\s*`([0-9A-Z]{5})`\s*\|/;
	}
	close $r;
}
# a lost or refused connection, and the server going down under the client
my %connection = map { $_ => 1 } qw(conn 08000 08001 08003 08004 08006 57P01 57P02 57P03);

# ---------- the IDs ----------

my @files = sort glob("$run/ids/*.ids");
my $tmp = tempdir(CLEANUP => 1);
open my $keys, '>', "$tmp/keys" or die $!;

my (%mode_times, %error_examples, %ids_per_mode, %errors, %order_breaks, @order_examples, %times, %first);
my $nfile = 0;
for my $f (@files)
{
	my $name = basename($f, '.ids');
	my ($shard) = $name =~ /^shard(\d+)/;
	$shard //= 0;
	my %last;
	open my $in, '<', $f or die "$f: $!";
	while (my $line = <$in>)
	{
		chomp $line;
		my ($t0, $t, $tag, $rest) = split / /, $line, 4;
		next unless defined $rest;
		if ($tag eq 'ERR')
		{
			my ($state) = split / /, $rest, 2;
			$error_examples{$state} //= "$name: $rest";
			$errors{$state}++;
			next;
		}
		next unless $rest =~ /^-?\d+$/;
		my $mode = $tag eq '~sf' ? 'snowflake' : 'segment';
		$ids_per_mode{$mode}++;
		# ids of one client and tag come in the order they were received
		if (defined $last{$tag} && $rest <= $last{$tag})
		{
			$order_breaks{$mode}++;
			push @order_examples, "$name: $tag $rest after $last{$tag}"
			  if @order_examples < 5;
		}
		$last{$tag} = $rest;
		# duplicates: within a tag for segments, over everything for snowflake
		printf $keys "%s %020d %d\n", $tag, $rest, $nfile;
		if ($shard)
		{
			# when IDs came, and the first answer to calls made from a time on
			$times{$shard}{ int($t / 10) } = 1;
			$mode_times{$mode}{$shard}{ int($t / 10) } = 1;
			my $b = int($t0 / 10);
			$first{$shard}{$b} = $t
			  if !defined $first{$shard}{$b} || $t < $first{$shard}{$b};
		}
	}
	close $in;
	$nfile++;
}
close $keys;

my %dups;
my @dup_examples;
{
	local $ENV{LC_ALL} = 'C';
	open my $sorted, '-|', 'sort', '-S', '25%', '-T', $tmp, "$tmp/keys" or die $!;
	my ($ptag, $pid, $pfile) = ('', '', -1);
	while (my $line = <$sorted>)
	{
		my ($tag, $id, $file) = split / /, $line;
		chomp $file;
		if ($tag eq $ptag && $id eq $pid)
		{
			my $mode = $tag eq '~sf' ? 'snowflake' : 'segment';
			$dups{$mode}++;
			push @dup_examples,
			  sprintf("%s %d in %s and %s", $tag eq '~sf' ? 'snowflake' : "tag $tag",
				$id, basename($files[$pfile]), basename($files[$file]))
			  if @dup_examples < 5;
		}
		($ptag, $pid, $pfile) = ($tag, $id, $file);
	}
	close $sorted;
}

# ---------- faults ----------

my (%faults, %recovery, %pause, @unrecovered);
my %bucket_list = map { $_ => [ sort { $a <=> $b } keys %{ $times{$_} } ] } keys %times;
my %mode_list;
for my $m (keys %mode_times)
{
	$mode_list{$m}{$_} = [ sort { $a <=> $b } keys %{ $mode_times{$m}{$_} } ]
	  for keys %{ $mode_times{$m} };
}
my @shards = sort { $a <=> $b } keys %bucket_list;

# calls by start bucket, with the earliest answer to any call started in
# that bucket or later (a suffix minimum)
my (%start_list, %answer_from);
for my $s (keys %first)
{
	my @b = sort { $a <=> $b } keys %{ $first{$s} };
	my @m = map { $first{$s}{$_} } @b;
	for (my $i = $#m - 1; $i >= 0; $i--)
	{
		$m[$i] = $m[ $i + 1 ] if $m[ $i + 1 ] < $m[$i];
	}
	$start_list{$s} = \@b;
	$answer_from{$s} = \@m;
}

# index of the first element of the sorted list at or after $v
sub lower_bound
{
	my ($l, $v) = @_;
	my ($lo, $hi) = (0, scalar @$l);
	while ($lo < $hi)
	{
		my $mid = int(($lo + $hi) / 2);
		if ($l->[$mid] < $v) { $lo = $mid + 1 } else { $hi = $mid }
	}
	return $lo;
}

my @fault_lines;
if (open my $fl, '<', "$run/faults.tsv")
{
	@fault_lines = grep { defined((split /\t/)[3]) } map { chomp; $_ } <$fl>;
	close $fl;
}
for my $n (0 .. $#fault_lines)
{
	{
		my ($start, $end, $kind, $target) = split /\t/, $fault_lines[$n];
		# a pause is put down to the fault after which it began: the
		# window ends when the next fault begins, after 30 s at most
		my $window_end = $start + 30000;
		if ($n < $#fault_lines)
		{
			my ($next) = split /\t/, $fault_lines[ $n + 1 ];
			$window_end = $next if $next < $window_end;
		}
		$faults{$kind}++;
		my @affected = $target =~ /^shard(\d+)$/ ? ($1) : @shards;
		my $worst = 0;
		my %worst_pause = (segment => 0, snowflake => 0);
		for my $s (@affected)
		{
			# the first ID answered to a call made after the fault was done
			my $i = lower_bound($start_list{$s} // [], int($end / 10));
			if ($i >= @{ $start_list{$s} // [] })
			{
				push @unrecovered, "$kind on shard$s at $start";
				next;
			}
			my $wait = $answer_from{$s}[$i] - $end;
			$worst = $wait if $wait > $worst;

			# per mode, the longest pause between IDs in the 30 s after it began
			for my $m (keys %worst_pause)
			{
				my $l = $mode_list{$m}{$s} // [];
				my $j = lower_bound($l, int($start / 10));
				my $prev = int($start / 10);
				my $stop = int($window_end / 10);
				while ($j < @$l && $prev <= $stop)
				{
					$worst_pause{$m} = ($l->[$j] - $prev) * 10
					  if ($l->[$j] - $prev) * 10 > $worst_pause{$m};
					$prev = $l->[$j++];
				}
			}
		}
		$recovery{$kind} = $worst if !defined $recovery{$kind} || $worst > $recovery{$kind};
		for my $m (keys %worst_pause)
		{
			$pause{$kind}{$m} = $worst_pause{$m}
			  if !defined $pause{$kind}{$m} || $worst_pause{$m} > $pause{$kind}{$m};
		}
	}
}

# ---------- servers ----------

my @crashes;
for my $log (sort glob("$run/logs/*.log"))
{
	open my $l, '<', $log or next;
	while (<$l>)
	{
		if (/terminated by signal (\d+)/ && $1 != 9
			|| /terminated by exception/
			|| /\bPANIC:/)
		{
			chomp;
			push @crashes, basename($log) . ": $_";
		}
	}
	close $l;
}
if (open my $d, '<', "$run/down")
{
	while (<$d>) { chomp; push @crashes, "not running at the end: $_" }
	close $d;
}

# ---------- the table ----------

my @unexplained = grep { !$documented{$_} && !$connection{$_} } sort keys %errors;
my $failed = (sum(values %dups) > 0) || (sum(values %order_breaks) > 0)
  || @unexplained || @crashes;

my @out;
push @out, sprintf("%-44s %s", 'check', 'result');
push @out, '-' x 70;
for my $mode (qw(segment snowflake))
{
	push @out, sprintf("%-44s %d", "IDs checked, $mode", $ids_per_mode{$mode} // 0);
}
for my $mode (qw(segment snowflake))
{
	push @out, sprintf("%-44s %d", "duplicates, $mode (must be 0)", $dups{$mode} // 0);
}
push @out, "    $_" for @dup_examples;
for my $mode (qw(segment snowflake))
{
	push @out, sprintf("%-44s %d", "order breaks, $mode (must be 0)", $order_breaks{$mode} // 0);
}
push @out, "    $_" for @order_examples;
push @out, sprintf("%-44s %d", 'faults injected', sum(values %faults));
push @out, sprintf("    %-26s %4s  %9s %9s %9s", 'kind', 'n', 'next ID', 'seg.pause', 'sf.pause');
for my $k (sort keys %faults)
{
	push @out, sprintf("    %-26s %4d  %9s %9s %9s", $k, $faults{$k},
		map { defined $_ ? sprintf('%.2f s', $_ / 1000) : '-' }
		  $recovery{$k}, $pause{$k}{segment}, $pause{$k}{snowflake});
}
push @out, "    no ID after: $_" for @unrecovered;
push @out, sprintf("%-44s %d", 'failed calls', sum(values %errors));
for my $s (sort keys %errors)
{
	my $why = $connection{$s} ? 'connection lost or refused'
	  : $documented{$s} ? 'documented leaf error'
	  : 'UNEXPLAINED';
	push @out, sprintf("    %-26s %9d   (%s)", $s, $errors{$s}, $why);
	push @out, '        e.g. ' . substr($error_examples{$s}, 0, 150) if $why eq 'UNEXPLAINED';
}
push @out, sprintf("%-44s %s", 'servers that crashed on their own (must be 0)', scalar @crashes);
push @out, "    $_" for @crashes[ 0 .. ($#crashes < 4 ? $#crashes : 4) ];
push @out, '-' x 70;
push @out, $failed ? 'RESULT: the promise was broken' : 'RESULT: every ID unique, in order, every failure explained';
print "$_\n" for @out;

open my $sum, '>', "$run/summary" or die $!;
printf $sum "ids_segment %d\nids_snowflake %d\n", $ids_per_mode{segment} // 0, $ids_per_mode{snowflake} // 0;
printf $sum "duplicates %d\norder_breaks %d\n", sum(values %dups), sum(values %order_breaks);
printf $sum "faults %d\nfault_kinds %d\nunexplained %d\ncrashes %d\nunrecovered %d\n",
  sum(values %faults), scalar(keys %faults), scalar @unexplained, scalar @crashes, scalar @unrecovered;
close $sum;
open my $tbl, '>', "$run/table.txt" or die $!;
print $tbl "$_\n" for @out;
close $tbl;

exit($failed ? 1 : 0);

sub sum
{
	my $s = 0;
	$s += $_ for @_;
	return $s;
}
