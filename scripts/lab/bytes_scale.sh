#!/bin/sh
# Bytes per rank at scale, from the statistics: hipress-bench's
# wire ratio (a plain ring's 2(N-1)/N S over the bytes the busiest rank sent,
# hipress_stats_get's bytes_wire) for onebit, tbq and terngrad under auto
# (HIPRESS_ALLOW_PLAIN=0: auto's choice among compressed algorithms, after
# its exploration, which the warm-up calls cover) and each fixed algorithm,
# at 4, 8, 16 and 32 ranks on this machine.  Bytes are counted, not timed,
# so oversubscription does not change them; auto's choice is timed, so it
# may.  Writes OUTDIR/bytes.csv (np, compressor, algo, plan, wire ratio) and
# OUTDIR/bytes.png (scripts/lab/plot_bytes.py).
#
#   scripts/lab/bytes_scale.sh [OUTDIR] [SIZE]      (default out/bytes, 4M)
#   HP_BYTES_NPS="4 8" HP_BYTES_COMPS=onebit scripts/lab/bytes_scale.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/out/bytes}
size=${2:-4M}
b=${HP_BUILDDIR:-$top/_build}
lib=$b/.libs/libhipress.so
bench=$b/hipress-bench
[ -f "$lib" ] && [ -x "$bench" ] || { echo "bytes_scale: build first ($lib, $bench)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(env | sed -n 's/^\(HIPRESS_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
mkdir -p "$out"
csv=$out/bytes.csv

# The plan a run ended on: auto's report line (HIPRESS_DEBUG=INFO), else,
# when auto had a single candidate to run (no report), the algorithm the
# statistics counted most; a fixed algorithm's own name.
plan_of() {
    [ "$2" = auto ] || { echo "$2"; return; }
    p=$(sed -n 's/.*plan for [0-9]* bytes: \([^(]*\) (.*/\1/p' "$1" | tail -1 | sed 's/ *$//; s/,/;/g')
    [ -n "$p" ] || p=$(sed -n 's/^ *algorithms  *//p' "$1" | tail -1 | tr ',' '\n' |
        awk '$2 > m {m = $2; a = $1} END {if (a != "") print a " (the only candidate)"}')
    echo "${p:-$2}"
}
if [ "${HP_BYTES_FROM_LOGS:-0}" = 1 ]; then
    # rebuild the CSV from an earlier run's logs
    echo "np,compressor,algo,plan,wire_ratio" >"$csv"
    for log in "$out"/run-*.txt; do
        set -- $(basename "$log" .txt | tr '-' ' ')
        echo "$2,$3,$4,$(plan_of "$log" "$4"),$(awk -F, '/^[0-9]/ {print $12}' "$log" | tail -1)" >>"$csv"
    done
    sort -t, -k1,1n -k2,2 -o "$csv.tmp" "$csv" && mv "$csv.tmp" "$csv"
    /usr/bin/python3 "$top/scripts/lab/plot_bytes.py" -o "$out/bytes.png" "$csv"
    exit 0
fi
echo "np,compressor,algo,plan,wire_ratio" >"$csv"
for np in ${HP_BYTES_NPS:-4 8 16 32}; do
    for comp in ${HP_BYTES_COMPS:-onebit tbq terngrad}; do
        for algo in auto ring tree ps allgather; do
            log=$out/run-$np-$comp-$algo.txt
            # 10 warm-up calls: auto's exploration (3 calls per candidate)
            mpirun --oversubscribe -np "$np" -x LD_PRELOAD="$lib" -x HIPRESS_ALLOW_PLAIN=0 \
                -x HIPRESS_HIERARCHICAL=off -x HIPRESS_DEBUG=INFO -x HIPRESS_STATS=1 \
                "$bench" -b "$size" -e "$size" -n 3 -w 10 -c "$comp" -a "$algo" --csv >"$log" 2>&1 || {
                echo "bytes_scale: np $np $comp $algo failed (see $log)" >&2
                exit 1
            }
            ratio=$(awk -F, '/^[0-9]/ {print $12}' "$log" | tail -1)
            plan=$(plan_of "$log" "$algo")
            echo "$np,$comp,$algo,$plan,$ratio" | tee -a "$csv"
        done
    done
done
/usr/bin/python3 "$top/scripts/lab/plot_bytes.py" -o "$out/bytes.png" "$csv"
echo "bytes_scale: $csv, $out/bytes.png"
