/*
 * check_comp_sparse (check_comp_sparse.c): the same bytes on every ISA
 * path and RNG key, NaN / Inf in the input, the threshold's fallback, the
 * decoder's validation, the operators alone.
 */
#include "check_comp_sparse.h"

/* The same input gives the same bytes, residual and state: on every ISA
 * path, and under any RNG key (the sample only steers speed). */
START_TEST(isa_paths_and_keys_same_bytes)
{
    const char *name = sparse_names[_i];
    int kind = kind_of(name), dgc = strcmp(name, "dgc") == 0;
    const size_t ns[] = {1, 7, 33, 4097, 100003, 1000007};

    for (size_t ni = 0; ni < HP_ARRAY_SIZE(ns); ni++) {
        size_t n = ns[ni];
        float *g = fvec(n), *r0 = fvec(n), *u0 = fvec(n);
        enc_t ref;
        float *rr, *ur;
        hipress_comp_params_t p0 = params(1);

        rng_seed(n * 3);
        fill_normal(g, n, 1.0f);
        fill_normal(r0, n, 0.2f);
        fill_normal(u0, n, 0.2f);
        rr = fdup(r0, n);
        ur = fdup(u0, n);
        ref = encode_msg(kind, g, rr, dgc ? ur : NULL, n, 0, &p0, 1);
        ck_assert_int_eq(ref.st, HP_OK);
        for (int isa = 0; isa <= 2; isa++) {
            for (uint64_t seed = 1; seed <= 3; seed++) {
                hipress_comp_params_t p = params(isa);
                float *r = fdup(r0, n), *u = fdup(u0, n);
                enc_t e = encode_msg(kind, g, r, dgc ? u : NULL, n, 0, &p, seed);
                ck_assert_int_eq(e.st, HP_OK);
                ck_assert_msg(e.len == ref.len && memcmp(e.msg, ref.msg, e.len) == 0,
                              "%s n=%zu isa=%d seed=%llu: bytes differ from the generic path", name,
                              n, isa, (unsigned long long)seed);
                ck_assert_msg(memcmp(r, rr, n * sizeof(float)) == 0, "%s n=%zu isa=%d: residual differs", name, n, isa);
                ck_assert_msg(memcmp(u, ur, n * sizeof(float)) == 0, "%s n=%zu isa=%d: state differs", name, n, isa);
                free(e.msg), free(r), free(u);
            }
        }
        /* without residual (no error feedback) as well */
        {
            hipress_comp_params_t p1 = params(1), p2 = params(2);
            enc_t a = encode_msg(kind, g, NULL, NULL, n, 0, &p1, 9);
            enc_t b = encode_msg(kind, g, NULL, NULL, n, 0, &p2, 10);
            ck_assert(a.len == b.len && memcmp(a.msg, b.msg, a.len) == 0);
            expect_topk_payload(a.msg + HP_MSG_HEADER, a.len - HP_MSG_HEADER, g, n, 0, name, &p1);
            free(a.msg), free(b.msg);
        }
        free(ref.msg), free(g), free(r0), free(u0), free(rr), free(ur);
    }
}
END_TEST

/* NaN / Inf in the input: the header flag, a header-only message that
 * decodes to NaN, residual and state untouched.  A finite input whose v
 * overflows gives the same message and resets residual and state to zero. */
