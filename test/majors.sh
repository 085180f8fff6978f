#!/usr/bin/env bash
#
# test/majors.sh: build leaf with -Werror and run its tests against other
# PostgreSQL major versions, each in a Debian chroot.  Run as root on a
# Debian machine that reaches Debian's archive.
#
#   test/majors.sh [MAJOR...]          prepare the chroots, then build and
#                                      test in each (the default), then
#                                      build and test its Debian package
#                                      (test/package.sh)
#   test/majors.sh prepare [MAJOR...]  only create the chroots and install
#                                      the packages into them
#   test/majors.sh build [MAJOR...]    only build with -Werror (after prepare)
#   test/majors.sh run [MAJOR...]      only build and test (after prepare)
#   test/majors.sh shell MAJOR         a root shell in MAJOR's chroot, with
#                                      its mounts (gone again on exit)
#   test/majors.sh bench [MAJOR...]    build, then run test/bench/leaf_bench.sh
#                                      in each major's chroot, one major
#                                      after the other, and compare the
#                                      reports side by side
#                                      (test/bench/leaf_bench_compare.py)
#
# The supported majors, and the Debian suite each comes from, are listed
# once, in test/lib/run.sh ("run.sh majors", "run.sh suite MAJOR"); 19
# comes from experimental, over unstable.  The chroots take their packages
# from the Debian archive that this machine's apt uses ("run.sh mirror").
# The major of the host's own release (15 on Debian 12) is tested on the
# host, by ./install.sh test; the others in a chroot each.  Both build and
# test with test/lib/run.sh.
#
# Upgrades with pg_upgrade (test/t/036_pg_upgrade_majors.pl) need the
# older major in the same root: the chroots of 17, 18 and 19 also get the
# server of 15 from bookworm (pinned low, so that nothing else comes from
# there), leaf is built for both, and the test runs with LEAF_UPGRADE_FROM
# naming the older one.  So the matrix tests 15 -> 17, 15 -> 18 and
# 15 -> 19.  17 -> 18 and 17 -> 19 (LEAF_UPGRADE_FROM_18=17,
# LEAF_UPGRADE_FROM_19=17, with 17 from trixie) fail today for any table,
# leaf or not: trixie's 17.12 gives every column an attribute option
# "pg_attver", which pg_dump of 18.6 and 19~rc1 carries into the new
# cluster and their servers refuse ('unrecognized parameter "pg_attver"').
#
# ./install.sh test runs this script for every supported major (all),
# after it installed what the run needs on the host (debootstrap among
# it): nothing here installs on the host while steps run side by side.
#
# Two matrices (LEAF_MATRIX):
#   short (the default, and so the README's test command): the host's
#          major runs every test; each other major is prepared from
#          nothing if need be, built with -Werror, and runs pg_regress,
#          the short list of TAP files below and its Debian package.
#          Its chroot gets only what that list needs (no Patroni, no
#          Prometheus).  This is what a fresh machine runs within CI's
#          time, chroots included.
#   full   every major runs its whole default set (see default_tests):
#          the warm path, for a machine whose chroots are ready.
#
# Environment:
#   LEAF_MATRIX        short or full (default short)
#   LEAF_MAJORS        majors when none are named (default: every
#                      supported one but the host's), in the order they
#                      start
#   LEAF_CHROOTS       where the chroots are kept between runs (default
#                      /var/cache/leaf/chroots); one directory per suite
#   LEAF_MAJORS_JOBS   how many majors build and test at once (default 2)
#   LEAF_MAJORS_PREPARE_JOBS  how many chroots are prepared at once
#                      (default 2)
#   LEAF_MAJORS_TIMEOUT  the run's deadline in seconds (default 4800):
#                      past it, the steps still running are named with
#                      their logs and stopped, and the run fails
#   LEAF_MIRROR        the Debian archive of the chroots (default: the
#                      one of this machine's apt, "run.sh mirror")
#   LEAF_TESTS_<NN>    the TAP files for major NN, as paths or globs
#                      relative to the checkout, or "all"; the default
#                      depends on LEAF_MATRIX (see default_tests below)
#   LEAF_MAJORS_LOGS   where each major's log goes (default: a new
#                      directory under /tmp)
#   LEAF_MAJORS_CFLAGS more compiler flags for the chroot builds, such as
#                      -DUSE_ASSERT_CHECKING (leaf's and the headers'
#                      assertions, against a server built without them),
#                      which 19's build has by default;
#                      LEAF_MAJORS_CFLAGS_NN for major NN only
#   LEAF_UPGRADE_FROM_<NN>  the older major whose upgrade to NN is tested
#                      (default: see upgrade_from below); empty for none
#   BENCH_*, N, REPS, PGBENCH_REPS, T
#                      passed to leaf_bench.sh by "bench"; BENCH_SECTIONS
#                      is "1 2" there unless set (one session and pgbench)
#   LEAF_MAJORS_PACKAGE  "no" to leave out the Debian package of each
#                      major (test/package.sh), built and tested after
#                      the major's tests passed (default "yes")
#   LEAF_MAJORS_HOST   "no" to test the host's own major in a chroot as
#                      well, which leaves the host's PostgreSQL installation
#                      as it is (default "yes": on the host)
#
# A run is made of steps that run side by side (a chroot's preparation,
# a major's tests, its package), each with a log; the run waits for none
# without a bound (see "The steps of a run" below).  A failed
# preparation ends the run within seconds, with the first errors of its
# log, and the exit status is non-zero.
#
# Each major's chroot gets /proc, /dev, /dev/pts, a tmpfs on /dev/shm (for
# PostgreSQL's POSIX shared memory) and the TAP tests' port lock
# directory, shared by all runs so that tests running side by side do not
# hand out the same port.  Everything is unmounted again when the run
# ends, failed or not.  The exit status is non-zero if any major failed,
# and the last lines name the majors and test files that failed.  The
# build tree of a major (/tmp/leaf-test-NN inside its chroot, with the
# TAP tests' data directories) is removed when the major passed and kept
# when it failed; the log says where.
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
chroots=${LEAF_CHROOTS:-/var/cache/leaf/chroots}
jobs=${LEAF_MAJORS_JOBS:-2}
prepare_jobs=${LEAF_MAJORS_PREPARE_JOBS:-2}
deadline=${LEAF_MAJORS_TIMEOUT:-4800}
matrix=${LEAF_MATRIX:-short}
# the Debian archive of this machine's own apt configuration
mirror=${LEAF_MIRROR:-$("$here/test/lib/run.sh" mirror)}
portdir=/tmp/leaf-portlock

