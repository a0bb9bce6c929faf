/*
 * The kernels of cuda/hp_kern.cu run serially on the host: the same grid
 * (CTAs, warps, lanes, chunks), the same per-thread functions (hp_kern.h),
 * in an order a GPU could have run them in.  What the warp collectives do
 * on the device (a ballot, the 32 lane totals gathered by shuffles, a
 * block-wide scan) is done here with plain loops over the lanes.
 *
 * Built into tests/check_kern (which compares the bytes with the CPU
 * compressors) and, with HP_KL_TRANSLATE, into the emulated CUDA module of
 * the MPI tests, where device pointers are regions of the stand-in driver
 * (tests/mock_cuda.c) and are translated to their host shadow first.
 */
#include "hp_klaunch.h"
#include "hp_kern.h"
#include <stdlib.h>
#include <string.h>

#ifdef HP_KL_TRANSLATE
/* the stand-in driver's host shadow of a device address (itself for host
 * memory), looked up once */
#include <dlfcn.h>
static void *xlate(const void *p)
{
    static void *(*fn)(const void *);
    if (p == NULL)
        return NULL;
    if (fn == NULL) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        fn = h != NULL ? (void *(*)(const void *))dlsym(h, "mock_cuda_shadow") : NULL;
        if (fn == NULL)
            abort();   /* the emulated module runs under the stand-in driver only */
    }
    return fn(p);
}
#define P(T, p) ((T)xlate((const void *)(p)))
#else
#define P(T, p) ((T)(p))
#endif

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

/* ------------------------------------------------------------- onebit */

/* One chunk as one warp: lane sums, bit words (the ballots), and the chunk
 * result in the fast or the exact form. */
static void onebit_chunk(const float *x, const float *r, size_t len, uint8_t *words, double *pos_p,
                         double *neg_p, uint32_t *npos_p)
{
    float pos[32], neg[32];
    uint32_t np[32];
    double p, q;
    for (unsigned l = 0; l < 32; l++) {
        pos[l] = neg[l] = 0.0f;
        np[l] = 0;
        for (size_t i = l; i < len; i += 32)
            hp_k_sign_step(hp_k_v(x, r, i), &pos[l], &neg[l], &np[l]);
    }
    for (size_t t = 0; t * 32 < len; t++) {
        uint32_t w = 0;
        for (unsigned l = 0; l < 32; l++)
            if (t * 32 + l < len && hp_k_v(x, r, t * 32 + l) >= 0.0f)
                w |= 1u << l;
        hp_k_st32(words + 4 * t, w);
    }
    p = hp_sum_lanes32(pos);
    q = hp_sum_lanes32(neg);
    if (!isfinite(p) || !isfinite(q)) {
        /* both in the exact form, as hp_ops_sign_sum_finish does */
        p = hp_k_sum_exact(x, r, len, 1);
        q = hp_k_sum_exact(x, r, len, 2);
    }
    *pos_p = p;
    *neg_p = q;
    *npos_p = 0;
    for (unsigned l = 0; l < 32; l++)
        *npos_p += np[l];
}

int hp_kl_onebit_enc(void *stream, const float *x, float *r, size_t n, uint32_t B, uint8_t *scales,
                     uint8_t *words, uint32_t *flags)
{
    const hp_k_bgrid_t g = hp_k_bgrid(n, B);
    double cpos[HP_K_MAXCH], cneg[HP_K_MAXCH];
    uint32_t cnp[HP_K_MAXCH];
    (void)stream;
    x = P(const float *, x);
    r = P(float *, r);
    scales = P(uint8_t *, scales);
    words = P(uint8_t *, words);
    flags = P(uint32_t *, flags);
    if (r != NULL && (flags[0] & HP_K_F_NONFINITE))
        return 0;
    for (size_t cta = 0; cta < g.ncta; cta++) {
        const size_t base = cta * g.span, nch = hp_k_cta_chunks(&g), nbl = hp_k_cta_blocks(&g);
        float sc[HP_K_MAXCH][2];
        /* the warps: chunk c by warp c % HP_K_WARPS */
        for (size_t c = 0; c < nch; c++) {
            size_t off, len;
            hp_k_chunk(&g, cta, c, &off, &len);
            if (len == 0)
                break;
            onebit_chunk(x + off, r ? r + off : NULL, len, words + off / 8, &cpos[c], &cneg[c], &cnp[c]);
        }
        /* one thread per block: the chunk results in chunk order */
        for (size_t b = 0; b < nbl; b++) {
            size_t start = base + b * B, len, cpb = B / g.C;
            double pos = 0.0, neg = 0.0;
            size_t npos = 0;
            if (start >= n)
                break;
            len = n - start < B ? n - start : B;
            for (size_t c = b * cpb; c < (b + 1) * cpb && (c - b * cpb) * g.C < len; c++) {
                pos += cpos[c];
                neg += cneg[c];
                npos += cnp[c];
            }
            if (!isfinite(pos) || !isfinite(neg)) {
                flags[0] |= HP_K_F_NONFINITE;   /* only without a residual */
                continue;
            }
            hp_k_onebit_scales(pos, neg, npos, len, sc[b]);
            memcpy(scales + 8 * (start / B), sc[b], 8);
        }
        /* the residual, element by element */
        if (r != NULL)
            for (size_t i = base; i < n && i < base + g.span; i++) {
                const float *s = sc[(i - base) / B];
                float v = hp_k_v(x, r, i);
                r[i] = v - hp_k_onebit_sel(v, s[0], s[1]);
            }
    }
    return 0;
}

