/*
 * The kernels of cuda/hp_kern*.cu run serially on the host: the same grid
 * (CTAs, warps, lanes, chunks), the same per-thread functions (hp_kern.h),
 * in an order a GPU could have run them in.  Here those of hp_kern.cu (the
 * element-wise kernels, powersgd's passes); each family of formats has its
 * file, as the kernels do (hp_kern_emu_quant.c, hp_kern_emu_half.c,
 * hp_kern_emu_sparse.c).  What the warp collectives do on the device (a
 * ballot, the 32 lane totals gathered by shuffles, a block-wide scan) is
 * done here with plain loops over the lanes.
 *
 * Built into tests/check_kern (which compares the bytes with the CPU
 * compressors) and, with HP_KL_TRANSLATE, into the emulated CUDA module of
 * the MPI tests, where device pointers are regions of the stand-in driver
 * (tests/mock_cuda.c) and are translated to their host shadow first.
 */
#include "hp_kern_emu.h"

/* ------------------------------------------------------------ helpers */

int hp_kl_probe(void)
{
    return 0;   /* the host runs every "kernel" */
}

int hp_kl_finite(void *stream, const float *x, size_t n, uint32_t *flags)
{
    (void)stream;
    x = P(const float *, x);
    flags = P(uint32_t *, flags);
    for (size_t i = 0; i < n; i++)
        if (hp_nonfinite(x[i]))
            flags[0] |= HP_K_F_NONFINITE;
    return 0;
}

int hp_kl_fold(void *stream, float *buf, float *r, size_t n, const uint32_t *flags)
{
    (void)stream;
    buf = P(float *, buf);
    r = P(float *, r);
    flags = P(const uint32_t *, flags);
    if (flags[0] & HP_K_F_NONFINITE)
        return 0;
    for (size_t i = 0; i < n; i++) {
        buf[i] = buf[i] + r[i];
        r[i] = 0.0f;
    }
    return 0;
}

int hp_kl_momentum(void *stream, float *u, float *buf, float m, size_t n, const uint32_t *flags)
{
    (void)stream;
    u = P(float *, u);
    buf = P(float *, buf);
    flags = P(const uint32_t *, flags);
    if (flags[0] & HP_K_F_NONFINITE)
        return 0;
    for (size_t i = 0; i < n; i++) {
        u[i] = hp_k_sparse_u(buf, u, m, i);
        buf[i] = u[i];
    }
    return 0;
}

int hp_kl_add(void *stream, float *dst, const float *src, size_t n)
{
    (void)stream;
    dst = P(float *, dst);
    src = P(const float *, src);
    for (size_t i = 0; i < n; i++)
        dst[i] = dst[i] + src[i];
    return 0;
}

int hp_kl_fill(void *stream, float *dst, float v, size_t n)
{
    (void)stream;
    dst = P(float *, dst);
    for (size_t i = 0; i < n; i++)
        dst[i] = v;
    return 0;
}

/* ----------------------------------------------------------- powersgd */

int hp_kl_psgd_mq(void *stream, const float *M, size_t n, size_t m, size_t c, size_t r, size_t T, const float *qt,
                  float *p)
{
    (void)stream;
    M = P(const float *, M);
    qt = P(const float *, qt);
    p = P(float *, p);
    /* one thread per (row, k) */
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < r; k++)
            p[i * r + k] = hp_k_psgd_dot(M + i * c, hp_k_psgd_row_len(n, c, i), qt + k * c, T);
    return 0;
}

int hp_kl_psgd_mtp(void *stream, const float *M, size_t n, size_t m, size_t c, size_t r, const float *p, float *qt)
{
    (void)stream;
    M = P(const float *, M);
    p = P(const float *, p);
    qt = P(float *, qt);
    /* one thread per (k, column) */
    for (size_t k = 0; k < r; k++)
        for (size_t j = 0; j < c; j++)
            qt[k * c + j] = hp_k_psgd_col(M, n, m, c, p, r, k, j);
    return 0;
}

int hp_kl_psgd_recon(void *stream, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                     const float *qs, const float *ql)
{
    (void)stream;
    buf = P(float *, buf);
    res = P(float *, res);
    p = P(const float *, p);
    qs = P(const float *, qs);
    ql = P(const float *, ql);
    for (size_t e = 0; e < n; e++) {
        const float *prow = p + (e / c) * r;
        if (res != NULL)
            res[e] = buf[e] - hp_k_psgd_recon(prow, r, ql, c, e % c);
        buf[e] = hp_k_psgd_recon(prow, r, qs, c, e % c);
    }
    return 0;
}
