# tests/mpi/comp.mk: compressors under mpirun; appends to the variables of
# Makefile.am.
#
# powersgd: tests/mpi/mpi_powersgd links the core for its internal API (it
# drives the compressed allreduce on dup'd communicators and reads the
# residual store), run by tests/mpi/run_powersgd.sh.
check_PROGRAMS += tests/mpi/mpi_powersgd
tests_mpi_mpi_powersgd_SOURCES = tests/mpi/mpi_powersgd.c
tests_mpi_mpi_powersgd_LDADD = libhpcore.la -lm
TESTS += tests/mpi/run_powersgd.sh
EXTRA_DIST += tests/mpi/run_powersgd.sh

# ------------------------------------------------------------------ plugins
# tests/mpi/plugin_example.la: an external compressor (example_int8) built as a
# loadable module, never installed; tests/mpi/plugin_example_test: the same file
# as an MPI program that checks results under the preload.
check_LTLIBRARIES += tests/mpi/plugin_example.la
tests_mpi_plugin_example_la_SOURCES = tests/mpi/plugin_example.c
tests_mpi_plugin_example_la_LDFLAGS = -module -avoid-version -rpath /nowhere
tests_mpi_plugin_example_la_LIBADD = -lm
check_PROGRAMS += tests/mpi/plugin_example_test
tests_mpi_plugin_example_test_SOURCES = tests/mpi/plugin_example.c
tests_mpi_plugin_example_test_CPPFLAGS = $(AM_CPPFLAGS) -DHP_PLUGIN_TEST_MAIN
tests_mpi_plugin_example_test_LDADD = -lm
TESTS += tests/mpi/run_plugin.sh
EXTRA_DIST += tests/mpi/run_plugin.sh
