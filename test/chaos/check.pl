#!/usr/bin/perl
#
# test/chaos/check.pl: check every ID the clients of a fault-injection run
# received.
#
#   check.pl RUN_DIR [ERRORS]
#
# Reads RUN_DIR/ids/*.ids (one file per client, see client.pl),
# RUN_DIR/faults.tsv (one line per fault: start_ms end_ms kind target
# outcome), RUN_DIR/cuts.tsv if there is one (one line per partition
# once undone: start_ms end_ms kind target variant proxies) and
# RUN_DIR/logs/*.log (server logs), prints one table and
# writes RUN_DIR/summary (key value lines).  Exits 1 if the promise was
# broken: a duplicate, an ID at or below an earlier one of the same client
# and tag, a failed call whose SQLSTATE is neither documented in
# docs/errors.md (or the file named as ERRORS) nor a lost connection, or a
# server that crashed on its own.
#
use strict;
use warnings;

use File::Basename;
use File::Temp qw(tempdir);
use POSIX ();

my ($run, $readme) = @ARGV;
die "usage: $0 RUN_DIR [ERRORS]\n" unless defined $run && -d $run;
$readme //= dirname($0) . '/../../docs/errors.md';

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
# an internal error (XX000, listed for public IDs) is never an outcome a
# client may meet under faults
delete $documented{XX000};
# a lost or refused connection, and the server going down under the client
my %connection = map { $_ => 1 } qw(conn 08000 08001 08003 08004 08006 57P01 57P02 57P03);

# ---------- the IDs ----------

# One pass of awk over each client's file (two at a time), since a long
# run holds hundreds of millions of lines.  Per file it writes the IDs of
# each tag to a file of their own (in the order received, which must be
# increasing), and small summaries: counts, errors, order breaks, and
# 10 ms time buckets.  IDs are compared as strings of digits: awk's numbers
# are doubles, too coarse for 63-bit IDs.
my $awk = <<'AWK';
function later(a, b) {
	if (length(a) != length(b)) return length(a) > length(b)
	return (a "") > (b "")
}
NF >= 4 {
	if ($3 == "ERR") {
		err[$4]++
		if (!($4 in ex)) { ex[$4] = $0 }
		next
	}
	tag = $3; v = $4
	if (v !~ /^[0-9]+$/) next
	mode = (tag == "~sf") ? "snowflake" : "segment"
	ids[mode]++
	if ((tag in last) && !later(v, last[tag])) {
		ob[mode]++
		unsorted[tag] = 1
		if (nex < 5) { obex[++nex] = tag " " v " after " last[tag] }
	}
	last[tag] = v
	f = tag; gsub(/[^A-Za-z0-9_]/, "_", f)
	print v > (out "/" f ".ids")
	tags[f] = tag
	rb[mode " " sprintf("%.0f", int($2 / 10))] = 1
	sb = sprintf("%.0f", int($1 / 10))
	if (!(sb in fs) || $2 < fs[sb]) fs[sb] = $2
}
END {
	for (m in ids) print "ids", m, ids[m] > (out "/stats")
	for (m in ob) print "order", m, ob[m] > (out "/stats")
	for (i = 1; i <= nex; i++) print "orderex", obex[i] > (out "/stats")
	for (e in err) print "err", e, err[e], ex[e] > (out "/stats")
	for (f in tags) print "tag", f, tags[f], (tags[f] in unsorted) ? 1 : 0 > (out "/stats")
	for (k in rb) print "r", k > (out "/buckets")
	for (k in fs) print "f", k, fs[k] > (out "/buckets")
}
AWK

my @files = sort glob("$run/ids/*.ids");
my $tmp = tempdir(CLEANUP => 1);
open my $aw, '>', "$tmp/pass.awk" or die $!;
print $aw $awk;
close $aw;
my $awkbin = -x '/usr/bin/mawk' ? '/usr/bin/mawk' : 'awk';
{
	my @running;
	for my $n (0 .. $#files)
	{
		mkdir "$tmp/$n" or die $!;
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			exec($awkbin, '-v', "out=$tmp/$n", '-f', "$tmp/pass.awk", $files[$n])
			  or POSIX::_exit(127);
		}
		push @running, $pid;
		if (@running >= 2)
		{
			waitpid(shift(@running), 0);
			die "awk failed on a client file\n" if $? != 0;
		}
	}
	for (@running) { waitpid($_, 0); die "awk failed on a client file\n" if $? != 0; }
}

