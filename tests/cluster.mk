# tests/cluster.mk: the emulated cluster (scripts/cluster.sh); appends to the
# variables of Makefile.am.
#   run_cluster.sh    2 emulated hosts x 2 ranks: start, a compressed
#                     allreduce identical on all ranks, clean teardown
#                     (skipped, exit 77, where namespaces are not allowed)
#   mpi_failure       plain MPI program driven by tests/failure_cases.sh (not
#                     part of `make check`: it probes how Open MPI behaves when
#                     a rank dies, a link goes down or a rank is late)
check_PROGRAMS += tests/mpi_failure
tests_mpi_failure_SOURCES = tests/mpi_failure.c
TESTS += tests/run_cluster.sh
EXTRA_DIST += tests/run_cluster.sh tests/failure_cases.sh
