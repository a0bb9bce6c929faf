#!/bin/sh
# The experimental compressed ncclAllReduce (HIPRESS_NCCL=compress) without
# a GPU: tests/gpu/nccl/nccl_compress under the preload, with the stand-in NCCL's
# communicators spanning MPI_COMM_WORLD (MOCK_NCCL_MPI=1: their operations
# are entries of the stand-in driver's streams, moving data through shared
# memory), the stand-in driver's device memory and the emulated CUDA
# module.
#   1. HIPRESS_NCCL=compress at 2, 3 and 4 ranks (one mpirun each): every
#      case of nccl_compress (the MPI path's bits for every compressor and
#      algorithm, non-blocking communicators, splits, abort, auto);
#      HIPRESS_STATS counts the compressed calls; the differing settings'
#      and the bounded poll's warnings; at 2 ranks host-synchronously
#      (HIPRESS_NCCL_ASYNC=off: the corrupted call's warning on every rank),
#      at 3 and 4 with the default (auto: the eligible calls stream-ordered,
#      so the corrupted call's failure is known on the device only: NaN, no
#      warning);
#   2. the stream-ordered calls (nccl_compress async) at 2, 3 and 4 ranks
#      under the stand-in driver's deferred streams (MOCK_CUDA_DEFERRED=1
#      and 2): the MPI path's bits and residuals for fp16, bf16, q2/q4/q8
#      (both roundings), onebit, tbq, terngrad x ring, ps, allgather, tree,
#      float16 and bfloat16 calls the bits of a stream-ordered float32 call
#      on the widened input narrowed (and the MPI path's), no host
#      synchronisation or copy in a steady-state call, a corrupted message
#      NaN on every rank;
#   3. the default (HIPRESS_NCCL unset) at 2 ranks: nothing compressed;
#   4. HIPRESS_VERIFY=1 (nccl_compress verify) at 2 and 3 ranks under
#      HIPRESS_DEBUG=INFO: each compressed call verified (the stats' verify
#      row counts every one, none not identical), every rank's INFO line
#      says identical, and rank 0's errors are those the program computes
#      itself (its "# verify:" lines: exact sum against result; 0 for fp16
#      on values it holds exactly).
# The staging buffers' form (nccl_compress form_bits, form_late) runs in 1
# (and form_bits in 2): a buffer reused with two counts gives the MPI
# path's bits and residuals, stream-ordered in its steady state.
# Skipped (77) where the emulated module is not built (a build without CUDA).
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-300}
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"

. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/gpu/nccl/nccl_run.sh"
nccl_setup nccl_compress
trap 'rm -f "$out" "$err" "$out.got" "$out.want"' EXIT

row() {
    sed -n "s/^  $1  *\([0-9][0-9]*\).*/\1/p" "$err"
}

