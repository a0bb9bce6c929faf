#!/bin/sh
# The device path of compressed MPI_Allreduce without a GPU: the stand-in
# driver (tests/gpu/mock/.libs/libcuda.so.1: device memory that crashes on any
# host access) and the emulated CUDA module
# (tests/gpu/mock/.libs/libhipress_cuda_emu.so: the module's host code with its
# kernels run on the host, tests/gpu/emu/hp_kern_emu.c).
#   1. mpi_gpu_codec at 2, 3 and 4 ranks: every compressor and algorithm on
#      device buffers gives the host path's bits, results and residuals,
#      NaN inputs, sums that overflow float32 (message exceptions) and a
#      corrupted message included; every device call is compressed on the
#      GPU, none staged;
#   2. mpi_gpu: the exact collectives on device buffers stay exact; the
#      large float sums are compressed on the GPU (`none`), the rest staged;
#   3. HIPRESS_GPU=stage: nothing is compressed on the GPU;
#   4. gpu_kern --quick and hipress-bench --kernels --gpu through the
#      emulated module (the harnesses scripts/kit/gpu-check runs on a GPU);
#   5. 1, 2 and 4 (gpu_kern only so) with the stand-in driver's streams deferred
#      (MOCK_CUDA_DEFERRED: queued work runs only when a wait needs it; 2
#      also runs the other streams first), so a missing event or a host read
#      before its wait gives wrong bits; every run also checks that nothing
#      touched the legacy default stream, that pinned memory was freed in
#      its context and that nothing was left queued;
#   6. a rank whose device work never completes (MOCK_CUDA_HANG): every
#      call fails on every rank within the bound (HIPRESS_TIMEOUT / 2 per
#      wait), with a reason naming what was waited for; no hang.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-300}
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"

mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
emu="$mock/libhipress_cuda_emu.so"
# a plugin (tests/mpi/plugin_example.c) has no device kernels: the device path
# encodes its ranges on host copies, which must give the host path's bits too
plugin="$HP_BUILDDIR/tests/mpi/.libs/plugin_example.so"
for f in "$HP_BUILDDIR/tests/gpu/kern/mpi_gpu_codec" "$HP_BUILDDIR/tests/gpu/host/mpi_gpu" "$mock/libcuda.so.1" "$emu" "$plugin"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing"; exit 1; }
done
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

row() {
    sed -n "s/^  $1  *\([0-9][0-9]*\).*/\1/p" "$err"
}

# np, then MOCK_CUDA_DEFERRED: at once, then deferred (2 at np 3 and 4)
for run in "2 0" "2 1" "3 0" "3 2" "4 0" "4 2"; do
    set -- $run
    np=$1 def=$2
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$emu" \
        -x HIPRESS_PLUGIN="$plugin" -x HP_TEST_PLUGIN_COMP=example_int8 -x MOCK_CUDA_DEFERRED=$def \
        "$HP_BUILDDIR/tests/gpu/kern/mpi_gpu_codec" "$mock/libcuda.so.1" >"$out" 2>"$err"
    rc=$?
    n=$(sed -n 's/^mpi_gpu_codec: ok, \([0-9]*\) device calls.*/\1/p' "$out")
    echo "# mpi_gpu_codec np $np, MOCK_CUDA_DEFERRED=$def: exit $rc, ${n:-?} device calls," \
        "$(row 'compressed on the GPU') compressed on the GPU"
    sed -n 's/^mpi_gpu_codec: ok, [0-9]* device calls; /#   /p' "$out"
    if [ $rc -ne 0 ] || [ -z "$n" ]; then
        hp_fail "mpi_gpu_codec np $np MOCK_CUDA_DEFERRED=$def"
        cat "$out" "$err"
        continue
    fi
    [ "$(row 'compressed on the GPU')" = "$n" ] || { hp_fail "np $np: not $n calls compressed on the GPU"; cat "$err"; }
    [ "$(row 'staged through host memory')" = 0 ] || { hp_fail "np $np: calls staged"; cat "$err"; }
done

