/*
 * The per-thread work of the CUDA kernels, as functions that compile both as
 * C (gcc, for the CPU tests and the emulated module) and as CUDA device code
 * (nvcc, for libhipress_cuda.so).  A kernel in hp_kern*.cu is a thin shell
 * around these: it picks the elements of a thread, lane or CTA and does the
 * warp collectives (ballot, shuffles); tests/gpu/emu/hp_kern_emu*.c run the same
 * functions over the same grid serially, and tests/gpu/kern/check_kern.c compares the
 * bytes it produces with the CPU compressors' (src/comp/hp_comp_*.c).
 *
 * How the GPU gets the CPU's bits (src/ops/hp_ops.h has the rules):
 *  - element math is IEEE single precision without contraction (nvcc
 *    --fmad=false, gcc -ffp-contract=off), the same expressions in the same
 *    order, from hp_elem.h;
 *  - every sum has the CPU's order: a chunk of min(block, 2048) elements is
 *    one warp, lane j adds elements j, j+32, ... in index order from +0 (the
 *    CPU's 32 float lanes), the 32 lane totals are added in double in lane
 *    order; when that is not finite the exact form (8 double lanes combined
 *    pairwise) is computed by one thread; chunk results are added in chunk
 *    order by one thread per block;
 *  - min/max (terngrad, per block) keep, among equal values, the one the
 *    CPU's fold keeps (hp_k_mm_key), so any tree gives the CPU's bits, -0
 *    versus +0 included;
 *  - top-k (graddrop, dgc) selects exactly the CPU rule's elements: the k
 *    largest |v| of a block, ties to the lower index, exact zeros never
 *    (an exact radix select on the |v| bits, whatever the CPU's sampling
 *    did on the way to the same set).
 *
 * Error feedback: with a residual the input is first checked finite as a
 * whole (a read-only pass), then v = x + r, or x where x + r overflows (the
 * CPU resets such an element: its error feedback is dropped).  Computing v
 * that way from the start gives the CPU's bits: where nothing overflows it
 * is x + r, and where something does the CPU recomputes with the reset v.
 */
#ifndef HP_KERN_H
#define HP_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <float.h>
#include "hp_elem.h"

#if defined(__CUDACC__)
#define HP_KD __host__ __device__ __forceinline__
#else
#define HP_KD static inline
#endif

#define HP_K_WARP   32
#define HP_K_CHUNK  2048          /* HP_OPS_CHUNK: the CPU's reduction chunk */
#define HP_K_SPAN   16384         /* elements per CTA of the block kernels (8 warps) */
#define HP_K_WARPS  (HP_K_SPAN / HP_K_CHUNK)
#define HP_K_MAXCH  512           /* chunks per CTA: span / chunk, for blocks up to 2^20 */
#define HP_K_NONFINITE_BITS 0x7f800000u
#define HP_K_TG_LIMIT_BITS  0x7e800000u   /* terngrad: |x| >= 2^126 is non-finite */

/* Flags a kernel sets in the device info word of a message (OR-ed). */
#define HP_K_F_NONFINITE 0x1u   /* the message is the NaN message */
#define HP_K_F_OVERFLOW  0x4u   /* sparse: v overflowed: residual and state reset */
#define HP_K_F_BAD       0x8u   /* decode: the message is malformed (sticky) */

/* -------------------------------------------------------- NaN by code */

/* a + b as every path stores it: a NaN result canonical (hp_elem.h
 * hp_canon), so the bits do not depend on the hardware's NaN rules */
HP_KD float hp_k_add(float a, float b) { return hp_canon(a + b); }

/* ------------------------------------------------------------------ v */

/* The value an error-feedback encode quantises: x + r, or x where that
 * overflows (x is known finite).  r NULL: x. */
HP_KD float hp_k_v(const float *x, const float *r, size_t i)
{
    float t;
    if (r == NULL)
        return x[i];
    t = x[i] + r[i];
    return hp_nonfinite(t) ? x[i] : t;
}

/* ------------------------------------------------------------- sums */

/* onebit's lane step: both classes add a value, +0 for a non-member, as
 * hp_ops_sign_sum_step does. */
