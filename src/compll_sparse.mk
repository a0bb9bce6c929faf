# src/compll_sparse.mk: sparse compressors (graddrop, dgc), their operators,
# the decoder tests and fuzzers, and the plugin example.

libhpcore_la_SOURCES += \
	src/hp_ops_sparse.h src/hp_ops_sparse.c \
	src/hp_comp_graddrop.c src/hp_comp_dgc.c

check_PROGRAMS += tests/check_comp_sparse
tests_check_comp_sparse_SOURCES = tests/check_comp_sparse.c
tests_check_comp_sparse_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_comp_sparse_LDADD = libhpcore.la $(CHECK_LIBS) -lm
TESTS += tests/check_comp_sparse
