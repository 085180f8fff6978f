
# Copyright (c) leaf contributors

# Public IDs: leaf_public_id / leaf_private_id (and the base-62 text
# forms) are FF1 of NIST SP 800-38G with AES, radix 2 over 63 numerals,
# keyed by the file leaf.public_id_key_file.
#
#  - known answers under a key file, worked out apart from leaf (NIST's
#    sample vectors and the 63-bit FF1 against a general one are checked
#    by test/ff1_vectors.c, which make installcheck runs first);
#  - round trip of 10,000,000 random IDs and the edges; other key or
#    tweak, other outputs;
#    outputs of 1,000,000 consecutive IDs look uniform (and the same
#    statistics on the IDs themselves fail, so the checks can fail);
#  - bad key files each give a clear error (LF009), no key gives LF008,
#    other roles see neither key nor path, and a reload with a new key
#    changes the outputs of a session that is already open.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../lib";

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = LeafTest::new_node('public_id');
my $db = 'postgres';

# the last line of a query's output (after "SELECT setseed(...)")
sub last_line
{
	my @l = split /\n/, shift;
	return $l[-1];
}

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

# Known answers under key1, worked out apart from leaf with a separate FF1
# written from the spec (Python integers, AES-ECB of the "cryptography"
# package): the numeral string is the ID's 63 bits, most significant first,
# the tweak the text's UTF-8 bytes.
for my $k (
	[ 0, '', '4615191284205252920' ],
	[ 1, 'order', '2716981693456618124' ],
	[ '9223372036854775807', 'order', '765289685543211787' ],
	[ 12345, 'zamówienie', '2699875716064961524' ],
	[ '4611686018427387904', 'x' x 200, '8247389920325696492' ])
{
	my ($id, $tweak, $want) = @$k;
	my $label = length($tweak) > 20 ? length($tweak) . ' bytes' : "'$tweak'";
	is($node->safe_psql($db, "SELECT leaf_public_id($id, '$tweak')"),
		$want, "known answer: leaf_public_id($id, $label) = $want");
}
is($node->safe_psql($db, "SELECT leaf_private_id($p1, 'order')"),
	'1', 'leaf_private_id reverses it');

# kept to compare with another key below
$node->safe_psql($db, q{
	CREATE TABLE key1_ids AS
		SELECT x, leaf_public_id(x, 'order') AS p FROM generate_series(1, 100000) x});

# ----------------------------------------------------- round trip, edges

is( $node->safe_psql($db, q{
		SELECT count(*) FROM unnest(ARRAY[0, 1, 2, 3, 4611686018427387904,
			9223372036854775806, 9223372036854775807]::bigint[]) x
		 WHERE leaf_private_id(leaf_public_id(x, 't'), 't') <> x
			OR leaf_private_id_text(leaf_public_id_text(x, 't'), 't') <> x
			OR leaf_public_id(x, 't') < 0}),
	'0', 'edges 0, 1, 2^62, 2^63 - 1 come back unchanged, public IDs are never negative');

my $t0 = time;
my $bad = 0;
for my $chunk (1 .. 5)
{
	$bad += last_line $node->safe_psql($db, qq{
		SELECT setseed(0.$chunk);
		SELECT count(*) FROM (
			SELECT (floor(random() * 2147483648)::bigint << 32) | floor(random() * 4294967296)::bigint AS x
			  FROM generate_series(1, 2000000)) s
		 WHERE leaf_private_id(leaf_public_id(x, 't'), 't') <> x});
}
my $rt = time - $t0;
is($bad, 0, '10,000,000 random IDs come back unchanged');
note sprintf('round trip of 10,000,000 random IDs: %.1f s', $rt);

# --------------------------------------------------- other key or tweak

is( $node->safe_psql($db, q{
		SELECT count(*) FILTER (WHERE leaf_public_id(x, 'order') = leaf_public_id(x, 'user')) || ' ' ||
			   count(*) FILTER (WHERE leaf_public_id(x, 'order') = leaf_public_id(x, '')) || ' ' ||
			   count(*) FILTER (WHERE leaf_public_id(x, 'order') = leaf_public_id(x, 'order '))
		  FROM generate_series(1, 100000) x}),
	'0 0 0', 'other tweaks give other public IDs (100,000 IDs, no two equal)');

# ------------------------------------------- uniformity over 1..1,000,000

