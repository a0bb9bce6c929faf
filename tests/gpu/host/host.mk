# tests/gpu/host/host.mk: the GPU path's host side, with no GPU; appends to
# the variables of Makefile.am.
#   check_gpu         Check suite: NCCL eligibility, group tracking, staging
#                     decisions and spans, the load watch, the driver query,
#                     the CUDA module against the stand-in driver
#   check_tp_nccl     Check suite: the NCCL transport's two forms against a
#                     recording stand-in of NCCL and the device
#   run_gpu.sh        MPI_Allreduce/MPI_Bcast/MPI_Allgatherv on host buffers
#                     (unchanged; no libcuda loaded) and on stand-in device
#                     buffers (staged exactly; or passed unchanged): mpi_gpu
#   run_gpu_info.sh   hipress_info's GPU part, with and without a driver
check_PROGRAMS += tests/gpu/host/check_gpu tests/gpu/host/check_tp_nccl tests/gpu/host/mpi_gpu
TESTS += tests/gpu/host/check_gpu tests/gpu/host/check_tp_nccl tests/gpu/host/run_gpu.sh tests/gpu/host/run_gpu_info.sh
tests_gpu_host_check_gpu_SOURCES = tests/gpu/host/check_gpu.c
tests_gpu_host_check_gpu_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_host_check_gpu_LDADD = libhpcore.la $(CHECK_LIBS) -lm
tests_gpu_host_check_tp_nccl_SOURCES = tests/gpu/host/check_tp_nccl.c
tests_gpu_host_check_tp_nccl_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_host_check_tp_nccl_LDADD = libhpcore.la $(CHECK_LIBS) -lm
tests_gpu_host_mpi_gpu_SOURCES = tests/gpu/host/mpi_gpu.c
tests_gpu_host_mpi_gpu_LDADD = -ldl
EXTRA_DIST += tests/gpu/host/run_gpu.sh tests/gpu/host/run_gpu_info.sh
