# tests/unit/check.mk: owned by one work stream; appends to the variables of Makefile.am
#
# Check unit tests of the pure core (settings, eligibility, chunking, residual
# store, message header, fp16 conversion).  They link the convenience library
# for its internal symbols, which libhipress.so does not export.
check_PROGRAMS += tests/unit/check_core
TESTS += tests/unit/check_core
tests_unit_check_core_SOURCES = tests/unit/check_core.h tests/unit/check_core.c tests/unit/check_core_plan.c \
	tests/unit/check_core_residual.c tests/unit/check_core_msg.c tests/unit/check_core_fp16.c
tests_unit_check_core_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_core_LDADD = libhpcore.la $(CHECK_LIBS) -lm

# The NCCL transport's two forms against a recording stand-in of NCCL and
# the device (tests/gpu/check_tp_nccl.c).
check_PROGRAMS += tests/gpu/check_tp_nccl
TESTS += tests/gpu/check_tp_nccl
tests_gpu_check_tp_nccl_SOURCES = tests/gpu/check_tp_nccl.c
tests_gpu_check_tp_nccl_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_tp_nccl_LDADD = libhpcore.la $(CHECK_LIBS) -lm
