#!/bin/sh
# The device kit (scripts/gpu-kit) made from this build, and its
# self-containment check: the kit's one command run from a copy of the
# working tree in a mount namespace where Open MPI, PMIx, hwloc, libevent,
# Check, the CUDA toolkit, zlib, libudev and this build are hidden; every
# device step says "skipped: needs a GPU" and its stand-in form passes (the
# stand-in driver, the emulated module, the stand-in NCCL on shared memory:
# the multi-process compressed ncclAllReduce at 2, 3 and 4 processes must
# give the MPI path's bits recorded in the kit).
#   1. scripts/gpu-kit --build-dir BUILD: the kit is made, at most 64 MiB
#      with the working tree, RUN one command of at most 2000 characters,
#      no path of this build left in its binaries, the IPC stand-in in it,
#      the MPI path's result lines for 2, 3 and 4 ranks recorded;
#   2. scripts/gpu-kit --selftest: exit 0;
#   3. a PyTorch importing an NCCL function the IPC stand-in lacks (a
#      library planted as KIT_TORCH_LIB) stops the run at the preflight,
#      before any other step, with a STOP verdict naming the function;
#   4. the kit without its copy of zlib (hidden in the namespace) fails
#      the self-test (its MPI step): the hiding holds and the check can
#      fail.
# Skipped (77) without CUDA (no module, no kernels to carry), without root
# or mount namespaces, without patchelf, or where Debian's Open MPI packages
# cannot be had (no apt cache, no network).
set -u
: "${HP_SRCDIR:=$(cd "$(dirname "$0")/../../.." && pwd)}"
: "${HP_BUILDDIR:=$(pwd)}"
kitsh=$HP_SRCDIR/scripts/gpu-kit
if [ ! -e "$HP_BUILDDIR/.libs/libhipress_cuda.so" ]; then
    echo "SKIP: a build without the CUDA module"
    exit 77
fi
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
    echo "SKIP: no mount namespace here (unshare -m needs root)"
    exit 77
fi
if ! command -v patchelf >/dev/null 2>&1; then
    echo "SKIP: no patchelf (scripts/install_deps.sh installs it)"
    exit 77
fi
if ! grep -q '^#define HP_CUDA_ARCH_LIST ".*\(sm_90\|compute_[1-8][0-9]\|compute_90\)' "$HP_BUILDDIR/config.h"; then
    echo "SKIP: this build has no code an sm_90 GPU runs"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/hipress-run-gpu-kit.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
status=0

# 1.
"$kitsh" --build-dir "$HP_BUILDDIR" "$work/gpu-kit" >"$work/make.log" 2>&1
rc=$?
cat "$work/make.log"
if [ $rc -eq 3 ]; then
    echo "SKIP: $(grep 'gpu-kit: error' "$work/make.log" | tail -n 1)"
    exit 77
fi
[ $rc -eq 0 ] || { echo "FAIL: scripts/gpu-kit exited $rc"; exit 1; }
grep -q '^gpu-kit: .*MiB (the working tree .* of 64 MiB), RUN [0-9]* characters' "$work/make.log" ||
    { echo "FAIL: no size line"; status=1; }
[ "$(cat "$work/gpu-kit/RUN")" = "bash gpu-kit/run.sh" ] || { echo "FAIL: RUN is '$(cat "$work/gpu-kit/RUN")'"; status=1; }
[ -f "$work/gpu-kit/ipc/libnccl.so.2" ] || { echo "FAIL: no IPC stand-in in the kit"; status=1; }
for np in 2 3 4; do
    [ "$(grep -c '^[0-9]' "$work/gpu-kit/ref/kit-ref-$np.txt" 2>/dev/null)" = $((30 * np)) ] ||
        { echo "FAIL: ref/kit-ref-$np.txt does not hold 30 lines per rank"; status=1; }
done
for f in "$work"/gpu-kit/bin/* "$work"/gpu-kit/lib/*.so "$work"/gpu-kit/ipc/* "$work"/gpu-kit/standin/*; do
    rp=$(patchelf --print-rpath "$f" 2>/dev/null)
    case $rp in
        *"$HP_BUILDDIR"*|*/usr/local/cuda*) echo "FAIL: $f has the library path $rp"; status=1 ;;
    esac
done

# 2.
"$kitsh" --selftest "$work/gpu-kit" >"$work/selftest.log" 2>&1
rc=$?
cat "$work/selftest.log"
[ $rc -eq 77 ] && { echo "SKIP: $(tail -n 1 "$work/selftest.log")"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL: the self-test exited $rc"; status=1; }

# 3.
if command -v cc >/dev/null 2>&1 &&
    echo 'extern int ncclNotInTheStandIn(void); int hp_f(void) { return ncclNotInTheStandIn(); }' |
        cc -shared -fPIC -x c - -o "$work/libfaketorch.so" 2>"$work/cc.log"; then
    KIT_TORCH_LIB=$work/libfaketorch.so "$kitsh" --selftest "$work/gpu-kit" >"$work/stop.log" 2>&1
    rc=$?
    echo "# the self-test with a PyTorch importing ncclNotInTheStandIn: exit $rc"
    grep '^FAIL  nccl_imports\|^verdict:' "$work/stop.log" | head -n 2
    if [ $rc -ne 1 ] || ! grep -q '^FAIL  nccl_imports .*STOP: MISSING from libnccl.so.2: ncclNotInTheStandIn' "$work/stop.log" ||
        ! grep -q '^verdict: STOP at nccl_imports' "$work/stop.log" || grep -q '^PASS  kern_standin' "$work/stop.log"; then
        echo "FAIL: the missing NCCL function did not stop the run at the preflight"
        cat "$work/stop.log"
        status=1
    fi
else
    echo "FAIL: no C compiler to plant a library with (cc)"
    status=1
fi

# 4. zlib gone from the kit (the namespace hides the machine's): nothing
# of Open MPI loads, the self-test must fail (only the step that runs
# Open MPI asked for)
rm -f "$work/gpu-kit/fallback/libz.so.1"
HP_KIT_STEPS=nccl "$kitsh" --selftest "$work/gpu-kit" >"$work/broken.log" 2>&1
rc=$?
echo "# the self-test of a kit without its zlib: exit $rc"
if [ $rc -ne 1 ] || ! grep -q '^FAIL  mpi_standin' "$work/broken.log"; then
    echo "FAIL: a broken kit passed the self-test (exit $rc)"
    cat "$work/broken.log"
    status=1
fi

exit $status
