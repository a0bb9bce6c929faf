/*
 * CompLL operators, AVX2 (+ F16C, POPCNT) kernels, x86-64 only.  Compiled
 * with the default flags: each function carries a target attribute and
 * hp_ops_get() only hands the table out when the CPU has the instructions.  Every kernel computes what
 * its generic twin in hp_ops.c computes, bit for bit: the same IEEE
 * operations in the same order (no FMA), the same lane order for
 * reductions, and the generic lane step for tails.
 * large: a kernel file, the AVX2 twin of every dense operator of hp_ops.c
 * in one place with the table it fills (powersgd's are hp_ops_lowrank.c).
 */
#include "hp_ops.h"
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c,popcnt")))

/* out[i] (op)= v for 8 lanes */
AVX2 static inline void put8(float *out, __m256 v, int mode)
{
    if (mode == HP_OUT_SET)
        _mm256_storeu_ps(out, v);
    else if (mode == HP_OUT_ADD)
        _mm256_storeu_ps(out, _mm256_add_ps(_mm256_loadu_ps(out), v));
    else
        _mm256_storeu_ps(out, _mm256_sub_ps(_mm256_loadu_ps(out), v));
}

/* 32 int32 lanes (values 0..255) in a, b, c, d -> 32 bytes in order */
AVX2 static inline __m256i pack_i32x32_u8(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i ab = _mm256_packs_epi32(a, b);   /* a0-3 b0-3 | a4-7 b4-7 */
    __m256i cd = _mm256_packs_epi32(c, d);
    __m256i r = _mm256_packus_epi16(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7 */
    return _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

AVX2 static void v_add(const float *a, const float *b, float *out, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 x0 = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        __m256 x1 = _mm256_add_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
        _mm256_storeu_ps(out + i, x0);
        _mm256_storeu_ps(out + i + 8, x1);
    }
    for (; i < n; i++)
        out[i] = a[i] + b[i];
}

AVX2 static int v_nonfinite(const float *x, size_t n)
{
    const __m256i expo = _mm256_set1_epi32(0x7f800000);
    __m256i bad = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i e = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), expo);
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, expo));
    }
    int r = !_mm256_testz_si256(bad, bad);
    for (; i < n; i++)
        r |= hp_nonfinite(x[i]);
    return r;
}

AVX2 static uint32_t v_absmax(const float *x, size_t n)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    uint32_t l[8], m;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), absm));
        m1 = _mm256_max_epu32(m1, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 8)), absm));
    }
    m = hp_ops_generic.absmax(x + i, n - i); /* an unsigned max: any order */
    _mm256_storeu_si256((__m256i *)l, _mm256_max_epu32(m0, m1));
    for (int j = 0; j < 8; j++)
        m = l[j] > m ? l[j] : m;
    return m;
}

/* One vector into the lane minima, maxima and largest |v| bits (minps and
 * maxps keep the second operand, the running value, unless the first is
 * strictly beyond it: hp_ops_minmax_step's order). */
AVX2 static inline __attribute__((always_inline)) void minmax8(__m256 v, __m256 *mn, __m256 *mx, __m256i *am)
{
    *mn = _mm256_min_ps(v, *mn);
    *mx = _mm256_max_ps(v, *mx);
    *am = _mm256_max_epu32(*am, _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff)));
}

/* Four vectors (32 elements, lane j holding elements j, j+8, j+16, j+24)
 * into the lane minima, maxima and largest |v| bits.  A tree, so the chain
 * on mn and mx is one min and one max per 32 elements instead of four (the
 * loop was bound by that latency): each min keeps its first operand's
 * earlier elements on a tie (minps: b unless a < b), so every lane ends on
 * the first occurrence of its smallest value, as minmax8 and
 * hp_ops_minmax_step do; a zero's sign is kept.  With a NaN the min and max
 * may differ from the sequential form, but the absmax bits flag it and no
 * caller uses them then. */
AVX2 static inline __attribute__((always_inline)) void minmax32(__m256 v0, __m256 v1, __m256 v2, __m256 v3,
                                                                __m256 *mn, __m256 *mx, __m256i *am)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    const __m256 n01 = _mm256_min_ps(v1, v0), n23 = _mm256_min_ps(v3, v2);
    const __m256 x01 = _mm256_max_ps(v1, v0), x23 = _mm256_max_ps(v3, v2);
    const __m256i a01 = _mm256_max_epu32(_mm256_and_si256(_mm256_castps_si256(v0), absm),
                                         _mm256_and_si256(_mm256_castps_si256(v1), absm));
    const __m256i a23 = _mm256_max_epu32(_mm256_and_si256(_mm256_castps_si256(v2), absm),
                                         _mm256_and_si256(_mm256_castps_si256(v3), absm));
    *mn = _mm256_min_ps(_mm256_min_ps(n23, n01), *mn);
    *mx = _mm256_max_ps(_mm256_max_ps(x23, x01), *mx);
    *am = _mm256_max_epu32(*am, _mm256_max_epu32(a01, a23));
}

AVX2 static void v_minmax(const float *x, size_t n, float *min_p, float *max_p,
                          uint32_t *absmax_bits_p)
{
    hp_minmax_lanes_t l;
    size_t n8 = n & ~(size_t)7;
    hp_ops_minmax_init(&l);
    if (n8) {
        __m256 mn = _mm256_loadu_ps(l.mn), mx = _mm256_loadu_ps(l.mx);
        __m256i am = _mm256_setzero_si256();
        size_t i = 0;
        for (; i + 32 <= n8; i += 32)
            minmax32(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(x + i + 16),
                     _mm256_loadu_ps(x + i + 24), &mn, &mx, &am);
        for (; i < n8; i += 8)
            minmax8(_mm256_loadu_ps(x + i), &mn, &mx, &am);
        _mm256_storeu_ps(l.mn, mn);
        _mm256_storeu_ps(l.mx, mx);
        _mm256_storeu_si256((__m256i *)l.am, am);
    }
    hp_ops_minmax_step(x + n8, n - n8, &l);
    hp_ops_minmax_finish(&l, min_p, max_p, absmax_bits_p);
}

