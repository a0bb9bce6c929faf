#!/bin/sh
# powersgd under mpirun: one mpirun per rank count, the cases loop inside
# tests/mpi/mpi_powersgd (exactness for low-rank sums, skipped calls, identical
# bits on every rank, error feedback, NaN/Inf, failure agreement).
set -u
. "${HP_SRCDIR:-$(dirname "$0")/../..}/tests/mpi_env.sh"
prog="$HP_BUILDDIR/tests/mpi/mpi_powersgd"
status=0
for np in 2 3 4; do
    echo "== np $np"
    hp_mpirun "$np" "$prog" || status=1
done
exit $status
