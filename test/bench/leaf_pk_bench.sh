#!/usr/bin/env bash
#
# leaf_pk_bench.sh: the primary key of a growing table.  Clients insert
# rows of about 100 bytes into a table keyed by bigserial, by leaf (segment
# and snowflake) or by a UUID, up to BENCH_ROWS rows, and the script
# samples the throughput, the sizes of the table and its indexes, the WAL
# and its full-page images, and the buffer hits and reads after every
# BENCH_SAMPLE rows.  Where the key can find rows by time, a query of a
# time range follows the fill (below).  One throwaway PostgreSQL cluster
# (15 or later) per key.  Not part of the test suite.
#
# Run as root or as postgres, after "make install":
#
#   test/bench/leaf_pk_bench.sh                  full run (30 M rows a key)
#   BENCH_QUICK=1 test/bench/leaf_pk_bench.sh    quick run (1.5 M rows a key,
#                                                under 5 minutes)
#
# Keys (BENCH_KEYS), each in a fresh cluster, in this order:
#   bigserial   id bigserial
#   bigserial_created
#               id bigserial, and an index on created (the time range's
#               index, which the other keys do without)
#   segment     id bigint DEFAULT leaf_segment_nextval('pk'), a tag created
#               with step BENCH_STEP (the dynamic step left on: it grows
#               while a segment lasts less than leaf.segment_duration,
#               15 minutes by default)
#   snowflake   id bigint DEFAULT leaf_snowflake(), one node, worker ID 1
#               (leaf.worker_id, no ZooKeeper)
#   snowflake3  the IDs of three nodes interleaved row by row, as in a
#               table fed from three shards: leaf_snowflake() with its
#               worker ID bits replaced by 1 + (row mod 3), the row
#               numbered within its batch (worker IDs 1, 2 and 3)
#   snowflake3c the same by client: each client writes as one node, with
#               worker ID 1 + (pgbench's client_id mod 3), so every batch
#               holds the IDs of one node (4 clients: nodes 1, 2, 3, 1)
#   uuid        id uuid DEFAULT gen_random_uuid()
#   uuidv7      id uuid DEFAULT uuidv7() (PostgreSQL 18 and later; left
#               out of the default list, with a note, on an older server)
#
# The time range (BENCH_RANGE=1, the default), after the fill of the keys
# that can find rows by time: bigserial_created (by its index on created),
# snowflake, snowflake3, snowflake3c (by the key, bounds from
# leaf_snowflake_min_id(); skipped, with a note, on a leaf without it) and
# uuidv7 (by the key, bounds the smallest UUIDv7 of an instant, computed
# in SQL from its 48-bit Unix time in milliseconds: 18 has
# uuid_extract_timestamp() but nothing from a time to a UUID).  A fill
# takes minutes, so every row of it falls within an hour: the query asks
# instead for the share of the rows that one hour holds in a table filled
# evenly over BENCH_RANGE_DAYS days (30: 1/720), the window of created in
# the middle of the key's own fill that holds that share of its rows (in
# whole statements, from the one holding the row of rank
# ROWS/2 - ROWS/(48 * days) + 1 by created to the one holding rank
# ROWS/2 + ROWS/(48 * days) + 1, excluded).  A window of the fill's
# duration over 24 * days would hold that many rows on average, but it
# often falls in a pause of pgbench between samples.  The cluster is
# analyzed, checkpointed and restarted (shared buffers empty; the kernel's
# page cache is not dropped), then EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) of
# "SELECT * FROM t WHERE <range>" runs 1 + BENCH_RANGE_RUNS times in one
# session: the first is the cold one, the others give the median and the
# 95th percentile (nearest rank) of the execution time, with the rows
# returned, the buffers hit and read and the plan's scan.
#
# The table is (id <key> PRIMARY KEY, created timestamptz, payload text),
# the payload 80 characters: 97 bytes of data a row with a bigint key, 105
# with a UUID, plus the tuple header.  Each of BENCH_CLIENTS pgbench
# clients repeats one transaction, "INSERT INTO t ... SELECT ... FROM
# generate_series(1, BENCH_BATCH)"; every BENCH_SAMPLE rows pgbench stops
# (-t), and the script samples, so the throughput of a sample is pgbench's
# (connection time left out).  WAL bytes are counted from the WAL insert
# position, full-page images from pg_stat_wal, hits and reads from
# pg_statio_user_tables, checkpoints from pg_stat_bgwriter (before 17) or
# pg_stat_checkpointer, the CPU time of the cluster's processes from
# /proc (other work on the machine moves it less than the throughput, but
# it does move it), all from after a CHECKPOINT that follows the table's
# creation.
#
# Settings of every cluster: shared_buffers = BENCH_SHARED_BUFFERS, small
# enough that the index outgrows it early (a bigint index passes 128 MB
# near 6 M rows, a random UUID index near 3 M); checkpoints by WAL volume
# alone (checkpoint_timeout = BENCH_CHECKPOINT_TIMEOUT, longer than a key
# takes; max_wal_size = BENCH_MAX_WAL_SIZE), the same rule for every key;
# fsync, synchronous_commit, full_page_writes and autovacuum at their
# defaults; jit off; leaf preloaded in every cluster.
#
# Environment:
#   PGBIN                 PostgreSQL binaries (default: pg_config --bindir of
#                         the pg_config in PATH, else
#                         /usr/lib/postgresql/15/bin)
#   BENCH_QUICK=1         BENCH_ROWS=1500000, BENCH_SAMPLE=100000,
#                         BENCH_SHARED_BUFFERS=8MB, BENCH_MAX_WAL_SIZE=128MB
#                         (the full run's settings scaled by 1/20)
#   BENCH_ROWS            rows per key (default 30000000)
#   BENCH_SAMPLE          rows between samples (default 1000000); a
#                         multiple of BENCH_CLIENTS * BENCH_BATCH
#   BENCH_BATCH           rows per INSERT (default 1000)
#   BENCH_CLIENTS         pgbench clients (default 4)
#   BENCH_THREADS         pgbench threads (default 2)
#   BENCH_KEYS            keys to run (default: all, in the order above)
#   BENCH_STEP            step of the segment tag (default 10000)
#   BENCH_SHARED_BUFFERS  default 128MB
#   BENCH_MAX_WAL_SIZE    default 2GB
#   BENCH_CHECKPOINT_TIMEOUT
#                         default 1h
#   BENCH_OUT             the markdown report (default ./bench-out/pk.md);
#                         pk.tsv (every sample) and pk.dat, leaf_pk_bench.gp
#                         (the picture's data and gnuplot script) next to it
#   BENCH_PNG_DIR         where leaf_pk_bench.png goes (default: next to
#                         BENCH_OUT); without gnuplot (Debian package
#                         gnuplot-nox) the report says how to draw it later
#   BENCH_RANGE           1 (default): the time range after the keys that
#                         can run it; 0: none
#   BENCH_RANGE_RUNS      warm runs of the range query (default 20)
#   BENCH_RANGE_DAYS      the days the table stands for (default 30)
#   BENCH_KEEP=1          keep the temporary directory (clusters stopped)
#   BENCH_COMMIT          the commit to name in the report, for a copy
#                         without .git
#
set -euo pipefail

