/*
 * Per-element math of CompLL, as inline functions that compile both as C and
 * as CUDA device code (HP_HD), so the CPU and GPU kernels give the same bits.
 */
#ifndef HP_ELEM_H
#define HP_ELEM_H

#include <stdint.h>
#include <math.h>
#include <string.h>

#if defined(__CUDACC__)
#define HP_HD __host__ __device__ __forceinline__
#else
#define HP_HD static inline
#endif

HP_HD uint32_t hp_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
HP_HD float hp_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* hipress' NaN: C's NAN (quiet, positive, no payload), what the NaN
 * message decodes to.  A float computed from values that may be NaN or Inf
 * (an accumulating store into the caller's buffer, an add, powersgd's sums
 * of products, which can overflow) is stored through hp_canon, on the CPU
 * and the GPU alike: a NaN result becomes this one whatever the hardware
 * made of it (x86 keeps an operand's payload and makes 0xffc00000 of
 * Inf - Inf; NVIDIA returns 0x7fffffff), so both paths give the same bits
 * by construction.  A float only moved (copied, converted bit by bit)
 * keeps its bits. */
#define HP_NAN_BITS 0x7fc00000u
HP_HD float hp_canon(float v) { return v != v ? hp_u2f(HP_NAN_BITS) : v; }

/* 1 when f is NaN or +-Inf. */
HP_HD int hp_nonfinite(float f) { return (hp_f2u(f) & 0x7f800000u) == 0x7f800000u; }

/* float -> IEEE half, round to nearest even, overflow to +-Inf, NaN kept
 * (quiet).  Matches the F16C instruction with _MM_FROUND_TO_NEAREST_INT. */
HP_HD uint16_t hp_f32_to_f16(float f)
{
    uint32_t x = hp_f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                        /* Inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u)                        /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {                       /* result subnormal or zero */
        if (ax < 0x33000000u)                     /* below half the smallest subnormal */
            return (uint16_t)sign;
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;                /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax - 0x38000000u;                /* rebias exponent 127 -> 15 */
    uint32_t lsb = (r >> 13) & 1u;
    r += 0xfffu + lsb;                            /* round to nearest even */
    return (uint16_t)(sign | (r >> 13));
}

HP_HD float hp_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t m = (uint32_t)h & 0x3ffu;
    if (e == 0x1fu)   /* Inf, or NaN made quiet as the F16C instruction does */
        return hp_u2f(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));
    if (e == 0) {
        if (m == 0)
            return hp_u2f(sign);
        /* subnormal: value m * 2^-24, exact in float */
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return hp_u2f(sign | ((e + 112u) << 23) | (m << 13));
}

