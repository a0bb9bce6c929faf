# tests/nompi.mk: the NCCL-only library (libhipress_nccl.so) in a process
# with no MPI at all; appends to the variables of Makefile.am.
#
#   mock_nompi/libnccl.so.2  the stand-in NCCL (tests/mock_nccl.c) built
#                    without MPI (-DMOCK_NCCL_NO_MPI: no replay)
#   nompi_calls      tests/nccl_calls.c linked to it, so that nothing in the
#                    process needs libmpi
#   nompi_launch     a torchrun-like launcher: N processes with RANK,
#                    WORLD_SIZE, LOCAL_RANK and a rendezvous directory
#   nompi_compress   one process of such a job: multi-rank compressed
#                    ncclAllReduce, the stand-in moving the data through
#                    shared memory (MOCK_NCCL_SHM=1, tests/mock_nccl_shm.c)
#   run_nompi.sh     libhipress_nccl.so needs neither libmpi nor libhwloc;
#                    nompi_calls and nompi_compress under it, with libmpi
#                    and libhwloc hidden where a mount namespace can be made
if HP_NCCL
check_LTLIBRARIES += tests/mock_nompi/libnccl.la
tests_mock_nompi_libnccl_la_SOURCES = tests/mock_nccl.c tests/mock_nccl_shm.c
tests_mock_nompi_libnccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS) -DMOCK_NCCL_NO_MPI
tests_mock_nompi_libnccl_la_LDFLAGS = $(AM_LDFLAGS) -rpath $(abs_builddir)/tests/mock_nompi/.libs -no-undefined \
	-version-info 2:0:0 -Wl,--as-needed -lpthread
check_PROGRAMS += tests/nompi_calls
tests_nompi_calls_SOURCES = tests/nccl_calls.c
tests_nompi_calls_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_nompi_calls_LDADD = tests/mock_nompi/libnccl.la -ldl -lpthread
tests_nompi_calls_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
check_PROGRAMS += tests/nompi_launch tests/nompi_compress
tests_nompi_launch_SOURCES = tests/nompi_launch.c
tests_nompi_launch_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
tests_nompi_compress_SOURCES = tests/nompi_compress.c
tests_nompi_compress_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_nompi_compress_LDADD = tests/mock_nompi/libnccl.la -ldl -lm
tests_nompi_compress_LDFLAGS = $(AM_LDFLAGS) -no-install -Wl,--as-needed
TESTS += tests/run_nompi.sh
endif
EXTRA_DIST += tests/run_nompi.sh tests/mock_nompi_mpi.h tests/mock_nccl_shm.h
