/*
 * check_comp_powersgd (check_comp_powersgd.c): the local (ABI) encode and
 * decode -- exact round trips of low-rank matrices, error feedback, the
 * skip rule, a short output buffer, the same bytes on every ISA path -- and
 * the decoder's validation.
 */
#include "check_comp_powersgd.h"

/* ------------------------------------------------- ABI encode/decode */

static void round_trip_lowrank(size_t n, size_t rank_m, uint32_t r)
{
    size_t m, c, rr;
    hipress_comp_params_t p = params_rank(r);
    size_t cap = psgd()->max_payload(n, &p);
    unsigned char *msg = malloc(cap);
    float *v, *out = malloc(n * sizeof(float));
    int nonfinite = 1;
    size_t len;
    double scale;

    hp_psgd_shape(n, r, &m, &c, &rr);
    ck_assert(!hp_psgd_skip(n, m, c, rr));
    v = lowrank(n, m, c, rank_m, 40 + n);
    len = encode(v, NULL, n, r, 7, msg, cap, &nonfinite);
    ck_assert_int_eq(nonfinite, 0);
    ck_assert_uint_eq(len, SUBHDR + 4 * rr * (m + c));
    ck_assert_int_eq(psgd()->decode(msg, len, n, out, 0, &p), HIPRESS_COMP_OK);
    scale = max_abs(v, n);
    /* exact up to float rounding: tolerance 1e-5 of the largest value */
    ck_assert_msg(max_diff(out, v, n) <= 1e-5 * scale, "n %zu rank %zu r %u: error %g of %g",
                  n, rank_m, r, max_diff(out, v, n), scale);
    /* accumulate adds to what is there */
    for (size_t i = 0; i < n; i++)
        out[i] = 1.0f;
    ck_assert_int_eq(psgd()->decode(msg, len, n, out, 1, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert(fabs((double)out[i] - 1.0 - v[i]) <= 1e-5 * scale + 1e-6);
    free(v);
    free(out);
    free(msg);
}

START_TEST(test_round_trip_lowrank)
{
    round_trip_lowrank(4096, 4, 4);     /* 64 x 64, rank = r */
    round_trip_lowrank(4096, 2, 4);     /* rank-deficient: zero columns */
    round_trip_lowrank(100003, 3, 4);   /* padded last row */
    round_trip_lowrank(100003, 1, 8);
    round_trip_lowrank(5000, 0, 4);     /* zero matrix */
    round_trip_lowrank(123457, 16, 16);
    /* several column tiles (r 64: 512 columns a tile; r 256: 128) */
    round_trip_lowrank(360600, 5, 64);    /* 600 x 601 */
    round_trip_lowrank(1000003, 3, 256);  /* 1000 x 1001, 253 zero columns */
}
END_TEST

/* n, r of the error-feedback test: one tile, and several (r 64: 512 columns) */
static const struct { size_t n; uint32_t r; } ef_cases[] = {{30011, 4}, {300007, 64}};

START_TEST(test_encode_ef)
{
    const size_t n = ef_cases[_i].n;
    const uint32_t rank = ef_cases[_i].r;
    hipress_comp_params_t p = params_rank(rank);
    size_t cap = psgd()->max_payload(n, &p), len;
    unsigned char *msg = malloc(cap);
    float *g = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float));
    float *res0 = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    int nonfinite;
    double nres = 0;

    for (size_t i = 0; i < n; i++) {
        g[i] = urand(51, i);
        res0[i] = res[i] = 0.25f * urand(52, i);
    }
    len = encode(g, res, n, rank, 9, msg, cap, &nonfinite);
    ck_assert_int_eq(nonfinite, 0);
    ck_assert_int_eq(psgd()->decode(msg, len, n, out, 0, &p), HIPRESS_COMP_OK);
    /* residual = (g + old residual) - decoded, bit for bit */
    for (size_t i = 0; i < n; i++) {
        float v = g[i] + res0[i];
        ck_assert_msg(hp_f2u(res[i]) == hp_f2u(v - out[i]), "element %zu", i);
        nres += (double)res[i] * res[i];
    }
    ck_assert(nres > 0);   /* a full-rank input loses something */

    /* NaN or Inf in the input: flagged, residual untouched */
    memcpy(res0, res, n * sizeof(float));
    g[1234] = NAN;
    encode(g, res, n, rank, 9, msg, cap, &nonfinite);
    ck_assert_int_eq(nonfinite, 1);
    ck_assert_mem_eq(res, res0, n * sizeof(float));
    g[1234] = -INFINITY;
    encode(g, res, n, rank, 9, msg, cap, &nonfinite);
    ck_assert_int_eq(nonfinite, 1);
    ck_assert_mem_eq(res, res0, n * sizeof(float));
    /* through the message layer: a NaN message decodes to NaN */
    {
        int kind = hp_comp_find("powersgd");
        hipress_encode_args_t a;
        size_t mlen;
        memset(&a, 0, sizeof(a));
        a.in = g;
        a.n = n;
        a.params = &p;
        ck_assert_int_eq(hp_msg_encode(kind, &a, msg, hp_msg_max_bytes(kind, n, &p), &mlen, &nonfinite), HP_OK);
        ck_assert_int_eq(nonfinite, 1);
        ck_assert_int_eq(hp_msg_decode(kind, msg, mlen, n, out, 0, &p), HP_OK);
        for (size_t i = 0; i < n; i++)
            ck_assert(isnan(out[i]));
    }
    free(msg);
    free(g);
    free(res);
    free(res0);
    free(out);
}
END_TEST