AVX2 static void v_minmax_add(const float *x, const float *r, size_t n, float *vout, float *min_p,
                              float *max_p, uint32_t *absmax_bits_p)
{
    hp_minmax_lanes_t l;
    size_t n8 = n & ~(size_t)7;
    float t[8];
    if (r == NULL && vout == NULL) {
        v_minmax(x, n, min_p, max_p, absmax_bits_p);
        return;
    }
    hp_ops_minmax_init(&l);
    if (n8) {
        __m256 mn = _mm256_loadu_ps(l.mn), mx = _mm256_loadu_ps(l.mx);
        __m256i am = _mm256_setzero_si256();
        size_t i = 0;
        for (; i + 32 <= n8; i += 32) {
            __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
            __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
            if (r) {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(r + i));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(r + i + 8));
                v2 = _mm256_add_ps(v2, _mm256_loadu_ps(r + i + 16));
                v3 = _mm256_add_ps(v3, _mm256_loadu_ps(r + i + 24));
            }
            if (vout) {
                _mm256_storeu_ps(vout + i, v0);
                _mm256_storeu_ps(vout + i + 8, v1);
                _mm256_storeu_ps(vout + i + 16, v2);
                _mm256_storeu_ps(vout + i + 24, v3);
            }
            minmax32(v0, v1, v2, v3, &mn, &mx, &am);
        }
        for (; i < n8; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            if (r)
                v = _mm256_add_ps(v, _mm256_loadu_ps(r + i));
            if (vout)
                _mm256_storeu_ps(vout + i, v);
            minmax8(v, &mn, &mx, &am);
        }
        _mm256_storeu_ps(l.mn, mn);
        _mm256_storeu_ps(l.mx, mx);
        _mm256_storeu_si256((__m256i *)l.am, am);
    }
    for (size_t i = n8; i < n; i++) {
        t[i - n8] = r ? x[i] + r[i] : x[i];
        if (vout)
            vout[i] = t[i - n8];
    }
    hp_ops_minmax_step(t, n - n8, &l);
    hp_ops_minmax_finish(&l, min_p, max_p, absmax_bits_p);
}

/* v = x + r (or x) for 8 lanes, stored to vout when asked; has_r/has_v
 * are constants in each instantiation, so the branches fold away */
#define INLINE __attribute__((always_inline)) inline
AVX2 static INLINE __m256 load_v8(const float *x, const float *r, float *vout, size_t i,
                                  int has_r, int has_v)
{
    __m256 v = _mm256_loadu_ps(x + i);
    if (has_r)
        v = _mm256_add_ps(v, _mm256_loadu_ps(r + i));
    if (has_v)
        _mm256_storeu_ps(vout + i, v);
    return v;
}

/* the (r, vout) combinations of a fused kernel: r and vout both given,
 * r alone, vout alone, neither */
#define DISPATCH_RV(body, ...) \
    do { \
        if (r && vout) body(__VA_ARGS__, 1, 1); \
        else if (r) body(__VA_ARGS__, 1, 0); \
        else if (vout) body(__VA_ARGS__, 0, 1); \
        else body(__VA_ARGS__, 0, 0); \
    } while (0)

AVX2 static INLINE void abs_sum_body(const float *x, const float *r, float *vout, size_t n32,
                                     float lanes[32], int has_r, int has_v)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n32; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_and_ps(load_v8(x, r, vout, i, has_r, has_v), absm));
        s1 = _mm256_add_ps(s1, _mm256_and_ps(load_v8(x, r, vout, i + 8, has_r, has_v), absm));
        s2 = _mm256_add_ps(s2, _mm256_and_ps(load_v8(x, r, vout, i + 16, has_r, has_v), absm));
        s3 = _mm256_add_ps(s3, _mm256_and_ps(load_v8(x, r, vout, i + 24, has_r, has_v), absm));
    }
    _mm256_storeu_ps(lanes, s0);
    _mm256_storeu_ps(lanes + 8, s1);
    _mm256_storeu_ps(lanes + 16, s2);
    _mm256_storeu_ps(lanes + 24, s3);
}

AVX2 static double v_abs_sum(const float *x, const float *r, size_t n, float *vout)
{
    float lanes[32];
    size_t n32 = n & ~(size_t)31;
    DISPATCH_RV(abs_sum_body, x, r, vout, n32, lanes);
    hp_ops_abs_sum_step(x + n32, r ? r + n32 : NULL, n - n32, vout ? vout + n32 : NULL, lanes);
    return hp_ops_abs_sum_finish(lanes, x, r, n, vout);
}

/* 8 lanes of onebit's reduction: class mask, sums, 8 bits */
#define SIGN8(k) \
    do { \
        __m256 v = load_v8(x, r, vout, i + 8 * (k), has_r, has_v); \
        __m256 m = _mm256_cmp_ps(v, zero, _CMP_GE_OQ); \
        p##k = _mm256_add_ps(p##k, _mm256_and_ps(m, v)); \
        q##k = _mm256_add_ps(q##k, _mm256_andnot_ps(m, v)); \
        w |= (uint32_t)_mm256_movemask_ps(m) << (8 * (k)); \
    } while (0)

