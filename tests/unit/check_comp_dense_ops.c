/*
 * check_comp_dense (check_comp_dense.c): the operator layer -- the table a
 * level dispatches to, the same bytes from the generic and AVX2 tables on
 * awkward lengths and special values, the clamp of quantised codes, the sum
 * fallback, sampled conversions.
 */
#include "check_comp_dense.h"

/* ------------------------------------------------------------ operators */

START_TEST(test_dispatch)
{
    const hp_ops_t *g = hp_ops_get(HP_ISA_GENERIC);
    ck_assert_ptr_eq(g, &hp_ops_generic);
    ck_assert_int_eq(g->isa, HP_ISA_GENERIC);
    if (hp_isa_detect() == HP_ISA_AVX2) {
        ck_assert_str_eq(hp_ops_get(HP_ISA_AUTO)->name, "avx2");
        ck_assert_str_eq(hp_ops_get(HP_ISA_AVX2)->name, "avx2");
    } else {
        ck_assert_ptr_eq(hp_ops_get(HP_ISA_AUTO), &hp_ops_generic);
        ck_assert_ptr_eq(hp_ops_get(HP_ISA_AVX2), &hp_ops_generic);
    }
    ck_assert_ptr_eq(hp_ops_get(99), &hp_ops_generic);
}
END_TEST

/* values that exercise every branch: signs, zeros, ties, specials */
static void fill_special(float *x, size_t n, uint64_t seed, int allow_nonfinite)
{
    static const float sp[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 65504.0f, 65520.0f, 1e-8f, -1e-8f,
                               6.1e-5f, 5.96e-8f, 2.98e-8f, 1e30f, -1e30f, FLT_MAX, -FLT_MAX,
                               1.17549435e-38f, 1e-45f, 0.25f, -0.25f};
    rng_state = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_u64();
        if ((r & 7) == 0)
            x[i] = sp[(r >> 8) % (sizeof(sp) / sizeof(sp[0]))];
        else if ((r & 7) == 1) {
            uint32_t u = (uint32_t)(r >> 32);
            memcpy(&x[i], &u, 4);
            if (!allow_nonfinite && hp_nonfinite(x[i]))
                x[i] = 1.5f;
        } else
            x[i] = (float)(next_normal() * ldexp(1.0, (int)((r >> 16) % 40) - 20));
    }
    if (allow_nonfinite && n > 3) {
        x[n / 2] = NAN;
        x[n / 3] = INFINITY;
    }
}

