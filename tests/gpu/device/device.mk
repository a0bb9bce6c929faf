# tests/gpu/device/device.mk: what needs a GPU; appends to the variables of
# Makefile.am.  Built with CUDA; each test skips (77) where no device is.
#   run_cuda.sh         cuda_selftest, linked by nvcc with the module's
#                       self-test kernel (on a machine without a GPU: a
#                       clean error)
#   run_gpu_device.sh   hipress_info --gpu, MPI collectives on cudaMalloc'd
#                       memory (mpi_cuda), the real NCCL (nccl_cuda), and
#                       tests/gpu/kern/run_gpu_codec.sh
if HP_CUDA
# linked by nvcc itself, with the module's kernels
check_PROGRAMS += tests/gpu/device/cuda_selftest
TESTS += tests/gpu/device/run_cuda.sh
tests_gpu_device_cuda_selftest_SOURCES = tests/gpu/device/cuda_selftest.cu
tests_gpu_device_cuda_selftest_LINK = $(NVCC) $(NVCC_ARCH_FLAGS) -Werror all-warnings -o $@
tests_gpu_device_cuda_selftest_LDADD =
tests/gpu/device/cuda_selftest.$(OBJEXT): $(HP_SELFTEST_KERNEL:%=$(srcdir)/%)

# with the CUDA runtime's shared library
check_PROGRAMS += tests/gpu/device/mpi_cuda
TESTS += tests/gpu/device/run_gpu_device.sh
tests_gpu_device_mpi_cuda_SOURCES = tests/gpu/device/mpi_cuda.c
tests_gpu_device_mpi_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_device_mpi_cuda_LDFLAGS = $(AM_LDFLAGS) -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR)
tests_gpu_device_mpi_cuda_LDADD = -lcudart
if HP_NCCL_LIB
check_PROGRAMS += tests/gpu/device/nccl_cuda
tests_gpu_device_nccl_cuda_SOURCES = tests/gpu/device/nccl_cuda.c
tests_gpu_device_nccl_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_device_nccl_cuda_LDFLAGS = $(AM_LDFLAGS) -L$(NCCL_LIBDIR) -L$(CUDA_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) \
	-Wl,-rpath,$(CUDA_LIBDIR)
tests_gpu_device_nccl_cuda_LDADD = -lnccl -lcudart -ldl
endif
endif
EXTRA_DIST += tests/gpu/device/run_cuda.sh tests/gpu/device/run_gpu_device.sh