AVX2 static INLINE size_t sign_sum_body(const float *x, const float *r, float *vout, size_t n32,
                                        float pos[32], float neg[32], uint8_t *bits,
                                        int has_r, int has_v)
{
    const __m256 zero = _mm256_setzero_ps();
    __m256 p0 = zero, p1 = zero, p2 = zero, p3 = zero, q0 = zero, q1 = zero, q2 = zero, q3 = zero;
    size_t npos = 0;
    for (size_t i = 0; i < n32; i += 32) {
        uint32_t w = 0;
        SIGN8(0);
        SIGN8(1);
        SIGN8(2);
        SIGN8(3);
        npos += (size_t)__builtin_popcount(w);
        if (bits)
            memcpy(bits + i / 8, &w, 4);
    }
    _mm256_storeu_ps(pos, p0);
    _mm256_storeu_ps(pos + 8, p1);
    _mm256_storeu_ps(pos + 16, p2);
    _mm256_storeu_ps(pos + 24, p3);
    _mm256_storeu_ps(neg, q0);
    _mm256_storeu_ps(neg + 8, q1);
    _mm256_storeu_ps(neg + 16, q2);
    _mm256_storeu_ps(neg + 24, q3);
    return npos;
}

AVX2 static size_t v_sign_sum(const float *x, const float *r, size_t n, float *vout, double *pos_p,
                              double *neg_p, uint8_t *bits)
{
    float pos[32], neg[32];
    size_t n32 = n & ~(size_t)31, npos = 0;
    DISPATCH_RV(npos = sign_sum_body, x, r, vout, n32, pos, neg, bits);
    npos += hp_ops_sign_sum_step(x + n32, r ? r + n32 : NULL, n - n32, vout ? vout + n32 : NULL, pos,
                                 neg, bits ? bits + (n32 >> 3) : NULL);
    hp_ops_sign_sum_finish(pos, neg, x, r, n, vout, pos_p, neg_p);
    return npos;
}

AVX2 static void v_pack_sign(const float *x, size_t n, uint8_t *bits)
{
    const __m256 zero = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint32_t w = (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), zero, _CMP_GE_OQ));
        w |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), zero, _CMP_GE_OQ)) << 8;
        w |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + 16), zero, _CMP_GE_OQ)) << 16;
        w |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + 24), zero, _CMP_GE_OQ)) << 24;
        memcpy(bits + (i >> 3), &w, 4);
    }
    hp_ops_generic.pack_sign(x + i, n - i, bits + (i >> 3));
}

/* 8 lanes of all-ones where bit j of byte b is set */
AVX2 static inline __m256 bits8_mask(unsigned b)
{
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i t = _mm256_and_si256(_mm256_set1_epi32((int)b), sel);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(t, sel));
}

