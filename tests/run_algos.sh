#!/bin/sh
# CaSync algorithm tests: one mpirun per rank count, looping inside.
set -u
. "${HP_SRCDIR:-$(dirname "$0")/..}/tests/mpi_env.sh"
prog="$HP_BUILDDIR/tests/mpi_algos"
status=0
run() {
    np=$1; shift
    echo "== np $np: $*"
    hp_mpirun "$np" "$prog" "$@" || status=1
}
run 2 matrix comms plan fail range sum volume memory 3000
run 3 matrix comms plan fail range sum volume
run 4 matrix comms plan fail hier range sum volume
run 5 matrix fail range volume
run 6 hier
run 8 matrix range sum volume
exit $status
