#!/usr/bin/env bash
#
# install.sh: set up leaf on a Debian machine (run as root).
#
#   ./install.sh          install what is needed, build and install leaf,
#                         start a local PostgreSQL with leaf preloaded
#                         (data directory .pgdata/ in this checkout) and
#                         show IDs coming out
#   ./install.sh test     install what is needed, build with -Werror and
#                         run the whole test suite (pg_regress, pgTAP, TAP)
#   ./install.sh stop     stop the local PostgreSQL started by ./install.sh
#   ./install.sh packages install only what ./install.sh test needs on this
#                         machine (test/majors.sh, run by itself, runs it)
#
# The PostgreSQL major is Debian's own (15 on Debian 12, 17 on Debian 13,
# 18 on unstable), or the one of PG_CONFIG
# (/usr/lib/postgresql/NN/bin/pg_config), or LEAF_PG_MAJOR.
#
# Environment: LEAF_PORT (default 5499) for the local server: a later run
# with another LEAF_PORT moves the server to that port (and restarts it);
# a run without LEAF_PORT keeps the port it has.  LEAF_TEST_DIR for where
# the tests build and run (default: a new directory /tmp/leaf-test.*,
# removed again when every test passed and kept when one failed; a
# LEAF_TEST_DIR is always kept).
# LEAF_TESTS for only some of the TAP files (paths or globs, such as
# 'test/t/01*.pl'); pg_regress runs always.
#
# ./install.sh test runs the tests against every supported major (15, 17,
# 18 and 19): the host's own here, the others in Debian chroots (see
# test/majors.sh, which does it).  LEAF_MAJORS="15 17" names some of them;
# LEAF_MAJORS= (empty) tests the host's own only.
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# pg_major: the PostgreSQL major to build and test against
pg_major() {
	local codename= major
	if [ -n "${LEAF_PG_MAJOR:-}" ]; then
		echo "$LEAF_PG_MAJOR"
		return
	fi
	if [ -n "${PG_CONFIG:-}" ]; then
		if command -v "$PG_CONFIG" >/dev/null; then
			"$PG_CONFIG" --version | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p'
		else
			echo "$PG_CONFIG" | sed -n 's|.*/postgresql/\([0-9][0-9]*\)/bin/pg_config$|\1|p'
		fi
		return
	fi
	[ -r /etc/os-release ] && codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	major=$("$here/test/lib/run.sh" major-of "$codename")
	if [ -z "$major" ]; then
		case "$codename" in
			forky) major=18 ;;
			*) major=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -n 1) ;;
		esac
	fi
	echo "$major"
}

pgmajor=$(pg_major)
case "$pgmajor" in
	'' | *[!0-9]*)
		echo "install.sh: cannot tell which PostgreSQL to use: set PG_CONFIG or LEAF_PG_MAJOR" >&2
		exit 2
		;;
esac
pgbin=/usr/lib/postgresql/$pgmajor/bin
pg_config=${PG_CONFIG:-$pgbin/pg_config}
port=${LEAF_PORT:-5499}
case "$port" in
	'' | *[!0-9]*)
		echo "install.sh: LEAF_PORT must be a port number, not '$port'" >&2
		exit 2
		;;
esac
mode=${1:-run}

say() { printf '\n== %s\n' "$*"; }

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "install.sh: run this as root (it installs packages and runs PostgreSQL as user postgres)" >&2
		exit 1
	fi
}

# install_packages run|test [chroots]: everything this machine needs, in
# one apt run, before anything else starts (test/majors.sh runs steps
# side by side, and none of them installs on this machine).  "chroots"
# adds debootstrap, for the other majors' chroots.  apt waits up to five
# minutes for a lock that another apt holds (a fresh machine's own
# upgrades), then fails.
install_packages() {
	local pkgs=(build-essential "postgresql-$pgmajor" "postgresql-server-dev-$pgmajor"
		libzookeeper-mt-dev libpq-dev libssl-dev)
	local apt=(apt-get -o DPkg::Lock::Timeout=300)
	if [ "$1" = test ]; then
		pkgs+=("postgresql-$pgmajor-pgtap" libipc-run-perl libdbd-pg-perl zookeeper faketime
			default-jre-headless patroni python3-kazoo python3-pysyncobj etcd-server python3-etcd
			prometheus-postgres-exporter prometheus-sql-exporter prometheus)
	fi
	[ "${2:-}" = chroots ] && pkgs+=(debootstrap)
	[ "$1" = debootstrap ] && pkgs=(debootstrap)
	export DEBIAN_FRONTEND=noninteractive
	apt_update
	# pg_partman where Debian has it for this major (bookworm's 15,
	# trixie's 17, unstable's 18): test/t/076_snowflake_partman.pl fails
	# without it there, and tests nothing where Debian has none
	if [ "$1" = test ] && apt_has "postgresql-$pgmajor-partman"; then
		pkgs+=("postgresql-$pgmajor-partman")
	fi
	say "installing packages: ${pkgs[*]}"
	"${apt[@]}" install -y -qq "${pkgs[@]}" >/dev/null
	# the package may start Debian's own cluster; leaf never uses it
}