AVX2 static void v_select1(const uint8_t *bits, size_t n, float s1, float s0, float *out, int mode)
{
    const __m256 v1 = _mm256_set1_ps(s1), v0 = _mm256_set1_ps(s0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        put8(out + i, _mm256_blendv_ps(v0, v1, bits8_mask(bits[i >> 3])), mode);
    if (i < n)
        hp_ops_generic.select1(bits + (i >> 3), n - i, s1, s0, out + i, mode);
}

AVX2 static inline __m256i ternary8(__m256 v, __m256 tau, __m256 ntau)
{
    __m256i ge = _mm256_castps_si256(_mm256_cmp_ps(v, tau, _CMP_GE_OQ));
    __m256i le = _mm256_castps_si256(_mm256_cmp_ps(v, ntau, _CMP_LE_OQ));
    /* masks are -1/0: 1 - ge + le */
    return _mm256_add_epi32(_mm256_sub_epi32(_mm256_set1_epi32(1), ge), le);
}

/* 8 lanes of tbq: codes, and the new residual v - (code - 1) * tau */
#define TERN8(k) \
    __m256 v##k = load_v8(x, r, NULL, i + 8 * (k), has_r, 0); \
    __m256i c##k = ternary8(v##k, t, nt); \
    if (has_out) \
        _mm256_storeu_ps(rout + i + 8 * (k), _mm256_sub_ps(v##k, _mm256_add_ps(zero, \
            _mm256_mul_ps(_mm256_add_ps(_mm256_cvtepi32_ps(c##k), mone), t))));

AVX2 static INLINE void ternary_body(const float *x, const float *r, size_t n32, float tau,
                                     uint8_t *codes, float *rout, int has_r, int has_out)
{
    const __m256 t = _mm256_set1_ps(tau), nt = _mm256_set1_ps(-tau);
    const __m256 zero = _mm256_setzero_ps(), mone = _mm256_set1_ps(-1.0f);
    for (size_t i = 0; i < n32; i += 32) {
        TERN8(0)
        TERN8(1)
        TERN8(2)
        TERN8(3)
        _mm256_storeu_si256((__m256i *)(codes + i), pack_i32x32_u8(c0, c1, c2, c3));
    }
}

AVX2 static void v_quant_ternary(const float *x, const float *r, size_t n, float tau,
                                 uint8_t *codes, float *rout)
{
    size_t n32 = n & ~(size_t)31;
    if (r && rout)
        ternary_body(x, r, n32, tau, codes, rout, 1, 1);
    else if (r)
        ternary_body(x, r, n32, tau, codes, rout, 1, 0);
    else if (rout)
        ternary_body(x, r, n32, tau, codes, rout, 0, 1);
    else
        ternary_body(x, r, n32, tau, codes, rout, 0, 0);
    hp_ops_generic.quant_ternary(x + n32, r ? r + n32 : NULL, n - n32, tau, codes + n32,
                                 rout ? rout + n32 : NULL);
}

AVX2 static inline __m256i stoch8(__m256 v, __m256 u, __m256 lo, __m256 inv, __m256 levels)
{
    __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(v, lo), inv), u);
    t = _mm256_round_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    t = _mm256_max_ps(t, _mm256_setzero_ps()); /* t > 0 ? t : 0 */
    t = _mm256_min_ps(t, levels);              /* t < levels ? t : levels */
    return _mm256_cvttps_epi32(t);
}

AVX2 static void v_quant_stoch(const float *x, const float *u, size_t n, float lo, float inv_gap,
                               float levels, uint8_t *codes)
{
    const __m256 l = _mm256_set1_ps(lo), g = _mm256_set1_ps(inv_gap), lv = _mm256_set1_ps(levels);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i r = pack_i32x32_u8(
            stoch8(_mm256_loadu_ps(x + i), _mm256_loadu_ps(u + i), l, g, lv),
            stoch8(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(u + i + 8), l, g, lv),
            stoch8(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(u + i + 16), l, g, lv),
            stoch8(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(u + i + 24), l, g, lv));
        _mm256_storeu_si256((__m256i *)(codes + i), r);
    }
    hp_ops_generic.quant_stoch(x + i, u + i, n - i, lo, inv_gap, levels, codes + i);
}

/* Counter RNG (hp_rng_u32, hp_rng_unit) for 8 consecutive counters at a
 * time.  The pre-mix values z = k + C*(counter+1) of counters c..c+7 sit in
 * two vectors of 4 64-bit lanes, a = (c, c+1, c+4, c+5) and
 * b = (c+2, c+3, c+6, c+7): then a float shuffle of a and b takes the low
 * (or high) halves of all 8 in counter order. */
#define GOLDEN 0x9E3779B97F4A7C15ULL

typedef struct {
    __m256i a, b;
} rng_z8_t;

AVX2 static INLINE rng_z8_t rng_z8(uint64_t k, uint64_t counter0)
{
    const uint64_t z = k + GOLDEN * (counter0 + 1);
    rng_z8_t r;
    r.a = _mm256_setr_epi64x((long long)z, (long long)(z + GOLDEN), (long long)(z + 4 * GOLDEN),
                             (long long)(z + 5 * GOLDEN));
    r.b = _mm256_add_epi64(r.a, _mm256_set1_epi64x((long long)(2 * GOLDEN)));
    return r;
}

/* the same 8 lanes, counters advanced by 8 */
AVX2 static INLINE rng_z8_t rng_z8_next(rng_z8_t z)
{
    const __m256i step = _mm256_set1_epi64x((long long)(8 * GOLDEN));
    z.a = _mm256_add_epi64(z.a, step);
    z.b = _mm256_add_epi64(z.b, step);
    return z;
}

/* z * m mod 2^64 on 4 lanes, m = (mh << 32) | ml; mswap holds (mh, ml) in
 * the (low, high) 32-bit halves of each lane */
AVX2 static INLINE __m256i mul64c(__m256i z, __m256i ml, __m256i mswap)
{
    __m256i t = _mm256_mullo_epi32(z, mswap);                 /* zl*mh | zh*ml */
    __m256i cross = _mm256_add_epi32(t, _mm256_slli_epi64(t, 32)); /* high half: zh*ml + zl*mh */
    cross = _mm256_blend_epi32(_mm256_setzero_si256(), cross, 0xAA);
    return _mm256_add_epi64(_mm256_mul_epu32(z, ml), cross);
}

#define SHUF_LO(a, b) _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0x88))
#define SHUF_HI(a, b) _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0xDD))

/* hp_rng_u32 of the 8 counters of z (full = 1), or without the last step
 * of hp_mix64 (full = 0: z ^= z >> 31 changes bit 0 of the high half only,
 * and hp_rng_unit keeps bits 8..31), in counter order.  hp_mix64's first
 * product is needed whole (4 lanes at a time); of the second only the high
 * 32 bits, hi(wl*ml) + wl*mh + wh*ml mod 2^32, taken for all 8 lanes at
 * once from the halves in counter order. */
AVX2 static INLINE __m256i rng8(rng_z8_t z, int full)
{
    const __m256i m1l = _mm256_set1_epi64x(0x1ce4e5b9), m1s = _mm256_set1_epi64x(0x1ce4e5b9bf58476dLL);
    const __m256i m2l = _mm256_set1_epi64x(0x133111eb);
    const __m256i m2l32 = _mm256_set1_epi32(0x133111eb), m2h32 = _mm256_set1_epi32((int)0x94d049bbu);
    __m256i a = mul64c(_mm256_xor_si256(z.a, _mm256_srli_epi64(z.a, 30)), m1l, m1s);
    __m256i b = mul64c(_mm256_xor_si256(z.b, _mm256_srli_epi64(z.b, 30)), m1l, m1s);
    a = _mm256_xor_si256(a, _mm256_srli_epi64(a, 27));
    b = _mm256_xor_si256(b, _mm256_srli_epi64(b, 27));
    __m256i hi = SHUF_HI(_mm256_mul_epu32(a, m2l), _mm256_mul_epu32(b, m2l)); /* hi(wl*ml) */
    __m256i cross = _mm256_add_epi32(_mm256_mullo_epi32(SHUF_LO(a, b), m2h32),  /* wl*mh */
                                     _mm256_mullo_epi32(SHUF_HI(a, b), m2l32)); /* wh*ml */
    __m256i r = _mm256_add_epi32(hi, cross);
    if (full)
        r = _mm256_xor_si256(r, _mm256_srli_epi32(r, 31));
    return r;
}

/* hp_rng_unit of the 8 counters of z */
AVX2 static INLINE __m256 rng8_unit(rng_z8_t z)
{
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(rng8(z, 0), 8)), _mm256_set1_ps(1.0f / 16777216.0f));
}

AVX2 static void v_rng_u32(uint64_t k, uint64_t counter0, size_t n, uint32_t *out)
{
    rng_z8_t z = rng_z8(k, counter0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_si256((__m256i *)(out + i), rng8(z, 1));
        z = rng_z8_next(z);
    }
    hp_ops_generic.rng_u32(k, counter0 + i, n - i, out + i);
}

AVX2 static void v_rng_unit(uint64_t k, uint64_t counter0, size_t n, float *out)
{
    rng_z8_t z = rng_z8(k, counter0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(out + i, rng8_unit(z));
        z = rng_z8_next(z);
    }
    hp_ops_generic.rng_unit(k, counter0 + i, n - i, out + i);
}

/* The q codecs' generator (hp_rng_q_hash, hp_rng_q_unit_k) for 8
 * consecutive counters of one page: w holds the Weyl terms (c + ka) *
 * 0x9e3779b9 of counters c..c+7 (advanced by adding 8 steps), kb the page
 * key's high half; two vpmulld per 8 elements. */
#define RNGQ_G 0x9e3779b9u

AVX2 static INLINE __m256i rngq_w8(uint64_t kp, uint64_t counter0)
{
    const uint32_t w = ((uint32_t)counter0 + (uint32_t)kp) * RNGQ_G;
    return _mm256_setr_epi32((int)w, (int)(w + RNGQ_G), (int)(w + 2 * RNGQ_G), (int)(w + 3 * RNGQ_G),
                             (int)(w + 4 * RNGQ_G), (int)(w + 5 * RNGQ_G), (int)(w + 6 * RNGQ_G),
                             (int)(w + 7 * RNGQ_G));
}

AVX2 static INLINE __m256i rngq_next(__m256i w)
{
    return _mm256_add_epi32(w, _mm256_set1_epi32((int)(8 * RNGQ_G)));
}

AVX2 static INLINE __m256 rngq8_unit(__m256i w, __m256i kb)
{
    __m256i x = _mm256_xor_si256(w, kb);
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x846ca68bu));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(x, 8)), _mm256_set1_ps(1.0f / 16777216.0f));
}

