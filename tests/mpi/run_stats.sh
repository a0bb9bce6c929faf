#!/bin/sh
# Observability: HIPRESS_STATS=1 prints one table at MPI_Finalize, on rank 0
# only, whose counters match what the program did; HIPRESS_DEBUG=INFO prints
# lines prefixed "hipress host:pid:rank level" from every rank; by default a
# clean run prints nothing at all; HIPRESS_ENABLE=0 compresses nothing.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-120}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

prog="$HP_BUILDDIR/tests/mpi/mpi_basic"
[ -x "$prog" ] || { echo "FAIL: $prog is missing"; exit 1; }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
NP=3

run() {
    label=$1
    shift
    hp_mpirun $NP "$@" >"$out" 2>"$err"
    rc=$?
    echo "# $label: exit $rc"
    if [ $rc -ne 0 ] || ! grep -q '^mpi_basic: ok' "$out"; then
        hp_fail "$label: the program failed (exit $rc)"
        cat "$out" "$err"
        return 1
    fi
    return 0
}

# table value of the row whose label is $1 (the number after the label)
row() {
    sed -n "s/^  $1  *\([0-9][0-9]*\).*/\1/p" "$err"
}

# 1. the statistics table; a fixed plan, so compressed == eligible
if run "HIPRESS_STATS=1" -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_ALGO=ring -x HIPRESS_PARTITION_BYTES=256K "$prog" 3; then
    calls=$(sed -n 's/^mpi_basic: ok, \([0-9]*\) MPI_Allreduce calls, \([0-9]*\) eligible.*/\1/p' "$out")
    elig=$(sed -n 's/^mpi_basic: ok, \([0-9]*\) MPI_Allreduce calls, \([0-9]*\) eligible.*/\2/p' "$out")
    tables=$(grep -c '^hipress statistics' "$err")
    [ "$tables" -eq 1 ] || hp_fail "$tables statistics tables, want 1 (rank 0 only)"
    grep -q "^hipress statistics (rank 0 of $NP)" "$err" || hp_fail "the table is not rank 0's"
    [ "$(grep -c '^  MPI_Allreduce calls' "$err")" -eq 1 ] || hp_fail "the call counter appears more than once"
    [ "$(row 'MPI_Allreduce calls')" = "$calls" ] ||
        hp_fail "table says $(row 'MPI_Allreduce calls') calls, the program made $calls"
    [ "$(row 'compressed')" = "$elig" ] || hp_fail "table says $(row 'compressed') compressed, $elig were eligible"
    [ "$(row 'errors')" = 0 ] || hp_fail "table reports errors"
    grep -q '^  passed through: small' "$err" || hp_fail "no 'passed through: small' row"
    grep -q '^  passed through: datatype' "$err" || hp_fail "no 'passed through: datatype' row"
    [ $status -eq 0 ] || cat "$err"
fi

# 2. nothing on stderr by default
if run "defaults" -x LD_PRELOAD="$HP_PRELOAD" "$prog"; then
    if grep -q '^hipress' "$err"; then
        hp_fail "a clean run with default settings printed:"
        cat "$err"
    fi
fi

# 3. HIPRESS_DEBUG=INFO: prefixed lines from every rank
if run "HIPRESS_DEBUG=INFO" -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_DEBUG=INFO "$prog"; then
    r=0
    while [ $r -lt $NP ]; do
        grep -Eq "^hipress [^ :]+:[0-9]+:$r info " "$err" || hp_fail "no 'hipress host:pid:$r info' line from rank $r"
        r=$((r + 1))
    done
    bad=$(grep '^hipress' "$err" | grep -Evc '^hipress [^ :]+:[0-9]+:[0-9]+ (warn|info|trace) ')
    [ "$bad" -eq 0 ] || hp_fail "$bad lines start with 'hipress' without the host:pid:rank level prefix"
    grep -q '^hipress statistics' "$err" && hp_fail "statistics printed without HIPRESS_STATS"
    [ $status -eq 0 ] || cat "$err"
fi

# 4. HIPRESS_ENABLE=0: a pure pass-through
if run "HIPRESS_ENABLE=0" -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_ENABLE=0 -x HIPRESS_STATS=1 "$prog"; then
    [ "$(row 'compressed')" = 0 ] || hp_fail "HIPRESS_ENABLE=0 compressed $(row 'compressed') calls"
fi
exit $status
