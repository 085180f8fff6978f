# One version everywhere: leaf.control's default_version is the version
# of debian/changelog's newest entry (the Debian packages), of META.json
# (the PGXN release, and its provides.leaf) and of CHANGELOG.md's newest
# heading.  META.json is also checked against the parts of PGXN's
# meta-spec 1.0.0 that PGXN refuses a release without, and debian/control
# against debian/control.in (pg_buildext updatecontrol writes the first
# from the second, one binary package per supported major), and the
# files a build writes as docs/installing.md names them.  Reads files
# only: no server.
use strict;
use warnings;

use Cwd ();
use JSON::PP;
use Test::More;

# prove runs from the top of the tree
my $top = Cwd::getcwd();

sub slurp
{
	my ($path) = @_;
	open my $fh, '<', "$top/$path" or die "$path: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

my ($control) = slurp('leaf.control') =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $control, "leaf.control has a default_version");
$control //= '';

# debian/changelog: "leaf (1.4) ..." (native) or "leaf (1.4-1) ..."
my ($deb) = slurp('debian/changelog') =~ /\A(\S+) \(([^)]+)\)/ ? ($2) : ();
my $deb_upstream = ($deb // '') =~ s/-[^-]+$//r;
is($deb_upstream, $control, "debian/changelog's newest entry is $control (it has " . ($deb // 'none') . ")");
like(slurp('debian/changelog'), qr/\Aleaf \(/, 'debian/changelog is of source package leaf');

# CHANGELOG.md: the first "## X" heading, "(unreleased)" or not
my ($notes) = slurp('CHANGELOG.md') =~ /^## (\S+)/m;
is($notes, $control, "CHANGELOG.md's newest heading is $control");

# META.json: valid JSON, the fields PGXN requires, the same version
my $meta = eval { JSON::PP->new->decode(slurp('META.json')) };
ok($meta, 'META.json is JSON') or diag($@);
$meta //= {};
for my $field (qw(name abstract version maintainer license provides meta-spec))
{
	ok(defined $meta->{$field}, "META.json has $field");
}
is($meta->{name}, 'leaf', 'META.json: name is leaf');
is($meta->{version}, $control, "META.json's version is $control");
is($meta->{license}, 'postgresql', 'META.json: license is postgresql (LICENSE)');
is(ref $meta->{provides} eq 'HASH' && ref $meta->{provides}{leaf} eq 'HASH'
	? $meta->{provides}{leaf}{version} : undef,
	$control, "META.json's provides.leaf.version is $control");
for my $key (qw(file docfile))
{
	my $path = ref $meta->{provides} eq 'HASH' && ref $meta->{provides}{leaf} eq 'HASH'
	  ? $meta->{provides}{leaf}{$key} : undef;
	ok(defined $path && -f "$top/$path", "META.json's provides.leaf.$key names a file of the tree ("
		  . ($path // 'none') . ')');
}
is(ref $meta->{'meta-spec'} eq 'HASH' ? $meta->{'meta-spec'}{version} : undef,
	'1.0.0', 'META.json: meta-spec 1.0.0');
# a semantic version (PGXN normalizes "1.4" to 1.4.0)
like($meta->{version} // '', qr/^\d+\.\d+(\.\d+)?$/, 'META.json: version is a semantic version');
is(ref $meta->{prereqs} eq 'HASH' ? $meta->{prereqs}{runtime}{requires}{PostgreSQL} : undef,
	'15.0.0', 'META.json: runtime requires PostgreSQL 15.0.0, the oldest supported major');

# debian/control as pg_buildext updatecontrol writes it from control.in:
# the source paragraph as it is, the binary package once per major
my @in = split /\n\n+/, slurp('debian/control.in') =~ s/\n+\z//r;
my @out = split /\n\n+/, slurp('debian/control') =~ s/\n+\z//r;
is($out[0], $in[0], "debian/control's source paragraph is control.in's");
my @majors = map { /^Package: postgresql-(\d+)-leaf$/m ? $1 : () } @out[1 .. $#out];
ok(@majors > 0, 'debian/control has postgresql-NN-leaf packages: ' . join(' ', @majors));
for my $i (1 .. $#out)
{
	my ($major) = $out[$i] =~ /^Package: postgresql-(\d+)-leaf$/m;
	is($out[$i], $in[1] =~ s/PGVERSION/$major/gr,
		"debian/control's paragraph $i is control.in's for PostgreSQL " . ($major // '?'));
}
my @supported = split ' ', `"$top/test/lib/run.sh" majors`;
is("@majors", "@supported", 'debian/control has a package for each supported major (test/lib/run.sh majors)');

# docs/installing.md names the files that a build of this version writes
# (the package, its debug symbols, .buildinfo and .changes, the PGXN
# archive): every such name it gives has this version, so that a line
# copied from it finds its file
my $install = slurp('docs/installing.md');
my @named = $install =~
  /\b((?:postgresql-\d+-leaf(?:-dbgsym)?|leaf)_[0-9][^_\s`]*_\w+\.(?:deb|buildinfo|changes)|leaf-[0-9][0-9.]*[0-9](?=\.zip|\/))/g;
ok(@named >= 5, 'docs/installing.md names the files of a build: ' . join(' ', @named));
is_deeply([ grep { !/[-_]\Q$control\E(?:_|\z)/ } @named ], [],
	"docs/installing.md names them for version $control");

done_testing();