my (%mode_times, %error_examples, %ids_per_mode, %errors, %order_breaks, @order_examples, %times, %first);
my %tag_streams;    # file tag name => [ [file index, sorted?] ]
my %tag_name;
for my $n (0 .. $#files)
{
	my $name = basename($files[$n], '.ids');
	my ($shard) = $name =~ /^shard(\d+)/;
	$shard //= 0;
	if (open my $st, '<', "$tmp/$n/stats")
	{
		while (my $line = <$st>)
		{
			chomp $line;
			my ($what, @f) = split / /, $line;
			if ($what eq 'ids') { $ids_per_mode{ $f[0] } += $f[1] }
			elsif ($what eq 'order') { $order_breaks{ $f[0] } += $f[1] }
			elsif ($what eq 'orderex')
			{
				push @order_examples, "$name: " . join(' ', @f) if @order_examples < 5;
			}
			elsif ($what eq 'err')
			{
				my ($state, $count, @ex) = @f;
				$errors{$state} += $count;
				# the example line is "<t0> <t> ERR <state> <message>"
				my $msg = join(' ', @ex[ 4 .. $#ex ]);
				$error_examples{$state} //= "$name: $msg";
			}
			elsif ($what eq 'tag')
			{
				push @{ $tag_streams{ $f[0] } }, [ $n, !$f[2] ];
				$tag_name{ $f[0] } = $f[1];
			}
		}
		close $st;
	}
	next unless $shard;
	if (open my $bk, '<', "$tmp/$n/buckets")
	{
		while (my $line = <$bk>)
		{
			my ($what, $a, $b, $c) = split / /, $line;
			if ($what eq 'r')
			{
				$times{$shard}{$b} = 1;
				$mode_times{$a}{$shard}{$b} = 1;
			}
			else
			{
				$first{$shard}{$a} = $b
				  if !defined $first{$shard}{$a} || $b < $first{$shard}{$a};
			}
		}
		close $bk;
	}
}

# duplicates: per tag, merge the already increasing streams of every client
my %dups;
my @dup_examples;
{
	local $ENV{LC_ALL} = 'C';
	for my $f (sort keys %tag_streams)
	{
		my $tag = $tag_name{$f};
		my $mode = $tag eq '~sf' ? 'snowflake' : 'segment';
		my @paths;
		for my $s (@{ $tag_streams{$f} })
		{
			my $path = "$tmp/$s->[0]/$f.ids";
			# a stream that broke order (already reported) is sorted first
			system('sort', '-n', '-S', '10%', '-T', $tmp, '-o', $path, $path) == 0
			  or die "sort failed\n" unless $s->[1];
			push @paths, $path;
		}
		open my $d, '-|', 'sh', '-c',
		  'sort -m -n -S 10% -T "$0" "$@" | uniq -d', $tmp, @paths
		  or die $!;
		while (my $id = <$d>)
		{
			chomp $id;
			$dups{$mode}++;
			next if @dup_examples >= 5;
			my @where = map { basename($files[ $_->[0] ], '.ids') }
			  grep {
				system('grep', '-qx', '--', $id, "$tmp/$_->[0]/$f.ids") == 0
			  } @{ $tag_streams{$f} };
			push @dup_examples,
			  sprintf('%s %s in %s', $tag eq '~sf' ? 'snowflake' : "tag $tag",
				$id, join(' and ', @where));
		}
		close $d;
	}
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

# ---------- partitions ----------

# For one partition of a shard and one mode (the 10 ms buckets in which
# the shard answered IDs, sorted): how long it went on serving after the
# cut (to the start of its first pause of 1 s or more; undef if it had
# none before the cut was undone), in how many of the partition's whole
# seconds it answered IDs, and, if it was not serving when the cut was
# undone (no ID in the last second), the time from then to its next ID
# (undef if none came).
sub cut_figures
{
	my ($l, $start, $end) = @_;
	my ($from, $stop) = (int($start / 10), int($end / 10));
	my ($served, $prev, $j) = (undef, $from, lower_bound($l, $from));
	while ($prev < $stop)
	{
		my $next = $j < @$l ? $l->[ $j++ ] : undef;
		if (!defined $next || $next - $prev >= 100)
		{
			$served = $prev > $from ? ($prev * 10 - $start) / 1000 : 0;
			last;
		}
		$prev = $next;
	}
	my ($with, $secs) = (0, int(($stop - $from) / 100));
	for my $k (0 .. $secs - 1)
	{
		my $i = lower_bound($l, $from + 100 * $k);
		$with++ if $i < @$l && $l->[$i] < $from + 100 * ($k + 1);
	}
	my $back = 0;
	my $k = lower_bound($l, $stop);
	if ($k == 0 || $l->[ $k - 1 ] < $stop - 100)
	{
		$back = $k < @$l ? ($l->[$k] * 10 - $end) / 1000 : undef;
		$back = 0 if defined $back && $back < 0;
	}
	return ($served, $with, $secs, $back);
}

my (%cut_n, %cut_len, %cut_fig);
if (open my $cf, '<', "$run/cuts.tsv")
{
	while (my $line = <$cf>)
	{
		chomp $line;
		my ($start, $end, $kind, $target, $variant) = split /\t/, $line;
		next unless defined $variant && $target =~ /^shard(\d+)$/;
		my $key = "$kind $variant";
		$cut_n{$key}++;
		push @{ $cut_len{$key} }, ($end - $start) / 1000;
		for my $m (qw(segment snowflake))
		{
			push @{ $cut_fig{$key}{$m} },
			  [ cut_figures($mode_list{$m}{$1} // [], $start, $end) ];
		}
	}
	close $cf;
}

# ---------- servers ----------

# served: the generator became ready with it (whatever its source);
# held: the allocation database gave it (leaf.worker_id_source =
# 'database'), taken anew, back, or over
my (@crashes, %served, %held);
for my $log (sort glob("$run/logs/*.log"))
{
	open my $l, '<', $log or next;
	while (<$l>)
	{
		$served{ basename($log, '.log') }{$1} = 1
		  if /generator ready with worker ID (\d+)/;
		$held{ basename($log, '.log') }{$1} = 1
		  if /holds worker ID (\d+) in the allocation database/
		  || /took (?:over|back) worker ID (\d+)/;
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
if (%cut_n)
{
	push @out, 'partitions, by kind and variant: per mode, how long the shard served on after the';
	push @out, 'cut (to its first pause of 1 s or more; "to the end": none), the share of the';
	push @out, 'partition\'s seconds in which it answered IDs, and the longest wait for its next';
	push @out, 'ID after the cut was undone, where it was not serving then';
	push @out, sprintf("    %-30s %3s %11s  %-9s %-22s %-9s %s", 'kind and variant', 'n', 'length',
		'mode', 'served on', 'with IDs', 'next ID after');
	for my $key (sort keys %cut_n)
	{
		my @len = sort { $a <=> $b } @{ $cut_len{$key} };
		my $first = sprintf("    %-30s %3d %11s  ", $key, $cut_n{$key},
			sprintf('%.1f-%.1f s', $len[0], $len[-1]));
		for my $m (qw(segment snowflake))
		{
			my @f = @{ $cut_fig{$key}{$m} };
			my @served = sort { $a <=> $b } map { $_->[0] } grep { defined $_->[0] } @f;
			my $whole = grep { !defined $_->[0] } @f;
			my $on = @served ? sprintf('%.1f-%.1f s', $served[0], $served[-1]) : '';
			$on .= ($on ? ', ' : '') . ($whole == @f ? 'to the end' : "$whole to the end") if $whole;
			my @share = sort { $a <=> $b }
			  map { $_->[2] ? 100 * $_->[1] / $_->[2] : 100 } @f;
			my @back = map { $_->[3] } @f;
			my $never = grep { !defined } @back;
			my ($worst) = sort { $b <=> $a } grep { defined } @back;
			push @out, sprintf("%s%-9s %-22s %-9s %s", $first, $m, $on,
				sprintf('%.0f-%.0f %%', $share[0], $share[-1]),
				$never ? "none in $never" : sprintf('%.2f s', $worst // 0));
			$first = ' ' x length($first);
		}
	}
}
push @out, sprintf("%-44s %d", 'failed calls', sum(values %errors));
for my $s (sort keys %errors)
{
	my $why = $connection{$s} ? 'connection lost or refused'
	  : $documented{$s} ? 'documented leaf error'
	  : 'UNEXPLAINED';
	push @out, sprintf("    %-26s %9d   (%s)", $s, $errors{$s}, $why);
	push @out, '        e.g. ' . substr($error_examples{$s}, 0, 150) if $why eq 'UNEXPLAINED';
}
push @out, 'worker IDs served, from the logs';
push @out, sprintf("    %-26s %s", $_, join(', ', sort { $a <=> $b } keys %{ $served{$_} }))
  for sort keys %served;
if (%held)
{
	push @out, 'worker IDs held in the allocation database, from the logs';
	push @out, sprintf("    %-26s %s", $_, join(', ', sort { $a <=> $b } keys %{ $held{$_} }))
	  for sort keys %held;
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