if [ -z "${PGBIN:-}" ]; then
	PGBIN=$(pg_config --bindir 2>/dev/null || true)
	[ -x "$PGBIN/postgres" ] || PGBIN=/usr/lib/postgresql/15/bin
fi
PATH=$PGBIN:$PATH
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

CMDLINE=""
for v in BENCH_QUICK BENCH_ROWS BENCH_SAMPLE BENCH_BATCH BENCH_CLIENTS BENCH_THREADS BENCH_KEYS BENCH_STEP \
	BENCH_SHARED_BUFFERS BENCH_MAX_WAL_SIZE BENCH_CHECKPOINT_TIMEOUT BENCH_RANGE BENCH_RANGE_RUNS BENCH_RANGE_DAYS BENCH_OUT; do
	if [ -n "${!v+x}" ]; then
		CMDLINE="$CMDLINE$v=${!v} "
	fi
done
CMDLINE="$CMDLINE$0"

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	MODE=quick
	ROWS=${BENCH_ROWS:-1500000}
	SAMPLE=${BENCH_SAMPLE:-100000}
	SHARED_BUFFERS=${BENCH_SHARED_BUFFERS:-8MB}
	MAX_WAL_SIZE=${BENCH_MAX_WAL_SIZE:-128MB}
else
	MODE=full