# HIPRESS_ALLOW_PLAIN=0: device buffers are planned with the device codec's
# rates, and the emulated module's are the host emulation's (slow), so auto
# would send `none` plain; what is checked here is where the calls go
# (np 4 deferred: the staged and the compressed calls of 4 ranks touch no
# default stream, mpi_gpu checks)
for run in "auto 0 2" "auto 1 4" "stage 0 2"; do
    set -- $run
    gpu=$1 def=$2 np=$3
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$emu" -x HIPRESS_GPU=$gpu \
        -x HIPRESS_ALLOW_PLAIN=0 -x MOCK_CUDA_DEFERRED=$def "$HP_BUILDDIR/tests/gpu/host/mpi_gpu" device "$mock" >"$out" 2>"$err"
    rc=$?
    c=$(row 'compressed on the GPU')
    echo "# mpi_gpu np $np HIPRESS_GPU=$gpu MOCK_CUDA_DEFERRED=$def: exit $rc, ${c:-?} compressed on the GPU," \
        "$(row 'staged through host memory') staged"
    if [ $rc -ne 0 ] || ! grep -q '^mpi_gpu: ok' "$out"; then
        hp_fail "mpi_gpu HIPRESS_GPU=$gpu MOCK_CUDA_DEFERRED=$def"
        cat "$out" "$err"
        continue
    fi
    if [ $gpu = auto ]; then
        [ "${c:-0}" -gt 0 ] || { hp_fail "HIPRESS_GPU=auto: nothing compressed on the GPU"; cat "$err"; }
    else
        [ "${c:-x}" = 0 ] || { hp_fail "HIPRESS_GPU=stage: $c calls compressed on the GPU"; cat "$err"; }
    fi
done

# the device work of rank 1 never completes from its 4th wait on (after the
# codec's probe and set-up: inside the first compressed call, or, where that
# call needs a codec context the pool does not hold yet, in the context's
# set-up: which of the two depends on timing, and either is said);
# HIPRESS_TIMEOUT=3 bounds each device wait to 1.5 s, below the peers'
# watchdog (3 s)
hp_mpirun 3 -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_CUDA_MODULE="$emu" -x HIPRESS_TIMEOUT=3 \
    -x MOCK_CUDA_HANG=4 -x MOCK_CUDA_HANG_RANK=1 "$HP_BUILDDIR/tests/gpu/kern/mpi_gpu_codec" "$mock/libcuda.so.1" hang 20 \
    >"$out" 2>"$err"
rc=$?
echo "# a rank's device work never completes: exit $rc: $(cat "$out")"
if [ $rc -ne 0 ] || ! grep -q '^mpi_gpu_codec: hang: ok' "$out"; then
    hp_fail "a stuck device: the calls did not fail on every rank within the bound"
    cat "$out" "$err"
elif ! grep -Eq "warn gpu: (cannot start a compressed call on device [0-9]+: )?the device did not finish the .* on the codec's .* within 1.5 s" "$err"; then
    hp_fail "a stuck device: no warning naming what was waited for"
    cat "$err"
fi
grep -q 'blocks for ever (MOCK_CUDA_HANG)' "$err" && { hp_fail "a stuck device: an unbounded wait"; cat "$err"; }

# gpu_kern in deferred mode only (its results are the same bits either way,
# and a run takes a minute and a half here): 2, and 1 for its device-message
# runs, where a missing stream_join or stream_release shows only under 1
if [ -x "$HP_BUILDDIR/tests/gpu/kern/gpu_kern" ]; then
    for def in 2 1; do
        LD_LIBRARY_PATH="$mock${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HIPRESS_CUDA_MODULE="$emu" \
            MOCK_CUDA_DEFERRED=$def "$HP_BUILDDIR/tests/gpu/kern/gpu_kern" --quick >"$out" 2>"$err"
        rc=$?
        echo "# gpu_kern --quick on the emulated module, MOCK_CUDA_DEFERRED=$def: exit $rc: $(tail -n 1 "$out")"
        [ $rc -eq 0 ] || { hp_fail "gpu_kern on the emulated module"; cat "$out"; head -40 "$err"; }
    done
fi
LD_LIBRARY_PATH="$mock${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HIPRESS_CUDA_MODULE="$emu" \
    "$HP_BUILDDIR/hipress-bench" --kernels --gpu --bytes 1M --csv >"$out" 2>"$err"
rc=$?
rows=$(grep -c ',\(en\|de\)code,' "$out")
echo "# hipress-bench --kernels --gpu on the emulated module: exit $rc, $rows rows"
[ $rc -eq 0 ] && [ "$rows" -eq 24 ] || { hp_fail "hipress-bench --kernels --gpu"; cat "$out" "$err"; }
exit $status
