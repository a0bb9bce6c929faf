# tests/gpu/gpu.mk: tests of the GPU path that run without a GPU; appends to
# the variables of Makefile.am.
#
# Stand-ins, never installed, in tests/gpu/mock/.libs/:
#   libcuda.so.1  the driver functions hipress uses; its "device memory"
#                 crashes on any host access, like real device memory, and
#                 is shared between processes through CUDA IPC; its streams
#                 run on a device executor, with stream memory operations;
#                 what hangs on a GPU is reported as a deadlock
#                 (doc/standins.md)
#   libnccl.so.2  records the NCCL calls it gets (builds with nccl.h); its
#                 operations are stream entries that wait for their peers'
#   libhpwatch.so an object to load, to show the load watch fires
#   libnccl_user.so  calls ncclAllReduce; linked to the stand-in NCCL and
#                 loaded into a local scope, as a Python extension is
#
#   check_gpu         Check suite: NCCL eligibility, group tracking, staging
#                     decisions and spans, the load watch, the driver query,
#                     the CUDA module against the stand-in driver
#   run_gpu.sh        MPI_Allreduce/MPI_Bcast/MPI_Allgatherv on host buffers
#                     (unchanged; no libcuda loaded) and on stand-in device
#                     buffers (staged exactly; or passed unchanged)
#   run_nccl.sh       ncclAllReduce and friends through the preload, without
#                     MPI: pass-through, groups, capture, release, settings
#   run_nccl_compress.sh  HIPRESS_NCCL=compress at 2, 3, 4 ranks: the stand-in
#                     NCCL's communicators span MPI's ranks (data through
#                     shared memory), the emulated CUDA module runs the codec
#                     (tests/gpu/nccl_compress*.c)
#   run_nccl_scenarios.sh  what hangs or breaks on a GPU when hipress
#                     synchronises what it must not: two communicators in
#                     opposite orders, an evicted residual, DDP's bucket
#                     rebuild, a capture on another thread
#                     (tests/gpu/nccl_scenarios.c, doc/standins.md)
#   run_nccl_rules.sh what the stand-ins' strict rules stop (a use after
#                     free, memory outside its stream's order, ranks whose
#                     NCCL calls differ) in scenarios of the compressed path
#                     (tests/gpu/nccl_rules.c)
#   run_gpu_info.sh   hipress_info's GPU part, with and without a driver
#   run_cuda.sh       a program linked by nvcc runs the module's self-test
#                     kernel (on a machine without a GPU: a clean error)
#   run_gpu_device.sh on a machine with a GPU only (skipped elsewhere):
#                     hipress_info --gpu, MPI collectives on cudaMalloc'd
#                     memory (mpi_cuda), the real NCCL (nccl_cuda)
#   run_gpu_kit.sh    the device kit (scripts/gpu-kit) made from this build
#                     and its self-test: its command in a mount namespace
#                     without Open MPI, hwloc, Check, CUDA (root only)

# --as-needed: the stand-ins need no libmpi, which the MPI compiler wrapper
# adds (tests/gpu/run_nompi.sh loads them where there is none; a sanitizer build
# links without the toolchain's default --as-needed)
HP_MOCK_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/gpu/mock/.libs -no-undefined -Wl,--as-needed

check_LTLIBRARIES += tests/gpu/mock/libcuda.la tests/gpu/mock/libhpwatch.la
tests_gpu_mock_libcuda_la_SOURCES = tests/gpu/mock_cuda.c tests/gpu/mock_cuda_mem.c tests/gpu/mock_cuda_stream.c tests/gpu/mock_cuda_exec.c \
	tests/gpu/mock_cuda_wfg.c tests/gpu/mock_cuda_rules.c \
	tests/gpu/mock_cuda.h tests/gpu/mock_cuda_int.h
tests_gpu_mock_libcuda_la_LDFLAGS = $(HP_MOCK_LDFLAGS) -version-info 1:0:0 -lpthread -lrt
tests_gpu_mock_libhpwatch_la_SOURCES = tests/gpu/mock_watch.c
tests_gpu_mock_libhpwatch_la_LDFLAGS = $(HP_MOCK_LDFLAGS) -avoid-version

check_PROGRAMS += tests/gpu/check_gpu tests/gpu/mpi_gpu
TESTS += tests/gpu/check_gpu tests/gpu/run_gpu.sh tests/gpu/run_gpu_info.sh
tests_gpu_check_gpu_SOURCES = tests/gpu/check_gpu.c
tests_gpu_check_gpu_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_gpu_LDADD = libhpcore.la $(CHECK_LIBS) -lm
tests_gpu_mpi_gpu_SOURCES = tests/gpu/mpi_gpu.c
tests_gpu_mpi_gpu_LDADD = -ldl
EXTRA_DIST += tests/gpu/run_gpu.sh tests/gpu/run_gpu_info.sh tests/gpu/run_nccl.sh tests/gpu/run_cuda.sh tests/gpu/run_nccl_compress.sh \
    tests/gpu/run_nccl_scenarios.sh tests/gpu/run_nccl_rules.sh tests/gpu/nccl_run.sh \
    tests/gpu/mock_nccl.h

if HP_NCCL
check_LTLIBRARIES += tests/gpu/mock/libnccl.la tests/gpu/libnccl_user.la
HP_MOCK_NCCL_SOURCES = tests/gpu/mock_nccl.c tests/gpu/mock_nccl_ops.c tests/gpu/mock_nccl_ent.c tests/gpu/mock_nccl_shm.c \
	tests/gpu/mock_nccl_seq.c \
	tests/gpu/mock_nccl_int.h \
	tests/gpu/mock_nccl_shm.h tests/gpu/mock_cuda.h
