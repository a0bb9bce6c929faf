#!/bin/sh
# The measurements behind doc/benchmarks.md and doc/cluster.md, in one run
# (about an hour on two cores).  Writes CSV, text and PNG files to OUTDIR
# (default doc/measured).
#   scripts/lab/bench_all.sh [OUTDIR]
# Two networks: the emulated cluster (scripts/cluster.sh: a link per host, the
# README's headline) and, second and labelled so, one rate-limited loopback
# shared by every rank (scripts/netem.sh).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/doc/measured}
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

# the emulated cluster, a link per host, medians of 5 fresh clusters:
# 4 hosts x 1 rank at 1 Gbit/s (none through hipress' ring measures hipress'
# own exact allreduce against Open MPI's), then 10 Gbit/s, which the
# cluster's link check refuses on a 2-core machine (recorded, not faked)
HP_BUILDDIR=$b "$top/scripts/lab/bench_cluster.sh" --hosts 4 --rate 1gbit --repeats 5 \
    --comps "onebit tbq fp16" --algos "auto ring allgather" -o "$out/cluster-4x1-1gbit"
HP_BUILDDIR=$b "$top/scripts/lab/bench_cluster.sh" --hosts 4 --rate 1gbit --repeats 5 \
    --comps "none" --algos "ring" -o "$out/cluster-4x1-1gbit-none"
HP_BUILDDIR=$b "$top/scripts/lab/bench_cluster.sh" --hosts 4 --rate 10gbit --repeats 3 \
    --comps "onebit" --algos "auto" -o "$out/cluster-4x1-10gbit" > "$out/cluster-4x1-10gbit.log" 2>&1 ||
    echo "bench_all: the 10 Gbit/s cluster did not pass its link check (see cluster-4x1-10gbit.log)" >&2
# 2 hosts x 2 ranks: flat, hierarchical and the plan's choice, 1 to 64 MiB
for sz in 1M 4M 16M 64M; do
    HP_BUILDDIR=$b "$top/scripts/lab/bench_cluster.sh" --hosts 2 --ranks-per-host 2 --rate 1gbit --repeats 5 \
        --size "$sz" --comps onebit --algos auto --variant flat:HIPRESS_HIERARCHICAL=off \
        --variant hier:HIPRESS_HIERARCHICAL=on --variant auto:HIPRESS_HIERARCHICAL=auto \
        -o "$out/cluster-2x2-1gbit-$sz"
done

# the shared loopback (the second setting)

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
    sh "$top/scripts/lab/bench_auto.sh" 1gbit "$c" "$out" || true
done

py=/usr/bin/python3
$py "$top/scripts/lab/plot_bench.py" -t "ring, 4 ranks, 1 Gbit/s shared" -o "$out/ring-1gbit.png" "$out"/ring-*-1gbit.csv
$py "$top/scripts/lab/plot_bench.py" -t "ring, 4 ranks, 10 Gbit/s shared" -o "$out/ring-10gbit.png" "$out"/ring-*-10gbit.csv
$py "$top/scripts/lab/plot_bench.py" -t "onebit: algorithms and auto, 4 ranks, 1 Gbit/s" -o "$out/algo-onebit-1gbit.png" "$out"/algo-onebit-*-1gbit.csv
$py "$top/scripts/lab/plot_bench.py" -t "fp16: algorithms and auto, 4 ranks, 1 Gbit/s" -o "$out/algo-fp16-1gbit.png" "$out"/algo-fp16-*-1gbit.csv
echo "bench_all: results in $out" >&2
