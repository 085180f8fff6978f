
# Copyright (c) leaf contributors

=pod

=head1 NAME

LeafCallLog - the lines that the load clients write of their calls

=head1 SYNOPSIS

  use File::Basename;
  use lib dirname(__FILE__) . '/../lib';    # a script run without prove
  use LeafCallLog qw(now_ms);

  my $t_call = now_ms();
  ...
  my $state = LeafCallLog::record_error($out, $t_call, $sth,
      conn_state => qr/^S8/);

=head1 DESCRIPTION

Shared by test/lib/leaf_ha_client.pl and test/chaos/client.pl, which
append a line per call to a file:

  <call start> <call end> ERR <sqlstate or "conn"> <message>

for a failed call (times in ms since 1970).

=cut

package LeafCallLog;

use strict;
use warnings;

use DBI ();
use Exporter 'import';
use Time::HiRes ();

our @EXPORT_OK = qw(now_ms);

=pod

=head1 FUNCTIONS

=over

=item now_ms()

The time in milliseconds since 1970.

=cut

sub now_ms { return int(Time::HiRes::time() * 1000); }

=pod

=item record_error($out, $t_call, $h, %how)

Appends the line of a failed call started at $t_call to the file handle
$out and returns the SQLSTATE it wrote.  The error is the last one of the
DBI handle $h (of DBI itself when $h is undef), its message on one line.
The SQLSTATE is written as "conn" (the call lost its connection or could
not get one) when there is none, when it matches $how{conn_state}, when
$how{lost} (a function, called after the error was read) returns true, or
when the message is one of libpq's about a lost connection or matches
$how{conn_msg}.

=cut

sub record_error
{
	my ($out, $t_call, $h, %how) = @_;

	my $state = $h ? ($h->state // '') : '';
	my $msg = $h ? ($h->errstr // '') : ($DBI::errstr // '');
	$msg =~ s/\s+/ /g;
	my $lost = $how{lost} ? $how{lost}->() : 0;
	$state = 'conn'
	  if $state eq ''
	  || (defined $how{conn_state} && $state =~ $how{conn_state})
	  || $lost
	  || $msg =~ /server closed the connection|no connection to the server|could not connect|terminating connection/
	  || (defined $how{conn_msg} && $msg =~ $how{conn_msg});
	print $out "$t_call ", now_ms(), " ERR $state $msg\n";
	return $state;
}

=pod

=back

=cut

1;
