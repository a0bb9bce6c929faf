/*
 * check_comp_sparse (check_comp_sparse.c): which elements are sent -- wire
 * sizes and the exact top-k over sizes around the vector width and the
 * exact/sampled switch, an explicit k, ties and zeros -- and what stays:
 * graddrop's error feedback, dgc's momentum.
 */
#include "check_comp_sparse.h"

static const size_t sizes[] = {1, 31, 32, 33, 4095, 4097, 1000007};

/* Wire size within hp_msg_max_bytes and the payload within max_payload
 * (8k), exact top-k of v, decodable, for the sizes around the vector width
 * and the exact/sampled switch. */
START_TEST(wire_size_and_topk)
{
    const char *name = sparse_names[_i];
    int kind = kind_of(name);
    hp_comp_t *c = hp_comp_get(kind);
    hipress_comp_params_t p = params(0);

    for (size_t si = 0; si < HP_ARRAY_SIZE(sizes); si++) {
        size_t n = sizes[si], k = hp_sparse_k_blocks(n, &p);
        float *g = fvec(n), *r = fvec(n), *u = fvec(n), *v = fvec(n), *out = fvec(n);
        int dgc = strcmp(name, "dgc") == 0;
        enc_t e;

        rng_seed(n);
        fill_normal(g, n, 1.0f);
        fill_normal(r, n, 0.1f);
        fill_normal(u, n, 0.5f);
        v_of(g, r, dgc ? u : NULL, p.dgc_momentum, n, v);
        e = encode_msg(kind, g, r, dgc ? u : NULL, n, 0, &p, 42);
        ck_assert_int_eq(e.st, HP_OK);
        ck_assert_int_eq(e.nonfinite, 0);
        ck_assert_msg(e.len <= hp_msg_max_bytes(kind, n, &p), "%s n=%zu: %zu bytes > bound",
                      name, n, e.len);
        ck_assert_msg(e.len - HP_MSG_HEADER <= c->max_payload(n, &p), "%s n=%zu: payload > max_payload", name, n);
        ck_assert_msg(c->max_payload(n, &p) == 8 * k, "%s: max_payload(%zu) != 8k", name, n);
        ck_assert_uint_eq(e.msg[1], (unsigned)kind);
        /* random data has no zeros: exactly k elements are sent */
        ck_assert_uint_eq(e.len - HP_MSG_HEADER, 8 * k);
        expect_topk_payload(e.msg + HP_MSG_HEADER, e.len - HP_MSG_HEADER, v, n, 0, name, &p);
        ck_assert_int_eq(hp_msg_decode(kind, e.msg, e.len, n, out, 0, &p), HP_OK);
        {
            size_t nz = 0;
            for (size_t i = 0; i < n; i++)
                nz += out[i] != 0.0f;
            ck_assert_uint_eq(nz, k);
        }
        free(e.msg);
        free(g), free(r), free(u), free(v), free(out);
    }
}
END_TEST

/* A larger k (the framework's k2 for a re-encoded aggregate), k >= n, and a
 * payload buffer below 8k. */
START_TEST(explicit_k)
{
    const char *name = sparse_names[_i];
    hp_comp_t *c = hp_comp_get(kind_of(name));
    hipress_comp_params_t p = params(0);
    const size_t n = 200003;
    const size_t ks[] = {1, 7, 1000, 20000, 60000, n, n + 5};
    float *g = fvec(n), *v = fvec(n);
    unsigned char *out = (unsigned char *)malloc(8 * (n + 5));
    hipress_encode_args_t a;

    rng_seed(99);
    fill_normal(g, n, 2.0f);
    memcpy(v, g, n * sizeof(float)); /* no residual, no state: v = g */
    for (size_t t = 0; t < HP_ARRAY_SIZE(ks); t++) {
        size_t len = 1, kk = ks[t] < n ? ks[t] : n;
        int nf = -1;
        memset(&a, 0, sizeof(a));
        a.in = g;
        a.n = n;
        a.k = ks[t];
        a.params = &p;
        a.out = out;
        a.out_cap = 8 * kk;
        ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
        ck_assert_int_eq(nf, 0);
        expect_topk_payload(out, len, v, n, kk, name, &p);
        a.out_cap = 8 * kk - 1;
        ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_ENOSPC);
    }
    free(g), free(v), free(out);
}
END_TEST

/* Heavy ties (values from a small set, zeros among them): exactly the
 * reference selection, zeros never sent, fewer than k when v has fewer
 * non-zeros. */
