# Error-feedback conservation under the preload (tests/mpi/run_conserve.sh).
check_PROGRAMS += tests/mpi/mpi_conserve
tests_mpi_mpi_conserve_SOURCES = tests/mpi/mpi_conserve.c
tests_mpi_mpi_conserve_LDADD = -ldl -lm
TESTS += tests/mpi/run_conserve.sh
EXTRA_DIST += tests/mpi/run_conserve.sh
