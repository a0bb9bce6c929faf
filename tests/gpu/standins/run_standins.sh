#!/bin/sh
# The stand-ins' model (doc/dev/standins.md), without hipress: tests/gpu/standins/standins
# under tests/gpu/nccl/nompi_launch, the stand-in NCCL moving data through shared
# memory.  What must complete completes with the right bytes; what hangs on
# a GPU is reported as a deadlock (exit 86, the cycle of waits on stderr)
# well before any timeout; a count mismatch names both sides.
set -u
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"

prog="$HP_BUILDDIR/tests/gpu/standins/standins"
launch="$HP_BUILDDIR/tests/gpu/nccl/nompi_launch"
mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
for f in "$prog" "$launch" "$mock/libcuda.so.1"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing"; exit 1; }
done
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# run CASE NP WANT_EXIT [ENV...]: in $out and $err; the time in $t
run() {
    c=$1 np=$2 want=$3
    shift 3
    t0=$(date +%s)
    env MOCK_NCCL_SHM=1 MOCK_NCCL_TIMEOUT=60 "$@" "$launch" "$np" 120 "$prog" "$c" "$mock/libcuda.so.1" \
        >"$out" 2>"$err"
    rc=$?
    t=$(( $(date +%s) - t0 ))
    echo "# $c np $np $*: exit $rc in $t s"
    if [ $rc -ne "$want" ]; then
        hp_fail "$c np $np: exit $rc, want $want"
        cat "$out" "$err"
        return 1
    fi
    return 0
}

for np in 2 3; do
    run ok $np 0 && { grep -q '^standins ok: ok$' "$out" || hp_fail "ok np $np: no ok line"; }
done
run async 2 0
run preload 2 0
for d in 0 1 2; do
    run ok 2 0 MOCK_CUDA_DEFERRED=$d MOCK_CUDA_SEED=$d
done
run order 1 0 MOCK_CUDA_DEFERRED=1 && grep '^# seed' "$out"
run capture 1 0 && grep -q 'cuMemAlloc during a global-mode capture of stream .* (on another thread): prohibited' "$err" ||
    hp_fail "capture: no line naming the prohibited call"
run abort 2 0

# a pair connects in the ncclGroupEnd of its first group with a send or
# receive: one that the peer reaches only after this rank's is a hang
run connect 2 0 MOCK_NCCL_TIMEOUT=2 &&
    { grep -q "^mock_nccl rank 0: a group with a send or receive with rank 1 (their first on communicator [0-9a-f]*: NCCL connects them in it) waits for rank 1 to reach its own, and not within MOCK_NCCL_TIMEOUT$" "$err" ||
      hp_fail "connect: no line naming the pair"; }

# the rules of stream-ordered memory: a broken one stops the process (87)
# with a line naming the use and the free, or the allocation
run freeuse 1 87 MOCK_CUDA_DEFERRED=1 &&
    { grep -q "cuMemFree(0x[0-9a-f]*) frees stream-ordered memory (cuMemAllocAsync on stream [0-9]*) at once, while stream [0-9]*'s entry #[0-9]*, a set of 4096 bytes at 0x[0-9a-f]*, uses it and has not run" "$err" ||
      hp_fail "freeuse: no line naming the free and the queued set"; }
run freelate 1 87 &&
    { grep -q "stream [0-9]*'s entry #[0-9]*, a kernel (host function 0x[0-9a-f]*) uses device memory at 0x[0-9a-f]* after its free (cuMemFreeAsync(0x[0-9a-f]*), stream [0-9]*'s entry #[0-9]*)" "$err" ||
      hp_fail "freelate: no line naming the kernel and the free"; }
run unordered 1 87 MOCK_CUDA_DEFERRED=1 &&
    { grep -q "stream [0-9]*'s entry #1, a kernel (host function 0x[0-9a-f]*) uses device memory at 0x[0-9a-f]*, allocated by cuMemAllocAsync on stream [0-9]* (its entry #1), with no event ordering it" "$err" ||
      hp_fail "unordered: no line naming the use and the allocation"; }

# deadlocks: reported (the launcher sees 86), the cycle named, fast
for c in sendsend devsync lazy onecomm; do
    for d in 0 1; do
        run $c 2 86 MOCK_CUDA_DEFERRED=$d || continue
        grep -q '^mock_cuda rank [01] (pid [0-9]*): deadlock: a cycle of waits' "$err" ||
            hp_fail "$c: no deadlock report"
        grep -q 'waits at a group of 1 ncclSend and 0 ncclRecv (communicator [0-9a-f]*, operation #[12]) for rank [01] to reach the matching operation' "$err" ||
            hp_fail "$c: the report does not name the send and its peer"
        case $c in
        onecomm) grep -q 'waits at a wait for an event of stream' "$err" ||
            hp_fail "onecomm: the report does not show the receive ordered after the send" ;;
        *) grep -q 'has not enqueued the matching operation' "$err" ||
            hp_fail "$c: the report does not say what the peer lacks" ;;
        esac
        case $c in
        devsync) grep -q 'waits in cuMemAlloc (a device-wide synchronisation)' "$err" || hp_fail "devsync: cuMemAlloc not named" ;;
        lazy) grep -q 'waits in the first launch of a kernel (lazy loading) (a device-wide synchronisation)' "$err" ||
            hp_fail "lazy: the first launch not named" ;;
        esac
        [ "$t" -lt 20 ] || hp_fail "$c: reported after $t s"
        [ "$d" = 0 ] && [ "$c" = devsync ] && sed -n '/deadlock/,$p' "$err" | head -12
    done
done

# the ranks' calls differ: stopped (87) when the second is issued, naming
# both ranks and both calls
if run mismatch 3 87; then
    grep -Eq "^mock_nccl rank [01] \(pid [0-9]*\): the NCCL calls on communicator [0-9a-f]* differ between ranks: (rank 1's ncclRecv #1 from rank 0 \(99 x float32, after its collective #0\) meets rank 0's ncclSend #1 to rank 1 \(100 x float32, after its collective #0\)|rank 0's ncclSend #1 to rank 1 \(100 x float32, after its collective #0\) meets rank 1's ncclRecv #1 from rank 0 \(99 x float32, after its collective #0\))$" "$err" ||
        { hp_fail "mismatch: no line naming both sides"; cat "$err"; }
fi
if run collmismatch 2 87; then
    grep -q "^mock_nccl rank [01] (pid [0-9]*): the NCCL calls on communicator [0-9a-f]* differ between ranks: rank [01]'s collective #1 is ncclAllReduce of [45] x int64 (max), rank [01]'s is ncclAllReduce of [45] x int64 (max)$" "$err" ||
        { hp_fail "collmismatch: no line naming both sides"; cat "$err"; }
fi
exit $status
