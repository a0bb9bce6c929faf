#!/bin/sh
# The CUDA kernels of cuda/kern/hp_kern*.cu on the CPU, on the strict SIMT
# emulator (tests/gpu/simt, doc/dev/simt.md), bit for bit against the CPU path:
#   1. simt_kern: every case at the edge sizes 1, 31, 32, 33, 4095, 4097 and
#      the formats' usual parameters at 2^20+1 under seed 1, then the quick
#      set (every kernel, grid shape and path) under seeds 2 to 4;
#   2. simt_kern_tsan: the quick set under ThreadSanitizer, seeds 1 to 3;
#   3. simt_kern_asan: the quick set under AddressSanitizer and UBSan,
#      seeds 1 and 2; onebit at 2^20+1 under both, seed 1;
#   4. the kernels launched are every __global__ function of cuda/*/*.cu
#      (the codec's and the module's self-test kernel), counted here from
#      the sources, and hp_kl_preload asks for every one of
#      cuda/kern/hp_kern*.cu (the self-test runs outside any call); every run's
#      race detector checked shared-memory accesses (it is compiled in);
#   5. tests/gpu/kern/gpu_kern's buffer operations and powersgd's steps through the
#      emulated CUDA module built on these kernels (HP_KL_TRANSLATE), the
#      stand-in driver's streams deferred;
#   6. simt_mutants.sh: mutants of the kernels (each barrier of the sparse
#      selection removed, a shuffle with a partial mask or none, a shared
#      index one past the end, races between lanes of one warp) each make
#      the ThreadSanitizer build fail.
# 1 runs beside 2 and 3 (two cores).  HP_SIMT_SEEDS=N: N seeds, not 4.  In
# a build sanitized throughout (configure --enable-sanitizers) simt_kern is
# ASan+UBSan already: it runs the quick set, seeds 1 and 2, and 2 and 3 are
# not built.
set -u
: "${HP_SRCDIR:=$(cd "$(dirname "$0")/../../.." && pwd)}"
: "${HP_BUILDDIR:=$(pwd)}"
bin="$HP_BUILDDIR/tests/gpu/simt"
seeds=${HP_SIMT_SEEDS:-4}
status=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*"
    status=1
}
[ -x "$bin/simt_kern" ] || { echo "FAIL: $bin/simt_kern is missing (make check builds it)"; exit 1; }
export TSAN_OPTIONS="halt_on_error=1:exitcode=66${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# seeds 2..N
rest=$(seq -s, 2 "$seeds" 2>/dev/null)

# $1: name, then the command; its output in $tmp/$1, its time and status in $tmp/$1.rc
timed() {
    name=$1
    shift
    t0=$(date +%s)
    "$@" >"$tmp/$name" 2>&1
    echo "$? $(($(date +%s) - t0))" >"$tmp/$name.rc"
}

if [ -x "$bin/simt_kern_tsan" ]; then
    {
        timed plain "$bin/simt_kern" --seeds 1
        [ -z "$rest" ] || timed plain2 "$bin/simt_kern" --quick --large none --seeds "$rest"
    } &
else
    # ASan+UBSan throughout: the quick set only
    timed plain "$bin/simt_kern" --quick --large none --seeds "$(seq -s, 1 "$((seeds < 2 ? seeds : 2))")" &
fi
plain_pid=$!
if [ -x "$bin/simt_kern_tsan" ]; then
    timed tsan "$bin/simt_kern_tsan" --quick --large none --seeds "$(seq -s, 1 "$((seeds < 3 ? seeds : 3))")"
    timed asan "$bin/simt_kern_asan" --quick --large none --seeds 1,2
    # 2^20+1 on the default path (onebit, blocks of 4096, a residual)
    timed tsan_large "$bin/simt_kern_tsan" --quick --only onebit --sizes 1
    timed asan_large "$bin/simt_kern_asan" --quick --only onebit --sizes 1
else
    echo "# this build is ASan+UBSan throughout (--enable-sanitizers): simt_kern is its sanitizer run;" \
        "no ThreadSanitizer build"
fi
wait $plain_pid

