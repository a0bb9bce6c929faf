#!/bin/sh
# The drop-in library under mpirun, np 1 to 5: one launch per rank count of
# tests/mpi/mpi_suite, which loops over every case inside (pass-through matrix,
# erroneous arguments, compressed ring, opt-out, threads).
#
# The plan is fixed (HIPRESS_ALGO=ring, HIPRESS_PARTITION_BYTES=256K) so that
# whether a call is compressed depends on eligibility alone and the suite can
# predict the compressed counter cell by cell; `none` keeps eligible cells
# exact.  HP_TEST_NPS overrides the rank counts.
set -u
HP_MPI_TIMEOUT=${HP_MPI_TIMEOUT:-300}
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"

prog="$HP_BUILDDIR/tests/mpi/mpi_suite"
[ -x "$prog" ] || { echo "FAIL: $prog is missing"; exit 1; }
for np in ${HP_TEST_NPS:-1 2 3 4 5}; do
    t0=$(date +%s)
    hp_mpirun "$np" -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_COMPRESSOR=none -x HIPRESS_ALGO=ring \
        -x HIPRESS_PARTITION_BYTES=256K -x HIPRESS_MIN_BYTES=1048576 "$prog"
    rc=$?
    echo "# np $np: exit $rc after $(( $(date +%s) - t0 )) s"
    [ $rc -eq 124 ] && hp_fail "np $np: no result within ${HP_MPI_TIMEOUT} s (a hang)"
    [ $rc -ne 0 ] && hp_fail "np $np: exit status $rc"
done
exit $status