START_TEST(ties_and_zeros)
{
    const char *name = sparse_names[_i];
    hp_comp_t *c = hp_comp_get(kind_of(name));
    const size_t ns[] = {100, 5000, 300000};
    const size_t ks[] = {1, 3, 50, 700, 4000};

    for (size_t ni = 0; ni < HP_ARRAY_SIZE(ns); ni++) {
        size_t n = ns[ni];
        float *g = fvec(n);
        unsigned char *out = (unsigned char *)malloc(8 * n);
        rng_seed(n + 1);
        for (size_t i = 0; i < n; i++) {
            double x = rng_unit();
            /* 60% zeros (+0 and -0), the rest from {+-1, +-2, +-4} */
            g[i] = x < 0.3 ? 0.0f : x < 0.6 ? -0.0f : (float)(1 << (int)(rng_unit() * 3)) * (x < 0.8 ? -1.0f : 1.0f);
        }
        for (size_t ki = 0; ki < HP_ARRAY_SIZE(ks); ki++) {
            for (int isa = 1; isa <= 2; isa++) {
                hipress_comp_params_t p = params(isa);
                hipress_encode_args_t a;
                size_t len = 0, k = ks[ki] < n ? ks[ki] : n;
                int nf = -1;
                memset(&a, 0, sizeof(a));
                a.in = g;
                a.n = n;
                a.k = k;
                a.params = &p;
                a.out = out;
                a.out_cap = 8 * n;
                ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
                expect_topk_payload(out, len, g, n, k, name, &p);
            }
        }
        /* all zeros: an empty payload that decodes to zeros */
        memset(g, 0, n * sizeof(float));
        {
            hipress_comp_params_t p = params(0);
            float *r = fvec(n), *d = fvec(n);
            enc_t e = encode_msg(kind_of(name), g, r, NULL, n, 0, &p, 1);
            ck_assert_int_eq(e.st, HP_OK);
            ck_assert_uint_eq(e.len, HP_MSG_HEADER);
            for (size_t i = 0; i < n; i++)
                d[i] = 5.0f;
            ck_assert_int_eq(hp_msg_decode(kind_of(name), e.msg, e.len, n, d, 0, &p), HP_OK);
            for (size_t i = 0; i < n; i++)
                ck_assert(d[i] == 0.0f);
            free(e.msg), free(r), free(d);
        }
        free(g), free(out);
    }
}
END_TEST

/* graddrop error feedback over T steps: per element, the decoded outputs
 * plus the final residual add up to the inputs (to float rounding), the sent
 * residual entries are zero and the unsent ones hold v. */
START_TEST(graddrop_error_feedback)
{
    const int kind = kind_of("graddrop");
    hipress_comp_params_t p = params(0);
    const size_t n = 50021;
    const int T = 12;
    float *g = fvec(n), *r = fvec(n), *v = fvec(n), *d = fvec(n);
    double *sum_in = (double *)calloc(n, sizeof(double));
    double *sum_out = (double *)calloc(n, sizeof(double));
    double *sum_abs = (double *)calloc(n, sizeof(double));

    p.sparse_ratio = 0.01;
    rng_seed(2024);
    for (int t = 0; t < T; t++) {
        enc_t e;
        fill_normal(g, n, 1.0f);
        v_of(g, r, NULL, 0.0f, n, v);
        e = encode_msg(kind, g, r, NULL, n, 0, &p, (uint64_t)t);
        ck_assert_int_eq(e.st, HP_OK);
        expect_topk_payload(e.msg + HP_MSG_HEADER, e.len - HP_MSG_HEADER, v, n, 0, "graddrop", &p);
        ck_assert_int_eq(hp_msg_decode(kind, e.msg, e.len, n, d, 0, &p), HP_OK);
        for (size_t i = 0; i < n; i++) {
            /* residual = v where unsent, 0 where sent; decoded = v where sent */
            if (d[i] != 0.0f)
                ck_assert(r[i] == 0.0f && fbits(d[i]) == fbits(v[i]));
            else
                ck_assert(fbits(r[i]) == fbits(v[i]));
            sum_in[i] += g[i];
            sum_out[i] += d[i];
            sum_abs[i] += fabs(g[i]) + fabs(v[i]);
        }
        free(e.msg);
    }
    for (size_t i = 0; i < n; i++) {
        double err = fabs(sum_out[i] + r[i] - sum_in[i]);
        ck_assert_msg(err <= 1e-6 * sum_abs[i] + 1e-30, "element %zu: outputs + residual off the inputs by %g",
                      i, err);
    }
    free(g), free(r), free(v), free(d), free(sum_in), free(sum_out), free(sum_abs);
}
END_TEST

