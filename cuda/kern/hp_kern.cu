/*
 * The CUDA kernels of the codec and their launchers (hp_klaunch.h): here
 * the probe, the element-wise kernels every format uses (the finite scan,
 * the fold of a residual, dgc's momentum, add, fill) and powersgd's passes;
 * each family of message formats has its own file (hp_kern_quant.cu:
 * onebit, tbq, terngrad; hp_kern_half.cu: fp16, bf16; hp_kern_sparse.cu:
 * graddrop, dgc).  Every kernel is a shell around the per-thread functions
 * of hp_kern.h: it picks a thread's elements and does what needs the
 * hardware (ballots, shuffles, shared memory, atomics on flags and
 * histograms).  tests/gpu/emu/hp_kern_emu*.c run the same grids serially;
 * tests/gpu/kern/check_kern.c holds the emulation to the CPU compressors' bytes,
 * tests/gpu/simt/run_simt.sh holds these kernels to them on the CPU (the SIMT
 * emulator, doc/dev/simt.md), and scripts/kit/gpu-check (tests/gpu/kern/gpu_kern.c) on a
 * GPU.
 *
 * Built with --fmad=false: a product feeding a sum must round on its own,
 * as it does on the CPU.
 */
#include "hp_kern_cu.cuh"

/* ------------------------------------------------------------ helpers */

__global__ static void k_probe(uint32_t *p)
{
    *p = HP_KL_PROBE_WORD;
}

extern "C" int hp_kl_probe(void *stream, uint32_t *word)
{
    HP_LAUNCH(k_probe, 1, 1, (cudaStream_t)stream)(word);
    return launched();
}

__global__ static void k_finite(const float *x, size_t n, uint32_t *flags)
{
    int bad = 0;
    GRID_STRIDE(i, n)
        bad |= hp_nonfinite(x[i]);
    if (__any_sync(FULL, bad) && (threadIdx.x & 31) == 0)
        atomicOr(flags, HP_K_F_NONFINITE);
}

extern "C" int hp_kl_finite(void *stream, const float *x, size_t n, uint32_t *flags)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_finite, grid_for(n, 4), TPB, (cudaStream_t)stream)(x, n, flags);
    return launched();
}

__global__ static void k_fold(float *buf, float *r, size_t n, const uint32_t *flags)
{
    if (flags[0] & HP_K_F_NONFINITE)
        return;
    GRID_STRIDE(i, n) {
        buf[i] = hp_k_add(buf[i], r[i]);
        r[i] = 0.0f;
    }
}

extern "C" int hp_kl_fold(void *stream, float *buf, float *r, size_t n, const uint32_t *flags)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_fold, grid_for(n, 4), TPB, (cudaStream_t)stream)(buf, r, n, flags);
    return launched();
}

__global__ static void k_momentum(float *u, float *buf, float m, size_t n, const uint32_t *flags)
{
    if (flags[0] & HP_K_F_NONFINITE)
        return;
    GRID_STRIDE(i, n) {
        float v = hp_canon(hp_k_sparse_u(buf, u, m, i));
        u[i] = v;
        buf[i] = v;
    }
}

extern "C" int hp_kl_momentum(void *stream, float *u, float *buf, float m, size_t n, const uint32_t *flags)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_momentum, grid_for(n, 4), TPB, (cudaStream_t)stream)(u, buf, m, n, flags);
    return launched();
}

__global__ static void k_add(float *dst, const float *src, size_t n)
{
    GRID_STRIDE(i, n)
        dst[i] = hp_k_add(dst[i], src[i]);
}

extern "C" int hp_kl_add(void *stream, float *dst, const float *src, size_t n)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_add, grid_for(n, 4), TPB, (cudaStream_t)stream)(dst, src, n);
    return launched();
}

