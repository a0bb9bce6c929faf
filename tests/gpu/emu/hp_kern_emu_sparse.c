/*
 * The kernels of cuda/kern/hp_kern_sparse.cu (graddrop, dgc) run serially on the
 * host, over the same grid and per-thread functions, as tests/gpu/emu/hp_kern_emu.c
 * says.
 */
#include "hp_kern_emu.h"

/* ------------------------------------------------------------- sparse */

static size_t sparse_blocks(size_t n, uint32_t G)
{
    return (n + G - 1) / G;
}

size_t hp_kl_sparse_tmp_bytes(size_t n, uint32_t G, uint32_t k_full, uint32_t k_last)
{
    size_t nb = sparse_blocks(n, G);
    (void)k_last;
    /* per block: its pairs at 8 * b * k_full (the last block's k_last <=
     * k_full), its count */
    return 8 * nb * (size_t)k_full + 4 * nb + 64;
}

static int emu_sparse_enc(const hp_kl_sparse_t *a0);

static int emu_sparse_enc_run(void *p)
{
    return emu_sparse_enc((const hp_kl_sparse_t *)p);
}

/* the launch takes its arguments by value, as a kernel's launch does */
int hp_kl_sparse_enc(void *stream, const hp_kl_sparse_t *a0)
{
    return hp_emu_launch(stream, emu_sparse_enc_run, a0, sizeof(*a0));
}

static int emu_sparse_enc(const hp_kl_sparse_t *a0)
{
    hp_kl_sparse_t a = *a0;
    const size_t nb = sparse_blocks(a.n, a.G);
    const int writes = a0->r != NULL || a0->u != NULL;
    uint8_t *slots;
    uint32_t *counts, total = 0;
    const float *post;
    uint32_t *hist;
    a.g = P(const float *, a.g);
    a.r = P(float *, a.r);
    a.u = P(float *, a.u);
    a.mask = P(float *, a.mask);
    a.payload = P(uint8_t *, a.payload);
    a.tmp = P(void *, a.tmp);
    a.info = P(uint32_t *, a.info);
    slots = (uint8_t *)a.tmp;
    counts = (uint32_t *)(slots + 8 * nb * (size_t)a.k_full);
    a.info[1] = 0;

    /* 1. NaN / Inf in g: the NaN message, nothing written */
    for (size_t i = 0; i < a.n; i++)
        if (hp_nonfinite(a.g[i]))
            a.info[0] |= HP_K_F_NONFINITE;
    if (a.info[0] & HP_K_F_NONFINITE)
        return 0;
    /* 2. commit u' and v, element-wise */
    if (writes)
        for (size_t i = 0; i < a.n; i++) {
            float up = hp_k_sparse_u(a.g, a.u, a.m, i);
            float v = hp_k_sparse_v(a.r, up, i);
            if (a.u != NULL)
                a.u[i] = up;
            if (a.r != NULL)
                a.r[i] = v;
            if (hp_nonfinite(v))
                a.info[0] |= HP_K_F_OVERFLOW | HP_K_F_NONFINITE;
        }
    if (a.info[0] & HP_K_F_OVERFLOW) {
        /* 6. v overflowed: error feedback starts again from zero */
        for (size_t i = 0; i < a.n; i++) {
            if (a.r != NULL)
                a.r[i] = 0.0f;
            if (a.u != NULL)
                a.u[i] = 0.0f;
        }
        return 0;
    }
    post = a.r != NULL ? a.r : a.u != NULL ? a.u : a.g;
    /* 3. one CTA per block: radix select, then the pairs in index order */
    hist = (uint32_t *)malloc(HP_K_RADIX_BINS * sizeof(uint32_t));
    if (hist == NULL)
        return -1;
    for (size_t b = 0; b < nb; b++) {
        const size_t start = b * a.G, len = a.n - start < a.G ? a.n - start : a.G;
        const uint32_t k = len < a.G ? a.k_last : a.k_full;
        const float *v = post + start;
        uint32_t nnz = 0, kk = k, prefix = 0, t = 0, quota = 0, ties = 0, cnt = 0, above;
        uint8_t *out = slots + 8 * b * (size_t)a.k_full;
        for (size_t i = 0; i < len; i++)
            nnz += hp_k_absbits(v[i]) != 0;
        if (nnz > k && k > 0) {
            for (int pass = 0; pass < 3; pass++) {
                uint32_t d;
                memset(hist, 0, HP_K_RADIX_BINS * sizeof(uint32_t));
                for (size_t i = 0; i < len; i++) {
                    uint32_t mag = hp_k_absbits(v[i]);
                    if (mag != 0 && hp_k_radix_match(mag, prefix, pass))
                        hist[hp_k_radix_digit(mag, pass)]++;
                }
                d = hp_k_radix_pick(hist, hp_k_radix_nbins(pass), &kk, &above);
                prefix |= d << hp_k_radix_shift(pass);
            }
            t = prefix;
            quota = kk;
        } else if (k == 0) {
            t = 0x7fffffffu;   /* nothing goes */
        }
        for (size_t i = 0; i < len; i++) {
            uint32_t mag = hp_k_absbits(v[i]);
            int sel = k > 0 && mag != 0 && hp_k_sparse_sel(mag, t, ties, quota);
            ties += mag == t && t > 0;
            if (sel) {
                uint32_t vb;
                memcpy(&vb, &v[i], 4);
                hp_k_st32(out + 8 * cnt, (uint32_t)i);
                hp_k_st32(out + 8 * cnt + 4, vb);
                cnt++;
            }
        }
        counts[b] = cnt;
    }
    free(hist);
    /* 4. one CTA: block offsets by a scan of the counts, indices made
     * message-relative */
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *in = slots + 8 * b * (size_t)a.k_full;
        for (uint32_t j = 0; j < counts[b]; j++) {
            hp_k_st32(a.payload + 8 * (total + j), hp_k_ld32(in + 8 * j) + (uint32_t)(b * a.G));
            memcpy(a.payload + 8 * (total + j) + 4, in + 8 * j + 4, 4);
        }
        total += counts[b];
    }
    a.info[1] = total;
    /* 5. mask residual, state and the call's momentum at the sent indices */
    for (uint32_t j = 0; j < total; j++) {
        uint32_t i = hp_k_ld32(a.payload + 8 * j);
        if (a.r != NULL)
            a.r[i] = 0.0f;
        if (a.u != NULL)
            a.u[i] = 0.0f;
        if (a.mask != NULL && !(P(const uint32_t *, a.gate)[0] & HP_K_F_NONFINITE))
            a.mask[i] = 0.0f;
    }
    return 0;
}

