/*
 * powersgd's stream-ordered steps on the GPU (hp_klaunch.h): the start Q,
 * the orthonormalisation, and the residual's and warm start's writes
 * predicated on a device flag.  The per-thread functions are
 * cuda/kern/hp_kern_psgd.h's; tests/gpu/emu/hp_kern_emu_psgd.c runs the same on the host.
 */
#include "hp_kern_cu.cuh"
#include "hp_kern_psgd.h"

/* One thread per row of Q^T (r threads, each along its c columns in order). */
__global__ static void k_psgd_start_q(float *qt, const float *warm, size_t r, size_t c, uint64_t key)
{
    GRID_STRIDE(k, r)
        hp_k_psgd_start_row(qt + k * c, warm != NULL ? warm + k * c : NULL, k, c, key);
}

extern "C" int hp_kl_psgd_start_q(void *stream, float *qt, const float *warm, size_t r, size_t c, uint64_t key)
{
    if (r * c == 0)
        return 0;
    HP_LAUNCH(k_psgd_start_q, 1, 32, (cudaStream_t)stream)(qt, warm, r, c, key);
    return launched();
}

/* One thread: the host's modified Gram-Schmidt in its order (m r doubles
 * of work in device memory). */
__global__ static void k_psgd_orth(float *p, size_t m, size_t r, double *work, const uint8_t *flag, uint32_t bytes)
{
    if (blockIdx.x != 0 || threadIdx.x != 0 || hp_k_flag_set(flag, bytes))
        return;
    hp_k_psgd_orth(p, m, r, work);
}

extern "C" int hp_kl_psgd_orth(void *stream, float *p, size_t m, size_t r, double *work, const uint8_t *flag,
                               uint32_t bytes)
{
    if (m * r == 0)
        return 0;
    HP_LAUNCH(k_psgd_orth, 1, 1, (cudaStream_t)stream)(p, m, r, work, flag, bytes);
    return launched();
}

__global__ static void k_psgd_recon_if(float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                                       const float *qs, const float *ql, const uint8_t *flag, uint32_t bytes)
{
    float *const rout = res == NULL || hp_k_flag_set(flag, bytes) ? NULL : res;
    GRID_STRIDE(e, n)
        hp_k_psgd_recon_at(buf, rout, e, c, r, p, qs, ql);
}

extern "C" int hp_kl_psgd_recon_if(void *stream, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                                   const float *qs, const float *ql, const uint8_t *flag, uint32_t bytes)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_psgd_recon_if, grid_for(n, 4), TPB, (cudaStream_t)stream)(buf, res, n, c, r, p, qs, ql, flag, bytes);
    return launched();
}

__global__ static void k_copy_if(float *dst, const float *src, size_t n, const uint8_t *flag, uint32_t bytes)
{
    if (hp_k_flag_set(flag, bytes))
        return;
    GRID_STRIDE(i, n)
        dst[i] = src[i];
}

extern "C" int hp_kl_copy_if(void *stream, float *dst, const float *src, size_t n, const uint8_t *flag,
                             uint32_t bytes)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_copy_if, grid_for(n, 4), TPB, (cudaStream_t)stream)(dst, src, n, flag, bytes);
    return launched();
}

/* the kernels of this file (hp_kl_preload) */
extern "C" int hp_kl_preload_psgd(void)
{
    int n = 0;
    HP_PRELOAD(n, k_psgd_start_q);
    HP_PRELOAD(n, k_psgd_orth);
    HP_PRELOAD(n, k_psgd_recon_if);
    HP_PRELOAD(n, k_copy_if);
    return n;
}