START_TEST(test_ops_isa_identical)
{
    static const size_t ns[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 100, 2047, 2048, 2049, 5001};
    const hp_ops_t *g = &hp_ops_generic, *v = hp_ops_avx2_table();
    const size_t cap = 5100;
    float *x = falloc(cap), *y = falloc(cap), *o1 = falloc(cap), *o2 = falloc(cap);
    uint8_t *c1 = malloc(8 * cap), *c2 = malloc(8 * cap), *codes = malloc(cap);
    if (v == NULL) {
        fprintf(stderr, "check_comp_dense: no AVX2 on this CPU, ISA comparison skipped\n");
        goto out;
    }
    for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
        for (int off = 0; off < 3; off += 2) { /* off 2: not 32-byte aligned */
            size_t n = ns[t];
            float *xs = x + off, mn1, mx1, mn2, mx2;
            uint32_t am1, am2;
            double d1, d2, e1, e2;
            fill_special(xs, n, 100 + n, 1);
            fill_grad(y, n, 7 + n);

            g->add(xs, y, o1, n);
            v->add(xs, y, o2, n);
            REQUIRE(!memcmp(o1, o2, 4 * n));
            /* a mean's division: the bits of the scalar division, Inf
             * included, a NaN kept as it is (a signalling one too), by a
             * power of two and by another count */
            if (n > 4) {
                const uint32_t snan = 0x7f800001u;
                memcpy(&xs[n / 4], &snan, 4);
            }
            for (int dv = 3; dv <= 4; dv++) {
                memcpy(o1, xs, 4 * n);
                memcpy(o2, xs, 4 * n);
                g->div(o1, n, (float)dv);
                v->div(o2, n, (float)dv);
                REQUIRE(!memcmp(o1, o2, 4 * n));
                for (size_t i = 0; i < n; i++) {
                    volatile float q = xs[i] != xs[i] ? xs[i] : xs[i] / (float)dv;
                    REQUIRE(!memcmp(&o1[i], (const void *)&q, 4));
                }
            }
            ck_assert_int_eq(g->nonfinite(xs, n), v->nonfinite(xs, n));
            ck_assert_int_eq(g->nonfinite(y, n), 0);
            ck_assert_int_eq(v->nonfinite(y, n), 0);

            /* reductions: finite data (NaN makes min/max meaningless) */
            fill_special(xs, n, 200 + n, 0);
            g->minmax(xs, n, &mn1, &mx1, &am1);
            v->minmax(xs, n, &mn2, &mx2, &am2);
            REQUIRE(hp_f2u(mn1) == hp_f2u(mn2) && hp_f2u(mx1) == hp_f2u(mx2) && am1 == am2);
            /* the fused forms: v = x + r, stored or not */
            for (int form = 0; form < 3; form++) {
                const float *rr = form ? y : NULL;
                float *vo1 = form == 2 ? o1 : NULL, *vo2 = form == 2 ? o2 : NULL;
                size_t k1, k2;
                memset(o1, 0, 4 * n);
                memset(o2, 0, 4 * n);
                d1 = g->abs_sum(xs, rr, n, vo1);
                d2 = v->abs_sum(xs, rr, n, vo2);
                REQUIRE(!memcmp(&d1, &d2, 8) && !memcmp(o1, o2, 4 * n));
                memset(c1, 0xAA, cap);
                memset(c2, 0x55, cap);
                k1 = g->sign_sum(xs, rr, n, vo1, &d1, &e1, NULL);
                k2 = v->sign_sum(xs, rr, n, vo2, &d2, &e2, NULL);
                REQUIRE(k1 == k2 && !memcmp(&d1, &d2, 8) && !memcmp(&e1, &e2, 8));
                k1 = g->sign_sum(xs, rr, n, vo1, &d1, &e1, c1);
                k2 = v->sign_sum(xs, rr, n, vo2, &d2, &e2, c2);
                REQUIRE(k1 == k2 && !memcmp(&d1, &d2, 8) && !memcmp(&e1, &e2, 8));
                REQUIRE(!memcmp(c1, c2, (n + 7) / 8) && !memcmp(o1, o2, 4 * n));
                REQUIRE(c1[(n + 7) / 8] == 0xAA && c2[(n + 7) / 8] == 0x55); /* no more bytes written */
                if (form == 2) {
                    for (size_t i = 0; i < n; i++)
                        REQUIRE(hp_f2u(o1[i]) == hp_f2u(xs[i] + y[i]));
                    /* in place, as error feedback uses it */
                    memcpy(o2, y, 4 * n);
                    v->sign_sum(xs, o2, n, o2, &d2, &e2, c2);
                    REQUIRE(!memcmp(o1, o2, 4 * n) && !memcmp(&d1, &d2, 8));
                }
                g->quant_ternary(xs, rr, n, 0.01f, c1, vo1);
                v->quant_ternary(xs, rr, n, 0.01f, c2, vo2);
                REQUIRE(!memcmp(c1, c2, n) && !memcmp(o1, o2, 4 * n));
                if (form == 2) {
                    /* the residual equals v - dequant, as a separate pass makes it */
                    float *t = falloc(n + 1);
                    for (size_t i = 0; i < n; i++)
                        t[i] = xs[i] + y[i];
                    g->dequant(c1, n, 0.0f, -1.0f, 0.01f, t, HP_OUT_SUB);
                    REQUIRE(!memcmp(t, o1, 4 * n));
                    memcpy(o2, y, 4 * n);
                    v->quant_ternary(xs, o2, n, 0.01f, c2, o2); /* in place */
                    REQUIRE(!memcmp(t, o2, 4 * n));
                    free(t);
                }
            }
            g->sign_sum(xs, NULL, n, NULL, &d1, &e1, c1);
            memcpy(codes, c1, (n + 7) / 8);
            memset(c1, 0xAA, cap);
            memset(c2, 0xAA, cap);
            g->pack_sign(xs, n, c1);
            v->pack_sign(xs, n, c2);
            REQUIRE(!memcmp(c1, c2, (n + 7) / 8 + 1));
            REQUIRE(!memcmp(c1, codes, (n + 7) / 8)); /* as sign_sum packs them */
            for (int mode = 0; mode < 3; mode++) {
                memcpy(o1, y, 4 * n);
                memcpy(o2, y, 4 * n);
                g->select1(c1, n, 0.375f, -1.25f, o1, mode);
                v->select1(c1, n, 0.375f, -1.25f, o2, mode);
                REQUIRE(!memcmp(o1, o2, 4 * n));
            }
            fill_grad(xs, n, 300 + n);
            g->rng_unit(99, 12345, n, o1);
            g->quant_stoch(xs, o1, n, -0.05f, 15.0f / 0.1f, 15.0f, c1);
            v->quant_stoch(xs, o1, n, -0.05f, 15.0f / 0.1f, 15.0f, c2);
            REQUIRE(!memcmp(c1, c2, n));
            for (int mode = 0; mode < 3; mode++) {
                memcpy(o1, y, 4 * n);
                memcpy(o2, y, 4 * n);
                g->dequant(c1, n, -0.05f, -1.0f, 0.1f / 15.0f, o1, mode);
                v->dequant(c1, n, -0.05f, -1.0f, 0.1f / 15.0f, o2, mode);
                REQUIRE(!memcmp(o1, o2, 4 * n));
            }
            for (unsigned b = 1; b <= 8; b *= 2) {
                size_t pb = (n * b + 7) / 8;
                uint8_t u1[5200], u2[5200], l1 = 0, h1 = 0, l2 = 1, h2 = 1;
                for (size_t i = 0; i < n; i++)
                    codes[i] = (uint8_t)((next_u64() >> 20) & ((1u << b) - 1u));
                memset(c1, 0x5A, pb + 8);
                memset(c2, 0x5A, pb + 8);
                g->pack(codes, n, b, c1);
                v->pack(codes, n, b, c2);
                REQUIRE(!memcmp(c1, c2, pb + 8)); /* nothing written past pb */
                ck_assert_uint_eq(g->unpack(c1, n, b, u1, &l1, &h1), 0);
                ck_assert_uint_eq(v->unpack(c1, n, b, u2, &l2, &h2), 0);
                REQUIRE(!memcmp(u1, codes, n) && !memcmp(u2, codes, n));
                REQUIRE(l1 == l2 && h1 == h2);
                if (n > 0 && (n * b) % 8) {
                    c1[pb - 1] |= 0x80; /* a padding bit */
                    ck_assert_uint_ne(g->unpack(c1, n, b, u1, &l1, &h1), 0);
                    ck_assert_uint_ne(v->unpack(c1, n, b, u2, &l2, &h2), 0);
                }
            }
            fill_special(xs, n, 400 + n, 1);
            ck_assert_uint_eq(g->absmax(xs, n), v->absmax(xs, n));
            fill_special(xs, n, 450 + n, 0);
            ck_assert_uint_eq(g->absmax(xs, n), v->absmax(xs, n));
            fill_special(xs, n, 400 + n, 1);
            /* scales of fp16 blocks: the extremes of the rule and 1 */
            static const int es[] = {HP_F16_EMIN, -56, -1, 0, 1, 40, HP_F16_EMAX};
            for (size_t k = 0; k < sizeof(es) / sizeof(es[0]); k++) {
                int e = es[k];
                g->f32_to_f16(xs, n, hp_exp2i(e), c1);
                v->f32_to_f16(xs, n, hp_exp2i(e), c2);
                REQUIRE_MSG(!memcmp(c1, c2, 2 * n), "f32_to_f16 n=%zu scale 2^%d", n, e);
                for (int mode = 0; mode < 3; mode++) {
                    memcpy(o1, y, 4 * n);
                    memcpy(o2, y, 4 * n);
                    ck_assert_uint_eq(g->f16_to_f32(c1, n, hp_exp2i(-e), o1, mode),
                                      v->f16_to_f32(c1, n, hp_exp2i(-e), o2, mode));
                    REQUIRE_MSG(!memcmp(o1, o2, 4 * n), "f16_to_f32 n=%zu scale 2^%d", n, -e);
                }
            }
            ck_assert_int_eq(g->f32_to_bf16(xs, n, c1), v->f32_to_bf16(xs, n, c2));
            REQUIRE(!memcmp(c1, c2, 2 * n));
            for (int mode = 0; mode < 3; mode++) {
                memcpy(o1, y, 4 * n);
                memcpy(o2, y, 4 * n);
                ck_assert_int_eq(g->bf16_to_f32(c1, n, o1, mode), v->bf16_to_f32(c1, n, o2, mode));
                REQUIRE(!memcmp(o1, o2, 4 * n));
            }
            /* counters that wrap the 64-bit multiply */
            g->rng_u32(0xDEADBEEFCAFEF00DULL, UINT64_MAX - 37, n, (uint32_t *)o1);
            v->rng_u32(0xDEADBEEFCAFEF00DULL, UINT64_MAX - 37, n, (uint32_t *)o2);
            REQUIRE(!memcmp(o1, o2, 4 * n));
            g->rng_unit(42, 1ULL << 40, n, o1);
            v->rng_unit(42, 1ULL << 40, n, o2);
            REQUIRE(!memcmp(o1, o2, 4 * n));
            for (size_t i = 0; i < n; i++)
                REQUIRE(hp_f2u(o1[i]) == hp_f2u(hp_rng_unit(42, (1ULL << 40) + i)) && o1[i] < 1.0f);
        }
    }
