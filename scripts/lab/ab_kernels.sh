#!/bin/sh
# The kernel benchmark (hipress-bench --kernels: every compressor's encode
# and decode on 64 MiB, one process), old build against new:
#
#   scripts/lab/ab_kernels.sh OLD_BUILD NEW_BUILD [OUT_DIR] [ROUNDS]
#
# 1. Time: ROUNDS (default 5) rounds, each the old build's run then the new
#    one's, each build's own hipress-bench and libhipress.so; per compressor
#    and op the median over the rounds of GB/s and of the ratio to memcpy
#    (timed by the tool in the same repetition, which cancels most of the
#    machine's load). OUT_DIR/kernels-runs.csv (every run),
#    OUT_DIR/kernels-time.csv (medians, new / old).
# 2. Instructions (CALLGRIND=0 skips it): one run of each build under
#    callgrind; per encode and decode function the inclusive instructions per
#    call, the tool's calls through the compressor table (8 a function: a
#    warm-up and 7 timed). They do not depend on the load.
#    OUT_DIR/kernels-instr.csv.
# TIME=0 skips step 1.
set -eu
[ $# -ge 2 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
out=${3:-doc/measured/refactor-ab}
rounds=${4:-5}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
for b in "$old" "$new"; do
    [ -x "$b/.libs/hipress-bench" ] && [ -f "$b/.libs/libhipress.so" ] ||
        { echo "ab_kernels: $b: no .libs/hipress-bench or .libs/libhipress.so (build it first)" >&2; exit 1; }
done
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench() { LD_LIBRARY_PATH="$1/.libs" nice -n 10 "$1/.libs/hipress-bench" --kernels --csv; }

if [ "${TIME:-1}" != 0 ]; then
echo "round,build,compressor,op,bytes,gbps,memcpy_gbps,ratio_to_memcpy,wire_ratio" > "$out/kernels-runs.csv"
i=1
while [ $i -le "$rounds" ]; do
    for side in old new; do
        if [ $side = old ]; then b=$old; else b=$new; fi
        bench "$b" | awk -v p="$i,$side" -F, '/^[a-z]/ && $1 != "compressor" { print p "," $0 }' >> "$out/kernels-runs.csv"
    done
    echo "  round $i done" >&2
    i=$((i + 1))
done
# medians per build, compressor and op; the compressors both builds have
$py - "$out/kernels-runs.csv" > "$out/kernels-time.csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = []
d = {}
for r in rows:
    k = (r["compressor"], r["op"])
    if k not in keys:
        keys.append(k)
    d.setdefault((r["build"],) + k, []).append(r)
print("compressor,op,old_gbps,new_gbps,new_over_old,old_ratio,new_ratio,ratio_new_over_old,rounds")
for k in keys:
    o, n = d.get(("old",) + k), d.get(("new",) + k)
    if not o or not n:
        continue
    med = lambda rs, f: statistics.median(float(r[f]) for r in rs)
    og, ng, orr, nr = med(o, "gbps"), med(n, "gbps"), med(o, "ratio_to_memcpy"), med(n, "ratio_to_memcpy")
    print(f"{k[0]},{k[1]},{og:.3f},{ng:.3f},{ng / og:.3f},{orr:.3f},{nr:.3f},{nr / orr:.3f},{min(len(o), len(n))}")
EOF
column -s, -t < "$out/kernels-time.csv"
fi

[ "${CALLGRIND:-1}" = 0 ] && exit 0
command -v valgrind >/dev/null || { echo "ab_kernels: valgrind not found" >&2; exit 1; }
for side in old new; do
    if [ $side = old ]; then b=$old; else b=$new; fi
    LD_LIBRARY_PATH="$b/.libs" nice -n 10 valgrind -q --tool=callgrind --callgrind-out-file="$tmp/cg.$side" \
        --compress-strings=no --compress-pos=no "$b/.libs/hipress-bench" --kernels --csv > /dev/null
    $py "$here/cg_objects.py" --calls-from hipress-bench "$tmp/cg.$side" |
        awk '{ sub("calls=", "", $4); sub("per_call=", "", $5); print $3 "," $4 "," $5 }' > "$tmp/k.$side"
done
# functions called 8 times (the encodes and decodes), matched by name
awk -F, 'NR == FNR { if ($2 == 8) o[$1] = $3; next }
    $2 == 8 && ($1 in o) { printf "%s,%s,%s,%.4f\n", $1, o[$1], $3, $3 / o[$1] }
    BEGIN { print "function,old_instr_per_call,new_instr_per_call,new_over_old" }' \
    "$tmp/k.old" "$tmp/k.new" > "$out/kernels-instr.csv"
# names only one build has (a rename would hide a kernel from the table)
awk -F, 'NR == FNR { if ($2 == 8) o[$1] = 1; next } $2 == 8 && !($1 in o) { print "ab_kernels: only in the new build: " $1 }' \
    "$tmp/k.old" "$tmp/k.new" >&2
awk -F, 'NR == FNR { if ($2 == 8) n[$1] = 1; next } $2 == 8 && !($1 in n) { print "ab_kernels: only in the old build: " $1 }' \
    "$tmp/k.new" "$tmp/k.old" >&2
column -s, -t < "$out/kernels-instr.csv"
