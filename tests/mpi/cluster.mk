# tests/mpi/cluster.mk: the emulated cluster (scripts/cluster.sh); appends to the
# variables of Makefile.am.
#   run_cluster.sh    2 emulated hosts x 2 ranks: start, a compressed
#                     allreduce identical on all ranks, clean teardown
#                     (skipped, exit 77, where namespaces are not allowed)
#   run_failures.sh   a late rank, a killed rank and a lost link on 2 x 2
#                     emulated hosts, with and without hipress, each within
#                     its time bound, nothing left behind
#   mpi_failure       the MPI program they run (also driven by
#                     tests/mpi/failure_cases.sh, the probe of plain Open MPI)
check_PROGRAMS += tests/mpi/mpi_failure
tests_mpi_mpi_failure_SOURCES = tests/mpi/mpi_failure.c
TESTS += tests/mpi/run_cluster.sh tests/mpi/run_failures.sh
EXTRA_DIST += tests/mpi/run_cluster.sh tests/mpi/run_failures.sh tests/mpi/failure_cases.sh tests/mpi/hp_cluster_lib.sh