say() { printf '== %s: %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
	echo "majors.sh: $*" >&2
	exit 2
}

# suite_of MAJOR: the Debian suite (and chroot name) for a major
suite_of() {
	"$here/test/lib/run.sh" suite "$1" || exit 2
}

# upgrade_from MAJOR: the older major installed beside MAJOR in its
# chroot, whose pg_upgrade to MAJOR is tested (nothing for none): 15, the
# oldest supported (17 cannot be upgraded to 18 or 19 today, see above).
upgrade_from() {
	local var=LEAF_UPGRADE_FROM_$1
	if [ -n "${!var+set}" ]; then
		echo "${!var}"
		return
	fi
	case "$1" in
		17 | 18 | 19) echo 15 ;;
	esac
}

# is_host MAJOR: is MAJOR the host's own (its suite the host's release)?
# Then it is tested on the host, by ./install.sh test.
is_host() {
	local codename=
	[ "${LEAF_MAJORS_HOST:-yes}" = no ] && return 1
	[ -r /etc/os-release ] && codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ "$(suite_of "$1")" = "$codename" ]
}

# The short list: one or two files of each area, the upgrades from the
# older major (024, 036) first among them, as the one thing only a
# matrix can test: many clients, a kill -9, a fleet's failover (064: the
# allocation database a Patroni cluster on etcd, a kill -9 of its leader
# and a switchover, segments and worker-ID leases drawn from it), snowflake
# IDs with ZooKeeper, clocks, layouts, bad input, public IDs, and the copy
# matrix (300-302: a standby, its promotions, clones, PITR, dumps, a
# template, logical replication and its cut-over, pg_upgrade, against the
# counters and the leases, which takes, holds and refuses worker IDs of
# the allocation database on each major; the rest of the database
# source, 200, is the worker's own logic and runs on the host), the
# shared-server check (303: one tenant against every shared resource),
# and pg_partman keeping snowflake-keyed partitions ahead (076), with the
# pg_partman of the major's suite (its versions differ).  The
# limits of the code (001) read the tree only and take a second: listed
# so that they hold in every matrix, a chroot of the host's major too.
short_tests='test/t/001_code_limits.pl test/t/010_segment_concurrency.pl test/t/012_segment_kill9.pl
	test/t/024_extension_upgrade.pl test/t/036_pg_upgrade_majors.pl
	test/t/064_patroni_etcd_fleet.pl test/t/076_snowflake_partman.pl test/t/100_snowflake_concurrency.pl
	test/t/110_snowflake_bad_input.pl test/t/140_snowflake_clock.pl
	test/t/190_public_id.pl test/t/192_snowflake_layouts.pl
	test/t/300_copy_matrix_complete.pl test/t/301_copy_matrix.pl
	test/t/302_copy_matrix_promotions.pl test/t/303_shared_server.pl'

# default_tests MAJOR: the TAP files run by default for a major.  The
# host's own gets the whole suite.  In the short matrix, the others get
# the short list; in the full one, 17 gets the whole suite, and 18 and 19
# the segment (01x-03x, including the upgrade tests 024 and 036),
# snowflake and public ID (1xx) files, pg_partman (076), the copy matrix
# (30x) and the chaos run.
default_tests() {
	if is_host "$1"; then
		echo all
	elif [ "$matrix" = short ]; then
		echo $short_tests
	else
		case "$1" in
			15 | 17) echo all ;;
			*) echo 'test/t/0[1-4]*.pl test/t/076_snowflake_partman.pl test/t/1*.pl test/t/30*.pl test/t/900_chaos_fleet.pl' ;;
		esac
	fi
}

# tests_of MAJOR: the TAP files MAJOR runs ("all" for the whole suite)
tests_of() {
	local var=LEAF_TESTS_$1
	echo "${!var:-$(default_tests "$1")}"
}

# uses_of MAJOR: which of ZooKeeper, Patroni, Prometheus and pg_partman
# MAJOR's TAP files use
uses_of() {
	local major=$1 tests
	tests=$(tests_of "$major")
	if is_host "$major"; then
		# the host's chroot serves its Debian package only
		return 0
	elif [ "$tests" = all ]; then
		echo 'LeafZK LeafPatroni prometheus pg_partman'
	else
		{ cd "$here" && eval "grep -h -o -E 'LeafZK|LeafPatroni|prometheus|pg_partman' $tests" 2>/dev/null || true; } |
			sort -u | tr '\n' ' '
	fi
}

# packages_of MAJOR: what MAJOR's chroot needs for its build, its tests
# (ZooKeeper, Patroni and Prometheus only if one of its TAP files uses
# them) and its Debian package
packages_of() {
	local major=$1 uses
	uses=$(uses_of "$major")
	echo "build-essential postgresql-$major postgresql-server-dev-$major"
	echo "libzookeeper-mt-dev libpq-dev libssl-dev libipc-run-perl libdbd-pg-perl faketime"
	case " $uses " in *' LeafZK '* | *' LeafPatroni '*) echo "zookeeper default-jre-headless" ;; esac
	case " $uses " in *' LeafPatroni '*) echo "patroni python3-kazoo python3-pysyncobj etcd-server python3-etcd" ;; esac
	case " $uses " in *' prometheus '*) echo "prometheus-postgres-exporter prometheus-sql-exporter prometheus" ;; esac
	"$here/test/package.sh" build-deps
}

