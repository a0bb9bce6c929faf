# src/comp/compll_dense.mk: owned by one work stream; appends to the variables of Makefile.am
# CompLL operator layer (generic C + AVX2 by target attributes, chosen at run
# time) and the dense compressors.  hp_comp_fp16.c is already listed in
# Makefile.am.
libhpbase_la_SOURCES += src/ops/hp_ops.h src/ops/hp_ops.c src/ops/hp_ops_isa.c src/ops/hp_ops_avx2.h \
	src/ops/hp_ops_avx2.c src/ops/hp_ops_avx2_quant.c src/ops/hp_ops_lowrank.c \
	src/comp/hp_comp_bf16.c src/comp/hp_comp_onebit.c src/comp/hp_comp_tbq.c src/comp/hp_comp_terngrad.c \
	src/comp/hp_comp_qbits.c

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
