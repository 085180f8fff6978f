#!/usr/bin/env bash
#
# leaf_bench.sh: benchmark leaf against its peers (sequences, UUIDs, the
# clock_timestamp() floor), side by side, on throwaway PostgreSQL clusters
# (15 or later; uuidv7() is a row of its own where the server has it, 18
# and later).  Not part of the test suite.
#
# Run as root or as postgres, after "make install":
#
#   test/bench/leaf_bench.sh                  full run (about 16 minutes)
#   BENCH_QUICK=1 test/bench/leaf_bench.sh    smoke run (about 2 minutes)
#
# Environment:
#   PGBIN           PostgreSQL binaries (default: pg_config --bindir of the
#                   pg_config in PATH, else /usr/lib/postgresql/15/bin)
#   BENCH_PORT      port of the first cluster (default 55499); the fleet
#                   uses the next four ports (allocation DB and 3 shards)
#   BENCH_OUT       markdown report (default ./bench-out/results.md)
#   BENCH_QUICK=1   N=200000, REPS=1, T=3
#   N               IDs per single-session statement (default 5000000)
#   REPS            repetitions, run rep-major; medians (default 3)
#   PGBENCH_REPS    repetitions of the pgbench runs (default REPS)
#   T               seconds per pgbench run (default 15)
#   BULK_SEG        IDs per leaf_segment_nextvals() call (default 1000000)
#   SF_N            IDs per leaf_snowflake_nextvals() call (default 1000000,
#                   the most one call takes since release 1.3)
#   BULK_ROWS       rows per bulk load (default 1000000)
#   BULK_STEP       step of the tag the bulk loads use (default 100000)
#   BULK_PK         1 (default): the loaded tables have a primary key on
#                   the ID; 0: no index
#   BENCH_PNG_DIR   where the gnuplot pictures go (default: next to
#                   BENCH_OUT); no pictures without gnuplot
#   BENCH_SEGMENT_DURATION
#                   leaf.segment_duration of the clusters (default 1ms, so
#                   that the dynamic step of a step-1000 tag stays small and
#                   refills keep happening; empty = the extension default)
#   BENCH_SECTIONS  which sections to run (default "1 2 3 4 bulk")
#   BENCH_KEEP=1    keep the temporary directory (clusters stopped)
#   BENCH_COMMIT    the commit to name in the report, for a copy without
#                   .git (test/majors.sh bench sets it)
#
# Sections:
#   1  one session: SELECT count(<expr>) FROM generate_series(1, N), plus
#      the bulk functions
#   2  pgbench -M prepared -c {2,8} -j 2, latencies from the per-transaction
#      log (every script ends with "\set z 0": without it pgbench 15 logs
#      many transactions with a latency of 0)
#   3  fleet: an allocation database and 3 shards with leaf.alloc_conninfo;
#      refill timing over loopback and locally, and 3 shards x 2 clients
#      against one instance with 6 clients
#   4  public IDs: SELECT count(<expr>) FROM generate_series(1, N) x for
#      leaf_public_id and its inverse and text forms, beside
#      leaf_segment_nextval and gen_random_uuid(), under a throwaway key
#   bulk  BULK_ROWS rows loaded with COPY and INSERT ... SELECT into tables
#      keyed by identity, bigserial, leaf defaults, or leaf IDs taken in
#      bulk and supplied in the data
#
# With gnuplot (Debian package gnuplot-nox) the script also draws its
# results: leaf_bench_pgbench.png (section 2), leaf_bench_refill.png
# (section 3) and leaf_bench_bulk.png (bulk loads).
#
set -euo pipefail

# PostgreSQL binaries: $PGBIN if set, else the bindir of the pg_config found
# first in PATH (PATH=/some/copy/bin:$PATH picks that installation), else
# Debian's default.  psql and pgbench come from the same directory.
if [ -z "${PGBIN:-}" ]; then
	PGBIN=$(pg_config --bindir 2>/dev/null || true)
	[ -x "$PGBIN/postgres" ] || PGBIN=/usr/lib/postgresql/15/bin
fi
PATH=$PGBIN:$PATH
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

CMDLINE=""
for v in BENCH_QUICK N REPS PGBENCH_REPS T BULK_SEG SF_N BULK_ROWS BULK_STEP BULK_PK BENCH_PORT BENCH_SEGMENT_DURATION BENCH_SECTIONS BENCH_OUT; do
	if [ -n "${!v+x}" ]; then
		CMDLINE="$CMDLINE$v=${!v} "
	fi
done
CMDLINE="$CMDLINE$0"

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	N=${N:-200000}
	REPS=${REPS:-1}
	T=${T:-3}
	BULK_SEG=${BULK_SEG:-200000}
	SF_N=${SF_N:-200000}
	BULK_ROWS=${BULK_ROWS:-100000}
fi
N=${N:-5000000}
REPS=${REPS:-3}
T=${T:-15}
PGBENCH_REPS=${PGBENCH_REPS:-$REPS}
BULK_SEG=${BULK_SEG:-1000000}
SF_N=${SF_N:-1000000}
BULK_ROWS=${BULK_ROWS:-1000000}
BULK_STEP=${BULK_STEP:-100000}
BULK_PK=${BULK_PK:-1}
BENCH_PORT=${BENCH_PORT:-55499}
BENCH_SEGMENT_DURATION=${BENCH_SEGMENT_DURATION-1ms}
BENCH_SECTIONS=${BENCH_SECTIONS:-1 2 3 4 bulk}
BENCH_OUT=${BENCH_OUT:-./bench-out/results.md}
CLIENTS=(2 8)

