/*
 * What the two files of AVX2 kernels share, x86-64 only: the target
 * attribute, two lane helpers, and the kernels of hp_ops_avx2_quant.c (the
 * counter generators and the quantising and packing kernels) that the
 * table of hp_ops_avx2.c names.  Private to src/ops: everything else
 * reaches these kernels through hp_ops_get().
 */
#ifndef HP_OPS_AVX2_H
#define HP_OPS_AVX2_H

#include "hp_ops.h"

/* The AVX2 table, handed out by hp_ops_avx2_table() (hp_ops_isa.c). */
extern const hp_ops_t hp_ops_avx2;

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c,popcnt")))
#define INLINE __attribute__((always_inline)) inline

/* v with its NaN lanes canonical (hp_canon, hp_elem.h) */
AVX2 static inline __m256 canon8(__m256 v)
{
    const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)HP_NAN_BITS));
    return _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* out[i] (op)= v for 8 lanes (an add canonical: OUT_LOOP of hp_ops.c) */
AVX2 static inline void put8(float *out, __m256 v, int mode)
{
    if (mode == HP_OUT_SET)
        _mm256_storeu_ps(out, v);
    else if (mode == HP_OUT_ADD)
        _mm256_storeu_ps(out, canon8(_mm256_add_ps(_mm256_loadu_ps(out), v)));
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

/* hp_ops_avx2_quant.c: the table's rng_u32, rng_unit, rng_q_unit,
 * quant_near, quant_near_pack, quant_stoch_pack, quant_stoch_rng_pack,
 * dequant, pack and unpack (hp_ops_t, hp_ops.h, says what each computes). */
void hp_ops_rng_u32_avx2(uint64_t k, uint64_t counter0, size_t n, uint32_t *out);
void hp_ops_rng_unit_avx2(uint64_t k, uint64_t counter0, size_t n, float *out);
void hp_ops_rng_q_unit_avx2(uint64_t k, uint64_t counter0, size_t n, float *out);
void hp_ops_quant_near_avx2(const float *x, size_t n, float lo, float inv_gap, float gap, float levels,
                            uint8_t *codes, float *rout);
void hp_ops_quant_near_pack_avx2(const float *x, size_t n, float lo, float inv_gap, float gap, float levels,
                                 unsigned bits, uint8_t *packed, float *rout);
void hp_ops_quant_stoch_pack_avx2(const float *x, const float *u, size_t n, float lo, float inv_gap, float gap,
                                  float levels, unsigned bits, uint8_t *packed, float *rout);
void hp_ops_quant_stoch_rng_pack_avx2(const float *x, uint64_t key, uint64_t counter0, size_t n, float lo,
                                      float inv_gap, float gap, float levels, unsigned bits, uint8_t *packed,
                                      float *rout);
void hp_ops_dequant_avx2(const uint8_t *codes, size_t n, float base, float cbias, float step, float *out,
                         int mode);
void hp_ops_pack_avx2(const uint8_t *codes, size_t n, unsigned bits, uint8_t *packed);
unsigned hp_ops_unpack_avx2(const uint8_t *packed, size_t n, unsigned bits, uint8_t *codes, uint8_t *min_p,
                            uint8_t *max_p);

#endif /* __x86_64__ */
#endif
