#!/bin/sh
# NCCL interception without MPI and without a GPU (a torchrun job's shape):
# tests/gpu/nccl/nccl_calls and tests/gpu/nccl/nccl_local under the preload, with the
# stand-in NCCL (tests/gpu/mock/.libs/libnccl.so.2) as the real library.
#   1. every case of nccl_calls (pass-through, groups, capture, release);
#   2. settings load at the first NCCL call, with MPI_Init's validation;
#      HIPRESS_STATS prints at exit from RANK 0 only; HIPRESS_DEBUG lines
#      carry RANK; HIPRESS_ENABLE=0, HIPRESS_GPU=off, HIPRESS_MIN_BYTES;
#      rank 0 alone says once, as at MPI_Init, that a compressor for SGD
#      only runs another form while HIPRESS_OPTIMIZER is not set;
#   3. the real NCCL found in a local scope, and a clear error when there
#      is none.
set -u
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"

calls="$HP_BUILDDIR/tests/gpu/nccl/nccl_calls"
local_="$HP_BUILDDIR/tests/gpu/nccl/nccl_local"
mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
for f in "$calls" "$local_"; do
    [ -x "$f" ] || { echo "FAIL: $f is missing"; exit 1; }
done
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# run LABEL WANT_EXIT ENV... -- PROG ARGS...
run() {
    label=$1 want=$2
    shift 2
    env LD_PRELOAD="$HP_PRELOAD" "$@" >"$out" 2>"$err"
    rc=$?
    echo "# $label: exit $rc"
    if [ $rc -ne "$want" ]; then
        hp_fail "$label: exit $rc, want $want"
        cat "$out" "$err"
        return 1
    fi
    return 0
}

counts() {
    sed -n 's/^nccl_calls: result 0, calls \([0-9]*\) eligible \([0-9]*\) passthrough \([0-9]*\)$/\1 \2 \3/p' "$out"
}

# 1.
if run "all cases" 0 "$calls" all "$mock"; then
    grep -q '^nccl_calls: ok' "$out" || hp_fail "all cases: no ok line"
    # the two settings the program gets wrong on purpose, and nothing else
    [ "$(grep -c 'warn hipress_nccl_comm_set: HIPRESS_' "$err")" -eq 2 ] ||
        { hp_fail "all cases: want two hipress_nccl_comm_set warnings"; cat "$err"; }
    grep -v 'warn hipress_nccl_comm_set: HIPRESS_' "$err" | grep -q . &&
        { hp_fail "all cases: unexpected output on stderr"; cat "$err"; }
fi

# 2.
run "defaults" 0 "$calls" one && { [ "$(counts)" = "1 1 0" ] || hp_fail "defaults: counts '$(counts)', want '1 1 0'"; }
run "HIPRESS_ENABLE=0" 0 HIPRESS_ENABLE=0 "$calls" one &&
    { [ "$(counts)" = "1 0 1" ] || hp_fail "HIPRESS_ENABLE=0: counts '$(counts)'"; }
run "HIPRESS_GPU=off" 0 HIPRESS_GPU=off "$calls" one &&
    { [ "$(counts)" = "1 0 1" ] || hp_fail "HIPRESS_GPU=off: counts '$(counts)'"; }
run "HIPRESS_MIN_BYTES=8M" 0 HIPRESS_MIN_BYTES=8M "$calls" one &&
    { [ "$(counts)" = "1 0 1" ] || hp_fail "HIPRESS_MIN_BYTES=8M: counts '$(counts)'"; }
if run "HIPRESS_STATS=1" 0 HIPRESS_STATS=1 "$calls" one; then
    grep -q '^hipress statistics (rank 0, without MPI)$' "$err" || { hp_fail "HIPRESS_STATS=1: no table"; cat "$err"; }
    grep -Eq '^  ncclAllReduce calls +1$' "$err" || hp_fail "HIPRESS_STATS=1: no 'ncclAllReduce calls 1' row"
    grep -Eq '^  nccl eligible +1 ' "$err" || hp_fail "HIPRESS_STATS=1: no 'nccl eligible 1' row"
fi
if run "HIPRESS_STATS=1 RANK=2" 0 HIPRESS_STATS=1 RANK=2 "$calls" one; then
    grep -q '^hipress statistics' "$err" && hp_fail "RANK=2 printed the statistics"
fi
if run "HIPRESS_DEBUG=INFO RANK=3" 0 HIPRESS_DEBUG=INFO RANK=3 "$calls" one; then
    grep -Eq '^hipress [^ :]+:[0-9]+:3 info hipress .* settings loaded without MPI' "$err" ||
        { hp_fail "HIPRESS_DEBUG=INFO: no 'settings loaded without MPI' line from rank 3"; cat "$err"; }
fi
notices() {
    grep -c "HIPRESS_OPTIMIZER is not set" "$err"
}
run "onebit, RANK=0" 0 HIPRESS_COMPRESSOR=onebit HIPRESS_OPTIMIZER=auto RANK=0 "$calls" one &&
    { [ "$(notices)" -eq 1 ] || { hp_fail "onebit, RANK=0: $(notices) notices of the optimizer's form, want 1"; cat "$err"; }; }
run "onebit, RANK=1" 0 HIPRESS_COMPRESSOR=onebit HIPRESS_OPTIMIZER=auto RANK=1 "$calls" one &&
    { [ "$(notices)" -eq 0 ] || hp_fail "onebit, RANK=1: $(notices) notices of the optimizer's form, want 0"; }
run "onebit, sgd" 0 HIPRESS_COMPRESSOR=onebit HIPRESS_OPTIMIZER=sgd "$calls" one &&
    { [ "$(notices)" -eq 0 ] || hp_fail "onebit, sgd: $(notices) notices of the optimizer's form, want 0"; }
if run "bad value" 1 HIPRESS_COMPRESSOR=bogus "$calls" one; then
    [ "$(grep -c . "$err")" -eq 1 ] && grep -q "^hipress: error: HIPRESS_COMPRESSOR='bogus': " "$err" ||
        { hp_fail "bad value: want one 'hipress: error: HIPRESS_COMPRESSOR=...' line"; cat "$err"; }
    grep -q '^nccl_calls' "$out" && hp_fail "bad value: the call ran"
fi
if run "unknown name" 1 HIPRESS_COMPRESOR=fp16 "$calls" one; then
    grep -q "^hipress: error: HIPRESS_COMPRESOR='fp16': unknown setting" "$err" ||
        { hp_fail "unknown name: no error line"; cat "$err"; }
fi

# 3.
if run "local scope" 0 "$local_" "$HP_BUILDDIR/tests/gpu/nccl/.libs"; then
    grep -q '^nccl_local: ok' "$out" || hp_fail "local scope: no ok line"
    n=$(grep -c '^hipress: error: ncclAllReduce was called, but no NCCL library in this process defines it' "$err")
    [ "$n" -eq 1 ] || { hp_fail "no NCCL: $n error lines, want 1"; cat "$err"; }
fi
exit $status
