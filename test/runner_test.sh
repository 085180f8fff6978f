#!/usr/bin/env bash
#
# test/runner_test.sh: the test runner's own test.  A preparation made to
# fail must end test/majors.sh (and so ./install.sh test) with a non-zero
# status, the failed step named with its log and its first error, within
# a bound; a major's tests running beside it must be stopped, leaving no
# process behind.  Run as root, after ./install.sh test has installed what
# the tests need; test/fresh.sh runs it.  Nothing is downloaded: the
# failures come before any download.
#
# The cases:
#   1. an unknown suite (LEAF_SUITE_17): debootstrap refuses it;
#   2. a mirror that does not answer (LEAF_MIRROR on a closed port of
#      127.0.0.1);
#   3. case 1 while the host's major builds and tests: the run ends
#      within the bound all the same, and the host's step is stopped.
#
# Output: TAP, with "N passed, N failed" as the last line.
#
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d /tmp/leaf-runner-test.XXXXXX)
chmod 755 "$tmp"
bound=120
n=0 passed=0 failed=0
trap 'rm -rf --one-file-system "$tmp"' EXIT

ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
		passed=$((passed + 1))
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}

# a closed port on loopback: nothing listens there
closed_port() {
	local p
	for p in $(seq 47001 47100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}

# run_case NAME ENV... -- MAJORS...: test/majors.sh all MAJORS with the
# environment given, its own chroot directory and logs, at most 3 x
# $bound seconds; sets rc, secs and out
run_case() {
	local name=$1 t0=$SECONDS
	shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	out=$tmp/$name.out
	mkdir -p "$tmp/$name"
	env "${envs[@]}" LEAF_CHROOTS="$tmp/$name/chroots" LEAF_MAJORS_LOGS="$tmp/$name/logs" \
		LEAF_MAJORS_PACKAGE=no timeout --kill-after=10 $((3 * bound)) \
		"$here/test/majors.sh" all "$@" >"$out" 2>&1 </dev/null
	rc=$?
	secs=$((SECONDS - t0))
	sed 's/^/# /' "$out"
}

echo "1..16"

# 1. an unknown suite
run_case suite LEAF_SUITE_17=leaf-no-such-suite -- 17
[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]
ok $? "an unknown suite: the run fails (exit $rc), and was not stopped by the bound"
[ "$secs" -le "$bound" ]
ok $? "... within $bound s ($secs s)"
grep -q '17: PREPARATION FAILED' "$out" && grep -q 'No such script' "$out"
ok $? "... naming the step and debootstrap's error"

# 2. a mirror that does not answer
port=$(closed_port)
run_case mirror "LEAF_MIRROR=http://127.0.0.1:$port/debian" -- 17
[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]
ok $? "a mirror that does not answer: the run fails (exit $rc)"
[ "$secs" -le "$bound" ]
ok $? "... within $bound s ($secs s)"
grep -q '17: PREPARATION FAILED' "$out" && grep -q "127.0.0.1:$port" "$out" &&
	grep -q 'prepare.log' "$out"
ok $? "... naming the step, the mirror and the log"

# 3. the same beside the host's major, which builds and runs its tests
host=$("$here/test/lib/run.sh" major-of "$(. /etc/os-release && echo "$VERSION_CODENAME")")
if [ -n "$host" ]; then
	run_case beside LEAF_SUITE_17=leaf-no-such-suite LEAF_PACKAGES_READY=1 \
		"LEAF_TESTS_$host=test/t/010_segment_concurrency.pl" \
		"LEAF_TEST_DIR=$tmp/beside/host" -- "$host" 17
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && [ "$secs" -le "$bound" ]
	ok $? "beside the host's major: the run fails (exit $rc) within $bound s ($secs s)"
	grep -q "$host.test: started" "$out" && grep -q "$host.test: stopping it" "$out"
	ok $? "... and stops the host's step, which had started"
	sleep 2
	left=$(pgrep -a -f "$tmp/beside/host" || true)
	[ -z "$left" ]
	ok $? "... leaving no process of it${left:+: $left}"
else
	for i in 1 2 3; do ok 0 "# SKIP the host has no supported major"; done
fi

# 4. a preparation that hangs (a mirror that takes the connection and
# never answers) beside the host's major: the run's deadline ends it,
# names the step still running, and stops the host's tests
port=$(closed_port)
perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $ARGV[0],
	Listen => 16, ReuseAddr => 1) or die; @c = (); while (1) { push @c, scalar $s->accept }' "$port" &
