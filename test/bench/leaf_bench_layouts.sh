#!/usr/bin/env bash
#
# leaf_bench_layouts.sh: the speed of leaf_snowflake() under each snowflake
# layout (leaf.snowflake_layout), against the layout's own limit (IDs per
# unit of time per node) and, in the same run, against nextval() and the
# floor of an empty call (clock_timestamp()).  Not part of the test suite.
#
# Run as root or as postgres, after "make install":
#
#   test/bench/leaf_bench_layouts.sh
#
# Environment:
#   PGBIN        PostgreSQL binaries (default: pg_config --bindir)
#   BENCH_PORT   port of the throwaway cluster (default 55479)
#   LAYOUTS      layouts to measure (default "default js53 41+13+9
#                38+16+9/10ms")
#   N            IDs per statement (default 1000000, the most one
#                leaf_snowflake_nextvals() call takes)
#   REPS         repetitions of each statement; medians (default 3)
#   BENCH_OUT    markdown report (default ./bench-out/layouts.md)
set -euo pipefail

PGBIN=${PGBIN:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
PORT=${BENCH_PORT:-55479}
LAYOUTS=${LAYOUTS:-"default js53 41+13+9 38+16+9/10ms"}
N=${N:-1000000}
REPS=${REPS:-3}
REPORT=${BENCH_OUT:-./bench-out/layouts.md}

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
as_pg() {
	if [ "$(id -un)" = postgres ]; then bash -c "$1"; else su postgres -s /bin/bash -c "$1"; fi
}

WORK=$(mktemp -d /tmp/leaf-bench-layouts.XXXXXX)
chmod 755 "$WORK"
chown postgres "$WORK" 2>/dev/null || true
D=$WORK/data
cleanup() {
	as_pg "$PGBIN/pg_ctl -D '$D' -m immediate -w stop" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

q() { as_pg "$PGBIN/psql -X -q -At -h 127.0.0.1 -p $PORT -d postgres -c \"$1\""; }

# ms of one statement, from psql's \timing
ms_of() {
	local out
	out=$(as_pg "$PGBIN/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p $PORT -d postgres" <<EOF
\\timing on
$1
EOF
	) || { log "failed: $1"; exit 1; }
	awk '/^Time:/ {print $2}' <<<"$out"
}

# the median of a list of numbers separated by spaces (the lists below
# start with one, which is no number)
median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

mkdir -p "$(dirname "$REPORT")"
as_pg "$PGBIN/initdb -D '$D' -U postgres -A trust -E UTF8 --locale=C.UTF-8 -N >'$WORK/initdb.log' 2>&1" ||
	{ cat "$WORK/initdb.log" >&2; exit 1; }

{
	echo "# leaf_snowflake() under each layout"
	echo
	echo "$(date -u +%F) on $(nproc) cores, PostgreSQL $("$PGBIN/postgres" -V | awk '{print $3}'), at most N = $N IDs (or 2 s of the layout's limit) per statement, median of $REPS runs, load before: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo "The limit is the layout's IDs per unit of time per node; a bulk call (\`leaf_snowflake_nextvals\`) should come close to it, single calls stay below it when the limit is above what one session can take."
	echo
	echo "| layout | limit (IDs/s) | IDs per statement | span of one call's timestamps, ms (least possible) | \`count(*) FROM nextvals\` IDs/s | of limit | \`leaf_snowflake()\` ns/ID | \`nextval()\` ns/ID | floor ns/ID | leaf / nextval | leaf - floor ns |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
} >"$REPORT"

for layout in $LAYOUTS; do
	log "layout $layout"
	cat >"$WORK/leaf.conf" <<EOF
port = $PORT
listen_addresses = '127.0.0.1'
shared_preload_libraries = 'leaf'
leaf.worker_id = 1
leaf.snowflake_layout = '$layout'
EOF
	as_pg "rm -f '$D/leaf_snowflake.state'; cp '$WORK/leaf.conf' '$D/postgresql.auto.conf'"
	as_pg "$PGBIN/pg_ctl -D '$D' -l '$WORK/server.log' -w -t 60 start >/dev/null"
	q "CREATE EXTENSION IF NOT EXISTS leaf; CREATE SEQUENCE IF NOT EXISTS bench_seq;" >/dev/null
	for _ in $(seq 1 50); do
		[ "$(q 'SELECT ready FROM leaf_snowflake_status')" = t ] && break
		sleep 0.2
	done
	IFS='|' read -r name per_unit unit <<<"$(q 'SELECT layout, ids_per_unit, time_unit_ms FROM leaf_snowflake_layout()')"
	limit=$((per_unit * 1000 / unit))
	# at most 2 s worth of the limit per statement
	n=$N
	[ "$n" -gt $((2 * limit)) ] && n=$((2 * limit))
	[ "$n" -gt 1000000 ] && n=1000000
	bulk="" single="" seq_="" floor=""
	for _ in $(seq 1 "$REPS"); do
		bulk="$bulk $(ms_of "SELECT count(*) FROM leaf_snowflake_nextvals($n);")"
		single="$single $(ms_of "SELECT count(leaf_snowflake()) FROM generate_series(1, $n);")"
		seq_="$seq_ $(ms_of "SELECT count(nextval('bench_seq')) FROM generate_series(1, $n);")"
		floor="$floor $(ms_of "SELECT count(clock_timestamp()) FROM generate_series(1, $n);")"
	done
	mb=$(median <<<"$bulk"); msn=$(median <<<"$single"); mq=$(median <<<"$seq_"); mf=$(median <<<"$floor")
	# how fast the generator itself went: the span of one bulk call's
	# decoded timestamps, against the least the layout allows
	span=$(q "SELECT round(extract(epoch FROM max(t) - min(t)) * 1000) FROM (SELECT (leaf_snowflake_decode(id)).ts AS t FROM leaf_snowflake_nextvals($n) AS id) s")
	minspan=$(( (n - 1) / per_unit * unit ))
	awk -v name="$name" -v limit="$limit" -v n="$n" -v mb="$mb" -v ms="$msn" -v mq="$mq" -v mf="$mf" \
		-v span="$span" -v minspan="$minspan" 'BEGIN {
		bulk = n / (mb / 1000);
		printf "| `%s` | %d | %d | %d (%d) | %.0f | %.2f | %.0f | %.0f | %.0f | %.2f | %.0f |\n",
			name, limit, n, span, minspan, bulk, bulk / limit, ms * 1e6 / n, mq * 1e6 / n, mf * 1e6 / n,
			ms / mq, (ms - mf) * 1e6 / n }' >>"$REPORT"
	as_pg "$PGBIN/pg_ctl -D '$D' -m fast -w stop >/dev/null"
done
echo >>"$REPORT"
echo "Load after: $(cut -d' ' -f1-3 /proc/loadavg)." >>"$REPORT"
cat "$REPORT"
