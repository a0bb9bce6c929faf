/*
 * check_comp_qbits (check_comp_qbits.c): the operators under the q codecs
 * (the same bytes from the generic and AVX2 tables; min/max with zeros and
 * ties) and the codecs' wire sizes.
 */
#include "check_comp_qbits.h"

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

static size_t want_payload(unsigned b, size_t n, size_t B)
{
    return 8 * ((n + B - 1) / B) + (n * b + 7) / 8;
}

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

/* The first tests of the "qbits" case. */
void qbits_ops_tests(TCase *t)
{
    tcase_add_test(t, test_ops_isa_identical);
    tcase_add_test(t, test_ops_minmax_zero_ties);
    tcase_add_test(t, test_wire_sizes);
}
