#!/bin/sh
# The whole convergence study of doc/accuracy.md, as root, from the source
# tree with a built _build/:
#
#   scripts/convergence_study.sh [OUTDIR] [SEEDS4] [SEEDS8]
#
# np 4: --preset full (every compressor under auto and each fixed algorithm,
# plain, the textbook references) at SEEDS4 seeds (default 10); np 8:
# --preset np8 (every compressor under auto, onebit and fp16 under each
# algorithm, plain, references) at SEEDS8 seeds (default 5).  Writes
# OUTDIR/np4.csv, OUTDIR/np8.csv (resumable: an interrupted run continues
# where it stopped), their *_summary.md / *_summary.csv, and loss and accuracy
# PNGs.  Extra arguments for convergence.py go in CONVERGENCE_ARGS (e.g.
# "--no-force-compress" for a library without HIPRESS_ALLOW_PLAIN).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/out/convergence}
s4=${2:-10}
s8=${3:-5}
lib=$top/_build/.libs/libhipress.so
py=/usr/bin/python3
[ -f "$lib" ] || { echo "convergence_study: build first ($lib missing)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the job's HIPRESS_* variables would change every configuration
for v in $(env | sed -n 's/^\(HIPRESS_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
mkdir -p "$out"
# shellcheck disable=SC2086
mpirun --oversubscribe -np 4 -x LD_PRELOAD="$lib" "$py" "$top/scripts/convergence.py" \
    --preset full --seeds "$s4" --resume --out "$out/np4" ${CONVERGENCE_ARGS:-}
# shellcheck disable=SC2086
mpirun --oversubscribe -np 8 -x LD_PRELOAD="$lib" "$py" "$top/scripts/convergence.py" \
    --preset np8 --seeds "$s8" --resume --out "$out/np8" ${CONVERGENCE_ARGS:-}
for n in 4 8; do
    "$py" "$top/scripts/plot_convergence.py" -o "$out/loss-np$n.png" "$out/np$n.csv"
    "$py" "$top/scripts/plot_convergence.py" --metric test_acc -o "$out/acc-np$n.png" "$out/np$n.csv"
done
echo "convergence_study: results in $out"
