# cuda/cuda.mk: the GPU path; appends to the variables of Makefile.am.
#
# Host side, in every build: device-buffer detection and the module loader
# (src/backend/hp_gpu.c) and the MPI wrappers that stage device buffers
# (wrap/hp_mpi_gpu.c).  The NCCL interception is wrap/nccl.mk's.
#
# The CUDA module, when configure finds CUDA (HP_CUDA): libhipress_cuda.so in
# $(pkglibdir) ($(libdir)/hipress), loaded by libhipress.so at run time
# only.  Host C (warnings as errors) plus cuda/*.cu compiled by nvcc with
# -Werror all-warnings and --fmad=false (contract 1, doc/dev/contracts.md: the same bytes
# decode to the same bits on every path); the static CUDA runtime, so the
# module needs nothing but the driver.

AM_CPPFLAGS += -DHP_PKGLIBDIR='"$(pkglibdir)"'

libhpbase_la_SOURCES += src/backend/hp_gpu.h src/backend/hp_gpu.c src/comp/hp_gpu_fmt.h src/comp/hp_gpu_fmt.def src/backend/hp_backend.h src/backend/hp_gpu_backend.c
libhpbase_la_SOURCES += src/backend/hp_gpu_devmsg.c src/backend/hp_gpu_owner.c
libhipress_la_SOURCES += wrap/hp_wrap_gpu.h wrap/hp_mpi_gpu.c

# The module's host side (cuda/hp_cuda_mod.h lists its files), in the module
# and the emulated module alike.
HP_MODULE_SOURCES = cuda/hp_cuda_mod.h cuda/hp_cuda_module.c cuda/hp_cuda_driver.c cuda/hp_cuda_wait.c \
	cuda/hp_cuda_stream.c cuda/hp_cuda_cx.c cuda/hp_cuda_calls.c cuda/hp_cuda_bench.c

# The device codec, plain C built into the module, the emulated module and
# tests/gpu/check_kern: the frame (hp_codec_frame.c) and the rows of each family of
# formats (cuda/hp_codec_fmt.h).  The kernels, a file per family too: the
# CUDA ones (the module) and their emulation on the host (the others).
HP_CODEC_SOURCES = cuda/hp_codec.h cuda/hp_codec_frame.c cuda/hp_codec_ws.c cuda/hp_codec_fmt.h cuda/hp_codec_quant.c \
	cuda/hp_codec_half.c cuda/hp_codec_sparse.c
HP_KERN_CU_SOURCES = cuda/hp_kern.h cuda/hp_kern_msg.h cuda/hp_klaunch.h cuda/hp_kern_cu.cuh cuda/hp_kern.cu cuda/hp_kern_quant.cu \
	cuda/hp_kern_half.cu cuda/hp_kern_sparse.cu cuda/hp_kern_psgd.h cuda/hp_kern_psgd.cu cuda/hp_kern_load.cu
HP_KERN_EMU_SOURCES = cuda/hp_kern.h cuda/hp_kern_msg.h cuda/hp_klaunch.h cuda/hp_kern_emu.h cuda/hp_kern_emu.c \
	cuda/hp_kern_emu_quant.c cuda/hp_kern_emu_half.c cuda/hp_kern_emu_sparse.c cuda/hp_kern_psgd.h \
	cuda/hp_kern_emu_psgd.c

EXTRA_DIST += cuda/nvcc_lt.sh cuda/hp_cuda_kernels.cu cuda/hp_cuda_kernels.h \
	$(HP_KERN_CU_SOURCES) $(HP_CODEC_SOURCES) $(HP_KERN_EMU_SOURCES)

# The device codec's logic on the CPU, in every build (no GPU, no CUDA
# needed): the kernels' per-thread functions run over their grid by
# cuda/hp_kern_emu*.c, driven by the module's codec, against the CPU
# compressors' bytes.
check_PROGRAMS += tests/gpu/check_kern
TESTS += tests/gpu/check_kern
tests_gpu_check_kern_SOURCES = tests/gpu/check_kern.c tests/gpu/check_kern.h tests/gpu/check_kern_fmt.c \
	tests/gpu/check_kern_msg.c tests/gpu/kern_data.h tests/gpu/kern_host_dev.c tests/gpu/kern_host_dev.h $(HP_CODEC_SOURCES) $(HP_KERN_EMU_SOURCES)
