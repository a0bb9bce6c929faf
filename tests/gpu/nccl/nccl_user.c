/*
 * A library that calls ncclAllReduce, linked to the stand-in NCCL
 * (tests/gpu/nccl/libnccl_user.so).  tests/gpu/nccl/nccl_local loads it into a local scope, as
 * Python loads an extension module and its NCCL, to check that hipress finds
 * the real NCCL there.
 */
#include <nccl.h>

__attribute__((visibility("default"))) ncclResult_t nccl_user_allreduce(const void *s, void *r, size_t n,
                                                                         ncclComm_t comm, cudaStream_t stream)
{
    return ncclAllReduce(s, r, n, ncclFloat32, ncclSum, comm, stream);
}
