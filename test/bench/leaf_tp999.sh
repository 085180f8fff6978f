#!/usr/bin/env bash
#
# leaf_tp999.sh: the tail latency of one ID per transaction at a fixed
# rate (pgbench --rate), with the allocation database of a fleet behind a
# slow, jittery network, side by side with the floor and nextval, on
# throwaway PostgreSQL clusters (15 or later).  Not part of the test suite.
#
# Run as root or as postgres, after "make install":
#
#   test/bench/leaf_tp999.sh                  full run (about 14 minutes,
#                                             and 5 more for the cold starts)
#   BENCH_QUICK=1 test/bench/leaf_tp999.sh    quick run (about 3 minutes
#                                             without the cold starts)
#
# Three clusters on loopback, on free ports, in a temporary directory,
# all removed on exit: "main" (leaf preloaded, its own leaf_alloc), "alloc"
# (the allocation database) and "shard" (leaf.alloc_conninfo pointing at
# test/bench/leaf_delay_proxy.py, a TCP proxy that delays each chunk of
# data by a one-way delay, in front of "alloc").
#
# Cases, each one pgbench run "-n -M prepared -c C -j J --rate R -T T
# --log" of a script "SELECT <expr>; \set z 0", in this order:
#   floor       SELECT clock_timestamp() on main
#   nextval     nextval('s') (a default sequence, CACHE 1) on main
#   local       leaf_segment_nextval on main (local leaf_alloc)
#   net1_*      shard, allocation database 1 ms round trip (0.5 ms each way)
#   net10_*     shard, 10 ms round trip (5 ms each way)
#   jitter_*    shard, one-way delay 10 ms +- 10 ms each way (uniform, so
#               0 to 20 ms each way)
#   slow_*      shard, 1 ms round trip, and every BENCH_SLOW_EVERY-th
#               refill takes BENCH_SLOW_MS longer on the allocation
#               database (a BEFORE UPDATE trigger on its leaf_alloc)
#   cold_*      a cold start: C tags, one per client ("<tag>_<client_id>",
#               the same tags for both stop modes of an instance: the
#               server serves those C tags and no others), warmed up,
#               then the server (main for cold_local_*, shard
#               at 10 ms round trip for cold_net10_*) is stopped (pg_ctl
#               -m fast or -m immediate, as the case's name says) and
#               started again, and the measured run starts as soon as
#               pg_ctl start returns: every tag starts with empty buffers
#               (unless the server loaded them itself at start).  The
#               first transaction of each client counts here.
# and each shard case twice: *_pre with leaf.preload_percent at
# BENCH_PRELOAD (10, leaf's default: the next segment is loaded when 10%
# of the current one is used), and *_off with leaf.preload_percent = 100
# (the next segment is asked for when the last ID of the current one is
# handed out: no double buffering).  Every segment tag has step
# BENCH_STEP, held there by leaf.segment_duration = 1ms (segments always
# last longer, so the dynamic step never grows).  Each case uses a tag of
# its own, called once before its warm-up, then a warm-up run of WARM
# seconds at the same rate; the first transaction of each client of the
# measured run is left out of the figures.
#
# Figures per case: the rate achieved against the rate scheduled; p50,
# p99, p99.9 and max of the latency of the per-transaction log (pgbench
# counts it from the scheduled start, so it includes the schedule lag);
# the schedule lag on its own; refills, and callers that waited (both
# buffers empty) from leaf_segments; the refills of the run by time and
# the longest refill with its parts, from leaf_segment_refills(); the
# load average before and after.
#
# Environment:
#   PGBIN             PostgreSQL binaries (default: pg_config --bindir of the
#                     pg_config in PATH, else /usr/lib/postgresql/15/bin)
#   PYTHON            Python 3 for the proxy (default python3)
#   BENCH_QUICK=1     T=10, WARM=2, PROBE_T=2
#   T                 seconds per measured run (default 60)
#   WARM              seconds of warm-up per case (default 5)
#   PROBE_T           seconds of each round-trip and refill probe (default 5)
#   BENCH_RATE        transactions per second scheduled, R (default 20000)
#   BENCH_CLIENTS     pgbench clients, C (default 8)
#   BENCH_THREADS     pgbench threads, J (default 2)
#   BENCH_STEP        step of every tag (default 1000)
#   BENCH_PRELOAD     leaf.preload_percent of the *_pre cases (default 10)
#   BENCH_SLOW_MS     extra time of a slow refill (default 50)
#   BENCH_SLOW_EVERY  every how many refills one is slow (default 10)
#   BENCH_JITTER_DELAY_MS, BENCH_JITTER_MS
#                     one-way delay and jitter of the jitter cases
#                     (default 10 and 10)
#   BENCH_COLD_DELAY  seconds between the start of the server and the
#                     measured run of the cold_* cases (default 0: at once)
#   BENCH_CASES       cases to run (default: all, in the order above)
#   BENCH_MAX_LOAD    a full run refuses to start when the 1-minute load
#                     average is at or above this (default 1.5; empty: no
#                     check; a quick run never checks)
#   BENCH_SHARD_CONF  more postgresql.conf lines for the shard, separated
#                     by ";" (e.g. "leaf.tag_refresh_interval = '1h'")
#   BENCH_OUT_DIR     where the report goes (default ./bench-out/tp999):
#                     tp999.md, and cases.tsv with the figures
#   BENCH_KEEP=1      keep the temporary directory (clusters stopped),
#                     with the per-transaction logs
#   BENCH_COMMIT      the commit to name in the report, for a copy without
#                     .git
#
set -euo pipefail