fi
ROWS=${ROWS:-${BENCH_ROWS:-30000000}}
SAMPLE=${SAMPLE:-${BENCH_SAMPLE:-1000000}}
SHARED_BUFFERS=${SHARED_BUFFERS:-${BENCH_SHARED_BUFFERS:-128MB}}
MAX_WAL_SIZE=${MAX_WAL_SIZE:-${BENCH_MAX_WAL_SIZE:-2GB}}
CKPT_TIMEOUT=${BENCH_CHECKPOINT_TIMEOUT:-1h}
BATCH=${BENCH_BATCH:-1000}
CLIENTS=${BENCH_CLIENTS:-4}
THREADS=${BENCH_THREADS:-2}
STEP=${BENCH_STEP:-10000}
ALL_KEYS="bigserial bigserial_created segment snowflake snowflake3 snowflake3c uuid uuidv7"
RANGE=${BENCH_RANGE:-1}
RANGE_RUNS=${BENCH_RANGE_RUNS:-20}
RANGE_DAYS=${BENCH_RANGE_DAYS:-30}
OUT=${BENCH_OUT:-./bench-out/pk.md}
case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac
OUT_DIR=$(dirname "$OUT")
PNG_DIR=${BENCH_PNG_DIR:-$OUT_DIR}
case "$PNG_DIR" in /*) ;; *) PNG_DIR=$PWD/$PNG_DIR ;; esac

. "$here/leaf_bench_lib.sh"
bench_check

# shared_buffers in MB, from a setting in MB or GB
case $SHARED_BUFFERS in
	*GB) SB_MB=$((${SHARED_BUFFERS%GB} * 1024)) ;;
	*MB) SB_MB=${SHARED_BUFFERS%MB} ;;
	*) die "BENCH_SHARED_BUFFERS in MB or GB, please ($SHARED_BUFFERS)" ;;
esac
[ $((SAMPLE % (CLIENTS * BATCH))) = 0 ] ||
	die "BENCH_SAMPLE ($SAMPLE) is not a multiple of BENCH_CLIENTS * BENCH_BATCH ($((CLIENTS * BATCH)))"
[ $((ROWS % SAMPLE)) = 0 ] || die "BENCH_ROWS ($ROWS) is not a multiple of BENCH_SAMPLE ($SAMPLE)"
NSAMPLES=$((ROWS / SAMPLE))
[ "$NSAMPLES" -ge 3 ] || die "fewer than 3 samples: BENCH_ROWS / BENCH_SAMPLE = $NSAMPLES"
[ "$RANGE_RUNS" -ge 1 ] || die "BENCH_RANGE_RUNS must be 1 or more ($RANGE_RUNS)"
[ "$RANGE_DAYS" -ge 1 ] || die "BENCH_RANGE_DAYS must be 1 or more ($RANGE_DAYS)"
# the last third of the run (the last 10 M rows of 30 M)
NLAST=$((NSAMPLES / 3))
PGNUM=$("$PGBIN/postgres" --version | awk '{print $3}' | cut -d. -f1)
KEYS=${BENCH_KEYS:-$ALL_KEYS}
NOTES=()
for k in $KEYS; do
	case " $ALL_KEYS " in *" $k "*) ;; *) die "unknown key $k (keys: $ALL_KEYS)" ;; esac
done
if [ "$PGNUM" -lt 18 ]; then
	case " $KEYS " in *" uuidv7 "*)
		[ -n "${BENCH_KEYS:-}" ] && die "uuidv7() needs PostgreSQL 18 or later ($PGBIN is $PGNUM)"
		KEYS=${KEYS//uuidv7/}
		NOTES+=("uuidv7: not run, PostgreSQL $PGNUM has no uuidv7() (18 and later)")
		;;
	esac
fi

LOAD_START=$(loadavg)
UPTIME_START=$(uptime)

bench_workdir leaf-pk
STARTED=()						# data directories of running clusters

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	bench_finish "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- clusters

init_template

# start_cluster NAME: a copy of the template on a free port, with the
# settings above; sets PORT and DATA
start_cluster() {
	bench_start_copy "$1" "$(cat <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_preload_libraries = 'leaf'
leaf.worker_id = 1
max_connections = 20
shared_buffers = $SHARED_BUFFERS
max_wal_size = $MAX_WAL_SIZE
checkpoint_timeout = $CKPT_TIMEOUT
log_checkpoints = on
jit = off
logging_collector = off
EOF
)"
	PORT=$BENCH_PORT DATA=$WORK/$1
}

# stop_cluster: stop the cluster of the key that ran, and remove it (a
# key of 30 M rows leaves gigabytes); its log goes to $WORK/logs
stop_cluster() {
	as_pg "$PGBIN/pg_ctl -D '$DATA' -m fast -w stop" >/dev/null
	STARTED=()
	cp "$DATA/server.log" "$WORK/logs/$(basename "$DATA").server.log"
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$DATA"
}

# ---------------------------------------------------------------- keys

PAYLOAD="pg_catalog.lpad(g::text, 80, 'leaf-pk-bench-')"

# setup_key KEY: the table, and the INSERT of one batch into
# $WORK/scripts/KEY.sql
setup_key() {
	local k=$1 col cols="created, payload" sel="now(), $PAYLOAD" pre=""
	case $k in
		bigserial | bigserial_created) col="id bigserial PRIMARY KEY" ;;
		segment)
			q "$PORT" "SELECT leaf_segment_create('pk', $STEP)" >/dev/null
			col="id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('pk')"
			;;
		snowflake) col="id bigint PRIMARY KEY DEFAULT leaf_snowflake()" ;;
		snowflake3 | snowflake3c)
			local sb wb node="1 + g % 3"
			IFS='|' read -r sb wb <<<"$(q "$PORT" "SELECT sequence_bits, worker_bits FROM leaf_snowflake_layout()")"
			[ "$k" = snowflake3c ] && node=":node" pre='\set node 1 + :client_id % 3'
			col="id bigint PRIMARY KEY"
			cols="id, $cols"
			sel="(leaf_snowflake() & ~(((1::bigint << $wb) - 1) << $sb)) | (($node)::bigint << $sb), $sel"
			;;
		uuid) col="id uuid PRIMARY KEY DEFAULT gen_random_uuid()" ;;
		uuidv7) col="id uuid PRIMARY KEY DEFAULT uuidv7()" ;;
	esac
	q "$PORT" "CREATE TABLE t ($col, created timestamptz NOT NULL, payload text NOT NULL)"
	[ "$k" = bigserial_created ] && q "$PORT" "CREATE INDEX t_created ON t (created)"
	{
		[ -z "$pre" ] || printf '%s\n' "$pre"
		printf '%s\n' "INSERT INTO t ($cols) SELECT $sel FROM generate_series(1, $BATCH) AS g;"
	} >"$WORK/scripts/$k.sql"
	KEYDEF[$k]="$col"
	# the ID of snowflake3* comes with the INSERT ("|" escaped for the table)
	case $k in snowflake3*) KEYDEF[$k]="id bigint PRIMARY KEY\`, the INSERT gives \`${sel%%, now()*}" ;; esac
	[ "$k" = bigserial_created ] && KEYDEF[$k]="$col\`, and \`CREATE INDEX t_created ON t (created)"
	[ -z "$pre" ] || KEYDEF[$k]="${KEYDEF[$k]}\`, after pgbench's \`$pre"
	KEYDEF[$k]=${KEYDEF[$k]//|/\\|}
	return 0
}

# snowflake_ready: wait until the snowflake worker serves (it does at
# once with leaf.worker_id set by hand and no ZooKeeper)
snowflake_ready() {
	for _ in $(seq 1 300); do
		[ "$(q "$PORT" "SELECT ready FROM leaf_snowflake_status()")" = t ] && return 0
		sleep 0.1
	done
	die "snowflake mode did not become ready: $(q "$PORT" "SELECT not_ready_reason FROM leaf_snowflake_status()")"
}

# stats_sql: one row "heap|indexes|wal_lsn|wal_fpi|heap_hit|heap_read|
# idx_hit|idx_read|checkpoints" (cumulative) of the table t, its indexes
# all together (the primary key alone but for bigserial_created)
stats_sql() {
	local ck="(SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)"
	[ "$PGNUM" -ge 17 ] && ck="(SELECT num_timed + num_requested FROM pg_stat_checkpointer)"
	echo "SELECT pg_relation_size('t'),
	             (SELECT sum(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid = 't'::regclass),
	             pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0'), w.wal_fpi,
	             s.heap_blks_hit, s.heap_blks_read, s.idx_blks_hit, s.idx_blks_read, $ck
	        FROM pg_stat_wal w, pg_statio_user_tables s
	       WHERE s.relid = 't'::regclass"
}

# wait_clients: until pgbench's backends are gone, so that the statistics
# they report as they exit are in
wait_clients() {
	for _ in $(seq 1 100); do
		[ "$(q "$PORT" "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" = 0 ] && return 0
		sleep 0.05
	done
	log "pgbench's backends did not exit within 5 s; sampling anyway"
}

# cluster_cpu: CPU seconds of the running cluster so far: the postmaster's
# own and those of its children, living (from their /proc/PID/stat) or
# exited and reaped (the postmaster's cutime and cstime).  Other work on
# the machine moves this less than the throughput: through the caches
# the processes share, and locks held by a process that waits for a CPU.
cluster_cpu() {
	local pm
	pm=$(head -n 1 "$DATA/postmaster.pid")
	# processes that end meanwhile make cat fail
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pm="$pm" -v hz="$(getconf CLK_TCK)" '
		{
			pid = $1; sub(/^.*\) /, "")	# state ppid ... utime stime cutime cstime
			if (pid == pm) t += $12 + $13 + $14 + $15
			else if ($2 == pm) t += $12 + $13
		}
		END { printf "%.2f\n", t / hz }'
}

TSV=$WORK/pk.tsv
printf 'key\trows\tsecs\trows_per_s\theap_bytes\tidx_bytes\twal_bytes\twal_fpi\theap_hit\theap_read\tidx_hit\tidx_read\tcheckpoints\tload1\tcpu_s\n' >"$TSV"
declare -A KEYDEF LOADS ELAPSED EXTRA RANGE_INFO

# ---------------------------------------------------------------- time range

RTSV=$WORK/range.tsv
printf 'key\trun\texec_ms\tplan_ms\trows\thit\tread\tscan\n' >"$RTSV"

# range_where KEY T1 T2: the condition of the rows of [T1, T2) for KEY,
# nothing for a key that cannot find rows by time (or a leaf without
# leaf_snowflake_min_id)
range_where() {
	local k=$1 t1=$2 t2=$3
	case $k in
		bigserial_created) echo "created >= '$t1' AND created < '$t2'" ;;
		snowflake*)
			[ "$(q "$PORT" "SELECT to_regprocedure('leaf_snowflake_min_id(timestamptz)') IS NOT NULL")" = t ] &&
				echo "id >= leaf_snowflake_min_id('$t1') AND id < leaf_snowflake_min_id('$t2')"
			;;
		uuidv7)
			# the smallest UUIDv7 of an instant: its Unix time in ms (48
			# bits), version 7, variant 10, every other bit 0
			q "$PORT" "CREATE FUNCTION bench_uuidv7_min(ts timestamptz) RETURNS uuid
				LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
				RETURN (pg_catalog.lpad(pg_catalog.to_hex(pg_catalog.floor(EXTRACT(epoch FROM ts) * 1000)::bigint), 12, '0')
				        || '70008000000000000000')::uuid"
			echo "id >= bench_uuidv7_min('$t1') AND id < bench_uuidv7_min('$t2')"
			;;
	esac
	return 0
}

# run_range KEY: the time range after KEY's fill (see the top); a line of
# range.tsv per run, and RANGE_INFO[KEY] for the report
run_range() {
	local k=$1 first last span t1 t2 win by_created where i lo hi
	case $k in bigserial_created | snowflake* | uuidv7) ;; *) return 0 ;; esac
	# the rows of the window: ranks lo + 1 to hi by created, rounded to
	# whole statements (every row of one INSERT has the same created)
	lo=$((ROWS / 2 - ROWS / (48 * RANGE_DAYS)))
	hi=$((ROWS / 2 + ROWS / (48 * RANGE_DAYS)))
	IFS='|' read -r first last span t1 t2 <<<"$(q "$PORT" "
		WITH b AS (SELECT created, count(*) AS n FROM t GROUP BY created),
		     c AS (SELECT created, sum(n) OVER (ORDER BY created) AS upto FROM b)
		SELECT min(created), max(created), EXTRACT(epoch FROM max(created) - min(created)),
		       min(created) FILTER (WHERE upto > $lo), min(created) FILTER (WHERE upto > $hi)
		  FROM c")"
	where=$(range_where "$k" "$t1" "$t2")
	if [ -z "$where" ]; then
		case $k in snowflake*) NOTES+=("$k: no time range, this leaf has no leaf_snowflake_min_id()") ;; esac
		return 0
	fi
	win=$(q "$PORT" "SELECT round(EXTRACT(epoch FROM timestamptz '$t2' - timestamptz '$t1') * 1000, 1)")
	by_created=$(q "$PORT" "SELECT count(*) FROM t WHERE created >= '$t1' AND created < '$t2'")
	log "   $k: time range [$t1, $t2), $win ms of a fill of $span s, $by_created rows by created"
	q "$PORT" "ANALYZE t"
	q "$PORT" "CHECKPOINT"
	as_pg "$PGBIN/pg_ctl -D '$DATA' -l '$DATA/server.log' -m fast -w restart" >/dev/null
	for i in $(seq 0 "$RANGE_RUNS"); do
		echo "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT * FROM t WHERE $where;"
	done | qf "$PORT" >"$WORK/logs/$k.range.out"
	# a block per run: the top node's rows and buffers, the scans, the
	# planning and execution times
	awk -v k="$k" -v OFS='\t' '
		function num(s, key,   m) { return match(s, key "=[0-9.]+") ? substr(s, RSTART + length(key) + 1, RLENGTH - length(key) - 1) : 0 }
		!top { top = 1; rows = num($0, "actual rows"); hit = ""; scan = "" }
		/Buffers: shared/ && hit == "" && !planning { hit = num($0, "hit") + 0; read = num($0, "read") + 0 }
		/Scan/ { s = $0; sub(/^[ ->]*/, "", s); sub(/  \(.*/, "", s); scan = scan (scan == "" ? "" : "; ") s }
		/^Planning/ { planning = 1 }
		/^Planning Time:/ { pt = $3 }
		/^Execution Time:/ { print k, run++, $3, pt, rows + 0, hit + 0, read + 0, scan; top = 0; planning = 0 }
	' "$WORK/logs/$k.range.out" >>"$RTSV"
	[ "$(awk -v k="$k" '$1 == k' "$RTSV" | wc -l)" = $((RANGE_RUNS + 1)) ] ||
		die "$k: the time range gave no plan to read ($WORK/logs/$k.range.out)"
	RANGE_INFO[$k]="$first|$last|$span|$t1|$t2|$win|$by_created|$where"
}

