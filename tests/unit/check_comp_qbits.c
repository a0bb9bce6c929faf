/*
 * The q codecs (q2, q4, q8: per-block max-min uniform quantisation, round to
 * nearest with error feedback or stochastic rounding) and the operators
 * under them: wire sizes, exact round trips on the grid, error bounds,
 * unbiasedness of stochastic rounding, error feedback, partition
 * independence, identical bytes on every ISA path, NaN/Inf and overflow,
 * decode by overwriting and by adding, rejection of malformed messages,
 * the parameters from the settings; the stochastic form's generator
 * (hp_rng_q_unit): its formula, its paths, its statistics.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_ops.h"
#include "hp_global.h"

#define REQUIRE(c) \
    do { if (!(c)) ck_abort_msg("%s:%d: check failed: %s", __FILE__, __LINE__, #c); } while (0)
#define REQUIRE_MSG(c, ...) \
    do { if (!(c)) ck_abort_msg(__VA_ARGS__); } while (0)

static const char *const qnames[] = {"q2", "q4", "q8"};
static const unsigned qb[] = {2, 4, 8};

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state;
static uint64_t next_u64(void)
{
    rng_state += 0x9E3779B97F4A7C15ULL;
    return hp_mix64(rng_state);
}
static double next_unit(void) { return (double)(next_u64() >> 11) * 0x1p-53; }

static void fill_grad(float *x, size_t n, uint64_t seed)
{
    rng_state = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(0.01 * sin((double)i * 0.0007 + (double)seed) +
                       0.003 * (1.0 + (double)(i % 97) / 50.0) * (next_unit() - 0.5));
}

/* gradient-like data with awkward stretches: constant blocks, values near
 * the range limit, tiny ranges, subnormals, signed zeros */
static void fill_awkward(float *x, size_t n, uint64_t seed)
{
    fill_grad(x, n, seed);
    for (size_t i = 0; i < n; i++) {
        size_t k = (i / 64) % 8;
        if (k == 1)
            x[i] = 3.0f;
        else if (k == 3)
            x[i] *= 0x1p120f;
        else if (k == 5)
            x[i] = 1.0f + (float)(i % 3) * 0x1p-23f;
        else if (k == 6)
            x[i] = (i % 2 ? -1.0f : 1.0f) * 1e-42f * (float)(i % 5);
        else if (k == 7 && i % 5 == 0)
            x[i] = i % 2 ? -0.0f : 0x1.fffffep125f;
    }
}

