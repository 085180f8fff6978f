#!/usr/bin/env bash
#
# test/fleet.sh: a whole leaf fleet on one machine, on 127.0.0.1.
#
#   test/fleet.sh start [DIR]    start it (DIR defaults to /tmp/leaf-fleet)
#   test/fleet.sh status [DIR]   ports, roles, a few segment and snowflake IDs
#   test/fleet.sh stop [DIR]     stop everything started by "start"
#   test/fleet.sh start-member K [DIR]
#                                Patroni mode: start member K's Patroni
#                                again (after a kill); it rejoins as a replica
#
# The fleet:
#   - the allocation database, which holds leaf_alloc (the only place
#     segments are allocated).  With FLEET_ALLOC=patroni: a 3-member
#     Patroni cluster (synchronous_mode) on the fleet's ZooKeeper, which
#     fails over by itself.  By default (FLEET_ALLOC=manual): an allocation
#     primary and a synchronous streaming standby, promoted by hand;
#   - N shards (FLEET_SHARDS, default 3) with leaf preloaded, whose
#     leaf.alloc_conninfo names every allocation server with
#     target_session_attrs=read-write, and which log in as role
#     leaf_fleet with a password kept in a passfile;
#   - a standalone ZooKeeper that hands out the shards' snowflake worker
#     IDs (leaf.zk_hosts, leaf.zk_root = '/leaf/fleet', leaf.worker_id
#     unset).  Without java or Debian's zookeeper package, or with
#     FLEET_ZK=0, the shards get worker IDs 1..N by hand instead
#     (Patroni mode needs ZooKeeper).
#
# Ports: FLEET_PORT_BASE (default 5500, beside the demo server's 5499)
# for the allocation primary, +1 for the standby, +2 for ZooKeeper and
# +10+i for shard i.  In Patroni mode, member k (alloc1..alloc3) has
# PostgreSQL on +2+k and its REST API on +5+k.  The default stays below
# the ports PostgreSQL's TAP tests take (10200-32767) and Linux's
# ephemeral ports (32768-60999, where any outgoing connection may hold
# one).
#
# Run as root (servers then run as user postgres) or as postgres.
# PostgreSQL comes from FLEET_PGBIN (default /usr/lib/postgresql/NN/bin of
# the newest major installed);
# leaf must be installed there (make install).  Patroni mode needs
# Debian's patroni and python3-kazoo.  Every server listens on 127.0.0.1
# and on a socket in DIR/sock; socket logins use peer authentication,
# TCP logins need a password.
#
set -euo pipefail

pgbin=${FLEET_PGBIN:-/usr/lib/postgresql/$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -n 1)/bin}
zk_classpath=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar

usage() {
	echo "usage: $0 start|status|stop [DIR]" >&2
	echo "       $0 start-member K [DIR]" >&2
	exit 2
}

cmd=${1:-}
[ -n "$cmd" ] || usage
if [ "$cmd" = start-member ]; then
	member=${2:-}
	[[ "$member" =~ ^[123]$ ]] || usage
	shift
fi
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

# stop_patroni K: SIGTERM to member K's Patroni, which stops its server
# (fast shutdown); kill -9 and an immediate stop of what is left after 60 s
stop_patroni() {
	local k=$1 pid i
	local pidf=$dir/alloc$k.patroni.pid
	if [ -f "$pidf" ]; then
		pid=$(cat "$pidf")
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
			grep -q patroni "/proc/$pid/cmdline" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			for ((i = 0; i < 600; i++)); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			if kill -0 "$pid" 2>/dev/null; then
				echo "   patroni of alloc$k did not stop in 60s; using kill -9" >&2
				kill -9 "$pid" 2>/dev/null || true
			fi
			echo "   stopped patroni alloc$k"
		fi
		rm -f "$pidf"
	fi
	if [ -d "$dir/alloc$k" ] && pg_running "$dir/alloc$k"; then
		as_pg "$pgbin/pg_ctl" -D "$dir/alloc$k" -m immediate -w stop >/dev/null 2>&1 || true
		echo "   stopped alloc$k"
	fi
}