/* 1 when counters counter0 .. counter0 + n - 1 span two pages (the vector
 * loops keep one page key; such a call, one in 2^32 elements at most, takes
 * the generic path) */
static INLINE int rngq_crosses(uint64_t counter0, size_t n)
{
    return n > 0 && (counter0 >> 32) != ((counter0 + n - 1) >> 32);
}

AVX2 static void v_rng_q_unit(uint64_t k, uint64_t counter0, size_t n, float *out)
{
    size_t i = 0;
    if (!rngq_crosses(counter0, n)) {
        const uint64_t kp = hp_rng_q_key(k, counter0);
        const __m256i kb = _mm256_set1_epi32((int)(uint32_t)(kp >> 32));
        __m256i w = rngq_w8(kp, counter0);
        for (; i + 8 <= n; i += 8) {
            _mm256_storeu_ps(out + i, rngq8_unit(w, kb));
            w = rngq_next(w);
        }
    }
    hp_ops_generic.rng_q_unit(k, counter0 + i, n - i, out + i);
}

/* 32 codes (one a byte, each < 2^bits) packed as v_pack packs them: 32, 16
 * or 8 bytes at out */
AVX2 static INLINE void pack32(__m256i w, unsigned bits, uint8_t *out)
{
    if (bits == 8) {
        _mm256_storeu_si256((__m256i *)out, w);
    } else if (bits == 4) {
        const __m256i lo = _mm256_set1_epi16(0x000f), hi = _mm256_set1_epi16(0x00f0);
        __m256i t = _mm256_or_si256(_mm256_and_si256(w, lo), _mm256_and_si256(_mm256_srli_epi16(w, 4), hi));
        _mm_storeu_si128((__m128i *)out, _mm_packus_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1)));
    } else {
        const __m256i m1 = _mm256_set1_epi16(0x0401), m2 = _mm256_set1_epi32(0x00100001);
        __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(w, m1), m2);
        __m128i r = _mm_packus_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        _mm_storel_epi64((__m128i *)out, _mm_packus_epi16(r, r));
    }
}

/* Where the q codecs' rounding offset u comes from: 1/2 (round to nearest,
 * hp_quant_near), an array (hp_quant_stoch with the caller's u), or the
 * q codecs' generator drawn in the same pass (u_i = hp_rng_q_unit(k,
 * counter0 + i), with kp = hp_rng_q_key(k, counter0) one page key). */
enum { Q_NEAR, Q_U, Q_RNG };

/* One level: t = clamp(floor((v - lo) * inv_gap + u), 0, levels), an
 * integer as a float (so (float)code + 0 is t itself and the residual
 * v - (lo + t * gap) of hp_dequant needs no conversion back); the code is
 * its conversion.  Same operations and operand order as hp_quant_stoch. */
#define Q8(k, U)                                                                                       \
    __m256 v##k = _mm256_loadu_ps(x + i + 8 * (k));                                                    \
    __m256 t##k = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(v##k, l), g), (U));                        \
    t##k = _mm256_min_ps(_mm256_max_ps(_mm256_round_ps(t##k, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), \
                                       zero), lv);                                                     \
    __m256i c##k = _mm256_cvttps_epi32(t##k);