# For n = 1,000,000 consecutive IDs:
#  - the high bit (bit 62) is set in n/2 +- 2,500 (5 standard deviations);
#  - the low byte and the top byte (bits 55-62) each pass a chi-square test
#    over 256 bins (255 degrees of freedom) at 330.5, its 99.9% quantile;
#  - public IDs of consecutive IDs go up as often as down: the share of
#    pub(x + 1) > pub(x) is 0.5 +- 0.0025 (5 standard deviations).
my $stats = sub {
	my ($expr) = @_;
	return $node->safe_psql($db, qq{
		WITH p AS (SELECT x, $expr AS v FROM generate_series(1, 1000000) x),
		lo AS (SELECT count(*) AS c FROM p GROUP BY v & 255),
		hi AS (SELECT count(*) AS c FROM p GROUP BY v >> 55),
		ud AS (SELECT v > lag(v) OVER (ORDER BY x) AS up FROM p)
		SELECT (SELECT count(*) FROM p WHERE v >= 4611686018427387904),
			   (SELECT round(sum((c - 3906.25) ^ 2 / 3906.25) + (256 - count(*)) * 3906.25, 1) FROM lo),
			   (SELECT round(sum((c - 3906.25) ^ 2 / 3906.25) + (256 - count(*)) * 3906.25, 1) FROM hi),
			   (SELECT round(avg(up::int), 5) FROM ud)});
};
my ($high, $chi_lo, $chi_hi, $ups) = split /\|/, $stats->("leaf_public_id(x, 'order')");
note "public IDs of 1..1000000: high bit set $high, chi-square low byte $chi_lo, top byte $chi_hi, share going up $ups";
cmp_ok(abs($high - 500000), '<', 2500, "high bit set in $high of 1,000,000 (500,000 +- 2,500)");
cmp_ok($chi_lo, '<', 330.5, "low byte: chi-square $chi_lo < 330.5");
cmp_ok($chi_hi, '<', 330.5, "top byte: chi-square $chi_hi < 330.5");
cmp_ok(abs($ups - 0.5), '<', 0.0025, "consecutive IDs: public IDs go up in a share of $ups (0.5 +- 0.0025)");

# the same statistics on the IDs themselves fail
my ($rhigh, $rchi_lo, $rchi_hi, $rups) = split /\|/, $stats->('x::bigint');
note "the IDs 1..1000000 themselves: high bit $rhigh, chi-square low byte $rchi_lo, top byte $rchi_hi, share going up $rups";
ok(abs($rhigh - 500000) >= 2500 && $rchi_hi >= 330.5 && abs($rups - 0.5) >= 0.0025,
	'the checks can fail: sequential IDs fail the high bit, top byte and up/down checks');

# ------------------------------------------------------ text form, input

is( $node->safe_psql($db, q{
		SELECT count(*) FILTER (WHERE leaf_public_id_text(x, 'order') !~ '^[0-9A-Za-z]{11}$') || ' ' ||
			   count(*) FILTER (WHERE leaf_private_id_text(leaf_public_id_text(x, 'order'), 'order') <> x) || ' ' ||
			   count(DISTINCT leaf_public_id_text(x, 'order'))
		  FROM generate_series(1, 100000) x}),
	'0 0 100000', 'text form: always 11 base-62 characters, reversible, distinct');

# base 62 of the public ID, digits 0-9 A-Z a-z, most significant first
my ($pub, $txt) = split /\|/, $node->safe_psql($db,
	"SELECT leaf_public_id(42, 'order'), leaf_public_id_text(42, 'order')");
my $b62 = '';
{
	use bigint;
	my $v = $pub + 0;
	my @d = ('0' .. '9', 'A' .. 'Z', 'a' .. 'z');
	for (1 .. 11) { $b62 = $d[$v % 62] . $b62; $v = $v / 62; }
}
is($txt, $b62, "leaf_public_id_text is the public ID $pub in base 62 ($b62)");
is($node->safe_psql($db, "SELECT leaf_private_id_text('AzL8n0Y58m7', '')"),
	$node->safe_psql($db, "SELECT leaf_private_id(9223372036854775807, '')"),
	"'AzL8n0Y58m7' is 2^63 - 1, the largest public ID");