int hp_kl_onebit_dec(void *stream, const uint8_t *scales, const uint8_t *words, size_t n, uint32_t B,
                     float *dst, int accumulate, uint32_t *bad)
{
    const size_t nb = (n + B - 1) / B;
    (void)stream;
    scales = P(const uint8_t *, scales);
    words = P(const uint8_t *, words);
    dst = P(float *, dst);
    bad = P(uint32_t *, bad);
    /* one thread per block: its set bits against its scales */
    for (size_t b = 0; b < nb; b++) {
        size_t start = b * B, len = n - start < B ? n - start : B, npos = 0;
        float sc[2];
        memcpy(sc, scales + 8 * b, 8);
        for (size_t w = 0; w * 32 < len; w++)
            npos += hp_k_popc(hp_k_ld32(words + 4 * (start / 32 + w)));
        if (!hp_k_onebit_scales_ok(sc[0], sc[1], npos, len))
            bad[0] |= HP_K_F_BAD;
    }
    for (size_t i = 0; i < n; i++) {
        float sc[2];
        uint32_t w = hp_k_ld32(words + 4 * (i / 32));
        memcpy(sc, scales + 8 * (i / B), 8);
        hp_k_store(dst, i, hp_k_onebit_bit_sel(w >> (i % 32), sc[0], sc[1]), accumulate);
    }
    return 0;
}

/* ---------------------------------------------------------------- tbq */

static double tbq_chunk(const float *x, const float *r, size_t len)
{
    float lanes[32];
    double s;
    for (unsigned l = 0; l < 32; l++) {
        lanes[l] = 0.0f;
        for (size_t i = l; i < len; i += 32)
            lanes[l] += fabsf(hp_k_v(x, r, i));
    }
    s = hp_sum_lanes32(lanes);
    if (!isfinite(s))
        s = hp_k_sum_exact(x, r, len, 0);
    return s;
}

int hp_kl_tbq_enc(void *stream, const float *x, float *r, size_t n, uint32_t B, float thr, float scale,
                  uint8_t *taus, uint8_t *codes, uint32_t *flags)
{
    const hp_k_bgrid_t g = hp_k_bgrid(n, B);
    double cs[HP_K_MAXCH];
    (void)stream;
    x = P(const float *, x);
    r = P(float *, r);
    taus = P(uint8_t *, taus);
    codes = P(uint8_t *, codes);
    flags = P(uint32_t *, flags);
    if (r != NULL && (flags[0] & HP_K_F_NONFINITE))
        return 0;
    for (size_t cta = 0; cta < g.ncta; cta++) {
        const size_t base = cta * g.span, nch = hp_k_cta_chunks(&g), nbl = hp_k_cta_blocks(&g);
        const size_t end = n - base < g.span ? n : base + g.span;
        float tau[HP_K_MAXCH];
        if (thr == 0.0f) {
            for (size_t c = 0; c < nch; c++) {
                size_t off, len;
                hp_k_chunk(&g, cta, c, &off, &len);
                if (len == 0)
                    break;
                cs[c] = tbq_chunk(x + off, r ? r + off : NULL, len);
            }
        }
        for (size_t b = 0; b < nbl; b++) {
            size_t start = base + b * B, len, cpb = B / g.C;
            double asum = 0.0;
            if (start >= n)
                break;
            len = n - start < B ? n - start : B;
            if (thr == 0.0f) {
                for (size_t c = b * cpb; c < (b + 1) * cpb && (c - b * cpb) * g.C < len; c++)
                    asum += cs[c];
                if (!isfinite(asum))
                    flags[0] |= HP_K_F_NONFINITE;   /* only without a residual */
            }
            tau[b] = hp_k_tbq_tau(asum, len, thr, scale);
            memcpy(taus + 4 * (start / B), &tau[b], 4);
        }
        /* codes, four elements (one byte) per thread, and the residual */
        for (size_t i0 = base; i0 < end; i0 += 4) {
            uint32_t byte = 0;
            for (size_t i = i0; i < i0 + 4 && i < end; i++) {
                float t = tau[(i - base) / B];
                float v = hp_k_v(x, r, i);
                uint32_t c = hp_k_tbq_code(v, t);
                if (r == NULL && hp_nonfinite(v))
                    flags[0] |= HP_K_F_NONFINITE;
                byte |= c << (2 * (i - i0));
                if (r != NULL)
                    r[i] = hp_k_tbq_resid(v, c, t);
            }
            codes[i0 / 4] = (uint8_t)byte;
        }
    }
    return 0;
}

