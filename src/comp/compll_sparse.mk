# src/comp/compll_sparse.mk: sparse compressors (graddrop, dgc), their operators,
# the decoder tests and fuzzers, and the plugin example.

libhpbase_la_SOURCES += \
	src/ops/hp_ops_sparse.h src/ops/hp_ops_sparse.c src/ops/hp_ops_sparse_fmt.c \
	src/comp/hp_comp_graddrop.c src/comp/hp_comp_dgc.c

check_PROGRAMS += tests/unit/check_comp_sparse
tests_unit_check_comp_sparse_SOURCES = tests/unit/check_comp_sparse.h tests/unit/check_comp_sparse.c \
	tests/unit/check_comp_sparse_select.c tests/unit/check_comp_sparse_paths.c
tests_unit_check_comp_sparse_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_comp_sparse_LDADD = libhpcore.la $(CHECK_LIBS) -lm
TESTS += tests/unit/check_comp_sparse

check_PROGRAMS += tests/unit/check_decoders
tests_unit_check_decoders_SOURCES = tests/unit/check_decoders.c
tests_unit_check_decoders_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_decoders_LDADD = libhpcore.la $(CHECK_LIBS) -lm
TESTS += tests/unit/check_decoders

# ------------------------------------------------------------------ fuzzing
# tests/unit/fuzz_replay: the fuzz harness as a plain program built with $(CC):
# replays the committed seed corpus under `make check` (no clang needed) and
# regenerates it (--generate).
check_PROGRAMS += tests/unit/fuzz_replay
tests_unit_fuzz_replay_SOURCES = tests/unit/fuzz_decode.c
tests_unit_fuzz_replay_CPPFLAGS = $(AM_CPPFLAGS) -DHP_FUZZ_MAIN
tests_unit_fuzz_replay_LDADD = libhpcore.la -lm

# tests/unit/fuzz_decode: the libFuzzer harness, ASan + UBSan, built with clang
# from the harness and every C source of libhpcore (so decoders added by
# other fragments are instrumented too).  The rule exists in every build;
# --enable-fuzz builds it with `make check`, and tests/unit/run_fuzz.sh builds it
# on demand with FUZZ_CC=clang-14 (or clang) otherwise.
HP_FUZZ_SRCS = tests/unit/fuzz_decode.c $(filter %.c,$(libhpbase_la_SOURCES) $(libhpcore_la_SOURCES))
HP_FUZZ_CFLAGS = -std=gnu11 -ffp-contract=off -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
tests/unit/fuzz_decode$(EXEEXT): $(HP_FUZZ_SRCS:%=$(srcdir)/%) \
		$(wildcard $(srcdir)/src/*/*.h $(srcdir)/src/*/*.def $(srcdir)/include/*.h) config.h
	@$(MKDIR_P) tests
	$(AM_V_CCLD)test -n "$(FUZZ_CC)" || { echo "tests/unit/fuzz_decode: set FUZZ_CC (clang) or configure --enable-fuzz" >&2; exit 1; }; \
	mpi_cflags=`$(MPICC) --showme:compile`; mpi_libs=`$(MPICC) --showme:link`; \
	$(FUZZ_CC) $(HP_FUZZ_CFLAGS) -DHAVE_CONFIG_H -I$(top_builddir) -I$(top_srcdir)/include \
		$(HP_SRC_INCLUDES) $$mpi_cflags -o $@ $(HP_FUZZ_SRCS:%=$(srcdir)/%) $$mpi_libs $(HWLOC_LIBS) $(LIBS) -lm
if HP_FUZZ
check_SCRIPTS = tests/unit/fuzz_decode$(EXEEXT)
endif
CLEANFILES += tests/unit/fuzz_decode$(EXEEXT)

TESTS += tests/unit/run_fuzz.sh
EXTRA_DIST += tests/unit/run_fuzz.sh tests/unit/fuzz_corpus

# ------------------------------------------------------------------ plugins
# tests/mpi/plugin_example.la: an external compressor (example_int8) built as a
# loadable module, never installed; tests/mpi/plugin_example_test: the same file
# as an MPI program that checks results under the preload.
check_LTLIBRARIES = tests/mpi/plugin_example.la
tests_mpi_plugin_example_la_SOURCES = tests/mpi/plugin_example.c
tests_mpi_plugin_example_la_LDFLAGS = -module -avoid-version -rpath /nowhere
tests_mpi_plugin_example_la_LIBADD = -lm
check_PROGRAMS += tests/mpi/plugin_example_test
tests_mpi_plugin_example_test_SOURCES = tests/mpi/plugin_example.c
tests_mpi_plugin_example_test_CPPFLAGS = $(AM_CPPFLAGS) -DHP_PLUGIN_TEST_MAIN
tests_mpi_plugin_example_test_LDADD = -lm
TESTS += tests/mpi/run_plugin.sh
EXTRA_DIST += tests/mpi/run_plugin.sh
