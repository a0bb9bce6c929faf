#!/bin/sh
# What pass-through costs: instructions per 8-byte integer MPI_Allreduce under
# the preload minus without it (callgrind, np 1, two loop lengths so start-up
# cancels out), and the ratio of median call times at 4 ranks.
#   scripts/lab/bench_passthrough.sh [BUILD_DIR]
set -eu
b=$(cd "${1:-_build}" && pwd)
prog="$b/pt_loop"
lib="$b/.libs/libhipress.so"
[ -x "$prog" ] && [ -f "$lib" ] || { echo "build first: make -C $b" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
supp=/usr/share/openmpi/openmpi-valgrind.supp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

instr() { # $1 = preload or "", $2 = iterations
    out="$tmp/cg.$$.$2"
    if [ -n "$1" ]; then
        LD_PRELOAD="$1" valgrind --tool=callgrind --callgrind-out-file="$out" --suppressions=$supp "$prog" "$2" >/dev/null 2>&1
    else
        valgrind --tool=callgrind --callgrind-out-file="$out" --suppressions=$supp "$prog" "$2" >/dev/null 2>&1
    fi
    callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
    rm -f "$out"
}

lo=1000; hi=21000
p0=$(instr "" $lo); p1=$(instr "" $hi)
h0=$(instr "$lib" $lo); h1=$(instr "$lib" $hi)
plain=$(( (p1 - p0) / (hi - lo) ))
pre=$(( (h1 - h0) / (hi - lo) ))
echo "instructions per call, np 1: plain $plain, preloaded $pre, overhead $((pre - plain))"

echo "4 ranks, median us per call (5 alternating runs of 9 blocks x 20000 calls):"
for i in 1 2 3 4 5; do
    a=$(mpirun --oversubscribe -np 4 "$prog" 20000 9 | awk '{print $1}')
    c=$(mpirun --oversubscribe -np 4 -x LD_PRELOAD="$lib" "$prog" 20000 9 | awk '{print $1}')
    echo "$a $c"
done > "$tmp/times"
awk '{print "  plain", $1, " preloaded", $2}' "$tmp/times"
sort -n -k1 "$tmp/times" | awk 'NR==3 {print $1}' > "$tmp/m1"
sort -n -k2 "$tmp/times" | awk 'NR==3 {print $2}' > "$tmp/m2"
awk -v a="$(cat "$tmp/m1")" -v c="$(cat "$tmp/m2")" 'BEGIN {printf "ratio of medians (preloaded / plain): %.3f\n", c / a}'