silent=$!
if [ -n "$host" ]; then
	run_case deadline "LEAF_MIRROR=http://127.0.0.1:$port/debian" LEAF_MAJORS_TIMEOUT=$bound \
		LEAF_PACKAGES_READY=1 "LEAF_TESTS_$host=test/t/010_segment_concurrency.pl" \
		"LEAF_TEST_DIR=$tmp/deadline/host" -- "$host" 17
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && [ "$secs" -le $((bound + 40)) ]
	ok $? "a preparation that hangs: the deadline ends the run (exit $rc, $secs s)"
	grep -q "past its deadline of $bound s" "$out" && grep -q "17.prepare, for .*17.prepare.log" "$out"
	ok $? "... naming the step still running and its log"
	grep -q 'running the tests' "$tmp/deadline/logs/$host.log"
	ok $? "... after the host's tests had begun"
	sleep 2
	left=$(pgrep -a -f "$tmp/deadline/host" || true)
	[ -z "$left" ]
	ok $? "... which left no process${left:+: $left}"
else
	for i in 1 2 3 4; do ok 0 "# SKIP the host has no supported major"; done
fi
# 5. the same run stopped from outside (SIGTERM, as a CI's limit or a
# Ctrl-C does) while the host's tests run and the preparation hangs:
# exit 130 at once, with no process of either step left
if [ -n "$host" ]; then
	mkdir -p "$tmp/term"
	t0=$SECONDS
	env "LEAF_MIRROR=http://127.0.0.1:$port/debian" LEAF_PACKAGES_READY=1 \
		"LEAF_TESTS_$host=test/t/010_segment_concurrency.pl" "LEAF_TEST_DIR=$tmp/term/host" \
		LEAF_CHROOTS="$tmp/term/chroots" LEAF_MAJORS_LOGS="$tmp/term/logs" LEAF_MAJORS_PACKAGE=no \
		"$here/test/majors.sh" all "$host" 17 >"$tmp/term.out" 2>&1 </dev/null &
	run=$!
	for i in $(seq 1 $bound); do
		grep -q 'running the tests' "$tmp/term/logs/$host.log" 2>/dev/null && break
		sleep 1
	done
	sleep 5
	kill -TERM "$run"
	wait "$run"
	rc=$?
	secs=$((SECONDS - t0))
	sed 's/^/# /' "$tmp/term.out"
	[ "$rc" = 130 ]
	ok $? "stopped with SIGTERM while the host's tests run: exit 130 ($rc)"
	sleep 1
	left=$(pgrep -a -f "$tmp/term/" || true)
	[ -z "$left" ]
	ok $? "... and no process of its steps is left${left:+: $left}"
else
	for i in 1 2; do ok 0 "# SKIP the host has no supported major"; done
fi
kill "$silent" 2>/dev/null

# 6. without the runner's bound (the old waits looped for ever): the
# result files are written even by a step that died
[ -s "$tmp/suite/logs/17.prepare.rc" ] && [ "$(cat "$tmp/suite/logs/17.prepare.rc")" != 0 ]
ok $? "the failed preparation wrote its exit status ($(cat "$tmp/suite/logs/17.prepare.rc" 2>/dev/null))"

echo "runner: $passed passed, $failed failed"
[ "$failed" = 0 ]