# the name of the Patroni leader, or nothing
patroni_leader() {
	patroni_list 2>/dev/null | awk -F'\t' '$4 == "Leader" { print $2 }'
}

do_stop() {
	local d k leader
	for d in "$dir"/shard*; do
		[ -d "$d" ] && stop_pg "$d"
	done
	if [ "${alloc_mode:-manual}" = patroni ]; then
		# replicas first: no promotion while the cluster goes down
		leader=$(patroni_leader || true)
		for k in 1 2 3; do
			[ "alloc$k" = "$leader" ] || stop_patroni "$k"
		done
		[ -z "$leader" ] || stop_patroni "${leader#alloc}"
	else
		stop_pg "$dir/alloc_primary"
		stop_pg "$dir/alloc_standby"
	fi
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

# new_password: 24 random letters and digits
new_password() {
	head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24
}

# alloc_setup PORT ALLOC_PORTS...: the extension, a tag and the role
# leaf_fleet in the allocation database at PORT; the shards' passfile
# for every allocation server
alloc_setup() {
	local port=$1 p pw
	shift
	pw=$(new_password)
	# the password goes in over stdin, with statement logging off
	as_pg "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/sock" -p "$port" \
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
	for p in "$@"; do
		echo "127.0.0.1:$p:postgres:leaf_fleet:$pw"
	done | as_pg bash -c 'umask 077 && cat >"$1"' pgpass "$dir/leaf.pgpass"
	pw=
}

# -- the allocation database by hand: a primary and a synchronous standby
start_alloc_manual() {
	local i
	# -- allocation primary
	say "allocation primary on 127.0.0.1:$alloc1_port"
	new_cluster alloc_primary "$alloc1_port"
	echo "synchronous_commit = on" | as_pg tee -a "$dir/alloc_primary/postgresql.conf" >/dev/null
	start_pg alloc_primary
	alloc_setup "$alloc1_port" "$alloc1_port" "$alloc2_port"

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

	conninfo="host=127.0.0.1,127.0.0.1 port=$alloc1_port,$alloc2_port dbname=postgres user=leaf_fleet passfile=$dir/leaf.pgpass target_session_attrs=read-write connect_timeout=2 tcp_user_timeout=10000"
}

# member_port K, member_rest K: member K's PostgreSQL and REST API ports
member_port() { echo $((base + 2 + $1)); }
member_rest() { echo $((base + 5 + $1)); }

# http_status PORT PATH: the HTTP status of a GET on 127.0.0.1:PORT
http_status() {
	# shellcheck disable=SC2016
	timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$0 && printf "GET %s HTTP/1.0\r\n\r\n" "$1" >&3 && head -n 1 <&3' \
		"$1" "$2" 2>/dev/null | awk '{ print $2 }' || true
}

# patroni_list: patronictl list as tab-separated lines, without the header
# (Cluster, Member, Host, Role, State, TL, Lag in MB)
patroni_list() {
	as_pg timeout 30 patronictl -c "$dir/alloc1.yml" list -f tsv 2>/dev/null | tail -n +2
}

# write_patroni_config K SUPERUSER_PW REPLICATION_PW
write_patroni_config() {
	local k=$1 supw=$2 replpw=$3
	# shellcheck disable=SC2016
	as_pg bash -c 'umask 077 && cat >"$1"' yml "$dir/alloc$k.yml" <<EOF
scope: leafalloc
name: alloc$k
restapi:
  listen: 127.0.0.1:$(member_rest "$k")
  connect_address: 127.0.0.1:$(member_rest "$k")
zookeeper:
  hosts: ['127.0.0.1:$zk_port']
watchdog:
  mode: 'off'
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: 'on'
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        max_worker_processes: 16
        shared_preload_libraries: leaf
  initdb: [{encoding: UTF8}, {auth-local: peer}, {auth-host: scram-sha-256}]
postgresql:
  listen: 127.0.0.1:$(member_port "$k")
  connect_address: 127.0.0.1:$(member_port "$k")
  use_unix_socket: true
  data_dir: $dir/alloc$k
  bin_dir: $pgbin
  pgpass: $dir/alloc$k.pgpass
  authentication:
    superuser: {username: postgres, password: '$supw'}
    replication: {username: replicator, password: '$replpw'}
    rewind: {username: postgres, password: '$supw'}
  pg_hba:
    - local all all peer
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
  parameters:
    unix_socket_directories: '$dir/sock'
    leaf.alloc_failover: synchronous
EOF
}

# start_patroni K: member K's Patroni in the background, in a session of
# its own; it starts (and stops) its PostgreSQL server
start_patroni() {
	local k=$1
	# shellcheck disable=SC2016
	as_pg bash -c 'exec >"$1" 2>&1 </dev/null; setsid patroni "$2" & echo $! >"$3"' \
		patroni "$dir/alloc$k.patroni.log" "$dir/alloc$k.yml" "$dir/alloc$k.patroni.pid"
}

# -- the allocation database run by Patroni: three members, synchronous
# mode, on the fleet's ZooKeeper
start_alloc_patroni() {
	local k i supw replpw ports=()
	supw=$(new_password)
	replpw=$(new_password)
	for k in 1 2 3; do
		write_patroni_config "$k" "$supw" "$replpw"
		ports+=("$(member_port "$k")")
	done
	supw=
	replpw=

	say "patroni member alloc1 on 127.0.0.1:$(member_port 1) (REST API :$(member_rest 1)), bootstraps"
	start_patroni 1
	for ((i = 0; i < 1200; i++)); do
		[ "$(http_status "$(member_rest 1)" /primary)" = 200 ] && break
		kill -0 "$(cat "$dir/alloc1.patroni.pid")" 2>/dev/null || die "patroni alloc1 exited; see $dir/alloc1.patroni.log"
		sleep 0.1
	done
	[ $i -lt 1200 ] || die "alloc1 did not become the leader within 120s; see $dir/alloc1.patroni.log"
	# before the others clone it
	alloc_setup "$(member_port 1)" "${ports[@]}"

	for k in 2 3; do
		say "patroni member alloc$k on 127.0.0.1:$(member_port "$k") (REST API :$(member_rest "$k")), clones alloc1"
		start_patroni "$k"
	done
	local list deadline=$((SECONDS + 180))
	while :; do
		list=$(patroni_list)
		[ "$(printf '%s\n' "$list" | awk -F'\t' '$5 == "running" || $5 == "streaming"' | wc -l)" = 3 ] &&
			printf '%s\n' "$list" | awk -F'\t' '$4 == "Sync Standby"' | grep -q . && break
		for k in 2 3; do
			kill -0 "$(cat "$dir/alloc$k.patroni.pid")" 2>/dev/null || die "patroni alloc$k exited; see $dir/alloc$k.patroni.log"
		done
		((SECONDS < deadline)) || die "the Patroni members did not all run with a synchronous standby within 180s; see $dir/alloc*.patroni.log"
		sleep 1
	done

	conninfo="host=127.0.0.1,127.0.0.1,127.0.0.1 port=$(IFS=,; echo "${ports[*]}") dbname=postgres user=leaf_fleet passfile=$dir/leaf.pgpass target_session_attrs=read-write connect_timeout=2 tcp_user_timeout=10000"
}

do_start() {
	local p i pw data conninfo d

	[ -x "$pgbin/postgres" ] || die "PostgreSQL is not installed in $pgbin (set FLEET_PGBIN)"
	[ -f "$("$pgbin/pg_config" --pkglibdir)/leaf.so" ] ||
		die "leaf is not installed; run make && make install first"

	nshards=${FLEET_SHARDS:-3}
	base=${FLEET_PORT_BASE:-5500}
	[[ "$nshards" =~ ^[1-9][0-9]?$ ]] || die "FLEET_SHARDS must be 1..99"
	if ! [[ "$base" =~ ^[0-9]+$ ]] || ((base < 1024 || base + 10 + nshards > 65535)); then
		die "FLEET_PORT_BASE must leave room for ports up to +$((10 + nshards)) below 65536"
	fi

	alloc_mode=${FLEET_ALLOC:-manual}
	case "$alloc_mode" in
		manual) ;;
		patroni)
			if ! command -v patroni >/dev/null || ! command -v patronictl >/dev/null; then
				die "FLEET_ALLOC=patroni needs Debian's patroni and python3-kazoo packages"
			fi
			[ "${FLEET_ZK:-1}" != 0 ] || die "FLEET_ALLOC=patroni needs ZooKeeper (FLEET_ZK=1)"
			;;
		*) die "FLEET_ALLOC must be manual or patroni" ;;
	esac

	use_zk=1
	if [ "${FLEET_ZK:-1}" = 0 ]; then
		use_zk=0
	elif ! command -v java >/dev/null || [ ! -f /usr/share/java/zookeeper.jar ] ||
		[ ! -f /usr/share/java/slf4j-simple.jar ]; then
		[ "$alloc_mode" = manual ] || die "FLEET_ALLOC=patroni needs java and Debian's zookeeper package"
		echo "note: java or Debian's zookeeper package is missing; shards get leaf.worker_id by hand" >&2
		use_zk=0
	fi

	# the directory: new, empty, or left by an earlier fleet
	if [ -f "$dir/fleet.env" ]; then
		for d in "$dir"/alloc_primary "$dir"/alloc_standby "$dir"/alloc[123] "$dir"/shard*; do
			if [ -d "$d" ] && pg_running "$d"; then
				die "a fleet is running in $dir; stop it first: $0 stop $dir"
			fi
		done
		for d in "$dir"/alloc[123].patroni.pid; do
			if [ -f "$d" ] && kill -0 "$(cat "$d")" 2>/dev/null; then
				die "the fleet's patroni is still running; stop it first: $0 stop $dir"
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
	if [ "$alloc_mode" = patroni ]; then
		alloc_ports="$((base + 3)) $((base + 4)) $((base + 5)) $((base + 6)) $((base + 7)) $((base + 8))"
	else
		alloc_ports="$alloc1_port $alloc2_port"
	fi
	for p in $alloc_ports "$zk_port" $(seq $((base + 11)) $((base + 10 + nshards))); do
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
alloc_mode=$alloc_mode
EOF

	# -- ZooKeeper (Patroni's DCS too)
	if [ "$use_zk" = 1 ]; then
		say "zookeeper on 127.0.0.1:$zk_port"
		start_zk
	fi

	# -- allocation database
	if [ "$alloc_mode" = patroni ]; then
		start_alloc_patroni
	else
		start_alloc_manual
	fi

	# -- shards
	for ((i = 1; i <= nshards; i++)); do
		p=$((base + 10 + i))
		data=$dir/shard$i
		say "shard $i on 127.0.0.1:$p"
		new_cluster "shard$i" "$p"
		# the allocation standby is synchronous (Patroni's synchronous mode
		# never promotes a member that may lack an acknowledged commit), so
		# the shards take a promoted standby's new timeline without a
		# confirmation
		as_pg tee -a "$data/postgresql.conf" >/dev/null <<EOF
