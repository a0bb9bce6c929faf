#!/bin/sh
# hipress_info's GPU part: what the build has, and what the machine has,
# with no driver and with the stand-in driver (tests/gpu/mock/.libs).  Plain
# hipress_info creates no CUDA context; --gpu runs a kernel and says
# whether the GPU path works (exit 0) or why not (exit 1).
set -u
. "${HP_SRCDIR:-$(dirname "$0")/../../..}/tests/hp_test_lib.sh"

info="$HP_BUILDDIR/hipress_info"
mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
module=no
[ -f "$HP_BUILDDIR/.libs/libhipress_cuda.so" ] && module=yes
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# a real driver on this machine?
driver=no
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64 /usr/lib/wsl/lib; do
    [ -e "$d/libcuda.so.1" ] && driver=yes
done
echo "# CUDA module: $module, CUDA driver on this machine: $driver"

expect() {
    grep -Eq "$2" "$out" || { hp_fail "$1: no line matching '$2'"; cat "$out"; }
}

"$info" >"$out" 2>&1 || hp_fail "hipress_info failed"
expect "plain" '^gpu:$'
if [ $module = yes ]; then
    expect "plain" '^  cuda module  built: CUDA [0-9.]+, sm_'
    expect "plain" "^  module file  $HP_BUILDDIR/.libs/libhipress_cuda.so\$"
else
    expect "plain" '^  cuda module  not built'
fi
expect "plain" '^  nccl         '
if [ $driver = no ]; then
    expect "plain" '^  driver       no CUDA driver'
    expect "plain" '^  gpu path     not usable here'
    "$info" --gpu >"$out" 2>&1 && hp_fail "--gpu without a driver must exit 1"
    expect "--gpu, no driver" '^  gpu path     not usable here'
fi

# the stand-in driver, found as libcuda.so.1
LD_LIBRARY_PATH="$mock${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$info" >"$out" 2>&1 || hp_fail "hipress_info with the stand-in driver failed"
if [ $module = yes ]; then
    expect "stand-in" '^  driver       CUDA 13\.0, 1 device$'
    expect "stand-in" '^  device 0     hipress mock device, sm_90, 1\.0 GiB$'
    expect "stand-in" '^  gpu path     usable \(hipress_info --gpu'
else
    expect "stand-in" '^  driver       libcuda.so.1 found$'
    expect "stand-in" '^  gpu path     not usable here: this build has no CUDA module'
fi

HIPRESS_CUDA_MODULE=/nonexistent/libhipress_cuda.so "$info" >"$out" 2>&1
if [ $module = yes ]; then
    expect "HIPRESS_CUDA_MODULE" '^  module file  not found \(looked for /nonexistent/libhipress_cuda.so\)$'
fi
HIPRESS_CUDA_MODULE=/nonexistent/libhipress_cuda.so "$info" --gpu >"$out" 2>&1 && hp_fail "--gpu with no module must exit 1"
HIPRESS_GPU=bogus "$info" --gpu >"$out" 2>&1 && hp_fail "--gpu with a bad setting must exit 1"
expect "--gpu, bad setting" "^hipress_info: error: HIPRESS_GPU='bogus'"
exit $status
