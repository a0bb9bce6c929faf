#!/bin/sh
# The NCCL-only library (libhipress_nccl.so) where there is no Open MPI: a
# torchrun job's shape.  tests/gpu/nccl/nompi_calls is tests/gpu/nccl/nccl_calls.c linked to
# the stand-in NCCL built without MPI (tests/gpu/mock_nompi/libnccl.so.2), so
# nothing in the process needs libmpi.
#   1. libhipress_nccl.so has no NEEDED libmpi, libopen-*, libhwloc, names no
#      MPI, Open MPI or hwloc symbol, and exports only nccl* and hipress_*;
#      nompi_calls and its stand-ins need none of them either;
#   2. where a mount namespace can be made (root, unshare -m): every file of
#      libmpi, libopen-rte, libopen-pal and libhwloc that libhipress.so
#      loads is hidden (an empty file mounted over it), and there
#        - libhipress.so cannot be loaded (the loader refuses it: the
#          failure a job without MPI would meet, which shows the hiding
#          holds),
#        - under libhipress_nccl.so every case of nccl_calls passes (each
#          call reaches the stand-in with its arguments unchanged), one call
#          is counted, hipress_library() says libhipress_nccl,
#        - one in-place sum on the stand-in driver's device memory comes back
#          bit for bit, by default and with HIPRESS_NCCL=compress (the
#          emulated CUDA module: settings agreed over NCCL, then passed
#          through, one rank), with HIPRESS_STATS's table at exit;
#        - multi-rank compressed ncclAllReduce: tests/gpu/nccl/nompi_compress at 2, 3
#          and 4 processes of a torchrun-like launcher (tests/gpu/nccl/nompi_launch),
#          the stand-in NCCL moving the data between them through shared
#          memory (MOCK_NCCL_SHM=1): every case ok (the same bits on every
#          rank, fp16 on the fp16 grid exact, fp16 within its bound, error
#          feedback conserved, float32 and float16, sum and avg, HIPRESS_ALGO
#          fixed per communicator, non-blocking communicators), rank 0's HIPRESS_STATS counting every
#          call compressed; host-synchronous (HIPRESS_NCCL_ASYNC=off), and
#          at 3 processes stream-ordered (auto, MOCK_CUDA_DEFERRED=1: some
#          calls with no host synchronisation at all); the stand-in
#          dropping one rank's messages (MOCK_NCCL_SHM_DROP=1: NaN) or
#          flipping a bit in each (MOCK_NCCL_SHM_FLIP=1: each check of the
#          values sees it) fails the test;
#          a rank that dies before its first call ends its peer's wait at
#          once, naming it (no hang: the launcher's bound is not reached);
#      elsewhere the same runs without the hiding, and ldd shows no libmpi;
#   3. outside it, hipress_library() names each library, and hipress_info
#      lists both and names the preloaded one.
set -u
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"

lib="$HP_BUILDDIR/.libs/libhipress_nccl.so"
prog="$HP_BUILDDIR/tests/gpu/nccl/nompi_calls"
mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
emu="$mock/libhipress_cuda_emu.so"
for f in "$lib" "$prog" "$mock/libcuda.so.1"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing"; exit 1; }
done
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
preload=$lib
[ -n "$HP_ASAN" ] && preload="$HP_ASAN $lib"

# 1.
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "# libhipress_nccl.so needs: $needed"
case " $needed" in
    *" libmpi"* | *" libopen-"* | *" libhwloc"*) hp_fail "libhipress_nccl.so needs MPI or hwloc: $needed" ;;
esac
bad=$(nm -D --undefined-only "$lib" | awk '{ print $NF }' | grep -E '^(P?MPI_|ompi_|opal_|orte_|hwloc_)')
[ -z "$bad" ] || hp_fail "libhipress_nccl.so names MPI or hwloc symbols: $(echo $bad)"
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TtDdBbRrWwVv]/ { print $NF }' | grep -Ev '^(nccl|hipress_)|^_')
[ -z "$bad" ] || hp_fail "libhipress_nccl.so exports more than nccl* and hipress_*: $(echo $bad)"
for s in ncclAllReduce ncclAlltoAll ncclGather ncclScatter; do
    nm -D --defined-only "$lib" | grep -q " T $s\$" || hp_fail "libhipress_nccl.so does not define $s"
