# CaSync algorithm tests (tests/run_algos.sh).
check_PROGRAMS += tests/mpi_algos
tests_mpi_algos_SOURCES = tests/mpi_algos.c
tests_mpi_algos_LDADD = libhipress.la -lm
TESTS += tests/run_algos.sh
EXTRA_DIST += tests/run_algos.sh tests/mpi_env.sh