# optional_packages_of MAJOR: what MAJOR's chroot gets only where its
# suite has a package of it for MAJOR: pgTAP (a new major may have none
# yet, see pgtap_fallback) and, if a TAP file uses it, pg_partman
# (test/t/076_snowflake_partman.pl fails without it where Debian has it)
optional_packages_of() {
	local major=$1
	echo "postgresql-$major-pgtap"
	case " $(uses_of "$major") " in *' pg_partman '*) echo "postgresql-$major-partman" ;; esac
}

# extra_cflags MAJOR: the compiler flags of the build under test.  19's
# build compiles leaf's assertions in (and those of the headers' inline
# functions), against Debian's server, which is built without them (an
# assertion calling a function that only an assert-enabled server has
# would keep leaf.so from loading, and every test would fail).
# LEAF_MAJORS_CFLAGS_NN, or LEAF_MAJORS_CFLAGS for all, overrides it;
# "bench" builds without assertions.
extra_cflags() {
	local var=LEAF_MAJORS_CFLAGS_$1
	if [ -n "${!var+set}" ]; then
		echo "${!var}"
	elif [ -n "${LEAF_MAJORS_CFLAGS+set}" ]; then
		echo "$LEAF_MAJORS_CFLAGS"
	elif [ "$1" = 19 ]; then
		echo -DUSE_ASSERT_CHECKING
	fi
}

# ---------------------------------------------------------------------
# Mounts
# ---------------------------------------------------------------------

# mount_chroot ROOT: the mounts a test run needs; umount_chroot undoes them
mount_chroot() {
	local root=$1
	mkdir -p "$root/proc" "$root/dev" "$root$portdir" "$portdir"
	chmod 1777 "$portdir"
	mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
	mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
	mountpoint -q "$root/dev/pts" || mount --bind /dev/pts "$root/dev/pts"
	# the host's /dev/shm is not shared: a tmpfs of the chroot's own
	mountpoint -q "$root/dev/shm" || mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
	mountpoint -q "$root$portdir" || mount --bind "$portdir" "$root$portdir"
}

# Processes left running inside ROOT (a ZooKeeper or PostgreSQL of a test
# that was interrupted): their root directory is the chroot.
chroot_pids() {
	local root p
	root=$(readlink -f "$1")
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && echo "${p#/proc/}"
	done
	return 0
}

