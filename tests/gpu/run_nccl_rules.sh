#!/bin/sh
# The compressed ncclAllReduce under the stand-ins' strict rules
# (tests/gpu/nccl_rules.c; doc/standins.md, "The rules the stand-ins
# keep"): a rule broken stops a process with 87 and a line naming both
# sides; every case must pass with the same bits on every rank:
#   destroy, finalize  a communicator ended right after a stream-ordered
#                      call: its memory freed in stream order;
#   twostream          one communicator from two streams, stream-ordered
#                      and host-synchronous calls in turn;
#   localfail          one rank's wait fails, each wait of a call in turn:
#                      every rank still makes the same NCCL calls (the
#                      stand-in NCCL compares them) and ends alike;
#   capfail            one rank's capture query fails: no rank alone takes
#                      the real ncclAllReduce;
#   probe              a first compressed call while another stream holds an
#                      NCCL operation its peer makes later: nothing in the
#                      call waits for the whole device;
#   groupa2a           the program's group of an allreduce with an
#                      ncclAlltoAll (ncclGather, ncclScatter): passed to NCCL
#                      in the group, exact;
# at 2 ranks, with the immediate and the deferred schedules, and at 3.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-120}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

prog="$HP_BUILDDIR/tests/gpu/nccl_rules"
mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
emu="$mock/libhipress_cuda_emu.so"
if [ ! -e "$emu" ]; then
    echo "SKIP: no emulated CUDA module ($emu): a build without CUDA"
    exit 77
fi
for f in "$prog" "$mock/libcuda.so.1" "$mock/libnccl.so.2"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing"; exit 1; }
done
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# rule CASE NP DEFERRED [MPIRUN ARGS...]
rule() {
    c=$1 np=$2 d=$3
    shift 3
    t0=$(date +%s)
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_CUDA_MODULE="$emu" -x MOCK_NCCL_MPI=1 \
        -x HIPRESS_NCCL=compress -x MOCK_NCCL_TIMEOUT=30 -x MOCK_CUDA_DEFERRED=$d -x MOCK_CUDA_SEED=$np$d "$@" \
        "$prog" "$c" "$mock/libcuda.so.1" >"$out" 2>"$err"
    rc=$?
    echo "# $c np $np MOCK_CUDA_DEFERRED=$d $*: exit $rc in $(( $(date +%s) - t0 )) s"
    if [ $rc -ne 0 ] || ! grep -q "^nccl_rules $c: ok$" "$out" || grep -q 'deadlock' "$err"; then
        hp_fail "$c np $np MOCK_CUDA_DEFERRED=$d $*"
        cat "$out"
        grep -v 'lossy stages' "$err" | head -40
    fi
}

for c in destroy finalize twostream localfail capfail probe groupa2a; do
    rule $c 2 0
    rule $c 2 1
done
rule destroy 3 2
rule twostream 3 2
rule localfail 3 2
exit $status
