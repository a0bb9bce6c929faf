#!/bin/sh
# Device buffers in MPI collectives, without a GPU: tests/gpu/host/mpi_gpu under the
# preload, with the stand-in driver tests/gpu/mock/.libs/libcuda.so.1 loaded
# after MPI_Init (as a framework loads CUDA).  Its "device memory" crashes
# on any host access, so a device buffer that reached the CPU path or a
# non-CUDA-aware MPI unstaged would kill the run.
#   1. host buffers only: results right, no libcuda and no CUDA module ever
#      mapped (also after an unrelated dlopen), no device rows in the stats;
#   2. device buffers, the MPI not CUDA-aware (Debian's Open MPI): with the
#      CUDA module every call is staged exactly; without it (a build
#      without CUDA, or HIPRESS_CUDA_MODULE naming nothing) the calls go to
#      MPI unchanged with one warning (then the stand-in memory is made
#      host-accessible, standing for a driver that would have crashed);
#   3. HIPRESS_GPU_MPI_AWARE=yes: device buffers go to MPI unchanged;
#   4. HIPRESS_GPU=off: nothing is looked at.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-300}
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"

prog="$HP_BUILDDIR/tests/gpu/host/mpi_gpu"
mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
[ -x "$prog" ] || { echo "FAIL: $prog is missing"; exit 1; }
[ -f "$mock/libcuda.so.1" ] || { echo "FAIL: $mock/libcuda.so.1 is missing"; exit 1; }
module=no
[ -f "$HP_BUILDDIR/.libs/libhipress_cuda.so" ] && module=yes
echo "# CUDA module in this build: $module"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

run() {
    label=$1 np=$2
    shift 2
    hp_mpirun "$np" -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 "$@" >"$out" 2>"$err"
    rc=$?
    echo "# $label: exit $rc"
    if [ $rc -ne 0 ] || ! grep -q '^mpi_gpu: ok' "$out"; then
        hp_fail "$label: the program failed (exit $rc)"
        cat "$out" "$err"
        return 1
    fi
    return 0
}

# the number after a row's label in the statistics table
row() {
    sed -n "s/^  $1  *\([0-9][0-9]*\).*/\1/p" "$err"
}

# device calls the program made, from its closing line
device_calls() {
    sed -n 's/^mpi_gpu: ok, \([0-9]*\) allreduce, \([0-9]*\) bcast, \([0-9]*\) allgatherv.*/\1 \2 \3/p' "$out" |
        awk '{ print $1 + $2 + $3 }'
}

expect_rows() {
    label=$1 dev=$2 staged=$3 unstaged=$4
    [ "$(row 'device buffers')" = "$dev" ] || hp_fail "$label: 'device buffers' is $(row 'device buffers'), want $dev"
    [ "$(row 'staged through host memory')" = "$staged" ] ||
        hp_fail "$label: 'staged through host memory' is $(row 'staged through host memory'), want $staged"
    [ "$(row 'device, not staged')" = "$unstaged" ] ||
        hp_fail "$label: 'device, not staged' is '$(row 'device, not staged')', want '$unstaged'"
    [ "$(row 'errors')" = 0 ] || hp_fail "$label: errors reported"
}

# 1. host buffers only
for np in 1 3; do
    if run "host, np $np" $np "$prog" host "$mock"; then
        expect_rows "host, np $np" 0 0 ""
        grep -q '^hipress .* warn ' "$err" && { hp_fail "host, np $np: warnings"; cat "$err"; }
    fi
done
if run "host, HIPRESS_DEBUG=INFO" 2 -x HIPRESS_DEBUG=INFO "$prog" host; then
    n=$(grep -c '^hipress [^ ]* info gpu: libcuda.so.1 is not loaded: CPU path' "$err")
    [ "$n" -eq 2 ] || { hp_fail "HIPRESS_DEBUG=INFO: $n ranks said the CPU path is used, want 2"; cat "$err"; }
fi

# 2. device buffers, an MPI that is not CUDA-aware
for np in 1 2 3; do
    if [ $module = yes ]; then
        if run "device, staged, np $np" $np "$prog" device "$mock"; then
            n=$(device_calls)
            expect_rows "device, staged, np $np" "$n" "$n" ""
            grep -q '^hipress .* warn ' "$err" && { hp_fail "device, np $np: warnings"; cat "$err"; }
        fi
    else
        if run "device, no module, np $np" $np -x MOCK_CUDA_HOST_ACCESSIBLE=1 "$prog" device "$mock"; then
            n=$(device_calls)
            expect_rows "device, no module, np $np" "$n" 0 "$n"
            w=$(grep -c 'warn gpu: a device buffer reached MPI.*no CUDA module' "$err")
            [ "$w" -eq "$np" ] || { hp_fail "device, no module: $w warnings, want one per rank"; cat "$err"; }
        fi
    fi
done
if [ $module = yes ] &&
    run "device, HIPRESS_CUDA_MODULE missing" 2 -x MOCK_CUDA_HOST_ACCESSIBLE=1 \
        -x HIPRESS_CUDA_MODULE=/nonexistent/libhipress_cuda.so "$prog" device "$mock"; then
    n=$(device_calls)
    expect_rows "HIPRESS_CUDA_MODULE missing" "$n" 0 "$n"
    grep -q 'warn gpu: a device buffer reached MPI.*/nonexistent/libhipress_cuda.so' "$err" ||
        { hp_fail "HIPRESS_CUDA_MODULE missing: no warning naming the module"; cat "$err"; }
fi
if [ $module = yes ] && run "device, staged, HIPRESS_DEBUG=INFO" 2 -x HIPRESS_DEBUG=INFO "$prog" device "$mock"; then
    for what in 'gpu: libcuda.so.1 is loaded in this process' 'gpu: cuda module loaded: ' \
                'gpu: the MPI is not CUDA-aware'; do
        grep -q "info $what" "$err" || { hp_fail "HIPRESS_DEBUG=INFO: no '$what' line"; cat "$err"; }
    done
fi

# 3. a CUDA-aware MPI takes device buffers as they are
if run "device, HIPRESS_GPU_MPI_AWARE=yes" 2 -x MOCK_CUDA_HOST_ACCESSIBLE=1 -x HIPRESS_GPU_MPI_AWARE=yes \
    "$prog" device "$mock"; then
    n=$(device_calls)
    expect_rows "HIPRESS_GPU_MPI_AWARE=yes" "$n" 0 ""
fi

# 4. HIPRESS_GPU=off: no look at all
if run "device, HIPRESS_GPU=off" 2 -x MOCK_CUDA_HOST_ACCESSIBLE=1 -x HIPRESS_GPU=off "$prog" device "$mock"; then
    expect_rows "HIPRESS_GPU=off" 0 0 ""
fi
exit $status