out:
    free(x); free(y); free(o1); free(o2); free(c1); free(c2); free(codes);
}
END_TEST

/* stochastic rounding never leaves [0, levels], whatever x and u: values
 * outside [lo, lo + levels gap] and u just below 1 (levels + u rounds up to
 * levels + 1 in float for levels >= 128) */
START_TEST(test_ops_quant_clamp)
{
    const hp_ops_t *tabs[2] = {&hp_ops_generic, hp_ops_avx2_table()};
    float x[301], u[301];
    uint8_t codes[301];
    for (unsigned b = 1; b <= 8; b *= 2) {
        float levels = (float)((1u << b) - 1u), gap = 0.125f, lo = -1.0f;
        for (int i = 0; i < 301; i++) {
            x[i] = lo + ((float)i / 300.0f * (levels + 20.0f) - 10.0f) * gap;
            u[i] = i % 2 ? 0x1.fffffep-1f : 0.0f;
        }
        for (int t = 0; t < 2; t++) {
            if (tabs[t] == NULL)
                continue;
            tabs[t]->quant_stoch(x, u, 301, lo, 1.0f / gap, levels, codes);
            for (int i = 0; i < 301; i++) {
                REQUIRE_MSG(codes[i] <= (unsigned)levels, "%s b=%u x=%g code %u", tabs[t]->name, b, x[i], codes[i]);
                if (x[i] >= lo + levels * gap)
                    REQUIRE(codes[i] == (unsigned)levels);
                if (x[i] < lo)
                    REQUIRE(codes[i] == 0);
            }
        }
    }
}
END_TEST

