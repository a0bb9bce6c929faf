# tests/mpi/tables.mk: the test library; appends to the variables of Makefile.am.
#
# tests/mpi/.libs/libhipress_test.so, never installed: libhipress.so's own
# sources (the entry points, the front ends, every source of libhpcore.la
# and libhpbase.la, whichever fragment lists them) compiled again with
# -DHP_TEST_TABLES, so that the rows of the tables that exist for tests only
# are there (`#ifdef HP_TEST_TABLES` in a .def table: the delay transport
# of src/transport/hp_transports.def, the star algorithm of
# src/algo/hp_algos.def), plus the files of those rows (Makefile.am's
# HP_TEST_TABLE_SOURCES).  It
# interposes like libhipress.so (the same exported symbols) and is
# preloaded the same way.
#
#   run_tables.sh  the algorithm cases of run_algos.sh over the delay
#                  transport (HP_TEST_TRANSPORT=delay), which holds back,
#                  reorders and delays every send and receive within what
#                  the transport promises; then once with the transport's
#                  matching rule broken on purpose, which must fail
check_LTLIBRARIES += tests/mpi/libhipress_test.la
tests_mpi_libhipress_test_la_SOURCES = $(libhipress_la_SOURCES) $(libhpcore_la_SOURCES) $(libhpbase_la_SOURCES) \
	$(HP_TEST_TABLE_SOURCES)
tests_mpi_libhipress_test_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS) -DHP_TEST_TABLES
# libhpcore.la's own LIBADD, less libhpbase.la (its sources are above)
tests_mpi_libhipress_test_la_LIBADD = $(libhpbase_la_LIBADD) $(HWLOC_LIBS)
tests_mpi_libhipress_test_la_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/mpi/.libs -avoid-version \
	-export-symbols-regex '^(MPI_|hipress_|nccl)'
TESTS += tests/mpi/run_tables.sh
EXTRA_DIST += tests/mpi/run_tables.sh
