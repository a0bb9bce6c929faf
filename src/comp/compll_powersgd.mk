# src/comp/compll_powersgd.mk: the powersgd collective compressor (its math,
# and its runs on host memory and on a device buffer in the algorithm layer),
# its unit tests (Check, with a micro benchmark behind --bench) and its
# mpirun test.

libhpbase_la_SOURCES += src/comp/hp_psgd.h src/comp/hp_comp_powersgd.c \
	src/algo/hp_algo_psgd.c src/algo/hp_algo_psgd_dev.c \
	src/algo/hp_algo_psgd_async.c

check_PROGRAMS += tests/unit/check_comp_powersgd tests/mpi/mpi_powersgd
tests_unit_check_comp_powersgd_SOURCES = tests/unit/check_comp_powersgd.h tests/unit/check_comp_powersgd.c \
	tests/unit/check_comp_powersgd_abi.c
tests_unit_check_comp_powersgd_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_comp_powersgd_LDADD = libhpcore.la $(CHECK_LIBS) $(BLAS_LIBS) -lm
# links the core for its internal API: it drives hp_allreduce_compressed on
# dup'd communicators and reads the residual store
tests_mpi_mpi_powersgd_SOURCES = tests/mpi/mpi_powersgd.c
tests_mpi_mpi_powersgd_LDADD = libhpcore.la -lm
TESTS += tests/unit/check_comp_powersgd tests/mpi/run_powersgd.sh
EXTRA_DIST += tests/mpi/run_powersgd.sh
