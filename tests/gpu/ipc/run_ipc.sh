#!/bin/sh
# The IPC stand-in NCCL (tests/gpu/ipc/) and the kit's programs without a GPU:
#   1. check_ipc: the protocol between processes on host threads;
#   2. (a build with CUDA) ipc/libnccl.so.2: its soname, no library of CUDA
#      or MPI needed at load, every function of the nccl.h this build uses
#      exported, every nccl* function hipress calls among them, nothing else;
#      its CUDA engine over the stand-in driver (ipc_one);
#   3. kit_preflight: no driver at all is "no GPU" (77); the stand-in driver
#      is a usable GPU, with CUDA IPC and stream memory operations between
#      processes (0); ipc_mock: those between 2 processes (a shared block,
#      flags across 2^32, streams that move on by the other process's
#      writes, no false deadlock while a peer sleeps), and the negative
#      check: a flag wait nothing can satisfy, in one process and as a
#      cycle across two, ends in the driver's deadlock report (86), not a
#      hang;
#   4. the kit's comparison: kit_mpi on host buffers at 2 ranks writes the
#      reference, kit_nccl at 2 ranks under libhipress_nccl.so over the
#      stand-in NCCL on shared memory, the stand-in driver and the emulated
#      module must give its lines;
#   5. HOOK: the IPC stand-in itself over the stand-in driver -- its CUDA
#      IPC (a handle names an allocation's shadow in shared memory, which
#      the peers map) and stream memory operations (flags in that memory,
#      waits the device executor polls, so a stream moves on by another
#      process's write with no host wait) -- with the emulated module:
#      kit_nccl at 2 and 3 ranks must give the reference's lines, every
#      call compressed (a build without CUDA has no IPC stand-in: skipped).
set -u
: "${HP_SRCDIR:=$(cd "$(dirname "$0")/../../.." && pwd)}"
: "${HP_BUILDDIR:=$(pwd)}"
. "$HP_SRCDIR/tests/mpi_env.sh"
B=$HP_BUILDDIR
status=0
# a sanitizer build: the ASan runtime first in every preload, no leak report
# (Open MPI's components are unloaded before it)
asan=$(ldd "$B/.libs/libhipress.so" 2>/dev/null | awk '/libasan/ { print $3 }')
[ -n "$asan" ] && export ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
preload() {
    echo "${asan:+$asan }$1"
}
fail() {
    echo "FAIL: $*"
    status=1
}
work=$(mktemp -d "${TMPDIR:-/tmp}/hipress-run-ipc.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# 1.
"$B/tests/gpu/ipc/check_ipc" >"$work/check.out" 2>"$work/check.err"
rc=$?
cat "$work/check.out"
[ $rc -eq 0 ] && grep -q '^check_ipc: ok$' "$work/check.out" || { fail "check_ipc exited $rc"; cat "$work/check.err"; }

# 2.
lib=$B/tests/gpu/ipc/.libs/libnccl.so.2
if [ -e "$lib" ] && ! command -v nm >/dev/null 2>&1; then
    echo "# no nm (binutils): the IPC stand-in's exports not checked"
elif [ -e "$lib" ]; then
    inc=$(sed -n 's/^NCCL_CPPFLAGS = //p' "$B/Makefile" | tr ' ' '\n' | sed -n 's/^-I//p')
    hdr=
    for d in $inc; do [ -z "$hdr" ] && [ -f "$d/nccl.h" ] && hdr=$d/nccl.h; done
    soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$soname" = libnccl.so.2 ] || fail "the IPC stand-in's soname is '$soname'"
    needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    case $needed in *libcuda*|*libcudart*|*libmpi*|*libnccl*) fail "the IPC stand-in needs $needed" ;; esac
    nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ { print $3 }' | sort -u >"$work/exports"
    sed -n 's/^ncclResult_t  *\(nccl[A-Za-z]*\)(.*/\1/p; s/^const char\* *\(nccl[A-Za-z]*\)(.*/\1/p' "$hdr" |
        sort -u >"$work/declared"
    grep -rhoE 'nccl[A-Z][A-Za-z]*\(' "$HP_SRCDIR/src" "$HP_SRCDIR/mpi_wrappers" | tr -d '(' | sort -u |
        comm -12 - "$work/declared" >"$work/hipress"
    [ -s "$work/declared" ] || fail "no function declared in $hdr"
    missing=$(comm -23 "$work/declared" "$work/exports" | tr '\n' ' ')
    [ -z "$missing" ] || fail "nccl.h declares what the IPC stand-in does not export: $missing"
    missing=$(comm -23 "$work/hipress" "$work/exports" | tr '\n' ' ')
    [ -z "$missing" ] || fail "hipress calls what the IPC stand-in does not export: $missing"
    extra=$(grep -v '^nccl' "$work/exports" | tr '\n' ' ')
    [ -z "$extra" ] || fail "the IPC stand-in exports more than NCCL's names: $extra"
    echo "# ipc/libnccl.so.2: soname $soname, needs ${needed:-nothing}; exports all $(wc -l <"$work/declared") functions of $hdr, $(wc -l <"$work/hipress") of them called by hipress"
    # its CUDA engine on the stand-in driver, in stream order
    LD_LIBRARY_PATH=$B/tests/gpu/ipc/.libs:$B/tests/gpu/mock/.libs MOCK_CUDA_DEFERRED=1 "$B/tests/gpu/ipc/ipc_one" \
        "$B/tests/gpu/mock/.libs/libcuda.so.1" >"$work/one.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && grep -q '^ipc_one: ok' "$work/one.out" || { fail "ipc_one exited $rc"; cat "$work/one.out"; }
    grep '^ipc_one' "$work/one.out"
