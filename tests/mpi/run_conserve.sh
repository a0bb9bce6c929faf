#!/bin/sh
# Error feedback conserves gradient (tests/mpi/mpi_conserve.c) at np 2, 3, 4, 5
# and 8: one launch per rank count, every sequence inside.  The plan
# changes at random between calls (the same on every rank); the exploration
# of auto makes timing-dependent choices, which the invariant must survive
# whatever they are, so the check does not depend on timing.
# HP_TEST_NPS overrides the rank counts, HP_CONSERVE_CALLS the calls.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-600}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

prog="$HP_BUILDDIR/tests/mpi/mpi_conserve"
[ -x "$prog" ] || { echo "FAIL: $prog is missing"; exit 1; }
for np in ${HP_TEST_NPS:-2 3 4 5 8}; do
    t0=$(date +%s)
    # fewer calls at np 8 (8 ranks share two cores here)
    calls=${HP_CONSERVE_CALLS:-$([ "$np" -ge 8 ] && echo 12 || echo 24)}
    hp_mpirun "$np" -x LD_PRELOAD="$HP_PRELOAD" "$prog" "$calls"
    rc=$?
    echo "# np $np: exit $rc after $(( $(date +%s) - t0 )) s"
    [ $rc -eq 124 ] && hp_fail "np $np: no result within ${HP_MPI_TIMEOUT} s (a hang)"
    [ $rc -ne 0 ] && hp_fail "np $np: exit status $rc"
done
exit $status