/* sums whose float lanes overflow fall back to the exact double form: finite
 * for finite input, equal on both paths; NaN and Inf always show */
START_TEST(test_ops_sum_fallback)
{
    const hp_ops_t *tabs[2] = {&hp_ops_generic, hp_ops_avx2_table()};
    float x[200], r[200], v[200];
    uint8_t bits[32];
    double res[2][3];
    for (int t = 0; t < 2; t++) {
        double p, q, want = 0;
        if (tabs[t] == NULL) {
            memcpy(res[1], res[0], sizeof(res[0]));
            continue;
        }
        for (int i = 0; i < 200; i++) {
            x[i] = i % 3 ? 3e38f : -3e38f;
            r[i] = i % 5 ? 1e37f : -1e37f;
            want += fabs((double)x[i] + (double)r[i]);
        }
        res[t][0] = tabs[t]->abs_sum(x, r, 200, NULL);
        ck_assert_msg(isfinite(res[t][0]) && fabs(res[t][0] - want) <= 1e-6 * want, "%s", tabs[t]->name);
        tabs[t]->sign_sum(x, r, 200, v, &p, &q, bits);
        REQUIRE(isfinite(p) && isfinite(q) && p > 1e39 && q < -1e39);
        res[t][1] = p;
        res[t][2] = q;
        x[77] = INFINITY;
        REQUIRE(!isfinite(tabs[t]->abs_sum(x, r, 200, NULL)));
        x[77] = NAN;
        REQUIRE(isnan(tabs[t]->abs_sum(x, NULL, 200, NULL)));
        tabs[t]->sign_sum(x, r, 200, NULL, &p, &q, NULL);
        REQUIRE(isnan(q));
    }
    REQUIRE(!memcmp(res[0], res[1], sizeof(res[0])));
}
END_TEST