# run_key KEY: a fresh cluster, BENCH_ROWS rows, a line of pk.tsv per
# sample
run_key() {
	local k=$1 i t0 tps secs rps rows base cur lb la txns
	lb=$(loadavg)
	start_cluster "$k"
	q "$PORT" "CREATE EXTENSION leaf"
	setup_key "$k"
	case $k in snowflake*) snowflake_ready ;; esac
	q "$PORT" "CHECKPOINT"
	q "$PORT" "SELECT pg_stat_reset()" >/dev/null
	base=$(q "$PORT" "$(stats_sql)")"|$(cluster_cpu)"
	log "== $k: port $PORT, load $lb"
	txns=$((SAMPLE / (CLIENTS * BATCH)))
	t0=$SECONDS
	for i in $(seq 1 "$NSAMPLES"); do
		if ! pgbench -n -M prepared -c "$CLIENTS" -j "$THREADS" -t "$txns" \
			-h "$WORK" -p "$PORT" -U postgres -f "$WORK/scripts/$k.sql" postgres >"$WORK/logs/$k.pgbench.out" 2>&1; then
			cat "$WORK/logs/$k.pgbench.out" >&2
			die "pgbench $k failed at sample $i"
		fi
		tps=$(awk '/^tps = / {print $3; exit}' "$WORK/logs/$k.pgbench.out")
		wait_clients
		cur=$(q "$PORT" "$(stats_sql)")"|$(cluster_cpu)"
		rows=$((i * SAMPLE))
		secs=$(awk -v r="$SAMPLE" -v t="$tps" -v b="$BATCH" 'BEGIN {printf "%.3f", r / (t * b)}')
		rps=$(awk -v t="$tps" -v b="$BATCH" 'BEGIN {printf "%.0f", t * b}')
		awk -F'|' -v k="$k" -v rows="$rows" -v secs="$secs" -v rps="$rps" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
			-v base="$base" -v OFS='\t' '
			BEGIN { split(base, b0, "|") }
			{ print k, rows, secs, rps, $1, $2, $3 - b0[3], $4 - b0[4],
				$5 - b0[5], $6 - b0[6], $7 - b0[7], $8 - b0[8], $9 - b0[9], l, $10 - b0[10] }' <<<"$cur" >>"$TSV"
		if [ $((i % 5)) = 0 ] || [ "$i" = "$NSAMPLES" ]; then
			log "   $k: $rows rows, $(tail -n 1 "$TSV" | cut -f4) rows/s in the last sample, $((SECONDS - t0)) s"
		fi
	done
	ELAPSED[$k]=$((SECONDS - t0))
	case $k in
		segment) EXTRA[$k]="step at the end $(q "$PORT" "SELECT step FROM leaf_segments WHERE biz_tag = 'pk' AND database = current_database()"), first ID $(q "$PORT" "SELECT min(id) FROM t"), last $(q "$PORT" "SELECT max(id) FROM t")" ;;
		snowflake3*) EXTRA[$k]="worker IDs in the table: $(q "$PORT" "SELECT string_agg(w || ': ' || n, ', ' ORDER BY w) FROM (SELECT (leaf_snowflake_decode(id)).worker_id AS w, count(*) AS n FROM t GROUP BY 1) x")" ;;
	esac
	[ "$(q "$PORT" "SELECT count(*) FROM t")" = "$ROWS" ] || die "$k: the table does not hold $ROWS rows"
	[ "$RANGE" = 1 ] && run_range "$k"
	stop_cluster
	la=$(loadavg)
	LOADS[$k]="$lb → $la"
	log "   $k done in ${ELAPSED[$k]} s, load $la"
}