done
for f in "$prog" "$HP_BUILDDIR/tests/gpu/mock_nompi/.libs/libnccl.so.2" "$mock/libcuda.so.1" ${emu:+"$emu"}; do
    [ -e "$f" ] || continue
    if readelf -d "$f" | grep NEEDED | grep -Eq 'libmpi|libopen-|libhwloc'; then
        hp_fail "$f needs MPI or hwloc (the test would not show anything)"
    fi
done

# 2.  HIDE: files to hide (empty when there is no mount namespace)
hide=
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    for f in $(ldd "$HP_LIB" | awk '/libmpi|libopen-rte|libopen-pal|libhwloc/ { print $3 }'); do
        hide="$hide $(readlink -f "$f")"
    done
fi
: >"$work/empty"
# inside CMD ARGS...: run in the namespace with $hide hidden (or plainly)
inside() {
    if [ -z "$hide" ]; then
        "$@"
        return
    fi
    HP_HIDE=$hide HP_EMPTY=$work/empty unshare -m sh -c '
        mount --make-rprivate / 2>/dev/null
        for f in $HP_HIDE; do
            mount --bind "$HP_EMPTY" "$f" || { echo "run_nompi: cannot hide $f" >&2; exit 99; }
        done
        exec "$@"' sh "$@"
}
out=$work/out err=$work/err
# run LABEL WANT_EXIT PRELOAD ENV... -- ARGS... (nompi_calls ARGS)
run() {
    label=$1 want=$2 pre=$3
    shift 3
    inside env LD_PRELOAD="$pre" "$@" >"$out" 2>"$err"
    rc=$?
    echo "# $label: exit $rc"
    if [ $rc -ne "$want" ]; then
        hp_fail "$label: exit $rc, want $want"
        cat "$out" "$err"
        return 1
    fi
    return 0
}

if [ -n "$hide" ]; then
    echo "# hidden in a mount namespace:$hide"
    # an empty file is "too short" (the loader stops: 127); a missing one
    # "cannot be preloaded" (ignored: nompi_calls finds no hipress, 2)
    inside env LD_PRELOAD="$HP_LIB" "$prog" one >"$out" 2>"$err"
    rc=$?
    echo "# libhipress.so without libmpi: exit $rc"
    if [ $rc -eq 0 ] || ! grep -Eq 'libmpi|libhwloc|libopen-|cannot be preloaded' "$err"; then
        hp_fail "libhipress.so: the loader did not refuse it (exit $rc)"
        cat "$out" "$err"
    fi
else
    echo "# no mount namespace here (needs root and unshare -m): libmpi is not hidden"
    l=$(env LD_PRELOAD="$lib" ldd "$prog" | grep -E 'libmpi|libopen-|libhwloc')
    [ -z "$l" ] || hp_fail "the process would load: $l"
fi

if run "all cases" 0 "$preload" "$prog" all "$mock"; then
    grep -q '^nccl_calls: ok' "$out" || hp_fail "all cases: no ok line"
fi
if run "one call" 0 "$preload" "$prog" one; then
    grep -q '^nccl_calls: library libhipress_nccl$' "$out" || { hp_fail "one call: not libhipress_nccl"; cat "$out"; }
    grep -q '^nccl_calls: result 0, calls 1 eligible 1 passthrough 0$' "$out" ||
        { hp_fail "one call: counts"; cat "$out"; }
fi
if run "HIPRESS_DEBUG=INFO" 0 "$preload" HIPRESS_DEBUG=INFO RANK=1 "$prog" one; then
    grep -Eq '^hipress [^ :]+:[0-9]+:1 info hipress .* settings loaded without MPI' "$err" ||
        { hp_fail "HIPRESS_DEBUG=INFO: no 'settings loaded without MPI' line"; cat "$err"; }
