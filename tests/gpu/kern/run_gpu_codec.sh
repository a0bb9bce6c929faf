#!/bin/sh
# The device codec on a real GPU; exit 77 (skipped) on a machine without one.
#   1. gpu_kern: every kernel bit for bit against the CPU compressors
#      (payload, residual, state; decodes; malformed messages rejected alike);
#   2. mpi_cuda_codec at 2 and 4 ranks sharing the GPUs (rank % devices):
#      every compressor and algorithm on cudaMalloc'd buffers gives the host
#      path's bits, results and residuals, every call compressed on the GPU;
#   3. mpi_cuda (exact collectives on device buffers) with the codec on:
#      still exact.
# GPU_CHECK_QUICK=1: gpu_kern --quick.
set -u
if [ ! -e /dev/nvidia0 ] && [ ! -e /dev/dxg ]; then
    echo "# no GPU on this machine: skipped"
    exit 77
fi
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-600}
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"
module="$HP_BUILDDIR/.libs/libhipress_cuda.so"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

row() {
    sed -n "s/^  $1  *\([0-9][0-9]*\).*/\1/p" "$err"
}

quick=
[ "${GPU_CHECK_QUICK:-0}" = 1 ] && quick=--quick
HIPRESS_CUDA_MODULE="$module" "$HP_BUILDDIR/tests/gpu/kern/gpu_kern" $quick >"$out" 2>"$err"
rc=$?
sed 's/^/# /' "$out"
case $rc in
    0) ;;
    77) echo "# gpu_kern: skipped (no usable GPU)"; exit 77 ;;
    *) hp_fail "gpu_kern: the kernels differ from the CPU"; head -50 "$err" ;;
esac

for np in 2 4; do
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$module" \
        "$HP_BUILDDIR/tests/gpu/kern/mpi_cuda_codec" >"$out" 2>"$err"
    rc=$?
    n=$(sed -n 's/^mpi_cuda_codec: ok, \([0-9]*\) device calls.*/\1/p' "$out")
    echo "# mpi_cuda_codec np $np: exit $rc, ${n:-?} device calls, $(row 'compressed on the GPU') compressed on the GPU"
    if [ $rc -ne 0 ] || [ -z "$n" ]; then
        hp_fail "mpi_cuda_codec np $np"
        cat "$out"
        head -60 "$err"
        continue
    fi
    [ "$(row 'compressed on the GPU')" = "$n" ] || { hp_fail "np $np: not $n calls compressed on the GPU"; cat "$err"; }
done

hp_mpirun 2 -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$module" \
    "$HP_BUILDDIR/tests/gpu/device/mpi_cuda" >"$out" 2>"$err"
rc=$?
echo "# mpi_cuda with the codec: exit $rc, $(row 'compressed on the GPU') compressed on the GPU, $(row 'staged through host memory') staged"
if [ $rc -ne 0 ] || ! grep -q '^mpi_cuda: ok' "$out"; then
    hp_fail "mpi_cuda with the codec"
    cat "$out" "$err"
fi
exit $status