case "$BENCH_OUT" in /*) ;; *) BENCH_OUT=$PWD/$BENCH_OUT ;; esac

PORT_MAIN=$BENCH_PORT
PORT_ALLOC=$((BENCH_PORT + 1))
PORT_SHARD=($((BENCH_PORT + 2)) $((BENCH_PORT + 3)) $((BENCH_PORT + 4)))

. "$(dirname "$0")/leaf_bench_lib.sh"
bench_check

bench_workdir leaf-bench
STARTED=()						# data directories of running clusters
BGPIDS=()						# background pgbench runs

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${BGPIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	bench_finish "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


# ---------------------------------------------------------------- clusters


# start_cluster NAME PORT [EXTRA-CONF-LINE...]
start_cluster() {
	local name=$1 port=$2 d=$WORK/$1
	shift 2
	as_pg "cp -a '$WORK/template' '$d'"
	{
		cat <<EOF

# leaf_bench.sh
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_preload_libraries = 'leaf'
leaf.worker_id = 1
max_connections = 50
shared_buffers = 256MB
jit = off
max_worker_processes = 16
logging_collector = off
EOF
		if [ -n "$BENCH_SEGMENT_DURATION" ]; then
			echo "leaf.segment_duration = '$BENCH_SEGMENT_DURATION'"
		fi
		for l in "$@"; do
			echo "$l"
		done
	} >>"$d/postgresql.conf"
	as_pg "$PGBIN/pg_ctl -D '$d' -l '$d/server.log' -w -t 60 start >/dev/null" ||
		{ tail -n 30 "$d/server.log" >&2; die "could not start cluster $name"; }
	STARTED+=("$d")
}

# seg_counters PORT TAG: "step|refills|waits|max_wait_ms" of a tag
seg_counters() {
	q "$1" "SELECT step, refills, waits, round(max_wait_ms::numeric, 3)
	          FROM leaf_segments
	         WHERE biz_tag = '$2' AND database = current_database()"
}

# ---------------------------------------------------------------- stats

# median of the numbers on stdin
median() {
	sort -g | awk '{a[NR] = $1}
		END {
			if (NR == 0) { print "nan"; exit }
			if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2
		}'
}

# lat_stats FILE...: pgbench per-transaction logs (column 3 = latency in us)
# -> "avg p50 p99 p999 max zero% n" (ms, except zero% and n)
lat_stats() {
	awk '{print $3}' "$@" | sort -n | awk '
		function pct(p,   i) { i = int(NR * p); if (i < NR * p) i++; if (i < 1) i = 1; return a[i] }
		{ a[NR] = $1; s += $1; if ($1 == 0) z++ }
		END {
			if (NR == 0) { print "nan nan nan nan nan nan 0"; exit }
			printf "%.3f %.3f %.3f %.3f %.3f %.2f %d\n", s / NR / 1000, pct(0.50) / 1000,
				pct(0.99) / 1000, pct(0.999) / 1000, a[NR] / 1000, 100 * z / NR, NR
		}'
}

# ratio A B [DIGITS]: A / B, or n/a
ratio() {
	awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN {
		if (a == "nan" || b == "nan" || b + 0 <= 0) print "n/a"; else printf "%.*f\n", d, a / b }'
}

# ---------------------------------------------------------------- pgbench

# write_script NAME BODY: a pgbench script; "\set z 0" makes pgbench read
# the clock again before logging the transaction
write_script() {
	printf '%s\n\\set z 0\n' "$2" >"$WORK/scripts/$1.sql"
}

# pgb LOGNAME PORT HOST MODE CLIENTS THREADS SCRIPT: one pgbench run; logs
# stay in $WORK/logs/LOGNAME.*, the tps is printed
pgb() {
	local name=$1 port=$2 host=$3 mode=$4 c=$5 j=$6 script=$7
	local prefix=$WORK/logs/$name
	if ! pgbench -n -M "$mode" -c "$c" -j "$j" -T "$T" --log --log-prefix="$prefix" \
		-h "$host" -p "$port" -U postgres -f "$WORK/scripts/$script.sql" postgres \
		>"$prefix.out" 2>&1; then
		cat "$prefix.out" >&2
		die "pgbench $name failed"
	fi
	awk '/^tps = / {print $3; exit}' "$prefix.out"
}

# ---------------------------------------------------------------- report

REPORT=$WORK/report.md
: >"$REPORT"
out() { printf '%s\n' "$*" >>"$REPORT"; }

LOADROWS=()
section_begin() { SECTION_T0=$(date +%s); SECTION_L0=$(loadavg); log "== $1 (load $SECTION_L0)"; }
section_end() {
	LOADROWS+=("| $1 | $SECTION_L0 | $(loadavg) | $(($(date +%s) - SECTION_T0)) |")
}

# ================================================================ setup

log "work directory $WORK"
init_template
start_cluster main "$PORT_MAIN"

qf "$PORT_MAIN" >/dev/null <<'SQL'
CREATE EXTENSION leaf;
CREATE SEQUENCE s;
CREATE SEQUENCE s_c1000 CACHE 1000;
SELECT leaf_segment_create('bench', 1000);
SELECT leaf_segment_create('bench_big', 1000000);
SELECT leaf_segment_create('drain', 1000);
SELECT leaf_segment_create('refill_probe', 1000);
SELECT leaf_segment_nextval('bench'), leaf_segment_nextval('bench_big'),
       leaf_segment_nextval('drain');
SQL

HAVE_SF=0
HAVE_SF_BULK=0
if [ "$(q "$PORT_MAIN" "SELECT count(*) FROM pg_proc WHERE proname = 'leaf_snowflake'")" != 0 ]; then
	if q "$PORT_MAIN" "SELECT leaf_snowflake()" >/dev/null 2>"$WORK/sf.err"; then
		HAVE_SF=1
	else
		log "leaf_snowflake() exists but fails: $(head -1 "$WORK/sf.err")"
	fi
fi
if [ $HAVE_SF = 1 ] &&
	[ "$(q "$PORT_MAIN" "SELECT count(*) FROM pg_proc WHERE proname IN ('leaf_snowflake_nextvals', 'leaf_snowflake_decode')")" = 2 ]; then
	HAVE_SF_BULK=1
fi
log "leaf_snowflake: $([ $HAVE_SF = 1 ] && echo present || echo absent)"
# the built-in UUIDv7 (PostgreSQL 18 and later)
HAVE_UUIDV7=0
if [ "$(q "$PORT_MAIN" "SELECT count(*) FROM pg_proc WHERE proname = 'uuidv7' AND pronamespace = 'pg_catalog'::regnamespace AND pronargs = 0")" != 0 ]; then
	HAVE_UUIDV7=1
fi
log "uuidv7(): $([ $HAVE_UUIDV7 = 1 ] && echo present || echo absent)"

PGVER=$(q "$PORT_MAIN" "SELECT version()")
bench_build_info

out "# leaf benchmark"
out ""
out "| item | value |"
out "|---|---|"
out "| command | \`$CMDLINE\` |"
out "| date | $(date '+%Y-%m-%d %H:%M:%S %Z') |"
out "| host | $(nproc) vCPU $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GB RAM", $2 / 1048576}' /proc/meminfo) |"
out "| server | ${PGVER%% on *} |"
out "| leaf | checkout $COMMIT ($DIRTY), installed leaf.so md5 $SO_SUM... ($SO_TIME) |"
out "| clusters | initdb -A trust -E UTF8 --locale=C.UTF-8; listen 127.0.0.1, max_connections=50, shared_buffers=256MB, jit=off, max_worker_processes=16, shared_preload_libraries=leaf, leaf.worker_id=1, leaf.segment_duration=${BENCH_SEGMENT_DURATION:-default}; fsync and synchronous_commit on |"
out "| parameters | N=$N, REPS=$REPS, PGBENCH_REPS=$PGBENCH_REPS, T=${T}s, BULK_SEG=$BULK_SEG, SF_N=$SF_N, BULK_ROWS=$BULK_ROWS, BULK_STEP=$BULK_STEP, BULK_PK=$BULK_PK |"
out "| leaf_snowflake | $([ $HAVE_SF = 1 ] && echo present || echo 'absent (rows skipped)') |"
out "| uuidv7() | $([ $HAVE_UUIDV7 = 1 ] && echo 'present (built in)' || echo 'absent (before PostgreSQL 18; rows skipped)') |"
out ""

# expressions, shared by sections 1 and 2
LABELS=("count(*) (empty loop)" "clock_timestamp() (floor)" "nextval('s') default"
	"nextval('s_c1000') CACHE 1000" "gen_random_uuid()"
	"leaf_segment_nextval('bench') step 1000" "leaf_segment_nextval('bench_big') step 1000000")
EXPRS=("*" "clock_timestamp()" "nextval('s')" "nextval('s_c1000')" "gen_random_uuid()"
	"leaf_segment_nextval('bench')" "leaf_segment_nextval('bench_big')")
if [ $HAVE_UUIDV7 = 1 ]; then
	LABELS+=("uuidv7()")
	EXPRS+=("uuidv7()")
fi
if [ $HAVE_SF = 1 ]; then
	LABELS+=("leaf_snowflake()")
	EXPRS+=("leaf_snowflake()")
fi

# single_ms PORT SQL: server time of one statement (psql \timing), in ms
single_ms() {
	qf "$1" <<SQL | awk '/^Time: / {t = $2} END {if (t == "") exit 1; print t}'
SET work_mem = '1GB';
\timing on
$2
SQL
}

want() { case " $BENCH_SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }

# ================================================================ section 1

if want 1; then
	section_begin "1. single session"
	declare -A RUNS
	c0_bench=$(seg_counters "$PORT_MAIN" bench)
	c0_big=$(seg_counters "$PORT_MAIN" bench_big)
	for rep in $(seq 1 "$REPS"); do
		for i in "${!EXPRS[@]}"; do
			ms=$(single_ms "$PORT_MAIN" "SELECT count(${EXPRS[$i]}) FROM generate_series(1, $N);")
			RUNS[$i]="${RUNS[$i]:-}${RUNS[$i]:+ }$ms"
			log "rep $rep ${LABELS[$i]}: $ms ms"
		done
	done

	declare -A MED
	for i in "${!EXPRS[@]}"; do
		MED[$i]=$(tr ' ' '\n' <<<"${RUNS[$i]}" | median)
	done
	loop=${MED[0]}
	floor_net=$(awk -v m="${MED[1]}" -v l="$loop" -v n="$N" 'BEGIN {printf "%.1f", (m - l) * 1e6 / n}')

	out "## 1. One session: \`SELECT count(<expr>) FROM generate_series(1, $N)\`"
	out ""
	out "psql \\timing, work_mem=1GB, $REPS repetition(s) run rep-major, median. Net = minus the empty loop \`count(*)\`. Ratio = net / net of \`clock_timestamp()\`."
	out ""
	out "| expression | runs (ms) | median ms | ns/ID gross | ns/ID net | ratio to floor (net) |"
	out "|---|---|---|---|---|---|"
	for i in "${!EXPRS[@]}"; do
		m=${MED[$i]}
		gross=$(awk -v m="$m" -v n="$N" 'BEGIN {printf "%.0f", m * 1e6 / n}')
		net=$(awk -v m="$m" -v l="$loop" -v n="$N" 'BEGIN {printf "%.0f", (m - l) * 1e6 / n}')
		if [ "$i" = 0 ]; then
			r="-"
		else
			r=$(ratio "$(awk -v m="$m" -v l="$loop" -v n="$N" 'BEGIN {print (m - l) * 1e6 / n}')" "$floor_net")
		fi
		out "| \`${LABELS[$i]}\` | ${RUNS[$i]// / \/ } | $(printf '%.0f' "$m") | $gross | $net | $r |"
	done
	out ""

	# bulk functions
	out "Bulk functions (same session settings, $REPS repetition(s), median):"
	out ""
	out "| statement | runs (ms) | median ms | ns/ID | span of decoded timestamps |"
	out "|---|---|---|---|---|"
	runs=""
	for rep in $(seq 1 "$REPS"); do
		ms=$(single_ms "$PORT_MAIN" "SELECT count(*) FROM leaf_segment_nextvals('bench', $BULK_SEG);")
		runs="$runs${runs:+ }$ms"
		log "rep $rep leaf_segment_nextvals: $ms ms"
	done
	m=$(tr ' ' '\n' <<<"$runs" | median)
	out "| \`SELECT count(*) FROM leaf_segment_nextvals('bench', $BULK_SEG)\` | ${runs// / \/ } | $(printf '%.0f' "$m") | $(awk -v m="$m" -v n="$BULK_SEG" 'BEGIN {printf "%.0f", m * 1e6 / n}') | - |"
	if [ $HAVE_SF_BULK = 1 ]; then
		runs=""
		for rep in $(seq 1 "$REPS"); do
			ms=$(single_ms "$PORT_MAIN" "SELECT count(*) FROM leaf_snowflake_nextvals($SF_N);")
			runs="$runs${runs:+ }$ms"
			log "rep $rep leaf_snowflake_nextvals: $ms ms"
		done
		m=$(tr ' ' '\n' <<<"$runs" | median)
		spans=""
		for rep in $(seq 1 "$REPS"); do
			sp=$(q "$PORT_MAIN" "SET work_mem = '1GB';
				SELECT round(extract(epoch FROM max(d.ts) - min(d.ts)) * 1000)::bigint
				  FROM leaf_snowflake_nextvals($SF_N) i, LATERAL leaf_snowflake_decode(i) d")
			spans="$spans${spans:+ / }$sp"
		done
		minspan=$(awk -v n="$SF_N" 'BEGIN {printf "%d", int((n - 1) / 4096)}')
		out "| \`SELECT count(*) FROM leaf_snowflake_nextvals($SF_N)\` | ${runs// / \/ } | $(printf '%.0f' "$m") | $(awk -v m="$m" -v n="$SF_N" 'BEGIN {printf "%.0f", m * 1e6 / n}') | $spans ms (minimum possible $minspan ms at 4096 IDs/ms, target $((minspan * 111 / 100)) ms or less) |"
	fi
	if [ $HAVE_SF = 1 ]; then
		# In count(leaf_snowflake()) FROM generate_series(...) the series is
		# materialized first and the IDs are drawn afterwards, in a burst: the
		# span of their timestamps shows whether the 12-bit sequence (4096
		# IDs per ms) rather than the call itself set the pace.
		res=$(qf "$PORT_MAIN" <<SQL
SET work_mem = '1GB';
\\timing on
SELECT min(x) AS sf_a, max(x) AS sf_b FROM (SELECT leaf_snowflake() x FROM generate_series(1, $N)) s \\gset
\\timing off
SELECT 'span', round(extract(epoch FROM b.ts - a.ts) * 1000)::bigint
  FROM leaf_snowflake_decode(:sf_a) a, leaf_snowflake_decode(:sf_b) b;
SQL
)
		ms=$(awk '/^Time: / {print $2}' <<<"$res")
		sp=$(awk -F'|' '/^span\|/ {print $2}' <<<"$res")
		minspan=$(awk -v n="$N" 'BEGIN {printf "%d", int((n - 1) / 4096)}')
		out "| \`SELECT min(x), max(x) FROM (SELECT leaf_snowflake() x FROM generate_series(1, $N)) s\` (1 run) | $ms | $(printf '%.0f' "$ms") | $(awk -v m="$ms" -v n="$N" 'BEGIN {printf "%.0f", m * 1e6 / n}') | $sp ms (at 4096 IDs/ms the IDs need at least $minspan ms) |"
	fi
	out ""

	out "Segment counters over this section (\`leaf_segments\`; step = dynamic step at the end):"
	out ""
	out "| tag | step | refills | waits | max_wait_ms since server start (before -> after) |"
	out "|---|---|---|---|---|"
	for t in bench bench_big; do
		if [ $t = bench ]; then a=$c0_bench; else a=$c0_big; fi
		b=$(seg_counters "$PORT_MAIN" $t)
		IFS='|' read -r _ r0 w0 mw0 <<<"$a"
		IFS='|' read -r st r1 w1 mw <<<"$b"
		out "| $t | $st | $((r1 - r0)) | $((w1 - w0)) | $mw0 -> $mw |"
	done
	out ""
	section_end "1. single session"
fi

# ================================================================ section 2

if want 2; then
	section_begin "2. pgbench"
	SCRIPTS=(floor seq_default seq_c1000 uuid leaf_seg)
	SLABELS=("clock_timestamp() (floor)" "nextval('s') default" "nextval('s_c1000') CACHE 1000"
		"gen_random_uuid()" "leaf_segment_nextval('bench') step 1000")
	write_script floor "SELECT clock_timestamp();"
	write_script seq_default "SELECT nextval('s');"
	write_script seq_c1000 "SELECT nextval('s_c1000');"
	write_script uuid "SELECT gen_random_uuid();"
	write_script leaf_seg "SELECT leaf_segment_nextval('bench');"
	if [ $HAVE_UUIDV7 = 1 ]; then
		SCRIPTS+=(uuidv7)
		SLABELS+=("uuidv7()")
		write_script uuidv7 "SELECT uuidv7();"
	fi
	if [ $HAVE_SF = 1 ]; then
		SCRIPTS+=(leaf_sf)
		SLABELS+=("leaf_snowflake()")
		write_script leaf_sf "SELECT leaf_snowflake();"
	fi

	c0=$(seg_counters "$PORT_MAIN" bench)
	declare -A TPS LAT
	for rep in $(seq 1 "$PGBENCH_REPS"); do
		for c in "${CLIENTS[@]}"; do
			for s in "${SCRIPTS[@]}"; do
				name=pgb_${s}_c${c}_r$rep
				tps=$(pgb "$name" "$PORT_MAIN" "$WORK" prepared "$c" 2 "$s")
				TPS[$s.$c]="${TPS[$s.$c]:-}${TPS[$s.$c]:+ }$(printf '%.0f' "$tps")"
				LAT[$s.$c.$rep]=$(lat_stats "$WORK/logs/$name".[0-9]*)
				rm -f "$WORK/logs/$name".[0-9]*
				log "rep $rep c$c $s: tps $tps, lat $(cut -d' ' -f1-5 <<<"${LAT[$s.$c.$rep]}")"
			done
		done
	done
	c1=$(seg_counters "$PORT_MAIN" bench)

	out "## 2. pgbench: \`pgbench -n -M prepared -c {2,8} -j 2 -T $T --log\`"
	out ""
	out "Script: \`SELECT <expr>;\` then \`\\set z 0\`. $PGBENCH_REPS repetition(s) run rep-major; tps = median; latencies from the per-transaction log, median over repetitions (max = worst run). Ratios against \`clock_timestamp()\` at the same -c."
	out ""
	out "| script | -c | tps median | tps runs | tps / floor | lat avg ms | p50 ms | p99 ms | p99.9 ms | p99.9 / floor | max ms | 0-latency % | txns (last run) |"
	out "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for c in "${CLIENTS[@]}"; do
		ftps=$(tr ' ' '\n' <<<"${TPS[floor.$c]}" | median)
		fp999=$(for rep in $(seq 1 "$PGBENCH_REPS"); do cut -d' ' -f4 <<<"${LAT[floor.$c.$rep]}"; done | median)
		for k in "${!SCRIPTS[@]}"; do
			s=${SCRIPTS[$k]}
			tpsm=$(tr ' ' '\n' <<<"${TPS[$s.$c]}" | median)
			col() { for rep in $(seq 1 "$PGBENCH_REPS"); do cut -d' ' -f"$1" <<<"${LAT[$s.$c.$rep]}"; done; }
			avg=$(col 1 | median)
			p50=$(col 2 | median)
			p99=$(col 3 | median)
			p999=$(col 4 | median)
			mx=$(col 5 | sort -g | tail -1)
			zero=$(col 6 | median)
			n=$(cut -d' ' -f7 <<<"${LAT[$s.$c.$PGBENCH_REPS]}")
			out "| \`${SLABELS[$k]}\` | $c | $(printf '%.0f' "$tpsm") | ${TPS[$s.$c]// / \/ } | $(ratio "$tpsm" "$ftps" 3) | $avg | $p50 | $p99 | $p999 | $(ratio "$p999" "$fp999") | $mx | $zero | $n |"
			printf '%s\t%s\t%s\t%s\n' "$s" "$c" "$(ratio "$tpsm" "$ftps" 3)" "$p999" >>"$WORK/plot_pgbench.tsv"
		done
	done
	out ""
	IFS='|' read -r _ r0 w0 mw0 <<<"$c0"
	IFS='|' read -r st r1 w1 mw <<<"$c1"
	out "Tag \`bench\` over the pgbench runs: $((r1 - r0)) refills, **$((w1 - w0)) waits** (callers that found both buffers empty), max_wait_ms since server start $mw0 before and $mw after, dynamic step at the end $st."
	out ""
	section_end "2. pgbench"
fi

# ================================================================ section 3

if want 3; then
	section_begin "3. fleet"
	start_cluster alloc "$PORT_ALLOC"
	qf "$PORT_ALLOC" >/dev/null <<'SQL'
CREATE EXTENSION leaf;
SELECT leaf_segment_create('bench', 1000);
SELECT leaf_segment_create('bench_big', 1000000);
SELECT leaf_segment_create('drain', 1000);
SELECT leaf_segment_create('refill_probe', 1000);
SQL
	conninfo="host=127.0.0.1 port=$PORT_ALLOC dbname=postgres user=postgres"
	for k in 0 1 2; do
		start_cluster "shard$((k + 1))" "${PORT_SHARD[$k]}" "leaf.alloc_conninfo = '$conninfo'"
		q "${PORT_SHARD[$k]}" "CREATE EXTENSION leaf" >/dev/null
		q "${PORT_SHARD[$k]}" "SELECT leaf_segment_nextval('bench'), leaf_segment_nextval('bench_big'), leaf_segment_nextval('drain')" >/dev/null
	done
	src=$(q "${PORT_SHARD[0]}" "SELECT source FROM leaf_segments WHERE biz_tag = 'bench'")
	log "shard1 source: $src"

	# (a) refill time: the allocator's transaction, timed by pgbench
	cat >"$WORK/scripts/refill.sql" <<'EOF'
BEGIN;
SELECT max_id, step FROM leaf_alloc WHERE biz_tag = 'refill_probe' FOR UPDATE;
UPDATE leaf_alloc SET max_id = max_id + 1000 WHERE biz_tag = 'refill_probe';
COMMIT;
\set z 0
EOF
	write_script refill_do "DO \$\$BEGIN PERFORM 1 FROM leaf_alloc WHERE biz_tag = 'refill_probe' FOR UPDATE; UPDATE leaf_alloc SET max_id = max_id + 1000 WHERE biz_tag = 'refill_probe'; END\$\$;"
	write_script ping "SELECT 1;"
	RT=$T
	[ "$RT" -gt 10 ] && RT=10
	out "## 3. Fleet: allocation database + 3 shards (\`leaf.alloc_conninfo='$conninfo'\`)"
	out ""
	out "### 3a. Refill time"
	out ""
	out "The allocator's refill transaction (BEGIN; SELECT max_id, step ... FOR UPDATE; UPDATE leaf_alloc SET max_id ...; COMMIT, with the commit flushed to disk), timed by \`pgbench -n -c 1 -j 1 -T $RT\` from the per-transaction log."
	out ""
	out "| what | where | tps | avg ms | p50 ms | p99 ms | p99.9 ms | max ms |"
	out "|---|---|---|---|---|---|---|---|"
	refill_row() {	# label where name port host mode script
		local tps st T_save=$T
		T=$RT
		tps=$(pgb "$3" "$4" "$5" "$6" 1 1 "$7")
		T=$T_save
		st=$(lat_stats "$WORK/logs/$3".[0-9]*)
		rm -f "$WORK/logs/$3".[0-9]*
		read -r a p50 p99 p999 mx _ <<<"$st"
		log "$1 ($2): avg $a ms, p50 $p50, p99 $p99"
		out "| $1 | $2 | $(printf '%.0f' "$tps") | $a | $p50 | $p99 | $p999 | $mx |"
		printf '%s\t%s\t%s\t%s\n' "$3" "$p50" "$p99" "$p999" >>"$WORK/plot_refill.tsv"
	}
	refill_row "round trip \`SELECT 1\`" "allocation DB over loopback TCP" ping_tcp "$PORT_ALLOC" 127.0.0.1 extended ping
	refill_row "remote refill (4 statements, extended protocol, as the allocator sends them)" "allocation DB over loopback TCP" refill_tcp "$PORT_ALLOC" 127.0.0.1 extended refill
	refill_row "local refill, same 4 statements" "single instance over unix socket" refill_unix "$PORT_MAIN" "$WORK" extended refill
	refill_row "local refill in one DO block (one round trip, like the worker's SPI calls)" "single instance over unix socket" refill_do "$PORT_MAIN" "$WORK" simple refill_do
	out ""

	# what callers see: drain a step-1000 tag as fast as one session can
	out "What one session sees when it drains a step-1000 tag (\`SELECT count(leaf_segment_nextval('drain')) FROM generate_series(1, $N)\`), against the step-1000000 tag \`bench_big\` (refills rare); $REPS repetition(s), median:"
	out ""
	out "| instance | drain ms (runs) | bench_big ms (runs) | refills | waits | max_wait_ms since server start (before -> after) | extra ms per refill | dynamic step at end |"
	out "|---|---|---|---|---|---|---|---|"
	drain_row() {	# label port
		local a b runs_d="" runs_b="" md mb st r0 r1 w0 w1 mw mw0
		a=$(seg_counters "$2" drain)
		for rep in $(seq 1 "$REPS"); do
			runs_d="$runs_d${runs_d:+ }$(single_ms "$2" "SELECT count(leaf_segment_nextval('drain')) FROM generate_series(1, $N);")"
			runs_b="$runs_b${runs_b:+ }$(single_ms "$2" "SELECT count(leaf_segment_nextval('bench_big')) FROM generate_series(1, $N);")"
		done
		b=$(seg_counters "$2" drain)
		md=$(tr ' ' '\n' <<<"$runs_d" | median)
		mb=$(tr ' ' '\n' <<<"$runs_b" | median)
		IFS='|' read -r _ r0 w0 mw0 <<<"$a"
		IFS='|' read -r st r1 w1 mw <<<"$b"
		log "drain $1: $runs_d vs $runs_b ms, refills $((r1 - r0)), waits $((w1 - w0))"
		out "| $1 | $(printf '%.0f' "$md") ($runs_d) | $(printf '%.0f' "$mb") ($runs_b) | $((r1 - r0)) | $((w1 - w0)) | $mw0 -> $mw | $(awk -v d="$md" -v b="$mb" -v r="$((r1 - r0))" -v n="$REPS" 'BEGIN {if (r > 0) printf "%.3f", (d - b) * n / r; else print "n/a"}') | $st |"
	}
	drain_row "single instance (local leaf_alloc)" "$PORT_MAIN"
	drain_row "shard1 (remote leaf_alloc)" "${PORT_SHARD[0]}"
	out ""

	# (b) throughput: 3 shards x 2 clients against one instance x 6 clients
	write_script leaf_seg "SELECT leaf_segment_nextval('bench');"
	write_script floor "SELECT clock_timestamp();"
	declare -A FT FL FS
	declare -A W0
	for k in 0 1 2; do
		W0[$k]=$(seg_counters "${PORT_SHARD[$k]}" bench)
	done
	W0m=$(seg_counters "$PORT_MAIN" bench)
	for rep in $(seq 1 "$PGBENCH_REPS"); do
		for s in floor leaf_seg; do
			# fleet: one pgbench per shard, started together
			BGPIDS=()
			for k in 0 1 2; do
				pgb "fleet_${s}_s$((k + 1))_r$rep" "${PORT_SHARD[$k]}" "$WORK" prepared 2 1 "$s" \
					>"$WORK/logs/fleet_${s}_s$((k + 1))_r$rep.tps" &
				BGPIDS+=($!)
			done
			for p in "${BGPIDS[@]}"; do
				wait "$p" || die "a fleet pgbench run failed"
			done
			BGPIDS=()
			per=""
			for k in 1 2 3; do
				per="$per${per:+ + }$(printf '%.0f' "$(cat "$WORK/logs/fleet_${s}_s${k}_r$rep.tps")")"
			done
			sum=$(awk "BEGIN {print $per}")
			FT[fleet.$s]="${FT[fleet.$s]:-}${FT[fleet.$s]:+ }$sum"
			FS[fleet.$s.$rep]=$per
			FL[fleet.$s.$rep]=$(lat_stats "$WORK/logs/fleet_${s}_s"[123]"_r$rep".[0-9]*)
			rm -f "$WORK/logs/fleet_${s}_s"[123]"_r$rep".[0-9]*
			log "rep $rep fleet $s: $per = $sum tps"
			# one instance, 6 clients
			tps=$(pgb "single_${s}_r$rep" "$PORT_MAIN" "$WORK" prepared 6 2 "$s")
			FT[single.$s]="${FT[single.$s]:-}${FT[single.$s]:+ }$(printf '%.0f' "$tps")"
			FL[single.$s.$rep]=$(lat_stats "$WORK/logs/single_${s}_r$rep".[0-9]*)
			rm -f "$WORK/logs/single_${s}_r$rep".[0-9]*
			log "rep $rep single $s: $tps tps"
		done
	done

	out "### 3b. Throughput: 3 shards x \`pgbench -c 2 -j 1\` started together (sum of tps) against one instance with \`pgbench -c 6 -j 2\` (local leaf_alloc)"
	out ""
	out "All 4 clusters, the 3 pgbench processes and the allocation DB share the same $(nproc) vCPUs, so the fleet cannot scale here: this shows the cost of fleet mode, not its capacity. -T $T, $PGBENCH_REPS repetition(s), median; latencies pooled over all clients of a run (median over repetitions)."
	out ""
	out "| setup | script | tps median | tps runs (per shard) | tps / floor | fleet / single | p50 ms | p99 ms | p99.9 ms | max ms |"
	out "|---|---|---|---|---|---|---|---|---|---|"
	for setup in single fleet; do
		ftps=$(tr ' ' '\n' <<<"${FT[$setup.floor]}" | median)
		for s in floor leaf_seg; do
			tpsm=$(tr ' ' '\n' <<<"${FT[$setup.$s]}" | median)
			stps=$(tr ' ' '\n' <<<"${FT[single.$s]}" | median)
			col() { for rep in $(seq 1 "$PGBENCH_REPS"); do cut -d' ' -f"$1" <<<"${FL[$setup.$s.$rep]}"; done; }
			if [ $setup = fleet ]; then
				runs=""
				for rep in $(seq 1 "$PGBENCH_REPS"); do
					runs="$runs${runs:+ / }$(awk "BEGIN {print ${FS[fleet.$s.$rep]}}") (${FS[fleet.$s.$rep]})"
				done
				lbl="3 shards x 2 clients"
				fs=$(ratio "$tpsm" "$stps" 3)
			else
				runs=${FT[$setup.$s]// / \/ }
				lbl="1 instance x 6 clients"
				fs="-"
			fi
			if [ $s = floor ]; then sl="\`clock_timestamp()\` (floor)"; else sl="\`leaf_segment_nextval('bench')\` step 1000"; fi
			out "| $lbl | $sl | $(printf '%.0f' "$tpsm") | $runs | $(ratio "$tpsm" "$ftps" 3) | $fs | $(col 2 | median) | $(col 3 | median) | $(col 4 | median) | $(col 5 | sort -g | tail -1) |"
		done
	done
	out ""
	out "Tag \`bench\` during 3b (\`leaf_segments\` on each instance):"
	out ""
	out "| instance | source | refills | waits | max_wait_ms since server start (before -> after) | dynamic step at end |"
	out "|---|---|---|---|---|---|"
	IFS='|' read -r _ r0 w0 mw0 <<<"$W0m"
	IFS='|' read -r st r1 w1 mw <<<"$(seg_counters "$PORT_MAIN" bench)"
	out "| single instance | local | $((r1 - r0)) | $((w1 - w0)) | $mw0 -> $mw | $st |"
	for k in 0 1 2; do
		IFS='|' read -r _ r0 w0 mw0 <<<"${W0[$k]}"
		IFS='|' read -r st r1 w1 mw <<<"$(seg_counters "${PORT_SHARD[$k]}" bench)"
		src=$(q "${PORT_SHARD[$k]}" "SELECT source FROM leaf_segments WHERE biz_tag = 'bench'")
		out "| shard$((k + 1)) | $src | $((r1 - r0)) | $((w1 - w0)) | $mw0 -> $mw | $st |"
	done
	out ""
	section_end "3. fleet"
fi

# ================================================================ section 4

# Public IDs: the cost of one call, net of the loop, under a throwaway
# AES-256 key in a file of the benchmark's directory.
bench_public_ids() {
	local key=$WORK/public_id.key i ms m loop
	local -a labels exprs
	local -A runs

	if [ "$(q "$PORT_MAIN" "SELECT count(*) FROM pg_proc WHERE proname = 'leaf_public_id'")" = 0 ]; then
		log "leaf_public_id absent: section 4 skipped"
		return
	fi
	section_begin "4. public IDs"
	as_pg "umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >'$key'"
	q "$PORT_MAIN" "ALTER SYSTEM SET leaf.public_id_key_file = '$key'" >/dev/null
	q "$PORT_MAIN" "SELECT pg_reload_conf()" >/dev/null
	for i in $(seq 1 100); do
		q "$PORT_MAIN" "SELECT leaf_public_id(1, 'order')" >/dev/null 2>&1 && break
		sleep 0.1
	done
	q "$PORT_MAIN" "SELECT leaf_public_id(1, 'order')" >/dev/null || die "leaf_public_id fails with the benchmark key"

	labels=("count(*) (empty loop)" "leaf_segment_nextval('bench_big')" "gen_random_uuid()"
		"leaf_public_id(x, 'order')" "leaf_private_id(x, 'order')"
		"leaf_public_id_text(x, 'order')" "leaf_private_id_text(t, 'order') (t: a column of 11-character IDs)"
		"leaf_public_id(leaf_segment_nextval('bench_big'), 'order')")
	exprs=("SELECT count(*) FROM generate_series(1, $N) x"
		"SELECT count(leaf_segment_nextval('bench_big')) FROM generate_series(1, $N) x"
		"SELECT count(gen_random_uuid()) FROM generate_series(1, $N) x"
		"SELECT count(leaf_public_id(x, 'order')) FROM generate_series(1, $N) x"
		"SELECT count(leaf_private_id(x, 'order')) FROM generate_series(1, $N) x"
		"SELECT count(leaf_public_id_text(x, 'order')) FROM generate_series(1, $N) x"
		"SELECT count(leaf_private_id_text(t, 'order')) FROM pid_text"
		"SELECT count(leaf_public_id(leaf_segment_nextval('bench_big'), 'order')) FROM generate_series(1, $N) x")
	# the input of leaf_private_id_text, and its own empty loop
	q "$PORT_MAIN" "DROP TABLE IF EXISTS pid_text" >/dev/null
	q "$PORT_MAIN" "CREATE UNLOGGED TABLE pid_text AS
		SELECT lpad(x::text, 11, '0') AS t FROM generate_series(1, $N) x" >/dev/null
	q "$PORT_MAIN" "VACUUM ANALYZE pid_text" >/dev/null
	labels+=("count(t) over that column (its empty loop)")
	exprs+=("SELECT count(t) FROM pid_text")

	# Wall time as in section 1, and the backend's own CPU time (user +
	# system, from /proc/self/stat, in clock ticks): on a shared machine the
	# second one moves far less with the load.  No parallel workers, whose
	# time the backend's would not include.
	local hz cpu res
	local -A cpus
	hz=$(getconf CLK_TCK)
	for rep in $(seq 1 "$REPS"); do
		for i in "${!exprs[@]}"; do
			res=$(qf "$PORT_MAIN" <<SQL
SET work_mem = '1GB';
SET max_parallel_workers_per_gather = 0;
SELECT sum(f::bigint) AS cpu0 FROM unnest((string_to_array(split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' '))[12:13]) f \gset
\timing on
${exprs[$i]};
\timing off
SELECT 'cpu', sum(f::bigint) - :cpu0 FROM unnest((string_to_array(split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' '))[12:13]) f;
SQL
)
			ms=$(awk '/^Time: / {print $2}' <<<"$res")
			cpu=$(awk -F'|' -v hz="$hz" '/^cpu\|/ {printf "%.0f", $2 * 1000 / hz}' <<<"$res")
			runs[$i]="${runs[$i]:-}${runs[$i]:+ }$ms"
			cpus[$i]="${cpus[$i]:-}${cpus[$i]:+ }$cpu"
			log "rep $rep ${labels[$i]}: $ms ms, cpu $cpu ms"
		done
	done

	out "## 4. Public IDs: \`SELECT count(<expr>) FROM generate_series(1, $N) x\`"
	out ""
	out "AES-256 key from a file (\`leaf.public_id_key_file\`), tweak 'order'; $REPS repetition(s) run rep-major, median. Wall = psql \\timing; CPU = the backend's user + system time over the statement (/proc/self/stat, 1/$hz s resolution). No parallel workers. Net = minus the empty loop; \`leaf_private_id_text\` reads its input from an unlogged table and is net of a count over it."
	out ""
	out "| expression | wall runs (ms) | wall median ms | wall ns/call net | CPU runs (ms) | CPU median ms | CPU ns/call net |"
	out "|---|---|---|---|---|---|---|"
	local last=$((${#exprs[@]} - 1)) c cl
	for i in "${!exprs[@]}"; do
		m=$(tr ' ' '\n' <<<"${runs[$i]}" | median)
		c=$(tr ' ' '\n' <<<"${cpus[$i]}" | median)
		if [ "$i" = 6 ]; then
			loop=$(tr ' ' '\n' <<<"${runs[$last]}" | median)
			cl=$(tr ' ' '\n' <<<"${cpus[$last]}" | median)
		else
			loop=$(tr ' ' '\n' <<<"${runs[0]}" | median)
			cl=$(tr ' ' '\n' <<<"${cpus[0]}" | median)
		fi
		if [ "$i" = 0 ] || [ "$i" = "$last" ]; then
			out "| \`${labels[$i]}\` | ${runs[$i]// / \/ } | $(printf '%.0f' "$m") | - | ${cpus[$i]// / \/ } | $(printf '%.0f' "$c") | - |"
		else
			out "| \`${labels[$i]}\` | ${runs[$i]// / \/ } | $(printf '%.0f' "$m") | $(awk -v m="$m" -v l="$loop" -v n="$N" 'BEGIN {printf "%.0f", (m - l) * 1e6 / n}') | ${cpus[$i]// / \/ } | $(printf '%.0f' "$c") | $(awk -v m="$c" -v l="$cl" -v n="$N" 'BEGIN {printf "%.0f", (m - l) * 1e6 / n}') |"
		fi
	done
	out ""
	q "$PORT_MAIN" "DROP TABLE pid_text" >/dev/null
	q "$PORT_MAIN" "ALTER SYSTEM RESET leaf.public_id_key_file" >/dev/null
	q "$PORT_MAIN" "SELECT pg_reload_conf()" >/dev/null
	section_end "4. public IDs"
}

if want 4; then
	bench_public_ids
fi

# ================================================================ bulk loads

# Loading BULK_ROWS rows into tables keyed by an identity column, bigserial,
# a leaf default, or IDs supplied in the data.  COPY batches rows
# (table_multi_insert) only when no default it evaluates is volatile, with
# the built-in nextval() as the one exception (copyfrom.c), so a leaf
# default makes it insert row by row; a column given in the COPY column list
# has its default neither evaluated nor checked.

# CPU time (user + system, in clock ticks) of the backend that runs it
BULK_CPU="(SELECT split_part(s, ' ', 14)::bigint + split_part(s, ' ', 15)::bigint FROM pg_read_file('/proc/self/stat') s)"
BULK_TCK=$(getconf CLK_TCK)

# bulk_sql PORT SQL: CHECKPOINT (not timed), then SQL under \timing;
# prints "ms wal_bytes cpu_ms": elapsed ms summed over the statements, and
# the CPU time the backend spent on them (on a shared machine the elapsed
# time includes waiting for a CPU; the CPU time does not)
bulk_sql() {
	qf "$1" <<SQL | awk -F'|' '/^Time: / {split($0, f, " "); t += f[2]} /^wal\|/ {w = $2; c = $3} END {if (w == "") exit 1; printf "%.1f %s %s\n", t, w, c}'
CHECKPOINT;
SELECT pg_current_wal_lsn() AS wal0, $BULK_CPU AS cpu0 \\gset
\\timing on
$2
\\timing off
SELECT 'wal', pg_wal_lsn_diff(pg_current_wal_lsn(), :'wal0'), ($BULK_CPU - :cpu0) * 1000 / $BULK_TCK;
SQL
}

# bulk_table NAME KEY-DEFINITION: a fresh table
bulk_table() {
	q "$PORT_MAIN" "DROP TABLE IF EXISTS $1; CREATE TABLE $1 (id $2 $BULK_PK_SQL, payload text NOT NULL, n integer NOT NULL)" >/dev/null
}

# bulk_supplied KIND TABLE: IDs taken in bulk (leaf_segment_nextvals or
# leaf_snowflake_nextvals), merged into the data file, loaded with COPY;
# prints "total_ms wal_bytes total_cpu_ms ids_ms merge_ms copy_ms"
bulk_supplied() {
	local kind=$1 t=$2 f ids_ms ids_cpu merge_ms merge_cpu copy_ms copy_cpu wal t0 t1
	if [ "$kind" = seg ]; then
		# at most 1,000,000 IDs per call
		f="generate_series(0, ($BULK_ROWS - 1) / 1000000) k,
		   LATERAL leaf_segment_nextvals('bulk', least(1000000, $BULK_ROWS - k * 1000000))"
	else
		f="leaf_snowflake_nextvals($BULK_ROWS)"
	fi
	rm -f "$WORK/bulk_ids" "$WORK/bulk_with_ids.tsv"
	read -r ids_ms _ ids_cpu <<<"$(bulk_sql "$PORT_MAIN" "COPY (SELECT i FROM $f i) TO '$WORK/bulk_ids';")"
	t0=$(date +%s%N)
	merge_cpu=$( { TIMEFORMAT='%3U %3S'; time paste "$WORK/bulk_ids" "$WORK/bulk_payload.tsv" >"$WORK/bulk_with_ids.tsv"; } 2>&1 |
		awk '{printf "%.0f", ($1 + $2) * 1000}')
	t1=$(date +%s%N)
	chmod 644 "$WORK/bulk_with_ids.tsv"
	merge_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", (b - a) / 1e6}')
	read -r copy_ms wal copy_cpu <<<"$(bulk_sql "$PORT_MAIN" "COPY $t (id, payload, n) FROM '$WORK/bulk_with_ids.tsv';")"
	echo "$(awk -v a="$ids_ms" -v b="$merge_ms" -v c="$copy_ms" 'BEGIN {printf "%.1f", a + b + c}') $wal $((ids_cpu + merge_cpu + copy_cpu)) $ids_ms $merge_ms $copy_ms"
}

bench_bulk() {
	BULK_PK_SQL=""
	[ "$BULK_PK" = 1 ] && BULK_PK_SQL="PRIMARY KEY"
	local seg_key="bigint DEFAULT leaf_segment_nextval('bulk')"
	local sf_key="bigint DEFAULT leaf_snowflake()"
	local copy_payload="(payload, n) FROM '$WORK/bulk_payload.tsv'"
	local insert_stage="(payload, n) SELECT payload, n FROM bulk_stage"
	local -a B_LABEL B_KEY B_HOW B_PLOT
	local i k rep res ms wal cpu c0 c1

	# label|key definition|how: copy, insert, supplied-seg, supplied-sf
	B_LABEL=("identity" "bigserial" "leaf_segment_nextval default" "leaf_snowflake() default"
		"IDs from leaf_segment_nextvals in the data" "IDs from leaf_snowflake_nextvals in the data"
		"identity" "bigserial" "leaf_segment_nextval default" "leaf_snowflake() default"
		"leaf_segment_nextval default" "leaf_snowflake() default")
	B_KEY=("bigint GENERATED ALWAYS AS IDENTITY" "bigserial" "$seg_key" "$sf_key" "$seg_key" "$sf_key"
		"bigint GENERATED ALWAYS AS IDENTITY" "bigserial" "$seg_key" "$sf_key" "$seg_key" "$sf_key")
	B_HOW=(copy copy copy copy supplied-seg supplied-sf insert insert insert insert staged staged)
	B_PLOT=("identity" "bigserial" "leaf segment|default" "leaf snowflake|default"
		"leaf segment|IDs in the data" "leaf snowflake|IDs in the data"
		"identity" "bigserial" "leaf segment|default" "leaf snowflake|default"
		"leaf segment|default, staged" "leaf snowflake|default, staged")

	q "$PORT_MAIN" "SELECT leaf_segment_create('bulk', $BULK_STEP)" >/dev/null
	q "$PORT_MAIN" "SELECT leaf_segment_nextval('bulk')" >/dev/null
	qf "$PORT_MAIN" >/dev/null <<SQL
COPY (SELECT 'row ' || i || ' ' || md5(i::text), i FROM generate_series(1, $BULK_ROWS) i)
  TO '$WORK/bulk_payload.tsv';
CREATE TABLE bulk_stage (payload text NOT NULL, n integer NOT NULL);
COPY bulk_stage FROM '$WORK/bulk_payload.tsv';
VACUUM ANALYZE bulk_stage;
SQL

	declare -gA BULK_RUNS BULK_WAL BULK_CPU_MS BULK_PARTS
	c0=$(seg_counters "$PORT_MAIN" bulk)
	for rep in $(seq 1 "$REPS"); do
		for i in "${!B_HOW[@]}"; do
			case ${B_HOW[$i]} in
				supplied-sf) [ $HAVE_SF_BULK = 1 ] || continue ;;
				*) if [[ "${B_KEY[$i]}" == *leaf_snowflake* ]] && [ $HAVE_SF = 0 ]; then continue; fi ;;
			esac
			bulk_table "bulk_t$i" "${B_KEY[$i]}"
			case ${B_HOW[$i]} in
				copy) res=$(bulk_sql "$PORT_MAIN" "COPY bulk_t$i $copy_payload;") ;;
				insert) res=$(bulk_sql "$PORT_MAIN" "INSERT INTO bulk_t$i $insert_stage;") ;;
				staged) res=$(bulk_sql "$PORT_MAIN" "CREATE TEMP TABLE bulk_tmp (payload text, n integer);
COPY bulk_tmp $copy_payload;
INSERT INTO bulk_t$i (payload, n) SELECT payload, n FROM bulk_tmp;
DROP TABLE bulk_tmp;") ;;
				supplied-seg) res=$(bulk_supplied seg "bulk_t$i") ;;
				supplied-sf) res=$(bulk_supplied sf "bulk_t$i") ;;
			esac
			read -r ms wal cpu _ <<<"$res"
			[ "$(q "$PORT_MAIN" "SELECT count(*) FROM bulk_t$i")" = "$BULK_ROWS" ] ||
				die "bulk load ${B_LABEL[$i]} (${B_HOW[$i]}) did not load $BULK_ROWS rows"
			BULK_RUNS[$i]="${BULK_RUNS[$i]:-}${BULK_RUNS[$i]:+ }$ms"
			BULK_WAL[$i]="${BULK_WAL[$i]:-}${BULK_WAL[$i]:+ }$wal"
			BULK_CPU_MS[$i]="${BULK_CPU_MS[$i]:-}${BULK_CPU_MS[$i]:+ }$cpu"
			case ${B_HOW[$i]} in supplied-*) BULK_PARTS[$i]="${BULK_PARTS[$i]:-}${BULK_PARTS[$i]:+;}$(cut -d' ' -f4- <<<"$res")" ;; esac
			log "rep $rep bulk ${B_HOW[$i]} ${B_LABEL[$i]}: $ms ms, CPU $cpu ms, WAL $wal bytes"
		done
	done
	c1=$(seg_counters "$PORT_MAIN" bulk)
	q "$PORT_MAIN" "DROP TABLE IF EXISTS bulk_stage, $(for i in "${!B_HOW[@]}"; do printf 'bulk_t%s, ' "$i"; done | sed 's/, $//')" >/dev/null
	rm -f "$WORK/bulk_ids" "$WORK/bulk_with_ids.tsv" "$WORK/bulk_payload.tsv"

	out "## Bulk loads: $BULK_ROWS rows into \`(id <key>${BULK_PK_SQL:+ $BULK_PK_SQL}, payload text, n integer)\`"
	out ""
	out "A fresh table per load, \`CHECKPOINT\` before each (not timed), $REPS repetition(s) run rep-major, median; psql \\timing. COPY reads a server-side text file (payload about 45 bytes a row); INSERT ... SELECT reads the same rows from a staging table (its time is the INSERT alone); \"via a temporary table\" times the whole pipeline: CREATE TEMP TABLE, COPY into it, INSERT ... SELECT, DROP. \"IDs in the data\": the IDs are taken in one call and written to a file (\`COPY (SELECT ... FROM leaf_..._nextvals(...)) TO ...\`, segment IDs in calls of at most 1,000,000), merged into the data file (\`paste\`) and loaded with the ID column in the COPY column list; all three steps are timed. CPU = the CPU time of the backend(s), plus \`paste\`, from /proc (on a shared machine the elapsed time also counts waiting for a CPU). The tag \`bulk\` has step $BULK_STEP. WAL is lower where COPY batches rows (one multi-insert record per page instead of one record per row)."
	out ""
	out "| load | key | runs (ms) | median ms | / identity COPY | / identity, same statement | CPU ms (median) | CPU / identity COPY | WAL MB (median) | parts (median ms) |"
	out "|---|---|---|---|---|---|---|---|---|---|"
	local idc idi idcpu m mc how base parts walm
	idc=$(tr ' ' '\n' <<<"${BULK_RUNS[0]}" | median)
	idi=$(tr ' ' '\n' <<<"${BULK_RUNS[6]}" | median)
	idcpu=$(tr ' ' '\n' <<<"${BULK_CPU_MS[0]}" | median)
	: >"$WORK/plot_bulk.tsv"
	for i in "${!B_HOW[@]}"; do
		[ -n "${BULK_RUNS[$i]:-}" ] || continue
		m=$(tr ' ' '\n' <<<"${BULK_RUNS[$i]}" | median)
		mc=$(tr ' ' '\n' <<<"${BULK_CPU_MS[$i]}" | median)
		walm=$(tr ' ' '\n' <<<"${BULK_WAL[$i]}" | median | awk '{printf "%.1f", $1 / 1048576}')
		case ${B_HOW[$i]} in
			insert) how="INSERT ... SELECT"; base=$idi ;;
			staged) how="COPY into a temporary table, then INSERT ... SELECT"; base=$idc ;;
			*) how="COPY"; base=$idc ;;
		esac
		parts="-"
		if [ -n "${BULK_PARTS[$i]:-}" ]; then
			parts="IDs $(tr ';' '\n' <<<"${BULK_PARTS[$i]}" | cut -d' ' -f1 | median) + merge $(tr ';' '\n' <<<"${BULK_PARTS[$i]}" | cut -d' ' -f2 | median) + COPY $(tr ';' '\n' <<<"${BULK_PARTS[$i]}" | cut -d' ' -f3 | median)"
		fi
		out "| $how | ${B_LABEL[$i]} | ${BULK_RUNS[$i]// / \/ } | $(printf '%.0f' "$m") | $(ratio "$m" "$idc") | $(ratio "$m" "$base") | $(printf '%.0f' "$mc") | $(ratio "$mc" "$idcpu") | $walm | $parts |"
		printf '%s|%s\t%s\t%s\n' "$(case ${B_HOW[$i]} in insert) echo "INSERT SELECT" ;; staged) echo "COPY + INSERT" ;; *) echo COPY ;; esac)" "${B_PLOT[$i]}" "$(ratio "$m" "$idc" 3)" "$(ratio "$mc" "$idcpu" 3)" >>"$WORK/plot_bulk.tsv"
	done
	out ""
	IFS='|' read -r st r0 w0 mw0 <<<"$c0"
	IFS='|' read -r st r1 w1 mw <<<"$c1"
	out "Tag \`bulk\` over these loads: $((r1 - r0)) refills, $((w1 - w0)) waits, max_wait_ms since server start $mw0 before and $mw after, dynamic step at the end $st."
	out ""
}

if want bulk; then
	section_begin "bulk loads"
	bench_bulk
	section_end "bulk loads"
fi

# ================================================================ pictures

# gp_xtics FILE: a gnuplot "set xtics (...)" from the first column of a
# tab-separated file (skipping a header line if HEADER=1); "|" in a label
# becomes a line break
gp_xtics() {
	awk -F'\t' -v h="${HEADER:-0}" '
		NR > h { l = $1; gsub(/"/, "", l); gsub(/\|/, "\\n", l); t = t (t == "" ? "" : ", ") "\"" l "\" " (NR - h - 1) }
		END { print "set xtics (" t ")" }' "$1"
}

# draw_pictures: PNGs of the sections that ran, with gnuplot
draw_pictures() {
	local dir=${BENCH_PNG_DIR:-$(dirname "$BENCH_OUT")} gp=$WORK/plot.gp nc
	local title="leaf_bench.sh $(date '+%Y-%m-%d'), $(nproc) vCPUs"
	local common='set datafile separator "\t"
set datafile missing "n/a"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics
set key top left
set xtics nomirror scale 0 font ",9"
set bmargin 4
set offsets 0, 0, graph 0.08, 0'
	local made=()

	if ! command -v gnuplot >/dev/null; then
		log "gnuplot not found (Debian package gnuplot-nox): no pictures"
		return 0
	fi
	mkdir -p "$dir"

	# section 2: tps / floor and p99.9 per script, one bar per client count
	if [ -s "$WORK/plot_pgbench.tsv" ]; then
		awk -F'\t' '
			BEGIN {
				lbl["floor"] = "clock_timestamp()|(floor)"; lbl["seq_default"] = "nextval|default (CACHE 1)"
				lbl["seq_c1000"] = "nextval|CACHE 1000"; lbl["uuid"] = "gen_random_uuid()"
				lbl["uuidv7"] = "uuidv7()"
				lbl["leaf_seg"] = "leaf_segment_nextval|step 1000"; lbl["leaf_sf"] = "leaf_snowflake()"
			}
			!($1 in seen) { seen[$1] = 1; s[++ns] = $1 }
			!($2 in cs) { cs[$2] = 1; c[++nc] = $2 }
			{ r[$1, $2] = $3; p[$1, $2] = $4 }
			END {
				printf "script"; for (j = 1; j <= nc; j++) printf "\t%d clients", c[j]
				for (j = 1; j <= nc; j++) printf "\t%d clients", c[j]; printf "\n"
				for (i = 1; i <= ns; i++) {
					printf "%s", (s[i] in lbl) ? lbl[s[i]] : s[i]
					for (j = 1; j <= nc; j++) printf "\t%s", r[s[i], c[j]]
					for (j = 1; j <= nc; j++) printf "\t%s", p[s[i], c[j]]
					printf "\n"
				}
			}' "$WORK/plot_pgbench.tsv" >"$WORK/plot_pgbench.dat"
		nc=$(awk -F'\t' 'NR == 1 {print (NF - 1) / 2}' "$WORK/plot_pgbench.dat")
		{
			echo "$common"
			echo "set terminal pngcairo size 1100,960 font 'sans,10' noenhanced"
			echo "set output '$dir/leaf_bench_pgbench.png'"
			HEADER=1 gp_xtics "$WORK/plot_pgbench.dat"
			echo "nc = $nc"
			echo "w = 1.0 / (nc + 1)"
			echo "set multiplot layout 2,1 title '$title: pgbench -n -M prepared -j 2 -T $T, one ID per transaction, median of $PGBENCH_REPS'"
			echo "set title 'throughput relative to the floor (SELECT clock_timestamp() at the same client count)'"
			echo "set ylabel 'tps / floor tps'"
			echo "set yrange [0:*]"
			echo "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dashtype 2 lc rgb 'black'"
			echo "plot for [i=2:1+nc] '$WORK/plot_pgbench.dat' using i title columnheader(i), \\"
			echo "     for [i=2:1+nc] '' skip 1 using (\$0 + (i - 2 - (nc - 1) / 2.0) * w):i:(sprintf('%.2f', column(i))) with labels offset 0,0.7 font ',8' notitle"
			echo "unset arrow 1"
			echo "set title 'p99.9 latency (per-transaction log)'"
			echo "set ylabel 'ms (log scale)'"
			echo "set yrange [*:*]"
			echo "set logscale y"
			echo "plot for [i=2+nc:1+2*nc] '$WORK/plot_pgbench.dat' using i title columnheader(i), \\"
			echo "     for [i=2+nc:1+2*nc] '' skip 1 using (\$0 + (i - 2 - nc - (nc - 1) / 2.0) * w):i:(sprintf('%.2f', column(i))) with labels offset 0,0.7 font ',8' notitle"
			echo "unset multiplot"
		} >"$gp"
		gnuplot "$gp" 2>"$WORK/gnuplot.err" && made+=(leaf_bench_pgbench.png) ||
			log "gnuplot failed: $(head -3 "$WORK/gnuplot.err")"
	fi

	# section 3a: refill latency, local and over loopback
	if [ -s "$WORK/plot_refill.tsv" ]; then
		awk -F'\t' '
			BEGIN {
				lbl["ping_tcp"] = "SELECT 1|allocation DB, loopback TCP"
				lbl["refill_tcp"] = "refill (4 statements)|allocation DB, loopback TCP"
				lbl["refill_unix"] = "refill (4 statements)|local, unix socket"
				lbl["refill_do"] = "refill in one DO block|local, unix socket"
				print "what\tp50\tp99\tp99.9"
			}
			{ printf "%s\t%s\t%s\t%s\n", ($1 in lbl) ? lbl[$1] : $1, $2, $3, $4 }' \
			"$WORK/plot_refill.tsv" >"$WORK/plot_refill.dat"
		{
			echo "$common"
			echo "set terminal pngcairo size 1100,560 font 'sans,10' noenhanced"
			echo "set output '$dir/leaf_bench_refill.png'"
			HEADER=1 gp_xtics "$WORK/plot_refill.dat"
			echo "set title '$title: refill transaction latency, pgbench -c 1 -T ${RT:-$T} (fsync and synchronous_commit on)'"
			echo "set ylabel 'ms (log scale)'"
			echo "set logscale y"
			echo "plot for [i=2:4] '$WORK/plot_refill.dat' using i title columnheader(i), \\"
			echo "     for [i=2:4] '' skip 1 using (\$0 + (i - 3) * 0.25):i:(sprintf('%.2f', column(i))) with labels offset 0,0.7 font ',8' notitle"
		} >"$gp"
		gnuplot "$gp" 2>"$WORK/gnuplot.err" && made+=(leaf_bench_refill.png) ||
			log "gnuplot failed: $(head -3 "$WORK/gnuplot.err")"
	fi

	# bulk loads: time relative to COPY into an identity-keyed table
	if [ -s "$WORK/plot_bulk.tsv" ]; then
		{
			echo "$common"
			echo "set terminal pngcairo size 1300,560 font 'sans,10' noenhanced"
			echo "set output '$dir/leaf_bench_bulk.png'"
			gp_xtics "$WORK/plot_bulk.tsv"
			echo "set bmargin 5"
			echo "set xtics font ',8'"
			echo "set title '$title: loading $BULK_ROWS rows ($([ "$BULK_PK" = 1 ] && echo "PRIMARY KEY on the ID" || echo "no index")), relative to COPY into an identity-keyed table (median of $REPS)'"
			echo "set ylabel 'relative to identity COPY'"
			echo "set yrange [0:*]"
			echo "set key top left"
			echo "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dashtype 2 lc rgb 'black'"
			echo "plot '$WORK/plot_bulk.tsv' using 2 title 'elapsed time', '' using 3 title 'CPU time (backend)', \\"
			echo "     for [i=2:3] '' using (\$0 + (i - 2.5) / 3.0):i:(sprintf('%.2f', column(i))) with labels offset 0,0.7 font ',8' notitle"
		} >"$gp"
		gnuplot "$gp" 2>"$WORK/gnuplot.err" && made+=(leaf_bench_bulk.png) ||
			log "gnuplot failed: $(head -3 "$WORK/gnuplot.err")"
	fi

	if [ ${#made[@]} -gt 0 ]; then
		out "Pictures (gnuplot) in \`$dir\`: ${made[*]}."
		out ""
		log "pictures in $dir: ${made[*]}"
	fi
}

draw_pictures

# ================================================================ finish

out "## Machine load"
out ""
out "\`/proc/loadavg\` (1, 5, 15 min) at the start and end of each section; 2 vCPUs, shared with other work."
out ""
out "| section | load before | load after | seconds |"
out "|---|---|---|---|"
for r in "${LOADROWS[@]}"; do
	out "$r"
done
out ""

# align the markdown tables (ASCII cells) for reading in a terminal
align() {
	awk '
		function flush(   i, j, line, cell, pad) {
			for (i = 1; i <= nr; i++) {
				line = "|"
				for (j = 2; j < nf[i]; j++) {
					cell = row[i, j]
					if (i == 2 && cell ~ /^-+$/) { pad = w[j]; cell = ""; while (length(cell) < pad) cell = cell "-"; line = line cell "|"; continue }
					line = line " " cell
					pad = w[j] - length(cell) - 2
					while (pad-- > 0) line = line " "
					line = line " |"
				}
				print line
			}
			nr = 0; delete w
		}
		/^\|/ {
			nr++; nf[nr] = split($0, f, "|")
			for (j = 2; j < nf[nr]; j++) {
				gsub(/^ +| +$/, "", f[j]); row[nr, j] = f[j]
				if (!(nr == 2 && f[j] ~ /^-+$/) && length(f[j]) + 2 > w[j]) w[j] = length(f[j]) + 2
				if (3 > w[j]) w[j] = 3
			}
			next
		}
		{ if (nr) flush(); print }
		END { if (nr) flush() }
	' "$1"
}
mkdir -p "$(dirname "$BENCH_OUT")"
align "$REPORT" >"$BENCH_OUT"
cat "$BENCH_OUT"
log "report written to $BENCH_OUT"