__global__ static void k_mask_zero(float *mask, size_t n, const uint32_t *flags, const uint32_t *gate)
{
    if ((flags != NULL && (flags[0] & HP_K_F_NONFINITE)) || (gate[0] & HP_K_F_NONFINITE))
        return;
    GRID_STRIDE(i, n)
        mask[i] = 0.0f;
}

extern "C" int hp_kl_mask_zero(void *stream, float *mask, size_t n, const uint32_t *flags, const uint32_t *gate)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_mask_zero, grid_for(n, 4), TPB, (cudaStream_t)stream)(mask, n, flags, gate);
    return launched();
}

__global__ static void k_fill(float *dst, float v, size_t n)
{
    GRID_STRIDE(i, n)
        dst[i] = v;
}

extern "C" int hp_kl_fill(void *stream, float *dst, float v, size_t n)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_fill, grid_for(n, 4), TPB, (cudaStream_t)stream)(dst, v, n);
    return launched();
}

/* ------------------------------------------- messages in device memory */

__global__ static void k_msg_header(uint8_t *m, uint32_t kind, uint32_t n, uint32_t payload, const uint32_t *flags)
{
    hp_k_msg_put_header(m, kind, (flags[0] & HP_K_F_NONFINITE) != 0, n, payload);
}

extern "C" int hp_kl_msg_header(void *stream, uint8_t *m, uint32_t kind, uint32_t n, uint32_t payload,
                                const uint32_t *flags)
{
    HP_LAUNCH(k_msg_header, 1, 1, (cudaStream_t)stream)(m, kind, n, payload, flags);
    return launched();
}

/* Thread 0 checks the header; a thread per item of the payload. */
__global__ static void k_msg_check(const uint8_t *m, size_t cap, uint32_t kind, uint32_t payload, hp_k_msgfmt_t f,
                                   uint32_t *status)
{
    const size_t items = hp_k_msg_items(&f);
    int bad = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        status[0] = hp_k_msg_head(m, cap, kind, f.n, payload);
    GRID_STRIDE(j, items)
        bad |= hp_k_msg_item(&f, m + HP_K_MSG_HEADER, j);
    if (__any_sync(FULL, bad) && (threadIdx.x & 31) == 0)
        atomicOr(status + 1, 1u);
}

extern "C" int hp_kl_msg_check(void *stream, const uint8_t *m, size_t cap, uint32_t kind, uint32_t payload,
                               hp_k_msgfmt_t f, uint32_t *status)
{
    HP_LAUNCH(k_msg_check, grid_for(hp_k_msg_items(&f), 1), TPB, (cudaStream_t)stream)(m, cap, kind, payload, f,
                                                                                       status);
    return launched();
}

__global__ static void k_msg_fix(float *dst, size_t n, const uint32_t *status, uint32_t *sticky)
{
    const uint32_t head = status[0];
    if (head == HP_K_MSG_NAN) {
        GRID_STRIDE(i, n)
            dst[i] = __int_as_float(0x7fc00000);
    } else if ((head != HP_K_MSG_OK || status[1] != 0 || status[2] != 0) && blockIdx.x == 0 && threadIdx.x == 0) {
        atomicOr(sticky, HP_K_F_BAD);
    }
}

extern "C" int hp_kl_msg_fix(void *stream, float *dst, size_t n, const uint32_t *status, uint32_t *sticky)
{
    HP_LAUNCH(k_msg_fix, grid_for(n, 4), TPB, (cudaStream_t)stream)(dst, n, status, sticky);
    return launched();
}

__global__ static void k_nan_if(float *dst, size_t n, const uint8_t *flag, uint32_t bytes)
{
    int set = 0;
    for (uint32_t i = 0; i < bytes; i++)
        set |= flag[i] != 0;
    if (!set)
        return;
    GRID_STRIDE(i, n)
        dst[i] = __int_as_float(0x7fc00000);
}

extern "C" int hp_kl_nan_if(void *stream, float *dst, size_t n, const uint8_t *flag, uint32_t bytes)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_nan_if, grid_for(n, 4), TPB, (cudaStream_t)stream)(dst, n, flag, bytes);
    return launched();
}

