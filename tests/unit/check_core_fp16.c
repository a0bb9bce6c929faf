/*
 * check_core (check_core.c): the fp16 conversions.  The reference is the
 * F16C instruction itself (_cvtss_sh/_cvtsh_ss), compiled for F16C in this
 * file only (function target attribute), so the library keeps its portable
 * C conversion and is checked against hardware.
 */
#include <cpuid.h>
#include <immintrin.h>

#include "check_core.h"

/* ==================================================================== fp16 */

/* The hardware reference, compiled for F16C in this function only. */
__attribute__((target("f16c"))) static uint16_t ref_f32_to_f16(float x)
{
    return (uint16_t)_cvtss_sh(x, 0);   /* 0: round to nearest even */
}

__attribute__((target("f16c"))) static float ref_f16_to_f32(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* A machine without F16C cannot run the reference: that is a failure of
 * this test run (a missing dependency), not a pass. */
static void require_f16c(void)
{
    unsigned a, b, c, d;
    REQUIRE(__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C),
                  "this CPU lacks F16C: the fp16 reference cannot run here");
}

static int is_nan16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

START_TEST(fp16_decode_exhaustive)
{
    require_f16c();
    for (uint32_t h = 0; h < 65536; h++) {
        float got = hp_f16_to_f32((uint16_t)h), ref = ref_f16_to_f32((uint16_t)h);
        if (is_nan16((uint16_t)h)) {
            /* NaN stays NaN with its sign and payload; the hardware also
             * sets the quiet bit of a signalling NaN, hipress keeps it as
             * it came (both are NaN, so the sums they enter are NaN) */
            REQUIRE(isnan(got), "half %04x: not NaN", h);
            REQUIRE((hp_f2u(got) | 0x00400000u) == hp_f2u(ref), "half %04x: %08x vs F16C %08x", h,
                          hp_f2u(got), hp_f2u(ref));
            REQUIRE(hp_f32_to_f16(got) == (uint16_t)(h | 0x200u), "NaN half %04x round trip", h);
            continue;
        }
        REQUIRE(hp_f2u(got) == hp_f2u(ref), "half %04x: %08x vs F16C %08x", h, hp_f2u(got), hp_f2u(ref));
        /* every half round-trips exactly, -0 and subnormals included */
        REQUIRE(hp_f32_to_f16(got) == h, "half %04x -> %g -> %04x", h, got, hp_f32_to_f16(got));
    }
}
END_TEST

/* Sample float bit patterns: every sign and exponent (normal, subnormal,
 * Inf/NaN), and for each, mantissas whose low 13 bits (the rounding bits of
 * a normal half) run through every value under 4 random high parts, plus
 * fully random mantissas (the rounding bits of subnormal halves are higher).
 * 2 * 256 * 32768 = 2^24 patterns. */
static uint32_t sample_bits(uint32_t i)
{
    uint32_t sign = (i >> 23) & 1u, exp = (i >> 15) & 0xffu, j = i & 0x7fffu;
    uint64_t r = hp_mix64(0x1234567ULL + i);
    uint32_t mant;
    if (j < 0x4000u)   /* structured: all 2^13 low patterns x 2 random tops */
        mant = ((uint32_t)(r >> 20) & 0x7fe000u) | (j & 0x1fffu);
    else if (j < 0x6000u) {   /* exact ties (and ties plus random high bits) at
                                 every rounding position, normal or subnormal */
        uint32_t s = j & 31u;
        if (s > 24)
            s -= 8;
        mant = ((uint32_t)(r >> 20) & ~((1u << s) - 1u)) | ((j >> 5) & 1u ? (1u << s) >> 1 : 0);
        mant &= 0x7fffffu;
    }
    else
        mant = (uint32_t)(r >> 9) & 0x7fffffu;
    return (sign << 31) | (exp << 23) | mant;
}

START_TEST(fp16_encode_sample)
{
    require_f16c();
    uint32_t mism = 0, first = 0;
    for (uint32_t i = 0; i < (1u << 24); i++) {
        uint32_t b = sample_bits(i);
        float x = hp_u2f(b);
        if (hp_f32_to_f16(x) != ref_f32_to_f16(x) && mism++ == 0)
            first = b;
    }
    REQUIRE(mism == 0, "%u of 2^24 sampled floats convert differently from F16C, first %08x (%a): %04x vs %04x",
                  mism, first, hp_u2f(first), hp_f32_to_f16(hp_u2f(first)), ref_f32_to_f16(hp_u2f(first)));
}
END_TEST