umount_chroot() {
	local root=$1 m pids
	pids=$(chroot_pids "$root")
	if [ -n "$pids" ]; then
		# shellcheck disable=SC2086
		kill -TERM $pids 2>/dev/null || true
		sleep 2
		pids=$(chroot_pids "$root")
		# shellcheck disable=SC2086
		[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
	fi
	for m in "$portdir" /dev/shm /dev/pts /dev /proc; do
		if mountpoint -q "$root$m"; then
			umount "$root$m" 2>/dev/null || umount -l "$root$m"
		fi
	done
}

# in_chroot ROOT CMD: run a shell command as root inside the chroot
in_chroot() {
	local root=$1
	shift
	LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
		chroot "$root" /bin/bash -c "$*"
}

# ---------------------------------------------------------------------
# Preparing a chroot
# ---------------------------------------------------------------------

# prepare MAJOR: create (or bring up to date) the major's chroot and
# install what leaf's build and tests need.  A chroot whose packages were
# installed before is only checked with apt-get install (quick).
prepare() {
	local major=$1 suite root base t0
	suite=$(suite_of "$major")
	root=$chroots/$suite
	base=$suite
	[ "$suite" = experimental ] && base=sid
	t0=$SECONDS

	mkdir -p "$chroots"
	lock_chroot "$root"
	if [ ! -x "$root/usr/bin/apt-get" ]; then
		# installed before any step started (./install.sh test, or the
		# top of this script): never here, beside other apt runs
		command -v debootstrap >/dev/null ||
			die "debootstrap is not installed (./install.sh test installs it)"
		say "$major: debootstrap $base into $root, from $mirror"
		# what an interrupted run left (no apt-get: never finished)
		[ -d "$root" ] && umount_chroot "$root"
		rm -rf --one-file-system "$root" "$root.new"
		# through the proxy of this machine's apt, if it has one
		local proxy=
		eval "$(apt-config shell proxy Acquire::http::Proxy)"
		http_proxy=${proxy:-${http_proxy:-}} timeout 1200 \
			debootstrap --variant=minbase "$base" "$root.new" "$mirror" >"$root.debootstrap.log" 2>&1 ||
			{ tail -n 20 "$root.debootstrap.log" >&2; die "debootstrap $base failed (log $root.debootstrap.log)"; }
		mv "$root.new" "$root"
		say "$major: debootstrap took $((SECONDS - t0)) s"
	fi

	# unstable and experimental are not signed with an expiry in mind: a
	# mirror snapshot is past its Valid-Until long before it is replaced
	if [ "$base" = sid ]; then
		echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99leaf-valid-until"
	fi
	if [ "$suite" = experimental ]; then
		echo "deb $mirror experimental main" >"$root/etc/apt/sources.list.d/experimental.list"
		# experimental's PostgreSQL and what it needs of the same source
		# (libpq); everything else stays as unstable has it
		cat >"$root/etc/apt/preferences.d/leaf-experimental" <<'EOF'
Package: postgresql* libpq* libecpg* libpgtypes*
Pin: release a=experimental
Pin-Priority: 500
EOF
	fi
	# the older major for the upgrade test, from its own suite: pinned
	# below the chroot's suite, so that only what is missing here (that
	# server and the libraries it was built with) comes from there
	local old old_suite
	old=$(upgrade_from "$major")
	rm -f "$root"/etc/apt/sources.list.d/leaf-upgrade-*.list "$root"/etc/apt/preferences.d/leaf-upgrade-*
	if [ -n "$old" ]; then
		old_suite=$(suite_of "$old")
		echo "deb $mirror $old_suite main" >"$root/etc/apt/sources.list.d/leaf-upgrade-$old_suite.list"
		printf 'Package: *\nPin: release n=%s\nPin-Priority: 100\n' "$old_suite" \
			>"$root/etc/apt/preferences.d/leaf-upgrade-$old_suite"
	fi
	# no daemons started by package scripts, no default cluster
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	mkdir -p "$root/etc/postgresql-common/createcluster.d"
	echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.d/leaf.conf"
	# A chroot is a scratch root, rebuilt from nothing when lost: dpkg
	# neither syncs each file it unpacks nor unpacks documentation,
	# manuals and translations (no test reads them; pg_regress sets
	# LC_MESSAGES=C).  On a fresh machine the packages are unpacked while
	# the tests run beside them, and each sync waits behind their I/O.
	printf '%s\n' force-unsafe-io 'path-exclude=/usr/share/doc/*' \
		'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' \
		'path-exclude=/usr/share/locale/*' >"$root/etc/dpkg/dpkg.cfg.d/leaf-scratch"
	echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/99leaf-no-translations"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	# the proxy this machine's apt goes through, if any, for the chroot's
	apt-config dump 2>/dev/null | grep -i '^Acquire::[a-z]*::Proxy' \
		>"$root/etc/apt/apt.conf.d/01leaf-proxy" || rm -f "$root/etc/apt/apt.conf.d/01leaf-proxy"

	local pkgs optional
	pkgs=$(packages_of "$major")
	optional=$(optional_packages_of "$major")
	mount_chroot "$root"
	# shellcheck disable=SC2064
	trap "umount_chroot '$root'" EXIT
	say "$major: installing packages in $root"
	t0=$SECONDS
	# the optional packages come later, those the suite has of them
	in_chroot "$root" "timeout 1800 apt-get update -qq && timeout 1800 apt-get install -y -qq --no-install-recommends $(echo $pkgs) &&
		have=\$(for p in $(echo $optional); do
			apt-cache show --no-all-versions \$p 2>/dev/null | grep -q '^Version: ' && echo \$p || true
		done) && echo optional packages this suite has: \${have:-none} &&
		{ [ -z \"\$have\" ] || timeout 1800 apt-get install -y -qq --no-install-recommends \$have; }" \
		>"$root.apt.log" 2>&1 ||
		{ tail -n 30 "$root.apt.log" >&2; die "installing packages into $root failed"; }
	in_chroot "$root" "test -x /usr/lib/postgresql/$major/bin/postgres" ||
		die "$root has no PostgreSQL $major after installing it"
	pgtap_fallback "$root" "$major" >>"$root.apt.log" 2>&1 ||
		{ tail -n 30 "$root.apt.log" >&2; die "no pgTAP for PostgreSQL $major in $root"; }
	if [ -n "$old" ]; then
		old_major "$root" "$old" >>"$root.apt.log" 2>&1 ||
			{ tail -n 30 "$root.apt.log" >&2; die "installing PostgreSQL $old into $root failed"; }
	fi
	say "$major: packages took $((SECONDS - t0)) s"
	umount_chroot "$root"
	trap - EXIT
}

# old_major ROOT OLD: the server of the older major OLD, and its headers
# and PGXS to build leaf against.  The headers come from the package's
# files alone (dpkg-deb -x): the package depends on the clang and LLVM of
# its own release, for JIT bitcode, which leaf does not build
# (with_llvm=no) and which would be most of the download.
old_major() {
	local root=$1 old=$2
	in_chroot "$root" "
		set -e
		apt-get install -y -qq --no-install-recommends postgresql-$old
		if [ ! -f /usr/include/postgresql/$old/server/postgres.h ]; then
			tmp=\$(mktemp -d) && chmod 755 \$tmp
			cd \$tmp && apt-get download -q postgresql-server-dev-$old && dpkg-deb -x ./*.deb /
			cd / && rm -rf \$tmp
		fi
		test -x /usr/lib/postgresql/$old/bin/pg_upgrade
		test -f /usr/include/postgresql/$old/server/postgres.h"
}

# pgtap_fallback ROOT MAJOR: a major without a pgTAP package of its own
# (experimental's 19 has none yet) gets the extension files of the newest
# major that has one.  pgTAP is SQL only, and its install script differs
# between majors only for those older than 11.
pgtap_fallback() {
	local root=$1 major=$2
	local ext=/usr/share/postgresql/$major/extension
	[ -f "$root$ext/pgtap.control" ] && return 0
	in_chroot "$root" "
		set -e
		pkg=\$(apt-cache pkgnames postgresql- | grep -E '^postgresql-[0-9]+-pgtap\$' | sort -V | tail -n 1)
		[ -n \"\$pkg\" ]
		from=\$(echo \$pkg | sed 's/postgresql-\\([0-9]*\\)-pgtap/\\1/')
		tmp=\$(mktemp -d)
		cd \$tmp && apt-get download -q \$pkg && dpkg-deb -x ./*.deb x
		cp x/usr/share/postgresql/\$from/extension/pgtap* $ext/
		echo \"pgTAP for $major: the extension files of \$pkg\"
		rm -rf \$tmp"
}

# ---------------------------------------------------------------------
# Building and testing in a chroot
# ---------------------------------------------------------------------

# test_major MAJOR LOG: copy the checkout into the chroot, build it with
# -Werror and run pg_regress and the major's TAP files as user postgres
test_major() {
	local major=$1 suite root dir tests rc=0 t0
	suite=$(suite_of "$major")
	root=$chroots/$suite
	[ -x "$root/usr/lib/postgresql/$major/bin/postgres" ] ||
		die "no PostgreSQL $major in $root: run test/majors.sh prepare $major"
	tests=$(tests_of "$major")
	dir=/tmp/leaf-test-$major
	lock_chroot "$root"

	mount_chroot "$root"
	# shellcheck disable=SC2064
	trap "umount_chroot '$root'" EXIT
	rm -rf "${root:?}$dir"
	"$here/test/lib/run.sh" copy "$here" "$root$dir"

	local pgc=/usr/lib/postgresql/$major/bin/pg_config
	local cflags old upgrade='' m
	cflags=$(extra_cflags "$major")
	old=$(upgrade_from "$major")
	if [ -n "$old" ]; then
		[ -x "$root/usr/lib/postgresql/$old/bin/pg_upgrade" ] ||
			die "no PostgreSQL $old in $root for the upgrade test: run test/majors.sh prepare $major"
		upgrade="LEAF_UPGRADE_FROM=/usr/lib/postgresql/$old"
	fi
	t0=$SECONDS
	# the older major first (its test build only): the copy stays built for
	# the major under test, whose default build and test build run.sh makes
	for m in $old $major; do
		say "$major: building for $m with -Werror $cflags"
		if ! in_chroot "$root" "cd $dir && test/lib/run.sh build $dir /usr/lib/postgresql/$m/bin/pg_config '$cflags' $([ "$m" = "$major" ] || echo test-only)"; then
			say "$major: BUILD FAILED (for $m)"
			return 1
		fi
	done
	say "$major: build took $((SECONDS - t0)) s"
	if [ "$cmd" = build ]; then
		umount_chroot "$root"
		trap - EXIT
		return 0
	fi

	[ "$tests" = all ] && tests=
	t0=$SECONDS
	say "$major: make installcheck ${tests:-(all TAP files)}"
	set +e
	in_chroot "$root" "cd $dir && $upgrade ${LEAF_TEST_JOBS:+LEAF_TEST_JOBS=$LEAF_TEST_JOBS} PG_TEST_PORT_DIR=$portdir test/lib/run.sh check $dir $pgc '$tests'"
	rc=$?
	set -e
	say "$major: tests took $((SECONDS - t0)) s, exit $rc"
	if [ $rc != 0 ]; then
		say "$major: kept for a look: $root$dir (logs in $root$dir/tmp_check/log)"
	else
		# a run leaves up to a gigabyte of data directories behind
		rm -rf "${root:?}$dir"
	fi
	umount_chroot "$root"
	trap - EXIT
	return $rc
}

# bench_major MAJOR LOGS: test/bench/leaf_bench.sh in the major's chroot,
# from the copy that test_major built and installed; the report goes to
# LOGS/MAJOR.md, its log to LOGS/MAJOR.bench.log
bench_major() {
	local major=$1 logs=$2 root dir=/tmp/leaf-test-$1 envs='' v
	root=$chroots/$(suite_of "$major")
	for v in $(compgen -v | grep -E '^(BENCH_[A-Z_]+|N|REPS|PGBENCH_REPS|T)$'); do
		[ "$v" = BENCH_OUT ] || [ "$v" = BENCH_PNG_DIR ] || envs="$envs $v=$(printf '%q' "${!v}")"
	done
	[ -n "${BENCH_SECTIONS+set}" ] || envs="$envs BENCH_SECTIONS='1 2'"
	mount_chroot "$root"
	# shellcheck disable=SC2064
	trap "umount_chroot '$root'" EXIT
	say "$major: leaf_bench.sh$envs"
	local t0=$SECONDS rc=0
	in_chroot "$root" "cd $dir && env$envs PGBIN=/usr/lib/postgresql/$major/bin BENCH_OUT=$dir/bench-out/results.md test/bench/leaf_bench.sh" \
		>"$logs/$major.bench.log" 2>&1 || rc=$?
	cp "$root$dir/bench-out/results.md" "$logs/$major.md" 2>/dev/null || rc=1
	say "$major: leaf_bench.sh took $((SECONDS - t0)) s, exit $rc"
	umount_chroot "$root"
	trap - EXIT
	return $rc
}

# package_major MAJOR: after MAJOR's tests passed, its Debian package
# built, installed into a clean root and tested (test/package.sh: overlays
# over the chroot, which stays as it was; 15's is bookworm's, prepared
# there if missing).  LEAF_MAJORS_PACKAGE=no leaves it out.
package_major() {
	local t0=$SECONDS rc=0
	[ "${LEAF_MAJORS_PACKAGE:-yes}" = no ] && return 0
	say "$1: the Debian package (test/package.sh $1)"
	# its overlays lie over the chroot, which nobody else may change meanwhile
	lock_chroot "$chroots/$(suite_of "$1")"
	LEAF_PACKAGE_OUT=$logs/package "$here/test/package.sh" "$1" || rc=$?
	[ $rc = 0 ] || echo "== $1: package failed: test/package.sh $1 (log $logs/package/$1.log)"
	say "$1: package took $((SECONDS - t0)) s, exit $rc"
	return $rc
}

# failed_files MAJOR LOG: the pg_regress and TAP files that failed
failed_files() {
	local log=$1
	[ -f "$log" ] || { echo "(no log: the step never started)"; return 0; }
	{
		# pg_regress of 16 and later, then of 15
		sed -n 's/^not ok [0-9]* *[-+] *\([a-z_0-9]*\) .*/sql\/\1.sql/p' "$log"
		sed -n 's/^test \([a-z_0-9]*\) *\.\.\. FAILED.*/sql\/\1.sql/p' "$log"
		# every file in prove's summary failed somehow (a failed test, an
		# exit status, a parse error)
		sed -n '/^Test Summary Report/,/^Files=/s/^\(test\/t\/[^ ]*\.pl\) .*/\1/p' "$log"
		sed -n 's/^\(test\/t\/[^ ]*\.pl\) \.* skipped.*/\1/p' "$log"
		# what test/failed_tests.sh found (test_major and ./install.sh say so)
		sed -n 's/^== .*failed: \(.*\)/\1/p' "$log" | tr ' ' '\n' | grep -E '^(sql|test/t)/' || true
		if grep -q 'BUILD FAILED' "$log"; then echo build; fi
		if grep -q '^== .*: package failed' "$log"; then echo package; fi
		if grep -q '^majors.sh: ' "$log"; then echo prepare; fi
	} | sort -u | tr '\n' ' '
	return 0
}

# ---------------------------------------------------------------------

# ---------------------------------------------------------------------
# The steps of a run
# ---------------------------------------------------------------------
#
# A run is made of steps, each a background process group with a log and
# a result file: MAJOR.prepare (the chroot), MAJOR.test (build and tests)
# and MAJOR.package (test/package.sh).  The loop below starts them and
# watches them, and nothing waits for a step without a bound:
#
#  - a step writes its exit status even when it dies early (its body runs
#    in a subshell of its own, with errexit, so that an "exit" or a
#    failed command in it leaves only that); a step that ended without
#    writing one was killed, and counts as failed;
#  - every process a step starts carries the step's mark in its
#    environment (LEAF_STEP), servers that detach from the process group
#    (pg_ctl, su, timeout) included, and a step is stopped by its mark;
#  - a failed preparation ends the whole run at once, with the first
#    errors of its log, rather than after the other majors' tests;
#  - the run as a whole has a deadline (LEAF_MAJORS_TIMEOUT); past it, the
#    steps still running are named with their logs, and stopped.

declare -A step_pid=() step_t0=() step_log=()

# pause SECONDS: sleep in the background and wait for it, so that Ctrl-C
# reaches this shell (with job control, a sleep in the foreground would
# take the terminal from it) and a signal ends the wait at once
pause() {
	sleep "$1" &
	wait $! 2>/dev/null || true
}

# start_step NAME LOG FUNCTION [ARG...]
start_step() {
	local name=$1 log=$2
	shift 2
	rm -f "$logs/$name.rc"
	(
		export LEAF_STEP="$$:$name"
		( set -e; "$@" )
		echo $? >"$logs/$name.rc"
	) >"$log" 2>&1 &
	step_pid[$name]=$!
	step_t0[$name]=$SECONDS
	step_log[$name]=$log
	say "$name: started (log $log)"
}

# step_result NAME: "none" (not started), "running", the step's exit
# status, or "lost" (it ended without writing one: killed from outside)
step_result() {
	local name=$1 pid=${step_pid[$1]:-}
	if [ -z "$pid" ]; then
		echo none
	elif kill -0 "$pid" 2>/dev/null; then
		echo running
	elif [ -s "$logs/$name.rc" ]; then
		cat "$logs/$name.rc"
	else
		echo lost
	fi
}

# marked_pids NAME: every process that carries step NAME's mark
marked_pids() {
	grep -l -s -z -x -F "LEAF_STEP=$$:$1" /proc/[0-9]*/environ |
		sed 's|^/proc/\([0-9]*\)/environ$|\1|' || true
}

# stop_steps: TERM to every step that has a process left, its group and
# every process with its mark (the TAP files then stop their servers),
# KILL to what is left after 20 s
stop_steps() {
	local name pid left i
	for name in "${!step_pid[@]}"; do
		pid=${step_pid[$name]}
		left=$(marked_pids "$name")
		kill -0 -- "-$pid" 2>/dev/null || [ -n "$left" ] || continue
		say "$name: stopping it"
		kill -TERM -- "-$pid" 2>/dev/null || true
		# shellcheck disable=SC2086
		[ -z "$left" ] || kill -TERM $left 2>/dev/null || true
	done
	for i in $(seq 1 20); do
		left=
		for name in "${!step_pid[@]}"; do
			left="$left $(marked_pids "$name")"
		done
		[ -z "${left// /}" ] && return 0
		pause 1
	done
	for name in "${!step_pid[@]}"; do
		kill -KILL -- "-${step_pid[$name]}" 2>/dev/null || true
	done
	# shellcheck disable=SC2086
	kill -KILL $left 2>/dev/null || true
}

# first_errors LOG: the first lines of LOG that say what went wrong
# (apt's and dpkg's errors and these scripts' own first, not the names
# of packages being unpacked), then its last lines
first_errors() {
	local log=$1
	echo "-- the first errors in $log:"
	local out
	out=$({
		grep -n -E '^(E|W): |dpkg: error|^(majors|run|package)\.sh: ' "$log" || true
		grep -n -i -E 'error|failed|fatal|not found|no such|unable|cannot|could not' "$log" |
			grep -v -E '^[0-9]+:(Selecting|Preparing|Unpacking|Setting up|Processing|Get:|I: )' || true
	} 2>/dev/null | awk '!seen[$0]++' | head -n 8)
	echo "${out:-   (none recognised)}"
	echo "-- the end of $log:"
	tail -n 15 "$log" 2>/dev/null || true
}

# lock_chroot ROOT: this step alone uses the chroot ROOT (another run on
# this machine would kill its processes and take its mounts); the lock
# goes with the step's last process
lock_chroot() {
	exec 8>"$1.lock"
	flock -n 8 || die "$1 is in use by another run on this machine (lock $1.lock)"
}

cmd=all
case "${1:-}" in
	prepare | build | run | all | shell | bench)
		cmd=$1
		shift
		;;
esac
[ "$(id -u)" = 0 ] || die "run this as root (debootstrap, chroot, mount)"
case "$matrix" in
	short | full) ;;
	*) die "LEAF_MATRIX must be short or full, not '$matrix'" ;;