START_TEST(nonfinite_input)
{
    const char *name = sparse_names[_i];
    int kind = kind_of(name), dgc = strcmp(name, "dgc") == 0;
    hipress_comp_params_t p = params(0);
    const size_t ns[] = {5, 4097, 70001};
    const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};

    for (size_t ni = 0; ni < HP_ARRAY_SIZE(ns); ni++) {
        size_t n = ns[ni];
        for (size_t b = 0; b <= HP_ARRAY_SIZE(bad); b++) {
            for (int isa = 1; isa <= 2; isa++) {
                float *g = fvec(n), *r = fvec(n), *u = fvec(n), *r0, *u0, *d = fvec(n);
                size_t at = (n * (b + 1)) / 7;
                enc_t e;
                p.isa = isa;
                rng_seed(n + b);
                fill_normal(g, n, 1.0f);
                fill_normal(r, n, 1.0f);
                fill_normal(u, n, 1.0f);
                if (b < HP_ARRAY_SIZE(bad)) {
                    g[at] = bad[b];
                } else {
                    /* finite input whose v overflows */
                    g[at] = 3.0e38f;
                    r[at] = 3.0e38f;
                }
                r0 = fdup(r, n);
                u0 = fdup(u, n);
                e = encode_msg(kind, g, r, dgc ? u : NULL, n, 0, &p, 3);
                ck_assert_int_eq(e.st, HP_OK);
                ck_assert_int_eq(e.nonfinite, 1);
                ck_assert_uint_eq(e.len, HP_MSG_HEADER);
                ck_assert_uint_eq(e.msg[2], HP_MSG_NONFINITE);
                if (b < HP_ARRAY_SIZE(bad)) {
                    ck_assert_msg(memcmp(r, r0, n * sizeof(float)) == 0, "%s: residual changed on NaN/Inf", name);
                    ck_assert_msg(memcmp(u, u0, n * sizeof(float)) == 0, "%s: state changed on NaN/Inf", name);
                } else {
                    /* overflow: error feedback restarts from zero */
                    for (size_t i = 0; i < n; i++)
                        ck_assert(r[i] == 0.0f && (dgc ? u[i] == 0.0f : u[i] == u0[i]));
                }
                ck_assert_int_eq(hp_msg_decode(kind, e.msg, e.len, n, d, 1, &p), HP_OK);
                for (size_t i = 0; i < n; i++)
                    ck_assert(isnan(d[i]));
                free(e.msg), free(g), free(r), free(u), free(r0), free(u0), free(d);
            }
        }
    }
}
END_TEST

/* The fallback when fewer than k pass the first threshold: find (by search,
 * deterministically) an RNG key whose first sampled threshold lets fewer
 * than k elements through, and check the encoder still sends the exact
 * top-k with it. */
START_TEST(threshold_fallback)
{
    const int kind = kind_of("graddrop");
    hp_comp_t *c = hp_comp_get(kind);
    hipress_comp_params_t p = params(0);
    const size_t n = 20000, k = 40;
    float *g = fvec(n);
    unsigned char *out = (unsigned char *)malloc(8 * k);
    uint32_t *scratch = (uint32_t *)malloc(n * sizeof(uint32_t));
    hp_sparse_src_t src = {g, NULL, NULL, 0.0f};
    uint64_t found = 0;
    int hit = 0;

    rng_seed(11);
    fill_normal(g, n, 1.0f);
    for (uint64_t seed = 1; seed < 200000 && !hit; seed++) {
        uint64_t key4[4] = {seed, 0, 0, 0};
        size_t s, pass = 0;
        uint32_t thr = hp_sparse_threshold(&src, n, k, p.sample_ratio, hp_rng_key(key4), 0, 0,
                                           scratch, &s);
        ck_assert_uint_eq(s, HP_SPARSE_MIN_SAMPLE);
        for (size_t i = 0; i < n; i++)
            pass += absbits(g[i]) >= thr;
        if (pass < k) {
            hit = 1;
            found = seed;
        }
    }
    ck_assert_msg(hit, "no RNG key found whose sampled threshold passes fewer than k");
    {
        hipress_encode_args_t a;
        size_t len = 0;
        int nf = -1;
        memset(&a, 0, sizeof(a));
        a.in = g;
        a.n = n;
        a.params = &p;
        a.out = out;
        a.out_cap = 8 * k;
        a.k = k;
        a.rng_key[0] = found;
        ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
        expect_topk_payload(out, len, g, n, k, "graddrop (fallback)", &p);
    }
    /* deeper levels never raise the threshold */
    {
        uint64_t key4[4] = {found, 0, 0, 0};
        uint32_t prev = UINT32_MAX;
        size_t s;
        for (int level = 0; level < 8; level++) {
            uint32_t t = hp_sparse_threshold(&src, n, k, p.sample_ratio, hp_rng_key(key4), 0,
                                             level, scratch, &s);
            ck_assert_uint_le(t, prev);
            prev = t;
        }
        ck_assert_uint_eq(prev, 1);
    }
    free(g), free(out), free(scratch);
}
END_TEST

