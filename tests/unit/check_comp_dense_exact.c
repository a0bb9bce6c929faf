/*
 * check_comp_dense (check_comp_dense.c): terngrad (unbiased, constant
 * input, seeds, blocks), identical bytes on every ISA path, decode by
 * adding, NaN / Inf and overflow.
 */
#include "check_comp_dense.h"

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

/* The middle tests of the "compressors" case. */
void dense_exact_tests(TCase *t)
{
    tcase_add_test(t, test_terngrad_unbiased);
    tcase_add_test(t, test_terngrad_constant_and_seed);
    tcase_add_test(t, test_terngrad_blocks);
    tcase_add_test(t, test_compressors_isa_identical);
    tcase_add_test(t, test_accumulate);
    tcase_add_test(t, test_nonfinite);
    tcase_add_test(t, test_overflow);
}
