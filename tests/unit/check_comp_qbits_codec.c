/*
 * check_comp_qbits (check_comp_qbits.c): the q codecs themselves -- exact
 * round trips on the grid, error bounds, unbiased stochastic rounding;
 * error feedback, partition independence, identical bytes on every ISA
 * path, NaN / Inf and range, malformed messages, the parameters from the
 * settings.
 */
#include "check_comp_qbits.h"

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

/* The "qbits" case: the bounds, after the operators. */
void qbits_bounds_tests(TCase *t)
{
    tcase_add_test(t, test_grid_exact);
    tcase_add_test(t, test_bounds);
    tcase_add_test(t, test_stochastic_unbiased);
}

/* The "qbits" case: the last tests, after the generator's. */
void qbits_codec_tests(TCase *t)
{
    tcase_add_test(t, test_error_feedback);
    tcase_add_test(t, test_partition_independent);
    tcase_add_test(t, test_isa_identical);
    tcase_add_test(t, test_nonfinite_and_range);
    tcase_add_test(t, test_reject);
    tcase_add_test(t, test_settings);
}
