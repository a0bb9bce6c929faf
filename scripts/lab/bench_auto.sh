#!/bin/sh
# Does HIPRESS_ALGO=auto pick well?  Under the emulated network, runs
# hipress-bench for every fixed algorithm and for auto (sizes 4 KiB to 64 MiB,
# 4 ranks), then compares auto against the better of plain PMPI_Allreduce and
# the best fixed algorithm at each size (scripts/lab/auto_report.py).  Sizes up to
# 1 MiB are cheap and noisy: five runs each, the report takes the median.
#   scripts/lab/bench_auto.sh [RATE] [COMPRESSOR] [OUTDIR]      (defaults: 1gbit onebit out/auto)
# Writes OUTDIR/algo-COMPRESSOR-ALGO-RATE.csv and OUTDIR/auto-COMPRESSOR-RATE.txt.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
rate=${1:-1gbit}; comp=${2:-onebit}; out=${3:-$top/out/auto}
b=${HP_BUILD:-$top/_build}
iters=${HP_ITERS:-5}
mkdir -p "$out"
run() { # ALGO MIN MAX
    sh "$top/scripts/netem.sh" "$rate" -- mpirun --oversubscribe -np 4 "$b/hipress-bench" \
        -c "$comp" -a "$1" -b "$2" -e "$3" -f 4 -n "$iters" -w 2 --csv
}
for a in ring ps tree allgather auto; do
    echo "bench_auto: $comp $a at $rate" >&2
    f="$out/algo-$comp-$a-$rate.csv"
    run "$a" 4M 64M > "$f"
    for i in 1 2 3 4 5; do
        run "$a" 4K 1M | tail -n +2 >> "$f"
    done
done
/usr/bin/python3 "$top/scripts/lab/auto_report.py" "$out"/algo-"$comp"-*-"$rate".csv | tee "$out/auto-$comp-$rate.txt"