HP_KD void hp_k_sign_step(float v, float *pos, float *neg, uint32_t *npos)
{
    uint32_t set = v >= 0.0f;
    uint32_t m = 0u - set;
    *pos += hp_u2f(hp_f2u(v) & m);
    *neg += hp_u2f(hp_f2u(v) & ~m);
    *npos += set;
}

/* The exact forms (8 double lanes), when the fast one is not finite.
 * cls 0: sum of |v|; 1: sum of v >= 0 ? v : 0; 2: sum of v >= 0 ? 0 : v. */
HP_KD double hp_k_sum_exact(const float *x, const float *r, size_t len, int cls)
{
    double d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < len; i++) {
        float v = hp_k_v(x, r, i);
        float t = cls == 0 ? fabsf(v) : cls == 1 ? (v >= 0.0f ? v : 0.0f) : (v >= 0.0f ? 0.0f : v);
        d[i & 7] += (double)t;
    }
    return hp_sum_lanes8(d);
}

/* ---------------------------------------------------------- geometry */

/* The grid of the block kernels (onebit, tbq): chunk C = min(B, 2048); a
 * CTA covers `span` = max(B, HP_K_SPAN) elements (whole blocks), its 8 warps
 * taking its chunks in turn. */
typedef struct {
    size_t   n;
    uint32_t B, C;
    size_t   span, ncta;
} hp_k_bgrid_t;

HP_KD hp_k_bgrid_t hp_k_bgrid(size_t n, uint32_t B)
{
    hp_k_bgrid_t g;
    g.n = n;
    g.B = B;
    g.C = B < HP_K_CHUNK ? B : HP_K_CHUNK;
    g.span = B > HP_K_SPAN ? B : HP_K_SPAN;
    g.ncta = (n + g.span - 1) / g.span;
    return g;
}

/* Elements [*off, *off + *len) of chunk `c` of CTA `cta` (message-relative);
 * *len 0 when the chunk is past the end. */
HP_KD void hp_k_chunk(const hp_k_bgrid_t *g, size_t cta, size_t c, size_t *off, size_t *len)
{
    size_t o = cta * g->span + c * g->C;
    *off = o;
    *len = o < g->n ? (g->n - o < g->C ? g->n - o : g->C) : 0;
}

/* Chunks of a CTA, and blocks of a CTA. */
HP_KD size_t hp_k_cta_chunks(const hp_k_bgrid_t *g) { return g->span / g->C; }
HP_KD size_t hp_k_cta_blocks(const hp_k_bgrid_t *g) { return g->span / g->B; }

/* ------------------------------------------------------------ onebit */

/* Scales of a block from its sums (hp_comp_onebit.c put_scales). */
HP_KD void hp_k_onebit_scales(double pos, double neg, size_t npos, size_t len, float sc[2])
{
    sc[0] = npos ? (float)(pos / (double)npos) : 0.0f;
    sc[1] = len - npos ? (float)(neg / (double)(len - npos)) : 0.0f;
}

/* What an element decodes to, and its new residual. */
HP_KD float hp_k_onebit_sel(float v, float s1, float s0) { return v >= 0.0f ? s1 : s0; }
HP_KD float hp_k_onebit_bit_sel(uint32_t bit, float s1, float s0)
{
    const uint32_t m = 0u - (bit & 1u);
    return hp_u2f((hp_f2u(s1) & m) | (hp_f2u(s0) & ~m));
}

/* The checks of a block a decoder makes once it knows the block's set bits
 * (hp_comp_onebit.c onebit_decode); 1 when the scales are valid. */
HP_KD int hp_k_onebit_scales_ok(float s1, float s0, size_t npos, size_t len)
{
    return !hp_nonfinite(s1) && !hp_nonfinite(s0) && s1 >= 0.0f && s0 <= 0.0f &&
           !(npos == 0 && hp_f2u(s1) != 0) && !(npos == len && hp_f2u(s0) != 0);
}

