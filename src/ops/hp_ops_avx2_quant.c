/*
 * CompLL operators, AVX2 kernels of the counter generators (hp_rng_u32,
 * hp_rng_unit, hp_rng_q_unit) and of the quantising codecs (quantise and
 * pack, dequantise, bit pack and unpack), x86-64 only; the table that names
 * them is hp_ops_avx2.c's.  The same rules as there: a target attribute on
 * every function, the same bits as the generic twin in hp_ops.c, the
 * generic kernel for tails.
 */
#include "hp_ops_avx2.h"
#include <string.h>

#if defined(__x86_64__)

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

AVX2 void hp_ops_rng_u32_avx2(uint64_t k, uint64_t counter0, size_t n, uint32_t *out)
{
    rng_z8_t z = rng_z8(k, counter0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_si256((__m256i *)(out + i), rng8(z, 1));
        z = rng_z8_next(z);
    }
    hp_ops_generic.rng_u32(k, counter0 + i, n - i, out + i);
}

AVX2 void hp_ops_rng_unit_avx2(uint64_t k, uint64_t counter0, size_t n, float *out)
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

AVX2 void hp_ops_rng_q_unit_avx2(uint64_t k, uint64_t counter0, size_t n, float *out)
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

/* 32 codes (one a byte, each < 2^bits) packed as hp_ops_pack_avx2 packs
 * them: 32, 16 or 8 bytes at out */
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
 * each (bits 0) or packed as hp_ops_pack_avx2 packs them (bits 2, 4, 8),
 * the new residual with has_out; src, bits and has_out are constants in
 * each instantiation, so one body serves nearest and stochastic rounding. */
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

AVX2 void hp_ops_quant_near_pack_avx2(const float *x, size_t n, float lo, float inv_gap, float gap, float levels,
                                      unsigned bits, uint8_t *packed, float *rout)
{
    size_t d = q_pack(x, NULL, 0, 0, n, lo, inv_gap, gap, levels, bits, packed, rout, Q_NEAR);
    hp_ops_generic.quant_near_pack(x + d, n - d, lo, inv_gap, gap, levels, bits, packed + d * bits / 8,
                                   rout ? rout + d : NULL);
}

AVX2 void hp_ops_quant_stoch_pack_avx2(const float *x, const float *u, size_t n, float lo, float inv_gap, float gap,
                                       float levels, unsigned bits, uint8_t *packed, float *rout)
{
    size_t d = q_pack(x, u, 0, 0, n, lo, inv_gap, gap, levels, bits, packed, rout, Q_U);
    hp_ops_generic.quant_stoch_pack(x + d, u + d, n - d, lo, inv_gap, gap, levels, bits, packed + d * bits / 8,
                                    rout ? rout + d : NULL);
}

AVX2 void hp_ops_quant_stoch_rng_pack_avx2(const float *x, uint64_t key, uint64_t counter0, size_t n, float lo,
                                           float inv_gap, float gap, float levels, unsigned bits, uint8_t *packed,
                                           float *rout)
{
    size_t d = rngq_crosses(counter0, n) ? 0
               : q_pack(x, NULL, hp_rng_q_key(key, counter0), counter0, n, lo, inv_gap, gap, levels, bits,
                        packed, rout, Q_RNG);
    hp_ops_generic.quant_stoch_rng_pack(x + d, key, counter0 + d, n - d, lo, inv_gap, gap, levels, bits,
                                        packed + d * bits / 8, rout ? rout + d : NULL);
}

AVX2 void hp_ops_quant_near_avx2(const float *x, size_t n, float lo, float inv_gap, float gap,
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

AVX2 void hp_ops_dequant_avx2(const uint8_t *codes, size_t n, float base, float cbias, float step,
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

AVX2 void hp_ops_pack_avx2(const uint8_t *codes, size_t n, unsigned bits, uint8_t *packed)
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

AVX2 unsigned hp_ops_unpack_avx2(const uint8_t *packed, size_t n, unsigned bits, uint8_t *codes,
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

#else
/* not x86: hp_ops_get() only knows the generic table */
typedef int hp_ops_avx2_quant_unused_t;
#endif