log "work directory $WORK, $MODE mode, PostgreSQL $PGNUM, keys: $KEYS, load $LOAD_START"
# the version and settings, from a cluster that is started and stopped
start_cluster probe
PGVER=$(q "$PORT" "SELECT version()")
CHECKSUMS=$(q "$PORT" "SHOW data_checksums")
stop_cluster
bench_build_info

T0=$SECONDS
for k in $KEYS; do
	run_key "$k"
done
ELAPSED_ALL=$((SECONDS - T0))
LOAD_END=$(loadavg)
UPTIME_END=$(uptime)

# ---------------------------------------------------------------- report

REPORT=$WORK/report.md
: >"$REPORT"
out() { printf '%s\n' "$*" >>"$REPORT"; }

# mrows N: N rows in millions, as "30 M" or "1.5 M"
mrows() { awk -v n="$1" 'BEGIN {printf "%g M", n / 1e6}'; }

LASTROWS=$((NLAST * SAMPLE))
out "# leaf: the primary key at $(mrows "$ROWS") rows"
out ""
out "| item | value |"
out "|---|---|"
out "| command | \`$CMDLINE\` |"
out "| mode | **$MODE**: $(mrows "$ROWS") rows per key, a sample every $(mrows "$SAMPLE") |"
out "| date | $(date '+%Y-%m-%d %H:%M:%S %Z') |"
out "| host | $(nproc) vCPU $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GB RAM", $2 / 1048576}' /proc/meminfo) |"
out "| load average (1, 5, 15 min) | start $LOAD_START, end $LOAD_END |"
out "| uptime | start: \`${UPTIME_START# }\`; end: \`${UPTIME_END# }\` |"
out "| server | ${PGVER%% on *}, data_checksums $CHECKSUMS |"
out "| leaf | checkout $COMMIT ($DIRTY), installed leaf.so md5 $SO_SUM... ($SO_TIME) |"
out "| clusters | one per key, initdb -A trust -E UTF8 --locale=C.UTF-8; 127.0.0.1; shared_buffers=$SHARED_BUFFERS, max_wal_size=$MAX_WAL_SIZE, checkpoint_timeout=$CKPT_TIMEOUT, jit=off, shared_preload_libraries=leaf, leaf.worker_id=1; fsync, synchronous_commit, full_page_writes, autovacuum at their defaults |"
out "| load | \`pgbench -n -M prepared -c $CLIENTS -j $THREADS -t $((SAMPLE / (CLIENTS * BATCH)))\` per sample, one transaction \`INSERT INTO t ... SELECT ... FROM generate_series(1, $BATCH)\`; payload \`$PAYLOAD\` |"
out "| elapsed | ${SECONDS}s in all, ${ELAPSED_ALL}s for the keys |"
for n in "${NOTES[@]}"; do
	out "| note | $n |"
