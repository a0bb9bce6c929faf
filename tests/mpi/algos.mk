# CaSync algorithm tests (tests/mpi/run_algos.sh).
check_PROGRAMS += tests/mpi/mpi_algos
tests_mpi_mpi_algos_SOURCES = tests/mpi/mpi_algos.h tests/mpi/mpi_algos.c tests/mpi/mpi_algos_cases.c \
	tests/mpi/mpi_algos_volume.c
tests_mpi_mpi_algos_LDADD = libhipress.la -lm
TESTS += tests/mpi/run_algos.sh
EXTRA_DIST += tests/mpi/run_algos.sh tests/mpi_env.sh
