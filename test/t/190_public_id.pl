
# Copyright (c) leaf contributors

# Public IDs: leaf_public_id / leaf_private_id (and the base-62 text
# forms) are FF1 of NIST SP 800-38G with AES, radix 2 over 63 numerals,
# keyed by the file leaf.public_id_key_file.  What needs a server of its
# own or a reload is here:
#
#  - no key gives LF008;
#  - bad key files each give a clear error (LF009), to a superuser with
#    the path, to other roles without it, and never with the content;
#  - a reload with a new key, another file or no key changes what a
#    session that is already open computes, and a reload that leaves the
#    key as it was does not rebuild its AES context;
#  - another key gives other public IDs;
#  - the key never appears in the server log.
#
# The SQL behaviour under one key (known answers, round trips, the text
# form, input errors, other roles) is in sql/public_id.sql, and NIST's
# sample vectors in test/ff1_vectors.c (make installcheck runs both).

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = LeafTest::new_node('public_id');
my $db = 'postgres';

# ---------------------------------------------------------------- no key

my ($state, $err) =
  LeafTest::sqlstate($node, $db, "SELECT leaf_public_id(1, 'order')");
is($state, 'LF008', 'no key configured: LF008');
like($err, qr/no key is configured for public IDs/, '... says so');
like($err, qr/HINT:.*leaf\.public_id_key_file/, '... and the hint names the setting');

# ------------------------------------------------------------- a key file

my $key1 = '8f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0';
my $key2 = '00112233445566778899aabbccddeeff';
my $keyfile = $node->basedir . '/public_id.key';

sub write_key
{
	my ($path, $content, $mode) = @_;
	unlink $path;
	open my $fh, '>', $path or die "could not write $path: $!";
	print $fh $content;
	close $fh;
	chmod $mode // 0600, $path;
}

# Set leaf.public_id_key_file and wait until new sessions see it.
sub set_key_file
{
	my ($path) = @_;
	$node->safe_psql($db,
		"ALTER SYSTEM SET leaf.public_id_key_file = '$path'; SELECT pg_reload_conf()");
	LeafTest::wait_until(
		sub {
			$node->safe_psql($db, 'SHOW leaf.public_id_key_file') eq $path;
		},
		'the reload')
	  or die 'the reload did not apply';
}

write_key($keyfile, "$key1\n");
set_key_file($keyfile);

my $p1 = $node->safe_psql($db, "SELECT leaf_public_id(1, 'order')");
like($p1, qr/^\d+$/, "with a key file, leaf_public_id(1, 'order') = $p1");

# kept to compare with another key below
$node->safe_psql($db, q{
	CREATE TABLE key1_ids AS
		SELECT x, leaf_public_id(x, 'order') AS p FROM generate_series(1, 100000) x});

# ----------------------------------------------------- another role

# (what it may and may not do under one key is in sql/public_id.sql)
$node->safe_psql($db, q{
	CREATE ROLE app LOGIN;
	GRANT EXECUTE ON FUNCTION leaf_public_id(bigint, text), leaf_private_id(bigint, text) TO app;
});

# ------------------------------------------------- bad key files

my $state_of = sub {
	my ($sql, $as_app) = @_;
	my ($r, $o, $e) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
		$as_app ? (connstr => $node->connstr($db) . ' user=app') : ());
	my ($s) = $e =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ($s // '', $e);
};

my $notes = $node->basedir . '/notes';
mkdir $notes;
my $badfile = $node->basedir . '/bad.key';
my @owned_by_other = grep { -e $_ && (stat $_)[4] != $> } ('/etc/passwd', '/etc/hostname');
my @cases = (
	[ 'missing', sub { unlink $badfile }, qr/public ID key file does not exist/ ],
	[ 'group-readable (0640)', sub { write_key($badfile, "$key2\n", 0640) },
		qr/has group or world access.*HINT:.*0600/s ],
	[ 'world-readable (0604)', sub { write_key($badfile, "$key2\n", 0604) },
		qr/has group or world access/ ],
	[ 'too short (30 hex digits)', sub { write_key($badfile, substr($key2, 0, 30) . "\n") },
		qr/valid length.*It holds 30 characters/s ],
	[ 'too long (66 hex digits)', sub { write_key($badfile, $key2 . $key2 . "ab") },
		qr/valid length.*It holds 66 characters/s ],
	[ 'empty', sub { write_key($badfile, '') }, qr/valid length.*It holds 0 characters/s ],
	[ 'two newlines', sub { write_key($badfile, "$key2\n\n") }, qr/valid length/ ],
	[ 'not hex', sub { write_key($badfile, ('0' x 30) . 'zq' . ('0' x 32)) },
		qr/holds a character that is not a hex digit/ ],
	[ 'a directory', sub { unlink $badfile; mkdir $badfile, 0700 },
		qr/is not a regular file/ ]);
push @cases, [ "owned by another user ($owned_by_other[0])", sub { }, qr/not owned by the database system user/,
	$owned_by_other[0] ]
  if @owned_by_other;
