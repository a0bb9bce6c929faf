/*
 * Unit tests of the powersgd compressor's pure parts: the matrix shape, the
 * skip rule and wire size, the orthonormalisation, the local (ABI)
 * encode/decode and the decoder's validation.
 *
 * `check_comp_powersgd --bench [n] [r]` instead times the ABI encode of n
 * floats (default 16M = 64 MiB, r = 4) against single-threaded BLAS GEMMs of
 * the same shapes (issue 3: the whole encode within 2x of its GEMMs).
 */
#include <check.h>
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_elem.h"
#include "hp_psgd.h"   /* the internal API of src/comp/hp_comp_powersgd.c */

#define SUBHDR 12

static hp_comp_t *psgd(void)
{
    const hipress_compressor_v1_t *c = hipress_compressor_find("powersgd");
    if (c == NULL) {
        fprintf(stderr, "powersgd is not registered\n");
        abort();
    }
    return c;
}

static hipress_comp_params_t params_rank(uint32_t r)
{
    hipress_comp_params_t p;
    memset(&p, 0, sizeof(p));
    p.powersgd_rank = r;
    return p;
}

/* deterministic test data: uniform in [-1, 1) */
static float urand(uint64_t key, uint64_t i)
{
    return 2.0f * hp_rng_unit(key, i) - 1.0f;
}

/* A rank-`rank` matrix A B^T in the m x c layout of n floats; the last row
 * of A is zero when the layout is padded, so the padded matrix has the same
 * rank. */
static float *lowrank(size_t n, size_t m, size_t c, size_t rank, uint64_t key)
{
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < c && i * c + j < n; j++) {
            double s = 0;
            for (size_t k = 0; k < rank; k++) {
                float a = (i == m - 1 && m * c > n) ? 0.0f : urand(key, i * 64 + k);
                s += (double)a * urand(key + 1, j * 64 + k);
            }
            v[i * c + j] = (float)s;
        }
    return v;
}

static double max_abs(const float *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)v[i]));
    return m;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* encode through the ABI; returns the compressor's return code */
static int encode_rc(const float *in, float *res, size_t n, uint32_t rank, uint64_t seed,
                     unsigned char *out, size_t cap, size_t *len_p, int *nonfinite_p)
{
    hipress_comp_params_t p = params_rank(rank);
    hipress_encode_args_t a;
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.residual = res;
    a.n = n;
    a.out = out;
    a.out_cap = cap;
    a.rng_key[0] = seed;
    a.params = &p;
    return psgd()->encode(&a, len_p, nonfinite_p);
}

/* the same, asserting success; returns the payload length */
static size_t encode(const float *in, float *res, size_t n, uint32_t rank, uint64_t seed,
                     unsigned char *out, size_t cap, int *nonfinite_p)
{
    size_t len = 0;
    ck_assert_int_eq(encode_rc(in, res, n, rank, seed, out, cap, &len, nonfinite_p), HIPRESS_COMP_OK);
    ck_assert_uint_le(len, cap);
    return len;
}

/* ------------------------------------------------------------ shape */

START_TEST(test_shape)
{
    static const size_t ns[] = {1, 2, 3, 4, 5, 8, 9, 10, 15, 16, 17, 63, 64, 65, 100, 101,
                                999, 1000, 65536, 65537, 1000003, (size_t)1 << 24,
                                ((size_t)1 << 24) + 1, 4294967295u};
    size_t m, c, r;

    hp_psgd_shape(0, 4, &m, &c, &r);
    ck_assert(m == 0 && c == 0 && r == 0);
    for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
        size_t n = ns[t];
        hp_psgd_shape(n, 4, &m, &c, &r);
        /* c: a power of two within a factor sqrt(2) of sqrt(n) */
        ck_assert_uint_eq(c & (c - 1), 0);
        ck_assert_uint_le(c * c, 2 * n);
        ck_assert_uint_le(n, 2 * c * c);
        /* m = ceil(n / c): all elements fit, padding less than one row */
        ck_assert_uint_ge(m * c, n);
        ck_assert_uint_lt(m * c - n, c);
        ck_assert_uint_eq(r, HP_MIN(4, HP_MIN(m, c)));
    }
    hp_psgd_shape((size_t)1 << 24, 4, &m, &c, &r);
    ck_assert(m == 4096 && c == 4096 && r == 4);
    hp_psgd_shape(1000, 256, &m, &c, &r);
    ck_assert(m == 32 && c == 32 && r == 32);
    hp_psgd_shape(10, 4, &m, &c, &r);
    ck_assert(m == 3 && c == 4 && r == 3);
    /* the digits MLP's fused gradient (64-1024-1024-10): rows of 1024 */
    hp_psgd_shape(1126410, 4, &m, &c, &r);
    ck_assert(m == 1101 && c == 1024 && r == 4);
    hp_psgd_shape(81, 4, &m, &c, &r);
    ck_assert(m == 11 && c == 8);
}
END_TEST

