# tests/gpu/standins/standins.mk: the stand-ins of the CUDA driver and of
# NCCL; appends to the variables of Makefile.am.
#
# Never installed, in tests/gpu/mock/.libs/ (where a test's library path
# finds them by their real names):
#   libcuda.so.1  the driver functions hipress uses; its "device memory"
#                 crashes on any host access, like real device memory, and
#                 is shared between processes through CUDA IPC; its streams
#                 run on a device executor, with stream memory operations;
#                 what hangs on a GPU is reported as a deadlock
#                 (doc/dev/standins.md)
#   libnccl.so.2  records the NCCL calls it gets (builds with nccl.h); its
#                 operations are stream entries that wait for their peers'
#   libhpwatch.so an object to load, to show the load watch fires
# and in tests/gpu/mock_nompi/.libs/:
#   libnccl.so.2  the same NCCL built without MPI (-DMOCK_NCCL_NO_MPI: no
#                 replay), for processes with no MPI at all
#   standins      the stand-ins' own model: what hangs is reported as a
#                 deadlock (run_standins.sh)

# --as-needed: the stand-ins need no libmpi, which the MPI compiler wrapper
# adds (tests/gpu/nccl/run_nompi.sh loads them where there is none; a
# sanitizer build links without the toolchain's default --as-needed)
HP_MOCK_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/gpu/mock/.libs -no-undefined -Wl,--as-needed
# the stand-in NCCL's header, for the programs that drive it
HP_MOCK_CPPFLAGS = -I$(top_srcdir)/tests/gpu/standins

check_LTLIBRARIES += tests/gpu/mock/libcuda.la tests/gpu/mock/libhpwatch.la
tests_gpu_mock_libcuda_la_SOURCES = tests/gpu/standins/mock_cuda.c tests/gpu/standins/mock_cuda_mem.c \
	tests/gpu/standins/mock_cuda_stream.c tests/gpu/standins/mock_cuda_exec.c tests/gpu/standins/mock_cuda_wfg.c \
	tests/gpu/standins/mock_cuda_rules.c tests/gpu/standins/mock_cuda.h tests/gpu/standins/mock_cuda_int.h
tests_gpu_mock_libcuda_la_LDFLAGS = $(HP_MOCK_LDFLAGS) -version-info 1:0:0 -lpthread -lrt
tests_gpu_mock_libhpwatch_la_SOURCES = tests/gpu/standins/mock_watch.c
tests_gpu_mock_libhpwatch_la_LDFLAGS = $(HP_MOCK_LDFLAGS) -avoid-version
EXTRA_DIST += tests/gpu/standins/mock_nccl.h tests/gpu/standins/mock_nompi_mpi.h tests/gpu/standins/mock_nccl_shm.h \
	tests/gpu/standins/run_standins.sh

if HP_NCCL
HP_MOCK_NCCL_SOURCES = tests/gpu/standins/mock_nccl.c tests/gpu/standins/mock_nccl_ops.c \
	tests/gpu/standins/mock_nccl_ent.c tests/gpu/standins/mock_nccl_shm.c tests/gpu/standins/mock_nccl_seq.c \
	tests/gpu/standins/mock_nccl_int.h tests/gpu/standins/mock_nccl_shm.h tests/gpu/standins/mock_cuda.h
check_LTLIBRARIES += tests/gpu/mock/libnccl.la
tests_gpu_mock_libnccl_la_SOURCES = $(HP_MOCK_NCCL_SOURCES)
tests_gpu_mock_libnccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_mock_libnccl_la_LDFLAGS = $(HP_MOCK_LDFLAGS) -version-info 2:0:0 -lpthread -ldl -lrt
check_LTLIBRARIES += tests/gpu/mock_nompi/libnccl.la
tests_gpu_mock_nompi_libnccl_la_SOURCES = $(HP_MOCK_NCCL_SOURCES)
tests_gpu_mock_nompi_libnccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS) -DMOCK_NCCL_NO_MPI
tests_gpu_mock_nompi_libnccl_la_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/gpu/mock_nompi/.libs -no-undefined \
	-version-info 2:0:0 -Wl,--as-needed -lpthread -ldl -lrt

check_PROGRAMS += tests/gpu/standins/standins
tests_gpu_standins_standins_SOURCES = tests/gpu/standins/standins.c
tests_gpu_standins_standins_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_standins_standins_LDADD = tests/gpu/mock_nompi/libnccl.la -ldl -lpthread
tests_gpu_standins_standins_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
TESTS += tests/gpu/standins/run_standins.sh
endif
