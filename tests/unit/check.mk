# tests/unit/check.mk: the Check suites of pure functions and the fuzzing of
# the decoders; appends to the variables of Makefile.am.  The suites link
# the convenience library for its internal symbols, which libhipress.so does
# not export.
#
# The core: settings, eligibility, chunking, residual store, message
# header, fp16 conversion.
check_PROGRAMS += tests/unit/check_core
TESTS += tests/unit/check_core
tests_unit_check_core_SOURCES = tests/unit/check_core.h tests/unit/check_core.c tests/unit/check_core_plan.c \
	tests/unit/check_core_residual.c tests/unit/check_core_msg.c tests/unit/check_core_fp16.c
tests_unit_check_core_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_core_LDADD = libhpcore.la $(CHECK_LIBS) -lm

# The CompLL operator layer and the dense compressors.
check_PROGRAMS += tests/unit/check_comp_dense
TESTS += tests/unit/check_comp_dense
tests_unit_check_comp_dense_SOURCES = tests/unit/check_comp_dense.h tests/unit/check_comp_dense.c \
	tests/unit/check_comp_dense_ops.c tests/unit/check_comp_dense_bounds.c tests/unit/check_comp_dense_exact.c \
	tests/unit/check_comp_dense_malformed.c
tests_unit_check_comp_dense_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_comp_dense_LDADD = libhpcore.la $(CHECK_LIBS) -lm

check_PROGRAMS += tests/unit/check_comp_qbits
TESTS += tests/unit/check_comp_qbits
tests_unit_check_comp_qbits_SOURCES = tests/unit/check_comp_qbits.h tests/unit/check_comp_qbits.c \
	tests/unit/check_comp_qbits_ops.c tests/unit/check_comp_qbits_codec.c tests/unit/check_comp_qbits_rng.c
tests_unit_check_comp_qbits_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_comp_qbits_LDADD = libhpcore.la $(CHECK_LIBS) -lm

# The powersgd collective compressor (its micro benchmark behind --bench).
check_PROGRAMS += tests/unit/check_comp_powersgd
TESTS += tests/unit/check_comp_powersgd
tests_unit_check_comp_powersgd_SOURCES = tests/unit/check_comp_powersgd.h tests/unit/check_comp_powersgd.c \
	tests/unit/check_comp_powersgd_abi.c
tests_unit_check_comp_powersgd_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_comp_powersgd_LDADD = libhpcore.la $(CHECK_LIBS) $(BLAS_LIBS) -lm

# The sparse compressors (graddrop, dgc) and their operators, then every
# decoder against malformed messages.
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
		$(wildcard $(srcdir)/src/*/*.h $(srcdir)/src/front/*/*.h $(srcdir)/src/*/*.def $(srcdir)/include/*.h) config.h
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
