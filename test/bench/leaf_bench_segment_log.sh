#!/usr/bin/env bash
#
# leaf_bench_segment_log.sh: what recording each segment load in
# leaf_segment_log costs.  On a throwaway cluster, a tag of step 1 is
# discarded and called again N times in one session (each call then
# waits for a load of its own, and its preload makes a second one), with
# leaf.segment_log_retention at 30 days and at 0 (the record off), REPS
# times each, alternating, the server restarted before each run.  A load
# raises max_id by the step, 1, so the loads are the rise of max_id.
# Not part of the test suite.
#
# Run as root or as postgres, after "make install":
#
#   test/bench/leaf_bench_segment_log.sh
#
# Environment: PGBIN (default: pg_config --bindir, else
# /usr/lib/postgresql/15/bin), BENCH_PORT (default 55599), N (default
# 20000), REPS (default 3), PREFILL (rows already in leaf_segment_log for
# the tag, all kept by the retention; default 0), BENCH_FSYNC (fsync of
# the cluster, default on: each load's commit then waits for the disk,
# which off leaves out, to show what the record itself costs).
#
set -euo pipefail

if [ "$(id -u)" = 0 ]; then
	tmp=$(mktemp -d /tmp/leaf-bench-log.XXXXXX)
	chown postgres: "$tmp"
	cp "$0" "$tmp/bench.sh"
	chmod 755 "$tmp/bench.sh"
	exec runuser -u postgres -- env BENCH_DIR="$tmp" PGBIN="${PGBIN:-}" \
		BENCH_PORT="${BENCH_PORT:-}" N="${N:-}" REPS="${REPS:-}" \
		PREFILL="${PREFILL:-}" BENCH_FSYNC="${BENCH_FSYNC:-}" "$tmp/bench.sh"
fi

PGBIN=${PGBIN:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
PORT=${BENCH_PORT:-55599}
N=${N:-20000}
REPS=${REPS:-3}
PREFILL=${PREFILL:-0}
FSYNC=${BENCH_FSYNC:-on}
dir=${BENCH_DIR:-$(mktemp -d /tmp/leaf-bench-log.XXXXXX)}
data=$dir/data

"$PGBIN/initdb" -D "$data" -A trust >/dev/null
cat >>"$data/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'leaf'
leaf.warm_start = off
fsync = $FSYNC
CONF
"$PGBIN/pg_ctl" -D "$data" -l "$dir/log" -w start >/dev/null
trap '"$PGBIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true' EXIT
q() { "$PGBIN/psql" -h "$dir" -p "$PORT" -d postgres -XAtq -v ON_ERROR_STOP=1 -c "$1"; }

q "CREATE EXTENSION leaf"
q "SELECT leaf_segment_create('bench', 1)"
if [ "$PREFILL" -gt 0 ]; then
	q "INSERT INTO leaf_segment_log
	   SELECT 'bench', -g * 10, -g * 10 + 9, now() - g * interval '1 ms', 'prefill/x', NULL
	     FROM generate_series(1, $PREFILL) g"
fi

echo "N=$N, fsync = $FSYNC, $(nproc) cores"
echo
echo "| record | run | loads | seconds | loads/s | rows written |"
echo "|---|---|---|---|---|---|"
for rep in $(seq 1 "$REPS"); do
	for retention in 30d 0; do
		q "ALTER SYSTEM SET leaf.segment_log_retention = '$retention'"
		"$PGBIN/pg_ctl" -D "$data" -l "$dir/log" -m fast -w restart >/dev/null
		q "SELECT leaf_segment_nextval('bench')" >/dev/null
		before=$(q "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'bench'")
		rows_before=$(q "SELECT count(*) FROM leaf_segment_log")
		t0=$(date +%s.%N)
		q "DO \$\$BEGIN FOR i IN 1..$N LOOP
		     PERFORM leaf_segment_discard('bench');
		     PERFORM leaf_segment_nextval('bench');
		   END LOOP; END\$\$"
		t1=$(date +%s.%N)
		after=$(q "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'bench'")
		rows_after=$(q "SELECT count(*) FROM leaf_segment_log")
		awk -v r="$retention" -v rep="$rep" -v l=$((after - before)) \
			-v t0="$t0" -v t1="$t1" -v w=$((rows_after - rows_before)) \
			'BEGIN { s = t1 - t0; printf "| %s | %d | %d | %.2f | %.0f | %d |\n",
			  (r == "0" ? "off" : "on (" r ")"), rep, l, s, l / s, w }'
	done
done
