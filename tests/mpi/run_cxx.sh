#!/bin/sh
# A C++ program's MPI_Allreduce calls are caught under the preload (np 1, 2, 3).
set -u
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/hp_test_lib.sh"
for np in 1 2 3; do
    hp_mpirun $np -x LD_PRELOAD="$HP_PRELOAD" -x HIPRESS_COMPRESSOR=none -x HIPRESS_ALGO=ring \
        "$HP_BUILDDIR/tests/mpi/mpi_cxx" || hp_fail "np $np"
done
exit $status