#define Q_R(k) \
    _mm256_storeu_ps(rout + i + 8 * (k), _mm256_sub_ps(v##k, _mm256_add_ps(l, _mm256_mul_ps(t##k, step))))

/* The q codecs' quantise loop, 32 elements at a time: codes stored a byte
 * each (bits 0) or packed as v_pack packs them (bits 2, 4, 8), the new
 * residual with has_out; src, bits and has_out are constants in each
 * instantiation, so one body serves nearest and stochastic rounding. */
AVX2 static INLINE void q_body(const float *x, const float *u, uint64_t kp, uint64_t counter0, size_t n32,
                               float lo, float inv_gap, float gap, float levels, unsigned bits, uint8_t *out,
                               float *rout, int has_out, int src)
{
    const __m256 l = _mm256_set1_ps(lo), g = _mm256_set1_ps(inv_gap), lv = _mm256_set1_ps(levels);
    const __m256 half = _mm256_set1_ps(0.5f), step = _mm256_set1_ps(gap), zero = _mm256_setzero_ps();
    const __m256i kb = _mm256_set1_epi32((int)(uint32_t)(kp >> 32));
    __m256i w = rngq_w8(kp, counter0);
    for (size_t i = 0; i < n32; i += 32) {
        __m256 u0 = half, u1 = half, u2 = half, u3 = half;
        if (src == Q_U) {
            u0 = _mm256_loadu_ps(u + i);
            u1 = _mm256_loadu_ps(u + i + 8);
            u2 = _mm256_loadu_ps(u + i + 16);
            u3 = _mm256_loadu_ps(u + i + 24);
        } else if (src == Q_RNG) {
            u0 = rngq8_unit(w, kb);
            w = rngq_next(w);
            u1 = rngq8_unit(w, kb);
            w = rngq_next(w);
            u2 = rngq8_unit(w, kb);
            w = rngq_next(w);
            u3 = rngq8_unit(w, kb);
            w = rngq_next(w);
        }
        Q8(0, u0)
        Q8(1, u1)
        Q8(2, u2)
        Q8(3, u3)
        if (bits == 0)
            _mm256_storeu_si256((__m256i *)(out + i), pack_i32x32_u8(c0, c1, c2, c3));
        else
            pack32(pack_i32x32_u8(c0, c1, c2, c3), bits, out + i * bits / 8);
        if (has_out) {
            Q_R(0);
            Q_R(1);
            Q_R(2);
            Q_R(3);
        }
    }
}
#undef Q8
#undef Q_R

/* q_body for bits 2, 4 or 8 (packed), with or without the residual: the
 * n32 elements it covers (0 for other widths, left to the caller) */
AVX2 static INLINE size_t q_pack(const float *x, const float *u, uint64_t kp, uint64_t counter0, size_t n,
                                 float lo, float inv_gap, float gap, float levels, unsigned bits,
                                 uint8_t *packed, float *rout, int src)
{
    const size_t n32 = n & ~(size_t)31;
#define QP(B_)                                                                                    \
    if (bits == (B_)) {                                                                           \
        if (rout)                                                                                 \
            q_body(x, u, kp, counter0, n32, lo, inv_gap, gap, levels, (B_), packed, rout, 1, src);  \
        else                                                                                      \
            q_body(x, u, kp, counter0, n32, lo, inv_gap, gap, levels, (B_), packed, rout, 0, src);  \
        return n32;                                                                               \
    }
    QP(2)
    QP(4)
    QP(8)
#undef QP
    return 0;
}

AVX2 static void v_quant_near_pack(const float *x, size_t n, float lo, float inv_gap, float gap, float levels,
                                   unsigned bits, uint8_t *packed, float *rout)
{
    size_t d = q_pack(x, NULL, 0, 0, n, lo, inv_gap, gap, levels, bits, packed, rout, Q_NEAR);
    hp_ops_generic.quant_near_pack(x + d, n - d, lo, inv_gap, gap, levels, bits, packed + d * bits / 8,
                                   rout ? rout + d : NULL);
}

AVX2 static void v_quant_stoch_pack(const float *x, const float *u, size_t n, float lo, float inv_gap, float gap,
                                    float levels, unsigned bits, uint8_t *packed, float *rout)
{
    size_t d = q_pack(x, u, 0, 0, n, lo, inv_gap, gap, levels, bits, packed, rout, Q_U);
    hp_ops_generic.quant_stoch_pack(x + d, u + d, n - d, lo, inv_gap, gap, levels, bits, packed + d * bits / 8,
                                    rout ? rout + d : NULL);
}

AVX2 static void v_quant_stoch_rng_pack(const float *x, uint64_t key, uint64_t counter0, size_t n, float lo,
                                        float inv_gap, float gap, float levels, unsigned bits, uint8_t *packed,
                                        float *rout)
{
    size_t d = rngq_crosses(counter0, n) ? 0
               : q_pack(x, NULL, hp_rng_q_key(key, counter0), counter0, n, lo, inv_gap, gap, levels, bits,
                        packed, rout, Q_RNG);
    hp_ops_generic.quant_stoch_rng_pack(x + d, key, counter0 + d, n - d, lo, inv_gap, gap, levels, bits,
                                        packed + d * bits / 8, rout ? rout + d : NULL);
}

AVX2 static void v_quant_near(const float *x, size_t n, float lo, float inv_gap, float gap,
                              float levels, uint8_t *codes, float *rout)
{
    size_t n32 = n & ~(size_t)31;
    if (rout)
        q_body(x, NULL, 0, 0, n32, lo, inv_gap, gap, levels, 0, codes, rout, 1, Q_NEAR);
    else
        q_body(x, NULL, 0, 0, n32, lo, inv_gap, gap, levels, 0, codes, rout, 0, Q_NEAR);
    hp_ops_generic.quant_near(x + n32, n - n32, lo, inv_gap, gap, levels, codes + n32,
                              rout ? rout + n32 : NULL);
}

AVX2 static void v_dequant(const uint8_t *codes, size_t n, float base, float cbias, float step,
                           float *out, int mode)
{
    const __m256 b = _mm256_set1_ps(base), cb = _mm256_set1_ps(cbias), s = _mm256_set1_ps(step);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, codes + i, 8);
        __m256 c = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)w)));
        put8(out + i, _mm256_add_ps(b, _mm256_mul_ps(_mm256_add_ps(c, cb), s)), mode);
    }
    hp_ops_generic.dequant(codes + i, n - i, base, cbias, step, out + i, mode);
}