/* fp16/bf16 conversion of a sample of all float bit patterns against the
 * scalar reference, on both paths, at the scales of fp16 blocks; every half
 * decodes alike, and the decoders report NaN and Inf */
START_TEST(test_ops_convert_sampled)
{
    const hp_ops_t *tabs[2] = {&hp_ops_generic, hp_ops_avx2_table()};
    static const int exps[] = {0, HP_F16_EMIN, -30, 17, HP_F16_EMAX};
    const size_t n = 1 << 16;
    float *x = falloc(n), *o = falloc(n);
    uint8_t *h = malloc(2 * n);
    for (uint64_t base = 0; base < (1ULL << 32); base += 4099ULL * n) {
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)(base + 4099ULL * i + (i & 1 ? 0 : 0x7fff8000u));
            memcpy(&x[i], &u, 4);
        }
        for (int t = 0; t < 2; t++) {
            if (tabs[t] == NULL)
                continue;
            for (size_t k = 0; k < sizeof(exps) / sizeof(exps[0]); k++) {
                float sc = hp_exp2i(exps[k]);
                tabs[t]->f32_to_f16(x, n, sc, h);
                for (size_t i = 0; i < n; i++) {
                    uint16_t w;
                    memcpy(&w, h + 2 * i, 2);
                    REQUIRE_MSG(w == hp_f16_enc(x[i], sc), "%s f16 of %08x, scale 2^%d", tabs[t]->name,
                                hp_f2u(x[i]), exps[k]);
                    /* a finite float never becomes Inf */
                    REQUIRE(hp_nonfinite(x[i]) || (w & 0x7fffu) < 0x7c00u);
                }
            }
            ck_assert_int_eq(tabs[t]->f32_to_bf16(x, n, h), hp_ops_generic.nonfinite(x, n));
            for (size_t i = 0; i < n; i++) {
                uint16_t w;
                memcpy(&w, h + 2 * i, 2);
                REQUIRE(w == hp_bf16_enc(x[i]));
                REQUIRE(hp_nonfinite(x[i]) || (w & 0x7fffu) < 0x7f80u);
                /* the rounding of hp_f32_to_bf16, but for what overflows */
                if ((hp_f32_to_bf16(x[i]) & 0x7fffu) != 0x7f80u)
                    REQUIRE(w == hp_f32_to_bf16(x[i]));
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t w = (uint16_t)i;
        memcpy(h + 2 * i, &w, 2);
    }
    for (int t = 0; t < 2; t++) {
        if (tabs[t] == NULL)
            continue;
        ck_assert_uint_eq(tabs[t]->f16_to_f32(h, n, 1.0f, o, HP_OUT_SET), 0x7fffu); /* NaNs among them */
        for (size_t i = 0; i < n; i++)
            if ((i & 0x7fff) <= 0x7c00)
                REQUIRE(hp_f2u(o[i]) == hp_f2u(hp_f16_to_f32((uint16_t)i)));
        ck_assert_uint_eq(tabs[t]->f16_to_f32(h, 0x7c00, 1.0f, o, HP_OUT_SET), 0x7bffu);
        ck_assert_uint_eq(tabs[t]->f16_to_f32(h, 0x7c01, 1.0f, o, HP_OUT_SET), 0x7c00u); /* Inf */
        ck_assert_uint_eq(tabs[t]->f16_to_f32(h + 2, 0, 1.0f, o, HP_OUT_SET), 0u);
        ck_assert_int_eq(tabs[t]->bf16_to_f32(h, 0x7f80, o, HP_OUT_SET), 0);
        ck_assert_int_eq(tabs[t]->bf16_to_f32(h, 0x7f81, o, HP_OUT_SET), 1); /* Inf */
        ck_assert_int_eq(tabs[t]->bf16_to_f32(h + 2 * 0x8000, 0x7f80, o, HP_OUT_SET), 0);
        ck_assert_int_eq(tabs[t]->bf16_to_f32(h + 2 * 0x8000, 0x7f81, o, HP_OUT_SET), 1); /* -Inf */
    }
    free(x); free(o); free(h);
}
END_TEST

/* The "ops" case. */
void dense_ops_tests(TCase *t)
{
    tcase_add_test(t, test_dispatch);
    tcase_add_test(t, test_ops_isa_identical);
    tcase_add_test(t, test_ops_quant_clamp);
    tcase_add_test(t, test_ops_sum_fallback);
    tcase_add_test(t, test_ops_convert_sampled);
}