leaf.alloc_conninfo = '$conninfo'
leaf.alloc_failover = 'synchronous'
EOF
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
	echo
	echo "Connect (as OS user postgres):"
	echo "                 psql -h $dir/sock -p $((base + 11)) -U postgres postgres"
	if [ "$alloc_mode" = patroni ]; then
		cat <<EOF
Try a failover (as OS user postgres): kill -9 the leader's Patroni and
its postmaster; Patroni promotes the synchronous standby after its ttl (10s):
                 kill -9 \$(cat $dir/alloc1.patroni.pid) \$(head -n 1 $dir/alloc1/postmaster.pid)
                 $0 status $dir
Bring the member back (it rejoins as a replica):
                 $0 start-member 1 $dir
A switchover:    patronictl -c $dir/alloc1.yml switchover
EOF
	else
		cat <<EOF
Try a failover (as OS user postgres):
                 $pgbin/pg_ctl -D $dir/alloc_primary -m immediate stop
                 $pgbin/pg_ctl -D $dir/alloc_standby promote
EOF
	fi
	echo "Stop the fleet:  $0 stop $dir"
}

# ---------------------------------------------------------------- status

status_manual() {
	local p name state
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
}

# the Patroni members: role (Leader, Sync Standby, Replica), state,
# timeline and lag as patronictl lists them, and max_id on the leader
status_patroni() {
	local k p line role state tl lag extra
	local list
	list=$(patroni_list)
	for k in 1 2 3; do
		p=$(member_port "$k")
		line=$(printf '%s\n' "$list" | awk -F'\t' -v m="alloc$k" '$2 == m')
		if [ -z "$line" ]; then
			if [ -f "$dir/alloc$k.patroni.pid" ] && kill -0 "$(cat "$dir/alloc$k.patroni.pid")" 2>/dev/null; then
				state="patroni running, not listed yet"
			else
				state="patroni not running"
			fi
			printf '%-14s %-16s %s\n' "alloc$k" "127.0.0.1:$p" "$state"
			continue
		fi
		IFS=$'\t' read -r _ _ _ role state tl lag <<<"$line"
		extra=""
		if [ "$role" = Leader ]; then
			extra=$(psql_at "$p" "SELECT ', order max_id ' || max_id FROM leaf_alloc WHERE biz_tag = 'order'" 2>/dev/null) || true
		elif [ -n "$lag" ]; then
			extra=", lag $lag MB"
		fi
		printf '%-14s %-16s %s\n' "alloc$k" "127.0.0.1:$p" "patroni: $role, $state, timeline ${tl:-?}$extra"
	done
}

