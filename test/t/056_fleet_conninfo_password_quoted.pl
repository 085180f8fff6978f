
# Copyright (c) leaf contributors

# Fleet mode: libpq quotes pieces of a connection string it cannot
# parse, and such a piece can be (part of) the password.  Before the fix
# that text went unchanged into leaf_segments.last_error, the callers'
# error and the server log.
#
# (a) a password with a space, not quoted: libpq complains about the
#     word after the space;
# (b) a URI with a broken host part: libpq quotes the whole URI,
#     password included.
#
# The conninfo is set in postgresql.conf before a restart: a reload
# would make PostgreSQL itself log the new value (see docs/fleet.md, Secrets).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LeafTest;

my $s = LeafTest::new_node('shard', "leaf.wait_timeout = '1s'");
$s->safe_psql('postgres', "SELECT leaf_segment_create('p', 100)");

my @cases = (
	[ '(a)', 'host=127.0.0.1 port=1 dbname=postgres password=Pa55 w0rdTail', 'w0rdTail' ],
	[ '(b)', 'postgresql://leaf:Pa55w0rdUri@[::1/postgres', 'Pa55w0rdUri' ]);

for my $case (@cases)
{
	my ($name, $conninfo, $secret) = @$case;

	$s->append_conf('postgresql.conf', "leaf.alloc_conninfo = '$conninfo'");
	$s->restart;
	my ($state, $err) = LeafTest::sqlstate($s, 'postgres',
		"SELECT leaf_segment_nextval('p')");
	ok(defined $state, "$name the call fails ($state)");
	my $last = $s->safe_psql('postgres',
		q[SELECT last_error FROM leaf_segments WHERE biz_tag = 'p']);
	note "$name last_error: $last";
	note "$name error: $err";
	like($last, qr/allocation database/, "$name leaf_segments.last_error names the failure");
	unlike($last, qr/\Q$secret\E/, "$name leaf_segments.last_error does not quote the password");
	unlike($err, qr/\Q$secret\E/, "$name the caller's error does not quote it");
	my $log = slurp_file($s->logfile);
	like($log, qr/leaf allocator could not load a segment/, "$name the server log records the failure");
	unlike($log, qr/\Q$secret\E/, "$name the server log does not quote the password");
}

$s->stop;

done_testing();