__global__ static void k_divide(float *dst, size_t n, float d)
{
    /* (a NaN kept as it is: the GPU's division would give its canonical
     * NaN, the host's keeps the payload) */
    GRID_STRIDE(i, n) {
        float v = dst[i];
        dst[i] = v != v ? v : __fdiv_rn(v, d);
    }
}

extern "C" int hp_kl_divide(void *stream, float *dst, size_t n, float d)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_divide, grid_for(n, 4), TPB, (cudaStream_t)stream)(dst, n, d);
    return launched();
}

/* ----------------------------------------------------------- powersgd */

/* One thread per (row, k), the CPU's order along the row (the row and a
 * row of Q^T come from the caches: r threads read the same row). */
__global__ static void k_psgd_mq(const float *M, size_t n, size_t m, size_t c, size_t r, size_t T, const float *qt,
                                 float *p)
{
    GRID_STRIDE(t, m * r) {
        size_t i = t / r, k = t % r;
        p[t] = hp_k_psgd_dot(M + i * c, hp_k_psgd_row_len(n, c, i), qt + k * c, T);
    }
}

extern "C" int hp_kl_psgd_mq(void *stream, const float *M, size_t n, size_t m, size_t c, size_t r, size_t T,
                             const float *qt, float *p)
{
    if (m * r == 0)
        return 0;
    HP_LAUNCH(k_psgd_mq, grid_for(m * r, 1), TPB, (cudaStream_t)stream)(M, n, m, c, r, T, qt, p);
    return launched();
}

/* One thread per (k, column): down the rows in order (coalesced across
 * the columns of a warp). */
__global__ static void k_psgd_mtp(const float *M, size_t n, size_t m, size_t c, size_t r, const float *p, float *qt)
{
    GRID_STRIDE(t, r * c) {
        size_t k = t / c, j = t % c;
        qt[t] = hp_k_psgd_col(M, n, m, c, p, r, k, j);
    }
}

extern "C" int hp_kl_psgd_mtp(void *stream, const float *M, size_t n, size_t m, size_t c, size_t r, const float *p,
                              float *qt)
{
    if (r * c == 0)
        return 0;
    HP_LAUNCH(k_psgd_mtp, grid_for(r * c, 1), TPB, (cudaStream_t)stream)(M, n, m, c, r, p, qt);
    return launched();
}

__global__ static void k_psgd_recon(float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                                    const float *qs, const float *ql)
{
    GRID_STRIDE(e, n)
        hp_k_psgd_recon_at(buf, res, e, c, r, p, qs, ql);
}

extern "C" int hp_kl_psgd_recon(void *stream, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                                const float *qs, const float *ql)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_psgd_recon, grid_for(n, 4), TPB, (cudaStream_t)stream)(buf, res, n, c, r, p, qs, ql);
    return launched();
}

/* ------------------------------------------------------------- preload */

/* The kernels of this file (hp_kl_preload, cuda/kern/hp_kern_load.cu) */
extern "C" int hp_kl_preload_base(void)
{
    int n = 0;
    HP_PRELOAD(n, k_probe);
    HP_PRELOAD(n, k_finite);
    HP_PRELOAD(n, k_fold);
    HP_PRELOAD(n, k_momentum);
    HP_PRELOAD(n, k_add);
    HP_PRELOAD(n, k_mask_zero);
    HP_PRELOAD(n, k_fill);
    HP_PRELOAD(n, k_msg_header);
    HP_PRELOAD(n, k_msg_check);
    HP_PRELOAD(n, k_msg_fix);
    HP_PRELOAD(n, k_nan_if);
    HP_PRELOAD(n, k_divide);
    HP_PRELOAD(n, k_psgd_mq);
    HP_PRELOAD(n, k_psgd_mtp);
    HP_PRELOAD(n, k_psgd_recon);
    return n;
}