# apt_has PACKAGE: does this machine's archive have a version of PACKAGE?
# (grep reads to the end: with pipefail, apt-cache must not see a closed pipe)
apt_has() {
	apt-cache show --no-all-versions "$1" 2>/dev/null | grep '^Version: ' >/dev/null
}

# apt_update: apt-get update, which does not wait for the lock of the
# package lists as install waits for dpkg's: while another apt holds it
# (a fresh machine's daily update), try again every 5 s for 5 minutes
apt_update() {
	local i out
	for i in $(seq 1 60); do
		out=$(LC_ALL=C apt-get update -qq 2>&1) && return 0
		case "$out" in
			*'Could not get lock'*)
				[ "$i" = 1 ] && echo "install.sh: another apt holds the lock of the package lists; waiting up to 5 minutes" >&2
				sleep 5
				;;
			*)
				echo "$out" >&2
				return 1
				;;
		esac
	done
	echo "$out" >&2
	return 1
}

# as_postgres DIR CMD...: run a command as user postgres in DIR
as_postgres() {
	local dir=$1
	shift
	su postgres -s /bin/bash -c "cd '$dir' && $*"
}

# build_and_install DIR: build as the owner of DIR, install as root
build_and_install() {
	local dir=$1
	local mk="make -s PG_CONFIG=$pg_config with_llvm=no"
	say "building leaf in $dir"
	if [ "$(stat -c %U "$dir")" = postgres ]; then
		as_postgres "$dir" "$mk clean >/dev/null && $mk PG_CFLAGS=-Werror"
	else
		(cd "$dir" && $mk clean >/dev/null && $mk PG_CFLAGS=-Werror)
	fi
	(cd "$dir" && $mk install >/dev/null)
}

# port_in_use PORT: is something listening on 127.0.0.1:PORT?
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The port in the demo cluster's postgresql.conf (the last "port =" line).
conf_port() {
	sed -n 's/^port = \([0-9][0-9]*\).*/\1/p' "$1/postgresql.conf" | tail -n 1
}

# Let user postgres reach a directory inside this checkout.
make_reachable() {
	local d=$1
	while [ "$d" != / ]; do
		if ! su postgres -s /bin/sh -c "test -x '$d'"; then
			echo "install.sh: letting user postgres traverse $d (chmod o+x)"
			chmod o+x "$d"
		fi
		d=$(dirname "$d")
	done
}

# run_tests: build and test in a copy owned by postgres (initdb refuses
# root), with test/lib/run.sh, which test/majors.sh runs in its chroots
run_tests() {
	local dir=${LEAF_TEST_DIR:-} made=0 rc=0

	# a directory of our own is removed again when every test passed; one
	# named by LEAF_TEST_DIR is always kept
	if [ -z "$dir" ]; then
		dir=$(mktemp -d /tmp/leaf-test.XXXXXX)
		made=1
	fi
	"$here/test/lib/run.sh" copy "$here" "$dir"
	say "building leaf in $dir (the default build, then the test build)"
	"$here/test/lib/run.sh" build "$dir" "$pg_config"
	say "running the tests in $dir (PostgreSQL $pgmajor)"
	"$here/test/lib/run.sh" check "$dir" "$pg_config" "${LEAF_TESTS:-}" || rc=$?
	if [ $rc != 0 ]; then
		say "tests failed (exit $rc)"
	elif [ $made = 1 ]; then
		rm -rf "$dir"
		say "all tests passed; $dir removed"
	fi
	exit $rc
}

