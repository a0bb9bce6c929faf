/*
 * Dense CompLL compressors (fp16, bf16, onebit, tbq, terngrad) and the
 * operator layer under them: wire sizes, error bounds, error feedback,
 * unbiasedness, determinism, identical bytes on every ISA path, NaN/Inf,
 * and rejection of malformed messages.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_ops.h"

/* Check's ck_assert records every passing check through a pipe: these cost
 * nothing when they hold, for the per-element checks. */
#define REQUIRE(c) \
    do { if (!(c)) ck_abort_msg("%s:%d: check failed: %s", __FILE__, __LINE__, #c); } while (0)
#define REQUIRE_MSG(c, ...) \
    do { if (!(c)) ck_abort_msg(__VA_ARGS__); } while (0)

static const size_t sizes[] = {1, 31, 32, 33, 4095, 4097, 1000007};

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state;
static uint64_t next_u64(void)
{
    rng_state += 0x9E3779B97F4A7C15ULL;
    return hp_mix64(rng_state);
}
static double next_unit(void) { return (double)(next_u64() >> 11) * 0x1p-53; }
static double next_normal(void)
{
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += next_unit() - 0.5;
    return s * 1.7320508075688772; /* variance 1 */
}

/* gradient-like values: a smooth component plus noise of varying scale */
static void fill_grad(float *x, size_t n, uint64_t seed)
{
    rng_state = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(0.01 * sin((double)i * 0.0007 + (double)seed) +
                       0.003 * (1.0 + (double)(i % 97) / 50.0) * next_normal());
}

static float *falloc(size_t n)
{
    float *p = malloc((n + 16) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

static hipress_comp_params_t params_isa(int isa)
{
    hipress_comp_params_t p;
    hipress_comp_params_default(&p);
    p.isa = isa;
    return p;
}

static hp_comp_t *comp(const char *name)
{
    int k = hp_comp_find(name);
    REQUIRE_MSG(k >= 0, "compressor %s not registered", name);
    return hp_comp_get(k);
}

/* Encode through the compressor; returns the payload length. */
static size_t enc(hp_comp_t *c, const float *in, float *res, size_t n, const hipress_comp_params_t *p,
                  void *out, size_t cap, uint64_t seed, int *nonfinite_p)
{
    hipress_encode_args_t a;
    size_t len = 0;
    int nf = -1;
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.residual = res;
    a.n = n;
    a.out = out;
    a.out_cap = cap;
    a.rng_key[0] = seed;
    a.rng_key[1] = 3;
    a.rng_key[2] = 7;
    a.rng_key[3] = 1;
    a.rng_offset = 1000;
    a.params = p;
    ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
    REQUIRE(nf == 0 || nf == 1);
    REQUIRE(len <= cap);
    if (nonfinite_p)
        *nonfinite_p = nf;
    else
        REQUIRE_MSG(nf == 0, "%s: unexpected non-finite", c->name);
    return len;
}

static size_t fp16_block(const hipress_comp_params_t *p)
{
    return p->fp16_block ? p->fp16_block : 1024;
}

static size_t tg_block(const hipress_comp_params_t *p)
{
    return p->terngrad_block ? p->terngrad_block : 4096;
}

static size_t expected_payload(const char *name, size_t n, const hipress_comp_params_t *p)
{
    if (!strcmp(name, "fp16"))
        return 2 * n + (n + fp16_block(p) - 1) / fp16_block(p);
    if (!strcmp(name, "bf16"))
        return 2 * n;
    if (!strcmp(name, "onebit"))
        return 8 * ((n + p->onebit_block - 1) / p->onebit_block) + 4 * ((n + 31) / 32);
    if (!strcmp(name, "tbq"))
        return 4 * ((n + p->tbq_block - 1) / p->tbq_block) + (n + 3) / 4;
    if (!strcmp(name, "terngrad")) /* a (min, gap) pair per block, then the codes */
        return 8 * ((n + tg_block(p) - 1) / tg_block(p)) + (n * p->terngrad_bits + 7) / 8;
    ck_abort_msg("unknown compressor %s", name);
    return 0;
}

static const char *dense_names[] = {"fp16", "bf16", "onebit", "tbq", "terngrad"};

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

/* ------------------------------------------------------------ wire size */

START_TEST(test_wire_sizes)
{
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float *x = falloc(1000007), *r = falloc(1000007);
    uint8_t *out = malloc(8 * 1000007 + 64), *msg = malloc(8 * 1000007 + 64);
    for (size_t d = 0; d < 5; d++) {
        hp_comp_t *c = comp(dense_names[d]);
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t n = sizes[s];
            for (int var = 0; var < 4; var++) {
                size_t len, mlen;
                int nf;
                hipress_encode_args_t a;
                if (var > 0 && strcmp(c->name, "onebit") && strcmp(c->name, "terngrad") &&
                    strcmp(c->name, "tbq") && strcmp(c->name, "fp16"))
                    break;
                p.onebit_block = var == 1 ? 32 : var == 2 ? 65536 : 4096;
                p.fp16_block = var == 1 ? 32 : var == 2 ? 65536 : var == 3 ? 2048 : 0;
                p.tbq_block = var == 1 ? 32 : var == 2 ? 65536 : var == 3 ? 2048 : 4096;
                p.terngrad_bits = 1u << var;
                p.terngrad_block = var == 1 ? 32 : var == 2 ? 65536 : var == 3 ? 2048 : 0;
                fill_grad(x, n, n);
                memset(r, 0, 4 * n);
                len = enc(c, x, (c->flags & HIPRESS_COMP_EF) ? r : NULL, n, &p, out,
                          c->max_payload(n, &p), 1, NULL);
                REQUIRE_MSG(len == expected_payload(c->name, n, &p), "%s n=%zu: %zu", c->name, n, len);
                ck_assert_uint_eq(c->max_payload(n, &p), len);
                /* the framework adds exactly the header */
                memset(&a, 0, sizeof(a));
                a.in = x;
                a.n = n;
                a.params = &p;
                ck_assert_int_eq(hp_msg_encode(hp_comp_find(c->name), &a, msg,
                                               hp_msg_max_bytes(hp_comp_find(c->name), n, &p), &mlen, &nf), HP_OK);
                ck_assert_uint_eq(mlen, HP_MSG_HEADER + len);
                /* capacity one byte short */
                {
                    size_t l2;
                    hipress_encode_args_t b = a;
                    b.out = out;
                    b.out_cap = len - 1;
                    ck_assert_int_eq(c->encode(&b, &l2, &nf), HIPRESS_COMP_ENOSPC);
                }
            }
        }
    }
    free(x); free(r); free(out); free(msg);
}
END_TEST

/* ---------------------------------------------------------- error bounds */

/* The block exponent of an fp16 block as the rule defines it, computed
 * independently of hp_elem.h (frexpf gives m = f 2^X with f in [0.5, 1)). */
static int want_f16_exp(const float *x, size_t len)
{
    float m = 0.0f;
    int X;
    for (size_t i = 0; i < len; i++)
        m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    if (m == 0.0f)
        return 0;
    frexpf(m, &X);
    return 15 - (X - 1) < 126 ? 15 - (X - 1) : 126;
}

/* Per element, one fp16 encode and decode of x in a block of exponent e:
 * half an ulp of 11 bits where x 2^e is a normal half, else half the
 * subnormal step 2^-24 scaled back; plus half a float subnormal step where
 * the decoded value is a float subnormal. */
static double f16_bound(double ax, int e)
{
    return (ldexp(ax, e) >= 0x1p-14 ? 0x1p-11 * ax : ldexp(0x1p-25, -e)) + 0x1p-150;
}

/* One encode of fp16 / bf16: every element within half an ulp of its
 * format (fp16: in the block's scale), values beyond binary16's range
 * included, and tiny ones in a block of large ones. */
START_TEST(test_fp16_bf16_rounding)
{
    const size_t n = 100003;
    for (int var = 0; var < 2; var++) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        float *x = falloc(n), *o = falloc(n);
        uint8_t *out = malloc(3 * n);
        if (var)
            p.fp16_block = 256;
        fill_grad(x, n, 5 + (uint64_t)var);
        for (size_t i = 0; i < n; i += 101)
            x[i] *= 1e5f; /* beyond binary16's range */
        for (size_t i = 50; i < n; i += 1009)
            x[i] *= 1e-30f; /* 2^-100 below their neighbours */
        for (size_t i = 7; i < n; i += 10007)
            x[i] = i % 2 ? FLT_MAX : -3e38f;
        for (int t = 0; t < 2; t++) {
            hp_comp_t *c = comp(t ? "bf16" : "fp16");
            size_t B = fp16_block(&p);
            size_t len = enc(c, x, NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
            ck_assert_uint_eq(len, expected_payload(c->name, n, &p));
            ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
            for (size_t i = 0; i < n; i++) {
                double ax = fabs((double)x[i]), err = fabs((double)o[i] - (double)x[i]);
                REQUIRE_MSG(isfinite(o[i]), "%s x=%g decoded to %g", c->name, x[i], o[i]);
                if (t) {
                    REQUIRE_MSG(err <= 0x1p-8 * ax, "bf16 x=%g got %g", x[i], o[i]);
                } else {
                    int e = (int8_t)out[2 * n + i / B];
                    ck_assert_int_eq(e, want_f16_exp(x + i / B * B, HP_MIN(B, n - i / B * B)));
                    REQUIRE_MSG(err <= f16_bound(ax, e), "fp16 x=%g (block 2^%d) got %g", x[i], e, o[i]);
                }
            }
        }
        free(x); free(o); free(out);
    }
}
END_TEST

/* The fp16 format: the exponent of each block by the rule (zero block,
 * clamps at both ends, saturation), the largest half of a block in the top
 * binade, exact round trips of values with 11 significant bits, signed
 * zeros, and a short last block. */
START_TEST(test_fp16_scale_rule)
{
    enum { B = 64, NB = 14, N = B * (NB - 1) + 5 };
    const float vals_exact[] = {40000.0f, 80000.0f, 120000.0f, 160000.0f, -2500.0f, 0.0f};
    for (int isa = 1; isa <= 2; isa++) {
        hipress_comp_params_t p = params_isa(isa);
        hp_comp_t *c = comp("fp16");
        float x[N], o[N];
        uint8_t out[2 * N + NB];
        size_t len;
        p.fp16_block = B;
        fill_grad(x, N, 99);
        for (size_t i = 0; i < B; i++)
            x[i] = i % 3 ? 0.0f : -0.0f;                         /* 0: zeros: e = 0 */
        x[B + 9] = 1.0f;                                         /* 1: max 1: e = 15 */
        for (size_t i = 0; i < 6; i++)
            x[2 * B + 3 * i] = vals_exact[i];                    /* 2: max 160000: e = -2 */
        x[3 * B + 1] = FLT_MAX;                                  /* 3: e = -112, saturates */
        x[3 * B + 2] = -FLT_MAX;
        x[3 * B + 3] = 0x1.ffep127f;                             /* rounds up to 2^16 scaled */
        x[3 * B + 4] = 0x1p100f;
        x[4 * B + 5] = 65535.99f;                                /* 4: e = 0, saturates */
        x[4 * B + 6] = 65519.0f;
        for (size_t i = 0; i < B; i++)
            x[5 * B + i] = (float)((double)i * 1e-41);           /* 5: subnormals: e = 126 */
        for (size_t i = 0; i < B; i++)
            x[6 * B + i] = x[6 * B + i] * 0x1p-120f;             /* 6: below 2^-111: e = 126 */
        x[6 * B] = 0x1p-112f;
        x[7 * B + 2] = 32768.0f;                                 /* 7: max 2^15: e = 0 */
        for (size_t i = 0; i < B; i++)
            x[8 * B + i] = i % 2 ? 1e-12f : -3e-13f;             /* 8: 2^-30 of the max */
        x[8 * B] = 1e-3f;
        memset(x + 9 * B, 0, B * sizeof(float));
        x[9 * B + 63] = 0x1p-149f;                               /* 9: one tiny value */
        /* 10, 11: gradient-like; 12: max 65504 * 2^-40 */
        memset(x + 12 * B, 0, B * sizeof(float));
        x[12 * B + 1] = 0x1.ffcp-25f;
        x[12 * B + 2] = 0x1p-40f;
        len = enc(c, x, NULL, N, &p, out, sizeof(out), 1, NULL);
        ck_assert_uint_eq(len, 2 * N + NB);
        ck_assert_int_eq(c->decode(out, len, N, o, 0, &p), HIPRESS_COMP_OK);
        for (size_t b = 0; b < NB; b++) {
            size_t lo = b * B, hi = HP_MIN((size_t)N, lo + B);
            int e = (int8_t)out[2 * N + b];
            unsigned mx = 0;
            ck_assert_int_eq(e, want_f16_exp(x + lo, hi - lo));
            for (size_t i = lo; i < hi; i++) {
                uint16_t h;
                float y = ldexpf(x[i], e);
                memcpy(&h, out + 2 * i, 2);
                mx = (h & 0x7fffu) > mx ? (h & 0x7fffu) : mx;
                REQUIRE(isfinite(o[i]) && (h & 0x7fffu) < 0x7c00u);
                REQUIRE_MSG(fabs((double)o[i] - x[i]) <= f16_bound(fabs((double)x[i]), e),
                            "block %zu x=%a got %a", b, x[i], o[i]);
                /* 11 significant bits in the normal range: exact */
                if (fabsf(y) >= 0x1p-14f && fabsf(y) <= 65504.0f && (hp_f2u(y) & 0x1fffu) == 0)
                    REQUIRE_MSG(hp_f2u(o[i]) == hp_f2u(x[i]), "block %zu: %a not exact: %a", b, x[i], o[i]);
            }
            /* the largest |v| lands in [2^15, 65504] unless the clamp applies */
            if (e < HP_F16_EMAX && want_f16_exp(x + lo, hi - lo) != 0)
                REQUIRE_MSG(mx >= 0x7800u && mx <= 0x7bffu, "block %zu: largest half %04x", b, mx);
        }
        ck_assert_int_eq((int8_t)out[2 * N + 0], 0);
        ck_assert_int_eq((int8_t)out[2 * N + 1], 15);
        ck_assert_int_eq((int8_t)out[2 * N + 2], -2);
        ck_assert_int_eq((int8_t)out[2 * N + 3], HP_F16_EMIN);
        ck_assert_int_eq((int8_t)out[2 * N + 4], 0);
        ck_assert_int_eq((int8_t)out[2 * N + 5], HP_F16_EMAX);
        ck_assert_int_eq((int8_t)out[2 * N + 6], HP_F16_EMAX);
        ck_assert_int_eq((int8_t)out[2 * N + 7], 0);
        ck_assert_int_eq((int8_t)out[2 * N + 12], 40);
        for (size_t i = 0; i < B; i++)    /* signed zeros */
            REQUIRE(hp_f2u(o[i]) == hp_f2u(x[i]));
        for (size_t i = 0; i < 6; i++)
            REQUIRE(o[2 * B + 3 * i] == vals_exact[i]);
        REQUIRE(o[3 * B + 1] == 0x1.ffcp127f && o[3 * B + 2] == -0x1.ffcp127f); /* 65504 2^112 */
        REQUIRE(o[3 * B + 3] == 0x1.ffcp127f && o[4 * B + 5] == 65504.0f && o[4 * B + 6] == 65504.0f);
        REQUIRE(o[7 * B + 2] == 32768.0f && o[9 * B + 63] == 0x1p-149f && o[12 * B + 2] == 0x1p-40f);
        REQUIRE(o[8 * B] == x[8 * B] || fabs(o[8 * B] - 1e-3) <= 0x1p-11 * 1e-3);
    }
}
END_TEST

/* Small gradients (1e-5 to 1e-7: mostly binary16 subnormals unscaled) keep
 * 11 significant bits: the relative L2 error of one encode stays near that
 * of one rounding (2^-11 / sqrt(3) for uniform rounding errors). */
START_TEST(test_fp16_small_values)
{
    const size_t n = 65536 + 100;
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    hp_comp_t *c = comp("fp16");
    float *x = falloc(n), *o = falloc(n);
    uint8_t *out = malloc(3 * n);
    double num = 0, den = 0;
    size_t len;
    fill_grad(x, n, 31);
    for (size_t i = 0; i < n; i++)
        x[i] *= (float)(i < n / 2 ? 1e-3 : 1e-5); /* values about 1e-5 and 1e-7 */
    len = enc(c, x, NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
    ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < n; i++) {
        double e = (double)o[i] - x[i];
        REQUIRE_MSG(fabs(e) <= 0x1p-11 * fabs((double)x[i]), "x=%g got %g", x[i], o[i]);
        num += e * e;
        den += (double)x[i] * x[i];
    }
    REQUIRE_MSG(sqrt(num / den) < 0x1p-11, "relative L2 error %g", sqrt(num / den));
    free(x); free(o); free(out);
}
END_TEST

START_TEST(test_onebit_scales)
{
    const size_t n = 10007;
    for (int useres = 0; useres < 2; useres++) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        hp_comp_t *c = comp("onebit");
        float *x = falloc(n), *r = falloc(n), *v = falloc(n), *o = falloc(n);
        uint8_t *out;
        size_t len, B;
        p.onebit_block = 1024;
        B = p.onebit_block;
        out = malloc(c->max_payload(n, &p));
        fill_grad(x, n, 11);
        fill_grad(r, n, 12);
        for (size_t i = 0; i < n; i++)
            r[i] *= 0.1f;
        for (size_t i = 0; i < 2 * B; i++) /* block 1 all >= 0: empty clear class */
            x[B + i / 2] = fabsf(x[B + i / 2]) + 1.0f;
        for (size_t i = 0; i < n; i++)
            v[i] = useres ? x[i] + r[i] : x[i];
        len = enc(c, x, useres ? r : NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
        ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
        for (size_t b0 = 0; b0 < n; b0 += B) {
            size_t e = HP_MIN(n, b0 + B);
            double sp = 0, sn = 0;
            size_t np = 0, nn = 0;
            float sc[2];
            memcpy(sc, out + 8 * (b0 / B), 8);
            for (size_t i = b0; i < e; i++) {
                if (v[i] >= 0) {
                    sp += v[i];
                    np++;
                } else {
                    sn += v[i];
                    nn++;
                }
            }
            REQUIRE(np ? fabs(sc[0] - sp / (double)np) <= 1e-6 * fabs(sp / (double)np) : sc[0] == 0.0f);
            REQUIRE(nn ? fabs(sc[1] - sn / (double)nn) <= 1e-6 * fabs(sn / (double)nn) : sc[1] == 0.0f);
            for (size_t i = b0; i < e; i++) {
                float want = v[i] >= 0 ? sc[0] : sc[1];
                REQUIRE(hp_f2u(o[i]) == hp_f2u(want));
                /* the new residual is exactly v - decode */
                if (useres)
                    REQUIRE(hp_f2u(r[i]) == hp_f2u(v[i] - want));
            }
        }
        free(x); free(r); free(v); free(o); free(out);
    }
}
END_TEST

START_TEST(test_tbq_codes)
{
    const size_t n = 20011;
    for (int mode = 0; mode < 6; mode++) { /* scale, scale + residual, threshold; blocks 4096 / 1024 */
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        hp_comp_t *c = comp("tbq");
        float *x = falloc(n), *r = falloc(n), *v = falloc(n), *o = falloc(n);
        uint8_t *out, *codes;
        size_t len, cnt[3] = {0, 0, 0}, B, nb;
        p.tbq_scale = 1.5f;
        p.tbq_block = mode >= 3 ? 1024 : 4096;
        B = p.tbq_block;
        nb = (n + B - 1) / B;
        if (mode % 3 == 2)
            p.tbq_threshold = 0.004f;
        out = malloc(c->max_payload(n, &p));
        codes = out + 4 * nb;
        fill_grad(x, n, 21);
        fill_grad(r, n, 22);
        x[5] = 0.012f; /* around tau */
        x[6] = -0.012f;
        for (size_t i = 0; i < n; i++) {
            r[i] *= 0.2f;
            v[i] = mode % 3 == 1 ? x[i] + r[i] : x[i];
        }
        len = enc(c, x, mode % 3 == 1 ? r : NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
        ck_assert_uint_eq(len, 4 * nb + (n + 3) / 4);
        ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * B, hi = HP_MIN(n, lo + B);
            double asum = 0;
            float tau;
            memcpy(&tau, out + 4 * b, 4);
            for (size_t i = lo; i < hi; i++)
                asum += fabs(v[i]);
            if (mode % 3 == 2)
                REQUIRE(tau == 0.004f);
            else
                REQUIRE_MSG(fabs(tau - 1.5 * asum / (double)(hi - lo)) <= 1e-6 * tau, "block %zu tau %g", b, tau);
            for (size_t i = lo; i < hi; i++) {
                float vi = v[i];
                float want = vi >= tau ? tau : vi <= -tau ? -tau : 0.0f;
                unsigned code = (codes[i / 4] >> (2 * (i % 4))) & 3u;
                ck_assert_uint_eq(code, vi >= tau ? 2u : vi <= -tau ? 0u : 1u);
                REQUIRE(o[i] == want);
                cnt[code]++;
            }
        }
        REQUIRE(cnt[0] > 0 && cnt[1] > 0 && cnt[2] > 0);
        free(x); free(r); free(v); free(o); free(out);
    }
}
END_TEST

/* Quality does not depend on the partitioning: encoding a range in one
 * message or in any grain-aligned pieces (the spans the algorithms use)
 * decodes to the same bits and leaves the same residual, for every
 * compressor with blocks (onebit, tbq, graddrop, dgc, fp16). */
START_TEST(test_partition_independent)
{
    static const char *names[] = {"onebit", "tbq", "graddrop", "dgc", "fp16", "fp16"};
    const size_t n = 3 * 65536 + 4096 * 5 + 77;
    float *x = falloc(n), *r1 = falloc(n), *r2 = falloc(n), *o1 = falloc(n), *o2 = falloc(n);
    for (size_t ci = 0; ci < 6; ci++) {
        int kind = hp_comp_find(names[ci]);
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        size_t g = hp_comp_grain(kind, &p), cap;
        unsigned char *msg;
        ck_assert_uint_gt(g, 1);
        p.tbq_block = 2048;
        p.onebit_block = 1024;
        p.sparse_ratio = 0.01;
        p.fp16_block = ci == 5 ? 512 : 0;
        g = hp_comp_grain(kind, &p);
        cap = hp_msg_max_bytes(kind, n, &p);
        msg = malloc(cap);
        for (size_t parts = 2; parts <= 7; parts += 5) {
            hipress_encode_args_t a;
            size_t len;
            int nf;
            fill_grad(x, n, 7 + parts);
            fill_grad(r1, n, 8 + parts);
            for (size_t i = 0; i < n; i++)
                r1[i] *= 0.3f;
            for (size_t i = 1000; i < n; i += 30011)
                x[i] = 40000.0f * (float)i; /* beyond binary16's range */
            memcpy(r2, r1, n * sizeof(float));
            memset(&a, 0, sizeof(a));
            a.in = x;
            a.n = n;
            a.residual = r1;
            a.params = &p;
            a.rng_key[0] = 5;
            ck_assert_int_eq(hp_msg_encode(kind, &a, msg, cap, &len, &nf), HP_OK);
            ck_assert_int_eq(hp_msg_decode(kind, msg, len, n, o1, 0, &p), HP_OK);
            for (size_t q = 0; q < parts; q++) {
                size_t off = hp_span_off(n, parts, q, g), pl = hp_span_len(n, parts, q, g);
                a.in = x + off;
                a.n = pl;
                a.residual = r2 + off;
                a.rng_offset = off;
                ck_assert_int_eq(hp_msg_encode(kind, &a, msg, cap, &len, &nf), HP_OK);
                ck_assert_int_eq(hp_msg_decode(kind, msg, len, pl, o2 + off, 0, &p), HP_OK);
            }
            REQUIRE_MSG(memcmp(o1, o2, n * sizeof(float)) == 0, "%s: %zu pieces decode differently", names[ci], parts);
            REQUIRE_MSG(memcmp(r1, r2, n * sizeof(float)) == 0, "%s: %zu pieces leave another residual", names[ci], parts);
        }
        free(msg);
    }
    free(x), free(r1), free(r2), free(o1), free(o2);
}
END_TEST

/* decode_many (several messages of one range, block by block) gives the
 * bits of decoding one after the other, overwriting or accumulating, on
 * every ISA path; a corrupted message is rejected. */
START_TEST(test_decode_many)
{
    static const char *names[] = {"onebit", "tbq"};
    static const size_t ns[] = {1, 33, 4097, 70001};
    for (size_t ci = 0; ci < 2; ci++)
        for (size_t ni = 0; ni < 4; ni++)
            for (int isa = 1; isa <= 2; isa++) {
                const size_t n = ns[ni];
                int kind = hp_comp_find(names[ci]);
                hp_comp_t *c = hp_comp_get(kind);
                const hp_comp_ext_t *x = hp_comp_ext(kind);
                hipress_comp_params_t p = params_isa(isa);
                float *g = falloc(n), *a = falloc(n), *b = falloc(n);
                const void *pl[5];
                size_t lens[5];
                uint8_t *msgs[5];
                ck_assert_ptr_nonnull(x->decode_many);
                p.onebit_block = 1024;
                p.tbq_block = 2048;
                for (int j = 0; j < 5; j++) {
                    fill_grad(g, n, 50 + (uint64_t)j);
                    msgs[j] = malloc(c->max_payload(n, &p));
                    lens[j] = enc(c, g, NULL, n, &p, msgs[j], c->max_payload(n, &p), 1, NULL);
                    pl[j] = msgs[j];
                }
                for (int acc = 0; acc <= 1; acc++) {
                    fill_grad(a, n, 99);
                    memcpy(b, a, n * sizeof(float));
                    for (int j = 0; j < 5; j++)
                        ck_assert_int_eq(c->decode(pl[j], lens[j], n, a, acc || j > 0, &p), HIPRESS_COMP_OK);
                    ck_assert_int_eq(x->decode_many(pl, lens, 5, n, b, acc, &p), HIPRESS_COMP_OK);
                    REQUIRE_MSG(memcmp(a, b, n * sizeof(float)) == 0, "%s n=%zu isa=%d acc=%d: other bits",
                                names[ci], n, isa, acc);
                }
                /* a bad length or a bad scale in the third message */
                lens[2]--;
                ck_assert_int_eq(x->decode_many(pl, lens, 5, n, b, 0, &p), HIPRESS_COMP_EINVAL);
                lens[2]++;
                {
                    float bad = NAN;
                    memcpy(msgs[2], &bad, 4);
                    ck_assert_int_eq(x->decode_many(pl, lens, 5, n, b, 0, &p), HIPRESS_COMP_EINVAL);
                }
                for (int j = 0; j < 5; j++)
                    free(msgs[j]);
                free(g), free(a), free(b);
            }
}
END_TEST

START_TEST(test_tbq_zero_input)
{
    const size_t n = 1001;
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    hp_comp_t *c = comp("tbq");
    float x[1001], r[1001], o[1001], tau;
    uint8_t out[300];
    size_t len;
    memset(x, 0, sizeof(x));
    memset(r, 0, sizeof(r));
    x[3] = -0.0f;
    len = enc(c, x, r, n, &p, out, sizeof(out), 1, NULL);
    memcpy(&tau, out, 4);
    REQUIRE(hp_f2u(tau) == 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq((out[4 + i / 4] >> (2 * (i % 4))) & 3u, 1u);
    ck_assert_uint_eq(out[4 + n / 4] >> 2, 0); /* padding */
    ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < n; i++)
        REQUIRE(o[i] == 0.0f && r[i] == 0.0f);
}
END_TEST

/* over T steps: sum of decoded + final residual == sum of inputs */
START_TEST(test_error_feedback)
{
    const size_t n = 9001;
    const int T = 30;
    for (int which = 0; which < 3; which++) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        hp_comp_t *c = comp(which == 0 ? "onebit" : "tbq");
        float *g = falloc(n), *r = falloc(n), *o = falloc(n);
        double *sg = calloc(n, 8), *sd = calloc(n, 8), *tol = calloc(n, 8);
        uint8_t *out;
        double maxabs = 0;
        if (which == 2)
            p.tbq_threshold = 0.01f;
        p.onebit_block = 512;
        out = malloc(c->max_payload(n, &p));
        memset(r, 0, 4 * n);
        for (int t = 0; t < T; t++) {
            size_t len;
            fill_grad(g, n, 1000 + (uint64_t)t);
            for (size_t i = 0; i < n; i++) {
                /* rounding of v = g + r and of r' = v - d, each half an ulp */
                tol[i] += 0x1p-24 * (fabs(g[i]) + 3.0 * fabs(r[i]));
                sg[i] += g[i];
            }
            len = enc(c, g, r, n, &p, out, c->max_payload(n, &p), 1, NULL);
            ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
            for (size_t i = 0; i < n; i++) {
                sd[i] += o[i];
                tol[i] += 0x1p-24 * (fabs(o[i]) + fabs(r[i]));
            }
        }
        for (size_t i = 0; i < n; i++) {
            double err = fabs(sd[i] + r[i] - sg[i]);
            maxabs = fmax(maxabs, fabs(r[i]));
            REQUIRE_MSG(err <= tol[i], "%s step sum off by %g (tol %g) at %zu", c->name, err, tol[i], i);
        }
        /* the residual stays bounded (error feedback converges) */
        REQUIRE_MSG(maxabs < 1.0, "%s residual grew to %g", c->name, maxabs);
        free(g); free(r); free(o); free(sg); free(sd); free(tol); free(out);
    }
}
END_TEST

/* -------------------------------------------------------------- terngrad */

START_TEST(test_terngrad_unbiased)
{
    const size_t n = 1000;
    const int S = 2000;
    hp_comp_t *c = comp("terngrad");
    for (unsigned b = 1; b <= 8; b *= 2) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        float x[1000], o[1000], mn = INFINITY, mx = -INFINITY, gap;
        double *sum = calloc(n, 8);
        uint8_t out[1100];
        p.terngrad_bits = b;
        fill_grad(x, n, 77);
        x[0] = 0.02f;   /* max */
        x[1] = -0.02f;  /* min */
        for (size_t i = 0; i < n; i++) {
            mn = fminf(mn, x[i]);
            mx = fmaxf(mx, x[i]);
        }
        for (int s = 0; s < S; s++) {
            size_t len = enc(c, x, NULL, n, &p, out, sizeof(out), 500 + (uint64_t)s, NULL);
            float hdr[2];
            memcpy(hdr, out, 8);
            REQUIRE(hdr[0] == mn);
            gap = hdr[1];
            REQUIRE(gap == (mx - mn) / (float)((1u << b) - 1u));
            ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
            for (size_t i = 0; i < n; i++) {
                unsigned q = (unsigned)((out[8 + i * b / 8] >> (i * b % 8)) & ((1u << b) - 1u));
                /* one of the two levels around x: rounding never leaves the field */
                REQUIRE_MSG(fabs((double)o[i] - x[i]) <= gap * (1.0 + 1e-5), "b=%u i=%zu", b, i);
                REQUIRE(o[i] == mn + (float)q * gap);
                sum[i] += o[i];
            }
            REQUIRE(o[1] == mn);
        }
        /* Hoeffding: |mean - x| > 3 gap / sqrt(S) has probability < 3e-8 per element */
        for (size_t i = 0; i < n; i++)
            REQUIRE_MSG(fabs(sum[i] / S - x[i]) <= 3.0 * gap / sqrt((double)S) + 1e-7,
                          "b=%u i=%zu mean %g x %g", b, i, sum[i] / S, x[i]);
        free(sum);
    }
}
END_TEST

START_TEST(test_terngrad_constant_and_seed)
{
    hp_comp_t *c = comp("terngrad");
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float x[777], o[777];
    uint8_t a[800], b[800];
    size_t la, lb;
    for (size_t i = 0; i < 777; i++)
        x[i] = -3.25f;
    la = enc(c, x, NULL, 777, &p, a, sizeof(a), 1, NULL);
    ck_assert_uint_eq(la, 8 + (777 * 2 + 7) / 8);   /* (min, +0), codes 0 */
    REQUIRE(hp_f2u(((float *)(void *)a)[1]) == 0);
    for (size_t i = 8; i < la; i++)
        REQUIRE(a[i] == 0);
    ck_assert_int_eq(c->decode(a, la, 777, o, 0, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < 777; i++)
        REQUIRE(o[i] == -3.25f);
    ck_assert_int_eq(c->decode(a, la, 777, o, 1, &p), HIPRESS_COMP_OK);
    REQUIRE(o[776] == -6.5f);
    /* a range so small that 1/gap overflows: the min-only form too */
    memset(x, 0, sizeof(x));
    x[100] = 0x1p-128f;
    p.terngrad_bits = 1;
    la = enc(c, x, NULL, 777, &p, a, sizeof(a), 1, NULL);
    ck_assert_uint_eq(la, 8 + (777 + 7) / 8);
    REQUIRE(hp_f2u(((float *)(void *)a)[1]) == 0);
    ck_assert_int_eq(c->decode(a, la, 777, o, 0, &p), HIPRESS_COMP_OK);
    REQUIRE(o[100] == 0.0f && o[0] == 0.0f);
    p.terngrad_bits = 2;
    /* zero elements: no block, no byte */
    la = enc(c, x, NULL, 0, &p, a, sizeof(a), 1, NULL);
    ck_assert_uint_eq(la, 0);
    ck_assert_int_eq(c->decode(a, la, 0, o, 0, &p), HIPRESS_COMP_OK);
    /* same key: same bytes; another rank: other bytes */
    fill_grad(x, 777, 3);
    la = enc(c, x, NULL, 777, &p, a, sizeof(a), 9, NULL);
    lb = enc(c, x, NULL, 777, &p, b, sizeof(b), 9, NULL);
    REQUIRE(la == lb && !memcmp(a, b, la));
    lb = enc(c, x, NULL, 777, &p, b, sizeof(b), 10, NULL);
    REQUIRE(la == lb && memcmp(a, b, la) != 0);
}
END_TEST

/* every block has its own range: a small block beside a large one keeps
 * its resolution, and blocks sit at B from the message start */
START_TEST(test_terngrad_blocks)
{
    const size_t n = 1000, B = 128;
    hp_comp_t *c = comp("terngrad");
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float x[1000], o[1000];
    uint8_t out[1200];
    const size_t nb = (n + B - 1) / B;
    size_t len;
    p.terngrad_block = (uint32_t)B;
    for (unsigned b = 1; b <= 8; b *= 2) {
        p.terngrad_bits = b;
        fill_grad(x, n, 5);
        for (size_t i = 0; i < B; i++)
            x[i] *= 1000.0f;                  /* block 0: a large layer */
        len = enc(c, x, NULL, n, &p, out, sizeof(out), 3, NULL);
        ck_assert_uint_eq(len, 8 * nb + (n * b + 7) / 8);
        ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
        for (size_t j = 0; j < nb; j++) {
            float mn = INFINITY, mx = -INFINITY, pair[2];
            for (size_t i = j * B; i < n && i < (j + 1) * B; i++) {
                mn = fminf(mn, x[i]);
                mx = fmaxf(mx, x[i]);
            }
            memcpy(pair, out + 8 * j, 8);
            REQUIRE_MSG(pair[0] == mn, "b=%u block %zu", b, j);
            REQUIRE(pair[1] == (mx - mn) / (float)((1u << b) - 1u));
            for (size_t i = j * B; i < n && i < (j + 1) * B; i++)
                REQUIRE_MSG(fabsf(o[i] - x[i]) <= pair[1] * (1.0f + 1e-5f), "b=%u i=%zu", b, i);
        }
    }
}
END_TEST

/* --------------------------------------------------- identical on every ISA */

START_TEST(test_compressors_isa_identical)
{
    static const size_t ns[] = {1, 7, 31, 33, 1001, 2049, 4097, 70001};
    hipress_comp_params_t pg = params_isa(HP_ISA_GENERIC), pv = params_isa(HP_ISA_AVX2);
    const size_t cap = 70001 + 32;
    float *x = falloc(cap), *r1 = falloc(cap), *r2 = falloc(cap), *o1 = falloc(cap), *o2 = falloc(cap);
    uint8_t *e1 = malloc(4 * cap + 64), *e2 = malloc(4 * cap + 64);
    if (hp_isa_detect() != HP_ISA_AVX2) {
        fprintf(stderr, "check_comp_dense: no AVX2, compressor ISA comparison skipped\n");
        goto out;
    }
    for (size_t d = 0; d < 5; d++) {
        hp_comp_t *c = comp(dense_names[d]);
        for (size_t s = 0; s < sizeof(ns) / sizeof(ns[0]); s++) {
            for (int var = 0; var < 4; var++) {
                size_t n = ns[s], l1, l2;
                float *xs = x + (var & 1) + 1; /* odd element offsets */
                pg.terngrad_bits = pv.terngrad_bits = 1u << var;
                pg.onebit_block = pv.onebit_block = var & 1 ? 32 : 4096;
                pg.fp16_block = pv.fp16_block = var & 1 ? 32 : var == 2 ? 1024 : 0;
                pg.terngrad_block = pv.terngrad_block = var & 1 ? 64 : 0;
                pg.tbq_threshold = pv.tbq_threshold = var == 3 ? 0.005f : 0.0f;
                fill_grad(xs, n, n + (uint64_t)var);
                if (d < 2)   /* fp16, bf16: beyond binary16, near FLT_MAX, tiny */
                    for (size_t i = var; i < n; i += 97)
                        xs[i] = i % 3 == 0 ? xs[i] * 1e7f : i % 3 == 1 ? xs[i] * 1e-35f : 3.4e38f;
                fill_grad(r1, n, 2 * n + 1);
                for (size_t i = 0; i < n; i++)
                    r1[i] *= 0.5f;
                memcpy(r2, r1, 4 * n);
                l1 = enc(c, xs, (c->flags & HIPRESS_COMP_EF) ? r1 : NULL, n, &pg, e1, c->max_payload(n, &pg), 5, NULL);
                l2 = enc(c, xs, (c->flags & HIPRESS_COMP_EF) ? r2 : NULL, n, &pv, e2, c->max_payload(n, &pv), 5, NULL);
                REQUIRE_MSG(l1 == l2 && !memcmp(e1, e2, l1), "%s n=%zu var=%d: bytes differ", c->name, n, var);
                REQUIRE_MSG(!memcmp(r1, r2, 4 * n), "%s n=%zu: residuals differ", c->name, n);
                for (int acc = 0; acc < 2; acc++) {
                    memcpy(o1, r1, 4 * n);
                    memcpy(o2, r1, 4 * n);
                    ck_assert_int_eq(c->decode(e1, l1, n, o1, acc, &pg), HIPRESS_COMP_OK);
                    ck_assert_int_eq(c->decode(e1, l1, n, o2, acc, &pv), HIPRESS_COMP_OK);
                    REQUIRE(!memcmp(o1, o2, 4 * n));
                }
                if (strcmp(c->name, "onebit") && strcmp(c->name, "terngrad") && strcmp(c->name, "fp16") &&
                    !(var == 3 && !strcmp(c->name, "tbq")))
                    break;
            }
        }
    }
out:
    free(x); free(r1); free(r2); free(o1); free(o2); free(e1); free(e2);
}
END_TEST

/* decode(accumulate) == previous + decode(overwrite), bit for bit */
START_TEST(test_accumulate)
{
    const size_t n = 5003;
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float *x = falloc(n), *o1 = falloc(n), *o2 = falloc(n), *base = falloc(n);
    uint8_t *e = malloc(4 * n + 64);
    fill_grad(x, n, 41);
    fill_grad(base, n, 42);
    for (size_t d = 0; d < 5; d++) {
        hp_comp_t *c = comp(dense_names[d]);
        size_t len = enc(c, x, NULL, n, &p, e, c->max_payload(n, &p), 1, NULL);
        ck_assert_int_eq(c->decode(e, len, n, o1, 0, &p), HIPRESS_COMP_OK);
        memcpy(o2, base, 4 * n);
        ck_assert_int_eq(c->decode(e, len, n, o2, 1, &p), HIPRESS_COMP_OK);
        for (size_t i = 0; i < n; i++)
            REQUIRE(hp_f2u(o2[i]) == hp_f2u(base[i] + o1[i]));
    }
    free(x); free(o1); free(o2); free(base); free(e);
}
END_TEST

/* ------------------------------------------------------------- NaN / Inf */

START_TEST(test_nonfinite)
{
    static const size_t ns[] = {1, 33, 5000, 70001};
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    const size_t cap = 70001;
    float *x = falloc(cap), *r = falloc(cap), *r0 = falloc(cap), *o = falloc(cap);
    uint8_t *msg = malloc(4 * cap + 64);
    for (size_t d = 0; d < 5; d++) {
        int kind = hp_comp_find(dense_names[d]);
        hp_comp_t *c = hp_comp_get(kind);
        for (int thr = 0; thr < 2; thr++) {
            hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
            if (thr && strcmp(c->name, "tbq"))
                break;
            p.tbq_threshold = thr ? 0.003f : 0.0f;
            for (size_t s = 0; s < sizeof(ns) / sizeof(ns[0]); s++) {
                size_t n = ns[s];
                size_t where[3] = {0, n / 2, n - 1};
                for (int w = 0; w < 3; w++) {
                    for (int b = 0; b < 3; b++) {
                        hipress_encode_args_t a;
                        hp_msg_header_t h;
                        size_t len;
                        int nf = 0;
                        fill_grad(x, n, n + (uint64_t)w);
                        fill_grad(r, n, 3 * n);
                        memcpy(r0, r, 4 * n);
                        x[where[w]] = bad[b];
                        memset(&a, 0, sizeof(a));
                        a.in = x;
                        a.residual = (c->flags & HIPRESS_COMP_EF) ? r : NULL;
                        a.n = n;
                        a.params = &p;
                        ck_assert_int_eq(hp_msg_encode(kind, &a, msg, hp_msg_max_bytes(kind, n, &p), &len, &nf), HP_OK);
                        REQUIRE_MSG(nf == 1, "%s n=%zu at %zu", c->name, n, where[w]);
                        ck_assert_uint_eq(len, HP_MSG_HEADER);
                        ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
                        REQUIRE(h.flags & HP_MSG_NONFINITE);
                        REQUIRE_MSG(!memcmp(r, r0, 4 * n), "%s changed the residual", c->name);
                        ck_assert_int_eq(hp_msg_decode(kind, msg, len, n, o, 0, &p), HP_OK);
                        for (size_t i = 0; i < n; i++)
                            REQUIRE(isnan(o[i]));
                    }
                }
            }
        }
    }
    free(x); free(r); free(r0); free(o); free(msg);
}
END_TEST

/* finite input whose sum with the residual overflows: that element's error
 * feedback is dropped (v = in), the rest is encoded as usual; terngrad
 * reports |g| >= 2^126 as non-finite */
START_TEST(test_overflow)
{
    const size_t n = 3000, at = 2500;
    float *x = falloc(n), *r = falloc(n), *r0 = falloc(n), *o = falloc(n);
    uint8_t *out = malloc(4 * n + 64);
    for (int which = 0; which < 3; which++) {
        for (int isa = 1; isa <= 2; isa++) {
            hipress_comp_params_t p = params_isa(isa);
            hp_comp_t *c = comp(which == 0 ? "onebit" : which == 1 ? "tbq" : "terngrad");
            int nf = 0;
            size_t len;
            fill_grad(x, n, 8);
            fill_grad(r, n, 9);
            x[at] = FLT_MAX;
            r[at] = FLT_MAX;
            if (which == 2)
                x[at] = 0x1p126f; /* terngrad's range limit */
            memcpy(r0, r, 4 * n);
            len = enc(c, x, which < 2 ? r : NULL, n, &p, out, c->max_payload(n, &p), 1, &nf);
            if (which == 2) {
                REQUIRE(nf == 1);
                x[at] = 0x1.fffffep125f; /* just below: fine */
                enc(c, x, NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
                continue;
            }
            REQUIRE_MSG(nf == 0, "%s", c->name);
            ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
            for (size_t i = 0; i < n; i++) {
                float v = i == at ? x[i] : x[i] + r0[i];
                REQUIRE(isfinite(o[i]) && isfinite(r[i]));
                REQUIRE(hp_f2u(r[i]) == hp_f2u(v - o[i]));
            }
        }
    }
    free(x); free(r); free(r0); free(o); free(out);
}
END_TEST

/* ------------------------------------------------------ malformed messages */

static int dec(hp_comp_t *c, const uint8_t *msg, size_t len, size_t n, const hipress_comp_params_t *p)
{
    float *o = falloc(n + 16);
    int rc;
    for (size_t i = 0; i < n + 16; i++)
        o[i] = 1.0f;
    rc = c->decode(msg, len, n, o, 1, p);
    for (size_t i = n; i < n + 16; i++)
        REQUIRE_MSG(o[i] == 1.0f, "%s wrote past out[n)", c->name);
    free(o);
    return rc;
}

START_TEST(test_reject_size)
{
    const size_t n = 4097;
    float *x = falloc(n);
    uint8_t *e = malloc(4 * n + 64);
    fill_grad(x, n, 51);
    for (size_t d = 0; d < 5; d++) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        hp_comp_t *c = comp(dense_names[d]);
        size_t len = enc(c, x, NULL, n, &p, e, c->max_payload(n, &p), 1, NULL);
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        ck_assert_int_eq(dec(c, e, len - 1, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len + 1, n, &p), HIPRESS_COMP_EINVAL);
        /* (n + 1 may fit the padding of a packed format: n - 1 and n + 64 do not) */
        ck_assert_int_eq(dec(c, e, len, n - 1, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len, n + 64, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, 0, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len / 2, n, &p), HIPRESS_COMP_EINVAL);
    }
    free(x); free(e);
}
END_TEST

static void put_f(uint8_t *p, float f) { memcpy(p, &f, 4); }

START_TEST(test_reject_content)
{
    const size_t n = 1001; /* padding bits in every format */
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float x[1001];
    uint8_t e[4200], m[4200];
    size_t len;
    hp_comp_t *c;
    fill_grad(x, n, 61);
    x[10] = 0.05f;
    x[11] = -0.05f;

    /* fp16 / bf16: NaN and Inf halves (a finite input never gives Inf) */
    for (int t = 0; t < 2; t++) {
        const uint16_t badh[] = {t ? 0x7fc1 : 0x7e01, t ? 0xff80 : 0xfc00, t ? 0x7f80 : 0x7c00};
        c = comp(t ? "bf16" : "fp16");
        len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        for (size_t at = 0; at < n; at += 333) {
            for (int k = 0; k < 3; k++) {
                memcpy(m, e, len);
                memcpy(m + 2 * at, &badh[k], 2);
                ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
            }
        }
    }

    /* fp16: block exponents in range and by the rule (four blocks of 256,
     * the last one short) */
    c = comp("fp16");
    p.fp16_block = 256;
    len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
    ck_assert_uint_eq(len, 2 * n + 4);
    {
        uint8_t *ex = m + 2 * n;
        const int8_t bade[] = {-128, -113, 127};
        for (int k = 0; k < 3; k++) {
            memcpy(m, e, len);
            ex[1] = (uint8_t)bade[k];
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        memcpy(m, e, len);
        ex[3] = (uint8_t)(int8_t)HP_F16_EMIN; /* another valid scale: decodes */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        memcpy(m, e, len);
        for (size_t i = 512; i < 768; i++) {  /* block 2: largest half below 2^15 */
            uint16_t one = 0x3c00;
            memcpy(m + 2 * i, &one, 2);
        }
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        ex[2] = (uint8_t)HP_F16_EMAX;         /* allowed with the largest exponent */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        memset(m + 2 * 512, 0, 512);          /* block 2 all zero: e 0 or EMAX */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        ex[2] = 0;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        ex[2] = 5;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        memset(m + 2 * 768, 0x80, 2 * (n - 768)); /* the short block all -0... */
        for (size_t i = 768; i < n; i++)
            m[2 * i] = 0;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL); /* ...with its e */
        ex[3] = 0;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        p.fp16_block = 100; /* not a power of two */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
        p.fp16_block = 16;  /* below 32 */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
        p.fp16_block = 0;
    }

    /* onebit */
    c = comp("onebit");
    p.onebit_block = 256;
    len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
    {
        size_t nb = (n + 255) / 256, bits = 8 * nb;
        const float badv[] = {NAN, INFINITY, -INFINITY};
        for (int k = 0; k < 3; k++) {
            memcpy(m, e, len);
            put_f(m + 8, badv[k]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
            memcpy(m, e, len);
            put_f(m + 4, badv[k]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        memcpy(m, e, len);
        put_f(m, -0.1f); /* s+ < 0 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m + 4, 0.1f); /* s- > 0 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        m[bits + n / 8] |= (uint8_t)(1u << (n % 8)); /* first padding bit */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        m[len - 1] |= 0x80; /* last padding bit of the last word */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        memset(m + bits, 0, 32); /* block 0 all clear, but s+ != 0 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        memset(m + bits, 0xff, 32); /* block 0 all set, but s- != 0 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        p.onebit_block = 100; /* not a power of two */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
        p.onebit_block = 256;
    }

    /* tbq (scale 1: codes other than 1 in every block) */
    c = comp("tbq");
    p.tbq_scale = 1.0f;
    len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
    {
        const float badt[] = {NAN, INFINITY, -0.001f, -0.0f};
        for (int k = 0; k < 4; k++) {
            memcpy(m, e, len);
            put_f(m, badt[k]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        memcpy(m, e, len);
        m[4 + 100] |= 0x0c; /* code 3 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        m[len - 1] |= 0x40; /* padding */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m, 0.0f); /* tau 0 needs every code 1 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memset(m + 4, 0x55, len - 4);
        m[len - 1] = 0x01;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
    }
    /* tbq with four blocks: each tau is checked, and a zero tau constrains
     * its own block only */
    p.tbq_block = 256;
    len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
    ck_assert_uint_eq(len, 16 + (n + 3) / 4);
    {
        memcpy(m, e, len);
        put_f(m + 8, NAN);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m + 12, -1.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m + 4, 0.0f);   /* block 1 (elements 256..511) must be all code 1 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memset(m + 16 + 64, 0x55, 64);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        p.tbq_block = 100;    /* not a power of two */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
    }
    p.tbq_block = 4096;

    /* terngrad */
    c = comp("terngrad");
    for (unsigned b = 1; b <= 8; b *= 2) {
        p.terngrad_bits = b;
        len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        const float badg[] = {-0.001f, 0.0f, -0.0f, NAN, INFINITY, 0x1.2p127f};
        for (int k = 0; k < 6; k++) {
            memcpy(m, e, len);
            put_f(m + 4, badg[k]);
            REQUIRE_MSG(dec(c, m, len, n, &p) == HIPRESS_COMP_EINVAL, "b=%u gap %g", b, badg[k]);
        }
        const float badm[] = {NAN, -INFINITY, 0x1p126f, -0x1p126f};
        for (int k = 0; k < 4; k++) {
            memcpy(m, e, len);
            put_f(m, badm[k]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
            ck_assert_int_eq(dec(c, m, 8, n, &p), HIPRESS_COMP_EINVAL);
        }
        if ((n * b) % 8) {
            memcpy(m, e, len);
            m[len - 1] |= 0x80;
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        /* length: the pairs and the codes exactly */
        ck_assert_int_eq(dec(c, e, 8, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len - 1, n, &p), HIPRESS_COMP_EINVAL);
        /* a min-only block (gap +0) has codes 0 */
        memcpy(m, e, len);
        put_f(m + 4, 0.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memset(m + 8, 0, len - 8);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        put_f(m + 4, -0.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        /* with blocks of 256: a bad pair in the last block */
        p.terngrad_block = 256;
        len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
        ck_assert_uint_eq(len, 8 * 4 + (n * b + 7) / 8);
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        memcpy(m, e, len);
        put_f(m + 24 + 4, -1.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m + 24, NAN);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        p.terngrad_block = 100; /* not a power of two */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
        p.terngrad_block = 0;
    }
    p.terngrad_bits = 3;
    ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
}
END_TEST

/* a message through the framework: header + payload, decoded by kind */
START_TEST(test_msg_roundtrip)
{
    const size_t n = 12345;
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float *x = falloc(n), *o = falloc(n), *r = falloc(n);
    uint8_t *msg = malloc(4 * n + 64);
    fill_grad(x, n, 71);
    for (size_t d = 0; d < 5; d++) {
        int kind = hp_comp_find(dense_names[d]), nf = 1;
        hp_comp_t *c = hp_comp_get(kind);
        hipress_encode_args_t a;
        size_t len;
        double err = 0, norm = 0;
        memset(&a, 0, sizeof(a));
        memset(r, 0, 4 * n);
        a.in = x;
        a.residual = (c->flags & HIPRESS_COMP_EF) ? r : NULL;
        a.n = n;
        a.params = &p;
        ck_assert_int_eq(hp_msg_encode(kind, &a, msg, hp_msg_max_bytes(kind, n, &p), &len, &nf), HP_OK);
        ck_assert_int_eq(nf, 0);
        ck_assert_uint_eq(len, HP_MSG_HEADER + expected_payload(c->name, n, &p));
        ck_assert_int_eq(hp_msg_decode(kind, msg, len, n, o, 0, &p), HP_OK);
        for (size_t i = 0; i < n; i++) {
            err += ((double)o[i] - x[i]) * ((double)o[i] - x[i]);
            norm += (double)x[i] * x[i];
        }
        /* loose sanity of the relative error of one encode */
        REQUIRE_MSG(sqrt(err / norm) < (d < 2 ? 1e-2 : 1.0), "%s rel err %g", c->name, sqrt(err / norm));
        ck_assert_int_eq(hp_msg_decode(kind, msg, len - 1, n, o, 0, &p), HP_ERR_MESSAGE);
    }
    free(x); free(o); free(r); free(msg);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("comp_dense");
    TCase *t = tcase_create("ops");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_dispatch);
    tcase_add_test(t, test_ops_isa_identical);
    tcase_add_test(t, test_ops_quant_clamp);
    tcase_add_test(t, test_ops_sum_fallback);
    tcase_add_test(t, test_ops_convert_sampled);
    suite_add_tcase(s, t);
    t = tcase_create("compressors");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_wire_sizes);
    tcase_add_test(t, test_fp16_bf16_rounding);
    tcase_add_test(t, test_fp16_scale_rule);
    tcase_add_test(t, test_fp16_small_values);
    tcase_add_test(t, test_onebit_scales);
    tcase_add_test(t, test_tbq_codes);
    tcase_add_test(t, test_partition_independent);
    tcase_add_test(t, test_decode_many);
    tcase_add_test(t, test_tbq_zero_input);
    tcase_add_test(t, test_error_feedback);
    tcase_add_test(t, test_terngrad_unbiased);
    tcase_add_test(t, test_terngrad_constant_and_seed);
    tcase_add_test(t, test_terngrad_blocks);
    tcase_add_test(t, test_compressors_isa_identical);
    tcase_add_test(t, test_accumulate);
    tcase_add_test(t, test_nonfinite);
    tcase_add_test(t, test_overflow);
    tcase_add_test(t, test_msg_roundtrip);
    suite_add_tcase(s, t);
    t = tcase_create("malformed");
    tcase_add_test(t, test_reject_size);
    tcase_add_test(t, test_reject_content);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
