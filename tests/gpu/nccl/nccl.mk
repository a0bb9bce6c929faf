# tests/gpu/nccl/nccl.mk: ncclAllReduce through the preload, against the
# stand-in NCCL (tests/gpu/standins); appends to the variables of
# Makefile.am.  With nccl.h only.
#   run_nccl.sh       ncclAllReduce and friends through the preload, without
#                     MPI: pass-through, groups, capture, release, settings
#                     (nccl_calls; nccl_local: NCCL loaded into a local
#                     scope, through libnccl_user.so, as a Python extension
#                     loads it)
#   run_nccl_compress.sh  HIPRESS_NCCL=compress at 2, 3, 4 ranks: the stand-in
#                     NCCL's communicators span MPI's ranks (data through
#                     shared memory), the emulated CUDA module runs the codec
#                     (nccl_compress*.c)
#   run_nccl_scenarios.sh  what hangs or breaks on a GPU when hipress
#                     synchronises what it must not: two communicators in
#                     opposite orders, an evicted residual, DDP's bucket
#                     rebuild, a capture on another thread (nccl_scenarios.c,
#                     doc/dev/standins.md)
#   run_nccl_rules.sh what the stand-ins' strict rules stop (a use after
#                     free, memory outside its stream's order, ranks whose
#                     NCCL calls differ) in scenarios of the compressed path
#                     (nccl_rules.c)
#   run_nompi.sh      the NCCL-only library (libhipress_nccl.so) in a process
#                     with no MPI at all: it needs neither libmpi nor
#                     libhwloc; nompi_calls (nccl_calls.c over the stand-in
#                     built without MPI) and nompi_compress (one process of a
#                     multi-rank compressed job, the stand-in moving the data
#                     through shared memory) under nompi_launch (a
#                     torchrun-like launcher: N processes with RANK,
#                     WORLD_SIZE, LOCAL_RANK and a rendezvous folder), with
#                     libmpi and libhwloc hidden where a mount namespace can
#                     be made
if HP_NCCL
HP_NCCL_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS) $(HP_MOCK_CPPFLAGS)
# calls ncclAllReduce; linked to the stand-in NCCL and loaded into a local
# scope, as a Python extension is
check_LTLIBRARIES += tests/gpu/nccl/libnccl_user.la
tests_gpu_nccl_libnccl_user_la_SOURCES = tests/gpu/nccl/nccl_user.c
tests_gpu_nccl_libnccl_user_la_CPPFLAGS = $(HP_NCCL_TEST_CPPFLAGS)
tests_gpu_nccl_libnccl_user_la_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/gpu/nccl/.libs -avoid-version \
	-no-undefined
tests_gpu_nccl_libnccl_user_la_LIBADD = tests/gpu/mock/libnccl.la

check_PROGRAMS += tests/gpu/nccl/nccl_calls tests/gpu/nccl/nccl_local
TESTS += tests/gpu/nccl/run_nccl.sh
tests_gpu_nccl_nccl_calls_SOURCES = tests/gpu/nccl/nccl_calls.c
tests_gpu_nccl_nccl_calls_CPPFLAGS = $(HP_NCCL_TEST_CPPFLAGS)
tests_gpu_nccl_nccl_calls_LDADD = tests/gpu/mock/libnccl.la -ldl -lpthread
tests_gpu_nccl_nccl_calls_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_gpu_nccl_nccl_local_SOURCES = tests/gpu/nccl/nccl_local.c
tests_gpu_nccl_nccl_local_CPPFLAGS = $(HP_NCCL_TEST_CPPFLAGS)
tests_gpu_nccl_nccl_local_LDADD = -ldl
# the compressed ncclAllReduce, replayed through MPI (run_nccl_compress.sh
# skips where the emulated CUDA module is not built)
check_PROGRAMS += tests/gpu/nccl/nccl_compress
TESTS += tests/gpu/nccl/run_nccl_compress.sh
tests_gpu_nccl_nccl_compress_SOURCES = tests/gpu/nccl/nccl_compress.c tests/gpu/nccl/nccl_compress.h \
	tests/gpu/nccl/nccl_compress_bits.c tests/gpu/nccl/nccl_compress_form.c
tests_gpu_nccl_nccl_compress_CPPFLAGS = $(HP_NCCL_TEST_CPPFLAGS)
tests_gpu_nccl_nccl_compress_LDADD = tests/gpu/mock/libnccl.la -ldl -lm
tests_gpu_nccl_nccl_compress_LDFLAGS = $(AM_LDFLAGS) -no-install
check_PROGRAMS += tests/gpu/nccl/nccl_scenarios
TESTS += tests/gpu/nccl/run_nccl_scenarios.sh
tests_gpu_nccl_nccl_scenarios_SOURCES = tests/gpu/nccl/nccl_scenarios.c tests/gpu/nccl/nccl_scen.c tests/gpu/nccl/nccl_scen.h
tests_gpu_nccl_nccl_scenarios_CPPFLAGS = $(HP_NCCL_TEST_CPPFLAGS)
tests_gpu_nccl_nccl_scenarios_LDADD = tests/gpu/mock/libnccl.la -ldl -lm -lpthread
tests_gpu_nccl_nccl_scenarios_LDFLAGS = $(AM_LDFLAGS) -no-install
check_PROGRAMS += tests/gpu/nccl/nccl_rules
TESTS += tests/gpu/nccl/run_nccl_rules.sh
tests_gpu_nccl_nccl_rules_SOURCES = tests/gpu/nccl/nccl_rules.c tests/gpu/nccl/nccl_scen.c tests/gpu/nccl/nccl_scen.h
tests_gpu_nccl_nccl_rules_CPPFLAGS = $(HP_NCCL_TEST_CPPFLAGS)
tests_gpu_nccl_nccl_rules_LDADD = tests/gpu/mock/libnccl.la -ldl -lm -lpthread
tests_gpu_nccl_nccl_rules_LDFLAGS = $(AM_LDFLAGS) -no-install

# without MPI
check_PROGRAMS += tests/gpu/nccl/nompi_calls tests/gpu/nccl/nompi_launch tests/gpu/nccl/nompi_compress
tests_gpu_nccl_nompi_calls_SOURCES = tests/gpu/nccl/nccl_calls.c
tests_gpu_nccl_nompi_calls_CPPFLAGS = $(HP_NCCL_TEST_CPPFLAGS)
tests_gpu_nccl_nompi_calls_LDADD = tests/gpu/mock_nompi/libnccl.la -ldl -lpthread
tests_gpu_nccl_nompi_calls_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
tests_gpu_nccl_nompi_launch_SOURCES = tests/gpu/nccl/nompi_launch.c
tests_gpu_nccl_nompi_launch_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
tests_gpu_nccl_nompi_compress_SOURCES = tests/gpu/nccl/nompi_compress.c
tests_gpu_nccl_nompi_compress_CPPFLAGS = $(HP_NCCL_TEST_CPPFLAGS)
tests_gpu_nccl_nompi_compress_LDADD = tests/gpu/mock_nompi/libnccl.la -ldl -lm
tests_gpu_nccl_nompi_compress_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
TESTS += tests/gpu/nccl/run_nompi.sh
endif
EXTRA_DIST += tests/gpu/nccl/run_nccl.sh tests/gpu/nccl/run_nccl_compress.sh tests/gpu/nccl/run_nccl_scenarios.sh \
	tests/gpu/nccl/run_nccl_rules.sh tests/gpu/nccl/nccl_run.sh tests/gpu/nccl/run_nompi.sh