START_TEST(test_skip_and_wire)
{
    size_t m, c, r;
    /* 8 x 8, r = 4: factors 4 * 16 = 64 floats, not fewer than 64 */
    hp_psgd_shape(64, 4, &m, &c, &r);
    ck_assert(hp_psgd_skip(64, m, c, r));
    ck_assert_uint_eq(hp_psgd_wire_bytes(64, 4), HP_MSG_HEADER + 4 * 64);
    /* 11 x 8 (n = 81): 4 * 19 = 76 < 81 */
    hp_psgd_shape(81, 4, &m, &c, &r);
    ck_assert(!hp_psgd_skip(81, m, c, r));
    ck_assert_uint_eq(hp_psgd_wire_bytes(81, 4), HP_MSG_HEADER + 4 * 76);
    /* 16M floats, r = 4: 4 * 8192 floats */
    ck_assert_uint_eq(hp_psgd_wire_bytes((size_t)1 << 24, 4), HP_MSG_HEADER + 4 * 4 * 8192);
    /* the rank is capped by the shape, and a large rank skips */
    ck_assert_uint_eq(hp_psgd_wire_bytes(10000, 256), HP_MSG_HEADER + 4 * 10000);
    ck_assert_uint_eq(hp_psgd_wire_bytes(10000, 24), HP_MSG_HEADER + 4 * 24 * (79 + 128));
    ck_assert(hp_psgd_skip(10000, 100, 100, 50));
    ck_assert(!hp_psgd_skip(10001, 101, 100, 49));
    ck_assert(hp_psgd_skip(5, 2, 3, 0));
    ck_assert_uint_eq(hp_psgd_wire_bytes(0, 4), HP_MSG_HEADER);
    ck_assert_uint_eq(hp_psgd_wire_bytes(1, 4), HP_MSG_HEADER + 4);

    /* the ABI payload: the same floats after a 12-byte (r, m, c) header */
    {
        hipress_comp_params_t p = params_rank(4);
        ck_assert_uint_eq(psgd()->max_payload(81, &p), SUBHDR + 4 * 76);
        ck_assert_uint_eq(psgd()->max_payload(64, &p), SUBHDR + 4 * 64);
        ck_assert_uint_eq(psgd()->max_payload((size_t)1 << 24, &p), SUBHDR + 4 * 4 * 8192);
        ck_assert_uint_eq(psgd()->max_payload(81, NULL), SUBHDR + 4 * 76);
    }
}
END_TEST

START_TEST(test_registry)
{
    int kind = hp_comp_find("powersgd");
    ck_assert_int_ge(kind, 0);
    ck_assert_ptr_eq(hp_comp_get(kind), psgd());
    ck_assert_uint_eq(psgd()->flags, HIPRESS_COMP_EF | HIPRESS_COMP_COLLECTIVE);
    ck_assert_uint_eq(psgd()->abi_version, HIPRESS_COMPRESSOR_ABI_VERSION);
}
END_TEST

/* ------------------------------------------------ orthonormalisation */

/* columns of p (m x r) are orthonormal or exactly zero; returns nonzero count */
static size_t check_orthonormal(const float *p, size_t m, size_t r, double tol)
{
    size_t nz = 0;
    for (size_t a = 0; a < r; a++) {
        int zero = 1;
        for (size_t i = 0; i < m; i++) {
            ck_assert(isfinite(p[i * r + a]));
            if (p[i * r + a] != 0.0f)
                zero = 0;
        }
        if (zero)
            continue;
        nz++;
        for (size_t b = 0; b <= a; b++) {
            double d = 0;
            int bzero = 1;
            for (size_t i = 0; i < m; i++) {
                d += (double)p[i * r + a] * (double)p[i * r + b];
                bzero &= p[i * r + b] == 0.0f;
            }
            if (bzero)
                continue;
            ck_assert_msg(fabs(d - (a == b ? 1.0 : 0.0)) <= tol, "column %zu . column %zu = %.9g", a, b, d);
        }
    }
    return nz;
}

