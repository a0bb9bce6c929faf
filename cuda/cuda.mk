# cuda/cuda.mk: the CUDA module, libhipress_cuda.so; appends to the
# variables of Makefile.am.  Its folders:
#   cuda/module  the module's host side: the driver API, streams, waits,
#                codec contexts, its exported tables (hp_cuda_mod.h lists
#                the files), and the self-test kernel
#   cuda/codec   the device codec, plain C: the frame (hp_codec_frame.c)
#                and the rows of each family of formats (hp_codec_fmt.h)
#   cuda/kern    the kernels, a file per family, their launchers
#                (hp_klaunch.h) and per-thread functions (hp_kern.h)
# The variables below name these files for the builds that run the same
# host code on other kernels: the emulated modules and the kernel checks
# of tests/gpu (emu/, simt/, kern/), which run without a GPU.
#
# The module is built when configure finds CUDA (HP_CUDA), installed in
# $(pkglibdir) ($(libdir)/hipress) and loaded by libhipress.so at run time
# only.  Host C (warnings as errors) plus cuda/kern/*.cu compiled by nvcc
# with -Werror all-warnings and --fmad=false (contract 1,
# doc/dev/contracts.md: the same bytes decode to the same bits on every
# path); the static CUDA runtime, so the module needs nothing but the
# driver.

AM_CPPFLAGS += -DHP_PKGLIBDIR='"$(pkglibdir)"'

HP_CUDA_INCLUDES = -I$(top_srcdir)/cuda/module -I$(top_srcdir)/cuda/codec -I$(top_srcdir)/cuda/kern
HP_MODULE_SOURCES = cuda/module/hp_cuda_mod.h cuda/module/hp_cuda_module.c cuda/module/hp_cuda_driver.c \
	cuda/module/hp_cuda_wait.c cuda/module/hp_cuda_stream.c cuda/module/hp_cuda_cx.c cuda/module/hp_cuda_calls.c \
	cuda/module/hp_cuda_bench.c
HP_CODEC_SOURCES = cuda/codec/hp_codec.h cuda/codec/hp_codec_frame.c cuda/codec/hp_codec_ws.c cuda/codec/hp_codec_fmt.h \
	cuda/codec/hp_codec_quant.c cuda/codec/hp_codec_half.c cuda/codec/hp_codec_sparse.c
# what every execution of the kernels shares: per-thread functions, message
# layout, launchers
HP_KERN_HDRS = cuda/kern/hp_kern.h cuda/kern/hp_kern_msg.h cuda/kern/hp_klaunch.h cuda/kern/hp_kern_psgd.h
HP_KERN_CU_SOURCES = $(HP_KERN_HDRS) cuda/kern/hp_kern_cu.cuh cuda/kern/hp_kern.cu cuda/kern/hp_kern_quant.cu \
	cuda/kern/hp_kern_half.cu cuda/kern/hp_kern_sparse.cu cuda/kern/hp_kern_psgd.cu cuda/kern/hp_kern_load.cu
HP_SELFTEST_KERNEL = cuda/module/hp_cuda_kernels.h cuda/module/hp_cuda_kernels.cu

EXTRA_DIST += cuda/nvcc_lt.sh $(HP_SELFTEST_KERNEL) $(HP_KERN_CU_SOURCES) $(HP_CODEC_SOURCES) $(HP_MODULE_SOURCES)

# nvcc, with the flags every CUDA object of hipress gets
HP_NVCC_FLAGS = $(NVCC_ARCH_FLAGS) -std=c++17 -O2 --fmad=false -Werror all-warnings \
	-Xcompiler -Wall,-Wextra,-Werror,-fvisibility=hidden \
	-DHAVE_CONFIG_H -I$(top_builddir) $(HP_SRC_INCLUDES) $(HP_CUDA_INCLUDES) $(NVCCFLAGS)
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
libhipress_cuda_la_SOURCES = $(HP_MODULE_SOURCES) $(HP_SELFTEST_KERNEL) $(HP_CODEC_SOURCES) $(HP_KERN_CU_SOURCES)
libhipress_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(HP_CUDA_INCLUDES) $(CUDA_CPPFLAGS)
libhipress_cuda_la_CFLAGS = $(AM_CFLAGS) -Werror
# a dlopen()ed module exporting one symbol; the static CUDA runtime needs
# librt, libdl, libpthread; --as-needed drops what the MPI compiler wrapper adds
libhipress_cuda_la_LDFLAGS = -module -avoid-version -shared -Wl,--as-needed \
	-export-symbols-regex '^hipress_gpu_ops_v[123]$$'
libhipress_cuda_la_LIBADD = -L$(CUDA_LIBDIR) -lcudart_static -lrt -ldl -lpthread -lstdc++

cuda/module/hp_cuda_kernels.lo cuda/module/hp_cuda_kernels.$(OBJEXT): $(srcdir)/cuda/module/hp_cuda_kernels.h config.h
HP_KERN_CU_OBJS = hp_kern hp_kern_quant hp_kern_half hp_kern_sparse hp_kern_psgd hp_kern_load
$(HP_KERN_CU_OBJS:%=cuda/kern/%.lo) $(HP_KERN_CU_OBJS:%=cuda/kern/%.$(OBJEXT)): $(HP_KERN_HDRS:%=$(srcdir)/%) \
	$(srcdir)/cuda/kern/hp_kern_cu.cuh $(srcdir)/src/ops/hp_elem.h config.h
endif