START_TEST(test_encode_skip)
{
    const size_t n = 50;    /* 7 x 8: 4 * 15 = 60 >= 50, sent plain */
    hipress_comp_params_t p = params_rank(4);
    unsigned char msg[SUBHDR + 4 * 50];
    float g[50], res[50], out[50];
    int nonfinite;
    size_t len;
    uint32_t r;

    ck_assert_uint_eq(psgd()->max_payload(n, &p), sizeof(msg));
    for (size_t i = 0; i < n; i++) {
        g[i] = urand(61, i);
        res[i] = urand(62, i);
    }
    len = encode(g, res, n, 4, 1, msg, sizeof(msg), &nonfinite);
    ck_assert_uint_eq(len, sizeof(msg));
    memcpy(&r, msg, 4);
    ck_assert_uint_eq(r, 0);
    ck_assert_int_eq(psgd()->decode(msg, len, n, out, 0, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert(hp_f2u(out[i]) == hp_f2u(g[i] + urand(62, i)));
        ck_assert(res[i] == 0.0f);   /* lossless: nothing left over */
    }
    /* n = 0 and n = 1 */
    len = encode(g, NULL, 0, 4, 1, msg, sizeof(msg), &nonfinite);
    ck_assert_uint_eq(len, SUBHDR);
    ck_assert_int_eq(psgd()->decode(msg, len, 0, out, 0, &p), HIPRESS_COMP_OK);
    len = encode(g, NULL, 1, 4, 1, msg, sizeof(msg), &nonfinite);
    ck_assert_uint_eq(len, SUBHDR + 4);
    ck_assert_int_eq(psgd()->decode(msg, len, 1, out, 0, &p), HIPRESS_COMP_OK);
    ck_assert(hp_f2u(out[0]) == hp_f2u(g[0]));
}
END_TEST

START_TEST(test_encode_enospc)
{
    const size_t n = 1000;
    hipress_comp_params_t p = params_rank(4);
    hipress_encode_args_t a;
    unsigned char msg[4096];
    float g[1000];
    size_t len;
    int nf;
    for (size_t i = 0; i < n; i++)
        g[i] = urand(71, i);
    memset(&a, 0, sizeof(a));
    a.in = g;
    a.n = n;
    a.out = msg;
    a.out_cap = psgd()->max_payload(n, &p) - 1;
    a.params = &p;
    ck_assert_int_eq(psgd()->encode(&a, &len, &nf), HIPRESS_COMP_ENOSPC);
}
END_TEST

/* HIPRESS_ISA: the generic and the AVX2 kernels give the same bytes
 * (message, residual, decoded values), over shapes with every kind of tail:
 * columns not a multiple of 16, rows not a multiple of 4, a padded last
 * row, several column tiles.  On a CPU without AVX2 both runs are generic. */
START_TEST(test_isa_same_bytes)
{
    static const struct { size_t n; uint32_t r; } cases[] = {
        {81, 4}, {1000, 4}, {4099, 3}, {30011, 8}, {65536, 16}, {100003, 5}, {300007, 64}};
    for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        const size_t n = cases[t].n;
        unsigned char *msg[2];
        float *res[2], *out[2], *g = malloc(n * sizeof(float));
        size_t len[2];
        for (size_t i = 0; i < n; i++)
            g[i] = urand(111 + t, i) * (float)(1 + i % 5);
        for (int isa = 0; isa < 2; isa++) {
            hipress_comp_params_t p = params_rank(cases[t].r);
            hipress_encode_args_t a;
            size_t cap;
            int nf;
            p.isa = isa == 0 ? 1 : 2;
            cap = psgd()->max_payload(n, &p);
            msg[isa] = malloc(cap);
            res[isa] = malloc(n * sizeof(float));
            out[isa] = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) {
                res[isa][i] = 0.5f * urand(112 + t, i);
                out[isa][i] = urand(113 + t, i);
            }
            memset(&a, 0, sizeof(a));
            a.in = g;
            a.residual = res[isa];
            a.n = n;
            a.out = msg[isa];
            a.out_cap = cap;
            a.rng_key[0] = 5;
            a.params = &p;
            ck_assert_int_eq(psgd()->encode(&a, &len[isa], &nf), HIPRESS_COMP_OK);
            ck_assert_int_eq(nf, 0);
            ck_assert_int_eq(psgd()->decode(msg[isa], len[isa], n, out[isa], 1, &p), HIPRESS_COMP_OK);
        }
        ck_assert_uint_eq(len[0], len[1]);
        ck_assert_msg(memcmp(msg[0], msg[1], len[0]) == 0, "n %zu r %u: messages differ", n, cases[t].r);
        ck_assert_msg(memcmp(res[0], res[1], n * sizeof(float)) == 0, "n %zu r %u: residuals differ", n, cases[t].r);
        ck_assert_msg(memcmp(out[0], out[1], n * sizeof(float)) == 0, "n %zu r %u: decoded values differ", n, cases[t].r);
        for (int isa = 0; isa < 2; isa++) {
            free(msg[isa]);
            free(res[isa]);
            free(out[isa]);
        }
        free(g);
    }
}
END_TEST

