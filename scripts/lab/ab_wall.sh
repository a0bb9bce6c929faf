#!/bin/sh
# Wall-clock time per compressed MPI_Allreduce, old build against new, on
# loopback: the two builds alternate case by case and round by round, so
# whatever else loads the machine falls on both alike.
#
#   scripts/lab/ab_wall.sh OLD_BUILD NEW_BUILD [OUT_DIR]
#
# For every round (ROUNDS, default 7), compressor in COMPS and algorithm in
# ALGOS, the old build's hipress-bench under its own libhipress.so, then the
# new one's, NP ranks (default 2: one per core here), the plan fixed
# (HIPRESS_ALGO and -a, HIPRESS_PARTITION_BYTES=256K), sizes MINB to MAXB,
# -n ITERS -w 2 (a row's time is the median of its ITERS calls).  Writes
# OUT_DIR/runs.csv (every row, with side and round) and OUT_DIR/summary.csv
# (per case: the median over the rounds of each side, new / old, and the
# ratio's spread: the 25th and 75th percentile of the per-round ratios), and
# prints the summary.  On a 2-core machine the codecs of both ranks share
# the cores: the figures bound the library's own cost, not a network's.
set -eu
[ $# -ge 2 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
out=${3:-doc/measured/driver-ab/wall}
ROUNDS=${ROUNDS:-7}
COMPS=${COMPS:-"onebit fp16 tbq"}
ALGOS=${ALGOS:-"ring ps allgather"}
NP=${NP:-2}
MINB=${MINB:-4M}
MAXB=${MAXB:-16M}
ITERS=${ITERS:-5}
mkdir -p "$out"
runs="$out/runs.csv"
echo "side,round,bytes,compressor,algo,ranks,time_us" >"$runs"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for c in $COMPS; do
        for a in $ALGOS; do
            for side in old new; do
                eval b=\$$side
                mpirun --allow-run-as-root --oversubscribe -np "$NP" \
                    -x LD_PRELOAD="$b/.libs/libhipress.so" -x HIPRESS_ALGO="$a" \
                    -x HIPRESS_PARTITION_BYTES=256K \
                    "$b/hipress-bench" -b "$MINB" -e "$MAXB" -n "$ITERS" -w 2 -c "$c" -a "$a" --csv 2>/dev/null |
                    awk -F, -v s="$side" -v r="$r" '$1 ~ /^[0-9]+$/ { print s "," r "," $1 "," $4 "," $5 "," $6 "," $7 }' >>"$runs"
            done
        done
    done
    r=$((r + 1))
done
python3 - "$runs" "$out/summary.csv" <<'EOF'
import csv, statistics, sys
from collections import defaultdict
t = defaultdict(dict)
for row in csv.DictReader(open(sys.argv[1])):
    key = (int(row["bytes"]), row["compressor"], row["algo"], row["ranks"])
    t[key].setdefault(row["side"], {})[int(row["round"])] = float(row["time_us"])
def q(xs, p):
    xs = sorted(xs)
    i = p * (len(xs) - 1)
    lo = int(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)
with open(sys.argv[2], "w") as f:
    w = csv.writer(f)
    w.writerow(["bytes", "compressor", "algo", "ranks", "old_us", "new_us", "new_over_old", "ratio_p25", "ratio_p75", "rounds"])
    for key in sorted(t):
        o, n = t[key].get("old", {}), t[key].get("new", {})
        rounds = sorted(set(o) & set(n))
        if not rounds:
            continue
        ratios = [n[i] / o[i] for i in rounds]
        mo = statistics.median(o[i] for i in rounds)
        mn = statistics.median(n[i] for i in rounds)
        w.writerow([*key, f"{mo:.1f}", f"{mn:.1f}", f"{mn / mo:.3f}", f"{q(ratios, .25):.3f}", f"{q(ratios, .75):.3f}", len(rounds)])
print(open(sys.argv[2]).read(), end="")
import math
r = [float(x["new_over_old"]) for x in csv.DictReader(open(sys.argv[2]))]
print(f"# {len(r)} cases: new / old geometric mean {math.exp(sum(map(math.log, r)) / len(r)):.3f}, from {min(r):.3f} to {max(r):.3f}")
EOF