AVX2 static void v_pack(const uint8_t *codes, size_t n, unsigned bits, uint8_t *packed)
{
    size_t i = 0;
    if (bits == 8) {
        memcpy(packed, codes, n);
        return;
    }
    if (bits == 4) {
        const __m256i lo = _mm256_set1_epi16(0x000f), hi = _mm256_set1_epi16(0x00f0);
        for (; i + 32 <= n; i += 32) {
            __m256i w = _mm256_loadu_si256((const __m256i *)(codes + i));
            __m256i t = _mm256_or_si256(_mm256_and_si256(w, lo),
                                        _mm256_and_si256(_mm256_srli_epi16(w, 4), hi));
            __m128i r = _mm_packus_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
            _mm_storeu_si128((__m128i *)(packed + i / 2), r);
        }
    } else if (bits == 2) {
        const __m256i m1 = _mm256_set1_epi16(0x0401), m2 = _mm256_set1_epi32(0x00100001);
        for (; i + 32 <= n; i += 32) {
            __m256i w = _mm256_loadu_si256((const __m256i *)(codes + i));
            __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(w, m1), m2);
            __m128i r = _mm_packus_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
            r = _mm_packus_epi16(r, r);
            _mm_storel_epi64((__m128i *)(packed + i / 4), r);
        }
    } else if (bits == 1) {
        for (; i + 32 <= n; i += 32) {
            __m256i w = _mm256_loadu_si256((const __m256i *)(codes + i));
            uint32_t m = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(w, 7));
            memcpy(packed + i / 8, &m, 4);
        }
    }
    hp_ops_generic.pack(codes + i, n - i, bits, packed + i * bits / 8);
}

AVX2 static unsigned v_unpack(const uint8_t *packed, size_t n, unsigned bits, uint8_t *codes,
                              uint8_t *min_p, uint8_t *max_p)
{
    __m256i mn = _mm256_set1_epi8(-1), mx = _mm256_setzero_si256();
    size_t i = 0;
    uint8_t tmn, tmx, l[32];
    unsigned pad;
    if (bits == 8) {
        for (; i + 32 <= n; i += 32) {
            __m256i c = _mm256_loadu_si256((const __m256i *)(packed + i));
            _mm256_storeu_si256((__m256i *)(codes + i), c);
            mn = _mm256_min_epu8(mn, c);
            mx = _mm256_max_epu8(mx, c);
        }
    } else if (bits == 4) {
        const __m256i m = _mm256_set1_epi8(0x0f);
        for (; i + 32 <= n; i += 32) {
            __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(packed + i / 2)));
            __m256i c = _mm256_and_si256(_mm256_or_si256(b, _mm256_slli_epi16(b, 4)), m);
            _mm256_storeu_si256((__m256i *)(codes + i), c);
            mn = _mm256_min_epu8(mn, c);
            mx = _mm256_max_epu8(mx, c);
        }
    } else if (bits == 2) {
        const __m256i m = _mm256_set1_epi8(0x03);
        for (; i + 32 <= n; i += 32) {
            uint64_t w;
            memcpy(&w, packed + i / 4, 8);
            __m256i b = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)w));
            __m256i c = _mm256_or_si256(_mm256_or_si256(b, _mm256_slli_epi32(b, 6)),
                                        _mm256_or_si256(_mm256_slli_epi32(b, 12), _mm256_slli_epi32(b, 18)));
            c = _mm256_and_si256(c, m);
            _mm256_storeu_si256((__m256i *)(codes + i), c);
            mn = _mm256_min_epu8(mn, c);
            mx = _mm256_max_epu8(mx, c);
        }
    } else if (bits == 1) {
        const __m256i rep = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                             2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
        const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
        const __m256i one = _mm256_set1_epi8(1);
        for (; i + 32 <= n; i += 32) {
            uint32_t w;
            memcpy(&w, packed + i / 8, 4);
            /* shuffle_epi8 works per 128-bit lane: bytes 0..3 of w in both lanes */
            __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w), rep);
            __m256i c = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel), one);
            _mm256_storeu_si256((__m256i *)(codes + i), c);
            mn = _mm256_min_epu8(mn, c);
            mx = _mm256_max_epu8(mx, c);
        }
    }
    pad = hp_ops_generic.unpack(packed + i * bits / 8, n - i, bits, codes + i, &tmn, &tmx);
    if (i > 0) {
        uint8_t vmn = 0xff, vmx = 0;
        _mm256_storeu_si256((__m256i *)l, mn);
        for (int j = 0; j < 32; j++)
            vmn = l[j] < vmn ? l[j] : vmn;
        _mm256_storeu_si256((__m256i *)l, mx);
        for (int j = 0; j < 32; j++)
            vmx = l[j] > vmx ? l[j] : vmx;
        if (i < n) { /* fold in the tail */
            vmn = tmn < vmn ? tmn : vmn;
            vmx = tmx > vmx ? tmx : vmx;
        }
        tmn = vmn;
        tmx = vmx;
    }
    *min_p = tmn;
    *max_p = tmx;
    return pad;
}

/* 16 halves from 16 floats times scale: hp_f16_enc (F16C rounds as
 * hp_f32_to_f16; +-Inf, 0x7c00 / 0xfc00, then saturates by subtracting 1) */
