/*
 * What the CUDA kernel files of the codec share (cuda/hp_kern*.cu): the
 * grid of the element-wise kernels, the launch check, and the warp
 * collectives the block kernels reduce with.  Private to those files; the
 * per-thread functions are hp_kern.h's, the launchers hp_klaunch.h's.
 */
#ifndef HP_KERN_CU_CUH
#define HP_KERN_CU_CUH

#include "hp_klaunch.h"
#include "hp_kern.h"
#include <cuda_runtime.h>

#define FULL 0xffffffffu
#define TPB 256                      /* threads of the element-wise kernels */

static_assert(TPB == HP_K_WARPS * HP_K_WARP, "the block kernels run one warp per chunk slot");

static inline unsigned grid_for(size_t n, size_t per_thread)
{
    size_t g = (n + TPB * per_thread - 1) / (TPB * per_thread);
    if (g < 1)
        g = 1;
    return (unsigned)(g > 65535u * 4u ? 65535u * 4u : g);
}

static inline int launched(void)
{
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Warp sum of an integer (any order gives the same). */
__device__ static inline uint32_t warp_sum(uint32_t v)
{
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_xor_sync(FULL, v, d);
    return v;
}

/* The 32 lane totals of a warp, added in double in lane order (every lane
 * gets the sum). */
__device__ static inline double lanes_in_order(float l)
{
    double s = 0.0;
    for (int j = 0; j < 32; j++)
        s += (double)__shfl_sync(FULL, l, j);
    return s;
}

#endif
