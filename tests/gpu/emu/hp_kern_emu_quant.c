/*
 * The kernels of cuda/kern/hp_kern_quant.cu (onebit, tbq, terngrad, q) run
 * serially on the host, over the same grid and per-thread functions, as
 * tests/gpu/emu/hp_kern_emu.c says.
 */
#include "hp_kern_emu.h"

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

HP_EMU_KERNEL(onebit_enc, (const float *, x), (float *, r), (size_t, n), (uint32_t, B), (uint8_t *, scales),
              (uint8_t *, words), (uint32_t *, flags))
{
    const hp_k_bgrid_t g = hp_k_bgrid(n, B);
    double cpos[HP_K_MAXCH], cneg[HP_K_MAXCH];
    uint32_t cnp[HP_K_MAXCH];
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

HP_EMU_KERNEL(onebit_dec, (const uint8_t *, scales), (const uint8_t *, words), (size_t, n), (uint32_t, B),
              (float *, dst), (int, accumulate), (uint32_t *, bad))
{
    const size_t nb = (n + B - 1) / B;
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

HP_EMU_KERNEL(tbq_enc, (const float *, x), (float *, r), (size_t, n), (uint32_t, B), (float, thr), (float, scale),
              (uint8_t *, taus), (uint8_t *, codes), (uint32_t *, flags))
{
    const hp_k_bgrid_t g = hp_k_bgrid(n, B);
    double cs[HP_K_MAXCH];
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

HP_EMU_KERNEL(tbq_dec, (const uint8_t *, taus), (const uint8_t *, codes), (size_t, n), (uint32_t, B), (float *, dst),
              (int, accumulate), (uint32_t *, bad))
{
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

HP_EMU_KERNEL(tg_enc, (const float *, x), (size_t, n), (uint32_t, B), (uint32_t, bits), (uint64_t, key),
              (uint64_t, ctr0), (uint8_t *, pairs), (uint8_t *, codes), (uint32_t *, flags))
{
    const size_t nb = (n + B - 1) / B, per = 8 / bits;
    uint32_t absmax = 0;
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

HP_EMU_KERNEL(tg_dec, (const uint8_t *, pairs), (const uint8_t *, codes), (size_t, n), (uint32_t, B),
              (uint32_t, bits), (float *, dst), (int, accumulate), (uint32_t *, bad))
{
    const uint32_t per = 8 / bits, mask = (1u << bits) - 1u;
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

/* --------------------------------------------------------- q2, q4, q8 */

HP_EMU_KERNEL(q_enc, (const float *, x), (float *, r), (float *, mask), (size_t, n), (uint32_t, B), (uint32_t, bits),
              (uint32_t, stoch), (uint64_t, key), (uint64_t, ctr0), (uint8_t *, pairs), (uint8_t *, codes),
              (uint32_t *, flags))
{
    const size_t nb = (n + B - 1) / B, per = 8 / bits;
    uint32_t absmax = 0;
    x = P(const float *, x);
    r = P(float *, r);
    mask = P(float *, mask);
    pairs = P(uint8_t *, pairs);
    codes = P(uint8_t *, codes);
    flags = P(uint32_t *, flags);
    /* pass A (read only): per block, min and max of v with their keys, the
     * largest |x| of the message, the pair by one thread */
    for (size_t b = 0; b < nb; b++) {
        hp_k_mm_t a;
        float pr[2];
        hp_k_mm_init(&a);
        for (size_t i = b * B; i < n && i < (b + 1) * B; i++) {
            hp_k_mm_add(&a, hp_k_q_v(x, r, i), hp_k_mm_key(i));
            absmax = hp_k_absmax_step(absmax, x[i]);
        }
        hp_k_tg_pair(a.mn, a.mx, bits, pr);
        memcpy(pairs + 8 * b, pr, 8);
    }
    if (absmax >= HP_K_TG_LIMIT_BITS) {
        flags[0] |= HP_K_F_NONFINITE;
        return 0;
    }
    /* pass B: one byte of codes per thread (a byte never straddles blocks),
     * and the residuals (and mask) of its elements */
    for (size_t o = 0; o * per < n; o++) {
        uint32_t byte = 0;
        float pr[2];
        memcpy(pr, pairs + 8 * (o * per / B), 8);
        for (size_t j = 0; j < per && o * per + j < n; j++) {
            size_t i = o * per + j;
            float v = hp_k_q_v(x, r, i);
            uint32_t c = hp_k_q_code(v, pr, bits, stoch, key, ctr0 + i);
            byte |= c << (j * bits);
            if (r != NULL)
                r[i] = hp_k_q_resid(v, c, pr);
            if (mask != NULL)
                mask[i] = 0.0f;
        }
        codes[o] = (uint8_t)byte;
    }
    return 0;
}
