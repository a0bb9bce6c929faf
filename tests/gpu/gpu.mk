# tests/gpu/gpu.mk: the tests of the GPU path; appends to the variables of
# Makefile.am.  Almost all run without a GPU.  A folder per kind, each with
# its fragment (the files it lists are its own; what it uses of another
# folder it names by that fragment's variables):
#   standins/  the stand-ins of the CUDA driver and of NCCL, and their own
#              model's test (doc/dev/standins.md)
#   host/      the GPU path's host side on the CPU: eligibility, groups,
#              staging, the load watch, the NCCL transport, MPI collectives
#              on stand-in device buffers
#   nccl/      ncclAllReduce through the preload: calls, compressed runs,
#              scenarios of what hangs, the stand-ins' rules, the NCCL-only
#              library in a process without MPI
#   kern/      the kernels and the device codec against the CPU's bytes
#              (check_kern on the serial emulation; on a GPU, gpu_kern)
#   emu/       the kernels run serially on the host, and the emulated CUDA
#              module built on them (the MPI tests' device path without a GPU)
#   simt/      the kernels themselves on the strict SIMT emulator, under
#              ThreadSanitizer and AddressSanitizer (doc/dev/simt.md)
#   ipc/       the NCCL stand-in on CUDA IPC (several processes on one GPU)
#   kit/       the device kit's programs and its self-test (doc/dev/kit.md)
#   device/    what needs a GPU (skipped elsewhere): the module's self-test
#              kernel, MPI and the real NCCL on cudaMalloc'd memory
include $(top_srcdir)/tests/gpu/standins/standins.mk
include $(top_srcdir)/tests/gpu/host/host.mk
include $(top_srcdir)/tests/gpu/nccl/nccl.mk
include $(top_srcdir)/tests/gpu/kern/kern.mk
include $(top_srcdir)/tests/gpu/emu/emu.mk
include $(top_srcdir)/tests/gpu/simt/simt.mk
include $(top_srcdir)/tests/gpu/ipc/ipc.mk
include $(top_srcdir)/tests/gpu/kit/kit.mk
include $(top_srcdir)/tests/gpu/device/device.mk

# The GPU path's tests that need no GPU (scripts/test.sh runs them again in
# its sanitizer and CUDA-less builds).
print-gpu-tests:
	@echo $(filter tests/gpu/host/check_gpu tests/gpu/host/run_gpu.sh tests/gpu/nccl/run_nccl.sh \
	tests/gpu/host/run_gpu_info.sh tests/gpu/emu/run_gpu_emu.sh tests/gpu/nccl/run_nccl_compress.sh \
	tests/gpu/nccl/run_nompi.sh tests/gpu/standins/run_standins.sh tests/gpu/nccl/run_nccl_scenarios.sh \
	tests/gpu/nccl/run_nccl_rules.sh,$(TESTS))
.PHONY: print-gpu-tests
