#!/usr/bin/env bash
#
# test/fleet.sh: a whole leaf fleet on one machine, on 127.0.0.1.
#
#   test/fleet.sh start [DIR]    start it (DIR defaults to /tmp/leaf-fleet)
#   test/fleet.sh status [DIR]   ports, roles, a few segment and snowflake IDs
#   test/fleet.sh stop [DIR]     stop everything started by "start"
#
# The fleet:
#   - an allocation primary and a synchronous streaming standby, which
#     hold leaf_alloc (the only place segments are allocated);
#   - N shards (FLEET_SHARDS, default 3) with leaf preloaded, whose
#     leaf.alloc_conninfo names both allocation servers with
#     target_session_attrs=read-write, and which log in as role
#     leaf_fleet with a password kept in a passfile;
#   - a standalone ZooKeeper that hands out the shards' snowflake worker
#     IDs (leaf.zk_hosts, leaf.zk_root = '/leaf/fleet', leaf.worker_id
#     unset).  Without java or Debian's zookeeper package, or with
#     FLEET_ZK=0, the shards get worker IDs 1..N by hand instead.
#
# Ports: FLEET_PORT_BASE (default 56400) for the allocation primary,
# +1 for the standby, +2 for ZooKeeper and +10+i for shard i.
#
# Run as root (servers then run as user postgres) or as postgres.
# PostgreSQL comes from /usr/lib/postgresql/15/bin; leaf must be
# installed there (make install).  Every server listens on 127.0.0.1
# and on a socket in DIR/sock; socket logins use peer authentication,
# TCP logins need a password.
#
set -euo pipefail

pgbin=/usr/lib/postgresql/15/bin
zk_classpath=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar

usage() {
	echo "usage: $0 start|status|stop [DIR]" >&2
	exit 2
}

cmd=${1:-}
[ -n "$cmd" ] || usage
dir=$(realpath -m "${2:-/tmp/leaf-fleet}")

say() { printf '== %s\n' "$*"; }
die() {
	printf '%s: %s\n' "${0##*/}" "$*" >&2
	exit 1
}

case "$(id -un)" in
	root) run_as_root=1 ;;
	postgres) run_as_root=0 ;;
	*) die "run this as root or as postgres" ;;
esac

# as_pg CMD ARGS...: run a command as user postgres
as_pg() {
	if [ "$run_as_root" = 1 ]; then
		su postgres -s /bin/bash -c "$(printf '%q ' "$@")"
	else
		"$@"
	fi
}

# psql_at PORT SQL: run SQL as superuser postgres over the socket
psql_at() {
	as_pg "$pgbin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir/sock" -p "$1" \
		-U postgres -d postgres -c "$2"
}

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# zk_4lw PORT WORD: a ZooKeeper four-letter command
zk_4lw() {
	# shellcheck disable=SC2016
	timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$0 && printf %s "$1" >&3 && cat <&3' \
		"$1" "$2" 2>/dev/null || true
}

pg_running() {
	[ -f "$1/postmaster.pid" ] && as_pg "$pgbin/pg_ctl" -D "$1" status >/dev/null 2>&1
}

load_env() {
	[ -f "$dir/fleet.env" ] || die "no fleet in $dir (start one with: $0 start $dir)"
	# shellcheck disable=SC1091
	. "$dir/fleet.env"
}

# ---------------------------------------------------------------- stop

stop_pg() {
	local data=$1
	[ -d "$data" ] || return 0
	if pg_running "$data"; then
		if ! as_pg "$pgbin/pg_ctl" -D "$data" -m fast -t 60 -w stop >/dev/null 2>&1; then
			echo "   fast shutdown of $data failed; using immediate" >&2
			as_pg "$pgbin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
		fi
		echo "   stopped ${data#"$dir"/}"
	fi
}

stop_zk() {
	local pid i
	[ -f "$dir/zk/zk.pid" ] || return 0
	pid=$(cat "$dir/zk/zk.pid")
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
		grep -q QuorumPeerMain "/proc/$pid/cmdline" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill -9 "$pid" 2>/dev/null || true
		fi
		echo "   stopped zookeeper"
	fi
	rm -f "$dir/zk/zk.pid"
}