fi
if run "bad setting" 1 "$preload" HIPRESS_COMPRESSOR=bogus "$prog" one; then
    grep -q "^hipress: error: HIPRESS_COMPRESSOR='bogus': " "$err" || { hp_fail "bad setting: no error line"; cat "$err"; }
fi
if run "device, pass" 0 "$preload" "$prog" device "$mock"; then
    grep -q '^nccl_calls: device ok, 1 calls reached NCCL$' "$out" || { hp_fail "device, pass"; cat "$out" "$err"; }
fi
if [ -e "$emu" ]; then
    if run "device, HIPRESS_NCCL=compress" 0 "$preload" HIPRESS_NCCL=compress HIPRESS_COMPRESSOR=onebit \
        HIPRESS_CUDA_MODULE="$emu" HIPRESS_STATS=1 HIPRESS_DEBUG=WARN "$prog" device "$mock"; then
        # the settings' agreement (one ncclAllReduce), then the user's call
        grep -q '^nccl_calls: device ok, 2 calls reached NCCL$' "$out" ||
            { hp_fail "compress: want the agreement and the call"; cat "$out" "$err"; }
        grep -q 'passed through on this communicator: the communicator has one rank' "$err" ||
            { hp_fail "compress: no one-rank line"; cat "$err"; }
        grep -q '^hipress statistics (rank 0, without MPI)$' "$err" || { hp_fail "compress: no table"; cat "$err"; }
        grep -Eq '^  nccl compressed +0$' "$err" || { hp_fail "compress: a one-rank call was compressed"; cat "$err"; }
    fi
else
    echo "# no emulated CUDA module (a build without CUDA): HIPRESS_NCCL=compress not run"
fi