do_status() {
	local i p sf mode ids state

	load_env
	printf '%-14s %-16s %s\n' SERVER ADDRESS STATE
	if [ "${alloc_mode:-manual}" = patroni ]; then
		status_patroni
	else
		status_manual
	fi
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
		# the IDs, or the error of a failed call (its ERROR line)
		ids=$(psql_at "$p" "SET leaf.wait_timeout = '3s'; SELECT string_agg(leaf_segment_nextval('order')::text, ' ') FROM generate_series(1, 3)" 2>&1) || true
		if printf '%s\n' "$ids" | grep -q '^ERROR: '; then
			ids=$(printf '%s\n' "$ids" | grep -m 1 '^ERROR: ')
		else
			ids=$(printf '%s\n' "$ids" | tail -n 1)
		fi
		state=$(psql_at "$p" "SELECT source || ', step ' || step FROM leaf_segments WHERE biz_tag = 'order'" 2>&1) || true
		printf '%-14s %-16s %s\n' "shard$i" "127.0.0.1:$p" "segments from ${state:-?}"
		printf '%-14s %-16s %s\n' "" "" "segment IDs:   $ids"
		if [ "$(psql_at "$p" "SELECT to_regprocedure('leaf_snowflake()') IS NOT NULL" 2>/dev/null)" = t ]; then
			# a node not ready yet (in the wait of a new registration, say)
			# shows what it waits for, not the hint of the failed call
			if [ "$(psql_at "$p" "SELECT ready FROM leaf_snowflake_status" 2>/dev/null)" = t ]; then
				sf=$(psql_at "$p" "SELECT string_agg(leaf_snowflake()::text, ' ') FROM generate_series(1, 3)" 2>&1 | tail -n 1) || true
			else
				sf="not ready yet: $(psql_at "$p" "SELECT coalesce(not_ready_reason, 'starting') FROM leaf_snowflake_status" 2>&1 | tail -n 1)"
			fi
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
	start-member)
		load_env
		[ "${alloc_mode:-manual}" = patroni ] || die "start-member is for a fleet started with FLEET_ALLOC=patroni"
		if [ -f "$dir/alloc$member.patroni.pid" ] && kill -0 "$(cat "$dir/alloc$member.patroni.pid")" 2>/dev/null; then
			die "patroni of alloc$member is running"
		fi
		start_patroni "$member"
		say "patroni alloc$member started; see $dir/alloc$member.patroni.log"
		;;
	*) usage ;;
esac