static float *falloc(size_t n)
{
    float *p = malloc((n + 16) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

static hipress_comp_params_t params(int isa, uint32_t B, uint32_t rounding)
{
    hipress_comp_params_t p;
    hipress_comp_params_default(&p);
    p.isa = isa;
    p.q_block = B;
    p.q_rounding = rounding;
    return p;
}

static hp_comp_t *comp(const char *name)
{
    int k = hp_comp_find(name);
    REQUIRE_MSG(k >= 0, "compressor %s not registered", name);
    return hp_comp_get(k);
}

static size_t blk(const hipress_comp_params_t *p) { return p->q_block ? p->q_block : 512; }

static size_t want_payload(unsigned b, size_t n, size_t B)
{
    return 8 * ((n + B - 1) / B) + (n * b + 7) / 8;
}

static size_t enc(hp_comp_t *c, const float *in, float *res, size_t n, const hipress_comp_params_t *p,
                  void *out, uint64_t seed, uint64_t offset, int *nonfinite_p)
{
    hipress_encode_args_t a = {.in = in, .residual = res, .n = n, .out = out, .out_cap = c->max_payload(n, p),
                               .rng_key = {seed, 3, 7, 1}, .rng_offset = offset, .params = p};
    size_t len = 0;
    int nf = -1;
    ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
    REQUIRE(nf == 0 || nf == 1);
    if (nonfinite_p)
        *nonfinite_p = nf;
    else
        REQUIRE_MSG(nf == 0, "%s: unexpected non-finite", c->name);
    return len;
}

/* One encode checked against the definition: each block's pair is its own
 * min and (max - min) / L (or +0 when 1/gap overflows), every decoded value
 * within half a step (nearest) or a step (stochastic) of v, to float
 * rounding, and the new residual exactly v - decode. */
static void check_block_rule(unsigned b, const float *x, const float *r0, const float *r1, size_t n,
                             const hipress_comp_params_t *p, const uint8_t *pl, const float *o)
{
    const size_t B = blk(p), L = (1u << b) - 1u;
    const double half = p->q_rounding ? 1.0 : 0.5;
    for (size_t j = 0; j * B < n; j++) {
        float mn = INFINITY, mx = -INFINITY, pair[2], v;
        for (size_t i = j * B; i < n && i < (j + 1) * B; i++) {
            v = r0 ? x[i] + r0[i] : x[i];
            mn = fminf(mn, v);
            mx = fmaxf(mx, v);
        }
        memcpy(pair, pl + 8 * j, 8);
        /* (== : the sign of a zero min depends on the lane order) */
        REQUIRE_MSG(pair[0] == mn, "b=%u block %zu: min %a, want %a (n=%zu B=%zu r0 %d)", b, j, pair[0], mn, n, B, r0 != NULL);
        if (isfinite(1.0f / ((mx - mn) / (float)L)))
            REQUIRE_MSG(pair[1] == (mx - mn) / (float)L, "b=%u block %zu: gap", b, j);
        else
            REQUIRE(hp_f2u(pair[1]) == 0);
        for (size_t i = j * B; i < n && i < (j + 1) * B; i++) {
            double e;
            v = r0 ? x[i] + r0[i] : x[i];
            e = fabs((double)o[i] - v);
            /* (the rounding of (v - min) / gap: a few 2^-24 of up to L steps) */
            REQUIRE_MSG(e <= (half + 0x1p-12) * pair[1] + 0x1p-22 * (fabs(v) + fabs(mn)) + 0x1p-120,
                        "b=%u i=%zu: |%a - %a| > %g gap %a", b, i, o[i], v, half, pair[1]);
            if (r1)
                REQUIRE_MSG(hp_f2u(r1[i]) == hp_f2u(v - o[i]), "b=%u i=%zu: residual", b, i);
        }
    }
}

/* ------------------------------------------------------------ operators */

START_TEST(test_ops_isa_identical)
{
    static const size_t ns[] = {0, 1, 7, 8, 9, 31, 32, 33, 63, 100, 2047, 2048};
    const hp_ops_t *g = &hp_ops_generic, *v = hp_ops_avx2_table();
    float *x = falloc(2100), *r = falloc(2100), *o1 = falloc(2100), *o2 = falloc(2100);
    uint8_t c1[2100], c2[2100];
    if (v == NULL) {
        fprintf(stderr, "check_comp_qbits: no AVX2 on this CPU, ISA comparison skipped\n");
        goto out;
    }
    for (size_t t = 0; t < HP_ARRAY_SIZE(ns); t++) {
        size_t n = ns[t];
        for (int var = 0; var < 4; var++) {
            float mn1, mx1, mn2, mx2, *xs = x + (var & 1);
            uint32_t a1, a2;
            fill_awkward(xs, n, 3 + n + (uint64_t)var);
            fill_grad(r, n, 4 + n);
            /* minmax_add: each (r, vout) combination */
            g->minmax_add(xs, var & 2 ? r : NULL, n, var < 2 ? o1 : NULL, &mn1, &mx1, &a1);
            v->minmax_add(xs, var & 2 ? r : NULL, n, var < 2 ? o2 : NULL, &mn2, &mx2, &a2);
            REQUIRE(hp_f2u(mn1) == hp_f2u(mn2) && hp_f2u(mx1) == hp_f2u(mx2) && a1 == a2);
            if (var < 2)
                REQUIRE(!memcmp(o1, o2, 4 * n));
            if ((var & 2) == 0) {
                g->minmax(xs, n, &mn2, &mx2, &a2);
                REQUIRE(hp_f2u(mn1) == hp_f2u(mn2) && hp_f2u(mx1) == hp_f2u(mx2) && a1 == a2);
            }
            /* quant_near with and without the residual, in place too */
            fill_grad(xs, n, 5 + n);
            for (unsigned b = 2; b <= 8; b *= 2) {
                const float lo = -0.013f, L = (float)((1u << b) - 1u), gap = 0.026f / L;
                memcpy(o1, xs, 4 * n);
                memcpy(o2, xs, 4 * n);
                g->quant_near(o1, n, lo, 1.0f / gap, gap, L, c1, var & 1 ? o1 : NULL);
                v->quant_near(o2, n, lo, 1.0f / gap, gap, L, c2, var & 1 ? o2 : NULL);
                REQUIRE(!memcmp(c1, c2, n) && !memcmp(o1, o2, 4 * n));
                for (size_t i = 0; i < n; i++)
                    REQUIRE(c1[i] == hp_quant_near(xs[i], lo, 1.0f / gap, L) &&
                            (!(var & 1) || hp_f2u(o1[i]) == hp_f2u(xs[i] - hp_dequant(c1[i], lo, 0.0f, gap))));
                /* the fused forms (codes packed in the same pass): the
                 * bytes of quant_near / quant_stoch, dequant and pack, in
                 * both tables, in place too */
                for (int st = 0; st < 3; st++) {
                    /* st 2: the stochastic form with u drawn in the same
                     * pass; the counter far from 0 at var 2 and 3 */
                    const hp_ops_t *tab[2] = {g, v};
                    const uint64_t key = 99 + n, ctr = var & 2 ? (1ULL << 40) + 7 : 7;
                    uint8_t want[2100], got[2100];
                    float uu[2100];
                    g->rng_q_unit(key, ctr, n, uu);
                    memcpy(o1, xs, 4 * n);
                    if (st) {
                        g->quant_stoch(o1, uu, n, lo, 1.0f / gap, L, c1);
                        if (var & 1)
                            g->dequant(c1, n, lo, 0.0f, gap, o1, HP_OUT_SUB);
                    } else {
                        g->quant_near(o1, n, lo, 1.0f / gap, gap, L, c1, var & 1 ? o1 : NULL);
                    }
                    memset(want, 0xa5, sizeof(want));
                    g->pack(c1, n, b, want);
                    for (int k = 0; k < 2; k++) {
                        memcpy(o2, xs, 4 * n);
                        memset(got, 0xa5, sizeof(got));
                        if (st == 2)
                            tab[k]->quant_stoch_rng_pack(o2, key, ctr, n, lo, 1.0f / gap, gap, L, b, got,
                                                         var & 1 ? o2 : NULL);
                        else if (st)
                            tab[k]->quant_stoch_pack(o2, uu, n, lo, 1.0f / gap, gap, L, b, got, var & 1 ? o2 : NULL);
                        else
                            tab[k]->quant_near_pack(o2, n, lo, 1.0f / gap, gap, L, b, got, var & 1 ? o2 : NULL);
                        REQUIRE_MSG(!memcmp(want, got, sizeof(got)) && !memcmp(o1, o2, 4 * n),
                                    "%s_pack table %d n=%zu b=%u var %d",
                                    st == 2 ? "quant_stoch_rng" : st ? "quant_stoch" : "quant_near", k, n, b, var);
                    }
                }
            }
        }
    }
out:
    free(x); free(r); free(o1); free(o2);
}
END_TEST

/* The vector min/max kernels reduce 32 elements as a tree: a block whose
 * smallest (largest) value is a zero of both signs must still give the
 * sign of each lane's first zero, as the generic lane steps do, for every
 * (r, vout) combination and lengths around the 32-element groups. */
START_TEST(test_ops_minmax_zero_ties)
{
    static const float lo_set[] = {0.0f, -0.0f, 0.5f, 2.0f}, hi_set[] = {0.0f, -0.0f, -0.5f, -2.0f};
    static const size_t ns[] = {8, 31, 32, 33, 64, 96, 100, 2048};
    const hp_ops_t *g = &hp_ops_generic, *v = hp_ops_avx2_table();
    float *x = falloc(2100), *r = falloc(2100), *o1 = falloc(2100), *o2 = falloc(2100);
    if (v == NULL)
        goto out;
    for (int side = 0; side < 2; side++) {
        const float *set = side ? hi_set : lo_set;
        for (size_t t = 0; t < HP_ARRAY_SIZE(ns); t++) {
            for (uint64_t seed = 1; seed <= 40; seed++) {
                const size_t n = ns[t];
                rng_state = seed * 1000 + n;
                for (size_t i = 0; i < n; i++) {
                    /* mostly zeros, so ties of both signs fall in one lane */
                    x[i] = set[next_u64() % (seed % 3 == 0 ? 4 : 2)];
                    r[i] = next_u64() % 2 ? 0.0f : -0.0f;
                }
                for (int var = 0; var < 4; var++) {
                    float mn1, mx1, mn2, mx2;
                    uint32_t a1, a2;
                    g->minmax_add(x, var & 2 ? r : NULL, n, var & 1 ? o1 : NULL, &mn1, &mx1, &a1);
                    v->minmax_add(x, var & 2 ? r : NULL, n, var & 1 ? o2 : NULL, &mn2, &mx2, &a2);
                    REQUIRE_MSG(hp_f2u(mn1) == hp_f2u(mn2) && hp_f2u(mx1) == hp_f2u(mx2) && a1 == a2,
                                "n=%zu seed %d var %d: min %a/%a max %a/%a", n, (int)seed, var, mn1, mn2,
                                mx1, mx2);
                    if (var & 1)
                        REQUIRE(!memcmp(o1, o2, 4 * n));
                }
                {
                    float mn1, mx1, mn2, mx2;
                    uint32_t a1, a2;
                    g->minmax(x, n, &mn1, &mx1, &a1);
                    v->minmax(x, n, &mn2, &mx2, &a2);
                    REQUIRE(hp_f2u(mn1) == hp_f2u(mn2) && hp_f2u(mx1) == hp_f2u(mx2) && a1 == a2);
                }
            }
        }
    }
out:
    free(x); free(r); free(o1); free(o2);
}
END_TEST

/* ------------------------------------------------------------ wire size */

START_TEST(test_wire_sizes)
{
    static const size_t ns[] = {1, 31, 32, 33, 511, 512, 513, 4095, 4097, 100003};
    static const uint32_t Bs[] = {0, 32, 4096, 65536};
    float *x = falloc(100003), *r = falloc(100003);
    uint8_t *out = malloc(4 * 100003 + 64), *msg = malloc(4 * 100003 + 64);
    for (size_t q = 0; q < 3; q++) {
        int kind = hp_comp_find(qnames[q]);
        hp_comp_t *c = comp(qnames[q]);
        ck_assert_uint_eq(c->flags, HIPRESS_COMP_EF);
        for (size_t bi = 0; bi < HP_ARRAY_SIZE(Bs); bi++)
            for (uint32_t rnd = 0; rnd < 2; rnd++) {
                hipress_comp_params_t p = params(HP_ISA_AUTO, Bs[bi], rnd);
                ck_assert_uint_eq(hp_comp_grain(kind, &p), blk(&p));
                for (size_t s = 0; s < HP_ARRAY_SIZE(ns); s++) {
                    size_t n = ns[s], len, mlen;
                    int nf;
                    hipress_encode_args_t a;
                    fill_grad(x, n, n);
                    memset(r, 0, 4 * n);
                    len = enc(c, x, r, n, &p, out, 1, 0, NULL);
                    ck_assert_uint_eq(len, want_payload(qb[q], n, blk(&p)));
                    ck_assert_uint_eq(c->max_payload(n, &p), len);
                    a = (hipress_encode_args_t){.in = x, .n = n, .params = &p};
                    ck_assert_int_eq(hp_msg_encode(kind, &a, msg, hp_msg_max_bytes(kind, n, &p), &mlen, &nf), HP_OK);
                    ck_assert_uint_eq(mlen, HP_MSG_HEADER + len);
                    a.out = out;
                    a.out_cap = len - 1;
                    ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_ENOSPC);
                }
            }
        /* n = 0: a header, whatever the format; an empty payload decodes */
        hipress_comp_params_t p = params(HP_ISA_AUTO, 0, 0);
        hipress_encode_args_t a = {.in = x, .params = &p};
        size_t mlen;
        int nf;
        ck_assert_int_eq(hp_msg_encode(kind, &a, msg, HP_MSG_HEADER, &mlen, &nf), HP_OK);
        ck_assert_uint_eq(mlen, HP_MSG_HEADER);
        ck_assert_int_eq(hp_msg_decode(kind, msg, mlen, 0, x, 0, &p), HP_OK);
        ck_assert_uint_eq(c->max_payload(0, &p), 0);
        ck_assert_int_eq(c->decode(out, 0, 0, x, 0, &p), HIPRESS_COMP_OK);
    }
    free(x); free(r); free(out); free(msg);
}
END_TEST

/* --------------------------------------------------------- error bounds */

/* Values on the grid (every block holding its min and max, steps exact in
 * float) come back exactly and leave a zero residual. */
START_TEST(test_grid_exact)
{
    const size_t n = 5000;
    float *x = falloc(n), *r = falloc(n), *o = falloc(n);
    uint8_t *out = malloc(4 * n + 64);
    for (size_t q = 0; q < 3; q++) {
        const unsigned L = (1u << qb[q]) - 1u;
        const float lo = -1.5f, step = qb[q] == 8 ? 0.0625f : 0.25f;
        for (uint32_t B = 32; B <= 4096; B *= 8) {
            hipress_comp_params_t p = params(HP_ISA_AUTO, B, 0);
            rng_state = B + q;
            for (size_t i = 0; i < n; i++) {
                unsigned k = i % B == 0 ? 0 : i % B == 1 ? L : (unsigned)(next_u64() % (L + 1));
                x[i] = lo + (float)k * step;
            }
            /* the tail block too: it holds its own extremes */
            x[n - 1] = lo;
            x[n - 2] = lo + (float)L * step;
            memset(r, 0, 4 * n);
            size_t len = enc(comp(qnames[q]), x, r, n, &p, out, 1, 0, NULL);
            ck_assert_int_eq(comp(qnames[q])->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
            for (size_t i = 0; i < n; i++)
                REQUIRE_MSG(o[i] == x[i] && r[i] == 0.0f, "%s B=%u i=%zu: %a -> %a", qnames[q], B, i, x[i], o[i]);
        }
    }
    free(x); free(r); free(o); free(out);
}
END_TEST

/* Every encode obeys the rule: pairs, bounds, residuals; with and without
 * a residual, both roundings, awkward data included; a constant block is
 * (min, +0) with codes 0, and decodes to min exactly. */
START_TEST(test_bounds)
{
    static const size_t ns[] = {1, 33, 1000, 4097, 70001};
    const size_t cap = 70001;
    float *x = falloc(cap), *r0 = falloc(cap), *r = falloc(cap), *o = falloc(cap);
    uint8_t *out = malloc(4 * cap + 64);
    for (size_t q = 0; q < 3; q++)
        for (int var = 0; var < 8; var++) {
            hipress_comp_params_t p = params(HP_ISA_AUTO, var & 1 ? 64 : 0, (var >> 1) & 1);
            hp_comp_t *c = comp(qnames[q]);
            for (size_t s = 0; s < HP_ARRAY_SIZE(ns); s++) {
                size_t n = ns[s], len;
                if (var & 4)
                    fill_awkward(x, n, n + (uint64_t)var);
                else
                    fill_grad(x, n, n + (uint64_t)var);
                fill_grad(r0, n, 7 * n);
                for (size_t i = 0; i < n; i++)
                    r0[i] *= (var & 4) ? 0.0f : 0.5f;
                memcpy(r, r0, 4 * n);
                len = enc(c, x, r, n, &p, out, 9, 64, NULL);
                ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
                check_block_rule(qb[q], x, r0, r, n, &p, out, o);
                len = enc(c, x, NULL, n, &p, out, 9, 64, NULL);
                ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
                check_block_rule(qb[q], x, NULL, NULL, n, &p, out, o);
                /* accumulate: what was there plus the decoded value, bit for bit */
                memcpy(r0, r, 4 * n);
                ck_assert_int_eq(c->decode(out, len, n, r0, 1, &p), HIPRESS_COMP_OK);
                for (size_t i = 0; i < n; i++)
                    REQUIRE(hp_f2u(r0[i]) == hp_f2u(r[i] + o[i]));
                if ((var & 4) && n >= 128 && blk(&p) == 64) { /* a constant block of fill_awkward */
                    float pair[2];
                    memcpy(pair, out + 8, 8);
                    REQUIRE(pair[0] == 3.0f && hp_f2u(pair[1]) == 0);
                    for (size_t i = 64; i < 128; i++)
                        REQUIRE(o[i] == 3.0f);
                }
            }
        }
    /* a range so small that 1/gap overflows: min only, the residual keeps it */
    {
        hipress_comp_params_t p = params(HP_ISA_AUTO, 32, 0);
        float pair[2];
        for (size_t i = 0; i < 32; i++)
            x[i] = i % 2 ? 0x1p-130f : 0.0f;
        memset(r, 0, 32 * 4);
        size_t len = enc(comp("q4"), x, r, 32, &p, out, 1, 0, NULL);
        memcpy(pair, out, 8);
        REQUIRE(pair[0] == 0.0f && hp_f2u(pair[1]) == 0);
        ck_assert_int_eq(comp("q4")->decode(out, len, 32, o, 0, &p), HIPRESS_COMP_OK);
        for (size_t i = 0; i < 32; i++)
            REQUIRE(o[i] == 0.0f && r[i] == x[i]);
    }
    free(x); free(r0); free(r); free(o); free(out);
}
END_TEST

/* Stochastic rounding is unbiased: over many seeds the mean error of each
 * element is within a few standard errors of 0, and so is the mean over
 * all of them (in steps); round to nearest is not random at all. */
START_TEST(test_stochastic_unbiased)
{
    const size_t n = 1500, S = 2000;
    float *x = falloc(n), *o = falloc(n), *o2 = falloc(n), *o3 = falloc(n);
    double *sum = calloc(n, sizeof(double)), *gap = calloc(n, sizeof(double));
    uint8_t *out = malloc(4 * n + 64);
    for (size_t q = 0; q < 3; q++) {
        hp_comp_t *c = comp(qnames[q]);
        hipress_comp_params_t p = params(HP_ISA_AUTO, 256, 1), pn = params(HP_ISA_AUTO, 256, 0);
        double tot = 0, tot2 = 0;
        size_t differ = 0;
        fill_grad(x, n, 77 + q);
        memset(sum, 0, n * sizeof(double));
        for (size_t s = 0; s < S; s++) {
            size_t len = enc(c, x, NULL, n, &p, out, 1000 + s, 0, NULL);
            ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
            for (size_t j = 0; j * 256 < n; j++) {
                float pair[2];
                memcpy(pair, out + 8 * j, 8);
                for (size_t i = j * 256; i < n && i < (j + 1) * 256; i++)
                    gap[i] = pair[1];
            }
            for (size_t i = 0; i < n; i++) {
                double e = (double)o[i] - x[i];
                sum[i] += e;
                tot += e / gap[i];
                tot2 += (e / gap[i]) * (e / gap[i]);
            }
        }
        for (size_t s = 0; s < 2; s++) { /* nearest ignores the seed */
            size_t len = enc(c, x, NULL, n, &pn, out, 1000 + s, 0, NULL);
            ck_assert_int_eq(c->decode(out, len, n, s ? o3 : o2, 0, &pn), HIPRESS_COMP_OK);
        }
        for (size_t i = 0; i < n; i++) {
            REQUIRE_MSG(fabs(sum[i] / S) <= 3.0 * gap[i] / sqrt((double)S),
                        "%s i=%zu: mean error %g, gap %g", qnames[q], i, sum[i] / S, gap[i]);
            differ += o3[i] != o2[i];
        }
        ck_assert_uint_eq(differ, 0);
        {
            double m = tot / (double)(n * S), sd = sqrt(tot2 / (double)(n * S) - m * m);
            REQUIRE_MSG(fabs(m) <= 4.0 * sd / sqrt((double)(n * S)), "%s: mean error %g steps (sd %g)",
                        qnames[q], m, sd);
        }
    }
    free(x); free(o); free(o2); free(o3); free(sum); free(gap); free(out);
}
END_TEST

/* ------------------------------------------------ the q generator */

/* The formula of src/ops/hp_elem.h (and doc/compressors.md), computed
 * apart from the C code (a few lines of Python with arbitrary-precision
 * integers masked to 32 and 64 bits): page keys and hashes. */
START_TEST(test_rng_q_formula)
{
    static const struct { uint64_t k, c, kp; uint32_t h; } kat[] = {
        {0, 0, 0x8209b480faed1b10ULL, 0x636003cdu},
        {1, 5, 0x01d60447fea35413ULL, 0x84fffaa2u},
        {0x0123456789abcdefULL, (3ULL << 32) + 0xfffffffeULL, 0x724900183ab01527ULL, 0x0f63b932u},
        {42, (1ULL << 40) + 7, 0x20f9415dcf57b53dULL, 0xfa7192e9u},
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(kat); i++) {
        REQUIRE(hp_rng_q_key(kat[i].k, kat[i].c) == kat[i].kp);
        REQUIRE(hp_rng_q_hash(kat[i].kp, (uint32_t)kat[i].c) == kat[i].h);
        REQUIRE(hp_f2u(hp_rng_q_unit(kat[i].k, kat[i].c)) == hp_f2u((float)(kat[i].h >> 8) * 0x1p-24f));
    }
    /* the page key depends on the counter's high half only */
    REQUIRE(hp_rng_q_key(9, 5) == hp_rng_q_key(9, 0xffffffffULL));
    REQUIRE(hp_rng_q_key(9, 5) != hp_rng_q_key(9, 1ULL << 32));
}
END_TEST

/* rng_q_unit of both tables is hp_rng_q_unit element by element, at any
 * start and length, across a page boundary (2^32) too; so is the u that
 * quant_stoch_rng_pack draws there (codes against quant_stoch_pack with
 * the generic table's u). */
START_TEST(test_rng_q_paths)
{
    static const uint64_t c0s[] = {0, 7, (1ULL << 32) - 13, (1ULL << 32) - 300, (3ULL << 32) - 1, (1ULL << 40) + 5};
    static const size_t ns[] = {1, 8, 13, 32, 300, 1000};
    const hp_ops_t *g = hp_ops_get(HP_ISA_GENERIC), *v = hp_ops_get(HP_ISA_AUTO);
    float a[1000], b[1000], x[1000], r1[1000], r2[1000];
    uint8_t p1[1000], p2[1000];
    fill_grad(x, 1000, 3);
    for (size_t ci = 0; ci < HP_ARRAY_SIZE(c0s); ci++)
        for (size_t ni = 0; ni < HP_ARRAY_SIZE(ns); ni++) {
            const uint64_t k = 0x5bd1e995ULL * (ci + 1) + ni, c0 = c0s[ci];
            const size_t n = ns[ni];
            g->rng_q_unit(k, c0, n, a);
            v->rng_q_unit(k, c0, n, b);
            for (size_t i = 0; i < n; i++) {
                const float want = hp_rng_q_unit(k, c0 + i);
                REQUIRE_MSG(hp_f2u(a[i]) == hp_f2u(want) && hp_f2u(b[i]) == hp_f2u(want),
                            "rng_q_unit c0=%llu n=%zu i=%zu", (unsigned long long)c0, n, i);
                REQUIRE(want >= 0.0f && want < 1.0f);
            }
            for (unsigned bits = 2; bits <= 8; bits *= 2) {
                const float L = (float)((1u << bits) - 1u), gap = 0.03f / L;
                memcpy(r1, x, 4 * n);
                memcpy(r2, x, 4 * n);
                memset(p1, 0, sizeof(p1));
                memset(p2, 0, sizeof(p2));
                g->quant_stoch_pack(r1, a, n, -0.015f, 1.0f / gap, gap, L, bits, p1, r1);
                v->quant_stoch_rng_pack(r2, k, c0, n, -0.015f, 1.0f / gap, gap, L, bits, p2, r2);
                REQUIRE_MSG(!memcmp(p1, p2, sizeof(p1)) && !memcmp(r1, r2, 4 * n),
                            "quant_stoch_rng_pack c0=%llu n=%zu bits=%u", (unsigned long long)c0, n, bits);
            }
        }
}
END_TEST

/* Statistics of a stream of u, for test_rng_q_stats: z-scores (standard
 * normal under independence) of the mean, of the Pearson correlation of
 * u_i and u_{i+lag}, and of a 32 x 32-bin chi-square of the pairs
 * (u_i, u_{i+lag}) ((chi2 - df) / sqrt(2 df)); the worst over the lags. */
typedef struct {
    double mean_z, corr_z, pair_z, bins_z;
    size_t corr_lag, pair_lag;
} qstat_t;

static double pair_chi_z(const float *a, const float *b, size_t n)
{
    static double cnt[1024];
    double chi = 0.0, e = (double)n / 1024.0;
    memset(cnt, 0, sizeof(cnt));
    for (size_t i = 0; i < n; i++)
        cnt[(int)(a[i] * 32.0f) * 32 + (int)(b[i] * 32.0f)] += 1.0;
    for (int j = 0; j < 1024; j++)
        chi += (cnt[j] - e) * (cnt[j] - e) / e;
    return (chi - 1023.0) / sqrt(2.0 * 1023.0);
}

static double corr_z(const float *a, const float *b, size_t n)
{
    double sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++) {
        sa += a[i];
        sb += b[i];
        sab += (double)a[i] * b[i];
        saa += (double)a[i] * a[i];
        sbb += (double)b[i] * b[i];
    }
    sa /= (double)n;
    sb /= (double)n;
    return (sab / (double)n - sa * sb) / sqrt((saa / (double)n - sa * sa) * (sbb / (double)n - sb * sb)) *
           sqrt((double)n);
}

/* u holds n + 70000 values */
static qstat_t stream_stats(const float *u, size_t n)
{
    static const size_t lags[] = {1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 64, 128, 256, 512, 1024, 4096, 65536};
    qstat_t st = {0, 0, 0, 0, 0, 0};
    double sum = 0.0, chi = 0.0, e = (double)n / 4096.0;
    static double cnt[4096];
    memset(cnt, 0, sizeof(cnt));
    for (size_t i = 0; i < n; i++) {
        sum += u[i];
        cnt[(int)(u[i] * 4096.0f)] += 1.0;
    }
    /* E[u] = 1/2 - 2^-25 (24-bit values), sd 1/sqrt(12 n) */
    st.mean_z = (sum / (double)n - (0.5 - 0x1p-25)) * sqrt(12.0 * (double)n);
    for (int j = 0; j < 4096; j++)
        chi += (cnt[j] - e) * (cnt[j] - e) / e;
    st.bins_z = (chi - 4095.0) / sqrt(2.0 * 4095.0);
    for (size_t l = 0; l < HP_ARRAY_SIZE(lags); l++) {
        double cz = corr_z(u, u + lags[l], n), pz = pair_chi_z(u, u + lags[l], n);
        if (fabs(cz) > fabs(st.corr_z)) {
            st.corr_z = cz;
            st.corr_lag = lags[l];
        }
        if (fabs(pz) > fabs(st.pair_z)) {
            st.pair_z = pz;
            st.pair_lag = lags[l];
        }
    }
    return st;
}

/* lowbias32 of the counter itself (no Weyl step), the negative control of
 * test_rng_q_stats: it fails the pair test at lags 2^k */
static float weak_unit(uint32_t kp_lo, uint32_t c)
{
    uint32_t x = c + kp_lo;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return (float)(x >> 8) * 0x1p-24f;
}

/* The q generator's u (contract 3's streams: keys of rank, call and hop
 * through hp_rng_key, a counter anywhere, a page boundary crossed): its
 * mean is 1/2 - 2^-25, its 4096 bins are no less even than independent
 * draws' (they are more even: within a page the hash is a bijection of the
 * counter, a draw without replacement), neighbours at lags 1 .. 65536 are
 * uncorrelated (Pearson) and independent (pair chi-square), and two
 * streams of different keys are too, at the same element and at the shift
 * that lines up their Weyl terms (the worst case of a key entering
 * additively).  Bounds |z| <= 5.5 over about 150 statistics: a sound
 * generator fails with probability below 1e-5; the weak generator above
 * fails them, by far. */
START_TEST(test_rng_q_stats)
{
    const size_t n = (size_t)1 << 22, extra = 70000;
    const double Z = 5.5;
    float *u = malloc(4 * (n + extra)), *w = malloc(4 * (n + extra));
    qstat_t st;
    for (int s = 0; s < 4; s++) {
        const uint64_t key4[4] = {7 + (uint64_t)s, (uint64_t)s % 3, 100 + (uint64_t)s, (uint64_t)s / 2};
        const uint64_t k = hp_rng_key(key4);
        const uint64_t c0 = s == 2 ? (1ULL << 32) - n / 2 : s == 3 ? (5ULL << 40) + 17 : (uint64_t)s * 1000003;
        hp_ops_get(HP_ISA_AUTO)->rng_q_unit(k, c0, n + extra, u);
        st = stream_stats(u, n);
        REQUIRE_MSG(fabs(st.mean_z) <= Z && st.bins_z <= Z && fabs(st.corr_z) <= Z && fabs(st.pair_z) <= Z,
                    "stream %d: mean z %.2f, bins z %.2f, corr z %.2f (lag %zu), pairs z %.2f (lag %zu)", s,
                    st.mean_z, st.bins_z, st.corr_z, st.corr_lag, st.pair_z, st.pair_lag);
    }
    /* across keys: rank 0 and 1, call 5 and 6 */
    for (int s = 0; s < 2; s++) {
        const uint64_t ka4[4] = {1, 0, 5, 0}, kb4[4] = {1, (uint64_t)(s == 0), 5 + (uint64_t)(s == 1), 0};
        const uint64_t ka = hp_rng_key(ka4), kb = hp_rng_key(kb4);
        const uint64_t pa = hp_rng_q_key(ka, 0), pb = hp_rng_q_key(kb, 0);
        const uint32_t d = (uint32_t)pa - (uint32_t)pb; /* (c + ka) of a at c is (c + d + kb) of b */
        double cz, pz;
        hp_ops_get(HP_ISA_AUTO)->rng_q_unit(ka, 0, n, u);
        hp_ops_get(HP_ISA_AUTO)->rng_q_unit(kb, 0, n, w);
        cz = corr_z(u, w, n);
        pz = pair_chi_z(u, w, n);
        REQUIRE_MSG(fabs(cz) <= Z && fabs(pz) <= Z, "keys %d, same element: corr z %.2f, pairs z %.2f", s, cz, pz);
        hp_ops_get(HP_ISA_AUTO)->rng_q_unit(kb, d, n, w);
        cz = corr_z(u, w, n);
        pz = pair_chi_z(u, w, n);
        REQUIRE_MSG(fabs(cz) <= Z && fabs(pz) <= Z, "keys %d, aligned shift: corr z %.2f, pairs z %.2f", s, cz,
                    pz);
    }
    /* the negative control: these statistics can fail */
    for (size_t i = 0; i < n + extra; i++)
        u[i] = weak_unit(0x2545f491u, (uint32_t)i);
    st = stream_stats(u, n);
    REQUIRE_MSG(fabs(st.pair_z) > 10.0 * Z, "weak generator not caught: pairs z %.2f", st.pair_z);
    free(u);
    free(w);
}
END_TEST

/* Error feedback over calls: the decoded values plus the last residual add
 * up to the inputs, to float rounding, in both roundings. */
START_TEST(test_error_feedback)
{
    const size_t n = 3001, T = 30;
    float *x = falloc(n), *r = falloc(n), *o = falloc(n);
    double *lhs = calloc(n, sizeof(double)), *rhs = calloc(n, sizeof(double)), *mag = calloc(n, sizeof(double));
    uint8_t *out = malloc(4 * n + 64);
    for (size_t q = 0; q < 3; q++)
        for (uint32_t rnd = 0; rnd < 2; rnd++) {
            hipress_comp_params_t p = params(HP_ISA_AUTO, 0, rnd);
            hp_comp_t *c = comp(qnames[q]);
            memset(r, 0, 4 * n);
            memset(lhs, 0, n * sizeof(double));
            memset(rhs, 0, n * sizeof(double));
            memset(mag, 0, n * sizeof(double));
            for (size_t t = 0; t < T; t++) {
                fill_grad(x, n, 100 + t);
                for (size_t i = 0; i < n; i++)
                    mag[i] += 4.0 * (fabs(x[i]) + fabs(r[i]));
                size_t len = enc(c, x, r, n, &p, out, t, 0, NULL);
                ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
                for (size_t i = 0; i < n; i++) {
                    lhs[i] += o[i];
                    rhs[i] += x[i];
                    mag[i] += fabs(o[i]) + fabs(r[i]);
                }
            }
            for (size_t i = 0; i < n; i++)
                REQUIRE_MSG(fabs(lhs[i] + r[i] - rhs[i]) <= 0x1p-24 * mag[i], "%s rnd %u i=%zu", qnames[q], rnd, i);
        }
    free(x); free(r); free(o); free(lhs); free(rhs); free(mag); free(out);
}
END_TEST

/* A range encoded in one message or in grain-aligned pieces (the spans the
 * algorithms use) decodes to the same bits and leaves the same residual. */
START_TEST(test_partition_independent)
{
    const size_t n = 3 * 65536 + 4096 * 5 + 77;
    float *x = falloc(n), *r1 = falloc(n), *r2 = falloc(n), *o1 = falloc(n), *o2 = falloc(n);
    for (size_t q = 0; q < 3; q++)
        for (int var = 0; var < 4; var++) {
            int kind = hp_comp_find(qnames[q]);
            hipress_comp_params_t p = params(HP_ISA_AUTO, var & 1 ? 4096 : 0, (uint32_t)(var >> 1));
            size_t g = hp_comp_grain(kind, &p), cap = hp_msg_max_bytes(kind, n, &p);
            unsigned char *msg = malloc(cap);
            for (size_t parts = 2; parts <= 7; parts += 5) {
                hipress_encode_args_t a = {.in = x, .n = n, .residual = r1, .params = &p, .rng_key = {5}};
                size_t len;
                int nf;
                fill_grad(x, n, 7 + parts);
                fill_grad(r1, n, 8 + parts);
                memcpy(r2, r1, n * sizeof(float));
                ck_assert_int_eq(hp_msg_encode(kind, &a, msg, cap, &len, &nf), HP_OK);
                ck_assert_int_eq(hp_msg_decode(kind, msg, len, n, o1, 0, &p), HP_OK);
                for (size_t k = 0; k < parts; k++) {
                    size_t off = hp_span_off(n, parts, k, g), pl = hp_span_len(n, parts, k, g);
                    ck_assert_uint_eq(off % g, 0);
                    a.in = x + off;
                    a.n = pl;
                    a.residual = r2 + off;
                    a.rng_offset = off;
                    ck_assert_int_eq(hp_msg_encode(kind, &a, msg, cap, &len, &nf), HP_OK);
                    ck_assert_int_eq(hp_msg_decode(kind, msg, len, pl, o2 + off, 0, &p), HP_OK);
                }
                REQUIRE_MSG(!memcmp(o1, o2, 4 * n), "%s var %d parts %zu: results differ", qnames[q], var, parts);
                REQUIRE_MSG(!memcmp(r1, r2, 4 * n), "%s var %d parts %zu: residuals differ", qnames[q], var, parts);
            }
            free(msg);
        }
    free(x); free(r1); free(r2); free(o1); free(o2);
}
END_TEST

/* ---------------------------------------------------- identical on every ISA */

START_TEST(test_isa_identical)
{
    static const size_t ns[] = {1, 7, 31, 33, 1001, 2049, 4097, 70001};
    const size_t cap = 70001 + 32;
    float *x = falloc(cap), *r1 = falloc(cap), *r2 = falloc(cap), *o1 = falloc(cap), *o2 = falloc(cap);
    uint8_t *e1 = malloc(4 * cap + 64), *e2 = malloc(4 * cap + 64);
    if (hp_isa_detect() != HP_ISA_AVX2) {
        fprintf(stderr, "check_comp_qbits: no AVX2, ISA comparison skipped\n");
        goto out;
    }
    for (size_t q = 0; q < 3; q++)
        for (size_t s = 0; s < HP_ARRAY_SIZE(ns); s++)
            for (int var = 0; var < 8; var++) {
                uint32_t B = var & 1 ? 32 : var & 4 ? 4096 : 0, rnd = (var >> 1) & 1;
                hipress_comp_params_t pg = params(HP_ISA_GENERIC, B, rnd), pv = params(HP_ISA_AVX2, B, rnd);
                hp_comp_t *c = comp(qnames[q]);
                size_t n = ns[s], l1, l2;
                float *xs = x + (var & 1) + 1; /* odd element offsets */
                if (var & 4)
                    fill_awkward(xs, n, n + (uint64_t)var);
                else
                    fill_grad(xs, n, n + (uint64_t)var);
                fill_grad(r1, n, 2 * n + 1);
                memcpy(r2, r1, 4 * n);
                l1 = enc(c, xs, var == 6 ? NULL : r1, n, &pg, e1, 5, 3, NULL);
                l2 = enc(c, xs, var == 6 ? NULL : r2, n, &pv, e2, 5, 3, NULL);
                REQUIRE_MSG(l1 == l2 && !memcmp(e1, e2, l1), "%s n=%zu var=%d: bytes differ", c->name, n, var);
                REQUIRE_MSG(!memcmp(r1, r2, 4 * n), "%s n=%zu var=%d: residuals differ", c->name, n, var);
                for (int acc = 0; acc < 2; acc++) {
                    memcpy(o1, r1, 4 * n);
                    memcpy(o2, r1, 4 * n);
                    ck_assert_int_eq(c->decode(e1, l1, n, o1, acc, &pg), HIPRESS_COMP_OK);
                    ck_assert_int_eq(c->decode(e1, l1, n, o2, acc, &pv), HIPRESS_COMP_OK);
                    REQUIRE(!memcmp(o1, o2, 4 * n));
                }
            }
out:
    free(x); free(r1); free(r2); free(o1); free(o2); free(e1); free(e2);
}
END_TEST

/* ------------------------------------------------------------- NaN / Inf */

/* NaN, Inf and |g| >= 2^126 make the message non-finite, the residual
 * untouched; through hp_msg_encode_x the finite ones travel as exceptions;
 * a finite input whose sum with the residual is out of range drops that
 * element's error feedback. */
START_TEST(test_nonfinite_and_range)
{
    static const size_t ns[] = {1, 33, 5000};
    const float bad[5] = {NAN, INFINITY, -INFINITY, 0x1p126f, -FLT_MAX};
    const size_t cap = 5000;
    float *x = falloc(cap), *r = falloc(cap), *r0 = falloc(cap), *o = falloc(cap);
    uint8_t *msg = malloc(4 * cap + 64 + HP_MSG_EXCEPT_BYTES);
    for (size_t q = 0; q < 3; q++) {
        int kind = hp_comp_find(qnames[q]);
        for (uint32_t rnd = 0; rnd < 2; rnd++) {
            hipress_comp_params_t p = params(HP_ISA_AUTO, 0, rnd);
            for (int t = 0; t < 3 * 3 * 5 * 2; t++) { /* size, where, what, with a residual */
                const int w = t / 3 % 3, b = t / 9 % 5, withr = t / 45;
                size_t n = ns[t % 3], at = w == 0 ? 0 : w == 1 ? n / 2 : n - 1, len, k;
                hipress_encode_args_t a = {.in = x, .residual = withr ? r : NULL, .n = n, .params = &p};
                int nf = 0;
                fill_grad(x, n, n + (uint64_t)w);
                fill_grad(r, n, 3 * n);
                memcpy(r0, r, 4 * n);
                x[at] = bad[b];
                ck_assert_int_eq(hp_msg_encode(kind, &a, msg, hp_msg_max_bytes(kind, n, &p), &len, &nf), HP_OK);
                REQUIRE_MSG(nf == 1 && len == HP_MSG_HEADER, "%s n=%zu at %zu", qnames[q], n, at);
                REQUIRE(!memcmp(r, r0, 4 * n));
                ck_assert_int_eq(hp_msg_decode(kind, msg, len, n, o, 0, &p), HP_OK);
                for (size_t i = 0; i < n; i++)
                    REQUIRE(isnan(o[i]));
                if (b < 3)
                    continue;
                /* a finite out-of-range input: an exception */
                ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, hp_msg_max_bytes(kind, n, &p) + HP_MSG_EXCEPT_BYTES,
                                                 HP_SRC_INPUT, &len, &nf, &k), HP_OK);
                REQUIRE(nf == 0 && k == 1);
                REQUIRE(x[at] == bad[b]);
                ck_assert_int_eq(hp_msg_decode(kind, msg, len, n, o, 0, &p), HP_OK);
                for (size_t i = 0; i < n; i++)
                    REQUIRE(i == at ? o[i] == bad[b] : isfinite(o[i]));
                /* the residual there carries what it held (v = 0 + r) */
                if (withr)
                    REQUIRE(isfinite(r[at]) && fabsf(r[at]) <= 2.0f * fabsf(r0[at]) + 0.1f);
            }
            /* in + r out of range for a finite input in range: v = in there */
            for (int how = 0; how < 2; how++) {
                const size_t n = 3000, at = 2500;
                fill_grad(x, n, 8);
                fill_grad(r, n, 9);
                x[at] = how ? 1.0f : 0x1.fffffep125f;
                r[at] = how ? FLT_MAX : 0x1p125f;
                memcpy(r0, r, 4 * n);
                size_t len = enc(comp(qnames[q]), x, r, n, &p, msg, 1, 0, NULL);
                ck_assert_int_eq(comp(qnames[q])->decode(msg, len, n, o, 0, &p), HIPRESS_COMP_OK);
                r0[at] = 0.0f; /* v = x there */
                for (size_t i = 0; i < n; i++)
                    REQUIRE(isfinite(o[i]) && hp_f2u(r[i]) == hp_f2u((x[i] + r0[i]) - o[i]));
            }
        }
    }
    free(x); free(r); free(r0); free(o); free(msg);
}
END_TEST