/* float -> bfloat16, round to nearest even, NaN kept quiet. */
HP_HD uint16_t hp_f32_to_bf16(float f)
{
    uint32_t x = hp_f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

HP_HD float hp_bf16_to_f32(uint16_t h) { return hp_u2f((uint32_t)h << 16); }

/* 2^e as a float, for -126 <= e <= 127 (normal: exact, and no subnormal
 * operand that a DAZ mode would read as zero). */
HP_HD float hp_exp2i(int e) { return hp_u2f((uint32_t)(e + 127) << 23); }

/*
 * The `bf16` encoder: hp_f32_to_bf16, except that a result of +-Inf becomes
 * +-0x1.fep127 (0x7f7f, the largest bfloat16), so a finite float never
 * becomes infinite: |x| in [0x1.fe8p127, FLT_MAX] would round to Inf, and
 * the largest bfloat16 is within 2^-8 |x| of it, the bound of any other
 * rounding.  An Inf input gives +-0x1.fep127 too (the encoder reports it
 * non-finite before this matters); NaN stays a quiet NaN.
 */
HP_HD uint16_t hp_bf16_enc(float f)
{
    uint16_t h = hp_f32_to_bf16(f);
    return (uint16_t)(h - (uint16_t)((h & 0x7fffu) == 0x7f80u));
}

/*
 * The `fp16` format: blocks of elements sharing one power-of-two scale 2^e.
 * An element v is sent as hp_f16_enc(v, 2^e) and decoded as
 * hp_f16_dec(h, 2^-e).  e is a function of the block's largest |v| (its
 * float bit pattern m, finite):
 *   m == 0 (all +-0):  e = 0
 *   else               e = min(15 - E, HP_F16_EMAX), E the unbiased
 *                      exponent of m (-127 for a float subnormal)
 * so the largest |v| times 2^e lies in [2^15, 2^16), the top binade of
 * binary16, unless the clamp applies (largest |v| below 2^-111).  e lies in
 * [HP_F16_EMIN, HP_F16_EMAX]: both 2^e and 2^-e are normal floats, so the
 * multiplies are exact unless the product is below 2^-126 (those elements
 * round to +-0 in binary16 anyway), and every finite half times 2^-e is a
 * finite float.  Scaled values in [65520, 65536) would round to Inf: they
 * saturate to 65504 (error <= 2^-11 of the value, as any rounding).
 */
#define HP_F16_EMIN (-112)
#define HP_F16_EMAX 126

HP_HD int hp_f16_block_exp(uint32_t absmax_bits)
{
    int e = 142 - (int)(absmax_bits >> 23); /* 15 - (biased exponent - 127) */
    if (absmax_bits == 0)
        return 0;
    return e < HP_F16_EMAX ? e : HP_F16_EMAX;
}

/* One element: round v * scale to binary16, +-Inf saturated to +-65504
 * (an Inf input too: the encoder reports it non-finite); NaN stays NaN. */
HP_HD uint16_t hp_f16_enc(float v, float scale)
{
    uint16_t h = hp_f32_to_f16(v * scale);
    return (uint16_t)(h - (uint16_t)((h & 0x7fffu) == 0x7c00u));
}

HP_HD float hp_f16_dec(uint16_t h, float inv_scale) { return hp_f16_to_f32(h) * inv_scale; }

/* Counter-based random numbers (contract 3, doc/dev/contracts.md): a pure function of a key
 * (seed, rank, call number, hop) and an element counter, so every path (CPU
 * ISA, GPU) and every partitioning gives the same stream.  SplitMix64-style
 * finaliser over the key hash and the counter. */
HP_HD uint64_t hp_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Fold the 4-word key into one word once per partition. */
HP_HD uint64_t hp_rng_key(const uint64_t key[4])
{
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < 4; i++)
        h = hp_mix64(h ^ (key[i] + 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1)));
    return h;
}

/* The fixed order in which onebit's and tbq's 32 float lane totals, and
 * the exact form's 8 double lanes, are added: the CPU path (src/ops/hp_ops.c)
 * and the kernels (cuda/kern/hp_kern.h) both use these, so their sums agree. */
HP_HD double hp_sum_lanes32(const float l[32])
{
    double s = 0.0;
    for (int j = 0; j < 32; j++)
        s += (double)l[j];
    return s;
}

HP_HD double hp_sum_lanes8(const double l[8])
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* 32 random bits for element `counter` under folded key k. */
HP_HD uint32_t hp_rng_u32(uint64_t k, uint64_t counter)
{
    return (uint32_t)(hp_mix64(k + 0x9E3779B97F4A7C15ULL * (counter + 1)) >> 32);
}

/* Uniform in [0, 1) with 24 random bits (exact in float). */
HP_HD float hp_rng_unit(uint64_t k, uint64_t counter)
{
    return (float)(hp_rng_u32(k, counter) >> 8) * (1.0f / 16777216.0f);
}

