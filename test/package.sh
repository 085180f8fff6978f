#!/usr/bin/env bash
#
# test/package.sh: build the Debian package of leaf for each PostgreSQL
# major, install it into a clean root and run the pg_regress suite against
# what it installed.  Run as root on a Debian machine.
#
#   test/package.sh [MAJOR...]   every supported major by default
#                                (test/lib/run.sh majors)
#   test/package.sh build-deps   the packages the build needs, which
#                                test/majors.sh prepare installs into the
#                                chroots
#
# Each major builds in the Debian chroot of test/majors.sh that has it
# (LEAF_CHROOTS, default /var/cache/leaf/chroots; 15 in bookworm's, which
# is prepared here with LEAF_MAJORS_HOST=no when it is missing), and
# leaves that chroot as it was: everything happens in two overlayfs
# mounts over it, thrown away afterwards.
#
#   1. build: in the first overlay, the build dependencies (if the chroot
#      lacks them), debian/control for this major only (pg_buildext
#      updatecontrol with PG_SUPPORTED_VERSIONS), then dpkg-buildpackage
#      -us -uc -b; the .deb is copied out;
#   2. check: dpkg-deb -I shows Depends on postgresql-NN and on the
#      ZooKeeper client library (libzookeeper-mt2, from ${shlibs:Depends}),
#      and the package holds leaf.so, leaf.control and every
#      src/leaf--*.sql, and no test build (no leaf.test_* setting);
#   3. install: in a second overlay, the files of any leaf installed from
#      source are removed first (the chroot's test runs install their
#      test build there), then apt-get install ./postgresql-NN-leaf_*.deb,
#      and dpkg must own every leaf file of the major;
#   4. test: debian/tests/installcheck, the package's autopkgtest
#      (pg_buildext installcheck with LEAF_INSTALLCHECK=package): pg_regress
#      on a temporary instance with shared_preload_libraries = 'leaf',
#      CREATE EXTENSION leaf from the package's files.
#
# Environment:
#   LEAF_CHROOTS       the chroots (as test/majors.sh)
#   LEAF_PACKAGE_OUT   where the .deb files and logs go (default: a new
#                      directory /tmp/leaf-package.*)
#
# The last lines give each major's times and result; the exit status is
# non-zero if any major failed.
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
chroots=${LEAF_CHROOTS:-/var/cache/leaf/chroots}

# What dpkg-buildpackage needs beyond what leaf's own build needs
# (debian/control.in's Build-Depends): debhelper, pg_buildext and its dh
# sequence (postgresql-server-dev-all), dpkg-dev.
build_deps="debhelper dpkg-dev postgresql-server-dev-all"

say() { printf '== %s: %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
	echo "package.sh: $*" >&2
	exit 2
}

if [ "${1:-}" = build-deps ]; then
	echo "$build_deps"
	exit 0
fi
[ "$(id -u)" = 0 ] || die "run this as root (chroot, mount)"

majors=${*:-$("$here/test/lib/run.sh" majors)}
out=${LEAF_PACKAGE_OUT:-$(mktemp -d /tmp/leaf-package.XXXXXX)}
mkdir -p "$out"
version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$here/leaf.control")

# The overlays mounted so far, each with its own mounts inside: undone
# however the run ends
overlays=()

# overlay_up ROOT DIR: DIR/root, an overlayfs over the chroot ROOT whose
# changes go to DIR/upper, with /proc, /dev, /dev/pts and a /dev/shm of
# its own (PostgreSQL's shared memory)
overlay_up() {
	local root=$1 dir=$2
	mkdir -p "$dir/upper" "$dir/work" "$dir/root"
	mount -t overlay overlay -o "lowerdir=$root,upperdir=$dir/upper,workdir=$dir/work" "$dir/root"
	overlays+=("$dir")
	mount -t proc proc "$dir/root/proc"
	mount --bind /dev "$dir/root/dev"
	mount --bind /dev/pts "$dir/root/dev/pts"
	mount -t tmpfs -o mode=1777 shm "$dir/root/dev/shm"
}

