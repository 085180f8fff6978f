#!/usr/bin/perl
#
# test/chaos/client.pl: one client of the fault-injection run.
#
#   client.pl --host H --port P --shard S --client C --seed N
#             --until EPOCH_SECONDS --out FILE [--mode segment|snowflake|mixed]
#             [--stop-file F]
#
# Connects to one shard and, until the given time or until the stop file
# exists, whichever comes first, calls leaf's generators
# at random: in segment mode leaf_segment_nextval on several tags and
# leaf_segment_nextvals; in snowflake mode leaf_snowflake() and
# leaf_snowflake_nextvals(); mixed does both, some of it inside
# transactions that are rolled back.  Every ID the client received is appended to FILE as
#
#   <call start> <call end> <tag> <id>     (tag "~sf" for snowflake IDs)
#
# and every failed call as
#
#   <call start> <call end> ERR <sqlstate or "conn"> <message>
#
# (times in ms since 1970)
#
# An ID counts once the client has it, whatever happens to its transaction
# afterwards.  A lost connection is opened again, as an application would.
#
use strict;
use warnings;

use DBI;
use File::Basename;
use Getopt::Long;
use Time::HiRes qw(time usleep);

use lib dirname(__FILE__) . '/../lib';
use LeafCallLog qw(now_ms);

my %o;
GetOptions(\%o, 'host=s', 'port=i', 'shard=i', 'client=i', 'seed=i',
	'until=f', 'out=s', 'tags=s', 'mode=s', 'stop-file=s')
  or die "usage: see the head of $0\n";
my @tags = split /,/, ($o{tags} // 'big,mid,small,phoenix');

srand($o{seed} * 1000 + $o{shard} * 10 + $o{client});
open my $out, '>>', $o{out} or die "$o{out}: $!";
binmode $out;

my $dbh;
my $t_call;
my $reconnect = 0;

sub record_error
{
	my ($h) = @_;
	# DBD::Pg reports a lost or refused connection with a state of its own
	# (08006 / S8006 / 08001) or none at all
	my $state = LeafCallLog::record_error($out, $t_call, $h,
		conn_state => qr/^S8/,
		conn_msg => qr/connection to server .* failed|the database system is (starting up|shutting down|in recovery)/);
	# the session is gone: open a new one before the next call
	$reconnect = 1 if $state eq 'conn' || $state =~ /^57P0/;
	return;
}

sub connect_shard
{
	$dbh = DBI->connect(
		"dbi:Pg:host=$o{host};port=$o{port};dbname=postgres;application_name=chaos",
		'', '',
		{ RaiseError => 0, PrintError => 0, AutoCommit => 1, pg_server_prepare => 1 });
	if (!$dbh)
	{
		print $out "$t_call ", now_ms(), " ERR conn ", ($DBI::errstr // '') =~ s/\s+/ /gr, "\n";
		return 0;
	}
	# a hang would be a bug: make it a visible error instead
	$dbh->do("SET statement_timeout = '30s'");
	return 1;
}

# Run one query, returning its first column's values, or undef on error.
sub ids_of
{
	my ($sql, @bind) = @_;
	my $rows = $dbh->selectcol_arrayref($sql, undef, @bind);
	if (!$rows)
	{
		record_error($dbh);
		return undef;
	}
	return $rows;
}

sub put
{
	my ($tag, $rows) = @_;
	my $t = now_ms();
	print $out "$t_call $t $tag $_\n" for @$rows;
	return;
}

my $stop_file = $o{'stop-file'};
while (time() < $o{until} && !($stop_file && -e $stop_file))
{
	$t_call = now_ms();
	if (!$dbh || $reconnect)
	{
		$dbh->disconnect if $dbh;
		$dbh = undef;
		$reconnect = 0;
		if (!connect_shard())
		{
			usleep(100_000);
			next;
		}
	}

	my $r = rand();
	my $tag = $tags[ int(rand(@tags)) ];
	my $mode = $o{mode} // 'mixed';
	# segment: [0, 0.5); snowflake: [0.5, 0.92); mixed: all, with rollbacks
	$r = $r / 2 if $mode eq 'segment';
	$r = 0.5 + $r * 0.42 if $mode eq 'snowflake';
	if ($r < 0.40)
	{
		my $ids = ids_of('SELECT leaf_segment_nextval($1)', $tag);
		put($tag, $ids) if $ids;
	}
	elsif ($r < 0.50)
	{
		my $ids = ids_of('SELECT leaf_segment_nextvals($1, $2)', $tag, 2 + int(rand(60)));
		put($tag, $ids) if $ids;
	}
	elsif ($r < 0.88)
	{
		my $ids = ids_of('SELECT leaf_snowflake()');
		put('~sf', $ids) if $ids;
	}
	elsif ($r < 0.92)
	{
		my $ids = ids_of('SELECT leaf_snowflake_nextvals($1)', 2 + int(rand(200)));
		put('~sf', $ids) if $ids;
	}
	else
	{
		# IDs taken in a transaction that is rolled back still count
		if (!$dbh->begin_work)
		{
			record_error($dbh);
			next;
		}
		my $a = ids_of('SELECT leaf_segment_nextval($1)', $tag);
		put($tag, $a) if $a;
		$t_call = now_ms();
		my $b = $a ? ids_of('SELECT leaf_snowflake()') : undef;
		put('~sf', $b) if $b;
		$dbh->rollback;
	}
}

$dbh->disconnect if $dbh;
close $out or die "$o{out}: $!";
exit 0;