start_local() {
	local data=$here/.pgdata
	local db=leaf_demo
	local psql=(su postgres -s /bin/sh -c)

	build_and_install "$here"
	make_reachable "$here"
	if [ ! -f "$data/PG_VERSION" ]; then
		say "creating a PostgreSQL cluster in $data"
		mkdir -p "$data"
		chown postgres:postgres "$data"
		chmod 700 "$data"
		as_postgres "$here" "$pgbin/initdb -D '$data' -U postgres -A trust -E UTF8 >/dev/null"
		cat >> "$data/postgresql.conf" <<EOF

# leaf
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '/tmp'
shared_preload_libraries = 'leaf'
max_worker_processes = 16
leaf.worker_id = 1		# snowflake worker ID set by hand: no ZooKeeper
EOF
	fi
	local running=0 cur
	as_postgres "$here" "$pgbin/pg_ctl -D '$data' status" >/dev/null 2>&1 && running=1
	cur=$(conf_port "$data")
	if [ -n "$cur" ] && [ "$cur" != "$port" ]; then
		if [ -z "${LEAF_PORT:-}" ]; then
			# no LEAF_PORT this time: keep the port the cluster has
			port=$cur
		else
			if port_in_use "$port"; then
				echo "install.sh: port $port is in use by another program; the demo server stays on port $cur" >&2
				exit 1
			fi
			say "moving the demo server in $data from port $cur to $port"
			sed -i "s/^port = $cur\b.*/port = $port/" "$data/postgresql.conf"
			if [ $running = 1 ]; then
				as_postgres "$here" "$pgbin/pg_ctl -D '$data' -l '$data/server.log' -m fast -w restart" >/dev/null
			fi
		fi
	fi
	if [ $running = 0 ]; then
		if port_in_use "$port"; then
			echo "install.sh: port $port is in use by another program; set LEAF_PORT to a free port" >&2
			exit 1
		fi
		say "starting PostgreSQL on 127.0.0.1:$port"
		as_postgres "$here" "$pgbin/pg_ctl -D '$data' -l '$data/server.log' -w start" >/dev/null
	fi

	"${psql[@]}" "psql -X -q -h /tmp -p $port -d postgres -tAc \"SELECT 1 FROM pg_database WHERE datname = '$db'\" | grep -q 1 || createdb -h /tmp -p $port $db"
	say "leaf is running; some IDs"
	"${psql[@]}" "psql -X -h /tmp -p $port -d $db" <<'EOF'
CREATE EXTENSION IF NOT EXISTS leaf;
INSERT INTO leaf_alloc (biz_tag, max_id, step, description)
VALUES ('order', 1, 1000, 'demo tag')
ON CONFLICT (biz_tag) DO NOTHING;
SELECT leaf_segment_nextval('order') AS segment_id FROM generate_series(1, 5);
SELECT id AS snowflake_id, d.*
  FROM (SELECT leaf_snowflake() AS id FROM generate_series(1, 5)) s,
       LATERAL leaf_snowflake_decode(s.id) d;
SELECT biz_tag, segment_start, segment_end, next_id, next_ready, step
  FROM leaf_segments;
EOF
	cat <<EOF

Connect with:   psql -h 127.0.0.1 -p $port -U postgres $db
Stop it with:   ./install.sh stop
EOF
}

# stop_local: stop the demo server; one that is not running (stopped
# before, or never created) is no error
stop_local() {
	local data=$here/.pgdata
	if [ ! -f "$data/PG_VERSION" ]; then
		echo "install.sh: no demo server in $data"
		return 0
	fi
	if ! as_postgres / "$pgbin/pg_ctl -D '$data' status" >/dev/null 2>&1; then
		echo "install.sh: the demo server in $data is not running"
		return 0
	fi
	as_postgres / "$pgbin/pg_ctl -D '$data' -m fast -w stop"
}

# port_check: before installing anything, refuse a port that another
# program holds, unless it is the demo server's own, already running
port_check() {
	local data=$here/.pgdata want=$port cur
	cur=$( [ -f "$data/postgresql.conf" ] && conf_port "$data" || true)
	[ -z "${LEAF_PORT:-}" ] && [ -n "$cur" ] && want=$cur
	port_in_use "$want" || return 0
	if [ -f "$data/postmaster.pid" ] && [ "$want" = "$cur" ]; then
		return 0
	fi
	echo "install.sh: port $want is in use by another program; set LEAF_PORT to a free port" >&2
	exit 1
}

case "$mode" in
	run)
		need_root
		port_check
		install_packages run
		start_local
		;;
	test)
		need_root
		case "${LEAF_MATRIX:-short}" in
			short | full) ;;
			*)
				echo "install.sh: LEAF_MATRIX must be short or full, not '$LEAF_MATRIX'" >&2
				exit 2
				;;
		esac
		# every supported major unless told otherwise; LEAF_MAJORS= (empty)
		# is this machine's own only
		majors=${LEAF_MAJORS-$("$here/test/lib/run.sh" majors)}
		if [ -n "$majors" ] && [ "$majors" != "$pgmajor" ]; then
			# the host's packages and debootstrap first, then the majors
			# side by side (test/majors.sh), which install nothing here
			install_packages test chroots
			LEAF_PACKAGES_READY=1 exec "$here/test/majors.sh" all $majors
		fi
		[ -n "${LEAF_PACKAGES_READY:-}" ] || install_packages test
		run_tests
		;;
	stop)
		need_root
		stop_local
		;;
	packages | debootstrap)
		need_root
		if [ "$mode" = packages ]; then
			install_packages test chroots
		else
			install_packages debootstrap
		fi
		;;
	*)
		echo "usage: $0 [run|test|stop|packages]" >&2
		exit 2
		;;
esac
