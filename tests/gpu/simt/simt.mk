# tests/gpu/simt/simt.mk: the CUDA kernels on the CPU, on the strict SIMT
# emulator (hp_simt*, doc/dev/simt.md); appends to the variables of
# Makefile.am.  In every build: no GPU and no CUDA needed.  The emulator is
# test code: it runs the real kernels, and nothing a user gets is built on
# it.
#
#   simt_kern       cuda/kern/hp_kern*.cu compiled as C++ (kern*.cc here)
#                   and run by their own launchers, bit for bit against the
#                   CPU path
#   simt_kern_tsan  the same under ThreadSanitizer (the kernels,
#                   the codec and the test; the emulator's runtime is
#                   built without it, in libhpsimt_tsan.la, and tells it the
#                   kernels' synchronisation)
#   simt_kern_asan  the same under AddressSanitizer and UBSan (the runtime
#                   in libhpsimt_asan.la, telling it of every stack switch)
#   tests/gpu/mock/libhipress_cuda_simt.la  the emulated CUDA module on them
#   run_simt.sh     runs them under several scheduling seeds, holds the
#                   count of kernels launched to the sources' __global__
#                   functions, and checks that mutants of the kernels are
#                   caught (simt_mutants.sh)
# The kernels' objects, in each of these, are compiled by HP_SIMT_CXX (clang,
# configure's HP_CHECK_SIMT_CXX) with hooks on every load and store, through
# which the emulator's shared-memory race detector sees each lane's accesses
# (hp_simt_race.cc); the rest is compiled by CXX as usual and
# linked as usual (clang's sanitizer instrumentation runs on gcc's runtimes).
# In a sanitizer build (--enable-sanitizers) everything is ASan+UBSan
# already: simt_kern is that build, and there is no ThreadSanitizer one.

HP_SIMT_KERN_SOURCES = tests/gpu/simt/kern.cc tests/gpu/simt/kern_quant.cc tests/gpu/simt/kern_half.cc \
	tests/gpu/simt/kern_sparse.cc tests/gpu/simt/kern_psgd.cc tests/gpu/simt/kern_load.cc tests/gpu/simt/kern_selftest.cc
HP_SIMT_RT_SOURCES = tests/gpu/simt/hp_simt.h tests/gpu/simt/hp_simt_api.h tests/gpu/simt/hp_simt_rt.h \
	tests/gpu/simt/hp_simt.cc tests/gpu/simt/hp_simt_launch.cc tests/gpu/simt/hp_simt_fiber.h \
	tests/gpu/simt/hp_simt_fiber.cc tests/gpu/simt/hp_simt_race.cc tests/gpu/simt/hp_simt_report.cc
HP_SIMT_TEST_SOURCES = tests/gpu/simt/simt_kern.c tests/gpu/simt/simt_ops.c tests/gpu/simt/simt_kern.h \
	$(HP_KERN_CHECK_SOURCES) $(HP_CODEC_SOURCES)
HP_SIMT_CPPFLAGS = $(AM_CPPFLAGS) $(HP_CUDA_INCLUDES) -I$(top_srcdir)/tests/gpu/simt $(HP_KERN_CHECK_CPPFLAGS)
# -ffp-contract=off: the kernels' sums round as on the CPU and the device
# (nvcc --fmad=false); #pragma unroll is nvcc's
HP_SIMT_CXXFLAGS = -std=c++17 -Wall -Wextra -Werror -Wno-unknown-pragmas -ffp-contract=off -pthread
HP_SIMT_TSAN_FLAGS = -fsanitize=thread
HP_SIMT_ASAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# the compiler of the kernels' objects (automake names them
# tests/gpu/simt/<target>-kern*.o): GNU make's pattern-specific variables
if HP_SIMT_RACE
HP_SIMT_KERN_CXX = $(HP_SIMT_CXX) -fsanitize-coverage=func,trace-loads,trace-stores
else
HP_SIMT_KERN_CXX = $(CXX)
endif
HP_SIMT_KERN_OBJS = $(foreach k,$(notdir $(HP_SIMT_KERN_SOURCES:.cc=)),tests/gpu/simt/%-$(k).$(OBJEXT) tests/gpu/simt/%-$(k).lo)
$(HP_SIMT_KERN_OBJS): CXX = $(HP_SIMT_KERN_CXX)

check_PROGRAMS += tests/gpu/simt/simt_kern
tests_gpu_simt_simt_kern_SOURCES = $(HP_SIMT_TEST_SOURCES) $(HP_SIMT_KERN_SOURCES) $(HP_SIMT_RT_SOURCES)
tests_gpu_simt_simt_kern_CPPFLAGS = $(HP_SIMT_CPPFLAGS)
tests_gpu_simt_simt_kern_CXXFLAGS = $(HP_SIMT_CXXFLAGS) $(HP_SAN_CFLAGS)
tests_gpu_simt_simt_kern_LDADD = libhpbase.la -lm