for run in plain plain2 tsan asan tsan_large asan_large; do
    [ -f "$tmp/$run.rc" ] || continue
    set -- $(cat "$tmp/$run.rc")
    echo "# $run: exit $1 in $2 s: $(tail -n 1 "$tmp/$run")"
    if [ "$1" -ne 0 ] || ! grep -q '^simt_kern: ok' "$tmp/$run"; then
        fail "simt_kern ($run)"
        head -n 60 "$tmp/$run"
    fi
    checked=$(sed -n 's/^simt_kern: \([0-9]*\) shared-memory accesses checked.*/\1/p' "$tmp/$run")
    if [ "${checked:-0}" -eq 0 ]; then
        fail "simt_kern ($run): the shared-memory race detector checked nothing: the kernels were built without" \
            "its hooks (configure found no clang++ 14 or newer for HP_SIMT_CXX; see config.log)"
    fi
done

# every __global__ function of cuda/*/*.cu, launched; those of the kernel
# files preloaded
names() {
    grep -h '^__global__' "$@" |
        sed -n 's/^__global__ static void \(__launch_bounds__([^)]*) \)\{0,1\}\([a-z_][a-z0-9_]*\).*/\2/p' | sort
}
count() {
    grep -c '__global__' "$@" /dev/null | awk -F: '{ n += $2 } END { print n }'
}
names "$HP_SRCDIR"/cuda/kern/*.cu "$HP_SRCDIR"/cuda/module/*.cu >"$tmp/src"
nsrc=$(wc -l <"$tmp/src")
nkern=$(names "$HP_SRCDIR"/cuda/kern/hp_kern*.cu | wc -l)
[ "$nsrc" -eq "$(count "$HP_SRCDIR"/cuda/kern/*.cu "$HP_SRCDIR"/cuda/module/*.cu)" ] && [ "$nkern" -eq "$(count "$HP_SRCDIR"/cuda/kern/hp_kern*.cu)" ] ||
    fail "a __global__ function of cuda/*/*.cu this script cannot name"
sed -n '/^# launched:$/,/^# most threads per block:$/p' "$tmp/plain" | sed '1d;$d' | sort >"$tmp/launched"
line=$(grep '^simt_kern: [0-9]* kernels launched' "$tmp/plain")
echo "# $nsrc __global__ functions in cuda/*/*.cu, $nkern of them in cuda/kern/hp_kern*.cu; $line"
echo "# $(grep '^simt_kern: [0-9]* shared-memory accesses' "$tmp/plain")"
n=$(echo "$line" | sed -n 's/^simt_kern: \([0-9]*\) kernels launched, \([0-9]*\) kernels preloaded.*/\1 \2/p')
set -- $n
if [ "${1:-x}" != "$nsrc" ] || [ "${2:-x}" != "$nkern" ]; then
    fail "$nsrc kernels in cuda/*/*.cu, ${1:-?} launched; $nkern in cuda/kern/hp_kern*.cu, ${2:-?} preloaded"
fi
comm -3 "$tmp/src" "$tmp/launched" | sed 's/^\t/  launched, not in the sources: /; t; s/^/  in the sources, not launched: /'
[ -z "$(comm -3 "$tmp/src" "$tmp/launched")" ] || fail "the kernels launched are not those of cuda/*/*.cu"

# the module's own calls (tests/gpu/kern/gpu_kern's buffer operations and powersgd's
# steps) on the emulated module built on these kernels, streams deferred
mod="$HP_BUILDDIR/tests/gpu/mock/.libs"
if [ -x "$HP_BUILDDIR/tests/gpu/kern/gpu_kern" ] && [ -f "$mod/libhipress_cuda_simt.so" ]; then
    for def in 1 2; do
        LD_LIBRARY_PATH="$mod${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HIPRESS_CUDA_MODULE="$mod/libhipress_cuda_simt.so" \
            MOCK_CUDA_DEFERRED=$def "$HP_BUILDDIR/tests/gpu/kern/gpu_kern" --quick --small --only ops >"$tmp/gk" 2>&1
        rc=$?
        echo "# gpu_kern --only ops on the SIMT module, MOCK_CUDA_DEFERRED=$def: exit $rc: $(tail -n 1 "$tmp/gk")"
        [ $rc -eq 0 ] || { fail "gpu_kern on the SIMT module"; head -n 40 "$tmp/gk"; }
    done
fi

if [ -x "$bin/simt_kern_tsan" ]; then
    t0=$(date +%s)
    sh "$HP_SRCDIR/tests/gpu/simt/simt_mutants.sh" || status=1
    echo "# mutants: $(($(date +%s) - t0)) s"
fi
exit $status
