#!/bin/sh
# The NCCL-only library (libhipress_nccl.so) where there is no Open MPI: a
# torchrun job's shape.  tests/nompi_calls is tests/nccl_calls.c linked to
# the stand-in NCCL built without MPI (tests/mock_nompi/libnccl.so.2), so
# nothing in the process needs libmpi.
#   1. libhipress_nccl.so has no NEEDED libmpi, libopen-*, libhwloc, names no
#      MPI, Open MPI or hwloc symbol, and exports only nccl* and hipress_*;
#      nompi_calls and its stand-ins need none of them either;
#   2. where a mount namespace can be made (root, unshare -m): every file of
#      libmpi, libopen-rte, libopen-pal and libhwloc that libhipress.so
#      loads is hidden (an empty file mounted over it), and there
#        - libhipress.so cannot be loaded (the loader refuses it: the
#          issue's failure, which shows the hiding holds),
#        - under libhipress_nccl.so every case of nccl_calls passes (each
#          call reaches the stand-in with its arguments unchanged), one call
#          is counted, hipress_library() says libhipress_nccl,
#        - one in-place sum on the stand-in driver's device memory comes back
#          bit for bit, by default and with HIPRESS_NCCL=compress (the
#          emulated CUDA module: settings agreed over NCCL, then passed
#          through, one rank), with HIPRESS_STATS's table at exit;
#      elsewhere the same runs without the hiding, and ldd shows no libmpi;
#   3. outside it, hipress_library() names each library, and hipress_info
#      lists both and names the preloaded one.
set -u
. "${HP_SRCDIR:-$(dirname "$0")/..}/tests/hp_test_lib.sh"

lib="$HP_BUILDDIR/.libs/libhipress_nccl.so"
prog="$HP_BUILDDIR/tests/nompi_calls"
mock="$HP_BUILDDIR/tests/mock/.libs"
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
nm -D --defined-only "$lib" | grep -q ' T ncclAllReduce$' || hp_fail "libhipress_nccl.so does not define ncclAllReduce"
for f in "$prog" "$HP_BUILDDIR/tests/mock_nompi/.libs/libnccl.so.2" "$mock/libcuda.so.1" ${emu:+"$emu"}; do
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
