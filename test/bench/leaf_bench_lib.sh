# test/bench/leaf_bench_lib.sh: what the benchmark scripts share, sourced
# by leaf_bench.sh, leaf_tp999.sh and leaf_pk_bench.sh once PGBIN (and
# here, the folder test/bench) is set.
#
#   log, die             a timed line on stderr; die also exits 1
#   loadavg              the three load averages
#   bench_check          refuse to run but as root or postgres, without
#                        PGBIN's server or an installed leaf; sets me
#   as_pg CMD            run a shell command as user postgres
#   bench_workdir NAME   a new /tmp/NAME.XXXXXX that postgres may write,
#                        with logs/ and scripts/; sets WORK
#   init_template        one initdb in $WORK/template, copied for every
#                        cluster
#   q PORT SQL, qf PORT  psql on a cluster of $WORK: one statement, or
#                        SQL from stdin; unaligned, tuples only
#   free_port            a loopback TCP port nobody listens on now
#                        (Python 3: $PYTHON, default python3)
#   bench_start_copy NAME LINES...
#                        a copy of the template in $WORK/NAME, started
#                        on a free port with the postgresql.conf lines
#                        given; a port taken meanwhile is tried again,
#                        twice.  Sets BENCH_PORT, adds to STARTED
#   bench_build_info     what a report says of the build under test: sets
#                        SO (the installed leaf.so), SO_SUM, SO_TIME,
#                        COMMIT and DIRTY (of the checkout $here;
#                        BENCH_COMMIT names the commit of a copy without
#                        .git)
#   bench_finish RC      the end of every run, failed or not: stop the
#                        clusters of $WORK, remove it (unless BENCH_KEEP=1)
#                        and exit RC

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

bench_check() {
	me=$(id -un)
	[ "$me" = root ] || [ "$me" = postgres ] || die "run as root or postgres"
	[ -x "$PGBIN/postgres" ] || die "PostgreSQL not found in $PGBIN"
	[ -f "$("$PGBIN/pg_config" --pkglibdir)/leaf.so" ] || die "leaf is not installed (make install)"
}

as_pg() {
	if [ "$me" = root ]; then
		su postgres -s /bin/bash -c "$1"
	else
		bash -c "$1"
	fi
}

bench_workdir() {
	WORK=$(mktemp -d "/tmp/$1.XXXXXX")
	chmod 755 "$WORK"
	[ "$me" = root ] && chown postgres: "$WORK"
	mkdir -p "$WORK/logs" "$WORK/scripts"
}

init_template() {
	as_pg "$PGBIN/initdb -D '$WORK/template' -U postgres -A trust -E UTF8 --locale=C.UTF-8 -N >'$WORK/initdb.log' 2>&1" ||
		{ cat "$WORK/initdb.log" >&2; die "initdb failed"; }
}

q() {
	psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$WORK" -p "$1" -U postgres -d postgres -c "$2"
}

qf() {
	psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$WORK" -p "$1" -U postgres -d postgres
}

free_port() {
	"${PYTHON:-python3}" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

bench_start_copy() {
	local name=$1 d=$WORK/$1 port l
	shift
	as_pg "cp -a '$WORK/template' '$d'"
	as_pg "cp '$d/postgresql.conf' '$d/postgresql.conf.orig'"
	for _ in 1 2 3; do
		port=$(free_port)
		as_pg "cp '$d/postgresql.conf.orig' '$d/postgresql.conf'"
		{
			printf '\n# %s\nport = %s\n' "$(basename "$0")" "$port"
			for l in "$@"; do
				printf '%s\n' "$l"
			done
		} >>"$d/postgresql.conf"
		if as_pg "$PGBIN/pg_ctl -D '$d' -l '$d/server.log' -w -t 60 start >/dev/null"; then
			STARTED+=("$d")
			BENCH_PORT=$port
			return 0
		fi
		# only a port taken meanwhile is worth another try
		grep -q 'already in use' "$d/server.log" 2>/dev/null || break
		log "port $port was taken, trying another"
	done
	tail -n 30 "$d/server.log" >&2
	die "could not start cluster $name"
}

bench_build_info() {
	SO=$("$PGBIN/pg_config" --pkglibdir)/leaf.so
	SO_SUM=$(md5sum "$SO" | cut -c1-12)
	SO_TIME=$(date -r "$SO" '+%Y-%m-%d %H:%M:%S')
	COMMIT=${BENCH_COMMIT:-$(git -C "$here" -c safe.directory='*' rev-parse --short HEAD 2>/dev/null || echo unknown)}
	if DIRTY=$(git -C "$here" -c safe.directory='*' status --porcelain --untracked-files=no 2>/dev/null); then
		DIRTY="$(printf '%s' "$DIRTY" | grep -c . || true) files modified"
	else
		DIRTY="no git checkout"
	fi
}

# bench_finish RC: stop every cluster of $WORK still running, those named
# in STARTED and any other with a postmaster.pid (one a signal caught
# between its start and its entry in STARTED), remove $WORK unless
# BENCH_KEEP=1, and exit RC.  Each script's cleanup trap ends with it.
bench_finish() {
	local d
	for d in "${STARTED[@]}" "$WORK"/*/postmaster.pid; do
		[ -f "$d" ] && d=$(dirname "$d")
		[ -d "$d" ] || continue
		as_pg "$PGBIN/pg_ctl -D '$d' -m immediate -w stop" >/dev/null 2>&1 || true
	done
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$1"
}
