#!/bin/sh
#
# guard_names.sh SRCDIR: the function and operator names that leaf's SQL
# calls, for sql/guard.sql, which plants a decoy for each.  One name a
# line: "f NAME" for a word followed by "(", "o SYMBOL" for a run of
# operator characters.  Taken from the SQL files of src/ (comments left
# out: the PL/pgSQL bodies and the strings they EXECUTE are in them) and
# from the string literals of the C sources (the statements leaf runs
# through SPI).  More is found than is called (words of messages, format
# directives): sql/guard.sql keeps the names that are functions or
# operators of pg_catalog or of leaf.
#
src=${1:-.}/src
LC_ALL=C
export LC_ALL
{
	sed -e 's/--.*$//' "$src"/*.sql
	cat "$src"/*.c "$src"/*/*.c | grep -o '"\([^"\\]\|\\.\)*"'
} | awk '
{
	line = $0
	while (match(line, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
		w = substr(line, RSTART, RLENGTH - 1)
		sub(/[ \t]+$/, "", w)
		print "f " tolower(w)
		line = substr(line, RSTART + RLENGTH)
	}
	# LIKE and ILIKE are the operators ~~ and ~~* (IN, BETWEEN and IS
	# DISTINCT FROM are = and the comparisons, found as such anyway)
	if (toupper($0) ~ /[^A-Z_]LIKE[^A-Z_]/)
		print "o ~~"
	if (toupper($0) ~ /[^A-Z_]NOT LIKE[^A-Z_]/)
		print "o !~~"
	if (toupper($0) ~ /[^A-Z_]ILIKE[^A-Z_]/)
		print "o ~~*"
	line = $0
	while (match(line, /[-+*\/<>=~!@#%^&|?]+/)) {
		print "o " substr(line, RSTART, RLENGTH)
		line = substr(line, RSTART + RLENGTH)
	}
}' | sort -u