START_TEST(test_orth_full_rank)
{
    const size_t m = 300, r = 6;
    float *p = malloc(m * r * sizeof(float)), *p0 = malloc(m * r * sizeof(float));
    double *w = malloc(m * r * sizeof(double));
    for (size_t i = 0; i < m * r; i++)
        p0[i] = p[i] = urand(11, i);
    /* nearly parallel columns: the second pass of Gram-Schmidt matters */
    for (size_t i = 0; i < m; i++)
        p0[i * r + 1] = p[i * r + 1] = p[i * r] + 1e-3f * urand(12, i);
    ck_assert_uint_eq(hp_psgd_orthonormalise(p, m, r, w), r);
    ck_assert_uint_eq(check_orthonormal(p, m, r, 1e-6), r);
    /* same span: column k of the input lies in the span of the first k+1 outputs */
    for (size_t k = 0; k < r; k++) {
        double coef[6] = {0}, err = 0, nrm = 0;
        for (size_t j = 0; j <= k; j++)
            for (size_t i = 0; i < m; i++)
                coef[j] += (double)p[i * r + j] * p0[i * r + k];
        for (size_t i = 0; i < m; i++) {
            double s = 0;
            for (size_t j = 0; j <= k; j++)
                s += coef[j] * p[i * r + j];
            err += (s - p0[i * r + k]) * (s - p0[i * r + k]);
            nrm += (double)p0[i * r + k] * p0[i * r + k];
        }
        ck_assert_msg(sqrt(err / nrm) < 1e-5, "column %zu: relative error %g", k, sqrt(err / nrm));
    }
    /* deterministic: the same bits twice */
    {
        float *q = malloc(m * r * sizeof(float));
        memcpy(q, p0, m * r * sizeof(float));
        hp_psgd_orthonormalise(q, m, r, w);
        ck_assert_mem_eq(q, p, m * r * sizeof(float));
        free(q);
    }
    free(p);
    free(p0);
    free(w);
}
END_TEST

START_TEST(test_orth_rank_deficient)
{
    const size_t m = 200, r = 5;
    float *p = malloc(m * r * sizeof(float));
    double *w = malloc(m * r * sizeof(double));
    /* col0, col1 independent (small integers: exact sums);
     * col2 = 2 col0, col3 = col0 + col1, col4 = 0 */
    for (size_t i = 0; i < m; i++) {
        float a = (float)((int)(hp_rng_u32(21, i) % 17) - 8);
        float b = (float)((int)(hp_rng_u32(22, i) % 17) - 8);
        p[i * r + 0] = a;
        p[i * r + 1] = b;
        p[i * r + 2] = 2.0f * a;
        p[i * r + 3] = a + b;
        p[i * r + 4] = 0.0f;
    }
    ck_assert_uint_eq(hp_psgd_orthonormalise(p, m, r, w), 2);
    ck_assert_uint_eq(check_orthonormal(p, m, r, 1e-6), 2);
    for (size_t i = 0; i < m; i++)
        ck_assert(p[i * r + 2] == 0.0f && p[i * r + 3] == 0.0f && p[i * r + 4] == 0.0f);

    /* a zero first column does not stop the others */
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < r; k++)
            p[i * r + k] = k == 0 ? 0.0f : urand(23, i * r + k);
    ck_assert_uint_eq(hp_psgd_orthonormalise(p, m, r, w), r - 1);
    ck_assert_uint_eq(check_orthonormal(p, m, r, 1e-6), r - 1);

    /* more columns than rows: at most m survive */
    {
        float q[3 * 5];
        double wq[3 * 5];
        for (size_t i = 0; i < 15; i++)
            q[i] = urand(24, i);
        ck_assert_uint_eq(hp_psgd_orthonormalise(q, 3, 5, wq), 3);
        ck_assert_uint_eq(check_orthonormal(q, 3, 5, 1e-6), 3);
    }
    free(p);
    free(w);
}
END_TEST

START_TEST(test_orth_zero_and_scale)
{
    const size_t m = 64, r = 4;
    float p[64 * 4];
    double w[64 * 4];
    memset(p, 0, sizeof(p));
    ck_assert_uint_eq(hp_psgd_orthonormalise(p, m, r, w), 0);
    for (size_t i = 0; i < m * r; i++)
        ck_assert(p[i] == 0.0f && !signbit(p[i]));
    /* tiny (subnormal) and huge values are normalised without under/overflow */
    for (size_t i = 0; i < m * r; i++)
        p[i] = urand(31, i) * ((i % r) < 2 ? 1e-39f : 3e38f);
    ck_assert_uint_eq(hp_psgd_orthonormalise(p, m, r, w), r);
    ck_assert_uint_eq(check_orthonormal(p, m, r, 1e-5), r);
}
END_TEST

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