else
    echo "# no ipc/libnccl.so.2 (a build without CUDA): its exports not checked"
fi

# 3.
mock=$B/tests/gpu/mock/.libs
pre=$B/tests/gpu/kit/kit_preflight
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    "$pre" --need 13000 >"$work/pre.out" 2>&1
    rc=$?
    [ $rc -eq 77 ] && grep -q '^preflight: no GPU: no libcuda.so.1' "$work/pre.out" ||
        { fail "kit_preflight without a driver exited $rc"; cat "$work/pre.out"; }
fi
LD_LIBRARY_PATH=$mock "$pre" --need 13000 >"$work/pre.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q '^device 0: hipress mock device, sm_90' "$work/pre.out" && grep -q '^CUDA IPC: ok' "$work/pre.out" ||
    { fail "kit_preflight on the stand-in driver exited $rc, want 0"; cat "$work/pre.out"; }
LD_LIBRARY_PATH=$mock "$pre" --need 13010 >"$work/pre.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q '^preflight: STOP: the driver supports CUDA 13.0, the kit.s runtime needs 13.1' "$work/pre.out" ||
    { fail "kit_preflight accepted a driver older than the runtime (exit $rc)"; cat "$work/pre.out"; }

# ipc_mock MODE [NP]: the stand-in driver between NP processes (none: one);
# the output in $work/mock.out, the status in rc
ipc_mock() {
    if [ $# -gt 1 ]; then
        "$B/tests/gpu/nccl/nompi_launch" "$2" 30 "$B/tests/gpu/ipc/ipc_mock" "$mock/libcuda.so.1" "$1" >"$work/mock.out" 2>&1
    else
        timeout 30 "$B/tests/gpu/ipc/ipc_mock" "$mock/libcuda.so.1" "$1" >"$work/mock.out" 2>&1
    fi
    rc=$?
}
ipc_mock pingpong 2
[ $rc -eq 0 ] && grep -q '^ipc_mock: ok' "$work/mock.out" || { fail "ipc_mock pingpong exited $rc"; cat "$work/mock.out"; }
grep '^ipc_mock: ok' "$work/mock.out"
# a wait nothing can satisfy is reported, not a hang: in one process, and
# as a cycle across two (each reports; nompi_launch exits with the first
# failed rank's status, 124 after its limit)
for m in lonely:1 deadlock:2; do
    mode=${m%:*} want=${m#*:}
    if [ "$want" -gt 1 ]; then ipc_mock $mode "$want"; else ipc_mock $mode; fi
    n=$(grep -c 'deadlock: a cycle of waits' "$work/mock.out")
    if [ $rc -eq 86 ] && [ "$n" -eq "$want" ] &&
       grep -q 'waits at cuStreamWaitValue32 (the word at 0x[0-9a-f]* >= 0x1; it holds 0)' "$work/mock.out"; then
        echo "# ipc_mock $mode: the flag wait nothing can satisfy is reported as a deadlock by $n process(es)"
    else
        fail "ipc_mock $mode exited $rc with $n deadlock report(s), want 86 and $want report(s) naming the wait"
        cat "$work/mock.out"
    fi
done

# 4.
emu=$mock/libhipress_cuda_emu.so
nompi=$B/tests/gpu/mock_nompi/.libs
if [ ! -e "$emu" ] || [ ! -e "$nompi/libnccl.so.2" ]; then
    echo "# no emulated module or stand-in NCCL: the kit's comparison not run"
    exit $status
fi
hp_mpirun 2 -x LD_PRELOAD="$(preload "$B/.libs/libhipress.so")" -x ASAN_OPTIONS "$B/tests/gpu/kit/kit_mpi" --out "$work/ref2" >"$work/mpi.out" 2>&1 ||
    { fail "kit_mpi --out"; cat "$work/mpi.out"; }
grep '^kit_mpi: ok' "$work/mpi.out"
# kit_nccl NP NCCLDIR LABEL [ENV...]: over the NCCL in NCCLDIR
kit_nccl() {
    np=$1 dir=$2 label=$3
    shift 3
    env LD_LIBRARY_PATH="$dir:$mock" LD_PRELOAD="$(preload "$B/.libs/libhipress_nccl.so")" HIPRESS_NCCL=compress \
        HIPRESS_CUDA_MODULE="$emu" HIPRESS_STATS=1 "$@" \
        "$B/tests/gpu/nccl/nompi_launch" "$np" 300 "$B/tests/gpu/kit/kit_nccl" --ref "$work/ref$np" \
        >"$work/nccl.out" 2>"$work/nccl.err"
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q "^kit_nccl: ok, 30 ncclAllReduce calls at $np ranks" "$work/nccl.out" ||
       ! grep -Eq '^  nccl compressed +30$' "$work/nccl.err"; then
        fail "kit_nccl at $np ranks ($label) exited $rc, or not every call was compressed"
        cat "$work/nccl.out" "$work/nccl.err"
    else
        echo "# kit_nccl at $np ranks ($label): 30 compressed calls, the MPI path's bits"
    fi
}
kit_nccl 2 "$nompi" "the stand-in NCCL on shared memory" MOCK_NCCL_SHM=1

# 5. HOOK
ipc=$B/tests/gpu/ipc/.libs
if [ -e "$lib" ]; then
    hp_mpirun 3 -x LD_PRELOAD="$(preload "$B/.libs/libhipress.so")" -x ASAN_OPTIONS "$B/tests/gpu/kit/kit_mpi" --out "$work/ref3" >"$work/mpi.out" 2>&1 ||
        { fail "kit_mpi --out at 3 ranks"; cat "$work/mpi.out"; }
    for np in 2 3; do
        kit_nccl $np "$ipc" "the IPC stand-in on the stand-in driver" HP_IPC_TIMEOUT=60
    done
else
    echo "# HOOK skipped: no ipc/libnccl.so.2 (a build without CUDA)"
fi
exit $status