tests_gpu_check_kern_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/cuda
tests_gpu_check_kern_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_kern_LDADD = libhpcore.la $(CHECK_LIBS) -lm

# tests/gpu/gpu_kern's files (built with CUDA only, below; distributed in
# every build).
HP_GPU_KERN_SOURCES = tests/gpu/gpu_kern.c tests/gpu/gpu_kern.h tests/gpu/gpu_kern_fmt.c tests/gpu/gpu_kern_ops.c \
	tests/gpu/kern_data.h

# nvcc, with the flags every CUDA object of hipress gets
HP_NVCC_FLAGS = $(NVCC_ARCH_FLAGS) -std=c++17 -O2 --fmad=false -Werror all-warnings \
	-Xcompiler -Wall,-Wextra,-Werror,-fvisibility=hidden \
	-DHAVE_CONFIG_H -I$(top_builddir) $(HP_SRC_INCLUDES) -I$(top_srcdir)/cuda $(NVCCFLAGS)
AM_V_NVCC = $(am__v_NVCC_@AM_V@)
am__v_NVCC_ = $(am__v_NVCC_@AM_DEFAULT_V@)
am__v_NVCC_0 = @echo "  NVCC    " $@;
am__v_NVCC_1 =

SUFFIXES = .cu
# a libtool object (the module): nvcc refuses libtool's -fPIC, so
# cuda/nvcc_lt.sh does libtool's part
.cu.lo:
	$(AM_V_NVCC)$(SHELL) $(top_srcdir)/cuda/nvcc_lt.sh $@ $(NVCC) $(HP_NVCC_FLAGS) -Xcompiler -fPIC -c $<
# a plain object (programs linked by nvcc)
.cu.$(OBJEXT):
	$(AM_V_NVCC)$(NVCC) $(HP_NVCC_FLAGS) -c $< -o $@

if HP_CUDA
pkglib_LTLIBRARIES = libhipress_cuda.la
libhipress_cuda_la_SOURCES = $(HP_MODULE_SOURCES) cuda/hp_cuda_kernels.h cuda/hp_cuda_kernels.cu src/backend/hp_gpu.h \
	$(HP_CODEC_SOURCES) $(HP_KERN_CU_SOURCES)
libhipress_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
libhipress_cuda_la_CFLAGS = $(AM_CFLAGS) -Werror
# a dlopen()ed module exporting one symbol; the static CUDA runtime needs
# librt, libdl, libpthread; --as-needed drops what the MPI compiler wrapper adds
libhipress_cuda_la_LDFLAGS = -module -avoid-version -shared -Wl,--as-needed \
	-export-symbols-regex '^hipress_gpu_ops_v[123]$$'
libhipress_cuda_la_LIBADD = -L$(CUDA_LIBDIR) -lcudart_static -lrt -ldl -lpthread -lstdc++

cuda/hp_cuda_kernels.lo cuda/hp_cuda_kernels.$(OBJEXT): $(srcdir)/cuda/hp_cuda_kernels.h config.h
cuda/hp_kern.lo cuda/hp_kern_quant.lo cuda/hp_kern_half.lo cuda/hp_kern_sparse.lo cuda/hp_kern_psgd.lo \
cuda/hp_kern_load.lo cuda/hp_kern.$(OBJEXT) cuda/hp_kern_quant.$(OBJEXT) cuda/hp_kern_half.$(OBJEXT) \
cuda/hp_kern_sparse.$(OBJEXT) cuda/hp_kern_psgd.$(OBJEXT) cuda/hp_kern_load.$(OBJEXT): $(srcdir)/cuda/hp_kern_psgd.h \
	$(srcdir)/cuda/hp_kern.h $(srcdir)/cuda/hp_klaunch.h $(srcdir)/cuda/hp_kern_cu.cuh $(srcdir)/src/ops/hp_elem.h \
	config.h

