# tests/mpi/mpi.mk: owned by one work stream; appends to the variables of Makefile.am
#
# The drop-in library under mpirun.  The test programs are plain MPI
# programs, run with libhipress.so preloaded as users run it (the suite finds
# the public API in the preloaded library with dlsym); shell drivers in TESTS
# launch them, with MPIEXEC, HP_BUILDDIR, HP_SRCDIR and HP_PYTHON from
# tests/tests.mk.
#   run_mpi.sh       tests/mpi/mpi_suite for np 1..5: pass-through matrix,
#                    erroneous arguments, ring, opt-out, threads
#   run_settings.sh  bad and mismatched settings fail fast with one line
#   run_stats.sh     HIPRESS_STATS / HIPRESS_DEBUG output, HIPRESS_ENABLE=0
#   run_symbols.sh   exported symbols: MPI_* and hipress_* only, no PMPI_*
#   run_mpi4py.sh    an mpi4py program under the preload
#   run_valgrind.sh  memcheck on short runs (also `make check-valgrind`)
#   run_ddp_hook.sh  the PyTorch DDP comm hook (src/python) at 2 and 4 ranks
#   run_optimizer.sh HIPRESS_OPTIMIZER: the forms for SGD only, and what runs instead
check_PROGRAMS += tests/mpi/mpi_suite tests/mpi/mpi_basic
tests_mpi_mpi_suite_SOURCES = tests/mpi/mpi_suite.h tests/mpi/mpi_suite.c tests/mpi/mpi_suite_matrix.c \
	tests/mpi/mpi_suite_ring.c
tests_mpi_mpi_suite_LDADD = -lm
tests_mpi_mpi_basic_SOURCES = tests/mpi/mpi_basic.c

TESTS += tests/mpi/run_symbols.sh tests/mpi/run_settings.sh tests/mpi/run_stats.sh tests/mpi/run_mpi.sh \
         tests/mpi/run_mpi4py.sh tests/mpi/run_valgrind.sh tests/mpi/run_ddp_hook.sh tests/mpi/run_optimizer.sh
EXTRA_DIST += tests/mpi/run_ddp_hook.sh tests/mpi/run_optimizer.sh tests/mpi/ddp_hook.py tests/hp_test_lib.sh tests/mpi/run_symbols.sh tests/mpi/run_settings.sh tests/mpi/run_stats.sh \
              tests/mpi/run_mpi.sh tests/mpi/run_mpi4py.sh tests/mpi/mpi4py_suite.py tests/mpi/run_valgrind.sh \
              tests/mpi/valgrind/openmpi-extra.supp

# The memcheck runs alone (CI can call this target, or the script directly
# with HP_SRCDIR and HP_BUILDDIR set).
check-valgrind:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS=tests/mpi/run_valgrind.sh
.PHONY: check-valgrind
