# tests/gpu/kern/kern.mk: the kernels and the device codec against the CPU
# compressors' bytes; appends to the variables of Makefile.am.
#   check_kern        Check suite, in every build (no GPU, no CUDA): the
#                     module's codec (cuda/codec) driving the kernels'
#                     per-thread functions run over their grid by the serial
#                     emulation (tests/gpu/emu)
#   mpi_gpu_codec     the same comparison through MPI_Allreduce on the
#                     emulated module (tests/gpu/emu/run_gpu_emu.sh)
# On a machine with a GPU only (run_gpu_codec.sh, scripts/kit/gpu-check;
# skipped elsewhere): the kernels bit for bit against the CPU (gpu_kern),
# the same comparison as mpi_gpu_codec on cudaMalloc'd memory
# (mpi_cuda_codec), and the speedups of compression on host and device
# buffers in one run (mpi_cuda_bench).  gpu_kern_resources.sh: every kernel
# of the built module fits the devices it is built for (registers, shared
# memory, launch bounds from its cubins, against the launch configurations
# its launchers make on the SIMT emulator).

# what the kernel checks share: cases and data on host or device memory
HP_KERN_CHECK_SOURCES = tests/gpu/kern/kern_data.h tests/gpu/kern/kern_host_dev.c tests/gpu/kern/kern_host_dev.h
HP_KERN_CHECK_CPPFLAGS = -I$(top_srcdir)/tests/gpu/kern

check_PROGRAMS += tests/gpu/kern/check_kern
TESTS += tests/gpu/kern/check_kern
tests_gpu_kern_check_kern_SOURCES = tests/gpu/kern/check_kern.c tests/gpu/kern/check_kern.h \
	tests/gpu/kern/check_kern_fmt.c tests/gpu/kern/check_kern_msg.c $(HP_KERN_CHECK_SOURCES) $(HP_CODEC_SOURCES) \
	$(HP_KERN_EMU_SOURCES)
tests_gpu_kern_check_kern_CPPFLAGS = $(AM_CPPFLAGS) $(HP_CUDA_INCLUDES) $(HP_KERN_EMU_CPPFLAGS)
tests_gpu_kern_check_kern_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_kern_check_kern_LDADD = libhpcore.la $(CHECK_LIBS) -lm

# gpu_kern's files (built with CUDA only, below; distributed in every build)
HP_GPU_KERN_SOURCES = tests/gpu/kern/gpu_kern.c tests/gpu/kern/gpu_kern.h tests/gpu/kern/gpu_kern_fmt.c \
	tests/gpu/kern/gpu_kern_ops.c tests/gpu/kern/kern_data.h
EXTRA_DIST += $(HP_GPU_KERN_SOURCES) tests/gpu/kern/mpi_gpu_codec.c tests/gpu/kern/mpi_cuda_bench.c \
	tests/gpu/kern/run_gpu_codec.sh tests/gpu/kern/gpu_kern_resources.sh tests/gpu/kern/gpu_kern_resources.py

if HP_CUDA
check_PROGRAMS += tests/gpu/kern/mpi_gpu_codec
tests_gpu_kern_mpi_gpu_codec_SOURCES = tests/gpu/kern/mpi_gpu_codec.c
tests_gpu_kern_mpi_gpu_codec_LDADD = -ldl -lm -lpthread

check_PROGRAMS += tests/gpu/kern/gpu_kern tests/gpu/kern/mpi_cuda_codec tests/gpu/kern/mpi_cuda_bench
tests_gpu_kern_gpu_kern_SOURCES = $(HP_GPU_KERN_SOURCES)
tests_gpu_kern_gpu_kern_LDADD = libhpcore.la -lm
tests_gpu_kern_mpi_cuda_codec_SOURCES = tests/gpu/kern/mpi_gpu_codec.c
tests_gpu_kern_mpi_cuda_codec_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -DHP_REAL_CUDA
tests_gpu_kern_mpi_cuda_codec_LDFLAGS = $(AM_LDFLAGS) -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR)
tests_gpu_kern_mpi_cuda_codec_LDADD = -lcudart -ldl -lm -lpthread
tests_gpu_kern_mpi_cuda_bench_SOURCES = tests/gpu/kern/mpi_cuda_bench.c
tests_gpu_kern_mpi_cuda_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_kern_mpi_cuda_bench_LDFLAGS = $(AM_LDFLAGS) -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR)
tests_gpu_kern_mpi_cuda_bench_LDADD = -lcudart -ldl -lm
TESTS += tests/gpu/kern/run_gpu_codec.sh tests/gpu/kern/gpu_kern_resources.sh
endif