for np in 2 3 4; do
    async=auto
    [ $np -eq 2 ] && async=off
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$emu" \
        -x MOCK_NCCL_MPI=1 -x HIPRESS_NCCL=compress -x HIPRESS_NCCL_ASYNC=$async "$prog" compress \
        "$mock/libcuda.so.1" >"$out" 2>"$err"
    rc=$?
    n=$(sed -n 's/^nccl_compress: ok, \([0-9]*\) compressed calls$/\1/p' "$out")
    echo "# nccl_compress np $np (HIPRESS_NCCL_ASYNC=$async): exit $rc, ${n:-?} compressed calls, $(row 'nccl compressed') counted"
    grep '^# ' "$out"
    if [ $rc -ne 0 ] || [ -z "$n" ]; then
        hp_fail "nccl_compress np $np"
        cat "$out" "$err"
        continue
    fi
    [ "$(row 'nccl compressed')" = "$n" ] || { hp_fail "np $np: 'nccl compressed' is not $n"; cat "$err"; }
    # the corrupted calls' warnings on every rank (host-synchronous; none
    # stream-ordered): the float32 one's where HIPRESS_NCCL_ASYNC=off, the
    # float16 one's always (its communicator has HIPRESS_NCCL_ASYNC=off);
    # the differing settings' once
    want=$((2 * np))
    [ $async = auto ] && want=$np
    [ "$(grep -c 'compressed ncclAllReduce of [0-9]* floats failed: .*the result is NaN' "$err")" -eq $want ] ||
        { hp_fail "np $np: want $want failure warnings"; cat "$err"; }
    [ "$(grep -c 'ncclAllReduce is passed through on this communicator: the ranks. settings differ' "$err")" -eq 1 ] ||
        { hp_fail "np $np: want one warning about differing settings"; cat "$err"; }
    # a buffer found to be a staging buffer after its count's verdict
    # (form_late): one warning, on rank 0, naming the limit
    [ "$(grep -c "nccl: the buffer at .* turned out to be a staging buffer after its count's form was agreed" "$err")" -eq 1 ] ||
        { hp_fail "np $np: want one warning about a late staging buffer"; cat "$err"; }
    # the bounded poll of a non-blocking communicator: on every rank, naming the wait
    [ "$(grep -c "nccl: an agreement's ncclAllReduce was still in progress after [0-9]* s (ncclCommGetAsyncError answers ncclInProgress; HIPRESS_TIMEOUT=1 s)" "$err")" -eq $np ] ||
        { hp_fail "np $np: want one timeout warning per rank"; cat "$err"; }
done

for np in 2 3 4; do
    for d in 1 2; do
        hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$emu" \
            -x MOCK_NCCL_MPI=1 -x HIPRESS_NCCL=compress -x MOCK_CUDA_DEFERRED=$d "$prog" async \
            "$mock/libcuda.so.1" >"$out" 2>"$err"
        rc=$?
        n=$(sed -n 's/^nccl_compress: ok, \([0-9]*\) compressed calls$/\1/p' "$out")
        echo "# nccl_compress async np $np MOCK_CUDA_DEFERRED=$d: exit $rc, ${n:-?} compressed calls, $(row 'nccl compressed') counted"
        if [ $rc -ne 0 ] || [ -z "$n" ]; then
            hp_fail "nccl_compress async np $np MOCK_CUDA_DEFERRED=$d"
            cat "$out" "$err"
            continue
        fi
        [ "$(row 'nccl compressed')" = "$n" ] || { hp_fail "async np $np: 'nccl compressed' is not $n"; cat "$err"; }
        # a device-side failure never reaches the host's warning
        ! grep -q 'compressed ncclAllReduce of [0-9]* floats failed' "$err" ||
            { hp_fail "async np $np: a host-side failure"; cat "$err"; }
    done
done

hp_mpirun 2 -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$emu" -x MOCK_NCCL_MPI=1 \
    "$prog" pass "$mock/libcuda.so.1" >"$out" 2>"$err"
rc=$?
echo "# nccl_compress, HIPRESS_NCCL unset: exit $rc, $(row 'nccl compressed') compressed"
if [ $rc -ne 0 ] || ! grep -q '^nccl_compress: ok, 0 compressed calls$' "$out"; then
    hp_fail "HIPRESS_NCCL unset"
    cat "$out" "$err"
elif [ "$(row 'nccl compressed')" != 0 ]; then
    hp_fail "HIPRESS_NCCL unset: calls compressed"
    cat "$err"
fi
for np in 2 3; do
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_CUDA_MODULE="$emu" -x MOCK_NCCL_MPI=1 \
        -x HIPRESS_NCCL=compress -x HIPRESS_VERIFY=1 -x HIPRESS_DEBUG=INFO "$prog" verify "$mock/libcuda.so.1" \
        >"$out" 2>"$err"
    rc=$?
    n=$(sed -n 's/^nccl_compress: ok, \([0-9]*\) compressed calls$/\1/p' "$out")
    echo "# nccl_compress verify np $np: exit $rc, ${n:-?} compressed calls, $(row verify) verified"
    if [ $rc -ne 0 ] || [ -z "$n" ]; then
        hp_fail "nccl_compress verify np $np"
        cat "$out" "$err"
        continue
    fi
    [ "$(row 'nccl compressed')" = "$n" ] && [ "$(row verify)" = "$n" ] &&
        [ "$(sed -n 's/^  verify  .*, \([0-9][0-9]*\) not identical$/\1/p' "$err")" = 0 ] ||
        { hp_fail "verify np $np: want $n compressed and verified calls, all identical"; cat "$err"; }
    [ "$(grep -c '^hipress [^ ]* info verify: [0-9]* elements, relative error [^ ]*, identical on all ranks: yes$' "$err")" -eq $((np * n)) ] &&
        ! grep -q 'info verify: .*identical on all ranks: NO' "$err" ||
        { hp_fail "verify np $np: want $((np * n)) INFO lines saying identical"; cat "$err"; }
    # rank 0's reports against the program's own errors, call by call
    sed -n 's/^hipress [^ ]*:0 info verify: \([0-9]*\) elements, relative error \([^,]*\), .*/\1 \2/p' "$err" >"$out.got"
    sed -n 's/^# verify: \([0-9]*\) elements, relative error \(.*\)$/\1 \2/p' "$out" >"$out.want"
    paste -d ' ' "$out.got" "$out.want" | awk -v n="$n" '
        { k++; d = $2 - $4; if (d < 0) d = -d; m = $2 > $4 ? $2 : $4
          if ($1 != $3 || d > 1e-6 * m) { print "# call " k ": hipress reported " $1 " elements, error " $2 \
                                                  ", want " $3 " elements, error " $4; bad = 1 } }
        END { if (k != n) { print "# " k " reports on rank 0, want " n; bad = 1 }; exit bad }' ||
        { hp_fail "verify np $np: the reported errors are not the program's"; cat "$out"; }
    rm -f "$out.got" "$out.want"
done
exit $status
