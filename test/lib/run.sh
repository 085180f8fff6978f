#!/usr/bin/env bash
#
# test/lib/run.sh: what ./install.sh test and test/majors.sh share.  Run
# as root, on the host or inside a major's chroot.
#
#   test/lib/run.sh majors            the supported majors, oldest first
#   test/lib/run.sh suite MAJOR       the Debian suite that has MAJOR
#   test/lib/run.sh major-of SUITE    the major of a Debian suite (nothing
#                                     if none)
#   test/lib/run.sh mirror            the Debian mirror this machine's apt
#                                     uses (for the chroots)
#   test/lib/run.sh copy SRC DIR      copy a checkout to DIR (no .git, no
#                                     demo server)
#   test/lib/run.sh build DIR PG_CONFIG [CFLAGS [test-only]]
#                                     DIR made postgres's, and in it, as
#                                     postgres: the default build with
#                                     -Werror, which must hold no
#                                     leaf.test_* setting, then the test
#                                     build (LEAF_TEST_HOOKS=1), alone
#                                     with test-only; installs the test
#                                     build (as root)
#   test/lib/run.sh check DIR PG_CONFIG [TESTS]
#                                     in DIR, as postgres: make
#                                     installcheck (FF1 vectors, pg_regress,
#                                     the TAP files TESTS, globs relative
#                                     to DIR, default all), then each TAP
#                                     file's time against its budget, and
#                                     on failure what failed and its logs
#
# Environment of "check":
#   LEAF_TEST_JOBS     TAP files run at once (default 4).  Most files wait
#                      (restarts, leases, timeouts) rather than compute;
#                      each has its own data directories, and its ports
#                      come from PostgreSQL::Test::Cluster's reservations
#                      in PG_TEST_PORT_DIR, shared by every run on the
#                      machine.  The files start longest first.
#   LEAF_UPGRADE_FROM  the older major's directory for
#                      test/t/036_pg_upgrade_majors.pl, which is left out
#                      without it
#   PG_TEST_PORT_DIR   the port reservations (default /tmp/leaf-portlock)
#
# test/t/budgets lists each TAP file's budget in seconds (the time it
# takes on two cores with the other files of its run beside it, and some
# room); a file not listed has 120 s.  A file over its budget is named at
# the end of the run: it does not fail the run, as a loaded machine is
# slow, but it shows where the time goes.
#
set -euo pipefail

# One list of supported majors, and the Debian suite whose archive has
# each: 16 is in no Debian suite, so it is not tested and not claimed.
leaf_majors="15 17 18 19"
leaf_suites="15:bookworm 17:trixie 18:sid 19:experimental"

die() {
	echo "run.sh: $*" >&2
	exit 2
}

# LEAF_SUITE_<NN> names another suite for major NN (the runner's own
# test, test/runner_test.sh, gives one that does not exist)
suite_of() {
	local p var=LEAF_SUITE_$1
	if [ -n "${!var:-}" ]; then
		echo "${!var}"
		return 0
	fi
	for p in $leaf_suites; do
		[ "${p%%:*}" = "$1" ] && { echo "${p#*:}"; return 0; }
	done
	die "no Debian suite has PostgreSQL $1 (supported: $leaf_majors)"
}

major_of() {
	local p
	for p in $leaf_suites; do
		[ "${p#*:}" = "$1" ] && { echo "${p%%:*}"; return 0; }
	done
	return 0
}

# The URI of the Debian archive that this machine's apt takes its own
# release from (a local mirror or proxy included), else Debian's.
mirror() {
	local codename= uri
	[ -r /etc/os-release ] && codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	uri=$(apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
		'Identifier: Packages' 2>/dev/null |
		awk -v s="$codename" '$2 == s && $3 == "main" { print $1; exit }')
	echo "${uri:-http://deb.debian.org/debian/}"
}

copy() {
	local src=$1 dir=$2
	mkdir -p "$dir"
	(cd "$src" && tar --exclude=./.git --exclude=./.pgdata -cf - .) | (cd "$dir" && tar -xf -)
}

as_postgres() {
	local dir=$1
	shift
	su postgres -s /bin/bash -c "cd '$dir' && $*"
}

build() {
	local dir=$1 pgc=$2 cflags=${3:-} kind=${4:-}
	local mk="make -s -j$(nproc) PG_CONFIG=$pgc with_llvm=no"
	local b=
	# initdb refuses root: the tests run as postgres, in a tree of its own
	chown -R postgres:postgres "$dir"
	# make clean must work: a failure here is a broken Makefile
	if [ "$kind" != test-only ]; then
		b="$mk clean >/dev/null && $mk PG_CFLAGS='-Werror $cflags'"
		b="$b && { ! grep -q -a leaf.test_ leaf.so || { echo 'run.sh: the default build has leaf.test_* settings' >&2; false; }; } && "
	fi
	b="$b$mk clean >/dev/null && $mk PG_CFLAGS='-Werror $cflags' LEAF_TEST_HOOKS=1"
	as_postgres "$dir" "$b"
	# leaf's scripts of an earlier install go first: make install leaves
	# an upgrade script the tree no longer has, which the tests would find
	rm -f "$("$pgc" --sharedir)"/extension/leaf--*.sql
	(cd "$dir" && $mk install >/dev/null)
}

# the budget of a TAP file, in seconds
budget_of() {
	local b
	b=$(awk -v f="$1" '$2 == f { print $1; exit }' "$2" 2>/dev/null || true)
	echo "${b:-120}"
}