do_stop() {
	local d
	for d in "$dir"/shard*; do
		[ -d "$d" ] && stop_pg "$d"
	done
	stop_pg "$dir/alloc_primary"
	stop_pg "$dir/alloc_standby"
	stop_zk
}

# ---------------------------------------------------------------- start

starting=0
on_exit() {
	local rc=$?
	if [ "$starting" = 1 ] && [ $rc != 0 ]; then
		echo >&2
		echo "fleet start failed (exit $rc); stopping what was started." >&2
		do_stop >&2 || true
		echo "Logs are in $dir (*/server.log, *.log, zk/zk.log)." >&2
	fi
}
trap on_exit EXIT

# new_cluster NAME PORT: initdb and the lines every server shares
new_cluster() {
	local data=$dir/$1 port=$2
	as_pg "$pgbin/initdb" -D "$data" -U postgres -E UTF8 \
		--auth-local=peer --auth-host=scram-sha-256 >"$dir/$1.initdb.log" 2>&1 ||
		die "initdb of $1 failed; see $dir/$1.initdb.log"
	as_pg tee -a "$data/postgresql.conf" >/dev/null <<EOF

# ---- leaf fleet ($1)
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir/sock'
shared_preload_libraries = 'leaf'
max_worker_processes = 16
EOF
}

start_pg() {
	as_pg "$pgbin/pg_ctl" -D "$dir/$1" -l "$dir/$1/server.log" -t 60 -w start >/dev/null ||
		die "$1 did not start; see $dir/$1/server.log"
}

start_zk() {
	local i pid
	as_pg mkdir -p "$dir/zk/data"
	as_pg tee "$dir/zk/zoo.cfg" >/dev/null <<EOF
tickTime=2000
dataDir=$dir/zk/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,stat,ruok
maxClientCnxns=0
minSessionTimeout=1000
EOF
	# java runs in the background, detached from this script's output
	# shellcheck disable=SC2016
	as_pg bash -c 'exec >"$1/zk.log" 2>&1 </dev/null; cd "$1" || exit 1; java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$2" org.apache.zookeeper.server.quorum.QuorumPeerMain "$1/zoo.cfg" & echo $! >"$1/zk.pid"' \
		zk "$dir/zk" "$zk_classpath"
	pid=$(cat "$dir/zk/zk.pid")
	for ((i = 0; i < 600; i++)); do
		kill -0 "$pid" 2>/dev/null || die "zookeeper exited; see $dir/zk/zk.log"
		zk_4lw "$zk_port" srvr | grep -q '^Mode: standalone' && return 0
		sleep 0.1
	done
	die "zookeeper did not come up within 60s; see $dir/zk/zk.log"
}