# multi-rank: launch LABEL NP ENV... (nompi_compress under nompi_launch, in
# the namespace); exit status in $rc, outputs in $out and $err
launch() {
    label=$1 np=$2
    shift 2
    inside env LD_PRELOAD="$preload" MOCK_NCCL_SHM=1 MOCK_CUDA_DEVICES=$np HIPRESS_NCCL=compress \
        HIPRESS_CUDA_MODULE="$emu" HIPRESS_MIN_BYTES=16K HIPRESS_STATS=1 HIPRESS_DEBUG=WARN "$@" \
        "$HP_BUILDDIR/tests/gpu/nccl/nompi_launch" $np 600 "$HP_BUILDDIR/tests/gpu/nccl/nompi_compress" "$mock/libcuda.so.1" \
        >"$out" 2>"$err"
    rc=$?
    n=$(sed -n 's/^nompi_compress: ok, \([0-9]*\) compressed calls, \([0-9]*\) of them.*/\1 \2/p' "$out")
    echo "# $label: exit $rc, ${n:-no ok line} (compressed calls, with no host synchronisation)"
}
if [ -e "$emu" ] && [ -e "$HP_BUILDDIR/tests/gpu/nccl/nompi_compress" ]; then
    for np in 2 3 4; do
        for mode in off auto; do
            [ $mode = auto ] && [ $np -ne 3 ] && continue
            if [ $mode = auto ]; then
                launch "np $np, HIPRESS_NCCL_ASYNC=auto, MOCK_CUDA_DEFERRED=1" $np HIPRESS_NCCL_ASYNC=auto \
                    MOCK_CUDA_DEFERRED=1
            else
                launch "np $np, HIPRESS_NCCL_ASYNC=off" $np HIPRESS_NCCL_ASYNC=off
            fi
            set -- $n
            if [ $rc -ne 0 ] || [ $# -ne 2 ]; then
                hp_fail "nompi_compress np $np ($mode)"
                cat "$out" "$err"
                continue
            fi
            grep '^# ' "$out" | head -3
            # rank 0's table (RANK 0 prints it): every call compressed
            rows=$(sed -n 's/^  nccl compressed  *\([0-9][0-9]*\)$/\1/p' "$err" | tr '\n' ' ')
            [ "$rows" = "$1 " ] || { hp_fail "np $np ($mode): 'nccl compressed' is '$rows', want $1"; cat "$err"; }
            if [ $mode = auto ]; then
                [ "$2" -gt 0 ] || hp_fail "np $np: no call stream-ordered (every one synchronised the host)"
            fi
            ! grep -q 'compressed ncclAllReduce of [0-9]* floats failed' "$err" ||
                { hp_fail "np $np: a failed call"; cat "$err"; }
        done
    done
    # the mutations: the stand-in drops rank 1's messages (the decoders
    # reject them: NaN on every rank), or flips one bit in each (decoded:
    # the checks of the values must see it)
    launch "np 2, MOCK_NCCL_SHM_DROP=1 (must fail)" 2 MOCK_NCCL_SHM_DROP=1 HIPRESS_NCCL_ASYNC=off
    if [ $rc -eq 0 ] || ! grep -q '^nompi_compress rank [0-9]*:[0-9]*: .*not finite' "$err"; then
        hp_fail "MOCK_NCCL_SHM_DROP=1: the test did not fail (exit $rc)"
        cat "$out" "$err"
    fi
    launch "np 3, MOCK_NCCL_SHM_FLIP=1 (must fail)" 3 MOCK_NCCL_SHM_FLIP=1 HIPRESS_NCCL_ASYNC=off HP_RDZV_TIMEOUT=20
    for what in 'the results differ between ranks' 'is not the exact sum' 'off by .*, bound' 'conservation at'; do
        grep -q "^nompi_compress rank [0-9]*:[0-9]*: .*$what" "$err" ||
            hp_fail "MOCK_NCCL_SHM_FLIP=1: no '$what' failure (exit $rc)"
    done
    [ $rc -ne 0 ] || hp_fail "MOCK_NCCL_SHM_FLIP=1: the test did not fail"
    # a message the device decoders reject fails the call, NaN and
    # ncclSuccess, for float16 as for float32 (not an error of its narrowing)
    ! grep -q '^nompi_compress rank [0-9]*:[0-9]*: .*ncclAllReduce returned' "$err" ||
        hp_fail "MOCK_NCCL_SHM_FLIP=1: a call returned an error"
    # a dead peer: rank 1 exits before its first call; rank 0's wait ends
    # by itself (the stand-in sees the process gone), well before the
    # launcher's bound
    t0=$(date +%s)
    launch "np 2, rank 1 dies" 2 NOMPI_COMPRESS_DIE=1 HP_RDZV_TIMEOUT=20 MOCK_NCCL_TIMEOUT=20
    t=$(( $(date +%s) - t0 ))
    echo "# (in $t s)"
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q 'mock_nccl (shm) rank 0: rank 1 (pid [0-9]*) has exited' "$err" ||
        ! grep -q '^nompi_launch: rank 0 (pid [0-9]*) exited with 1$' "$err"; then
        hp_fail "a dead peer: exit $rc, want rank 0 to fail naming rank 1"
        cat "$out" "$err"
    fi
else
    echo "# no emulated CUDA module (a build without CUDA): multi-rank compression not run"
fi

# 3.
libname() {
    env LD_PRELOAD="$1" "$prog" one 2>/dev/null | sed -n 's/^nccl_calls: library //p'
}
[ "$(libname "$HP_PRELOAD")" = libhipress ] || hp_fail "libhipress.so: hipress_library() is '$(libname "$HP_PRELOAD")'"
[ "$(libname "$preload")" = libhipress_nccl ] || hp_fail "libhipress_nccl.so: hipress_library() is '$(libname "$preload")'"
# hipress_info names the preloaded library (it needs libmpi itself: outside)
env LD_PRELOAD="$preload" "$HP_BUILDDIR/hipress_info" >"$out" 2>"$err" || hp_fail "hipress_info under libhipress_nccl.so"
grep -Eq '^  in this process +libhipress_nccl$' "$out" || { hp_fail "hipress_info: no 'in this process libhipress_nccl'"; cat "$out"; }
grep -Eq '^  libhipress_nccl.so +ncclAllReduce only' "$out" || hp_fail "hipress_info: libhipress_nccl.so not listed"
exit $status
