# Error-feedback conservation under the preload (tests/run_conserve.sh).
check_PROGRAMS += tests/mpi_conserve
tests_mpi_conserve_SOURCES = tests/mpi_conserve.c
tests_mpi_conserve_LDADD = -ldl -lm
TESTS += tests/run_conserve.sh
EXTRA_DIST += tests/run_conserve.sh