/* The q codecs' stochastic-rounding generator, cheaper than hp_rng_unit:
 * 32-bit multiplies only, which AVX2 has (vpmulld) and GPUs run at full
 * rate.  As hp_rng_unit (contract 3, doc/dev/contracts.md): a pure function of the folded key k
 * and the absolute element counter.  k and the counter's high 32 bits (its
 * page, 0 below 2^32 elements) are mixed once into a 64-bit page key kp
 * (hp_rng_q_key: one 64-bit mix per call and page); per element, with c
 * the counter's low 32 bits and ka, kb the low and high halves of kp:
 *   x = ((c + ka) * 0x9e3779b9) ^ kb        (a Weyl sequence in c)
 *   x ^= x >> 16;  x *= 0x7feb352d;  x ^= x >> 15;  x *= 0x846ca68b;
 *   x ^= x >> 16                             (C. Wellons' lowbias32)
 * The golden-ratio step spreads the counter's low bits before the hash
 * (lowbias32 of c itself fails a pair test at lags 2^k); kb before both
 * rounds keeps two keys' streams from being shifts of one another.  For
 * one page key it is a bijection of c: within a page no two elements
 * share their 32 bits.  The vector kernels keep (c + ka) * 0x9e3779b9 as
 * a running sum, so the hash costs two 32-bit multiplies an element.
 * Statistics: tests/unit/check_comp_qbits (test_rng_q_stats). */
HP_HD uint64_t hp_rng_q_key(uint64_t k, uint64_t counter)
{
    return hp_mix64(k ^ (0xD1B54A32D192ED03ULL * ((counter >> 32) + 1)));
}

HP_HD uint32_t hp_rng_q_hash(uint64_t kp, uint32_t c)
{
    uint32_t x = ((c + (uint32_t)kp) * 0x9e3779b9u) ^ (uint32_t)(kp >> 32);
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

/* u in [0, 1) from the top 24 bits of the hash (exact in float): u takes
 * the values j / 2^24, so E[u] = 1/2 - 2^-25 and a stochastic rounding's
 * mean is low by at most 2^-24 of a step (before float rounding of
 * (x - lo) * inv_gap + u, which is coarser: 2^-16 of a step at level 255). */
HP_HD float hp_rng_q_unit_k(uint64_t kp, uint32_t c)
{
    return (float)(hp_rng_q_hash(kp, c) >> 8) * (1.0f / 16777216.0f);
}

/* The same for one element from the folded key and the full counter. */
HP_HD float hp_rng_q_unit(uint64_t k, uint64_t counter)
{
    return hp_rng_q_unit_k(hp_rng_q_key(k, counter), (uint32_t)counter);
}

/* Stochastic uniform quantisation of x to a level in [0, levels]:
 * floor((x - lo) * inv_gap + u), clamped; inv_gap = 1 / gap (a multiply is
 * several times cheaper than a divide; the bias it adds is float rounding,
 * far below the quantisation step).  u in [0, 1). */
HP_HD uint32_t hp_quant_stoch(float x, float lo, float inv_gap, float u, float levels)
{
    float t = (x - lo) * inv_gap + u;
    t = floorf(t);
    t = t > 0.0f ? t : 0.0f;     /* same operand order as maxps/minps */
    t = t < levels ? t : levels;
    return (uint32_t)t;
}

/* Round-to-nearest uniform quantisation of x to a level in [0, levels]
 * (the q codecs' deterministic form): floor((x - lo) * inv_gap + 1/2),
 * clamped -- the stochastic quantiser with u = 1/2, so both share their
 * arithmetic (and their bits on every path). */
HP_HD uint32_t hp_quant_near(float x, float lo, float inv_gap, float levels)
{
    return hp_quant_stoch(x, lo, inv_gap, 0.5f, levels);
}

/* tbq code: 2 if x >= tau, 0 if x <= -tau, else 1 (tau > 0). */
HP_HD uint32_t hp_quant_ternary(float x, float tau)
{
    return (uint32_t)(x >= tau) + 1u - (uint32_t)(x <= -tau);
}

/* Linear dequantisation: base + (code + cbias) * step. */
HP_HD float hp_dequant(uint32_t code, float base, float cbias, float step)
{
    return base + ((float)code + cbias) * step;
}

#endif