START_TEST(fp16_encode_edges)
{
    static const float edges[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f, 65519.0f, 65519.996f, 65520.0f, -65520.0f,
        65536.0f, 1e10f, 3.4028235e38f, -3.4028235e38f, 6.1035156e-05f /* smallest normal half */,
        6.0975552e-05f /* largest subnormal half */, 5.9604645e-08f /* 2^-24 */, 2.9802322e-08f /* 2^-25: tie to 0 */,
        2.9802326e-08f, 8.940697e-08f /* 3*2^-25: tie, to even 2^-23 */, 1.1754944e-38f, 1.4e-45f, -1.4e-45f,
        2049.0f, 2051.0f, 4097.0f, 0.1f, 1.0f / 3.0f, 1.00048828125f /* 1 + 2^-11: tie to 1 */,
        1.00146484375f /* 1 + 3*2^-11: tie up */, INFINITY, -INFINITY, NAN, -NAN,
    };
    static const uint32_t nan_bits[] = {0x7f800001u, 0x7fc00000u, 0xffc00001u, 0x7fbfffffu, 0xff800100u,
                                        0x7f802000u, 0x7fffe000u, 0x7f801fffu};
    require_f16c();
    for (size_t i = 0; i < HP_ARRAY_SIZE(edges); i++) {
        float x = edges[i];
        REQUIRE(hp_f32_to_f16(x) == ref_f32_to_f16(x), "%a: %04x vs F16C %04x", x, hp_f32_to_f16(x),
                      ref_f32_to_f16(x));
    }
    /* the overflow boundary walked bit by bit: everything below 65520
     * rounds to 65504 (0x7bff), 65520 and above to Inf */
    for (uint32_t b = 0x477fe000u; b <= 0x47800100u; b++) {
        float x = hp_u2f(b);
        REQUIRE(hp_f32_to_f16(x) == ref_f32_to_f16(x), "%a: %04x vs F16C %04x", x, hp_f32_to_f16(x),
                      ref_f32_to_f16(x));
        ck_assert_uint_eq(hp_f32_to_f16(x), x < 65520.0f ? 0x7bffu : 0x7c00u);
    }
    for (size_t i = 0; i < HP_ARRAY_SIZE(nan_bits); i++) {
        float x = hp_u2f(nan_bits[i]);
        uint16_t h = hp_f32_to_f16(x);
        REQUIRE(h == ref_f32_to_f16(x), "NaN %08x: %04x vs F16C %04x", nan_bits[i], h, ref_f32_to_f16(x));
        REQUIRE(is_nan16(h), "NaN %08x became %04x", nan_bits[i], h);
    }
}
END_TEST

/* The fp16 compressor through each CPU kernel path (generic C and AVX2),
 * against F16C and a block exponent computed here: every block's exponent
 * follows the rule (doc/compressors.md), every half is F16C's rounding of
 * the value times 2^e, Inf saturated to 65504, and the decoder gives
 * F16C's float times 2^-e.  Blocks of 32 and 4096 over the sampled bit
 * patterns (Inf and NaN replaced by finite values of the top binade; a
 * batch holding one must give the non-finite flag). */
START_TEST(fp16_library_encoder)
{
    require_f16c();
    const hipress_compressor_v1_t *c = hipress_compressor_find("fp16");
    enum { BATCH = 1 << 16 };
    float *in = malloc(BATCH * sizeof(float));
    uint8_t *out = malloc(3 * BATCH);
    float *back = malloc(BATCH * sizeof(float));
    hipress_comp_params_t p = *params();
    ck_assert_ptr_nonnull(c);
    ck_assert(in && out && back);
    p.isa = _i;   /* HP_ISA_GENERIC, HP_ISA_AVX2 (a loop test) */
    for (uint32_t base = 0; base < (1u << 24); base += BATCH) {
        hipress_encode_args_t a;
        size_t len = 0, B = base & BATCH ? 32 : 4096, nb = BATCH / B;
        int nf = 0, any_bad = 0;
        p.fp16_block = (uint32_t)B;
        for (uint32_t k = 0; k < BATCH; k++) {
            in[k] = hp_u2f(sample_bits(base + k));
            any_bad |= hp_nonfinite(in[k]);
        }
        memset(&a, 0, sizeof(a));
        a.in = in;
        a.n = BATCH;
        a.out = out;
        a.out_cap = 3 * BATCH;
        a.params = &p;
        if (any_bad) {
            ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
            REQUIRE(nf == 1, "isa %d: non-finite input not flagged", _i);
            for (uint32_t k = 0; k < BATCH; k++)
                if (hp_nonfinite(in[k]))
                    in[k] = hp_u2f(hp_f2u(in[k]) & 0xff7fffffu); /* exponent 254 */
        }
        ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
        ck_assert_uint_eq(len, 2 * BATCH + nb);
        REQUIRE(nf == 0, "isa %d: finite input flagged non-finite", _i);
        for (size_t b = 0; b < nb; b++) {
            float m = 0.0f;
            int e, X, want;
            for (size_t k = b * B; k < (b + 1) * B; k++)
                m = fabsf(in[k]) > m ? fabsf(in[k]) : m;
            frexpf(m, &X);
            want = m == 0.0f ? 0 : 16 - X < 126 ? 16 - X : 126;
            e = (int8_t)out[2 * BATCH + b];
            REQUIRE(e == want, "isa %d: block %zu of base %u: exponent %d, want %d", _i, b, base, e, want);
            for (size_t k = b * B; k < (b + 1) * B; k++) {
                uint16_t h, r = ref_f32_to_f16(ldexpf(in[k], e));
                memcpy(&h, out + 2 * k, 2);
                if ((r & 0x7fffu) == 0x7c00u)
                    r--;   /* saturated at +-65504 */
                REQUIRE(h == r, "isa %d: %08x (2^%d): library %04x vs F16C %04x", _i, hp_f2u(in[k]), e, h, r);
            }
        }
        ck_assert_int_eq(c->decode(out, len, BATCH, back, 0, &p), HIPRESS_COMP_OK);
        for (size_t k = 0; k < BATCH; k++) {
            uint16_t h;
            int e = (int8_t)out[2 * BATCH + k / B];
            memcpy(&h, out + 2 * k, 2);
            REQUIRE(hp_f2u(back[k]) == hp_f2u(ldexpf(ref_f16_to_f32(h), -e)), "isa %d: decode of %04x (2^%d)",
                    _i, h, -e);
        }
    }
    free(in);
    free(out);
    free(back);
}
END_TEST

/* The "fp16" case (check_core.c sets its timeout). */
void core_fp16_tests(TCase *tc)
{
    tcase_add_test(tc, fp16_decode_exhaustive);
    tcase_add_test(tc, fp16_encode_sample);
    tcase_add_test(tc, fp16_encode_edges);
    tcase_add_loop_test(tc, fp16_library_encoder, HP_ISA_GENERIC, HP_ISA_AVX2 + 1);
}