/* Set bits of a 32-bit word. */
HP_KD uint32_t hp_k_popc(uint32_t w)
{
    w = w - ((w >> 1) & 0x55555555u);
    w = (w & 0x33333333u) + ((w >> 2) & 0x33333333u);
    return (((w + (w >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
}

/* --------------------------------------------------------------- tbq */

/* A block's threshold from its sum of |v| (hp_comp_tbq.c). */
HP_KD float hp_k_tbq_tau(double asum, size_t blen, float thr, float scale)
{
    float tau = thr;
    if (thr == 0.0f) {
        tau = (float)(asum / (double)blen) * scale;
        if (!(tau <= FLT_MAX))
            tau = FLT_MAX;
    }
    return tau;
}

HP_KD uint32_t hp_k_tbq_code(float v, float tau)
{
    return tau > 0.0f ? hp_quant_ternary(v, tau) : 1u;
}

/* New residual: v - decode; decode is 0 when tau is 0. */
HP_KD float hp_k_tbq_resid(float v, uint32_t code, float tau)
{
    return tau > 0.0f ? v - hp_dequant(code, 0.0f, -1.0f, tau) : v;
}

HP_KD float hp_k_tbq_dec(uint32_t code, float tau) { return hp_dequant(code, 0.0f, -1.0f, tau); }

/* 1 when a code is invalid for its block's tau. */
HP_KD int hp_k_tbq_code_bad(uint32_t code, float tau)
{
    return code > 2u || (tau == 0.0f && code != 1u);
}

/* ---------------------------------------------------------- terngrad */

/* Which of equal values (a -0 and a +0) the CPU's min and max keep: it
 * folds each of its 8 lanes per chunk of 2048 (lane j: elements j, j+8,
 * ...) keeping the earlier, combines the lanes in a fixed tree whose
 * compare keeps the later lane (hp_ops_minmax_finish: a < b ? a : b), and
 * the chunks in order keeping the earlier.  Each of these is associative, so
 * the CPU's choice is the first in this key's order, and any reduction tree
 * over (value, key) gives its bits: */
HP_KD uint64_t hp_k_mm_key(size_t i)
{
    size_t c = i / HP_K_CHUNK, j = i % HP_K_CHUNK;
    return (uint64_t)c * HP_K_CHUNK + (uint64_t)(7 - (j & 7)) * (HP_K_CHUNK / 8) + (uint64_t)(j >> 3);
}

/* One side of a min/max reduction: a value and its key (NaN never wins, as
 * in the CPU's compares). */
typedef struct {
    float    mn, mx;
    uint64_t kmn, kmx;
    uint32_t absmax;   /* largest |x| bits */
} hp_k_mm_t;

HP_KD void hp_k_mm_init(hp_k_mm_t *a)
{
    a->mn = INFINITY;
    a->mx = -INFINITY;
    a->kmn = a->kmx = ~(uint64_t)0;
    a->absmax = 0;
}

HP_KD void hp_k_mm_add(hp_k_mm_t *a, float v, uint64_t key)
{
    uint32_t b = hp_f2u(v) & 0x7fffffffu;
    if (v < a->mn || (v == a->mn && key < a->kmn)) {
        a->mn = v;
        a->kmn = key;
    }
    if (v > a->mx || (v == a->mx && key < a->kmx)) {
        a->mx = v;
        a->kmx = key;
    }
    a->absmax = b > a->absmax ? b : a->absmax;
}

HP_KD void hp_k_mm_merge(hp_k_mm_t *a, const hp_k_mm_t *b)
{
    if (b->mn < a->mn || (b->mn == a->mn && b->kmn < a->kmn)) {
        a->mn = b->mn;
        a->kmn = b->kmn;
    }
    if (b->mx > a->mx || (b->mx == a->mx && b->kmx < a->kmx)) {
        a->mx = b->mx;
        a->kmx = b->kmx;
    }
    a->absmax = b->absmax > a->absmax ? b->absmax : a->absmax;
}

/* A block's pair (min, gap) from its min and max (hp_comp_terngrad.c): gap
 * is (max - min) / L, or +0 when 1/gap overflows (the block then has codes
 * 0 and decodes to min).  A message whose largest |x| reaches 2^126 (or is
 * NaN or Inf) is the NaN message instead. */
HP_KD void hp_k_tg_pair(float mn, float mx, uint32_t bits, float pair[2])
{
    float levels = (float)((1u << bits) - 1u), gap = (mx - mn) / levels, inv = 1.0f / gap;
    pair[0] = mn;
    pair[1] = inv <= FLT_MAX ? gap : 0.0f;
}

/* The code of element x of a block with pair (min, gap) (the counter is
 * rng_offset + i for message element i). */
HP_KD uint32_t hp_k_tg_code(float x, const float pair[2], uint32_t bits, uint64_t key, uint64_t ctr)
{
    if (hp_f2u(pair[1]) == 0)
        return 0;
    return hp_quant_stoch(x, pair[0], 1.0f / pair[1], hp_rng_unit(key, ctr), (float)((1u << bits) - 1u));
}

/* ------------------------------------------------------- q2, q4, q8 */

/* The q codecs (src/comp/hp_comp_qbits.c) share terngrad's payload, its
 * pair (hp_k_tg_pair), its min/max keys and its decoder; they add error
 * feedback and round to nearest or stochastically.  The value a q encode
 * quantises: x + r, or x where that reaches 2^126 or is not finite (the
 * CPU's reset of such an element: its error feedback dropped); x is known
 * below 2^126 (else the message is non-finite and nothing is written). */
HP_KD float hp_k_q_v(const float *x, const float *r, size_t i)
{
    float t;
    if (r == NULL)
        return x[i];
    t = x[i] + r[i];
    return (hp_f2u(t) & 0x7fffffffu) >= HP_K_TG_LIMIT_BITS ? x[i] : t;
}

/* The code of v in a block with pair (min, gap): 0 when gap is +0; else
 * rounded to nearest, or stochastically with the q codecs' generator's u
 * of element ctr (rng_offset + i, hp_rng_q_unit), as the CPU's quant_near
 * and quant_stoch_rng_pack. */
HP_KD uint32_t hp_k_q_code(float v, const float pair[2], uint32_t bits, uint32_t stoch, uint64_t key, uint64_t ctr)
{
    const float levels = (float)((1u << bits) - 1u);
    if (hp_f2u(pair[1]) == 0)
        return 0;
    if (stoch)
        return hp_quant_stoch(v, pair[0], 1.0f / pair[1], hp_rng_q_unit(key, ctr), levels);
    return hp_quant_near(v, pair[0], 1.0f / pair[1], levels);
}

/* The new residual: v - decode (min + code * gap; min + 0 in a gap-0 block). */
HP_KD float hp_k_q_resid(float v, uint32_t code, const float pair[2])
{
    return v - hp_dequant(code, pair[0], 0.0f, pair[1]);
}

/* ------------------------------------------------------------ sparse */

/* u' = m u + g (dgc's velocity, state present) or g; v = r + u' or u'. */
HP_KD float hp_k_sparse_u(const float *g, const float *u, float m, size_t i)
{
    return u != NULL ? m * u[i] + g[i] : g[i];
}

HP_KD float hp_k_sparse_v(const float *r, float up, size_t i)
{
    return r != NULL ? r[i] + up : up;
}

HP_KD uint32_t hp_k_absbits(float f) { return hp_f2u(f) & 0x7fffffffu; }

/* The radix select of a block's k-th largest |v| bits: three digits of the
 * 31 magnitude bits, 11 + 11 + 9. */
#define HP_K_RADIX_BINS 2048
HP_KD int hp_k_radix_shift(int pass) { return pass == 0 ? 20 : pass == 1 ? 9 : 0; }
HP_KD uint32_t hp_k_radix_nbins(int pass) { return pass == 2 ? 512u : 2048u; }
HP_KD uint32_t hp_k_radix_digit(uint32_t mag, int pass)
{
    return (mag >> hp_k_radix_shift(pass)) & (hp_k_radix_nbins(pass) - 1u);
}
/* 1 when mag's digits above `pass` are those of prefix (the digits chosen
 * so far, in place). */
HP_KD int hp_k_radix_match(uint32_t mag, uint32_t prefix, int pass)
{
    int sh = pass == 0 ? 31 : hp_k_radix_shift(pass - 1);
    return sh >= 31 || (mag >> sh) == (prefix >> sh);
}

/* One pass's choice: the digit whose bin holds the kk-th largest (1-based)
 * of the elements still in play; *kk_p becomes its rank inside that bin and
 * *above_p gets how many elements lie in higher bins. */
HP_KD uint32_t hp_k_radix_pick(const uint32_t *hist, uint32_t nbins, uint32_t *kk_p, uint32_t *above_p)
{
    uint32_t above = 0, d = nbins;
    while (d > 0) {
        d--;
        if (above + hist[d] >= *kk_p)
            break;
        above += hist[d];
    }
    *kk_p -= above;
    *above_p = above;
    return d;
}

/* Whether element with magnitude mag is sent, given the threshold t (the
 * k-th largest, 0 when every non-zero element goes), and its rank among the
 * elements equal to t before it (ties to the lower index). */
HP_KD int hp_k_sparse_sel(uint32_t mag, uint32_t t, uint32_t tie_rank, uint32_t quota)
{
    return mag > t || (t > 0 && mag == t && tie_rank < quota);
}

/* A decoder's checks of pair j (idx, value bits), prev the index before. */
HP_KD int hp_k_sparse_pair_bad(uint32_t idx, uint32_t vbits, int first, uint32_t prev, size_t n)
{
    return (size_t)idx >= n || (!first && idx <= prev) ||
           (vbits & HP_K_NONFINITE_BITS) == HP_K_NONFINITE_BITS;
}

/* ------------------------------------------------------- fp16, bf16 */

/* fp16 (src/comp/hp_comp_fp16.c): per block of B elements the largest |x| bits
 * (any order: a maximum), its exponent e = hp_f16_block_exp (the message is
 * the NaN message when the largest reaches 0x7f800000), then every element
 * hp_f16_enc(x, 2^e); the decoder hp_f16_dec(h, 2^-e).  Bytes little-endian. */
HP_KD uint32_t hp_k_absmax_step(uint32_t m, float v)
{
    uint32_t a = hp_f2u(v) & 0x7fffffffu;
    return a > m ? a : m;
}

HP_KD uint16_t hp_k_ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

HP_KD void hp_k_st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* 1 when a block whose largest |h| bits are mx breaks fp16_decode's rule for
 * its exponent e (e itself was checked in [HP_F16_EMIN, HP_F16_EMAX] on the
 * host): a NaN or Inf half; all +-0 with e other than 0 or HP_F16_EMAX; or
 * no half in the top binade while e < HP_F16_EMAX. */
HP_KD int hp_k_f16_block_bad(uint32_t mx, int e)
{
    return mx >= 0x7c00u || (mx == 0 && e != 0 && e != HP_F16_EMAX) || (mx != 0 && mx < 0x7800u && e < HP_F16_EMAX);
}

/* bf16: a decoder rejects a NaN or Inf value (bf16_to_f32). */
HP_KD int hp_k_bf16_bad(uint16_t h) { return (h & 0x7fffu) >= 0x7f80u; }

/* Element i of a 16-bit gradient widened to float, or of a float result
 * narrowed back (round to nearest even, overflow to +-Inf, NaN kept):
 * the conversions around a compressed ncclAllReduce of ncclFloat16 or
 * ncclBfloat16 (hp_kl_convert). */
enum { HP_KL_CVT_F16_F32, HP_KL_CVT_BF16_F32, HP_KL_CVT_F32_F16, HP_KL_CVT_F32_BF16 };

HP_KD void hp_k_convert(void *dst, const void *src, size_t i, int how)
{
    switch (how) {
    case HP_KL_CVT_F16_F32: ((float *)dst)[i] = hp_f16_to_f32(((const uint16_t *)src)[i]); break;
    case HP_KL_CVT_BF16_F32: ((float *)dst)[i] = hp_bf16_to_f32(((const uint16_t *)src)[i]); break;
    case HP_KL_CVT_F32_F16: ((uint16_t *)dst)[i] = hp_f32_to_f16(((const float *)src)[i]); break;
    default: ((uint16_t *)dst)[i] = hp_f32_to_bf16(((const float *)src)[i]); break;
    }
}

/* ---------------------------------------------------------- powersgd */

/* The n floats as an m x c matrix, row i holding elements [i c, i c + len)
 * (hp_comp_powersgd.c: the last row may be short).  The passes follow that
 * file's summation orders, so P, Q and the result are its bits. */
HP_KD size_t hp_k_psgd_row_len(size_t n, size_t c, size_t i)
{
    size_t off = i * c;
    return off + c <= n ? c : n - off;
}

/* P[i][k] = row i of M times row k of Q^T: per column tile of T, 8 lanes
 * (lane l: elements l, l+8, ... of the tile's whole groups of 8), the rest
 * of the tile after them, the lanes combined pairwise; tiles in order. */
HP_KD float hp_k_psgd_dot(const float *row, size_t len, const float *q, size_t T)
{
    float p = 0.0f;
    for (size_t j0 = 0; j0 < len; j0 += T) {
        size_t seg = len - j0 < T ? len - j0 : T, j = 0;
        float l[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, t0 = 0.0f;
        for (; j + 8 <= seg; j += 8)
            for (int t = 0; t < 8; t++)
                l[t] += row[j0 + j + t] * q[j0 + j + t];
        for (; j < seg; j++)
            t0 += row[j0 + j] * q[j0 + j];
        p += (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) + t0;
    }
    return hp_canon(p);   /* products can overflow: Inf - Inf */
}

/* Q^T[k][j] = column j of M times column k of P: the rows in order. */
HP_KD float hp_k_psgd_col(const float *M, size_t n, size_t m, size_t c, const float *p, size_t r, size_t k,
                          size_t j)
{
    float a = 0.0f;
    for (size_t i = 0; i < m; i++)
        if (j < hp_k_psgd_row_len(n, c, i))
            a += M[i * c + j] * p[i * r + k];
    return hp_canon(a);
}

/* Element j of row prow (r coefficients) of P Q^T: the r terms in k order. */
HP_KD float hp_k_psgd_recon(const float *prow, size_t r, const float *qt, size_t c, size_t j)
{
    float v = prow[0] * qt[j];
    for (size_t k = 1; k < r; k++)
        v += prow[k] * qt[k * c + j];
    return v;
}

/* Element e of the reconstruction, in place: res[e] = buf[e] - P Ql^T
 * (res NULL: not), then buf[e] = P Qs^T, each canonical. */
HP_KD void hp_k_psgd_recon_at(float *buf, float *res, size_t e, size_t c, size_t r, const float *p, const float *qs,
                              const float *ql)
{
    const float *prow = p + (e / c) * r;
    if (res != NULL)
        res[e] = hp_canon(buf[e] - hp_k_psgd_recon(prow, r, ql, c, e % c));
    buf[e] = hp_canon(hp_k_psgd_recon(prow, r, qs, c, e % c));
}

/* ----------------------------------------------------- little-endian I/O */

#if defined(__CUDACC__)
/* In the kernels a payload's 32-bit fields are 4-byte aligned (message
 * slots and workspaces are, and every field's offset is a multiple of 4):
 * one word access each (the device is little-endian, as the wire). */
HP_KD uint32_t hp_k_ld32(const uint8_t *p) { return *(const uint32_t *)(const void *)p; }
HP_KD void hp_k_st32(uint8_t *p, uint32_t v) { *(uint32_t *)(void *)p = v; }
#elif defined(HP_SIMT)
/* The kernels on the SIMT emulator: the same word accesses, where a
 * misaligned one stops the run as it faults on the device. */
extern "C" void hp_simt_misaligned(const void *p, unsigned bytes);
HP_KD uint32_t hp_k_ld32(const uint8_t *p)
{
    uint32_t v;
    if ((uintptr_t)p & 3u)
        hp_simt_misaligned(p, 4);
    memcpy(&v, p, 4);
    return v;
}
HP_KD void hp_k_st32(uint8_t *p, uint32_t v)
{
    if ((uintptr_t)p & 3u)
        hp_simt_misaligned(p, 4);
    memcpy(p, &v, 4);
}
#else
/* The host (the codec's checks of payloads anywhere): bytes. */
HP_KD uint32_t hp_k_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

HP_KD void hp_k_st32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
#endif

/* Decoded-value store modes (HP_OUT_SET / HP_OUT_ADD of hp_ops.h): an
 * accumulating store adds into the caller's buffer, which may hold NaN
 * (a NaN message decoded there) or Inf. */
HP_KD void hp_k_store(float *out, size_t i, float v, int accumulate)
{
    if (accumulate)
        out[i] = hp_k_add(out[i], v);
    else
        out[i] = v;
}

#endif /* HP_KERN_H */