/* dgc over T steps: u and v are masked at the sent indices, u holds the
 * momentum-corrected gradient elsewhere, and the sent values plus the final
 * v add up to the sum of the momentum-corrected u over the steps.  With
 * momentum 0 dgc sends the same bytes as graddrop. */
START_TEST(dgc_momentum_feedback)
{
    const int kind = kind_of("dgc"), gd = kind_of("graddrop");
    hipress_comp_params_t p = params(0);
    const size_t n = 40009;
    const int T = 10;
    const float m = 0.9f;   /* the correction for an optimizer without momentum */
    float *g = fvec(n), *u = fvec(n), *r = fvec(n), *uc = fvec(n), *v = fvec(n), *d = fvec(n);
    double *sum_u = (double *)calloc(n, sizeof(double));
    double *sum_out = (double *)calloc(n, sizeof(double));
    double *sum_abs = (double *)calloc(n, sizeof(double));

    /* off by default: most optimizers have momentum of their own */
    ck_assert(p.dgc_momentum == 0.0f);
    p.dgc_momentum = m;
    p.sparse_ratio = 0.005;
    rng_seed(77);
    for (int t = 0; t < T; t++) {
        enc_t e;
        fill_normal(g, n, 1.0f);
        for (size_t i = 0; i < n; i++)
            uc[i] = m * u[i] + g[i];
        v_of(g, r, u, m, n, v);
        e = encode_msg(kind, g, r, u, n, 0, &p, (uint64_t)t);
        ck_assert_int_eq(e.st, HP_OK);
        expect_topk_payload(e.msg + HP_MSG_HEADER, e.len - HP_MSG_HEADER, v, n, 0, "dgc", &p);
        ck_assert_int_eq(hp_msg_decode(kind, e.msg, e.len, n, d, 0, &p), HP_OK);
        for (size_t i = 0; i < n; i++) {
            if (d[i] != 0.0f) {
                ck_assert(r[i] == 0.0f && u[i] == 0.0f);
            } else {
                ck_assert(fbits(r[i]) == fbits(v[i]));
                ck_assert(fbits(u[i]) == fbits(uc[i]));
            }
            sum_u[i] += uc[i];
            sum_out[i] += d[i];
            sum_abs[i] += fabs(uc[i]) + fabs(v[i]);
        }
        free(e.msg);
    }
    for (size_t i = 0; i < n; i++) {
        double err = fabs(sum_out[i] + r[i] - sum_u[i]);
        ck_assert_msg(err <= 1e-6 * sum_abs[i] + 1e-30, "element %zu: sent + v off the corrected u by %g", i, err);
    }

    /* momentum 0: u' = g, v = r + g, the bytes of graddrop */
    {
        float *r1 = fvec(n), *r2, *u1 = fvec(n);
        enc_t a, b;
        fill_normal(g, n, 1.0f);
        fill_normal(r1, n, 0.3f);
        fill_normal(u1, n, 0.3f);
        r2 = fdup(r1, n);
        p.dgc_momentum = 0.0f;
        a = encode_msg(kind, g, r1, u1, n, 0, &p, 5);
        b = encode_msg(gd, g, r2, NULL, n, 0, &p, 5);
        ck_assert_uint_eq(a.len, b.len);
        ck_assert(memcmp(a.msg + 2, b.msg + 2, a.len - 2) == 0);
        ck_assert(memcmp(r1, r2, n * sizeof(float)) == 0);
        free(a.msg), free(b.msg), free(r1), free(r2), free(u1);
    }
    free(g), free(u), free(r), free(uc), free(v), free(d), free(sum_u), free(sum_out), free(sum_abs);
}
END_TEST

/* The first tests of the "sparse" case. */
void sparse_select_tests(TCase *tc)
{
    tcase_add_loop_test(tc, wire_size_and_topk, 0, 2);
    tcase_add_loop_test(tc, explicit_k, 0, 2);
    tcase_add_loop_test(tc, ties_and_zeros, 0, 2);
    tcase_add_test(tc, graddrop_error_feedback);
    tcase_add_test(tc, dgc_momentum_feedback);
}