if [ -z "${PGBIN:-}" ]; then
	PGBIN=$(pg_config --bindir 2>/dev/null || true)
	[ -x "$PGBIN/postgres" ] || PGBIN=/usr/lib/postgresql/15/bin
fi
PATH=$PGBIN:$PATH
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}

CMDLINE=""
for v in BENCH_QUICK T WARM PROBE_T BENCH_RATE BENCH_CLIENTS BENCH_THREADS BENCH_STEP BENCH_PRELOAD \
	BENCH_SLOW_MS BENCH_SLOW_EVERY BENCH_JITTER_DELAY_MS BENCH_JITTER_MS BENCH_COLD_DELAY BENCH_CASES BENCH_MAX_LOAD BENCH_SHARD_CONF BENCH_OUT_DIR; do
	if [ -n "${!v+x}" ]; then
		CMDLINE="$CMDLINE$v=${!v} "
	fi
done
CMDLINE="$CMDLINE$0"

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	MODE=quick
	T=${T:-10}
	WARM=${WARM:-2}
	PROBE_T=${PROBE_T:-2}
	BENCH_MAX_LOAD=${BENCH_MAX_LOAD-}
else
	MODE=full
	BENCH_MAX_LOAD=${BENCH_MAX_LOAD-1.5}
fi
T=${T:-60}
WARM=${WARM:-5}
PROBE_T=${PROBE_T:-5}
RATE=${BENCH_RATE:-20000}
CLIENTS=${BENCH_CLIENTS:-8}
THREADS=${BENCH_THREADS:-2}
STEP=${BENCH_STEP:-1000}
PRELOAD=${BENCH_PRELOAD:-10}
SLOW_MS=${BENCH_SLOW_MS:-50}
SLOW_EVERY=${BENCH_SLOW_EVERY:-10}
JIT_DELAY=${BENCH_JITTER_DELAY_MS:-10}
JIT_MS=${BENCH_JITTER_MS:-10}
COLD_DELAY=${BENCH_COLD_DELAY:-0}
ALL_CASES="floor nextval local net1_pre net1_off net10_pre net10_off jitter_pre jitter_off slow_pre slow_off cold_local_fast cold_local_immediate cold_net10_fast cold_net10_immediate"
CASES=${BENCH_CASES:-$ALL_CASES}
OUT_DIR=${BENCH_OUT_DIR:-./bench-out/tp999}
case "$OUT_DIR" in /*) ;; *) OUT_DIR=$PWD/$OUT_DIR ;; esac

. "$(dirname "$0")/leaf_bench_lib.sh"
bench_check
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 6))' 2>/dev/null || die "$PYTHON is not Python 3.6 or later"
for c in $CASES; do
	case " $ALL_CASES " in *" $c "*) ;; *) die "unknown case $c (cases: $ALL_CASES)" ;; esac
done

load1() { cut -d' ' -f1 /proc/loadavg; }

LOAD_START=$(loadavg)
UPTIME_START=$(uptime)
if [ -n "$BENCH_MAX_LOAD" ] &&
	awk -v l="$(load1)" -v m="$BENCH_MAX_LOAD" 'BEGIN {exit !(l >= m)}'; then
	die "1-minute load average $(load1) is not below BENCH_MAX_LOAD=$BENCH_MAX_LOAD: the figures would be the other work's (BENCH_QUICK=1 for a quick run, or BENCH_MAX_LOAD= to run anyway)"
fi

bench_workdir leaf-tp999
STARTED=()						# data directories of running clusters
PROXY_PID=""

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$PROXY_PID" ]; then
		kill "$PROXY_PID" 2>/dev/null || true
		wait "$PROXY_PID" 2>/dev/null || true
	fi
	bench_finish "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- clusters

init_template

# start_cluster NAME [EXTRA-CONF-LINE...]: a copy of the template on a free
# port; sets PORT_<NAME>
start_cluster() {
	local name=$1
	shift
	bench_start_copy "$name" "$(cat <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_preload_libraries = 'leaf'
leaf.worker_id = 1
leaf.segment_duration = '1ms'
max_connections = 50
shared_buffers = 128MB
jit = off
logging_collector = off
EOF
)" "$@"
	printf -v "PORT_${name^^}" '%s' "$BENCH_PORT"
}

# seg_counters PORT TAG: "refills|waits|max_wait_ms|failed_loads|step"
seg_counters() {
	q "$1" "SELECT s.refills, s.waits, round(s.max_wait_ms::numeric, 3), m.failed_refills_total, s.step
	          FROM leaf_segments s
	          JOIN leaf_tag_metrics m USING (database, biz_tag)
	         WHERE s.biz_tag = '$2' AND s.database = current_database()"
}

# refill_times PORT TAG: "buckets|max|queue|work|commit|p99|tail" from
# leaf_segment_refills (ms; buckets as {n,n,...})
refill_times() {
	q "$1" "SELECT r.refill_buckets, round(r.max_refill_ms::numeric, 1),
	               round(r.max_refill_queue_ms::numeric, 1), round(r.max_refill_work_ms::numeric, 1),
	               coalesce(round(r.max_refill_commit_ms::numeric, 1)::text, '-'),
	               round(r.refill_p99_ms::numeric, 1), round(r.refill_tail_ms::numeric, 1)
	          FROM leaf_segment_refills() r
	         WHERE r.biz_tag = '$2' AND r.database = current_database()"
}

# bucket_diff BEFORE AFTER: the refills of each bucket between two
# readings of refill_buckets, as "<1 ms: n, <2 ms: n, ..." (non-zero only)
bucket_diff() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		split("1 2 5 10 20 50 100 200 500 1000 5000", bound, " ")
		gsub(/[{}]/, "", a); gsub(/[{}]/, "", b)
		n = split(a, x, ","); split(b, y, ",")
		for (i = 1; i <= n; i++) {
			d = y[i] - x[i]
			if (d == 0) continue
			label = (i <= 11) ? "<" bound[i] : ">=5000"
			out = out (out == "" ? "" : ", ") label " ms: " d
		}
		print (out == "" ? "none" : out)
	}'
}

# ---------------------------------------------------------------- proxy

PROFILE=$WORK/proxy.profile

# set_profile DELAY_MS JITTER_MS: the proxy's one-way delay from now on
set_profile() {
	printf '%s %s\n' "$1" "$2" >"$PROFILE.new"
	mv "$PROFILE.new" "$PROFILE"
	sleep 0.2
}

start_proxy() {
	set_profile 0 0
	"$PYTHON" "$here/leaf_delay_proxy.py" --target-port "$PORT_ALLOC" \
		--port-file "$WORK/proxy.port" --profile "$PROFILE" >"$WORK/proxy.log" 2>&1 &
	PROXY_PID=$!
	for _ in $(seq 1 100); do
		[ -s "$WORK/proxy.port" ] && break
		kill -0 "$PROXY_PID" 2>/dev/null || { cat "$WORK/proxy.log" >&2; die "the proxy did not start"; }
		sleep 0.1
	done
	[ -s "$WORK/proxy.port" ] || die "the proxy did not start"
	PORT_PROXY=$(cat "$WORK/proxy.port")
}

# ---------------------------------------------------------------- stats

# case_stats FILE...: per-transaction logs (column 3: latency from the
# scheduled start, column 7: schedule lag, in us), the first transaction
# of each client left out (unless ALL_TXNS=1) -> "n p50 p99 p999 max
# zero% lag_p999 lag_max" (ms, except n and zero%)
case_stats() {
	local a b
	cat "$@" | awk -v lat="$WORK/lat.txt" -v lag="$WORK/lag.txt" -v all="${ALL_TXNS:-0}" \
		'!seen[$1]++ && all != 1 {next} {print $3 > lat; print $7 > lag}'
	a=$(sort -n "$WORK/lat.txt" | awk '
		function pct(p,   i) { i = int(NR * p); if (i < NR * p) i++; if (i < 1) i = 1; return a[i] }
		{ a[NR] = $1; if ($1 == 0) z++ }
		END {
			if (NR == 0) { print "0 nan nan nan nan nan"; exit }
			printf "%d %.3f %.3f %.3f %.3f %.2f\n", NR, pct(0.50) / 1000, pct(0.99) / 1000,
				pct(0.999) / 1000, a[NR] / 1000, 100 * z / NR
		}')
	b=$(sort -n "$WORK/lag.txt" | awk '
		function pct(p,   i) { i = int(NR * p); if (i < NR * p) i++; if (i < 1) i = 1; return a[i] }
		{ a[NR] = $1 }
		END {
			if (NR == 0) { print "nan nan"; exit }
			printf "%.3f %.3f\n", pct(0.999) / 1000, a[NR] / 1000
		}')
	rm -f "$WORK/lat.txt" "$WORK/lag.txt"
	echo "$a $b"
}

# first_second_stats FILE...: "n p999 max" (ms) of the transactions
# scheduled in the first second of a run (column 3: latency, columns 5
# and 6: end time, all in us)
first_second_stats() {
	awk '{printf "%.0f %s\n", $5 * 1000000 + $6 - $3, $3}' "$@" | sort -n | awk '
		NR == 1 {t0 = $1}
		$1 - t0 < 1000000 {print $2}' | sort -n | awk '
		function pct(p,   i) { i = int(NR * p); if (i < NR * p) i++; if (i < 1) i = 1; return a[i] }
		{ a[NR] = $1 }
		END {
			if (NR == 0) { print "0 nan nan"; exit }
			printf "%d %.3f %.3f\n", NR, pct(0.999) / 1000, a[NR] / 1000
		}'
}

# probe_stats FILE...: "n p50 p99 max" (ms) of a pgbench log, all lines
probe_stats() {
	awk '{print $3}' "$@" | sort -n | awk '
		function pct(p,   i) { i = int(NR * p); if (i < NR * p) i++; if (i < 1) i = 1; return a[i] }
		{ a[NR] = $1 }
		END {
			if (NR == 0) { print "0 nan nan nan"; exit }
			printf "%d %.3f %.3f %.3f\n", NR, pct(0.50) / 1000, pct(0.99) / 1000, a[NR] / 1000
		}'
}

# ---------------------------------------------------------------- setup

log "work directory $WORK, $MODE mode, load $LOAD_START"

start_cluster alloc
qf "$PORT_ALLOC" >/dev/null <<SQL
CREATE EXTENSION leaf;
-- every SLOW_EVERY-th update of a tp_slow* row of leaf_alloc (a refill)
-- takes SLOW_MS longer
CREATE SEQUENCE public.tp_slow_n;
CREATE FUNCTION public.tp_slow_refill() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS \$\$
BEGIN
	IF nextval('public.tp_slow_n') % $SLOW_EVERY = 0 THEN
		PERFORM pg_sleep($SLOW_MS / 1000.0);
	END IF;
	RETURN NEW;
END
\$\$;
CREATE TRIGGER tp_slow_refill BEFORE UPDATE ON leaf_alloc
	FOR EACH ROW WHEN (NEW.biz_tag LIKE 'tp\\_slow%')
	EXECUTE FUNCTION public.tp_slow_refill();
SQL
for p in net1 net10 jitter slow; do
	for v in pre off probe; do
		q "$PORT_ALLOC" "SELECT leaf_segment_create('tp_${p}_$v', $STEP)" >/dev/null
	done
done
# cold_tags PORT INSTANCE: the tags of the cold-start cases of an
# instance, one per client
cold_tags() {
	q "$1" "SELECT count(leaf_segment_create('tp_cold_$2_' || i, $STEP)) FROM generate_series(0, $CLIENTS - 1) AS i" >/dev/null
}
cold_tags "$PORT_ALLOC" net10
q "$PORT_ALLOC" "SELECT leaf_segment_create('tp_direct_probe', $STEP), leaf_segment_create('tp_proxy0_probe', $STEP)" >/dev/null
start_proxy
log "allocation database on port $PORT_ALLOC, proxy on port $PORT_PROXY"

start_cluster main
qf "$PORT_MAIN" >/dev/null <<SQL
CREATE EXTENSION leaf;
CREATE SEQUENCE s;
SELECT leaf_segment_create('tp_local', $STEP);
SQL
cold_tags "$PORT_MAIN" local

CONNINFO="host=127.0.0.1 port=$PORT_PROXY dbname=postgres user=postgres"
SHARD_CONF=("leaf.alloc_conninfo = '$CONNINFO'")
if [ -n "${BENCH_SHARD_CONF:-}" ]; then
	IFS=';' read -r -a extra <<<"$BENCH_SHARD_CONF"
	SHARD_CONF+=("${extra[@]}")
fi
start_cluster shard "${SHARD_CONF[@]}"
q "$PORT_SHARD" "CREATE EXTENSION leaf" >/dev/null
log "main on port $PORT_MAIN, shard on port $PORT_SHARD"

PGVER=$(q "$PORT_MAIN" "SELECT version()")
bench_build_info

printf '%s\n%s\n' "SELECT clock_timestamp();" '\set z 0' >"$WORK/scripts/floor.sql"
printf '%s\n%s\n' "SELECT nextval('s');" '\set z 0' >"$WORK/scripts/nextval.sql"
printf '%s\n%s\n' "SELECT 1;" '\set z 0' >"$WORK/scripts/ping.sql"

# ---------------------------------------------------------------- cases

# pgbench_run NAME PORT SCRIPT SECONDS [--log]: prints the tps
pgbench_run() {
	local name=$1 port=$2 script=$3 secs=$4 logopt=()
	[ "${5:-}" = --log ] && logopt=(--log --log-prefix="$WORK/logs/$name")
	if ! pgbench -n -M prepared -c "$CLIENTS" -j "$THREADS" --rate "$RATE" -T "$secs" "${logopt[@]}" \
		-h "$WORK" -p "$port" -U postgres -f "$script" postgres >"$WORK/logs/$name.out" 2>&1; then
		cat "$WORK/logs/$name.out" >&2
		die "pgbench $name failed"
	fi
	awk '/^tps = / {print $3; exit}' "$WORK/logs/$name.out"
}

# probe NAME PORT HOST SCRIPT: one client, no rate, PROBE_T seconds
# -> "n p50 p99 max"
probe() {
	pgbench -n -M prepared -c 1 -j 1 -T "$PROBE_T" --log --log-prefix="$WORK/logs/$1" \
		-h "$3" -p "$2" -U postgres -f "$4" postgres >"$WORK/logs/$1.out" 2>&1 ||
		{ cat "$WORK/logs/$1.out" >&2; die "probe $1 failed"; }
	probe_stats "$WORK/logs/$1".[0-9]*
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -f "$WORK/logs/$1".[0-9]*
}

# the allocator's refill statement, against a probe tag of the profile
refill_script() {
	cat >"$WORK/scripts/refill_$1.sql" <<EOF
UPDATE leaf_alloc AS a SET max_id = a.max_id + $STEP WHERE a.biz_tag = 'tp_$1_probe' AND pg_catalog.set_config('synchronous_commit', 'on', true) IS NOT NULL RETURNING a.max_id;
\\set z 0
EOF
}

declare -A NETLABEL PROFILE_OF
NETLABEL[net1]="1 ms RTT (0.5 ms each way)"
NETLABEL[net10]="10 ms RTT (5 ms each way)"
NETLABEL[jitter]="$JIT_DELAY ms ± $JIT_MS ms each way"
NETLABEL[slow]="1 ms RTT, every ${SLOW_EVERY}th refill +$SLOW_MS ms"
PROFILE_OF[net1]="0.5 0"
PROFILE_OF[net10]="5 0"
PROFILE_OF[jitter]="$JIT_DELAY $JIT_MS"
PROFILE_OF[slow]="0.5 0"
NETLABEL[direct]="loopback, no proxy"
NETLABEL[proxy0]="through the proxy, no delay"

slow_count() { q "$PORT_ALLOC" "SELECT CASE WHEN is_called THEN last_value / $SLOW_EVERY ELSE 0 END FROM public.tp_slow_n"; }

PROBE_ROWS=()
ROWS=()
TSV=$WORK/cases.tsv
printf 'case\tinstance\tallocation\tpreload_percent\tscheduled_tps\ttps\ttxns\tp50_ms\tp99_ms\tp999_ms\tmax_ms\tlag_p999_ms\tlag_max_ms\tzero_pct\trefills\twaits\tmax_wait_ms\tfailed_loads\tslow_refills\tstep\tload_before\tload_after\n' >"$TSV"
CURRENT_PROFILE=""
CURRENT_PRELOAD=$PRELOAD

# set_preload PCT: leaf.preload_percent of the shard
set_preload() {
	[ "$1" = "$CURRENT_PRELOAD" ] && return 0
	q "$PORT_SHARD" "ALTER SYSTEM SET leaf.preload_percent = $1" >/dev/null
	q "$PORT_SHARD" "SELECT pg_reload_conf()" >/dev/null
	sleep 0.5
	[ "$(q "$PORT_SHARD" "SHOW leaf.preload_percent")" = "$1" ] || die "leaf.preload_percent did not change to $1"
	CURRENT_PRELOAD=$1
}

# probe_row P PORT: round trip and refill time of the allocation database
# at PORT (the proxy's, or its own), a row of the report
probe_row() {
	local p=$1 port=$2 ping refill pn p50 p99 pmx rn r50 r99 rmx
	refill_script "$p"
	ping=$(probe "ping_$p" "$port" 127.0.0.1 "$WORK/scripts/ping.sql")
	refill=$(probe "refill_$p" "$port" 127.0.0.1 "$WORK/scripts/refill_$p.sql")
	log "  SELECT 1: n p50 p99 max = $ping; refill: $refill"
	read -r pn p50 p99 pmx <<<"$ping"
	read -r rn r50 r99 rmx <<<"$refill"
	PROBE_ROWS+=("| ${NETLABEL[$p]} | $p50 | $p99 | $pmx | $pn | $r50 | $r99 | $rmx | $rn |")
}

# enter_profile P: the proxy's delay for profile P, then its round trip
# and refill time measured through the proxy
enter_profile() {
	local p=$1
	[ "$p" = "$CURRENT_PROFILE" ] && return 0
	set_profile ${PROFILE_OF[$p]}
	CURRENT_PROFILE=$p
	log "profile $p: ${NETLABEL[$p]}"
	probe_row "$p" "$PORT_PROXY"
}

# run_case CASE
run_case() {
	local c=$1 port inst alloc pre tag script p tps st lb la c0 c1 s0=0 s1=0 budget
	local n p50 p99 p999 mx lp999 lmx zero r0 w0 mw0 f0 r1 w1 mw1 f1 step mw slow t0 t1
	case $c in
		floor | nextval)
			port=$PORT_MAIN inst=main alloc="-" pre="-" tag=""
			script=$WORK/scripts/$c.sql
			;;
		local)
			port=$PORT_MAIN inst=main alloc="local leaf_alloc" pre=$PRELOAD tag=tp_local
			;;
		*)
			p=${c%_*}
			port=$PORT_SHARD inst=shard alloc="${NETLABEL[$p]}" tag=tp_$c
			if [ "${c##*_}" = pre ]; then pre=$PRELOAD; else pre=100; fi
			enter_profile "$p"
			set_preload "$pre"
			;;
	esac
	if [ -n "$tag" ]; then
		script=$WORK/scripts/$c.sql
		printf '%s\n%s\n' "SELECT leaf_segment_nextval('$tag');" '\set z 0' >"$script"
		q "$port" "SELECT leaf_segment_nextval('$tag')" >/dev/null
	fi
	log "== $c: warm-up ${WARM}s"
	pgbench_run "warm_$c" "$port" "$script" "$WARM" >/dev/null
	[ -n "$tag" ] && c0=$(seg_counters "$port" "$tag") && t0=$(refill_times "$port" "$tag")
	[ "${c%_*}" = slow ] && s0=$(slow_count)
	lb=$(loadavg)
	log "== $c: ${T}s at $RATE tps (load $lb)"
	tps=$(pgbench_run "run_$c" "$port" "$script" "$T" --log)
	la=$(loadavg)
	[ "${c%_*}" = slow ] && s1=$(slow_count)
	st=$(case_stats "$WORK/logs/run_$c".[0-9]*)
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -f "$WORK/logs/run_$c".[0-9]*
	read -r n p50 p99 p999 mx zero lp999 lmx <<<"$st"
	r0=- w0=- mw=- f0=- step=- slow=-
	local dr=- dw=- df=-
	if [ -n "$tag" ]; then
		c1=$(seg_counters "$port" "$tag")
		IFS='|' read -r r0 w0 mw0 f0 _ <<<"$c0"
		IFS='|' read -r r1 w1 mw1 f1 step <<<"$c1"
		dr=$((r1 - r0)) dw=$((w1 - w0)) df=$((f1 - f0))
		t1=$(refill_times "$port" "$tag")
		refill_row "$c" "$t0" "$t1"
		# max_wait_ms counts since the tag's first call; a longest wait
		# that did not grow happened before this run (or equals it)
		if [ "$dw" = 0 ]; then
			mw=0
		elif awk -v a="$mw1" -v b="$mw0" 'BEGIN {exit !(a > b)}'; then
			mw=$mw1
		else
			mw="≤ $mw1"
		fi
	fi
	[ "${c%_*}" = slow ] && slow=$((s1 - s0))
	log "   tps $tps, p50 $p50, p99 $p99, p99.9 $p999, max $mx ms; lag p99.9 $lp999, max $lmx; refills $dr, waits $dw, max wait $mw"
	if [ "$pre" = "-" ] || [ "$pre" = 100 ]; then budget=0; else budget=$(awk -v p="$pre" -v s="$STEP" -v r="$RATE" 'BEGIN {printf "%.1f", (100 - p) / 100 * s / r * 1000}'); fi
	[ "$pre" = "-" ] && budget="-"
	ROWS+=("| $c | $inst | $alloc | $pre | $budget | $(printf '%.0f' "$tps") ($(awk -v a="$tps" -v r="$RATE" 'BEGIN {printf "%.3f", a / r}')) | $p50 | $p99 | **$p999** | $mx | $lp999 | $lmx | $dr | **$dw** | $mw | $df | $slow | ${lb%% *} → ${la%% *} |")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$c" "$inst" "$alloc" "$pre" "$RATE" "$tps" "$n" "$p50" "$p99" "$p999" "$mx" "$lp999" "$lmx" "$zero" \
		"$dr" "$dw" "$mw" "$df" "$slow" "$step" "$lb" "$la" >>"$TSV"
}

REFILL_ROWS=()

# refill_row CASE BEFORE AFTER: the refill times of a case's tag, from
# two readings of refill_times around the measured run
refill_row() {
	local b0 b1 mx qu wo co p99 tail mx0 when
	IFS='|' read -r b0 mx0 _ _ _ _ _ <<<"$2"
	IFS='|' read -r b1 mx qu wo co p99 tail <<<"$3"
	when="since the tag's first call"
	awk -v a="$mx" -v b="$mx0" 'BEGIN {exit !(a > b)}' && when="in the run"
	log "   refills by time in the run: $(bucket_diff "$b0" "$b1"); longest ($when) $mx ms = queue $qu + work $wo + commit $co; p99 ≤ $p99, tail $tail ms"
	REFILL_ROWS+=("| $1 | $(bucket_diff "$b0" "$b1") | $mx ($when) | $qu | $wo | $co | $p99 | $tail |")
}

# cold_counters PORT INSTANCE: "tags|refills|waits|max_wait_ms" over the
# cold-start tags of an instance, since the restart (their slots are new)
cold_counters() {
	q "$1" "SELECT count(*), coalesce(sum(refills), 0), coalesce(sum(waits), 0),
	               coalesce(round(max(max_wait_ms)::numeric, 3), 0)
	          FROM leaf_segments
	         WHERE biz_tag LIKE 'tp\\_$2\\_%' AND database = current_database()"
}

COLD_ROWS=()

# run_cold_case CASE: warm up the case's tags, restart the server with
# the case's stop mode, and measure at once
run_cold_case() {
	local c=$1 rest inst stop port d alloc script tps st lb la t0 t1 start_ms
	local n p50 p99 p999 mx zero lp999 lmx ntags refills waits mw pg early_waits early_mw first f_n f_p999 f_max
	rest=${c#cold_}
	inst=${rest%_*} stop=${rest##*_}
	if [ "$inst" = local ]; then
		port=$PORT_MAIN d=$WORK/main alloc="local leaf_alloc"
		inst=main
	else
		port=$PORT_SHARD d=$WORK/shard alloc="${NETLABEL[net10]}"
		inst=shard
		enter_profile net10
		set_preload "$PRELOAD"
	fi
	script=$WORK/scripts/$c.sql
	printf '%s\n%s\n' "SELECT leaf_segment_nextval('tp_cold_${rest%_*}_' || :client_id);" '\set z 0' >"$script"
	log "== $c: warm-up ${WARM}s on $CLIENTS tags"
	pgbench_run "warm_$c" "$port" "$script" "$WARM" >/dev/null
	lb=$(loadavg)
	log "== $c: stop -m $stop, start, then ${T}s at $RATE tps (load $lb)"
	as_pg "$PGBIN/pg_ctl -D '$d' -m $stop -w -t 60 stop >/dev/null"
	t0=$(date +%s%N)
	as_pg "$PGBIN/pg_ctl -D '$d' -l '$d/server.log' -w -t 60 start >/dev/null" ||
		{ tail -n 30 "$d/server.log" >&2; die "could not start $inst again"; }
	t1=$(date +%s%N)
	start_ms=$(((t1 - t0) / 1000000))
	[ "$COLD_DELAY" = 0 ] || sleep "$COLD_DELAY"
	# the waits of the first second, then those of the whole run
	pgbench_run "run_$c" "$port" "$script" "$T" --log >"$WORK/logs/run_$c.tps" &
	pg=$!
	sleep 1
	IFS='|' read -r _ _ early_waits early_mw <<<"$(cold_counters "$port" "cold_${rest%_*}")"
	wait "$pg" || die "pgbench run_$c failed"
	tps=$(cat "$WORK/logs/run_$c.tps")
	la=$(loadavg)
	first=$(first_second_stats "$WORK/logs/run_$c".[0-9]*)
	read -r f_n f_p999 f_max <<<"$first"
	st=$(ALL_TXNS=1 case_stats "$WORK/logs/run_$c".[0-9]*)
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -f "$WORK/logs/run_$c".[0-9]*
	read -r n p50 p99 p999 mx zero lp999 lmx <<<"$st"
	IFS='|' read -r ntags refills waits mw <<<"$(cold_counters "$port" "cold_${rest%_*}")"
	log "   start ${start_ms} ms; first second: $f_n transactions, p99.9 $f_p999, max $f_max ms, waits $early_waits (max $early_mw ms); whole run: tps $tps, p50 $p50, p99 $p99, p99.9 $p999, max $mx ms; tags $ntags, refills $refills, waits $waits, max wait $mw"
	COLD_ROWS+=("| $c | $inst | $alloc | $stop | $start_ms | **$early_waits** | $early_mw | $f_p999 | $f_max | $(printf '%.0f' "$tps") ($(awk -v a="$tps" -v r="$RATE" 'BEGIN {printf "%.3f", a / r}')) | $p50 | $p99 | **$p999** | $mx | $lp999 | $lmx | $refills | **$waits** | $mw | ${lb%% *} → ${la%% *} |")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$c" "$inst" "$alloc" "$PRELOAD" "$RATE" "$tps" "$n" "$p50" "$p99" "$p999" "$mx" "$lp999" "$lmx" "$zero" \
		"$refills" "$waits" "$mw" "-" "-" "$STEP" "$lb" "$la" >>"$TSV"
}

case " $CASES " in
	*" net"* | *" jitter"* | *" slow"* | *" cold_net"*)
		log "allocation database: loopback, and through the proxy with no delay"
		probe_row direct "$PORT_ALLOC"
		set_profile 0 0
		probe_row proxy0 "$PORT_PROXY"
		;;
esac
T0=$(date +%s)
for c in $CASES; do
	case $c in
		cold_*) run_cold_case "$c" ;;
		*) run_case "$c" ;;
	esac
done
ELAPSED=$(($(date +%s) - T0))
TOTAL=$SECONDS
LOAD_END=$(loadavg)
UPTIME_END=$(uptime)

# ---------------------------------------------------------------- report

REPORT=$WORK/report.md
: >"$REPORT"
out() { printf '%s\n' "$*" >>"$REPORT"; }

out "# leaf: TP999 at a fixed rate"
out ""
out "| item | value |"
out "|---|---|"
out "| command | \`$CMDLINE\` |"
out "| mode | **$MODE** (T=${T}s per case, warm-up ${WARM}s, probes ${PROBE_T}s) |"
out "| date | $(date '+%Y-%m-%d %H:%M:%S %Z') |"
out "| host | $(nproc) vCPU $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GB RAM", $2 / 1048576}' /proc/meminfo) |"
out "| load average (1, 5, 15 min) | start $LOAD_START, end $LOAD_END |"
out "| uptime | start: \`${UPTIME_START# }\`; end: \`${UPTIME_END# }\` |"
out "| server | ${PGVER%% on *} |"
out "| leaf | checkout $COMMIT ($DIRTY), installed leaf.so md5 $SO_SUM... ($SO_TIME) |"
out "| clusters | main, shard, alloc: initdb -A trust -E UTF8 --locale=C.UTF-8; 127.0.0.1, shared_buffers=128MB, jit=off, shared_preload_libraries=leaf, leaf.segment_duration=1ms; fsync and synchronous_commit on; shard: leaf.alloc_conninfo through the delaying proxy to alloc${BENCH_SHARD_CONF:+; shard also: $BENCH_SHARD_CONF} |"
out "| load | \`pgbench -n -M prepared -c $CLIENTS -j $THREADS --rate $RATE -T $T --log\`, script \`SELECT <expr>;\` + \`\\set z 0\`; step $STEP for every tag (a segment lasts $(awk -v s="$STEP" -v r="$RATE" 'BEGIN {printf "%.1f", s / r * 1000}') ms at this rate) |"
out "| elapsed | ${TOTAL}s in all, ${ELAPSED}s of them for the cases |"
out ""
if [ ${#PROBE_ROWS[@]} -gt 0 ]; then
	out "## Allocation database through the proxy"
	out ""
	out "Measured through the proxy before the cases of each profile: \`SELECT 1\`, and the allocator's refill statement (one autocommit \`UPDATE leaf_alloc ... RETURNING\` with synchronous_commit on, step $STEP, on a probe tag of the profile), each by \`pgbench -c 1 -T $PROBE_T\` without a rate."
	out ""
	out "| allocation database | SELECT 1 p50 ms | p99 ms | max ms | n | refill p50 ms | p99 ms | max ms | n |"
	out "|---|---|---|---|---|---|---|---|---|"
	for r in "${PROBE_ROWS[@]}"; do
		out "$r"
	done
	out ""
fi
if [ ${#ROWS[@]} -gt 0 ]; then
	out "## Cases"
	out ""
	out "Latency: the per-transaction log's latency, which pgbench counts from the transaction's scheduled start (so it includes the schedule lag), the first transaction of each client left out. Lag: the schedule lag alone. Budget: how long a refill has before the current segment runs dry, $STEP IDs at $RATE/s, (100 − preload) % of a segment. Refills, waits (callers that found both buffers empty) and failed loads: \`leaf_segments\` and \`leaf_tag_metrics\` of the case's tag over the measured run; max wait: the longest of those waits (\`≤ x\`: it did not exceed the longest wait seen before the run, x). Slow: refills that took the extra ${SLOW_MS} ms. Load: 1-minute load average before → after."
	out ""
	out "| case | instance | allocation | preload % | budget ms | tps (of $RATE) | p50 ms | p99 ms | p99.9 ms | max ms | lag p99.9 ms | lag max ms | refills | waits | max wait ms | failed loads | slow | load |"
	out "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for r in "${ROWS[@]}"; do
		out "$r"
	done
fi
if [ ${#REFILL_ROWS[@]} -gt 0 ]; then
	out ""
	out "## Refill times"
	out ""
	out "From \`leaf_segment_refills()\` of each case's tag: refills of the measured run by time (from the caller's ask to the segment's publication), and the longest refill with its parts (queue: until the allocator picked it up; work: the load's statements; commit: a local load's commit and WAL flush), in the run or, if it did not grow there, since the tag's first call; the p99 (an upper bound, from the buckets) and the tail the trigger plans for, at the end of the run (both since the tag's first call)."
	out ""
	out "| case | refills in the run, by time | longest ms | queue ms | work ms | commit ms | p99 ≤ ms | tail ms |"
	out "|---|---|---|---|---|---|---|---|"
	for r in "${REFILL_ROWS[@]}"; do
		out "$r"
	done
fi
if [ ${#COLD_ROWS[@]} -gt 0 ]; then
	out ""
	out "## Cold starts"
	out ""
	out "$CLIENTS tags, one per client, warmed up for ${WARM}s; then the server is stopped with the mode named, started again (start ms: \`pg_ctl start -w\`, crash recovery included after an immediate stop), and the measured run of ${T}s starts $([ "$COLD_DELAY" = 0 ] && echo "as soon as it returns" || echo "${COLD_DELAY}s after it returned"). Every transaction counts, the first of each client too. First second: the callers that waited and the longest wait (\`leaf_segments\` summed over the case's tags, read 1 s into the run), and the p99.9 and max latency of the transactions scheduled in the run's first second. Then the whole run; refills, waits and max wait: \`leaf_segments\` summed over the case's tags, since the restart."
	out ""
	out "| case | instance | allocation | stop | start ms | waits, 1st s | max wait ms, 1st s | p99.9 ms, 1st s | max ms, 1st s | tps (of $RATE) | p50 ms | p99 ms | p99.9 ms | max ms | lag p99.9 ms | lag max ms | refills | waits | max wait ms | load |"
	out "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for r in "${COLD_ROWS[@]}"; do
		out "$r"
	done
fi
out ""
out "Transactions per case and the share logged with a latency of 0 are in cases.tsv."

mkdir -p "$OUT_DIR"
cp "$REPORT" "$OUT_DIR/tp999.md"
cp "$TSV" "$OUT_DIR/cases.tsv"
cat "$OUT_DIR/tp999.md"
log "report written to $OUT_DIR/tp999.md"