# overlay_down DIR: stop what still runs in it, unmount, remove DIR
overlay_down() {
	local dir=$1 r p pids= m
	r=$(readlink -f "$dir/root")
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$r" ] && pids="$pids ${p#/proc/}"
	done
	if [ -n "$pids" ]; then
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 1
	fi
	for m in /dev/shm /dev/pts /dev /proc ''; do
		if mountpoint -q "$dir/root$m"; then
			umount "$dir/root$m" 2>/dev/null || umount -l "$dir/root$m"
		fi
	done
	rm -rf "${dir:?}"
}

cleanup() {
	local d
	trap - EXIT INT TERM
	for d in "${overlays[@]}"; do
		[ -d "$d" ] && overlay_down "$d"
	done
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

in_root() {
	local root=$1
	shift
	LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive chroot "$root" /bin/bash -c "set -e; $*"
}

# package_major MAJOR: the four steps above; the log in $out/MAJOR.log
package_major() {
	local major=$1 suite root ovl deb t0 t_build t_install t_test
	# run in a subshell of its own: its overlays are undone there
	trap cleanup EXIT
	suite=$("$here/test/lib/run.sh" suite "$major")
	root=$chroots/$suite
	if [ ! -x "$root/usr/lib/postgresql/$major/bin/postgres" ]; then
		say "$major: preparing the chroot of $suite (test/majors.sh prepare $major)"
		LEAF_MAJORS_HOST=no "$here/test/majors.sh" prepare "$major"
	fi
	ovl=$(mktemp -d "/tmp/leaf-package-$major.XXXXXX")

	# 1. build
	t0=$SECONDS
	say "$major: building postgresql-$major-leaf $version in $suite"
	overlay_up "$root" "$ovl/build"
	local src=/tmp/leaf-deb/leaf-$version
	"$here/test/lib/run.sh" copy "$here" "$ovl/build/root$src"
	in_root "$ovl/build/root" "
		dpkg -s $build_deps >/dev/null 2>&1 || {
			apt-get update -qq && apt-get install -y -qq --no-install-recommends $build_deps >/dev/null; }
		cd $src
		export PG_SUPPORTED_VERSIONS=$major
		pg_buildext updatecontrol
		dpkg-buildpackage -us -uc -b"
	deb=$(cd "$ovl/build/root/tmp/leaf-deb" && ls "postgresql-${major}-leaf_${version}"_*.deb)
	cp "$ovl/build/root/tmp/leaf-deb/$deb" "$out/"
	overlay_down "$ovl/build"
	t_build=$((SECONDS - t0))
	say "$major: built $deb in $t_build s"

	# 2. check
	dpkg-deb -I "$out/$deb" | tee "$out/$major.info"
	local depends
	depends=$(dpkg-deb -f "$out/$deb" Depends)
	[[ ", $depends," =~ ,\ libzookeeper-mt2[\ ,] ]] ||
		die "$major: $deb does not depend on libzookeeper-mt2 (Depends: $depends)"
	[[ ", $depends," =~ ,\ postgresql-$major[\ ,] ]] ||
		die "$major: $deb does not depend on postgresql-$major (Depends: $depends)"
	dpkg-deb -c "$out/$deb" | awk '{ print $NF }' | sed 's|^\./|/|' >"$out/$major.files"
	local f
	for f in "/usr/lib/postgresql/$major/lib/leaf.so" "/usr/share/postgresql/$major/extension/leaf.control" \
		$(cd "$here/src" && ls leaf--*.sql | sed "s|^|/usr/share/postgresql/$major/extension/|"); do
		grep -qxF "$f" "$out/$major.files" || die "$major: $deb does not hold $f"
	done
	! grep -q '/bitcode/' "$out/$major.files" || die "$major: $deb holds bitcode (built without with_llvm=no)"
	mkdir -p "$ovl/x"
	dpkg-deb -x "$out/$deb" "$ovl/x"
	! grep -q -a 'leaf.test_' "$ovl/x/usr/lib/postgresql/$major/lib/leaf.so" ||
		die "$major: $deb holds a test build (leaf.test_* settings)"
	say "$major: Depends: $depends"

	# 3. install, into a root without leaf
	t0=$SECONDS
	overlay_up "$root" "$ovl/install"
	local r=$ovl/install/root
	rm -f "$r/usr/lib/postgresql/$major/lib/leaf.so" "$r/usr/share/postgresql/$major/extension"/leaf[.-]*
	rm -rf "$r/usr/lib/postgresql/$major/lib/bitcode/leaf" "$r/usr/lib/postgresql/$major/lib/bitcode/leaf.index.bc"
	in_root "$r" "! dpkg -s postgresql-$major-leaf >/dev/null 2>&1"
	cp "$out/$deb" "$r/tmp/"
	in_root "$r" "apt-get install -y -q --no-install-recommends /tmp/$deb"
	# what the autopkgtest needs besides (debian/tests/control): pg_buildext
	# and pg_regress; pgTAP is in the chroot already (test/majors.sh prepare)
	in_root "$r" "dpkg -s postgresql-server-dev-all >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-server-dev-all >/dev/null; }"
	# every leaf file of the major is the package's
	in_root "$r" "
		for f in /usr/lib/postgresql/$major/lib/leaf.so /usr/share/postgresql/$major/extension/leaf[.-]*; do
			dpkg -S \"\$f\" >/dev/null || { echo \"\$f: not installed by the package\" >&2; exit 1; }
		done"
	t_install=$((SECONDS - t0))

	# 4. test: the package's autopkgtest in a copy of the tree
	t0=$SECONDS
	say "$major: debian/tests/installcheck against the installed package"
	"$here/test/lib/run.sh" copy "$here" "$r/tmp/leaf-pkgtest"
	in_root "$r" "cd /tmp/leaf-pkgtest && debian/tests/installcheck"
	t_test=$((SECONDS - t0))
	overlay_down "$ovl/install"
	rm -rf "$ovl"
	say "$major: package passed: build $t_build s, install $t_install s, pg_regress $t_test s"
}

say "packages and logs in $out"
failed=()
for m in $majors; do
	rc=0
	# in a job of its own, so that set -e holds in it (it does not in a
	# subshell run as "(...) || ...")
	(package_major "$m") >"$out/$m.log" 2>&1 &
	wait $! || rc=$?
	grep -h '^== ' "$out/$m.log" || true
	if [ $rc != 0 ]; then
		tail -n 40 "$out/$m.log"
		failed+=("$m")
		say "$m: FAILED (log $out/$m.log)"
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	say "packages failed: ${failed[*]}"
	exit 1
fi
say "packages passed: $majors ($(cd "$out" && ls ./*.deb | tr '\n' ' '))"
