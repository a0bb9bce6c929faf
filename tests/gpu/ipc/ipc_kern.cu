/*
 * The IPC stand-in NCCL's one kernel (tests/gpu/ipc/ipc_cuda.c loads it from
 * the fatbin built of this file): a reduction of up to HPI_MAX_RANKS
 * sources in rank order, element by element, with the host paths' code
 * (ipc_elem.h).  A grid-stride loop, so any grid covers any count.
 */
#include "ipc_elem.h"

extern "C" __global__ void hpi_reduce_kernel(hpi_red_t r)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < r.count; i += stride)
        hpi_red_elem(&r, i);
}