done
out ""
out "## Keys"
out ""
out "| key | column | load before → after | s | notes |"
out "|---|---|---|---|---|"
for k in $KEYS; do
	out "| $k | \`${KEYDEF[$k]}\` | ${LOADS[$k]} | ${ELAPSED[$k]} | ${EXTRA[$k]:-} |"
done
out ""
out "## Summary"
out ""
out "Throughput: rows over pgbench's time (connections left out). Last $(mrows "$LASTROWS"): the last $NLAST samples. Server CPU: of the cluster's processes (postmaster, backends, checkpointer, WAL writer, autovacuum ...; from /proc), which other work on the machine moves less than the throughput, but moves. WAL: from the WAL insert position; FPI: full-page images (pg_stat_wal). Index: all the table's indexes (bigserial_created: the primary key and t_created). Index reads: blocks of the index read from outside shared_buffers (the kernel's page cache or the disk) against all the index's block accesses, over the whole run and over the last $(mrows "$LASTROWS")."
out ""
out "| key | rows/s, all | rows/s, first $(mrows "$LASTROWS") | rows/s, last $(mrows "$LASTROWS") | last / bigserial | server CPU µs/row, last $(mrows "$LASTROWS") | / bigserial | table MB | index MB | WAL MB | WAL bytes/row | FPI | checkpoints | index reads, all | index reads, last $(mrows "$LASTROWS") |"
out "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
awk -F'\t' -v n="$NSAMPLES" -v nl="$NLAST" -v keys="$KEYS" '
	NR == 1 { next }
	{
		k = $1; i = ++cnt[k]; secs[k, i] = $3; rows = $2
		ih[k, i] = $11; ir[k, i] = $12; cpu[k, i] = $15
		if (i == n) { heap[k] = $5; idx[k] = $6; wal[k] = $7; fpi[k] = $8; ck[k] = $13; total[k] = rows }
	}
	function rate(k, a, b,   s, j) { s = 0; for (j = a; j <= b; j++) s += secs[k, j]; return (b - a + 1) * (total[k] / n) / s }
	# server CPU per row over the last nl samples, in microseconds
	function us(k) { return (cpu[k, n] - cpu[k, n - nl]) * 1e6 / (nl * total[k] / n) }
	function share(k, a,   h, r) { h = ih[k, n] - (a ? ih[k, a] : 0); r = ir[k, n] - (a ? ir[k, a] : 0); return (h + r) ? sprintf("%.1f%%", 100 * r / (h + r)) : "-" }
	END {
		m = split(keys, K, " ")
		if (cnt["bigserial"] == n) {
			ref = rate("bigserial", n - nl + 1, n)
			cref = us("bigserial")
		}
		for (x = 1; x <= m; x++) {
			k = K[x]
			if (cnt[k] != n) continue
			last = rate(k, n - nl + 1, n)
			printf "| %s | %.0f | %.0f | %.0f | %s | %.2f | %s | %.0f | %.0f | %.0f | %.0f | %d | %d | %s | %s |\n", k,
				rate(k, 1, n), rate(k, 1, nl), last, ref ? sprintf("%.3f", last / ref) : "-",
				us(k), cref ? sprintf("%.3f", us(k) / cref) : "-",
				heap[k] / 1048576, idx[k] / 1048576, wal[k] / 1048576, wal[k] / total[k], fpi[k], ck[k],
				share(k, 0), share(k, n - nl)
		}
	}' "$TSV" >>"$REPORT"