esac
for v in jobs prepare_jobs deadline; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] ||
		die "LEAF_MAJORS_$(echo "$v" | tr a-z A-Z | sed 's/^DEADLINE$/TIMEOUT/') must be a whole number above 0, not '${!v}'"
done
# every supported major but the host's own, unless told
majors=${*:-${LEAF_MAJORS:-$(for m in $("$here/test/lib/run.sh" majors); do is_host "$m" || echo "$m"; done)}}
majors=$(echo $majors)
[ -n "$majors" ] || die "no major to test (LEAF_MAJORS is empty)"
for m in $majors; do
	[[ $m =~ ^[0-9]+$ ]] || die "'$m' is not a PostgreSQL major"
	suite_of "$m" >/dev/null
done

# Every background step runs in a process group of its own (job control).
set -m

# However the run ends: no step left running, nothing left running or
# mounted in the chroots that this run used (a chroot whose lock another
# run holds is that run's).  A second signal does not cut this short.
cleanup() {
	local m root
	trap - EXIT
	trap '' INT TERM
	stop_steps
	for m in $majors; do
		is_host "$m" && continue
		root=$chroots/$(suite_of "$m")
		[ -d "$root" ] || continue
		( exec 8>"$root.lock" && flock -n 8 && umount_chroot "$root" ) 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

case "$cmd" in
	shell)
		is_host "$majors" && die "$majors is the host's own PostgreSQL"
		root=$chroots/$(suite_of "$majors")
		[ -x "$root/bin/bash" ] || die "no chroot $root: test/majors.sh prepare $majors"
		lock_chroot "$root"
		mount_chroot "$root"
		# shellcheck disable=SC2064
		trap "umount_chroot '$root'" EXIT
		chroot "$root" /bin/bash -l || true
		exit 0
		;;
	bench)
		logs=${LEAF_MAJORS_LOGS:-$(mktemp -d /tmp/leaf-bench.XXXXXX)}
		# no assertions in what is measured, unless asked for
		LEAF_MAJORS_CFLAGS=${LEAF_MAJORS_CFLAGS-}
		# the copies in the chroots have no .git
		BENCH_COMMIT=${BENCH_COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)}
		if [ -n "$(git -C "$here" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
			BENCH_COMMIT="$BENCH_COMMIT, modified"
		fi
		mkdir -p "$logs"
		say "reports in $logs"
		reports=()
		for m in $majors; do
			is_host "$m" && die "bench runs in the chroots: set LEAF_MAJORS_HOST=no for $m"
			cmd=build
			(test_major "$m") >"$logs/$m.build.log" 2>&1 ||
				{ cat "$logs/$m.build.log"; die "$m: build failed"; }
			bench_major "$m" "$logs" || die "$m: leaf_bench.sh failed (see $logs/$m.bench.log)"
			reports+=("$m=$logs/$m.md")
		done
		python3 "$here/test/bench/leaf_bench_compare.py" "${reports[@]}" | tee "$logs/compare.md"
		exit 0
		;;
esac

logs=${LEAF_MAJORS_LOGS:-$(mktemp -d /tmp/leaf-majors.XXXXXX)}
mkdir -p "$logs" "$portdir"
chmod 1777 "$portdir"
rm -f "$logs"/*.rc "$logs"/*.failed
say "logs in $logs"
t_all=$SECONDS

# ---------------------------------------------------------------------
# One major's tests and package
# ---------------------------------------------------------------------

# one_major MAJOR: test one major, on the host or in its chroot (prepared
# before this step starts)
one_major() {
	local m=$1 t0=$SECONDS rc=0 var=LEAF_TESTS_$1
	if is_host "$m"; then
		say "$m: on this machine (./install.sh test)"
		local tests=${!var:-$(default_tests "$m")}
		[ "$tests" = all ] && tests=
		# the host's packages were installed before the run started
		# (prerequisites_first)
		LEAF_MAJORS='' LEAF_PG_MAJOR=$m LEAF_TESTS=$tests PG_TEST_PORT_DIR=$portdir \
			LEAF_PACKAGES_READY=1 "$here/install.sh" test || rc=$?
	else
		(test_major "$m") || rc=$?
	fi
	say "$m: done in $((SECONDS - t0)) s, exit $rc"
	return "$rc"
}

# ---------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------

# is_prepared MAJOR: may MAJOR's tests start?  The host's need no chroot;
# a chroot of an earlier run serves "build" and "run".
is_prepared() {
	is_host "$1" && return 0
	[ "$cmd" = all ] || [ "$cmd" = prepare ] || return 0
	[ "$(step_result "$1.prepare")" = 0 ]
}

# run_steps: start and watch the steps until all are done; 1 if the run
# was ended early (a failed preparation, the deadline), with the reason
# in $logs/*.failed
run_steps() {
	local m r n name preps=() works=() package=no waiting
	if [ "$cmd" = all ] || [ "$cmd" = prepare ]; then
		for m in $majors; do is_host "$m" || preps+=("$m"); done
	fi
	if [ "$cmd" = all ] && [ "${LEAF_MAJORS_PACKAGE:-yes}" != no ]; then
		package=yes
		# the host major's package is built in a chroot of its release
		for m in $majors; do is_host "$m" && preps+=("$m"); done
	fi
	[ "$cmd" = prepare ] || works=($majors)

	while :; do
		if [ $((SECONDS - t_all)) -ge "$deadline" ]; then
			say "the run is past its deadline of $deadline s (LEAF_MAJORS_TIMEOUT); still running:"
			for name in "${!step_pid[@]}"; do
				[ "$(step_result "$name")" = running ] || continue
				echo "   $name, for $((SECONDS - step_t0[$name])) s (log ${step_log[$name]})"
				echo "$name past the deadline" >"$logs/$name.failed"
			done
			return 1
		fi

		# the preparations, $prepare_jobs at a time; one that failed ends
		# the run
		n=0
		for m in "${preps[@]}"; do
			r=$(step_result "$m.prepare")
			case "$r" in
				running) n=$((n + 1)) ;;
				none)
					if [ $n -lt "$prepare_jobs" ]; then
						start_step "$m.prepare" "$logs/$m.prepare.log" prepare "$m"
						n=$((n + 1))
					fi
					;;
				0) ;;
				*)
					[ "$r" = lost ] && r="lost: it was killed"
					say "$m: PREPARATION FAILED (exit $r): test/majors.sh prepare $m"
					first_errors "$logs/$m.prepare.log"
					echo "prepare $m" >"$logs/$m.prepare.failed"
					return 1
					;;
			esac
		done

		# the tests and packages, $jobs at a time
		n=0
		for name in "${!step_pid[@]}"; do
			case "$name" in *.test | *.package)
				[ "$(step_result "$name")" = running ] && n=$((n + 1)) ;;
			esac
		done
		waiting=0
		for m in "${works[@]}"; do
			r=$(step_result "$m.test")
			if [ "$r" = none ]; then
				waiting=1
				if [ $n -lt "$jobs" ] && is_prepared "$m"; then
					start_step "$m.test" "$logs/$m.log" one_major "$m"
					n=$((n + 1))
				fi
				continue
			fi
			[ "$r" = running ] && { waiting=1; continue; }
			[ "$r" = 0 ] && [ $package = yes ] || continue
			case "$(step_result "$m.package")" in
				none)
					waiting=1
					if [ $n -lt "$jobs" ] && [ "$(step_result "$m.prepare")" = 0 ]; then
						start_step "$m.package" "$logs/$m.package.log" package_major "$m"
						n=$((n + 1))
					fi
					;;
				running) waiting=1 ;;
			esac
		done
		if [ $waiting = 0 ]; then
			for m in "${preps[@]}"; do
				[ "$(step_result "$m.prepare")" = running ] && waiting=1
			done
			[ $waiting = 0 ] && return 0
		fi
		pause 2
	done
}

# prerequisites_first: what the steps need on the host (the host major's
# packages and debootstrap), installed before any of them starts, so that
# no two apt runs on the host overlap.  ./install.sh test has done it
# before it started this script (LEAF_PACKAGES_READY).
prerequisites_first() {
	local m
	[ -z "${LEAF_PACKAGES_READY:-}" ] || return 0
	[ "$cmd" = all ] || [ "$cmd" = prepare ] || [ "$cmd" = run ] || return 0
	for m in $majors; do
		is_host "$m" || continue
		[ "$cmd" = prepare ] && break
		say "installing what the host's $m needs"
		LEAF_PG_MAJOR=$m "$here/install.sh" packages || die "installing the host's packages failed"
		return 0
	done
	command -v debootstrap >/dev/null && return 0
	say "installing debootstrap"
	LEAF_PG_MAJOR=$(echo "$majors" | awk '{ print $1 }') "$here/install.sh" debootstrap ||
		die "could not install debootstrap"
}

prerequisites_first
# errexit off around the loop, so that each step's own "set -e" holds
set +e
run_steps
rc=$?
set -e
if [ $rc != 0 ]; then
	stop_steps
	say "the run was ended early, after $((SECONDS - t_all)) s"
	echo "majors: ended early: $(cat "$logs"/*.failed 2>/dev/null | tr '\n' ';')(logs in $logs)"
	exit 1
fi
if [ "$cmd" = prepare ]; then
	say "prepared: $majors, in $((SECONDS - t_all)) s"
	exit 0
fi

failed=()
for m in $majors; do
	r=$(step_result "$m.test")
	p=0
	[ "$r" = 0 ] && [ -n "${step_pid[$m.package]:-}" ] && p=$(step_result "$m.package")
	if [ "$r" = 0 ] && [ "$p" = 0 ]; then
		say "$m: passed"
	else
		f=$(failed_files "$logs/$m.log")
		[ "$r" = lost ] && f="$f its tests were killed (lost)"
		[ "$p" = 0 ] || f="$f package (log $logs/$m.package.log)"
		failed+=("$m: $f")
	fi
done
for m in $majors; do
	cat "$logs/$m.prepare.log" "$logs/$m.log" "$logs/$m.package.log" 2>/dev/null |
		grep -h -E '^== .*(took|done in)' || true
	# the TAP files over their budget (test/t/budgets), which do not fail
	# a run but show where its time goes
	sed -n "/^== over budget/,/^[^ ]/s/^  \(test\/t\/.*\)/== $m: over budget: \1/p" "$logs/$m.log" 2>/dev/null || true
done
say "the whole run took $((SECONDS - t_all)) s"
nmajors=$(echo $majors | wc -w)
echo "majors: $((nmajors - ${#failed[@]})) passed, ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then
	# what failed, as each major's log ends (run.sh's report: the files
	# that failed and the end of their logs)
	for m in $majors; do
		[ "$(step_result "$m.test")" = 0 ] && continue
		say "$m: the end of its log ($logs/$m.log)"
		{ tail -n 150 "$logs/$m.log" 2>/dev/null || true; } | sed "s/^/$m| /"
	done
	say "FAILED"
	printf '  PostgreSQL %s\n' "${failed[@]}"
	exit 1
fi
say "all passed: $majors"