tests_gpu_mock_libnccl_la_SOURCES = $(HP_MOCK_NCCL_SOURCES)
tests_gpu_mock_libnccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_mock_libnccl_la_LDFLAGS = $(HP_MOCK_LDFLAGS) -version-info 2:0:0 -lpthread -ldl -lrt
tests_gpu_libnccl_user_la_SOURCES = tests/gpu/nccl_user.c
tests_gpu_libnccl_user_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_libnccl_user_la_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/gpu/.libs -avoid-version -no-undefined
tests_gpu_libnccl_user_la_LIBADD = tests/gpu/mock/libnccl.la

check_PROGRAMS += tests/gpu/nccl_calls tests/gpu/nccl_local
TESTS += tests/gpu/run_nccl.sh
# the experimental compressed ncclAllReduce, replayed through MPI
# (run_nccl_compress.sh skips where the emulated CUDA module is not built)
check_PROGRAMS += tests/gpu/nccl_compress
TESTS += tests/gpu/run_nccl_compress.sh
tests_gpu_nccl_compress_SOURCES = tests/gpu/nccl_compress.c tests/gpu/nccl_compress.h tests/gpu/nccl_compress_bits.c \
	tests/gpu/nccl_compress_form.c
tests_gpu_nccl_compress_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_nccl_compress_LDADD = tests/gpu/mock/libnccl.la -ldl -lm
tests_gpu_nccl_compress_LDFLAGS = $(AM_LDFLAGS) -no-install
# what hangs or breaks on a GPU when hipress synchronises what it must not
# (tests/gpu/nccl_scenarios.c)
check_PROGRAMS += tests/gpu/nccl_scenarios
TESTS += tests/gpu/run_nccl_scenarios.sh
tests_gpu_nccl_scenarios_SOURCES = tests/gpu/nccl_scenarios.c tests/gpu/nccl_scen.c tests/gpu/nccl_scen.h
tests_gpu_nccl_scenarios_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_nccl_scenarios_LDADD = tests/gpu/mock/libnccl.la -ldl -lm -lpthread
tests_gpu_nccl_scenarios_LDFLAGS = $(AM_LDFLAGS) -no-install
# the strict rules of the stand-ins (tests/gpu/nccl_rules.c)
check_PROGRAMS += tests/gpu/nccl_rules
TESTS += tests/gpu/run_nccl_rules.sh
tests_gpu_nccl_rules_SOURCES = tests/gpu/nccl_rules.c tests/gpu/nccl_scen.c tests/gpu/nccl_scen.h
tests_gpu_nccl_rules_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_nccl_rules_LDADD = tests/gpu/mock/libnccl.la -ldl -lm -lpthread
tests_gpu_nccl_rules_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_gpu_nccl_calls_SOURCES = tests/gpu/nccl_calls.c
tests_gpu_nccl_calls_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_nccl_calls_LDADD = tests/gpu/mock/libnccl.la -ldl -lpthread
tests_gpu_nccl_calls_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_gpu_nccl_local_SOURCES = tests/gpu/nccl_local.c
tests_gpu_nccl_local_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_nccl_local_LDADD = -ldl
endif

if HP_CUDA
# linked by nvcc itself, with the module's kernels
check_PROGRAMS += tests/gpu/cuda_selftest
TESTS += tests/gpu/run_cuda.sh
tests_gpu_cuda_selftest_SOURCES = tests/gpu/cuda_selftest.cu
tests_gpu_cuda_selftest_LINK = $(NVCC) $(NVCC_ARCH_FLAGS) -Werror all-warnings -o $@
tests_gpu_cuda_selftest_LDADD =
tests/gpu/cuda_selftest.$(OBJEXT): $(srcdir)/cuda/hp_cuda_kernels.h $(srcdir)/cuda/hp_cuda_kernels.cu

# with the CUDA runtime's shared library, for run_gpu_device.sh
check_PROGRAMS += tests/gpu/mpi_cuda
TESTS += tests/gpu/run_gpu_device.sh
tests_gpu_mpi_cuda_SOURCES = tests/gpu/mpi_cuda.c
tests_gpu_mpi_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_mpi_cuda_LDFLAGS = $(AM_LDFLAGS) -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR)
tests_gpu_mpi_cuda_LDADD = -lcudart
if HP_NCCL_LIB
check_PROGRAMS += tests/gpu/nccl_cuda
tests_gpu_nccl_cuda_SOURCES = tests/gpu/nccl_cuda.c
tests_gpu_nccl_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_nccl_cuda_LDFLAGS = $(AM_LDFLAGS) -L$(NCCL_LIBDIR) -L$(CUDA_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR)
tests_gpu_nccl_cuda_LDADD = -lnccl -lcudart -ldl
endif
if HP_NCCL
# the device kit carries the stand-in NCCL (libnccl_user, nccl_local)
TESTS += tests/gpu/run_gpu_kit.sh
endif
endif
EXTRA_DIST += tests/gpu/run_gpu_device.sh tests/gpu/run_gpu_kit.sh
include $(top_srcdir)/tests/gpu/ipc/ipc.mk

# The GPU path's tests that need no GPU (scripts/test.sh runs them again in
# its sanitizer and CUDA-less builds).
print-gpu-tests:
	@echo $(filter tests/gpu/check_gpu tests/gpu/run_gpu.sh tests/gpu/run_nccl.sh tests/gpu/run_gpu_info.sh tests/gpu/run_gpu_emu.sh tests/gpu/run_nccl_compress.sh tests/gpu/run_nompi.sh \
	tests/gpu/run_standins.sh tests/gpu/run_nccl_scenarios.sh tests/gpu/run_nccl_rules.sh,$(TESTS))
.PHONY: print-gpu-tests