out ""

# every SAMPLES-th sample, or all: the rows of the table by key
sample_table() {
	local every=$1
	out "| key | rows | rows/s in the sample | table MB | index MB | WAL MB | FPI | heap hit | heap read | index hit | index read | checkpoints | server CPU s | load |"
	out "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	awk -F'\t' -v every="$every" -v sample="$SAMPLE" '
		NR == 1 { next }
		$1 != prev { prev = $1; ph = pr = pih = pir = 0; i = 0 }
		{
			i++
			if (i % every == 0)
				printf "| %s | %g M | %s | %.0f | %.0f | %.0f | %d | %d | %d | %d | %d | %d | %.1f | %s |\n", $1, $2 / 1e6, $4,
					$5 / 1048576, $6 / 1048576, $7 / 1048576, $8, $9 - ph, $10 - pr, $11 - pih, $12 - pir, $13, $15, $14
			if (i % every == 0) { ph = $9; pr = $10; pih = $11; pir = $12 }
		}' "$TSV" >>"$REPORT"
}
if [ ${#RANGE_INFO[@]} -gt 0 ]; then
	lo_all=$((ROWS / 2 - ROWS / (48 * RANGE_DAYS)))
	hi_all=$((ROWS / 2 + ROWS / (48 * RANGE_DAYS)))
	out "## Time range"
	out ""
	out "The rows one hour would hold in a table filled evenly over $RANGE_DAYS days, 1/$((24 * RANGE_DAYS)) of them: the window of \`created\` in the middle of the key's own fill, from the statement that holds the row of rank $((lo_all + 1)) by \`created\` to the one that holds the row of rank $((hi_all + 1)), that one excluded: $((hi_all - lo_all)) rows give or take a statement of $BATCH. (A window of 1/$((24 * RANGE_DAYS)) of the fill's duration would often fall in a pause of pgbench between samples.) After \`ANALYZE\`, \`CHECKPOINT\` and a restart (shared buffers empty, the kernel's page cache not dropped), \`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT * FROM t WHERE ...\` ran $((RANGE_RUNS + 1)) times in one session: the first is the cold run, the other $RANGE_RUNS the warm ones (median, and 95th percentile by nearest rank). Execution time, rows sent to no client. Throughput: of the fill, as above; indexes: all the table's, at the end."
	out ""
	out "| key | condition | rows/s, all | indexes MB | window ms | rows by created | rows returned | scan | cold ms | cold hit/read | warm median ms | warm p95 ms | warm hit/read (median) | planning ms (median) |"
	out "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for k in $KEYS; do
		[ -n "${RANGE_INFO[$k]:-}" ] || continue
		IFS='|' read -r _ _ _ _ _ win by_created where <<<"${RANGE_INFO[$k]}"
		fill=$(awk -F'\t' -v k="$k" '$1 == k { s += $3; r = $2; i = $6 } END { printf "%.0f | %.0f", r / s, i / 1048576 }' "$TSV")
		awk -F'\t' -v k="$k" -v fill="$fill" -v win="$win" -v bc="$by_created" -v where="$where" '
			function med(a, n,   i, j, t) {
				for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
				return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			}
			$1 != k { next }
			$2 == 0 { cold = $3; chit = $6; cread = $7; rows = $5; scan = $8; next }
			{ n++; e[n] = $3; e2[n] = $3; p[n] = $4; h[n] = $6; r[n] = $7; if ($5 != rows) rows = rows " to " $5 }
			END {
				m = med(e, n)
				p95 = e[int(0.95 * n + 0.999999)]
				printf "| %s | `%s` | %s | %s | %d | %s | %s | %.2f | %d/%d | %.2f | %.2f | %d/%d | %.2f |\n", k, where, fill, win, bc, rows, scan,
					cold, chit, cread, m, p95, med(h, n), med(r, n), med(p, n)
			}' "$RTSV" >>"$REPORT"
	done
	out ""
	out "| key | first created | last created | fill s | window from | window to |"
	out "|---|---|---|---|---|---|"
	for k in $KEYS; do
		[ -n "${RANGE_INFO[$k]:-}" ] || continue
		IFS='|' read -r first last span t1 t2 _ <<<"${RANGE_INFO[$k]}"
		out "| $k | $first | $last | $span | $t1 | $t2 |"
	done
	out ""
	cp "$RTSV" "$OUT_DIR/" 2>/dev/null || { mkdir -p "$OUT_DIR" && cp "$RTSV" "$OUT_DIR/"; }
fi
out "## Every $(mrows $((5 * SAMPLE))) rows"
out ""
out "Sizes, WAL, FPI, checkpoints and server CPU: at that point, from the start. Hits and reads: of the $(mrows $((5 * SAMPLE))) rows before it. Load: 1-minute load average."
out ""
sample_table 5
out ""
out "## Every sample ($(mrows "$SAMPLE") rows)"
out ""
out "Hits and reads: of the sample."
out ""
sample_table 1

# ---------------------------------------------------------------- picture

# the picture's data: a block per key (rows in M, rows/s, index MB), two
# blank lines between blocks, in the order of KEYS
DAT=$WORK/pk.dat
: >"$DAT"
for k in $KEYS; do
	printf '# %s\n' "$k" >>"$DAT"
	awk -F'\t' -v k="$k" '$1 == k {printf "%g\t%s\t%.1f\n", $2 / 1e6, $4, $6 / 1048576}' "$TSV" >>"$DAT"
	printf '\n\n' >>"$DAT"
done
GP=$WORK/leaf_pk_bench.gp
{
	echo "# gnuplot script of leaf_pk_bench.sh: run it in the directory of pk.dat"
	echo "set terminal pngcairo size 1100,900 font 'sans,10' noenhanced"
	echo "set output 'leaf_pk_bench.png'"
	echo "set multiplot layout 2,1 title 'Primary key: $CLIENTS clients inserting batches of $BATCH rows, ${PGVER%% on *}, shared_buffers $SHARED_BUFFERS'"
	echo "set grid"
	echo "set key outside right"
	echo "set xlabel 'rows in the table (millions)'"
	echo "set ylabel 'rows/s over the last $(mrows "$SAMPLE") rows'"
	echo "set yrange [0:*]"
	echo "set title 'Insert throughput'"
	printf "plot "
	i=0
	for k in $KEYS; do
		[ $i -gt 0 ] && printf ", "
		printf "'pk.dat' index %d using 1:2 with linespoints pt 7 ps 0.5 lw 2 title '%s'" "$i" "$k"
		i=$((i + 1))
	done
	echo
	echo "set ylabel 'MB'"
	echo "set title 'Size of the indexes of t (dashed: shared_buffers)'"
	printf "plot "
	i=0
	for k in $KEYS; do
		printf "'pk.dat' index %d using 1:3 with lines lw 2 title '%s', " "$i" "$k"
		i=$((i + 1))
	done
	echo "$SB_MB with lines dt 2 lc 'black' title 'shared_buffers'"
	echo "unset multiplot"
} >"$GP"

mkdir -p "$OUT_DIR" "$PNG_DIR"
cp "$TSV" "$DAT" "$GP" "$OUT_DIR/"
out ""
if command -v gnuplot >/dev/null && (cd "$OUT_DIR" && gnuplot leaf_pk_bench.gp 2>"$WORK/gnuplot.err"); then
	[ "$PNG_DIR" = "$OUT_DIR" ] || mv "$OUT_DIR/leaf_pk_bench.png" "$PNG_DIR/"
	out "Picture: \`$PNG_DIR/leaf_pk_bench.png\`."
elif command -v gnuplot >/dev/null; then
	log "gnuplot failed: $(head -3 "$WORK/gnuplot.err")"
	out "No picture: gnuplot failed."
else
	log "gnuplot not found (Debian package gnuplot-nox): no picture"
	out "No picture (no gnuplot here): \`cd $OUT_DIR && gnuplot leaf_pk_bench.gp\` draws it."
fi
cp "$REPORT" "$OUT"
cat "$OUT"
log "report written to $OUT"
