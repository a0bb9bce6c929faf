# tests/gpu/kit/kit.mk: the device kit's programs (scripts/gpu-kit carries
# them to a lent GPU, doc/dev/kit.md) and the kit's self-test; appends to
# the variables of Makefile.am.
#   kit_preflight     the kit's first step: the driver, the devices, CUDA IPC
#   kit_nccl          the kit's multi-process compressed ncclAllReduce
#   kit_mpi           the same calls through MPI_Allreduce (the reference)
#   run_gpu_kit.sh    the device kit (scripts/gpu-kit) made from this build
#                     and its self-test: its command in a mount namespace
#                     without Open MPI, hwloc, Check, CUDA (root only)
# The programs take the driver through dlopen and NCCL as libnccl.so.2 (the
# stand-in over shared memory here, tests/gpu/ipc's on the GPU);
# tests/gpu/ipc/run_ipc.sh runs them over the stand-in driver.
if HP_NCCL
check_PROGRAMS += tests/gpu/kit/kit_preflight tests/gpu/kit/kit_nccl tests/gpu/kit/kit_mpi
tests_gpu_kit_kit_preflight_SOURCES = tests/gpu/kit/kit_preflight.c
tests_gpu_kit_kit_preflight_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_kit_kit_preflight_LDADD = -ldl
tests_gpu_kit_kit_preflight_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
tests_gpu_kit_kit_nccl_SOURCES = tests/gpu/kit/kit_nccl.c tests/gpu/kit/kit_cases.h
tests_gpu_kit_kit_nccl_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_kit_kit_nccl_LDADD = tests/gpu/mock_nompi/libnccl.la -ldl -lm
tests_gpu_kit_kit_nccl_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
tests_gpu_kit_kit_mpi_SOURCES = tests/gpu/kit/kit_mpi.c tests/gpu/kit/kit_cases.h
tests_gpu_kit_kit_mpi_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_kit_kit_mpi_LDADD = -ldl -lm
if HP_CUDA
# the kit carries the stand-in NCCL (nccl/libnccl_user, nccl/nccl_local)
TESTS += tests/gpu/kit/run_gpu_kit.sh
endif
endif
EXTRA_DIST += tests/gpu/kit/run_gpu_kit.sh
