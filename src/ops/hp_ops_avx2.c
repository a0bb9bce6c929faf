/*
 * CompLL operators, AVX2 (+ F16C, POPCNT) kernels, x86-64 only: the dense
 * operators (sums, min/max, signs, ternary and stochastic codes, fp16 and
 * bf16) and the table that names every AVX2 kernel (the counter generators
 * and the q codecs' kernels are hp_ops_avx2_quant.c, powersgd's
 * hp_ops_lowrank.c).  Compiled with the default flags: each function
 * carries a target attribute and hp_ops_get() only hands the table out when
 * the CPU has the instructions.  Every kernel computes what its generic
 * twin in hp_ops.c computes, bit for bit: the same IEEE operations in the
 * same order (no FMA), the same lane order for reductions, and the generic
 * lane step for tails.
 */
#include "hp_ops_avx2.h"
#include <string.h>

#if defined(__x86_64__)

AVX2 static void v_div(float *x, size_t n, float d)
{
    const __m256 dv = _mm256_set1_ps(d);
    size_t i = 0;
    for (; i < n / 8 * 8; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        /* a NaN kept as it is (the division would quiet a signalling one) */
        _mm256_storeu_ps(x + i, _mm256_blendv_ps(_mm256_div_ps(v, dv), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    }
    for (; i < n; i++)
        x[i] = x[i] != x[i] ? x[i] : x[i] / d;
}

AVX2 static void v_add(const float *a, const float *b, float *out, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 x0 = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        __m256 x1 = _mm256_add_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
        _mm256_storeu_ps(out + i, canon8(x0));
        _mm256_storeu_ps(out + i + 8, canon8(x1));
    }
    for (; i < n; i++)
        out[i] = hp_canon(a[i] + b[i]);
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
    .div = v_div,
    .nonfinite = v_nonfinite,
    .absmax = v_absmax,
    .minmax = v_minmax,
    .abs_sum = v_abs_sum,
    .sign_sum = v_sign_sum,
    .pack_sign = v_pack_sign,
    .select1 = v_select1,
    .quant_ternary = v_quant_ternary,
    .quant_stoch = v_quant_stoch,
    .dequant = hp_ops_dequant_avx2,
    .pack = hp_ops_pack_avx2,
    .unpack = hp_ops_unpack_avx2,
    .f32_to_f16 = v_f32_to_f16,
    .f16_to_f32 = v_f16_to_f32,
    .f32_to_bf16 = v_f32_to_bf16,
    .bf16_to_f32 = v_bf16_to_f32,
    .rng_u32 = hp_ops_rng_u32_avx2,
    .rng_unit = hp_ops_rng_unit_avx2,
    .rng_q_unit = hp_ops_rng_q_unit_avx2,
    .lr_dot = hp_ops_lr_dot_avx2,
    .lr_axpy = hp_ops_lr_axpy_avx2,
    .lr_recon = hp_ops_lr_recon_avx2,
    .quant_near = hp_ops_quant_near_avx2,
    .minmax_add = v_minmax_add,
    .quant_near_pack = hp_ops_quant_near_pack_avx2,
    .quant_stoch_pack = hp_ops_quant_stoch_pack_avx2,
    .quant_stoch_rng_pack = hp_ops_quant_stoch_rng_pack_avx2,
};

#else
/* not x86: hp_ops_get() only knows the generic table */
typedef int hp_ops_avx2_unused_t;
#endif
