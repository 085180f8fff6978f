#!/usr/bin/env python3
#
# leaf_bench_compare.py: the reports of test/bench/leaf_bench.sh for
# several PostgreSQL majors, side by side (sections 1 and 2).
#
#   test/bench/leaf_bench_compare.py 15=bench-15.md 17=bench-17.md ...
#
# For leaf's segment mode (the step-1000 tag) and snowflake mode it prints
# their ratios to the floor (clock_timestamp()), to the default nextval, to
# gen_random_uuid() and, where the server has it, to uuidv7(): in one
# session the ratio of the net cost per ID (lower is cheaper), in pgbench
# the ratio of the throughput at the same client count (higher is faster).
# Each ratio of a later major is followed by its change against the first
# major named; a change for the worse of more than 10% is in bold.
# test/majors.sh bench runs the benchmark in each chroot and then this.

import sys

SEG = "leaf_segment_nextval('bench') step 1000"
SF = "leaf_snowflake()"
FLOOR = "clock_timestamp() (floor)"
NEXTVAL = "nextval('s') default"
UUID4 = "gen_random_uuid()"
UUID7 = "uuidv7()"
OTHERS = [FLOOR, NEXTVAL, UUID4, UUID7]
LEAF = [("segment", SEG), ("snowflake", SF)]


def cells(line):
    return [c.strip() for c in line.strip().strip('|').split('|')]


def parse(path):
    """Section 1: label -> net ns/ID; section 2: (label, clients) -> tps."""
    one, two, reps = {}, {}, {}
    section = None
    with open(path) as f:
        for line in f:
            if line.startswith('## '):
                section = line[3:5]
                continue
            if line.startswith('|') and cells(line)[0] == 'parameters':
                for kv in cells(line)[1].split(','):
                    k, _, v = kv.strip().partition('=')
                    reps[k] = v
            if not line.startswith('| `'):
                continue
            c = cells(line)
            label = c[0].strip('`')
            if section == '1.' and len(c) == 6:
                one[label] = float(c[4])
            elif section == '2.' and len(c) == 13:
                two[(label, int(c[1]))] = float(c[2])
    return one, two, reps


def change(r, r0, higher_is_better):
    """' (+x%)' against the first major, bold if worse by more than 10%."""
    if r0 is None or r0 == 0:
        return ''
    d = r / r0 - 1
    worse = -d if higher_is_better else d
    text = ' (%+.0f%%)' % (100 * d)
    return ' **%s**' % text.strip() if worse > 0.10 else text


def table(majors, title, rows):
    print(title)
    print()
    print('| ratio | ' + ' | '.join(m for m, _ in majors) + ' |')
    print('|---|' + '---|' * len(majors))
    for name, get, higher in rows:
        vals, first = [], None
        for i, (m, rep) in enumerate(majors):
            r = get(rep)
            if r is None:
                vals.append('-')
                continue
            if first is None:
                first = r
                vals.append('%.2f' % r)
            else:
                vals.append('%.2f%s' % (r, change(r, first, higher)))
        print('| %s | %s |' % (name, ' | '.join(vals)))
    print()


def main(args):
    majors = []
    for a in args:
        m, _, path = a.partition('=')
        if not path:
            sys.exit('usage: leaf_bench_compare.py MAJOR=REPORT.md ...')
        majors.append((m, parse(path)))

    def net_ratio(a, b):
        def get(rep):
            one = rep[0]
            if a in one and b in one and one[b] > 0:
                return one[a] / one[b]
            return None
        return get

    def tps_ratio(a, b, c):
        def get(rep):
            two = rep[1]
            if (a, c) in two and (b, c) in two and two[(b, c)] > 0:
                return two[(a, c)] / two[(b, c)]
            return None
        return get

    print('Reports: ' + ', '.join(
        '%s (%s)' % (m, ', '.join('%s=%s' % (k, rep[2][k]) for k in ('N', 'REPS', 'PGBENCH_REPS', 'T')
                                 if k in rep[2]))
        for m, rep in majors))
    print()
    rows = [('%s / `%s`' % (w, o), net_ratio(l, o), False) for w, l in LEAF for o in OTHERS]
    table(majors, '**One session**, net cost per ID relative to (lower is cheaper):', rows)
    for c in (2, 8):
        rows = [('%s / `%s`' % (w, o), tps_ratio(l, o, c), True) for w, l in LEAF for o in OTHERS]
        table(majors, '**pgbench -c %d**, tps relative to (higher is faster):' % c, rows)

    print('Net ns per ID (one session) and tps (pgbench), as the reports have them:')
    print()
    print('| row | ' + ' | '.join(m for m, _ in majors) + ' |')
    print('|---|' + '---|' * len(majors))
    for lab in [FLOOR, NEXTVAL, UUID4, UUID7, SEG, SF]:
        print('| `%s` ns/ID net | %s |' % (lab, ' | '.join(
            '%.0f' % rep[0][lab] if lab in rep[0] else '-' for _, rep in majors)))
    for c in (2, 8):
        for lab in [FLOOR, NEXTVAL, UUID4, UUID7, SEG, SF]:
            print('| `%s` tps -c %d | %s |' % (lab, c, ' | '.join(
                '%.0f' % rep[1][(lab, c)] if (lab, c) in rep[1] else '-' for _, rep in majors)))


if __name__ == '__main__':
    main(sys.argv[1:])