check() {
	local dir=$1 pgc=$2 tests=${3:-} jobs=${LEAF_TEST_JOBS:-4}
	local portdir=${PG_TEST_PORT_DIR:-/tmp/leaf-portlock}
	local budgets=$dir/test/t/budgets f files=() rc=0 skip036=

	mkdir -p "$portdir"
	chmod 1777 "$portdir"
	# all files by default; 036 only with an older major to upgrade from
	if [ -z "$tests" ]; then
		tests='test/t/*.pl'
		[ -n "${LEAF_UPGRADE_FROM:-}" ] || skip036=1
	fi
	# the files, longest budget first, so that the long ones do not start last
	for f in $(cd "$dir" && eval "ls -d $tests"); do
		[ -n "$skip036" ] && [[ $f == test/t/036_* ]] && continue
		files+=("$(budget_of "$f" "$budgets") $f")
	done
	[ ${#files[@]} -gt 0 ] || die "no TAP file matches: $tests"
	local order
	order=$(printf '%s\n' "${files[@]}" | sort -k1,1nr -k2 | awk '{ print $2 }' | tr '\n' ' ')

	# the port reservations are shared with the runs beside this one,
	# whose user postgres may have another uid (a chroot's): with umask
	# 0000 each may open the others' files (PostgreSQL::Test::Cluster opens
	# them read-write).  The servers set their own umask.
	set +e
	# one locale for every run, whatever the caller's (a new minimal root
	# has no LANG, and pg_regress drops LC_ALL): the TAP files' servers
	# and the pg_regress instance are UTF8, in C.UTF-8
	as_postgres "$dir" "umask 0000 && export LANG=C.UTF-8 && unset LC_ALL LANGUAGE && ${LEAF_UPGRADE_FROM:+LEAF_UPGRADE_FROM=$LEAF_UPGRADE_FROM} PG_TEST_PORT_DIR=$portdir make installcheck PG_CONFIG=$pgc with_llvm=no LEAF_TEST_JOBS=$jobs PROVE_TESTS='$order'" 2>&1 |
		tee "$dir/installcheck.out"
	rc=${PIPESTATUS[0]}
	set -e
	# no leaf TAP file skips itself: one that prove reports as skipped
	# died in a way that hid its failure
	if [ "$rc" = 0 ] && grep -q '^test/t/.*\.pl \.* skipped' "$dir/installcheck.out"; then
		echo "run.sh: a TAP file was skipped as a whole"
		rc=1
	fi
	tap_times "$dir" "$budgets"
	if [ "$rc" != 0 ]; then
		report "$dir"
	fi
	return "$rc"
}

# each TAP file's time (prove --timer: "... ok   12345 ms ( ... )"), the
# slowest first, and the files over their budget
tap_times() {
	local dir=$1 budgets=$2 line f ms b over=()
	[ -f "$dir/installcheck.out" ] || return 0
	echo "== TAP files by time (budget in parentheses)"
	sed -n -E 's/^(\[[0-9:]+\] )?(test\/t\/[^ ]+\.pl) \.+ [^0-9]*([0-9]+) ms.*/\3 \2/p' "$dir/installcheck.out" |
		sort -nr >"$dir/tap-times.txt" || true
	while read -r ms f; do
		b=$(budget_of "$f" "$budgets")
		printf '%6d s  (%4d s)  %s\n' $((ms / 1000)) "$b" "$f"
		[ $((ms / 1000)) -le "$b" ] || over+=("$f: $((ms / 1000)) s, budget $b s")
	done <"$dir/tap-times.txt"
	if [ ${#over[@]} -gt 0 ]; then
		echo "== over budget (the run is not failed for it):"
		printf '  %s\n' "${over[@]}"
	fi
}

# what failed, with the end of each failed TAP file's log
report() {
	local dir=$1 failed f
	failed=$("$dir/test/failed_tests.sh" "$dir" | tr '\n' ' ')
	[ -f "$dir/regression.diffs" ] && cat "$dir/regression.diffs"
	for f in $failed; do
		case "$f" in
			test/t/*)
				f=${f#test/t/}
				log="$dir/tmp_check/log/regress_log_${f%.pl}"
				echo "== $log: the failed assertions"
				# each "not ok" with the diagnostics that follow it
				awk '/ not ok /{n = 12} n > 0 {print; n--}' "$log" | head -n 60
				echo "== $log: its end"
				tail -n 60 "$log"
				;;
		esac
	done
	echo "== failed: ${failed:-(no test file named; see the output above)}"
	echo "== kept for a look: $dir (logs in $dir/tmp_check/log)"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
	majors) echo "$leaf_majors" ;;
	suite) suite_of "${1:?usage: run.sh suite MAJOR}" ;;
	major-of) major_of "${1:?usage: run.sh major-of SUITE}" ;;
	mirror) mirror ;;
	copy) copy "${1:?usage: run.sh copy SRC DIR}" "${2:?usage: run.sh copy SRC DIR}" ;;
	build) build "${1:?usage: run.sh build DIR PG_CONFIG [CFLAGS [test-only]]}" "${2:?}" "${3:-}" "${4:-}" ;;
	check) check "${1:?usage: run.sh check DIR PG_CONFIG [TESTS]}" "${2:?}" "${3:-}" ;;
	*) die "usage: run.sh majors|suite|major-of|mirror|copy|build|check ..." ;;
esac