# The emulated module, never installed: the module's host code (driver API,
# codec contexts, the codec) with the kernels run on the host
# (cuda/hp_kern_emu*.c), loaded through HIPRESS_CUDA_MODULE under the
# stand-in driver (tests/gpu/mock/libcuda.so.1), so the MPI tests run the whole
# device path without a GPU (tests/gpu/run_gpu_emu.sh).
check_LTLIBRARIES += tests/gpu/mock/libhipress_cuda_emu.la
tests_gpu_mock_libhipress_cuda_emu_la_SOURCES = $(HP_MODULE_SOURCES) $(HP_CODEC_SOURCES) $(HP_KERN_EMU_SOURCES)
tests_gpu_mock_libhipress_cuda_emu_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -I$(top_srcdir)/cuda -DHP_KL_TRANSLATE
tests_gpu_mock_libhipress_cuda_emu_la_CFLAGS = $(AM_CFLAGS) -Werror
tests_gpu_mock_libhipress_cuda_emu_la_LDFLAGS = -module -avoid-version -shared -Wl,--as-needed -rpath $(abs_builddir)/tests/gpu/mock/.libs \
	-export-symbols-regex '^hipress_gpu_ops_v[123]$$'
tests_gpu_mock_libhipress_cuda_emu_la_LIBADD = -ldl -lpthread -lm
check_PROGRAMS += tests/gpu/mpi_gpu_codec
tests_gpu_mpi_gpu_codec_SOURCES = tests/gpu/mpi_gpu_codec.c
tests_gpu_mpi_gpu_codec_LDADD = -ldl -lm -lpthread
TESTS += tests/gpu/run_gpu_emu.sh

# On a machine with a GPU only (tests/gpu/run_gpu_codec.sh, scripts/gpu-check;
# skipped elsewhere): the kernels bit for bit against the CPU (gpu_kern),
# the same comparison as mpi_gpu_codec on cudaMalloc'd memory
# (mpi_cuda_codec), and the speedups of compression on host and device
# buffers in one run (mpi_cuda_bench).
check_PROGRAMS += tests/gpu/gpu_kern tests/gpu/mpi_cuda_codec tests/gpu/mpi_cuda_bench
tests_gpu_gpu_kern_SOURCES = $(HP_GPU_KERN_SOURCES)
tests_gpu_gpu_kern_LDADD = libhpcore.la -lm
tests_gpu_mpi_cuda_codec_SOURCES = tests/gpu/mpi_gpu_codec.c
tests_gpu_mpi_cuda_codec_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -DHP_REAL_CUDA
tests_gpu_mpi_cuda_codec_LDFLAGS = $(AM_LDFLAGS) -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR)
tests_gpu_mpi_cuda_codec_LDADD = -lcudart -ldl -lm -lpthread
tests_gpu_mpi_cuda_bench_SOURCES = tests/gpu/mpi_cuda_bench.c
tests_gpu_mpi_cuda_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_mpi_cuda_bench_LDFLAGS = $(AM_LDFLAGS) -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR)
tests_gpu_mpi_cuda_bench_LDADD = -lcudart -ldl -lm
TESTS += tests/gpu/run_gpu_codec.sh

# Every kernel of the built module fits the devices it is built for
# (registers, shared memory, launch bounds from its cubins, against the
# launch configurations its launchers make on the SIMT emulator)
TESTS += tests/gpu/gpu_kern_resources.sh
endif
EXTRA_DIST += tests/gpu/run_gpu_emu.sh tests/gpu/mpi_gpu_codec.c $(HP_GPU_KERN_SOURCES) tests/gpu/mpi_cuda_bench.c \
	tests/gpu/run_gpu_codec.sh tests/gpu/gpu_kern_resources.sh tests/gpu/gpu_kern_resources.py