for my $c (
	[ "leaf_private_id_text('abc', 'order')",          qr/11 characters/ ],
	[ "leaf_private_id_text('0000000000-', 'order')",  qr/0-9, A-Z and a-z/ ],
	[ "leaf_private_id_text(' 0000000000', 'order')",  qr/0-9, A-Z and a-z/ ],
	[ "leaf_private_id_text('AzL8n0Y58m8', 'order')",  qr/above the largest/ ],
	[ "leaf_private_id_text('zzzzzzzzzzz', 'order')",  qr/above the largest/ ],
	[ "leaf_private_id_text(repeat('a', 100), 'order')", qr/11 characters/ ])
{
	my ($st, $e) = LeafTest::sqlstate($node, $db, "SELECT $c->[0]");
	is($st, '22P02', "$c->[0]: 22P02");
	like($e, $c->[1], '... says why');
}

($state, $err) = LeafTest::sqlstate($node, $db, "SELECT leaf_public_id(-1, 'order')");
is($state, '22003', 'a negative ID: 22003');
like($err, qr/ID -1 is negative/, '... says so');
($state, $err) = LeafTest::sqlstate($node, $db, "SELECT leaf_private_id(-5, 'order')");
is($state, '22003', 'a negative public ID: 22003');
($state, $err) = LeafTest::sqlstate($node, $db, "SELECT leaf_public_id(1, repeat('x', 257))");
is($state, '22023', 'a tweak of 257 bytes: 22023');
like($err, qr/It has 257 bytes in UTF-8; the limit is 256/, '... with the limit');
($state, $err) = LeafTest::sqlstate($node, $db, "SELECT leaf_public_id(1, repeat('ł', 129))");
is($state, '22023', 'the limit counts UTF-8 bytes (129 two-byte characters)');
is($node->safe_psql($db, q{
		SELECT leaf_public_id(NULL, 'order') IS NULL AND leaf_public_id(1, NULL) IS NULL
		   AND leaf_private_id(NULL) IS NULL AND leaf_private_id_text(NULL) IS NULL
		   AND leaf_public_id_text(NULL) IS NULL}),
	't', 'NULL in, NULL out');
is($node->safe_psql($db, "SELECT leaf_public_id(7) = leaf_public_id(7, '')"),
	't', 'the tweak defaults to the empty string');

# ----------------------------------------------------- other roles

$node->safe_psql($db, q{
	CREATE ROLE app LOGIN;
	CREATE TABLE orders (id bigint PRIMARY KEY, note text);
	INSERT INTO orders SELECT g, 'o' || g FROM generate_series(1, 1000) g;
	GRANT SELECT ON orders TO app;
});
my ($rc, $out);
# the functions need EXECUTE (not granted to PUBLIC since 1.2)
($rc, $out, $err) = $node->psql($db, 'SELECT leaf_public_id(1)',
	connstr => $node->connstr($db) . ' user=app');
like($err, qr/permission denied for function leaf_public_id/,
	'a role without the grant cannot compute public IDs');
$node->safe_psql($db,
	'GRANT EXECUTE ON FUNCTION leaf_public_id(bigint, text), leaf_private_id(bigint, text) TO app');
($rc, $out, $err) = $node->psql($db, 'SHOW leaf.public_id_key_file',
	connstr => $node->connstr($db) . ' user=app');
# 15: "must be superuser or have privileges of pg_read_all_settings ...";
# 16 and later: "permission denied to examine ...", the role in the DETAIL
like($err,
	qr/(must be superuser|permission denied to examine).*pg_read_all_settings/s,
	'another role cannot SHOW the key file setting');
is($node->safe_psql($db,
		"SELECT count(*) FROM pg_settings WHERE name = 'leaf.public_id_key_file'",
		connstr => $node->connstr($db) . ' user=app'),
	'0', '... nor find it in pg_settings');
($rc, $out, $err) = $node->psql($db, "SELECT current_setting('leaf.public_id_key_file')",
	connstr => $node->connstr($db) . ' user=app');
isnt($rc, 0, '... nor read it with current_setting()');
is($node->safe_psql($db,
		"SELECT note FROM orders WHERE id = leaf_private_id(leaf_public_id(123, 'order'), 'order')",
		connstr => $node->connstr($db) . ' user=app'),
	'o123', 'another role uses the functions: lookup by public ID');
like($node->safe_psql($db,
		"EXPLAIN (COSTS OFF) SELECT note FROM orders WHERE id = leaf_private_id(987654321, 'order')"),
	qr/Index Scan using orders_pkey/, 'WHERE id = leaf_private_id(...) uses the index');

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
