#!/usr/bin/env bash
#
# test/fresh.sh: the README's two commands as a new user runs them, on a
# fresh Debian 12 machine.  Run as root; CI runs it (.ci/run).
#
#   test/fresh.sh        a new root made with debootstrap --variant=minbase
#                        (bookworm), with git and ca-certificates added and
#                        nothing else; in it, a clone of this checkout's
#                        HEAD, then, as root in the clone:
#                          1. ./install.sh, which must show segment and
#                             snowflake IDs, and ./install.sh stop;
#                          2. ./install.sh test, which builds every other
#                             major's chroot from nothing inside the root;
#                          3. test/runner_test.sh, the test runner's own
#                             test (a preparation made to fail).
#
# The root runs in a mount and PID namespace of its own (unshare): when
# the run ends, however it ends, every process started in it is gone and
# so is every mount, the chroots' inside it included.  The root itself is
# removed afterwards unless LEAF_FRESH_KEEP=yes.  Only committed work is
# tried (the clone is of HEAD).
#
# Environment:
#   LEAF_FRESH_DIR      where the root is made (default a new directory
#                       /var/tmp/leaf-fresh.*)
#   LEAF_FRESH_KEEP     "yes" to keep the root afterwards
#   LEAF_FRESH_TIMEOUT  the whole run's bound in seconds (default 5100)
#   LEAF_*              every other LEAF_ variable (LEAF_MATRIX,
#                       LEAF_MAJORS, LEAF_TESTS_NN, ...) reaches the
#                       commands inside the root
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite=bookworm
bound=${LEAF_FRESH_TIMEOUT:-5100}

say() { printf '\n=== %s: fresh: %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
	echo "fresh.sh: $*" >&2
	exit 2
}

[ "$(id -u)" = 0 ] || die "run this as root (debootstrap, chroot, mount)"

# inside: the part that runs in the namespaces, as their first process
if [ "${1:-}" = inside ]; then
	root=$2
	mount -t proc proc "$root/proc"
	mount -t sysfs sys "$root/sys"
	mount --rbind /dev "$root/dev"
	mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
	# a clean environment, as a new user's login has, with the LEAF_
	# variables of the caller
	envs=(HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 TERM=dumb)
	while IFS= read -r -d '' kv; do
		case "$kv" in
			LEAF_FRESH_*) ;;
			LEAF_* | CI=*) envs+=("$kv") ;;
		esac
	done < <(env -0)
	in_root() {
		chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/bash -c "$*"
	}
	t0=$SECONDS
	say "1. ./install.sh (the README's first command)"
	in_root "cd /root/leaf && ./install.sh" | tee "$root/root/install.out"
	grep -q -E '^ +[0-9]+ *$' "$root/root/install.out" ||
		die "./install.sh showed no segment ID"
	grep -q -E '^ +[0-9]{15,} \|' "$root/root/install.out" ||
		die "./install.sh showed no snowflake ID"
	in_root "cd /root/leaf && ./install.sh stop"
	say "./install.sh took $((SECONDS - t0)) s"

	t0=$SECONDS
	say "2. ./install.sh test (the README's second command)"
	in_root "cd /root/leaf && ./install.sh test"
	say "./install.sh test took $((SECONDS - t0)) s"

	t0=$SECONDS
	say "3. test/runner_test.sh"
	in_root "cd /root/leaf && test/runner_test.sh"
	say "test/runner_test.sh took $((SECONDS - t0)) s"
	exit 0
fi

dir=${LEAF_FRESH_DIR:-$(mktemp -d /var/tmp/leaf-fresh.XXXXXX)}
mkdir -p "$dir"
root=$dir/root
t_all=$SECONDS
# the root goes when the run ends (its namespaces, and so its processes
# and mounts, are gone by then; --one-file-system would spare a mount all
# the same)
finish() {
	if [ "${LEAF_FRESH_KEEP:-no}" = yes ]; then
		say "the root is kept: $root"
	elif grep -q " $root/" /proc/mounts; then
		say "mounts are left under $root: it is kept"
	else
		rm -rf --one-file-system "$dir"
	fi
}
trap finish EXIT

command -v debootstrap >/dev/null || {
	say "installing debootstrap on this machine"
	apt-get -o DPkg::Lock::Timeout=300 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq debootstrap >/dev/null
}
mirror=$("$here/test/lib/run.sh" mirror)
say "a new $suite root in $root (debootstrap --variant=minbase, $mirror)"
timeout 900 debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
	{ tail -n 20 "$dir/debootstrap.log"; die "debootstrap failed"; }
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# the archives of this machine's apt (its release's updates and security
# suites, a local mirror), as a new machine of this network has them
if ls /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list >/dev/null 2>&1 ||
	[ -s /etc/apt/sources.list ]; then
	rm -f "$root/etc/apt/sources.list"
	cp /etc/apt/sources.list "$root/etc/apt/" 2>/dev/null || true
	cp /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
		"$root/etc/apt/sources.list.d/" 2>/dev/null || true
fi
apt-config dump 2>/dev/null | grep -i '^Acquire::[a-z]*::Proxy' \
	>"$root/etc/apt/apt.conf.d/01proxy" || rm -f "$root/etc/apt/apt.conf.d/01proxy"
# no daemons started by package scripts: the root shares this machine's
# network, and nothing of it may outlive the run
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
say "git and ca-certificates, and a clone of $(git -C "$here" rev-parse --short HEAD)"
chroot "$root" /bin/sh -c 'DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq &&
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git ca-certificates >/dev/null' ||
	die "installing git into the root failed"
git clone -q --no-hardlinks "$here" "$root/root/leaf"
say "the root took $((SECONDS - t_all)) s"

rc=0
timeout --kill-after=30 "$bound" \
	unshare --mount --pid --fork --propagation private "$0" inside "$root" || rc=$?
[ $rc = 124 ] && echo "fresh.sh: the run was stopped after $bound s (LEAF_FRESH_TIMEOUT)"
say "the whole fresh run took $((SECONDS - t_all)) s, exit $rc"
exit $rc