/* ------------------------------------------------------------ decoder */

static void put32(unsigned char *o, uint32_t v)
{
    memcpy(o, &v, 4);
}

/* decode must reject the message and leave out (n floats + guard) untouched */
static void expect_reject(const unsigned char *msg, size_t len, size_t n)
{
    hipress_comp_params_t p = params_rank(4);
    float *out = malloc((n + 16) * sizeof(float));
    for (size_t i = 0; i < n + 16; i++)
        out[i] = (float)i;
    ck_assert_int_eq(psgd()->decode(msg, len, n, out, 0, &p), HIPRESS_COMP_EINVAL);
    for (size_t i = 0; i < n + 16; i++)
        ck_assert(out[i] == (float)i);
    free(out);
}

START_TEST(test_decode_rejects)
{
    const size_t n = 10000;     /* 79 x 128, r = 4: 828 floats */
    hipress_comp_params_t p = params_rank(4);
    size_t cap = psgd()->max_payload(n, &p), len;
    unsigned char *msg = malloc(cap + 64), *bad = malloc(cap + 64);
    float *g = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    int nf;

    for (size_t i = 0; i < n; i++)
        g[i] = urand(81, i);
    len = encode(g, NULL, n, 4, 3, msg, cap, &nf);
    ck_assert_uint_eq(len, SUBHDR + 4 * 828);
    ck_assert_int_eq(psgd()->decode(msg, len, n, out, 0, &p), HIPRESS_COMP_OK);

    /* every truncation, and one float too many */
    for (size_t l = 0; l < len; l += (l < 64 ? 1 : 37))
        expect_reject(msg, l, n);
    memcpy(bad, msg, len);
    memset(bad + len, 0, 4);
    expect_reject(bad, len + 4, n);
    /* an element count of another shape (9900: 78 x 128; 10200: 80 x 128);
     * n = 10001 has the same 79 x 128 shape, and the message header's n is
     * what tells those apart */
    expect_reject(msg, len, n - 100);
    expect_reject(msg, len, n + 200);
#define MUTATE(off, val) do { memcpy(bad, msg, len); put32(bad + (off), (val)); } while (0)
    /* m, c not the shape of n */
    MUTATE(4, 99);   expect_reject(bad, len, n);
    MUTATE(8, 101);  expect_reject(bad, len, n);
    /* r that does not fit the length, exceeds the shape, or would not shrink */
    MUTATE(0, 3);    expect_reject(bad, len, n);
    MUTATE(0, 5);    expect_reject(bad, len, n);
    MUTATE(0, 101);  expect_reject(bad, len, n);
    MUTATE(0, 0xffffffffu); expect_reject(bad, len, n);
    MUTATE(0, 0);    expect_reject(bad, len, n);   /* plain needs 4 n bytes */
    {
        /* r = 50: 50 * 207 >= 10000 floats, a would-not-shrink size */
        size_t l50 = SUBHDR + 4 * 50 * 207;
        unsigned char *big = calloc(1, l50);
        put32(big, 50);
        put32(big + 4, 79);
        put32(big + 8, 128);
        expect_reject(big, l50, n);
        free(big);
    }
    /* non-finite values in P or in Q */
    memcpy(bad, msg, len);
    { float x = NAN; memcpy(bad + SUBHDR + 4 * 5, &x, 4); }
    expect_reject(bad, len, n);
    memcpy(bad, msg, len);
    { float x = INFINITY; memcpy(bad + len - 4, &x, 4); }
    expect_reject(bad, len, n);
    /* plain (r = 0) messages: exact length and finite values */
    {
        size_t lp = SUBHDR + 4 * 50;
        unsigned char plain[SUBHDR + 4 * 50 + 4];
        float o50[50];
        memset(plain, 0, sizeof(plain));
        put32(plain + 4, 7);
        put32(plain + 8, 8);
        ck_assert_int_eq(psgd()->decode(plain, lp, 50, o50, 0, &p), HIPRESS_COMP_OK);
        expect_reject(plain, lp - 4, 50);
        expect_reject(plain, lp + 4, 50);
        { float x = NAN; memcpy(plain + SUBHDR + 8, &x, 4); }
        expect_reject(plain, lp, 50);
    }
    /* random header words and bit flips never crash or write out of bounds */
    for (int t = 0; t < 2000; t++) {
        hipress_comp_params_t pp = params_rank(4);
        float *o = calloc(n + 16, sizeof(float));
        memcpy(bad, msg, len);
        bad[hp_rng_u32(91, t) % len] ^= (unsigned char)(1u << (hp_rng_u32(92, t) % 8));
        if (t % 3 == 0)
            put32(bad + 4 * (hp_rng_u32(93, t) % 3), hp_rng_u32(94, t) % 300);
        for (size_t i = n; i < n + 16; i++)
            o[i] = -7.0f;
        (void)psgd()->decode(bad, len, n, o, t & 1, &pp);
        for (size_t i = n; i < n + 16; i++)
            ck_assert(o[i] == -7.0f);
        free(o);
    }
#undef MUTATE
    free(msg);
    free(bad);
    free(g);
    free(out);
}
END_TEST

/* The ABI tests of the "pure" case, after the orthonormalisation. */
void psgd_abi_tests(TCase *t)
{
    tcase_add_test(t, test_round_trip_lowrank);
    tcase_add_loop_test(t, test_encode_ef, 0, (int)(sizeof(ef_cases) / sizeof(ef_cases[0])));
    tcase_add_test(t, test_encode_skip);
    tcase_add_test(t, test_encode_enospc);
    tcase_add_test(t, test_isa_same_bytes);
    tcase_add_test(t, test_decode_rejects);
}