int hp_kl_tbq_dec(void *stream, const uint8_t *taus, const uint8_t *codes, size_t n, uint32_t B,
                  float *dst, int accumulate, uint32_t *bad)
{
    (void)stream;
    taus = P(const uint8_t *, taus);
    codes = P(const uint8_t *, codes);
    dst = P(float *, dst);
    bad = P(uint32_t *, bad);
    for (size_t i = 0; i < n; i++) {
        float tau;
        uint32_t c = (codes[i / 4] >> (2 * (i % 4))) & 3u;
        memcpy(&tau, taus + 4 * (i / B), 4);
        if (hp_k_tbq_code_bad(c, tau))
            bad[0] |= HP_K_F_BAD;
        hp_k_store(dst, i, hp_k_tbq_dec(c, tau), accumulate);
    }
    return 0;
}

/* ----------------------------------------------------------- terngrad */

int hp_kl_tg_enc(void *stream, const float *x, size_t n, uint32_t B, uint32_t bits, uint64_t key, uint64_t ctr0,
                 uint8_t *pairs, uint8_t *codes, uint32_t *flags)
{
    const size_t nb = (n + B - 1) / B, per = 8 / bits;
    uint32_t absmax = 0;
    (void)stream;
    x = P(const float *, x);
    pairs = P(uint8_t *, pairs);
    codes = P(uint8_t *, codes);
    flags = P(uint32_t *, flags);
    /* pass A: per block, min and max with their keys (any tree: the CTA's
     * threads, then a tree of them), the pair by one thread */
    for (size_t b = 0; b < nb; b++) {
        hp_k_mm_t a;
        float pr[2];
        hp_k_mm_init(&a);
        for (size_t i = b * B; i < n && i < (b + 1) * B; i++)
            hp_k_mm_add(&a, x[i], hp_k_mm_key(i));
        hp_k_tg_pair(a.mn, a.mx, bits, pr);
        memcpy(pairs + 8 * b, pr, 8);
        absmax = a.absmax > absmax ? a.absmax : absmax;
    }
    if (absmax >= HP_K_TG_LIMIT_BITS) {
        flags[0] |= HP_K_F_NONFINITE;
        return 0;
    }
    /* pass B: one byte of codes per thread (a byte never straddles blocks) */
    for (size_t o = 0; o * per < n; o++) {
        uint32_t byte = 0;
        float pr[2];
        memcpy(pr, pairs + 8 * (o * per / B), 8);
        for (size_t j = 0; j < per && o * per + j < n; j++) {
            size_t i = o * per + j;
            byte |= hp_k_tg_code(x[i], pr, bits, key, ctr0 + i) << (j * bits);
        }
        codes[o] = (uint8_t)byte;
    }
    return 0;
}

int hp_kl_tg_dec(void *stream, const uint8_t *pairs, const uint8_t *codes, size_t n, uint32_t B, uint32_t bits,
                 float *dst, int accumulate, uint32_t *bad)
{
    const uint32_t per = 8 / bits, mask = (1u << bits) - 1u;
    (void)stream;
    pairs = P(const uint8_t *, pairs);
    codes = P(const uint8_t *, codes);
    dst = P(float *, dst);
    bad = P(uint32_t *, bad);
    for (size_t i = 0; i < n; i++) {
        float pr[2];
        uint32_t c = (codes[i / per] >> ((i % per) * bits)) & mask;
        memcpy(pr, pairs + 8 * (i / B), 8);
        if (hp_f2u(pr[1]) == 0 && c != 0)
            bad[0] |= HP_K_F_BAD;
        hp_k_store(dst, i, hp_dequant(c, pr[0], 0.0f, pr[1]), accumulate);
    }
    return 0;
}

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

