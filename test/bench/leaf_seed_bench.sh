#!/usr/bin/env bash
#
# leaf_seed_bench.sh: the two measurements the segment design rests on,
# one after the other, with one report: the tail latency at a fixed rate
# with a slow, jittery allocation database, with and without the double
# buffer, and cold starts (leaf_tp999.sh); and the primary key of a table
# grown to 30 million rows (leaf_pk_bench.sh).  Not part of the test suite.
#
# Run as root or as postgres, after "make install":
#
#   test/bench/leaf_seed_bench.sh                  both, in full (about
#                                                  20 + 15 minutes a major)
#   BENCH_QUICK=1 test/bench/leaf_seed_bench.sh    quick: the floor, local,
#                                                  the jittery network with
#                                                  and without the double
#                                                  buffer and a cold start,
#                                                  for 10 s each; the
#                                                  primary key at 1.5 M rows
#                                                  for bigserial, leaf and
#                                                  the random UUID
#
# Each script starts its own throwaway clusters (and the delaying proxy)
# on free loopback ports and removes them on exit, failed or not; see the
# comment at the top of each for its cases and settings.  Everything in
# the environment is passed on to both (PGBIN, BENCH_QUICK, BENCH_CASES,
# BENCH_KEYS, ...).
#
# Environment of this script:
#   BENCH_OUT_DIR   where the reports go (default ./bench-out/seed):
#                   seed.md (this run: machine, load, commit, and the two
#                   reports one after the other), tp999/ and pk/ with each
#                   script's own files
#   BENCH_COMMIT    the commit to name, for a copy without .git
#
set -euo pipefail

if [ -z "${PGBIN:-}" ]; then
	PGBIN=$(pg_config --bindir 2>/dev/null || true)
	[ -x "$PGBIN/postgres" ] || PGBIN=/usr/lib/postgresql/15/bin
fi
export PGBIN
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=leaf_bench_lib.sh
. "$here/leaf_bench_lib.sh"
bench_check

OUT_DIR=${BENCH_OUT_DIR:-./bench-out/seed}
mkdir -p "$OUT_DIR/tp999" "$OUT_DIR/pk"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
# the scripts run partly as postgres, which writes their reports
[ "$me" = root ] && chown postgres "$OUT_DIR/tp999" "$OUT_DIR/pk"
COMMIT=${BENCH_COMMIT:-$(git -C "$here" -c safe.directory='*' rev-parse --short HEAD 2>/dev/null || echo unknown)}
export BENCH_COMMIT=$COMMIT

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	MODE=quick
	tp_cases=${BENCH_CASES:-floor local jitter_pre jitter_off cold_local_immediate}
	pk_keys=${BENCH_KEYS:-bigserial segment snowflake uuid}
else
	MODE=full
	tp_cases=${BENCH_CASES:-}
	pk_keys=${BENCH_KEYS:-}
fi

started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
load_start=$(loadavg)
t0=$SECONDS

log "leaf_tp999.sh ($MODE)"
BENCH_CASES=$tp_cases BENCH_OUT_DIR=$OUT_DIR/tp999 "$here/leaf_tp999.sh"
t1=$SECONDS
log "leaf_pk_bench.sh ($MODE)"
BENCH_KEYS=$pk_keys BENCH_OUT=$OUT_DIR/pk/pk.md BENCH_PNG_DIR=$OUT_DIR/pk "$here/leaf_pk_bench.sh"
t2=$SECONDS

{
	echo "# leaf: TP999 at a fixed rate, cold starts, and the primary key at scale"
	echo
	echo "- run: $MODE, started $started, $((t2 - t0)) s (TP999 $((t1 - t0)) s, primary key $((t2 - t1)) s)"
	echo "- commit: $COMMIT"
	echo "- server: $("$PGBIN/postgres" --version)"
	echo "- machine: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GB", $2 / 1048576}' /proc/meminfo) of memory"
	echo "- load average (1, 5, 15 min): $load_start at the start, $(loadavg) at the end"
	echo
	# each report's own title becomes a section of this one
	sed '1s/^# /## /; 2,$s/^#/##/' "$OUT_DIR/tp999/tp999.md"
	echo
	sed '1s/^# /## /; 2,$s/^#/##/' "$OUT_DIR/pk/pk.md"
} >"$OUT_DIR/seed.md"
log "report: $OUT_DIR/seed.md"