do_start() {
	local p i pw data conninfo d

	[ -x "$pgbin/postgres" ] || die "PostgreSQL 15 is not installed in $pgbin"
	[ -f "$("$pgbin/pg_config" --pkglibdir)/leaf.so" ] ||
		die "leaf is not installed; run make && make install first"

	nshards=${FLEET_SHARDS:-3}
	base=${FLEET_PORT_BASE:-56400}
	[[ "$nshards" =~ ^[1-9][0-9]?$ ]] || die "FLEET_SHARDS must be 1..99"
	if ! [[ "$base" =~ ^[0-9]+$ ]] || ((base < 1024 || base + 10 + nshards > 65535)); then
		die "FLEET_PORT_BASE must leave room for ports up to +$((10 + nshards)) below 65536"
	fi

	use_zk=1
	if [ "${FLEET_ZK:-1}" = 0 ]; then
		use_zk=0
	elif ! command -v java >/dev/null || [ ! -f /usr/share/java/zookeeper.jar ] ||
		[ ! -f /usr/share/java/slf4j-simple.jar ]; then
		echo "note: java or Debian's zookeeper package is missing; shards get leaf.worker_id by hand" >&2
		use_zk=0
	fi

	# the directory: new, empty, or left by an earlier fleet
	if [ -f "$dir/fleet.env" ]; then
		for d in "$dir"/alloc_primary "$dir"/alloc_standby "$dir"/shard*; do
			if [ -d "$d" ] && pg_running "$d"; then
				die "a fleet is running in $dir; stop it first: $0 stop $dir"
			fi
		done
		if [ -f "$dir/zk/zk.pid" ] && kill -0 "$(cat "$dir/zk/zk.pid")" 2>/dev/null; then
			die "the fleet's zookeeper is still running; stop it first: $0 stop $dir"
		fi
		rm -rf "$dir"
	elif [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
		die "$dir exists and is not a fleet directory; choose another"
	fi
	[ ${#dir} -le 80 ] || die "$dir is too long a path for a socket directory"

	alloc1_port=$base
	alloc2_port=$((base + 1))
	zk_port=$((base + 2))
	for p in "$alloc1_port" "$alloc2_port" "$zk_port" $(seq $((base + 11)) $((base + 10 + nshards))); do
		if port_in_use "$p"; then
			die "port $p on 127.0.0.1 is in use; choose another FLEET_PORT_BASE"
		fi
	done

	mkdir -p "$dir"
	if [ "$run_as_root" = 1 ]; then
		chown postgres: "$dir"
	fi
	as_pg test -w "$dir" || die "user postgres cannot write to $dir"
	as_pg mkdir -p "$dir/sock"
	as_pg chmod 700 "$dir" "$dir/sock"

	starting=1
	as_pg tee "$dir/fleet.env" >/dev/null <<EOF
nshards=$nshards
base=$base
alloc1_port=$alloc1_port
alloc2_port=$alloc2_port
zk_port=$zk_port
use_zk=$use_zk
EOF

	# -- allocation primary
	say "allocation primary on 127.0.0.1:$alloc1_port"
	new_cluster alloc_primary "$alloc1_port"
	echo "synchronous_commit = on" | as_pg tee -a "$dir/alloc_primary/postgresql.conf" >/dev/null
	start_pg alloc_primary
	pw=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)
	# the password goes in over stdin, with statement logging off
	as_pg "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/sock" -p "$alloc1_port" \
		-U postgres -d postgres >/dev/null <<EOF
SET log_statement = 'none';
CREATE EXTENSION leaf;
SELECT leaf_segment_create('order', 1000, 1, 'fleet demo tag');
CREATE ROLE leaf_fleet LOGIN PASSWORD '$pw';
GRANT USAGE ON SCHEMA public TO leaf_fleet;
GRANT SELECT, UPDATE ON leaf_alloc TO leaf_fleet;
EOF
	# the shards' passfile: mode 0600, owned by postgres
	# shellcheck disable=SC2016
	as_pg bash -c 'umask 077 && cat >"$1"' pgpass "$dir/leaf.pgpass" <<EOF
127.0.0.1:$alloc1_port:postgres:leaf_fleet:$pw
127.0.0.1:$alloc2_port:postgres:leaf_fleet:$pw
EOF
	pw=

	# -- synchronous standby
	say "synchronous standby on 127.0.0.1:$alloc2_port"
	as_pg "$pgbin/pg_basebackup" -h "$dir/sock" -p "$alloc1_port" -U postgres \
		-D "$dir/alloc_standby" --checkpoint=fast -X stream >"$dir/alloc_standby.backup.log" 2>&1 ||
		die "pg_basebackup failed; see $dir/alloc_standby.backup.log"
	as_pg touch "$dir/alloc_standby/standby.signal"
	as_pg tee -a "$dir/alloc_standby/postgresql.conf" >/dev/null <<EOF

# ---- leaf fleet (alloc_standby)
port = $alloc2_port
primary_conninfo = 'host=$dir/sock port=$alloc1_port user=postgres application_name=alloc_standby'
# after a promotion this server runs alone until a new standby is attached
synchronous_standby_names = ''
EOF
	start_pg alloc_standby
	echo "synchronous_standby_names = 'alloc_standby'" |
		as_pg tee -a "$dir/alloc_primary/postgresql.conf" >/dev/null
	as_pg "$pgbin/pg_ctl" -D "$dir/alloc_primary" reload >/dev/null
	for ((i = 0; i < 300; i++)); do
		[ "$(psql_at "$alloc1_port" "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'alloc_standby'")" = sync ] && break
		sleep 0.1
	done
	[ $i -lt 300 ] || die "the standby did not become synchronous; see $dir/alloc_*/server.log"

	# -- ZooKeeper
	if [ "$use_zk" = 1 ]; then
		say "zookeeper on 127.0.0.1:$zk_port"
		start_zk
	fi

	# -- shards
	conninfo="host=127.0.0.1,127.0.0.1 port=$alloc1_port,$alloc2_port dbname=postgres user=leaf_fleet passfile=$dir/leaf.pgpass target_session_attrs=read-write connect_timeout=2 tcp_user_timeout=10000"
	for ((i = 1; i <= nshards; i++)); do
		p=$((base + 10 + i))
		data=$dir/shard$i
		say "shard $i on 127.0.0.1:$p"
		new_cluster "shard$i" "$p"
		echo "leaf.alloc_conninfo = '$conninfo'" | as_pg tee -a "$data/postgresql.conf" >/dev/null
		if [ "$use_zk" = 1 ]; then
			as_pg tee -a "$data/postgresql.conf" >/dev/null <<EOF
leaf.zk_hosts = '127.0.0.1:$zk_port'
leaf.zk_root = '/leaf/fleet'
leaf.worker_id = -1
EOF
		else
			echo "leaf.worker_id = $i" | as_pg tee -a "$data/postgresql.conf" >/dev/null
		fi
		start_pg "shard$i"
		psql_at "$p" "CREATE EXTENSION leaf" >/dev/null
		psql_at "$p" "SET leaf.wait_timeout = '10s'; SELECT leaf_segment_nextval('order')" >/dev/null ||
			die "shard $i could not take a segment; see $data/server.log"
	done

	starting=0
	echo
	do_status
	cat <<EOF

Connect (as OS user postgres):
                 psql -h $dir/sock -p $((base + 11)) -U postgres postgres
Try a failover (as OS user postgres):
                 $pgbin/pg_ctl -D $dir/alloc_primary -m immediate stop
                 $pgbin/pg_ctl -D $dir/alloc_standby promote
Stop the fleet:  $0 stop $dir
EOF
}

# ---------------------------------------------------------------- status

do_status() {
	local i p name state ids sf mode

	load_env
	printf '%-14s %-16s %s\n' SERVER ADDRESS STATE
	for name in alloc_primary alloc_standby; do
		p=$alloc1_port
		[ "$name" = alloc_standby ] && p=$alloc2_port
		if pg_running "$dir/$name"; then
			state=$(psql_at "$p" "SELECT CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE 'primary' END
				|| coalesce(', replicas: ' || (SELECT string_agg(application_name || ' (' || sync_state || ')', ', ') FROM pg_stat_replication), '')
				|| coalesce(', order max_id ' || (SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order'), '')" 2>&1) || true
		else
			state="not running"
		fi
		printf '%-14s %-16s %s\n' "$name" "127.0.0.1:$p" "$state"
	done
	if [ "$use_zk" = 1 ]; then
		mode=$(zk_4lw "$zk_port" srvr | sed -n 's/^Mode: //p')
		printf '%-14s %-16s %s\n' zookeeper "127.0.0.1:$zk_port" "${mode:-not running}"
	fi
	for ((i = 1; i <= nshards; i++)); do
		p=$((base + 10 + i))
		if ! pg_running "$dir/shard$i"; then
			printf '%-14s %-16s %s\n' "shard$i" "127.0.0.1:$p" "not running"
			continue
		fi
		ids=$(psql_at "$p" "SET leaf.wait_timeout = '3s'; SELECT string_agg(leaf_segment_nextval('order')::text, ' ') FROM generate_series(1, 3)" 2>&1 | tail -n 1) || true
		state=$(psql_at "$p" "SELECT source || ', step ' || step FROM leaf_segments WHERE biz_tag = 'order'" 2>&1) || true
		printf '%-14s %-16s %s\n' "shard$i" "127.0.0.1:$p" "segments from ${state:-?}"
		printf '%-14s %-16s %s\n' "" "" "segment IDs:   $ids"
		if [ "$(psql_at "$p" "SELECT to_regprocedure('leaf_snowflake()') IS NOT NULL" 2>/dev/null)" = t ]; then
			sf=$(psql_at "$p" "SELECT string_agg(leaf_snowflake()::text, ' ') FROM generate_series(1, 3)" 2>&1 | tail -n 1) || true
			printf '%-14s %-16s %s\n' "" "" "snowflake IDs: $sf"
		fi
	done
}

case "$cmd" in
	start) do_start ;;
	status) do_status ;;
	stop)
		load_env
		do_stop
		;;
	*) usage ;;
esac
