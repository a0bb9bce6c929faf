# tests/gpu/nccl/nccl_run.sh: what the scripts of the compressed ncclAllReduce's
# scenarios share (sourced after tests/hp_test_lib.sh).
#
# nccl_setup PROG: the program tests/gpu/nccl/PROG, the stand-ins ($mock) and
# the emulated CUDA module ($emu) checked (exit 77 where the module is not
# built: a build without CUDA), $out and $err made (removed at exit).
nccl_setup() {
    prog="$HP_BUILDDIR/tests/gpu/nccl/$1"
    mock="$HP_BUILDDIR/tests/gpu/mock/.libs"
    emu="$mock/libhipress_cuda_emu.so"
    if [ ! -e "$emu" ]; then
        echo "SKIP: no emulated CUDA module ($emu): a build without CUDA"
        exit 77
    fi
    for f in "$prog" "$mock/libcuda.so.1" "$mock/libnccl.so.2"; do
        [ -e "$f" ] || { echo "FAIL: $f is missing"; exit 1; }
    done
    out=$(mktemp) err=$(mktemp)
    trap 'rm -f "$out" "$err"' EXIT
}

# nccl_run CASE NP DEFERRED [MPIRUN ARGS...]: CASE of the program on NP
# ranks under the preload with HIPRESS_NCCL=compress, the stand-in NCCL
# across MPI's ranks and MOCK_CUDA_DEFERRED; one line "# CASE np NP ...:
# exit RC in T s".  0 when it passed (exit 0, the program's "PROG CASE: ok"
# line, no deadlock reported), else 1 after hp_fail with its output.
nccl_run() {
    c=$1 np=$2 d=$3
    shift 3
    t0=$(date +%s)
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_CUDA_MODULE="$emu" -x MOCK_NCCL_MPI=1 \
        -x HIPRESS_NCCL=compress -x MOCK_NCCL_TIMEOUT=30 -x MOCK_CUDA_DEFERRED=$d -x MOCK_CUDA_SEED=$np$d "$@" \
        "$prog" "$c" "$mock/libcuda.so.1" >"$out" 2>"$err"
    rc=$?
    echo "# $c np $np MOCK_CUDA_DEFERRED=$d $*: exit $rc in $(( $(date +%s) - t0 )) s"
    if [ $rc -ne 0 ] || ! grep -q "^$(basename "$prog") $c: ok$" "$out" || grep -q 'deadlock' "$err"; then
        hp_fail "$c np $np MOCK_CUDA_DEFERRED=$d $*"
        cat "$out"
        grep -v 'lossy stages' "$err" | head -40
        return 1
    fi
    return 0
}
