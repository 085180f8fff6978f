#!/usr/bin/env bash
#
# test/failed_tests.sh DIR: the test files that failed in the last
# "make installcheck" run in the build tree DIR, one a line:
# sql/NAME.sql for pg_regress, test/t/NAME.pl for TAP.  Prints nothing
# when nothing failed.  ./install.sh test and test/majors.sh call it to
# name the failures at the end of a run.
#
# What it reads:
#   DIR/test/ff1_vectors.out   the FF1 known-answer test, run first
#   DIR/regression.out         pg_regress's summary, kept only when a file
#                              failed: "not ok 2 - segment" (16 and later,
#                              "+" instead of "-" in a parallel group) or
#                              "test segment ... FAILED" (15)
#   DIR/tmp_check/log/regress_log_NAME
#                              each TAP file's log.  PostgreSQL::Test::Utils
#                              puts a timestamp before every Test::More line
#                              ("[12:34:56.789](0.012s) not ok 3 - ..."), on
#                              15 as on 18, so the patterns allow for it.  A
#                              file that died or ran a different number of
#                              tests than planned shows no "not ok", but
#                              Test::More's "Looks like ..." diagnostics.
#
set -euo pipefail

dir=${1:?usage: test/failed_tests.sh DIR}
ts='(\[[0-9:.]+\]\([0-9.]+s\) )?'

{
	if [ -f "$dir/test/ff1_vectors.out" ] &&
		grep -q -E '^(not ok |Bail out!)' "$dir/test/ff1_vectors.out"; then
		echo test/ff1_vectors.c
	fi
	if [ -f "$dir/regression.out" ]; then
		sed -n -E 's/^not ok +[0-9]+ +[-+] +([a-z_0-9]+) .*/sql\/\1.sql/p' "$dir/regression.out"
		sed -n -E 's/^test +([a-z_0-9]+) +\.\.\. +FAILED.*/sql\/\1.sql/p' "$dir/regression.out"
	fi
	for f in "$dir"/tmp_check/log/regress_log_*; do
		[ -f "$f" ] || continue
		if grep -q -E "^${ts}not ok |^${ts}# Looks like (your test (exited|died)|you planned|you failed)" "$f"; then
			echo "test/t/${f##*/regress_log_}.pl"
		fi
	done
} | sort -u