int hp_kl_sparse_enc(void *stream, const hp_kl_sparse_t *a0)
{
    hp_kl_sparse_t a = *a0;
    const size_t nb = sparse_blocks(a.n, a.G);
    const int writes = a0->r != NULL || a0->u != NULL;
    uint8_t *slots;
    uint32_t *counts, total = 0;
    const float *post;
    uint32_t *hist;
    (void)stream;
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
        if (a.mask != NULL)
            a.mask[i] = 0.0f;
    }
    return 0;
}

int hp_kl_sparse_dec(void *stream, const uint8_t *pairs, size_t m, size_t n, float *dst, int accumulate,
                     uint32_t *bad)
{
    (void)stream;
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
    for (size_t j = 0; j < m; j++) {
        uint32_t i = hp_k_ld32(pairs + 8 * j);
        float v = hp_u2f(hp_k_ld32(pairs + 8 * j + 4));
        if ((size_t)i < n)
            hp_k_store(dst, i, v, accumulate);
    }
    return 0;
}

int hp_kl_sparse_mask(void *stream, const uint8_t *pairs, const uint32_t *count, float *v, size_t n,
                      const uint32_t *flags)
{
    (void)stream;
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

/* -------------------------------------------------------- fp16, bf16 */

/* A CTA per span of whole blocks (hp_kern.cu): per block the largest |x|
 * (a maximum: any order), then the halves. */
int hp_kl_f16_enc(void *stream, const float *x, size_t n, uint32_t B, uint8_t *halves, uint8_t *exps,
                  uint32_t *flags)
{
    (void)stream;
    x = P(const float *, x);
    halves = P(uint8_t *, halves);
    exps = P(uint8_t *, exps);
    flags = P(uint32_t *, flags);
    for (size_t b0 = 0; b0 < n; b0 += B) {
        const size_t end = n - b0 < B ? n : b0 + B;
        uint32_t m = 0;
        int e;
        float scale;
        for (size_t i = b0; i < end; i++)
            m = hp_k_absmax_step(m, x[i]);
        if (m >= HP_K_NONFINITE_BITS) {
            flags[0] |= HP_K_F_NONFINITE;
            continue;
        }
        e = hp_f16_block_exp(m);
        exps[b0 / B] = (uint8_t)(int8_t)e;
        scale = hp_exp2i(e);
        for (size_t i = b0; i < end; i++)
            hp_k_st16(halves + 2 * i, hp_f16_enc(x[i], scale));
    }
    return 0;
}

int hp_kl_f16_dec(void *stream, const uint8_t *halves, const uint8_t *exps, size_t n, uint32_t B, float *dst,
                  int accumulate, uint32_t *bad)
{
    (void)stream;
    halves = P(const uint8_t *, halves);
    exps = P(const uint8_t *, exps);
    dst = P(float *, dst);
    bad = P(uint32_t *, bad);
    for (size_t b0 = 0; b0 < n; b0 += B) {
        const size_t end = n - b0 < B ? n : b0 + B;
        const int e = (int8_t)exps[b0 / B];
        const float inv = hp_exp2i(-e);
        uint32_t mx = 0;
        for (size_t i = b0; i < end; i++) {
            uint16_t h = hp_k_ld16(halves + 2 * i);
            uint32_t a = h & 0x7fffu;
            mx = a > mx ? a : mx;
            hp_k_store(dst, i, hp_f16_dec(h, inv), accumulate);
        }
        if (hp_k_f16_block_bad(mx, e))
            bad[0] |= HP_K_F_BAD;
    }
    return 0;
}

int hp_kl_bf16_enc(void *stream, const float *x, size_t n, uint8_t *out, uint32_t *flags)
{
    (void)stream;
    x = P(const float *, x);
    out = P(uint8_t *, out);
    flags = P(uint32_t *, flags);
    for (size_t i = 0; i < n; i++) {
        if (hp_nonfinite(x[i]))
            flags[0] |= HP_K_F_NONFINITE;
        hp_k_st16(out + 2 * i, hp_bf16_enc(x[i]));
    }
    return 0;
}

int hp_kl_bf16_dec(void *stream, const uint8_t *in, size_t n, float *dst, int accumulate, uint32_t *bad)
{
    (void)stream;
    in = P(const uint8_t *, in);
    dst = P(float *, dst);
    bad = P(uint32_t *, bad);
    for (size_t i = 0; i < n; i++) {
        uint16_t h = hp_k_ld16(in + 2 * i);
        if (hp_k_bf16_bad(h))
            bad[0] |= HP_K_F_BAD;
        hp_k_store(dst, i, hp_bf16_to_f32(h), accumulate);
    }
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
