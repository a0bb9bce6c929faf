#!/bin/sh
# An mpi4py program under the preload ($HP_PYTHON, /usr/bin/python3 unless
# configured --with-python): correct compressed and pass-through results,
# and proof that hipress intercepted (the program reads hipress_stats_get
# through ctypes; HIPRESS_STATS=1 must print the table at exit).
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-180}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
[ -x "$HP_PYTHON" ] || { echo "FAIL: python $HP_PYTHON not found"; exit 1; }
for np in 2 3; do
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_STATS=1 -x HIPRESS_ALGO=ring \
        -x HIPRESS_PARTITION_BYTES=256K "$HP_PYTHON" "$HP_SRCDIR/tests/mpi/mpi4py_suite.py" >"$out" 2>"$err"
    rc=$?
    echo "# np $np: exit $rc: $(cat "$out")"
    [ $rc -eq 0 ] || hp_fail "np $np: exit status $rc"
    grep -q '^mpi4py_suite: ok' "$out" || hp_fail "np $np: no 'mpi4py_suite: ok'"
    grep -q "^hipress statistics (rank 0 of $np)" "$err" || hp_fail "np $np: no statistics table: not intercepted?"
    [ $status -eq 0 ] || { cat "$out" "$err"; break; }
done
exit $status
