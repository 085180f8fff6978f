#!/usr/bin/perl
#
# test/lib/leaf_ha_client.pl: one client of a highly available server,
# reached through a connection string that may list several hosts.
#
#   leaf_ha_client.pl --conninfo 'host=a,b port=1,2 target_session_attrs=read-write ...'
#                     --mode segment|snowflake [--tag T] --until EPOCH_SECONDS
#                     --out FILE [--pause-ms N]
#
# Until the given time, calls leaf_segment_nextval(T) (segment mode) or
# leaf_snowflake() (snowflake mode), one call per statement, with a pause
# of N ms (default 5) between calls.  Every ID received is appended to
# FILE as
#
#   <call start> <call end> <tag> <id> <server port>     (tag "~sf" for snowflake IDs)
#
# and every failed call as
#
#   <call start> <call end> ERR <sqlstate or "conn"> <message>
#
# ("conn": the call lost its connection), and every failed attempt to
# connect as
#
#   <attempt start> <attempt end> ERR connect <message>
#
# (times in ms since 1970).  A lost connection is opened again through the
# same connection string, and a refused attempt is retried after 100 ms,
# as an application would.
#
use strict;
use warnings;

use DBI;
use File::Basename;
use Getopt::Long;
use IO::Handle;
use Time::HiRes qw(time usleep);

use lib dirname(__FILE__);
use LeafCallLog qw(now_ms);

my %o = ('pause-ms' => 5, tag => 'order');
GetOptions(\%o, 'conninfo=s', 'mode=s', 'tag=s', 'until=f', 'out=s', 'pause-ms=i')
  or die "usage: see the head of $0\n";
die "--conninfo, --mode, --until and --out are required\n"
  unless $o{conninfo} && $o{mode} && $o{until} && $o{out};

open my $out, '>>', $o{out} or die "$o{out}: $!";
$out->autoflush(1);

my ($dbh, $sth);
my $t_call;

sub record_error
{
	my ($h) = @_;
	my $state = LeafCallLog::record_error($out, $t_call, $h,
		conn_state => qr/^(S8|08)/,
		lost => sub { return !$dbh || !$dbh->ping; });
	if ($state eq 'conn' || $state =~ /^57P0/ || $state eq '25006')
	{
		$dbh->disconnect if $dbh;
		$dbh = undef;
	}
	return;
}

my $sql = $o{mode} eq 'snowflake'
  ? 'SELECT leaf_snowflake(), inet_server_port()'
  : 'SELECT leaf_segment_nextval(?), inet_server_port()';
my $tag = $o{mode} eq 'snowflake' ? '~sf' : $o{tag};

while (time() < $o{until})
{
	$t_call = now_ms();
	if (!$dbh)
	{
		# DBD::Pg hands the part after "dbi:Pg:" to libpq
		$dbh = DBI->connect("dbi:Pg:$o{conninfo}", '', '',
			{ RaiseError => 0, PrintError => 0, AutoCommit => 1 });
		if (!$dbh)
		{
			my $msg = ($DBI::errstr // '') =~ s/\s+/ /gr;
			print $out "$t_call ", now_ms(), " ERR connect $msg\n";
			usleep(100_000);
			next;
		}
		$dbh->do("SET statement_timeout = '60s'");
		$sth = $dbh->prepare($sql);
		$t_call = now_ms();
	}
	my $ok = $o{mode} eq 'snowflake' ? $sth->execute : $sth->execute($o{tag});
	if (!$ok)
	{
		record_error($sth);
		next;
	}
	my ($id, $port) = $sth->fetchrow_array;
	$sth->finish;
	print $out "$t_call ", now_ms(), " $tag $id $port\n";
	usleep(1000 * $o{'pause-ms'}) if $o{'pause-ms'} > 0;
}

$dbh->disconnect if $dbh;
close $out or die "$o{out}: $!";
exit 0;
