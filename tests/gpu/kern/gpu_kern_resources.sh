#!/bin/sh
# The built CUDA module's kernels fit the devices it is built for: each
# kernel's registers, static shared memory and launch bounds, read from
# libhipress_cuda.so's own cubins, against the most threads per block its
# launcher gives it (tests/gpu/simt/simt_kern runs every launcher, grid shape
# and path on the SIMT emulator and prints them), one line a kernel for
# sm_90 (tests/gpu/kern/gpu_kern_resources.py says how).  First the check's
# self-test: each way of not fitting, planted in the module's numbers, must
# be caught.  cuobjdump --dump-resource-usage, where it is installed, must
# agree with what is read.
set -u
: "${HP_SRCDIR:=$(cd "$(dirname "$0")/../../.." && pwd)}"
: "${HP_BUILDDIR:=$(pwd)}"
mod="$HP_BUILDDIR/.libs/libhipress_cuda.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -f "$mod" ] || { echo "FAIL: $mod is missing (make builds it when configure finds CUDA)"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is missing"; exit 1; }
"$HP_BUILDDIR/tests/gpu/simt/simt_kern" --quick --large none --seeds 1 >"$tmp/simt" 2>&1 ||
    { echo "FAIL: simt_kern failed"; tail -n 20 "$tmp/simt"; exit 1; }
sed -n '/^# most threads per block:$/,/^simt_kern:/p' "$tmp/simt" | sed '1d;$d' >"$tmp/blocks"
tool=
for t in "$(command -v cuobjdump 2>/dev/null)" "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump"; do
    [ -n "$t" ] && [ -x "$t" ] && { tool=$t; break; }
done
[ -n "$tool" ] || echo "# no cuobjdump here: the cubins are read by the script alone"
status=0
python3 "$HP_SRCDIR/tests/gpu/kern/gpu_kern_resources.py" "$mod" "$tmp/blocks" --selftest || status=1
python3 "$HP_SRCDIR/tests/gpu/kern/gpu_kern_resources.py" "$mod" "$tmp/blocks" ${tool:+--cuobjdump "$tool"} || status=1
exit $status
