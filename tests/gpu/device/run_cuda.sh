#!/bin/sh
# The module's self-test kernel in a program linked by nvcc: on a machine
# with a GPU it must run and give the right results; without one (CI), the
# CUDA runtime must report the missing driver or device cleanly.
set -u
prog="${HP_BUILDDIR:-.}/tests/gpu/device/cuda_selftest"
[ -x "$prog" ] || { echo "FAIL: $prog is missing"; exit 1; }
out=$("$prog" 0 2>&1)
rc=$?
echo "# $out (exit $rc)"
if [ -e /dev/nvidia0 ] || [ -e /dev/dxg ]; then
    [ $rc -eq 0 ] || { echo "FAIL: a GPU is present but the self-test failed"; exit 1; }
else
    [ $rc -eq 2 ] || { echo "FAIL: without a GPU the self-test must fail cleanly (exit 2), got $rc"; exit 1; }
    echo "$out" | grep -Eq 'cudaError[A-Za-z]+' || { echo "FAIL: no CUDA error named"; exit 1; }
fi
exit 0
