/*
 * check_comp_qbits (check_comp_qbits.c): the stochastic form's generator
 * (hp_rng_q_unit) -- its formula, its paths, its statistics.
 */
#include "check_comp_qbits.h"

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

/* The q generator's u (contract 3's streams, doc/dev/contracts.md: keys of rank, call and hop
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
/* The "qbits" case: the generator, after the bounds. */
void qbits_rng_tests(TCase *t)
{
    tcase_add_test(t, test_rng_q_formula);
    tcase_add_test(t, test_rng_q_paths);
    tcase_add_test(t, test_rng_q_stats);
}
