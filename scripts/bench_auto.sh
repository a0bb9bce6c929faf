#!/bin/sh
# Does HIPRESS_ALGO=auto pick well?  Under the emulated network, runs
# hipress-bench for every fixed algorithm and for auto (sizes 4 KiB to 64 MiB,
# 4 ranks), then compares auto against the better of plain PMPI_Allreduce and
# the best fixed algorithm at each size (scripts/auto_report.py).
#   scripts/bench_auto.sh [RATE] [COMPRESSOR] [OUTDIR]      (defaults: 1gbit onebit out/auto)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
rate=${1:-1gbit}; comp=${2:-onebit}; out=${3:-$top/out/auto}
b=${HP_BUILD:-$top/_build}
iters=${HP_ITERS:-5}
mkdir -p "$out"
for a in ring ps tree allgather auto; do
    echo "bench_auto: $comp $a at $rate" >&2
    sh "$top/scripts/netem.sh" "$rate" -- mpirun --oversubscribe -np 4 "$b/hipress-bench" \
        -b 4K -e 64M -f 4 -n "$iters" -w 2 -c "$comp" -a "$a" --csv > "$out/$comp-$a-$rate.csv"
done
/usr/bin/python3 "$top/scripts/auto_report.py" "$out"/$comp-*-"$rate".csv