if !HP_SANITIZERS
# the runtime, not instrumented, telling the sanitizer what it does
check_LTLIBRARIES += tests/gpu/simt/libhpsimt_tsan.la tests/gpu/simt/libhpsimt_asan.la
tests_gpu_simt_libhpsimt_tsan_la_SOURCES = $(HP_SIMT_RT_SOURCES)
tests_gpu_simt_libhpsimt_tsan_la_CPPFLAGS = $(HP_SIMT_CPPFLAGS) -DHP_SIMT_TSAN=1
tests_gpu_simt_libhpsimt_tsan_la_CXXFLAGS = $(HP_SIMT_CXXFLAGS)
tests_gpu_simt_libhpsimt_asan_la_SOURCES = $(HP_SIMT_RT_SOURCES)
tests_gpu_simt_libhpsimt_asan_la_CPPFLAGS = $(HP_SIMT_CPPFLAGS) -DHP_SIMT_ASAN=1
tests_gpu_simt_libhpsimt_asan_la_CXXFLAGS = $(HP_SIMT_CXXFLAGS)

check_PROGRAMS += tests/gpu/simt/simt_kern_tsan tests/gpu/simt/simt_kern_asan
tests_gpu_simt_simt_kern_tsan_SOURCES = $(HP_SIMT_TEST_SOURCES) $(HP_SIMT_KERN_SOURCES)
tests_gpu_simt_simt_kern_tsan_CPPFLAGS = $(HP_SIMT_CPPFLAGS)
tests_gpu_simt_simt_kern_tsan_CFLAGS = $(AM_CFLAGS) $(HP_SIMT_TSAN_FLAGS)
tests_gpu_simt_simt_kern_tsan_CXXFLAGS = $(HP_SIMT_CXXFLAGS) $(HP_SIMT_TSAN_FLAGS)
tests_gpu_simt_simt_kern_tsan_LDFLAGS = $(AM_LDFLAGS) $(HP_SIMT_TSAN_FLAGS)
tests_gpu_simt_simt_kern_tsan_LDADD = tests/gpu/simt/libhpsimt_tsan.la libhpbase.la -lm
tests_gpu_simt_simt_kern_asan_SOURCES = $(HP_SIMT_TEST_SOURCES) $(HP_SIMT_KERN_SOURCES)
tests_gpu_simt_simt_kern_asan_CPPFLAGS = $(HP_SIMT_CPPFLAGS)
tests_gpu_simt_simt_kern_asan_CFLAGS = $(AM_CFLAGS) $(HP_SIMT_ASAN_FLAGS)
tests_gpu_simt_simt_kern_asan_CXXFLAGS = $(HP_SIMT_CXXFLAGS) $(HP_SIMT_ASAN_FLAGS)
tests_gpu_simt_simt_kern_asan_LDFLAGS = $(AM_LDFLAGS) $(HP_SIMT_ASAN_FLAGS)
tests_gpu_simt_simt_kern_asan_LDADD = tests/gpu/simt/libhpsimt_asan.la libhpbase.la -lm
endif

if HP_CUDA
# The emulated CUDA module (as tests/gpu/mock/libhipress_cuda_emu.la) on the
# SIMT kernels in place of the serial emulation: tests/gpu/kern/gpu_kern's buffer
# operations and powersgd's steps through the module's own calls, under the
# stand-in driver's deferred streams (run_simt.sh; its formats would take
# minutes this way)
check_LTLIBRARIES += tests/gpu/mock/libhipress_cuda_simt.la
tests_gpu_mock_libhipress_cuda_simt_la_SOURCES = $(HP_MODULE_SOURCES) $(HP_CODEC_SOURCES) $(HP_SIMT_KERN_SOURCES) \
	$(HP_SIMT_RT_SOURCES)
tests_gpu_mock_libhipress_cuda_simt_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) $(HP_CUDA_INCLUDES) \
	-I$(top_srcdir)/tests/gpu/simt -DHP_KL_TRANSLATE
tests_gpu_mock_libhipress_cuda_simt_la_CFLAGS = $(AM_CFLAGS) -Werror
tests_gpu_mock_libhipress_cuda_simt_la_CXXFLAGS = $(HP_SIMT_CXXFLAGS) -fvisibility=hidden $(HP_SAN_CFLAGS)
tests_gpu_mock_libhipress_cuda_simt_la_LDFLAGS = -module -avoid-version -shared -Wl,--as-needed \
	-rpath $(abs_builddir)/tests/gpu/mock/.libs -export-symbols-regex '^hipress_gpu_ops_v[123]$$'
tests_gpu_mock_libhipress_cuda_simt_la_LIBADD = -ldl -lpthread -lm
endif

# what simt_mutants.sh needs to build a mutant of one kernel file into the
# ThreadSanitizer program (compiled as the kernels are, linked as the program)
AM_TESTS_ENVIRONMENT += \
	HP_SIMT_KERN_CXX='$(HP_SIMT_KERN_CXX)'; export HP_SIMT_KERN_CXX; \
	HP_SIMT_LINK_CXX='$(CXX)'; export HP_SIMT_LINK_CXX; \
	HP_SIMT_MUTANT_FLAGS='$(DEFS) $(DEFAULT_INCLUDES) $(HP_SIMT_CPPFLAGS) $(CPPFLAGS) $(HP_SIMT_CXXFLAGS) \
	$(HP_SIMT_TSAN_FLAGS) $(CXXFLAGS)'; \
	export HP_SIMT_MUTANT_FLAGS;
TESTS += tests/gpu/simt/run_simt.sh
EXTRA_DIST += tests/gpu/simt/run_simt.sh tests/gpu/simt/simt_mutants.sh
