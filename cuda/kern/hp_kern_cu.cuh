/*
 * What the CUDA kernel files of the codec share (cuda/kern/hp_kern*.cu): the
 * grid of the element-wise kernels, the launch check, and the warp
 * collectives the block kernels reduce with.  Private to those files; the
 * per-thread functions are hp_kern.h's, the launchers hp_klaunch.h's.
 *
 * The same files compile for the CPU against the SIMT emulator
 * (tests/gpu/simt/hp_simt.h, doc/dev/simt.md): launches, shared arrays and the
 * kernel list are written with the macros below, which are plain CUDA
 * under nvcc.
 */
#ifndef HP_KERN_CU_CUH
#define HP_KERN_CU_CUH

#if !defined(__CUDACC__)
#include "hp_simt.h"
#endif
#include "hp_klaunch.h"
#include "hp_kern.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

/* k<<<g, b, 0, s>>>(args) */
#define HP_LAUNCH(k, g, b, s) k<<<(g), (b), 0, (s)>>>
/* __shared__ T name[N] (T may be an array type: float[2]) and __shared__ T name */
template <class T>
using hp_k_type = T;
#define HP_SHARED(T, name, N) __shared__ hp_k_type<T> name[N]
#define HP_SHARED_VAR(T, name) __shared__ T name
/* loads kernel k (its attributes asked for); n counts them */
#define HP_PRELOAD(n, k)                                     \
    do {                                                     \
        cudaFuncAttributes a_;                               \
        if (cudaFuncGetAttributes(&a_, k) != cudaSuccess)    \
            return -1;                                       \
        (n)++;                                               \
    } while (0)

/* A word that other CTAs may change while this one runs (their atomics):
 * read once, by one thread, as a relaxed load. */
__device__ static inline uint32_t hp_k_ld_relaxed(const uint32_t *p)
{
    return *(const volatile uint32_t *)p;
}
#else
static inline uint32_t hp_k_ld_relaxed(const uint32_t *p)
{
    return hp_simt_ld_relaxed(p);
}
#endif

/* The kernels of each file, loaded (HP_PRELOAD) by hp_kl_preload
 * (cuda/kern/hp_kern_load.cu); each returns how many, or -1. */
extern "C" int hp_kl_preload_base(void);
extern "C" int hp_kl_preload_quant(void);
extern "C" int hp_kl_preload_half(void);
extern "C" int hp_kl_preload_sparse(void);
extern "C" int hp_kl_preload_psgd(void);

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
