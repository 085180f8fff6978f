#!/usr/bin/env bash
#
# leaf_adopt_lock.sh: how long leaf_adopt and leaf_unadopt hold up inserts
# into a big table, with a primary key on the column and without an index.
# Not part of the test suite.  Run as root or as postgres, after "make
# install", on a throwaway cluster it creates and removes.
#
#   test/bench/leaf_adopt_lock.sh
#
# For each table (ROWS rows of a bigserial column, about 45 bytes a row):
# CLIENTS pgbench clients insert into it for 20 seconds; at 5 s the
# column is adopted, at 10 s moved back, at 15 s adopted again.  Reported:
# how long each call took, from the start of its statement to the end of
# its commit (the lock is taken inside it and held to the commit), and,
# from pgbench's per-transaction log, the inserts that were under way
# meanwhile and the longest of them, beside the longest insert of the 4
# seconds before the first call.
#
# Environment:
#   PGBIN       PostgreSQL binaries (default: pg_config --bindir, else
#               /usr/lib/postgresql/15/bin)
#   ROWS        rows of each table (default 10000000)
#   CLIENTS     inserting clients (default 4)
#   CASES       "pk noindex" (default): with a primary key on the column,
#               and with no index at all
#   BENCH_PORT  port of the cluster (default 55519)
#
set -euo pipefail

if [ -z "${PGBIN:-}" ]; then
	PGBIN=$(pg_config --bindir 2>/dev/null || true)
	[ -x "$PGBIN/postgres" ] || PGBIN=/usr/lib/postgresql/15/bin
fi
PATH=$PGBIN:$PATH
ROWS=${ROWS:-10000000}
CLIENTS=${CLIENTS:-4}
CASES=${CASES:-pk noindex}
PORT=${BENCH_PORT:-55519}

if [ "$(id -u)" = 0 ]; then
	exec su postgres -s /bin/bash -c "PGBIN=$PGBIN ROWS=$ROWS CLIENTS=$CLIENTS CASES='$CASES' BENCH_PORT=$PORT $(readlink -f "$0")"
fi

dir=$(mktemp -d /tmp/leaf_adopt_lock.XXXXXX)
trap 'pg_ctl -D "$dir/data" -m fast stop >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
initdb -D "$dir/data" -A trust >/dev/null
cat >>"$dir/data/postgresql.conf" <<EOF
shared_preload_libraries = 'leaf'
port = $PORT
unix_socket_directories = '$dir'
listen_addresses = ''
max_wal_size = '8GB'
EOF
pg_ctl -D "$dir/data" -l "$dir/log" -w start >/dev/null
export PGHOST=$dir PGPORT=$PORT PGDATABASE=postgres
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$@"; }
psql -c 'CREATE EXTENSION leaf'

echo "PostgreSQL $(postgres --version | awk '{print $3}'), $ROWS rows, $CLIENTS inserting clients, $(nproc) CPUs"

# a step in autocommit: "start end ms", the start of its statement and
# the moment psql had the answer after the commit (epoch seconds), and the
# time between them: an upper bound of how long the lock was held (it
# also holds the wait for the lock, and the checks before it)
step() {
	local start end
	start=$(psql -At -c "SELECT ($1) IS NOT NULL, extract(epoch FROM statement_timestamp())" | cut -d'|' -f2)
	end=$(date +%s.%N)
	awk -v s="$start" -v e="$end" 'BEGIN { printf "%.6f %.6f %.1f\n", s, e, (e - s) * 1000 }'
}

# the inserts of the run that were under way during [start, end]: how
# many, and the longest (pgbench's log: latency in us in field 3, end of
# the transaction in fields 5 and 6)
in_flight() {
	cat "$dir"/bench.* | awk -v s="$1" -v e="$2" '
		{ end = $5 + $6 / 1e6; begin = end - $3 / 1e6
		  if (end >= s && begin <= e) { n++; l = $3 / 1000; if (l > max) max = l } }
		END { printf "%d inserts under way, the longest %.1f ms", n, max }'
}

for c in $CASES; do
	t=t_$c
	t0=$SECONDS
	psql -c "CREATE TABLE $t (id bigserial, pid int NOT NULL, pad text)" \
		-c "INSERT INTO $t (id, pid, pad) SELECT g, 0, 'padding to about 45 bytes' FROM generate_series(1, $ROWS) g" \
		-c "SELECT setval('${t}_id_seq', $ROWS)" >/dev/null
	[ "$c" = pk ] && psql -c "ALTER TABLE $t ADD PRIMARY KEY (id)"
	psql -c "VACUUM ANALYZE $t"
	echo "$t: loaded in $((SECONDS - t0)) s ($(psql -At -c "SELECT pg_size_pretty(pg_total_relation_size('$t'))"))"
	rm -f "$dir"/bench.*
	echo "INSERT INTO $t (pid) VALUES (pg_backend_pid());" >"$dir/insert.sql"
	pgbench -n -c "$CLIENTS" -j 2 -T 20 -f "$dir/insert.sql" -l --log-prefix "$dir/bench" >"$dir/pgbench.out" 2>&1 &
	bench=$!
	t_start=$(date +%s.%N)
	sleep 5
	read -r a1s a1e a1 <<<"$(step "SELECT leaf_adopt('$t', 'id')")"
	sleep 5
	read -r u1s u1e u1 <<<"$(step "SELECT leaf_unadopt('$t', 'id')")"
	sleep 5
	read -r a2s a2e a2 <<<"$(step "SELECT leaf_adopt('$t', 'id')")"
	wait $bench || { cat "$dir/pgbench.out"; exit 1; }
	echo "$t: before the first step (4 s): $(in_flight "$t_start" "$(awk -v x="$a1s" 'BEGIN { printf "%.6f", x - 1 }')")"
	echo "$t: leaf_adopt $a1 ms to the end of its commit; $(in_flight "$a1s" "$a1e")"
	echo "$t: leaf_unadopt $u1 ms; $(in_flight "$u1s" "$u1e")"
	echo "$t: leaf_adopt again $a2 ms; $(in_flight "$a2s" "$a2e")"
	cat "$dir"/bench.* | awk -v t="$t" '
		{ n++; l = $3 / 1000; if (l > max) max = l; if (l > 10) slow++ }
		END { printf "%s: the whole run: %d inserts, the longest %.1f ms, %d slower than 10 ms\n", t, n, max, slow }'
	grep -E 'number of failed|tps' "$dir/pgbench.out" | sed "s/^/$t: /"
	psql -At -c "SELECT '$t: ' || count(*) || ' rows, ' || count(DISTINCT id) || ' distinct IDs' FROM $t"
	psql -c "DROP TABLE $t"
done
