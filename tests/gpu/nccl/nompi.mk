# tests/gpu/nompi.mk: the NCCL-only library (libhipress_nccl.so) in a process
# with no MPI at all; appends to the variables of Makefile.am.
#
#   mock_nompi/libnccl.so.2  the stand-in NCCL (tests/gpu/mock_nccl.c) built
#                    without MPI (-DMOCK_NCCL_NO_MPI: no replay)
#   nompi_calls      tests/gpu/nccl_calls.c linked to it, so that nothing in the
#                    process needs libmpi
#   nompi_launch     a torchrun-like launcher: N processes with RANK,
#                    WORLD_SIZE, LOCAL_RANK and a rendezvous directory
#   nompi_compress   one process of such a job: multi-rank compressed
#                    ncclAllReduce, the stand-in moving the data through
#                    shared memory (MOCK_NCCL_SHM=1, tests/gpu/mock_nccl_shm.c)
#   run_nompi.sh     libhipress_nccl.so needs neither libmpi nor libhwloc;
#                    nompi_calls and nompi_compress under it, with libmpi
#                    and libhwloc hidden where a mount namespace can be made
if HP_NCCL
check_LTLIBRARIES += tests/gpu/mock_nompi/libnccl.la
tests_gpu_mock_nompi_libnccl_la_SOURCES = $(HP_MOCK_NCCL_SOURCES)
tests_gpu_mock_nompi_libnccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS) -DMOCK_NCCL_NO_MPI
tests_gpu_mock_nompi_libnccl_la_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/gpu/mock_nompi/.libs -no-undefined \
	-version-info 2:0:0 -Wl,--as-needed -lpthread -ldl -lrt
check_PROGRAMS += tests/gpu/nompi_calls
tests_gpu_nompi_calls_SOURCES = tests/gpu/nccl_calls.c
tests_gpu_nompi_calls_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_nompi_calls_LDADD = tests/gpu/mock_nompi/libnccl.la -ldl -lpthread
tests_gpu_nompi_calls_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
check_PROGRAMS += tests/gpu/nompi_launch tests/gpu/nompi_compress
tests_gpu_nompi_launch_SOURCES = tests/gpu/nompi_launch.c
tests_gpu_nompi_launch_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
tests_gpu_nompi_compress_SOURCES = tests/gpu/nompi_compress.c
tests_gpu_nompi_compress_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_nompi_compress_LDADD = tests/gpu/mock_nompi/libnccl.la -ldl -lm
tests_gpu_nompi_compress_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
TESTS += tests/gpu/run_nompi.sh
# the stand-ins' own model: what hangs is reported as a deadlock
# (tests/gpu/standins.c, tests/gpu/run_standins.sh)
check_PROGRAMS += tests/gpu/standins
tests_gpu_standins_SOURCES = tests/gpu/standins.c
tests_gpu_standins_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_gpu_standins_LDADD = tests/gpu/mock_nompi/libnccl.la -ldl -lpthread
tests_gpu_standins_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
TESTS += tests/gpu/run_standins.sh
endif
EXTRA_DIST += tests/gpu/run_nompi.sh tests/gpu/run_standins.sh tests/gpu/mock_nompi_mpi.h tests/gpu/mock_nccl_shm.h
