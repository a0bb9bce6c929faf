#!/bin/sh
# The whole convergence study of doc/accuracy.md (its log:
# doc/measured/convergence.md), as root, from the source tree with a
# built _build/:
#
#   scripts/lab/convergence_study.sh [OUTDIR] [SEEDS4] [SEEDS8]
#
# np 4: --preset full (every compressor under auto and each fixed algorithm,
# plain, the textbook references) at SEEDS4 seeds (default 10); np 8:
# --preset np8 (every compressor under auto, onebit and fp16 under each
# algorithm, plain, references) at SEEDS8 seeds (default 5).  Writes
# OUTDIR/np4.csv, OUTDIR/np8.csv (resumable: an interrupted run continues
# where it stopped), their *_summary.md / *_summary.csv, and loss and accuracy
# PNGs.  Extra arguments for convergence.py go in CONVERGENCE_ARGS (e.g.
# "--no-force-compress" for a library without HIPRESS_ALLOW_PLAIN).
#
#   scripts/lab/convergence_study.sh sum [OUTDIR] [SEEDS] [SEEDS16] [SEEDSX]
#
# The sum-codec study (doc/measured/sum-codecs.md): the global batch
# (128) and the steps (110) fixed across N, hidden widths 512; --preset sum
# at 4 and 8 ranks and --preset sumcore (plus q2 for onebit and tbq) at 16,
# at SEEDS (default 5) and SEEDS16 (default 5) seeds; at 8 ranks MNIST-1D
# (6 epochs, 192 steps) and the digits 3x longer (330 steps), subsets, at
# SEEDSX (default 5) seeds.
# Writes OUTDIR/np4.csv, np8.csv, np16.csv, mnist1d-np8.csv, long-np8.csv,
# their summaries, and OUTDIR/sum-codecs.png.  Every mpirun runs under
# "nice -n 19" unless NICE= is set empty.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/out/convergence}
s4=${2:-10}
s8=${3:-5}
lib=$top/_build/.libs/libhipress.so
py=/usr/bin/python3
[ -f "$lib" ] || { echo "convergence_study: build first ($lib missing)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the job's HIPRESS_* variables would change every configuration
for v in $(env | sed -n 's/^\(HIPRESS_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
if [ "${1:-}" = sum ]; then
    out=${2:-$top/out/sum}
    seeds=${3:-5}
    s16=${4:-5}
    sx=${5:-5}
    nice=${NICE-nice -n 19}
    mkdir -p "$out"
    d="--global-batch 128 --hidden 512 --resume"
    run() {   # np prefix args...
        n=$1 o=$2
        shift 2
        # shellcheck disable=SC2086
        $nice mpirun --oversubscribe -np "$n" -x LD_PRELOAD="$lib" "$py" \
            "$top/scripts/lab/convergence.py" $d --out "$out/$o" "$@" ${CONVERGENCE_ARGS:-}
    }
    run 4 np4 --epochs 10 --preset sum --seeds "$seeds"
    run 8 np8 --epochs 10 --preset sum --seeds "$seeds"
    run 16 np16 --epochs 10 --preset sumcore --seeds "$s16"
    run 16 np16 --epochs 10 --seeds "$s16" \
        --config onebit:algo=ps,sum_codec=q2 --config tbq:algo=ps,sum_codec=q2
    run 8 mnist1d-np8 --task mnist1d --epochs 6 --seeds "$sx" --config plain \
        --config onebit:ref --config onebit:algo=ps,sum_codec=auto \
        --config onebit:algo=ps,sum_codec=q2 \
        --config onebit:algo=ps,sum_codec=same --config onebit:algo=auto \
        --config tbq:ref --config tbq:algo=ps,sum_codec=auto \
        --config tbq:algo=ps,sum_codec=q2 --config tbq:algo=auto \
        --config terngrad:ref --config terngrad:algo=ps,sum_codec=auto
    run 8 long-np8 --epochs 30 --seeds "$sx" \
        --config onebit:ref --config onebit:algo=ps,sum_codec=auto \
        --config onebit:algo=ps,sum_codec=q2 --config onebit:algo=ps,sum_codec=same \
        --config tbq:ref --config tbq:algo=ps,sum_codec=auto
    "$py" "$top/scripts/lab/plot_sum_codecs.py" --ylim=-30,15 -o "$out/sum-codecs.png" \
        "$out/np4_summary.csv" "$out/np8_summary.csv" "$out/np16_summary.csv"
    echo "convergence_study: results in $out"
    exit 0
fi
mkdir -p "$out"
# shellcheck disable=SC2086
mpirun --oversubscribe -np 4 -x LD_PRELOAD="$lib" "$py" "$top/scripts/lab/convergence.py" \
    --preset full --seeds "$s4" --resume --out "$out/np4" ${CONVERGENCE_ARGS:-}
# shellcheck disable=SC2086
mpirun --oversubscribe -np 8 -x LD_PRELOAD="$lib" "$py" "$top/scripts/lab/convergence.py" \
    --preset np8 --seeds "$s8" --resume --out "$out/np8" ${CONVERGENCE_ARGS:-}
for n in 4 8; do
    "$py" "$top/scripts/lab/plot_convergence.py" -o "$out/loss-np$n.png" "$out/np$n.csv"
    "$py" "$top/scripts/lab/plot_convergence.py" --metric test_acc -o "$out/acc-np$n.png" "$out/np$n.csv"
done
echo "convergence_study: results in $out"