/* ----------------------------------------------------------- benchmark */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int bench(size_t n, uint32_t rank, int reps)
{
    size_t m, c, r;
    hipress_comp_params_t p = params_rank(rank);
    size_t cap = psgd()->max_payload(n, &p), len = 0;
    unsigned char *msg = malloc(cap);
    float *g = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float)), *mat, *P, *Q;
    double t_ef = 1e9, t_noef = 1e9, t_dec = 1e9, t_mq = 1e9, t_mtp = 1e9, t_pqt = 1e9;
    int nf;

    hp_psgd_shape(n, rank, &m, &c, &r);
    if (hp_psgd_skip(n, m, c, r)) {
        fprintf(stderr, "n %zu r %u is sent plain; nothing to time\n", n, rank);
        return 2;
    }
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(1);
#endif
    mat = calloc(m * c, sizeof(float));
    P = malloc(m * r * sizeof(float));
    Q = malloc(c * r * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        g[i] = urand(101, i);
        res[i] = 0.0f;
    }
    memcpy(mat, g, n * sizeof(float));
    for (size_t i = 0; i < c * r; i++)
        Q[i] = urand(102, i);
    for (int t = 0; t < reps; t++) {
        double t0 = now();
        if (encode_rc(g, res, n, rank, 5, msg, cap, &len, &nf) != HIPRESS_COMP_OK)
            return 1;
        t_ef = fmin(t_ef, now() - t0);
        t0 = now();
        if (encode_rc(g, NULL, n, rank, 5, msg, cap, &len, &nf) != HIPRESS_COMP_OK)
            return 1;
        t_noef = fmin(t_noef, now() - t0);
        t0 = now();
        if (psgd()->decode(msg, len, n, out, 0, &p) != HIPRESS_COMP_OK)
            return 1;
        t_dec = fmin(t_dec, now() - t0);
        /* the GEMMs of one encode: P = M Q, Q = M^T P, M - P Q^T */
        t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)r, (int)c, 1.0f,
                    mat, (int)c, Q, (int)r, 0.0f, P, (int)r);
        t_mq = fmin(t_mq, now() - t0);
        t0 = now();
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)c, (int)r, (int)m, 1.0f,
                    mat, (int)c, P, (int)r, 0.0f, Q, (int)r);
        t_mtp = fmin(t_mtp, now() - t0);
        t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)c, (int)r, -1.0f,
                    P, (int)r, Q, (int)r, 1.0f, mat, (int)c);
        t_pqt = fmin(t_pqt, now() - t0);
        memcpy(mat, g, n * sizeof(float));
    }
    printf("powersgd micro benchmark: n %zu (%.0f MiB), %zu x %zu, r %zu, best of %d, one thread\n",
           n, n * 4.0 / 1048576, m, c, r, reps);
    printf("  encode with error feedback     %8.2f ms\n", t_ef * 1e3);
    printf("  encode without error feedback  %8.2f ms\n", t_noef * 1e3);
    printf("  decode (P Q^T)                 %8.2f ms\n", t_dec * 1e3);
    printf("  BLAS sgemm M Q                 %8.2f ms\n", t_mq * 1e3);
    printf("  BLAS sgemm M^T P               %8.2f ms\n", t_mtp * 1e3);
    printf("  BLAS sgemm M - P Q^T           %8.2f ms\n", t_pqt * 1e3);
    printf("  encode with EF / its three GEMMs    %.2f (target <= 2)\n", t_ef / (t_mq + t_mtp + t_pqt));
    printf("  encode without EF / its two GEMMs   %.2f (target <= 2)\n", t_noef / (t_mq + t_mtp));
    free(msg);
    free(g);
    free(res);
    free(out);
    free(mat);
    free(P);
    free(Q);
    return t_ef <= 2.0 * (t_mq + t_mtp + t_pqt) && t_noef <= 2.0 * (t_mq + t_mtp) ? 0 : 1;
}

/* ---------------------------------------------------------------- main */

static Suite *suite(void)
{
    Suite *s = suite_create("powersgd");
    TCase *t = tcase_create("pure");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_shape);
    tcase_add_test(t, test_skip_and_wire);
    tcase_add_test(t, test_registry);
    tcase_add_test(t, test_orth_full_rank);
    tcase_add_test(t, test_orth_rank_deficient);
    tcase_add_test(t, test_orth_zero_and_scale);
    tcase_add_test(t, test_round_trip_lowrank);
    tcase_add_loop_test(t, test_encode_ef, 0, (int)(sizeof(ef_cases) / sizeof(ef_cases[0])));
    tcase_add_test(t, test_encode_skip);
    tcase_add_test(t, test_encode_enospc);
    tcase_add_test(t, test_isa_same_bytes);
    tcase_add_test(t, test_decode_rejects);
    suite_add_tcase(s, t);
    return s;
}

int main(int argc, char **argv)
{
    SRunner *sr;
    int failed;
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        size_t n = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : (size_t)1 << 24;
        uint32_t r = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 0) : 4;
        int reps = argc > 4 ? atoi(argv[4]) : 5;
        return bench(n, r, reps > 0 ? reps : 1);
    }
    sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