for my $c (@cases)
{
	my ($what, $make, $re, $path) = @$c;
	rmdir $badfile;
	$make->();
	set_key_file($path // $badfile);
	my ($s, $e) = $state_of->("SELECT leaf_public_id(1, 'order')");
	is($s, 'LF009', "key file $what: LF009");
	like($e, $re, '... with a clear message');
	like($e, qr/The file is "\Q@{[$path \/\/ $badfile]}\E"/, '... a superuser sees the path');
	($s, $e) = $state_of->("SELECT leaf_public_id(1, 'order')", 1);
	is($s, 'LF009', '... another role gets LF009 too');
	unlike($e, qr/\Q@{[$path \/\/ $badfile]}\E|bad\.key|passwd/, '... without the path');
	unlike($e, qr/zq|$key1|$key2/i, '... and never the content');
}
rmdir $badfile;
diag 'no file owned by another user found: the owner check did not run'
  unless @owned_by_other;

# a trailing newline is optional; upper-case hex is the same key
write_key($badfile, uc $key1);
set_key_file($badfile);
is($node->safe_psql($db, "SELECT leaf_public_id(1, 'order')"), $p1,
	'the same key without newline and in upper case gives the same public IDs');

# an unusable file stops public IDs (no falling back on the key before)
# until it is mended; then the next call reads it again
my $bgfail = $node->background_psql($db, on_error_stop => 0);
is($bgfail->query_safe("SELECT leaf_public_id(1, 'order')"), $p1, 'a session holds the key');
write_key($badfile, uc $key1, 0644);
$node->safe_psql($db, 'SELECT pg_reload_conf()');
my $seen = LeafTest::wait_until(
	sub {
		$bgfail->{stderr} = '';
		$bgfail->query("SELECT leaf_public_id(1, 'order')");
		return $bgfail->{stderr} =~ /has group or world access/;
	},
	'the session to see the broken key file');
ok($seen, 'a session that held the key fails once the file it names becomes unusable (after a reload)');
chmod 0600, $badfile;
$bgfail->{stderr} = '';
is($bgfail->query("SELECT leaf_public_id(1, 'order')"), $p1,
	'... and works again at the next call once the file is mended');
$bgfail->quit;

# ------------------------------------- reload with a new key, same session

set_key_file($keyfile);
my $bg = $node->background_psql($db, on_error_stop => 0,
	extra_params => [ '-U', 'app' ]);
my $before = $bg->query_safe("SELECT leaf_public_id(12345, 'order')");
is($before, $node->safe_psql($db, "SELECT leaf_public_id(12345, 'order')"),
	'a session of another role gets the same public ID');

# A reload that leaves the key as it was does not rebuild the AES context
# (the backend says so at DEBUG1 when it builds one).
# Another setting changed in the same reload tells when the session has
# taken it.
$bg->query_safe('SET client_min_messages = debug1');
$bg->{stderr} = '';
$node->safe_psql($db,
	"ALTER SYSTEM SET leaf.tag_refresh_interval = '11s'; SELECT pg_reload_conf()");
ok( LeafTest::wait_until(
		sub { $bg->query('SHOW leaf.tag_refresh_interval') eq '11s' },
		'the session to take the reload'),
	'the session has taken a reload that leaves the key file as it was');
is($bg->query("SELECT leaf_public_id(12345, 'order')"), $before,
	'... the same public ID after it');
unlike($bg->{stderr}, qr/leaf loaded the public ID key/,
	'... and the AES context was not built again');
$node->safe_psql($db, 'ALTER SYSTEM RESET leaf.tag_refresh_interval');

# new content under the same path
write_key($keyfile, "$key2\n");
$node->safe_psql($db, 'SELECT pg_reload_conf()');
my $after;
ok( LeafTest::wait_until(
		sub {
			$after = $bg->query("SELECT leaf_public_id(12345, 'order')");
			return $after ne $before;
		},
		'the session to take the new key'),
	"after a reload, the open session uses the new key in the same file ($before -> $after)");
like($bg->{stderr}, qr/leaf loaded the public ID key \(AES-128\)/,
	'... having built its AES context again, for AES-128');
$bg->query('RESET client_min_messages');
$bg->{stderr} = '';
is($bg->query_safe("SELECT leaf_private_id($after, 'order')"), '12345',
	'... and reverses with it');
is($node->safe_psql($db, "SELECT leaf_public_id(12345, 'order')"), $after,
	'... as new sessions do');

# the key and only the key matters: AES-128 key2 against AES-256 key1
is( $node->safe_psql($db, q{
		SELECT count(*) FROM key1_ids WHERE leaf_public_id(x, 'order') = p}),
	'0', 'another key gives other public IDs (100,000 IDs, no two equal)');

# another path, back to the first key
my $keyfile3 = $node->basedir . '/public_id_3.key';
write_key($keyfile3, "$key1\n");
$node->safe_psql($db,
	"ALTER SYSTEM SET leaf.public_id_key_file = '$keyfile3'; SELECT pg_reload_conf()");
ok( LeafTest::wait_until(
		sub { $bg->query_safe("SELECT leaf_public_id(12345, 'order')") eq $before },
		'the session to take the other file'),
	'after a reload naming another file, the open session uses its key');

# the key set to nothing: LF008
$node->safe_psql($db,
	"ALTER SYSTEM RESET leaf.public_id_key_file; SELECT pg_reload_conf()");
ok( LeafTest::wait_until(
		sub {
			$bg->{stderr} = '';
			$bg->query("SELECT leaf_public_id(12345, 'order')");
			return $bg->{stderr} =~ /no key is configured/;
		},
		'the session to lose the key'),
	'after the setting is removed and reloaded, the open session fails with LF008');
$bg->quit;

# ------------------------------------------- the key never shows up

$node->safe_psql($db, 'SELECT pg_reload_conf()');
my $log = slurp_file($node->logfile);
unlike($log, qr/$key1|$key2/i, 'no key appears in the server log');
like($log, qr/The file is "\Q$badfile\E"/, 'the server log names the key file of a failed call');

$node->stop;
done_testing();