/* The decoder: accumulate adds, overwrite zero-fills; every malformed
 * payload is rejected with out left exactly as it was. */
START_TEST(decode_validation)
{
    const char *name = sparse_names[_i];
    hp_comp_t *c = hp_comp_get(kind_of(name));
    hipress_comp_params_t p = params(0);
    const size_t n = 10;
    float out[10], keep[10];
    unsigned char buf[8 * 12];

#define PAIR(j, i, v) do { uint32_t i_ = (i); float v_ = (v); memcpy(buf + 8 * (j), &i_, 4); memcpy(buf + 8 * (j) + 4, &v_, 4); } while (0)
    PAIR(0, 1, 1.5f);
    PAIR(1, 4, -2.0f);
    PAIR(2, 9, 3.0f);
    for (size_t i = 0; i < n; i++)
        out[i] = (float)i;
    ck_assert_int_eq(c->decode(buf, 24, n, out, 1, &p), HIPRESS_COMP_OK);
    ck_assert(out[0] == 0.0f && out[1] == 2.5f && out[4] == 2.0f && out[9] == 12.0f && out[5] == 5.0f);
    ck_assert_int_eq(c->decode(buf, 24, n, out, 0, &p), HIPRESS_COMP_OK);
    ck_assert(out[0] == 0.0f && out[1] == 1.5f && out[4] == -2.0f && out[9] == 3.0f && out[5] == 0.0f);
    ck_assert_int_eq(c->decode(buf, 0, n, out, 0, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert(out[i] == 0.0f);

    for (int bad = 0; bad < 9; bad++) {
        size_t len = 24;
        PAIR(0, 1, 1.5f);
        PAIR(1, 4, -2.0f);
        PAIR(2, 9, 3.0f);
        switch (bad) {
        case 0: len = 23; break;                    /* truncated */
        case 1: len = 20; break;
        case 2: PAIR(2, 10, 3.0f); break;           /* index == n */
        case 3: PAIR(2, 0xffffffffu, 3.0f); break;  /* far out of range */
        case 4: PAIR(1, 1, 3.0f); break;            /* duplicate */
        case 5: PAIR(1, 0, 3.0f); break;            /* unsorted */
        case 6: PAIR(1, 4, NAN); break;             /* non-finite value */
        case 7: PAIR(1, 4, -INFINITY); break;
        case 8:                                     /* more pairs than n */
            for (uint32_t j = 0; j < 11; j++)
                PAIR(j, j, 1.0f);
            len = 88;
            break;
        }
        for (int acc = 0; acc <= 1; acc++) {
            for (size_t i = 0; i < n; i++)
                out[i] = keep[i] = (float)(i * 3);
            ck_assert_msg(c->decode(buf, len, n, out, acc, &p) == HIPRESS_COMP_EINVAL,
                          "%s accepted malformed payload %d", name, bad);
            ck_assert_msg(memcmp(out, keep, sizeof(out)) == 0, "%s wrote out on malformed payload %d", name, bad);
        }
    }
#undef PAIR
}
END_TEST

/* Operators directly: the filter stops at its capacity and resumes, finds
 * exactly the elements at or above the threshold and flags NaN / Inf
 * wherever they are (vector body or tail); top-k keeps index order. */
START_TEST(operators)
{
    const size_t n = 1000;
    float *g = fvec(n), *r = fvec(n);
    uint32_t idx[1000], all[1000], scratch[2000];
    hp_sparse_src_t src = {g, r, NULL, 0.0f};

    rng_seed(5);
    fill_normal(g, n, 1.0f);
    fill_normal(r, n, 1.0f);
    for (int isa = 1; isa <= 2; isa++) {
        size_t pos = 0, m = 0, total = 0;
        uint32_t thr = fbits(1.0f);
        int bad = 0;
        /* capacities of 1..70 entries force stops inside and between blocks */
        for (size_t cap = 1; pos < n; cap = cap % 70 + 1) {
            size_t got = hp_sparse_filter(&src, n, thr, &pos, idx + m, cap, &bad, isa);
            ck_assert_uint_le(got, cap);
            m += got;
        }
        for (size_t i = 0; i < n; i++) {
            float v = r[i] + g[i];
            if (absbits(v) >= thr)
                all[total++] = (uint32_t)i;
        }
        ck_assert_int_eq(bad, 0);
        ck_assert_uint_eq(m, total);
        ck_assert(memcmp(idx, all, m * sizeof(uint32_t)) == 0);
        {
            size_t kept = hp_sparse_topk(&src, idx, m, 17, scratch);
            ck_assert_uint_eq(kept, 17);
            for (size_t j = 1; j < kept; j++)
                ck_assert_uint_lt(idx[j - 1], idx[j]);
        }
        /* the fused pass: same indices, and the state updated in place */
        {
            float *g2 = fvec(n), *r2 = fdup(r, n), *u2 = fvec(n), *want_u = fvec(n), *want_r = fvec(n);
            hp_sparse_src_t s2 = {g2, r2, u2, 0.75f};
            uint32_t got[1000];
            size_t p2 = 0, m2 = 0;
            int bad2 = 0;
            fill_normal(g2, n, 1.0f);
            fill_normal(u2, n, 1.0f);
            for (size_t i = 0; i < n; i++) {
                want_u[i] = 0.75f * u2[i] + g2[i];
                want_r[i] = r2[i] + want_u[i];
            }
            for (size_t cap = 3; p2 < n; cap = cap % 70 + 1)
                m2 += hp_sparse_filter_commit(&s2, r2, u2, n, thr, &p2, got + m2, cap, &bad2, isa);
            ck_assert_int_eq(bad2, 0);
            ck_assert(memcmp(u2, want_u, n * sizeof(float)) == 0);
            ck_assert(memcmp(r2, want_r, n * sizeof(float)) == 0);
            total = 0;
            for (size_t i = 0; i < n; i++)
                if (absbits(want_r[i]) >= thr)
                    all[total++] = (uint32_t)i;
            ck_assert_uint_eq(m2, total);
            ck_assert(memcmp(got, all, m2 * sizeof(uint32_t)) == 0);
            /* not in place: refused */
            p2 = 0;
            ck_assert_uint_eq(hp_sparse_filter_commit(&s2, want_r, u2, n, thr, &p2, got, n, &bad2, isa), 0);
            ck_assert_uint_eq(p2, 0);
            free(g2), free(r2), free(u2), free(want_u), free(want_r);
        }
        /* the finite check, with one NaN or Inf anywhere */
        ck_assert_int_eq(hp_ops_get(isa)->nonfinite(g, n), 0);
        for (size_t at = 0; at < n; at += 13) {
            float keep = g[at];
            g[at] = at % 2 ? -INFINITY : NAN;
            ck_assert_msg(hp_ops_get(isa)->nonfinite(g, n) == 1, "isa %d: nonfinite missed %zu", isa, at);
            g[at] = keep;
        }
        /* one Inf at every position, found by a single filter call */
        for (size_t at = 0; at < n; at += 37) {
            float keep = g[at];
            size_t p0 = 0;
            g[at] = at % 2 ? INFINITY : NAN;
            bad = 0;
            hp_sparse_filter(&src, n, thr, &p0, idx, n, &bad, isa);
            ck_assert_msg(bad == 1, "isa %d missed a non-finite v at %zu", isa, at);
            g[at] = keep;
        }
    }
    free(g), free(r);
}
END_TEST

/* The last tests of the "sparse" case. */
void sparse_paths_tests(TCase *tc)
{
    tcase_add_loop_test(tc, isa_paths_and_keys_same_bytes, 0, 2);
    tcase_add_loop_test(tc, nonfinite_input, 0, 2);
    tcase_add_test(tc, threshold_fallback);
    tcase_add_loop_test(tc, decode_validation, 0, 2);
    tcase_add_test(tc, operators);
}
