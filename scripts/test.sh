#!/bin/sh
# The test suite, exactly as CI runs it (.ci/run calls this script):
#   1. install what is missing (Debian packages, and Horovod in a venv),
#   2. build from scratch in _build and run `make check` (Check unit suites,
#      mpirun tests at 1 to 8 ranks, fuzz replay, plugin, docs),
#   3. `make install` into a staging root (_stage) and check what it installed
#      (the libraries, headers, programs and the Python package),
#   4. build the Check suites with ASan+UBSan in _build_asan and run them,
#      with the GPU path's drivers (stand-in CUDA driver and NCCL),
#   5. build without CUDA and NCCL in _build_nocuda and run the tests of the
#      GPU path's host side there (the same library must work on the CPU).
# CUDA is optional: configure builds the CUDA module when it finds the
# toolkit in $CUDA_HOME or /usr/local/cuda; no GPU is needed to test.
# Usage: scripts/test.sh [--no-sanitizers]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)

sh scripts/install_deps.sh
# a real Horovod for tests/study/run_horovod.sh (its wheel is cached: minutes the
# first time, seconds after)
sh scripts/install_horovod.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

./autogen.sh >/dev/null
rm -rf _build && mkdir -p _build
(cd _build && ../configure -q && make -j"$jobs" && make -j"$jobs" check) || {
    echo "test.sh: make check failed; logs:" >&2
    for f in _build/test-suite.log _build/tests/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 60 "$f" >&2; }; done
    exit 1
}

# install into a staging root and check what a user gets
rm -rf _stage
(cd _build && make -s install DESTDIR="$top/_stage" >/dev/null)
prefix=$(sed -n 's/^prefix=//p' _build/hipress.pc)
installed="lib/libhipress.so include/hipress.h include/hipress_compressor.h
           lib/pkgconfig/hipress.pc bin/hipress_info bin/hipress-bench"
grep -q '^#define HP_HAVE_CUDA_MODULE 1' _build/config.h && installed="$installed lib/hipress/libhipress_cuda.so"
# the NCCL-only library (torchrun), with NCCL: it must need no MPI or hwloc
nccl_only=
grep -q '^#define HP_HAVE_NCCL_INTERCEPT 1' _build/config.h && nccl_only=lib/libhipress_nccl.so &&
    installed="$installed $nccl_only"
for f in $installed; do
    [ -e "_stage$prefix/$f" ] || { echo "test.sh: make install did not install $f" >&2; exit 1; }
done
if [ -n "$nccl_only" ] && readelf -d "_stage$prefix/$nccl_only" | grep NEEDED | grep -Eq 'libmpi|libopen-|libhwloc'; then
    echo "test.sh: the installed $nccl_only needs MPI or hwloc" >&2
    exit 1
fi
LD_LIBRARY_PATH="$top/_stage$prefix/lib" "_stage$prefix/bin/hipress_info" --compressors >/dev/null ||
    { echo "test.sh: installed hipress_info does not run" >&2; exit 1; }
# the Python package (the DDP comm hook), where the system's python3 looks
# under the prefix, pointing at the installed library
pydir=$(sed -n 's/^HP_PYTHONDIR = //p' _build/Makefile | sed "s|\${prefix}|$prefix|")
[ -f "_stage$pydir/hipress/torch.py" ] || { echo "test.sh: make install did not install the Python package ($pydir)" >&2; exit 1; }
grep -q "^LIBDIR = \"$prefix/lib\"" "_stage$pydir/hipress/_paths.py" ||
    { echo "test.sh: the installed Python package does not name $prefix/lib" >&2; exit 1; }
PYTHONPATH="$top/_stage$pydir" /usr/bin/python3 -c 'import hipress, hipress._lib' ||
    { echo "test.sh: the installed Python package does not import" >&2; exit 1; }
echo "test.sh: make install ok ($prefix)"

if [ "${1:-}" != "--no-sanitizers" ]; then
    rm -rf _build_asan && mkdir -p _build_asan
    (cd _build_asan && ../configure -q --enable-sanitizers && make -j"$jobs" &&
        make -j"$jobs" check TESTS="$(make -s print-check-tests) $(make -s print-gpu-tests)") || {
        echo "test.sh: sanitizer run failed; logs:" >&2
        for f in _build_asan/test-suite.log; do [ -f "$f" ] && tail -n 80 "$f" >&2; done
        exit 1
    }
fi
# the same library without CUDA: the GPU path's host side on the CPU
rm -rf _build_nocuda && mkdir -p _build_nocuda
(cd _build_nocuda && ../configure -q --without-cuda --without-nccl && make -j"$jobs" &&
    make -j"$jobs" check TESTS="$(make -s print-gpu-tests) tests/mpi/run_symbols.sh tests/mpi/run_stats.sh") || {
    echo "test.sh: the build without CUDA failed; logs:" >&2
    for f in _build_nocuda/test-suite.log; do [ -f "$f" ] && tail -n 80 "$f" >&2; done
    exit 1
}
# one closing line over all runs
cat _build/test-suite.log _build_asan/test-suite.log _build_nocuda/test-suite.log 2>/dev/null |
    awk '/^# PASS:/ {p += $3} /^# FAIL:/ {f += $3} /^# ERROR:/ {f += $3} /^# SKIP:/ {s += $3}
         END {printf "%d passed, %d failed, %d skipped\n", p, f, s}'
echo "test.sh: all tests passed"
