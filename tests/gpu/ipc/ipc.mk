# tests/gpu/ipc/ipc.mk: the NCCL stand-in on CUDA IPC; included by
# tests/gpu/gpu.mk, appends to Makefile.am's variables.
#
#   ipc/libnccl.so.2  the IPC stand-in NCCL (soname libnccl.so.2, never
#                     installed): N processes on one GPU form communicators
#                     and move data device to device, stream-ordered
#                     (ipc_proto.h); the CUDA driver loaded at run time, its
#                     reduction kernel from a fatbin linked in
#   check_ipc         its protocol between processes on host threads, no
#                     GPU and no CUDA needed (ipc_host.c)
#   ipc_one           its CUDA engine on the stand-in driver, one-rank
#                     communicators (that driver has no CUDA IPC yet)
#   run_ipc.sh        check_ipc; the library's exports against nccl.h and
#                     against what hipress calls; the kit's programs
#                     (tests/gpu/kit) over the stand-in driver (and, where
#                     that driver has CUDA IPC, the IPC stand-in over it)
#   ipc_mock          the stand-in driver's CUDA IPC and stream memory
#                     operations between processes (what the IPC stand-in
#                     rests on there), and its deadlock report on a flag
#                     wait nothing can satisfy
if HP_NCCL
HP_IPC_PROTO = tests/gpu/ipc/ipc_proto.h tests/gpu/ipc/ipc_comm.h tests/gpu/ipc/ipc_elem.h tests/gpu/ipc/ipc_nccl.c \
	tests/gpu/ipc/ipc_proto.c tests/gpu/ipc/ipc_watch.c tests/gpu/ipc/ipc_sched.c
check_PROGRAMS += tests/gpu/ipc/check_ipc
tests_gpu_ipc_check_ipc_SOURCES = tests/gpu/ipc/check_ipc.c tests/gpu/ipc/check_ipc.h tests/gpu/ipc/ipc_host.c $(HP_IPC_PROTO)
tests_gpu_ipc_check_ipc_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_ipc_check_ipc_LDADD = -lpthread -lrt -lm
tests_gpu_ipc_check_ipc_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
TESTS += tests/gpu/ipc/run_ipc.sh

check_PROGRAMS += tests/gpu/ipc/ipc_mock
tests_gpu_ipc_ipc_mock_SOURCES = tests/gpu/ipc/ipc_mock.c
tests_gpu_ipc_ipc_mock_LDADD = -ldl
tests_gpu_ipc_ipc_mock_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed

if HP_CUDA
check_LTLIBRARIES += tests/gpu/ipc/libnccl.la
tests_gpu_ipc_libnccl_la_SOURCES = tests/gpu/ipc/ipc_cuda.c $(HP_IPC_PROTO)
nodist_tests_gpu_ipc_libnccl_la_SOURCES = tests/gpu/ipc/ipc_fatbin.c
tests_gpu_ipc_libnccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_ipc_libnccl_la_CFLAGS = $(AM_CFLAGS) -Werror
tests_gpu_ipc_libnccl_la_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/gpu/ipc/.libs -no-undefined \
	-version-info 2:0:0 -export-symbols-regex '^nccl' -Wl,--as-needed -lpthread -ldl -lrt
# the reduction kernel for the build's architectures, linked in as bytes
tests/gpu/ipc/ipc_kern.fatbin: $(srcdir)/tests/gpu/ipc/ipc_kern.cu $(srcdir)/tests/gpu/ipc/ipc_elem.h
	@$(MKDIR_P) tests/gpu/ipc
	$(AM_V_GEN)$(NVCC) $(NVCC_ARCH_FLAGS) $(NVCCFLAGS) --fmad=false -Werror all-warnings -fatbin -o $@ $<
tests/gpu/ipc/ipc_fatbin.c: tests/gpu/ipc/ipc_kern.fatbin
	$(AM_V_GEN){ echo '/* generated from tests/gpu/ipc/ipc_kern.cu by tests/gpu/ipc/ipc.mk */'; \
	  echo 'const unsigned char hpi_fatbin[] __attribute__((aligned(8))) = {'; \
	  od -An -v -tx1 $< | sed 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo '};'; } >$@.tmp && mv $@.tmp $@
CLEANFILES += tests/gpu/ipc/ipc_kern.fatbin tests/gpu/ipc/ipc_fatbin.c
# its CUDA engine on the stand-in driver (one-rank communicators)
check_PROGRAMS += tests/gpu/ipc/ipc_one
tests_gpu_ipc_ipc_one_SOURCES = tests/gpu/ipc/ipc_one.c
tests_gpu_ipc_ipc_one_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_ipc_ipc_one_LDADD = tests/gpu/ipc/libnccl.la -ldl -lpthread
tests_gpu_ipc_ipc_one_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
endif
endif
EXTRA_DIST += tests/gpu/ipc/run_ipc.sh tests/gpu/ipc/ipc_kern.cu tests/gpu/ipc/ipc_host.c tests/gpu/ipc/ipc_cuda.c