/* ------------------------------------------------------ malformed messages */

static int dec(hp_comp_t *c, const uint8_t *msg, size_t len, size_t n, const hipress_comp_params_t *p)
{
    float *o = falloc(n + 32);
    int rc;
    for (size_t i = 0; i < n + 32; i++)
        o[i] = 1.0f;
    rc = c->decode(msg, len, n, o + 16, 1, p);
    for (size_t i = 0; i < 16; i++)
        REQUIRE_MSG(o[i] == 1.0f && o[n + 16 + i] == 1.0f, "%s wrote outside out[0..n)", c->name);
    free(o);
    return rc;
}

static void put_f(uint8_t *p, float f) { memcpy(p, &f, 4); }

START_TEST(test_reject)
{
    const size_t n = 1001; /* padding bits for q2 and q4 */
    float x[1001];
    uint8_t e[4200], m[4200];
    fill_grad(x, n, 51);
    for (size_t q = 0; q < 3; q++) {
        hipress_comp_params_t p = params(HP_ISA_AUTO, 256, 0);
        hp_comp_t *c = comp(qnames[q]);
        const unsigned b = qb[q], L = (1u << b) - 1u;
        const float badmin[] = {NAN, INFINITY, -INFINITY, 0x1p126f, -0x1p126f};
        const float badgap[] = {-1.0f, -0.0f, NAN, INFINITY, 0x1p127f / (float)L * 1.001f};
        size_t len = enc(c, x, NULL, n, &p, e, 1, 0, NULL), nb = (n + 255) / 256;
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        ck_assert_int_eq(dec(c, e, len - 1, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len + 1, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len, n - 1, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len, n + 64, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, 0, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len, n, &(hipress_comp_params_t){.q_block = 100}), HIPRESS_COMP_EINVAL);
        for (size_t j = 0; j < HP_ARRAY_SIZE(badmin); j++) {
            memcpy(m, e, len);
            put_f(m + 8 * (nb - 1), badmin[j]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
            memcpy(m, e, len);
            put_f(m + 4, badgap[j]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        /* the largest gap an encoder can make is accepted */
        memcpy(m, e, len);
        put_f(m + 4, 0x1p127f / (float)L);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        /* a min-only block with a code other than 0 */
        memcpy(m, e, len);
        put_f(m + 4, 0.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memset(m + 8 * nb, 0, 256 * b / 8);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        /* nonzero padding after element n - 1 */
        if ((n * b) % 8) {
            memcpy(m, e, len);
            m[len - 1] |= 0x80;
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        /* garbage of the right length: accepted or rejected, never outside out */
        rng_state = 99 + q;
        for (int t = 0; t < 300; t++) {
            for (size_t i = 0; i < len; i++)
                m[i] = (uint8_t)next_u64();
            for (size_t j = 0; t % 2 && j < nb; j++) { /* plausible pairs, random codes */
                put_f(m + 8 * j, (float)(next_unit() - 0.5));
                put_f(m + 8 * j + 4, (float)next_unit());
            }
            int rc = dec(c, m, len, n, &p);
            REQUIRE(rc == HIPRESS_COMP_OK || rc == HIPRESS_COMP_EINVAL);
        }
    }
}
END_TEST

/* ------------------------------------------------------------- settings */

/* The parameters from the settings (their parsing: tests/unit/check_core.c). */
START_TEST(test_settings)
{
    hp_config_t cfg;
    hipress_comp_params_t p;
    char err[256];
    char *def[] = {NULL}, *set[] = {"HIPRESS_Q_BLOCK=32", "HIPRESS_Q_ROUNDING=stochastic", NULL};
    ck_assert_int_eq(hp_config_load(&cfg, def, NULL, err, sizeof(err)), HP_OK);
    hp_params_from_config(&cfg, &p);
    REQUIRE(p.q_block == 512 && p.q_rounding == 0);
    ck_assert_int_eq(hp_config_load(&cfg, set, NULL, err, sizeof(err)), HP_OK);
    hp_params_from_config(&cfg, &p);
    REQUIRE(p.q_block == 32 && p.q_rounding == 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("comp_qbits");
    TCase *t = tcase_create("qbits");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_ops_isa_identical);
    tcase_add_test(t, test_ops_minmax_zero_ties);
    tcase_add_test(t, test_wire_sizes);
    tcase_add_test(t, test_grid_exact);
    tcase_add_test(t, test_bounds);
    tcase_add_test(t, test_stochastic_unbiased);
    tcase_add_test(t, test_rng_q_formula);
    tcase_add_test(t, test_rng_q_paths);
    tcase_add_test(t, test_rng_q_stats);
    tcase_add_test(t, test_error_feedback);
    tcase_add_test(t, test_partition_independent);
    tcase_add_test(t, test_isa_identical);
    tcase_add_test(t, test_nonfinite_and_range);
    tcase_add_test(t, test_reject);
    tcase_add_test(t, test_settings);
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