HP_EMU_KERNEL(sparse_dec, (const uint8_t *, pairs), (size_t, m), (size_t, n), (float *, dst), (int, accumulate),
              (uint32_t *, bad))
{
    pairs = P(const uint8_t *, pairs);
    dst = P(float *, dst);
    bad = P(uint32_t *, bad);
    /* one thread per pair: its checks; then zero-fill; then the scatter */
    for (size_t j = 0; j < m; j++) {
        uint32_t i = hp_k_ld32(pairs + 8 * j), vb = hp_k_ld32(pairs + 8 * j + 4);
        uint32_t prev = j ? hp_k_ld32(pairs + 8 * (j - 1)) : 0;
        if (hp_k_sparse_pair_bad(i, vb, j == 0, prev, n))
            bad[0] |= HP_K_F_BAD;
    }
    if (!accumulate)
        for (size_t i = 0; i < n; i++)
            dst[i] = 0.0f;
    if (bad[0] & HP_K_F_BAD)
        return 0;   /* no scatter of pairs that failed */
    for (size_t j = 0; j < m; j++) {
        uint32_t i = hp_k_ld32(pairs + 8 * j);
        float v = hp_u2f(hp_k_ld32(pairs + 8 * j + 4));
        if ((size_t)i < n)
            hp_k_store(dst, i, v, accumulate);
    }
    return 0;
}

HP_EMU_KERNEL(sparse_mask, (const uint8_t *, pairs), (const uint32_t *, count), (float *, v), (size_t, n),
              (const uint32_t *, flags))
{
    pairs = P(const uint8_t *, pairs);
    count = P(const uint32_t *, count);
    v = P(float *, v);
    flags = P(const uint32_t *, flags);
    if (flags[0] & HP_K_F_NONFINITE)
        return 0;
    for (uint32_t j = 0; j < count[0]; j++) {
        uint32_t i = hp_k_ld32(pairs + 8 * j);
        if ((size_t)i < n)
            v[i] = 0.0f;
    }
    return 0;
}

/* ------------------------------------------ messages in device memory */

/* As cuda/kern/hp_kern_sparse.cu: the header by one thread, a thread per pair
 * for its checks, a thread per element for the zero fill or the dense
 * fallback's values, a thread per pair for the scatter -- each kernel
 * reading the status the first wrote. */
HP_EMU_KERNEL(sparse_dec_msg, (const uint8_t *, m), (size_t, cap), (uint32_t, kind), (uint32_t, dense), (size_t, n),
              (float *, dst), (int, accumulate), (uint32_t *, status))
{
    uint32_t cnt;
    m = P(const uint8_t *, m);
    dst = P(float *, dst);
    status = P(uint32_t *, status);
    status[0] = hp_k_msg_head_sparse(m, cap, kind, dense, (uint32_t)n, &status[3]);
    if (status[0] != HP_K_MSG_OK)
        return 0;
    cnt = hp_k_ld32(m + 8) / 8;
    if (!status[3])
        for (uint32_t j = 0; j < cnt; j++) {
            const uint8_t *pr = m + HP_K_MSG_HEADER + 8 * (size_t)j;
            uint32_t prev = j ? hp_k_ld32(pr - 8) : 0;
            if (hp_k_sparse_pair_bad(hp_k_ld32(pr), hp_k_ld32(pr + 4), j == 0, prev, n))
                status[2] |= HP_K_F_BAD;
        }
    for (size_t i = 0; i < n; i++) {
        if (status[3])
            hp_k_store(dst, i, hp_u2f(hp_k_ld32(m + HP_K_MSG_HEADER + 4 * i)), accumulate);
        else if (!accumulate)
            dst[i] = 0.0f;
    }
    if (!status[3] && !status[2])
        for (uint32_t j = 0; j < cnt; j++) {
            const uint8_t *pr = m + HP_K_MSG_HEADER + 8 * (size_t)j;
            uint32_t i = hp_k_ld32(pr);
            if ((size_t)i < n)
                hp_k_store(dst, i, hp_u2f(hp_k_ld32(pr + 4)), accumulate);
        }
    return 0;
}

HP_EMU_KERNEL(msg_header_count, (uint8_t *, m), (uint32_t, kind), (uint32_t, n), (uint32_t, unit),
              (const uint32_t *, count), (const uint32_t *, flags))
{
    m = P(uint8_t *, m);
    count = P(const uint32_t *, count);
    flags = P(const uint32_t *, flags);
    hp_k_msg_put_header(m, kind, (flags[0] & HP_K_F_NONFINITE) != 0, n, unit * count[0]);
    return 0;
}
