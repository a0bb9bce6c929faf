/*
 * Unit tests of the powersgd compressor's pure parts: the matrix shape, the
 * skip rule and wire size, the orthonormalisation, the local (ABI)
 * encode/decode and the decoder's validation.
 *
 * `check_comp_powersgd --bench [n] [r]` instead times the ABI encode of n
 * floats (default 16M = 64 MiB, r = 4) against single-threaded BLAS GEMMs of
 * the same shapes (the whole encode must stay within 2x of its GEMMs).
 *
 * This file holds the shared helpers, the shape and orthonormalisation
 * tests, the benchmark and the suite; the ABI tests are in
 * check_comp_powersgd_abi.c (check_comp_powersgd.h).
 */
#include <cblas.h>

#include "check_comp_powersgd.h"

hp_comp_t *psgd(void)
{
    const hipress_compressor_v1_t *c = hipress_compressor_find("powersgd");
    if (c == NULL) {
        fprintf(stderr, "powersgd is not registered\n");
        abort();
    }
    return c;
}

hipress_comp_params_t params_rank(uint32_t r)
{
    hipress_comp_params_t p;
    memset(&p, 0, sizeof(p));
    p.powersgd_rank = r;
    return p;
}

/* deterministic test data: uniform in [-1, 1) */
float urand(uint64_t key, uint64_t i)
{
    return 2.0f * hp_rng_unit(key, i) - 1.0f;
}

/* A rank-`rank` matrix A B^T in the m x c layout of n floats; the last row
 * of A is zero when the layout is padded, so the padded matrix has the same
 * rank. */
float *lowrank(size_t n, size_t m, size_t c, size_t rank, uint64_t key)
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

double max_abs(const float *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)v[i]));
    return m;
}

double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* encode through the ABI; returns the compressor's return code */
int encode_rc(const float *in, float *res, size_t n, uint32_t rank, uint64_t seed,
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
size_t encode(const float *in, float *res, size_t n, uint32_t rank, uint64_t seed,
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
    psgd_abi_tests(t);
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
