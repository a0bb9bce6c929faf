# tests/gpu/emu/emu.mk: the kernels run serially on the host; appends to
# the variables of Makefile.am.
#
# hp_kern_emu*.c run each kernel's per-thread functions (cuda/kern/hp_kern.h)
# over its grid, one thread after another, a file per family as the CUDA
# kernels are.  They are test code: the kernel checks (tests/gpu/kern) and
# the emulated module below run on them, never a library a user gets.
#
# The emulated module, never installed: the module's host code (driver API,
# codec contexts, the codec) with the kernels run on the host
# (HP_KL_TRANSLATE), loaded through HIPRESS_CUDA_MODULE under the stand-in
# driver (tests/gpu/mock/libcuda.so.1), so the MPI tests run the whole
# device path without a GPU (run_gpu_emu.sh, with kern/mpi_gpu_codec).
HP_KERN_EMU_SOURCES = $(HP_KERN_HDRS) tests/gpu/emu/hp_kern_emu.h tests/gpu/emu/hp_kern_emu.c \
	tests/gpu/emu/hp_kern_emu_quant.c tests/gpu/emu/hp_kern_emu_half.c tests/gpu/emu/hp_kern_emu_sparse.c \
	tests/gpu/emu/hp_kern_emu_psgd.c
HP_KERN_EMU_CPPFLAGS = -I$(top_srcdir)/tests/gpu/emu
EXTRA_DIST += $(HP_KERN_EMU_SOURCES) tests/gpu/emu/run_gpu_emu.sh

if HP_CUDA
check_LTLIBRARIES += tests/gpu/mock/libhipress_cuda_emu.la
tests_gpu_mock_libhipress_cuda_emu_la_SOURCES = $(HP_MODULE_SOURCES) $(HP_CODEC_SOURCES) $(HP_KERN_EMU_SOURCES)
tests_gpu_mock_libhipress_cuda_emu_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) $(HP_CUDA_INCLUDES) \
	$(HP_KERN_EMU_CPPFLAGS) -DHP_KL_TRANSLATE
tests_gpu_mock_libhipress_cuda_emu_la_CFLAGS = $(AM_CFLAGS) -Werror
tests_gpu_mock_libhipress_cuda_emu_la_LDFLAGS = -module -avoid-version -shared -Wl,--as-needed \
	-rpath $(abs_builddir)/tests/gpu/mock/.libs -export-symbols-regex '^hipress_gpu_ops_v[123]$$'
tests_gpu_mock_libhipress_cuda_emu_la_LIBADD = -ldl -lpthread -lm
TESTS += tests/gpu/emu/run_gpu_emu.sh
endif