AVX2 static inline __m256i f16x16(const float *x, __m256 s)
{
    const __m256i absm = _mm256_set1_epi16(0x7fff), inf = _mm256_set1_epi16(0x7c00);
    __m128i a = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x), s), _MM_FROUND_TO_NEAREST_INT);
    __m128i b = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + 8), s), _MM_FROUND_TO_NEAREST_INT);
    __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
    return _mm256_add_epi16(h, _mm256_cmpeq_epi16(_mm256_and_si256(h, absm), inf));
}

AVX2 static void v_f32_to_f16(const float *x, size_t n, float scale, uint8_t *out)
{
    const __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm256_storeu_si256((__m256i *)(out + 2 * i), f16x16(x + i, s));
        _mm256_storeu_si256((__m256i *)(out + 2 * i + 32), f16x16(x + i + 16, s));
    }
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(out + 2 * i), f16x16(x + i, s));
    hp_ops_generic.f32_to_f16(x + i, n - i, scale, out + 2 * i);
}

AVX2 static unsigned v_f16_to_f32(const uint8_t *in, size_t n, float scale, float *out, int mode)
{
    const __m256i absm = _mm256_set1_epi16(0x7fff);
    const __m256 s = _mm256_set1_ps(scale);
    __m256i mx = _mm256_setzero_si256();
    uint16_t l[16];
    unsigned m;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(in + 2 * i));
        mx = _mm256_max_epu16(mx, _mm256_and_si256(h, absm));
        put8(out + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s), mode);
        put8(out + i + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s), mode);
    }
    m = hp_ops_generic.f16_to_f32(in + 2 * i, n - i, scale, out + i, mode);
    _mm256_storeu_si256((__m256i *)l, mx);
    for (int j = 0; j < 16; j++)
        m = l[j] > m ? l[j] : m;
    return m;
}

/* hp_bf16_enc on 8 lanes, results in the low 16 bits of each 32-bit lane */
AVX2 static inline __m256i bf16x8(__m256 v)
{
    __m256i x = _mm256_castps_si256(v);
    __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000));
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i rnd = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, rnd), 16);
    /* +-Inf (0x7f80 / 0xff80) saturates to the largest bfloat16: minus 1 */
    __m256i inf = _mm256_cmpeq_epi32(_mm256_and_si256(r, _mm256_set1_epi32(0x7fff)), _mm256_set1_epi32(0x7f80));
    __m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(_mm256_add_epi32(r, inf), q, nan);
}

AVX2 static int v_f32_to_bf16(const float *x, size_t n, uint8_t *out)
{
    const __m256i expo = _mm256_set1_epi32(0x7f800000);
    __m256i bad = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        __m256i ea = _mm256_and_si256(_mm256_castps_si256(a), expo);
        __m256i eb = _mm256_and_si256(_mm256_castps_si256(b), expo);
        bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpeq_epi32(ea, expo), _mm256_cmpeq_epi32(eb, expo)));
        __m256i p = _mm256_packus_epi32(bf16x8(a), bf16x8(b)); /* a0-3 b0-3 | a4-7 b4-7 */
        _mm256_storeu_si256((__m256i *)(out + 2 * i), _mm256_permute4x64_epi64(p, 0xD8));
    }
    int r = !_mm256_testz_si256(bad, bad);
    return hp_ops_generic.f32_to_bf16(x + i, n - i, out + 2 * i) | r;
}

AVX2 static int v_bf16_to_f32(const uint8_t *in, size_t n, float *out, int mode)
{
    const __m256i abs = _mm256_set1_epi16(0x7fff), big = _mm256_set1_epi16(0x7f7f);
    __m256i bad = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(in + 2 * i));
        bad = _mm256_or_si256(bad, _mm256_cmpgt_epi16(_mm256_and_si256(h, abs), big)); /* Inf, NaN */
        __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16));
        __m256 b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16));
        put8(out + i, a, mode);
        put8(out + i + 8, b, mode);
    }
    return hp_ops_generic.bf16_to_f32(in + 2 * i, n - i, out + i, mode) | !_mm256_testz_si256(bad, bad);
}

const hp_ops_t hp_ops_avx2 = {
    .name = "avx2",
    .isa = HP_ISA_AVX2,
    .add = v_add,
    .nonfinite = v_nonfinite,
    .absmax = v_absmax,
    .minmax = v_minmax,
    .abs_sum = v_abs_sum,
    .sign_sum = v_sign_sum,
    .pack_sign = v_pack_sign,
    .select1 = v_select1,
    .quant_ternary = v_quant_ternary,
    .quant_stoch = v_quant_stoch,
    .dequant = v_dequant,
    .pack = v_pack,
    .unpack = v_unpack,
    .f32_to_f16 = v_f32_to_f16,
    .f16_to_f32 = v_f16_to_f32,
    .f32_to_bf16 = v_f32_to_bf16,
    .bf16_to_f32 = v_bf16_to_f32,
    .rng_u32 = v_rng_u32,
    .rng_unit = v_rng_unit,
    .rng_q_unit = v_rng_q_unit,
    .lr_dot = hp_ops_lr_dot_avx2,
    .lr_axpy = hp_ops_lr_axpy_avx2,
    .lr_recon = hp_ops_lr_recon_avx2,
    .quant_near = v_quant_near,
    .minmax_add = v_minmax_add,
    .quant_near_pack = v_quant_near_pack,
    .quant_stoch_pack = v_quant_stoch_pack,
    .quant_stoch_rng_pack = v_quant_stoch_rng_pack,
};

#else
/* not x86: hp_ops_get() only knows the generic table */
typedef int hp_ops_avx2_unused_t;
#endif
