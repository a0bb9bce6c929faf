#!/bin/sh
# The GPU path on a real GPU; exit 77 (skipped) on a machine without one.
# The checks a GPU machine adds to the stand-in tests:
#   1. hipress_info --gpu: the module loads, the driver reports the devices,
#      and the module's kernel runs right on each (the build's
#      architectures cover them);
#   2. mpi_cuda at 1 and 2 ranks: collectives on cudaMalloc'd memory with an
#      MPI that is not CUDA-aware, staged exactly; no libcuda mapped before
#      the program's first CUDA call;
#   3. nccl_cuda (builds with NCCL): the real NCCL under the preload, calls
#      classified, graph capture seen, the current device kept; again with
#      HIPRESS_NCCL=compress (one rank: the agreement over the real NCCL,
#      then every call passed through).
set -u
if [ ! -e /dev/nvidia0 ] && [ ! -e /dev/dxg ]; then
    echo "# no GPU on this machine: skipped"
    exit 77
fi
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-300}
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

if "$HP_BUILDDIR/hipress_info" --gpu >"$out" 2>&1; then
    sed 's/^/# /' "$out"
else
    hp_fail "hipress_info --gpu: the GPU path does not work here"
    cat "$out"
fi
for np in 1 2; do
    # HIPRESS_GPU=stage: this checks the staging (tests/gpu/kern/run_gpu_codec.sh the codec)
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_GPU=stage "$HP_BUILDDIR/tests/gpu/device/mpi_cuda" >"$out" 2>"$err"
    rc=$?
    echo "# mpi_cuda np $np: exit $rc; $(grep -h 'device buffers\|staged' "$err" | tr -s ' ' | tr '\n' ';')"
    if [ $rc -ne 0 ] || ! grep -q '^mpi_cuda: ok' "$out"; then
        hp_fail "mpi_cuda np $np"
        cat "$out" "$err"
    fi
    n=$(sed -n 's/^mpi_cuda: ok, \([0-9]*\) calls.*/\1/p' "$out")
    grep -Eq "^  staged through host memory +$n\$" "$err" || { hp_fail "mpi_cuda np $np: not $n staged calls"; cat "$err"; }
done
if [ -x "$HP_BUILDDIR/tests/gpu/device/nccl_cuda" ]; then
    env LD_PRELOAD="$HP_PRELOAD" "$HP_BUILDDIR/tests/gpu/device/nccl_cuda" >"$out" 2>"$err" || { hp_fail "nccl_cuda"; cat "$out" "$err"; }
    # HIPRESS_NCCL=compress with one rank: the agreement runs on the real
    # NCCL and the GPU, finds one rank, and every call passes through as before
    env LD_PRELOAD="$HP_PRELOAD" HIPRESS_NCCL=compress HIPRESS_COMPRESSOR=onebit "$HP_BUILDDIR/tests/gpu/device/nccl_cuda" \
        >"$out" 2>"$err" || { hp_fail "nccl_cuda, HIPRESS_NCCL=compress"; cat "$out" "$err"; }
fi
exit $status
