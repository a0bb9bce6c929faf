#!/bin/sh
# The measurements behind doc/benchmarks.md, in one run (about 20 minutes on
# two cores).  Writes CSV, text and PNG files to OUTDIR (default doc/bench).
#   scripts/bench_all.sh [OUTDIR]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/doc/bench}
b=${HP_BUILD:-$top/_build}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench() { # RATE COMPRESSOR ALGO ARGS...
    r=$1 c=$2 a=$3; shift 3
    sh "$top/scripts/netem.sh" "$r" -- mpirun --oversubscribe -np 4 "$b/hipress-bench" \
        -c "$c" -a "$a" --csv "$@" > "$out/$a-$c-$r.csv"
}

# compressor kernels, single core
"$b/hipress-bench" --kernels --csv > "$out/kernels.csv"

# every compressor through the ring, 1 MiB to 64 MiB, at 1 and 10 Gbit/s
for r in 1gbit 10gbit; do
    for c in fp16 bf16 onebit tbq terngrad graddrop dgc powersgd; do
        echo "bench_all: $c at $r" >&2
        bench "$r" "$c" ring -b 1M -e 64M -f 4 -n 5 -w 2
    done
done
# where the time goes at 64 MiB
for r in 1gbit 10gbit; do
    for c in fp16 onebit; do
        sh "$top/scripts/netem.sh" "$r" -- mpirun --oversubscribe -np 4 "$b/hipress-bench" \
            -c "$c" -a ring -b 64M -e 64M -n 5 -w 2 --breakdown > "$out/breakdown-$c-$r.txt"
    done
done

# overlap where compute and transfer are of one size and no core is shared
sh "$top/scripts/netem.sh" 2gbit -- mpirun --oversubscribe -np 2 "$b/hipress-bench" \
    -c tbq -a ring -b 16M -e 64M -f 2 -n 5 -w 2 --breakdown > "$out/breakdown-tbq-2gbit-np2.txt"

# auto against plain and every fixed algorithm, 4 KiB to 64 MiB
for c in onebit fp16; do
    sh "$top/scripts/bench_auto.sh" 1gbit "$c" "$out" || true
done

py=/usr/bin/python3
$py "$top/scripts/plot_bench.py" -t "ring, 4 ranks, 1 Gbit/s shared" -o "$out/ring-1gbit.png" "$out"/ring-*-1gbit.csv
$py "$top/scripts/plot_bench.py" -t "ring, 4 ranks, 10 Gbit/s shared" -o "$out/ring-10gbit.png" "$out"/ring-*-10gbit.csv
$py "$top/scripts/plot_bench.py" -t "onebit: algorithms and auto, 4 ranks, 1 Gbit/s" -o "$out/algo-onebit-1gbit.png" "$out"/algo-onebit-*-1gbit.csv
$py "$top/scripts/plot_bench.py" -t "fp16: algorithms and auto, 4 ranks, 1 Gbit/s" -o "$out/algo-fp16-1gbit.png" "$out"/algo-fp16-*-1gbit.csv
echo "bench_all: results in $out" >&2
