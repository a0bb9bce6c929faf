#!/bin/sh
# Bad and mismatched settings stop the job at MPI_Init, quickly: exit status
# non-zero within the time limit (a timeout is a hang, a failure), and
# exactly one line "hipress: error: ..." on stderr that names the variable,
# the value and what is accepted.  Settings that agree in value but not in
# spelling, or that need not agree, must not stop anything.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-60}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

prog="$HP_BUILDDIR/tests/mpi/mpi_basic"
[ -x "$prog" ] || { echo "FAIL: $prog is missing"; exit 1; }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect_error LABEL WORD1 WORD2 WORD3 -- MPIRUN-ARGS...: the one error line
# must contain each WORD (variable, value, accepted).
expect_error() {
    label=$1 w1=$2 w2=$3 w3=$4
    shift 5
    t0=$(date +%s)
    hp_mpirun 2 "$@" >"$out" 2>"$err"
    rc=$?
    dt=$(( $(date +%s) - t0 ))
    lines=$(grep -c '^hipress: error:' "$err")
    line=$(grep '^hipress: error:' "$err" | head -n 1)
    echo "# $label: exit $rc after $dt s: $line"
    if [ $rc -eq 124 ]; then
        hp_fail "$label: still running after $HP_MPI_TIMEOUT s (a hang)"
    elif [ $rc -eq 0 ]; then
        hp_fail "$label: the job succeeded"
    fi
    [ "$lines" -eq 1 ] || hp_fail "$label: $lines lines start with 'hipress: error:', want exactly 1"
    for w in "$w1" "$w2" "$w3"; do
        case "$line" in
        *"$w"*) ;;
        *) hp_fail "$label: the error line does not contain \"$w\"" ;;
        esac
    done
    if grep -q 'mpi_basic: ok' "$out"; then
        hp_fail "$label: the program ran past MPI_Init"
    fi
    if [ $status -ne 0 ]; then
        echo "--- stderr of $label:"; cat "$err"
    fi
}

expect_ok() {
    label=$1
    shift
    hp_mpirun 2 "$@" >"$out" 2>"$err"
    rc=$?
    echo "# $label: exit $rc"
    if [ $rc -ne 0 ] || ! grep -q 'mpi_basic: ok' "$out" || grep -q '^hipress: error' "$err"; then
        hp_fail "$label: should run (exit $rc)"
        cat "$out" "$err"
    fi
}

expect_error "unknown compressor" HIPRESS_COMPRESSOR "'bogus'" "compressors" -- \
    -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_COMPRESSOR=bogus "$prog"
expect_error "negative size" HIPRESS_MIN_BYTES "'-3'" "byte count" -- \
    -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_MIN_BYTES=-3 "$prog"
expect_error "unknown setting" HIPRESS_BOGUS "'1'" "unknown setting" -- \
    -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_BOGUS=1 "$prog"
expect_error "bad enum" HIPRESS_ALGO "'nope'" "auto|ring|tree|ps|allgather" -- \
    -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_ALGO=nope "$prog"
# mismatches: the environment differs on rank 1 only (set by a wrapper, which
# also sets the preload so the shell itself is not preloaded)
wrap='export LD_PRELOAD="$1"; if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export $2; fi; exec "$3"'
expect_error "rank-dependent compressor" HIPRESS_COMPRESSOR "'none'" "same on every rank" -- \
    sh -c "$wrap" sh "$HP_PRELOAD" HIPRESS_COMPRESSOR=fp16 "$prog"
expect_error "rank-dependent size" HIPRESS_MIN_BYTES "'2M'" "same on every rank" -- \
    -x HIPRESS_MIN_BYTES=2M sh -c "$wrap" sh "$HP_PRELOAD" HIPRESS_MIN_BYTES=3M "$prog"
# the same value spelled differently agrees; HIPRESS_DEBUG need not agree
expect_ok "1M and 1048576 agree" -x HIPRESS_MIN_BYTES=1M sh -c "$wrap" sh "$HP_PRELOAD" HIPRESS_MIN_BYTES=1048576 "$prog"
expect_ok "rank-dependent HIPRESS_DEBUG" sh -c "$wrap" sh "$HP_PRELOAD" HIPRESS_DEBUG=NONE "$prog"
exit $status
