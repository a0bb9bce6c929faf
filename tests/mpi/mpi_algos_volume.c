/*
 * mpi_algos (mpi_algos.c): what the codecs and algorithms put on the wire
 * and into the result -- the owner stage's sum codec (sum), the bytes each
 * algorithm sends against its formula (volume), staging buffers in their
 * residual-free form (staging), and unbiasedness over many calls
 * (unbiased).
 */
#include "mpi_algos.h"

static void ps_call(const char *comp, const char *sum, const char *part, size_t n, float *out)
{
    MPI_Comm c = configured(MPI_COMM_WORLD, comp, "ps", part);
    int rc;
    EXPECT(hipress_comm_set(c, "HIPRESS_SUM_CODEC", sum) == HIPRESS_OK, "HIPRESS_SUM_CODEC=%s", sum);
    hipress_comm_set(c, "HIPRESS_HIERARCHICAL", "off");
    for (size_t i = 0; i < n; i++)
        out[i] = input(rank, i, 0);
    rc = MPI_Allreduce(MPI_IN_PLACE, out, (int)n, MPI_FLOAT, MPI_SUM, c);
    EXPECT(rc == MPI_SUCCESS, "%s ps sum=%s: rc %d", comp, sum, rc);
    EXPECT(identical(out, n * sizeof(float), c), "%s ps sum=%s: ranks differ", comp, sum);
    MPI_Comm_free(&c);
}

/* ||a - b|| / ||exact sum||. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = 0;
        for (int j = 0; j < nranks; j++)
            e += input(j, i, 0);
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += e * e;
    }
    return sqrt(num / den);
}

/* The owner's stage in its sum codec (HIPRESS_SUM_CODEC).  The workers'
 * encodes do not depend on the sum codec (same keys, fresh residuals), so a
 * result's distance to the result with an exact owner (`none`) is the owner
 * stage's error alone: within the sum codec's bound, and ordered by its
 * bits; and the worker codec's own sign bits (`same`) lose most. */
void test_sum(void)
{
    static const char *comps[] = {"onebit", "tbq", "terngrad"};
    static const char *parts[] = {"0", "16K"};
    enum { SAME, Q2, Q4, Q8, FP16, BF16, NSUMS };
    static const char *sums[NSUMS] = {"same", "q2", "q4", "q8", "fp16", "bf16"};
    const size_t n = 300007;
    float *ex = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    for (size_t k = 0; k < 3; k++)
        for (size_t p = 0; p < 2; p++) {
            const char *comp = comps[k];
            double d[NSUMS];
            ps_call(comp, "none", parts[p], n, ex);
            for (int s = 0; s < NSUMS; s++) {
                ps_call(comp, sums[s], parts[p], n, got);
                d[s] = rel_diff(got, ex, n);
            }
            const double d_same = d[SAME], d_q2 = d[Q2], d_q4 = d[Q4], d_q8 = d[Q8], d_fp16 = d[FP16],
                         d_bf16 = d[BF16];
            EXPECT(d_q8 < d_q4 && d_q4 < d_q2, "%s part=%s: owner errors q8 %.3g q4 %.3g q2 %.3g not ordered",
                   comp, parts[p], d_q8, d_q4, d_q2);
            EXPECT(d_q2 < d_same, "%s part=%s: owner q2 %.3g not below the worker's own codec %.3g", comp,
                   parts[p], d_q2, d_same);
            EXPECT(d_q8 <= 0.02 && d_q4 <= 0.25 && d_fp16 <= 4e-3 && d_bf16 <= 3e-2,
                   "%s part=%s: owner errors q8 %.3g q4 %.3g fp16 %.3g bf16 %.3g over their bounds", comp,
                   parts[p], d_q8, d_q4, d_fp16, d_bf16);
            if (rank == 0 && p == 0)
                printf("# %s ps at np %d, owner stage's error: same %.3g q2 %.3g q4 %.3g q8 %.3g fp16 %.3g "
                       "bf16 %.3g\n", comp, nranks, d_same, d_q2, d_q4, d_q8, d_fp16, d_bf16);
        }
    free(ex);
    free(got);
}

/* Grain-aligned even split (src/algo/hp_algo.h, hp_span_off): [0, n) in
 * `parts` spans on multiples of g elements, the first spans a grain more. */
static size_t span_off(size_t n, size_t parts, size_t i, size_t g)
{
    size_t ng = (n + g - 1) / g, o = g * (i * (ng / parts) + (i < ng % parts ? i : ng % parts));
    return o < n ? o : n;
}

#define WIRE_HEADER 12   /* every message's header (doc/compressors.md) */

/* Bytes of one message of len elements of compressor `name`. */
static size_t wire(const char *name, size_t len)
{
    hipress_comp_params_t p;
    hipress_comp_params_default(&p);
    return WIRE_HEADER + hipress_compressor_find(name)->max_payload(len, &p);
}

/* Bytes per rank equal the formulas exactly (the stats' bytes_wire), one
 * partition per shard (HIPRESS_PARTITION_BYTES=1G), default blocks (grain
 * 4096: onebit's, tbq's and terngrad's blocks; q's 512 divides it), shards
 * of uneven length:
 *   ps, rank r:  sum over c != r of W(w, |shard c|) + (N - 1) W(s, |shard r|)
 *   allgather:   (N - 1) W(w, n)
 * with W(codec, len) = 12 + payload(len), w the worker's and s the sum
 * codec. */
void test_volume(void)
{
    static const struct { const char *comp, *sum, *sum_codec; } cs[] = {
        {"onebit", "auto", "q4"}, {"onebit", "q2", "q2"}, {"onebit", "q8", "q8"}, {"onebit", "same", "onebit"},
        {"onebit", "fp16", "fp16"}, {"tbq", "auto", "q4"}, {"terngrad", "auto", "q2"}};
    const size_t G = 4096, n = 3 * G * (size_t)nranks + 777;
    float *buf = malloc(n * sizeof(float));
    for (size_t k = 0; k < sizeof(cs) / sizeof(cs[0]); k++)
        for (int a = 0; a < 2; a++) {
            const char *algo = a ? "allgather" : "ps";
            MPI_Comm c = configured(MPI_COMM_WORLD, cs[k].comp, algo, "1G");
            hipress_stats_t s0, s1;
            unsigned long long want = 0;
            int rc;
            hipress_comm_set(c, "HIPRESS_SUM_CODEC", cs[k].sum);
            hipress_comm_set(c, "HIPRESS_HIERARCHICAL", "off");
            for (size_t i = 0; i < n; i++)
                buf[i] = input(rank, i, 0);
            hipress_stats_get(&s0);
            rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c);
            hipress_stats_get(&s1);
            EXPECT(rc == MPI_SUCCESS && s1.compressed == s0.compressed + 1, "%s %s sum=%s: not compressed",
                   cs[k].comp, algo, cs[k].sum);
            if (a) {
                want = (unsigned long long)(nranks - 1) * wire(cs[k].comp, n);
            } else {
                for (int q = 0; q < nranks; q++) {
                    size_t len = span_off(n, (size_t)nranks, (size_t)q + 1, G) - span_off(n, (size_t)nranks, (size_t)q, G);
                    want += q == rank ? (unsigned long long)(nranks - 1) * wire(cs[k].sum_codec, len)
                                      : wire(cs[k].comp, len);
                }
            }
            EXPECT(s1.bytes_wire - s0.bytes_wire == want, "%s %s sum=%s at np %d: rank %d sent %llu bytes, the "
                   "formula says %llu", cs[k].comp, algo, cs[k].sum, nranks, rank, s1.bytes_wire - s0.bytes_wire,
                   want);
            if (rank == 0 && k == 0)
                printf("# %s %s sum=%s np %d: %llu bytes per rank for %zu floats, %.2fx fewer than plain "
                       "ring's 2(N-1)/N S\n", cs[k].comp, algo, cs[k].sum, nranks, want, n,
                       2.0 * (nranks - 1) / nranks * 4.0 * (double)n / (double)want);
            MPI_Comm_free(&c);
        }
    free(buf);
}

/* ---------------------------------------------------------- staging */

/* The bytes rank `rank` sends for one call of n floats with worker codec w
 * and sum codec sm (ps), or w alone (allgather), one partition per shard
 * of grain G (test_volume's formulas). */
static unsigned long long volume_of(const char *algo, const char *w, const char *sm, size_t n, size_t G)
{
    unsigned long long want = 0;
    if (strcmp(algo, "allgather") == 0)
        return (unsigned long long)(nranks - 1) * wire(w, n);
    for (int q = 0; q < nranks; q++) {
        size_t len = span_off(n, (size_t)nranks, (size_t)q + 1, G) - span_off(n, (size_t)nranks, (size_t)q, G);
        want += q == rank ? (unsigned long long)(nranks - 1) * wire(sm, len) : wire(w, len);
    }
    return want;
}

/* The two calls of a staging case on c: n1 floats at a (the first count),
 * then n2 at `second` (a again on rank 0, another buffer elsewhere),
 * integer-valued or gradient-like; the stats around the second call in
 * *s0, *s1.  Returns the calls' codes or-ed. */
static int staging_pair(MPI_Comm c, float *a, float *second, size_t n1, size_t n2, int integer,
                        hipress_stats_t *s0, hipress_stats_t *s1)
{
    int rc;
    for (size_t i = 0; i < n1; i++)
        a[i] = input(rank, i, 0);
    rc = MPI_Allreduce(MPI_IN_PLACE, a, (int)n1, MPI_FLOAT, MPI_SUM, c);
    for (size_t i = 0; i < n2; i++)
        second[i] = input(rank, i, integer);
    hipress_stats_get(s0);
    rc |= MPI_Allreduce(MPI_IN_PLACE, second, (int)n2, MPI_FLOAT, MPI_SUM, c);
    hipress_stats_get(s1);
    return rc;
}

/* A staging buffer on rank 0 alone: rank 0 reduces one address with two
 * counts, the other ranks use a new address for each count, so only rank 0
 * can tell.  The call with the second count must run the residual-free
 * form on every rank (HIPRESS_STAGING_FORM=unbiased, the default): the
 * dense q codec of HIPRESS_STAGING_CODEC (q4 by default; q2 and q8 set)
 * with stochastic rounding for the biased compressors (the owner's sum in
 * the sum codec's form: q4 for onebit and tbq, the staging codec for the
 * others), or the compressor itself where it keeps no residual; every
 * rank's bytes equal that form's formula, the results are identical and
 * within q2's bound.  `exact` sends it plain (exact sums of
 * integers); a rank's residual held elsewhere is not touched. */
void test_staging(void)
{
    /* G: the form's grain, the larger block of its two codecs */
    /* codec: HIPRESS_STAGING_CODEC (NULL: its default, q4) */
    static const struct { const char *comp, *codec, *form, *sum_form; size_t G; } cs[] = {
        {"onebit", NULL, "q4", "q4", 512}, {"tbq", NULL, "q4", "q4", 512}, {"graddrop", NULL, "q4", "q4", 512},
        {"dgc", NULL, "q4", "q4", 512}, {"q4", NULL, "q4", "q4", 512}, {"terngrad", NULL, "terngrad", "q4", 4096},
        {"fp16", NULL, "fp16", "fp16", 1024}, {"none", NULL, "none", "none", 1},
        {"powersgd", NULL, "q4", "q4", 512}, {"onebit", "q2", "q2", "q4", 512}, {"dgc", "q2", "q2", "q2", 512},
        {"tbq", "q8", "q8", "q8", 512}, {"terngrad", "q2", "terngrad", "q2", 4096}};
    static const char *algos2[] = {"allgather", "ps"};
    const size_t G = 4096, n1 = 2 * G * (size_t)nranks + 313, n2 = 3 * G * (size_t)nranks + 777;
    float *a = malloc(n2 * sizeof(float)), *b = malloc(n2 * sizeof(float));
    for (size_t k = 0; k < sizeof(cs) / sizeof(cs[0]); k++)
        for (int al = 0; al < 2; al++) {
            const char *algo = algos2[al];
            MPI_Comm c = configured(MPI_COMM_WORLD, cs[k].comp, algo, "1G");
            hipress_stats_t s0, s1;
            float *second = rank == 0 ? a : b;
            unsigned long long want = volume_of(algo, cs[k].form, cs[k].sum_form, n2, cs[k].G);
            double num = 0, den = 0, bound = 0.75 * (al + 1);   /* per stochastic q2 stage, of sum |g| */
            int rc;
            hipress_comm_set(c, "HIPRESS_HIERARCHICAL", "off");
            if (cs[k].codec != NULL)
                hipress_comm_set(c, "HIPRESS_STAGING_CODEC", cs[k].codec);
            rc = staging_pair(c, a, second, n1, n2, 0, &s0, &s1);
            EXPECT(rc == MPI_SUCCESS && s1.compressed == s0.compressed + 1, "staging %s %s: not compressed",
                   cs[k].comp, algo);
            EXPECT(s1.bytes_wire - s0.bytes_wire == want, "staging %s %s at np %d: rank %d sent %llu bytes, "
                   "the form %s (sum %s) says %llu", cs[k].comp, algo, nranks, rank,
                   s1.bytes_wire - s0.bytes_wire, cs[k].form, cs[k].sum_form, want);
            EXPECT(identical(second, n2 * sizeof(float), c), "staging %s %s: ranks differ", cs[k].comp, algo);
            for (size_t i = 0; i < n2; i++) {
                double e = 0, m = 0;
                for (int j = 0; j < nranks; j++) {
                    e += input(j, i, 0);
                    m += fabs(input(j, i, 0));
                }
                num += ((double)second[i] - e) * ((double)second[i] - e);
                den += m * m;
            }
            EXPECT(sqrt(num / den) <= bound, "staging %s %s: relative error %.3g > %.3g", cs[k].comp, algo,
                   sqrt(num / den), bound);
            if (rank == 0)
                printf("# staging %s %s np %d: form %s, sum %s, %llu bytes, relative error %.3g\n", cs[k].comp,
                       algo, nranks, cs[k].form, cs[k].sum_form, want, sqrt(num / den));
            MPI_Comm_free(&c);
        }
    /* exact: the staging call goes plain (integers: the exact sum), and the
     * other ranks' residual of their first buffer is kept */
    {
        MPI_Comm c = configured(MPI_COMM_WORLD, "onebit", "allgather", "1G");
        float *second = rank == 0 ? a : b, *res = malloc(n1 * sizeof(float));
        hipress_stats_t s0, s1;
        int rc, bad = 0, held = 0;
        hipress_comm_set(c, "HIPRESS_STAGING_FORM", "exact");
        rc = staging_pair(c, a, second, n1, n2, 1, &s0, &s1);
        for (size_t i = 0; i < n2; i++) {
            double e = 0;
            for (int j = 0; j < nranks; j++)
                e += input(j, i, 1);
            bad += (double)second[i] != e;
        }
        EXPECT(rc == MPI_SUCCESS && bad == 0 && s1.compressed == s0.compressed &&
               s1.bytes_wire == s0.bytes_wire, "staging exact: rc %d, %d elements not exact, %llu compressed",
               rc, bad, s1.compressed - s0.compressed);
        hipress_comm_residual(c, a, n1, res);
        for (size_t i = 0; i < n1; i++)
            held += res[i] != 0.0f;
        EXPECT(rank == 0 ? held == 0 : held > 0, "staging exact: rank %d holds %d residual elements at its "
               "first buffer", rank, held);
        free(res);
        MPI_Comm_free(&c);
    }
    free(a);
    free(b);
}

/* The residual-free form is unbiased: over many calls on one staging
 * buffer (the counter RNG draws anew each call), each element's mean error
 * m_i has expectation 0 and variance v_i / calls (v_i: its sample
 * variance).  Tested per group of 64 elements, T = sum m_i^2 / sum (v_i /
 * calls) (about 1, a chi-square of 64 over 64, P(T > 2) ~ 1e-7; groups
 * pool elements whose rounding is nearly certain and whose variance is 0),
 * and over all elements, Z = sum m_i / sqrt(sum v_i / calls) (|Z| < 5).
 * The biased form (HIPRESS_STAGING_FORM=biased: onebit without error
 * feedback, deterministic) must fail it: the test can tell. */
void test_unbiased(int calls)
{
    static const char *algos2[] = {"allgather", "ps"};
    const size_t n = 2048 * (size_t)nranks, grp = 64;
    double *sum = malloc(n * sizeof(double)), *sq = malloc(n * sizeof(double));
    float *buf = malloc((n + 1) * sizeof(float));
    /* modes 0, 1: onebit's residual-free form on allgather and ps; 2, 3:
     * the biased forms of onebit and of q2 rounding to nearest (a bias of
     * a quarter step at most, of either sign) */
    for (int mode = 0; mode < 4; mode++) {
        const char *algo = algos2[mode % 2], *comp = mode == 3 ? "q2" : "onebit";
        int biased = mode >= 2;
        MPI_Comm c = configured(MPI_COMM_WORLD, comp, algo, "1G");
        double zs = 0, vs = 0, tmax = 0;
        size_t over = 0;
        hipress_comm_set(c, "HIPRESS_HIERARCHICAL", "off");
        if (biased)
            hipress_comm_set(c, "HIPRESS_STAGING_FORM", "biased");
        /* one call with another count makes the address a staging buffer */
        for (size_t i = 0; i <= n; i++)
            buf[i] = input(rank, i, 0);
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n + 1, MPI_FLOAT, MPI_SUM, c);
        memset(sum, 0, n * sizeof(double));
        memset(sq, 0, n * sizeof(double));
        for (int t = 0; t < calls; t++) {
            for (size_t i = 0; i < n; i++)
                buf[i] = input(rank, i, 0);
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c);
            for (size_t i = 0; i < n; i++) {
                double e = 0;
                for (int j = 0; j < nranks; j++)
                    e += input(j, i, 0);
                sum[i] += buf[i] - e;
                sq[i] += (buf[i] - e) * (buf[i] - e);
            }
        }
        for (size_t g = 0; g < n; g += grp) {
            double num = 0, den = 0;
            for (size_t i = g; i < g + grp && i < n; i++) {
                double m = sum[i] / calls, v = sq[i] / calls - m * m;
                v = v > 0 ? v * calls / (calls - 1) : 0;
                num += m * m;
                den += v / calls;
                zs += m;
                vs += v / calls;
            }
            /* float32's rounding of the sums (2^-22 of them, a constant) is
             * not a bias of the codec: below 1e-12 of squared error */
            double t = den > 0 ? num / den : (num > 1e-12 * grp ? INFINITY : 0);
            tmax = t > tmax ? t : tmax;
            over += t > 2.0;
        }
        double z = vs > 0 ? zs / sqrt(vs) : INFINITY;
        if (!biased)
            EXPECT(over <= 1 && fabs(z) < 5.0, "unbiased %s: %zu of %zu groups with T > 2 (max %.3g), Z %.3g", algo,
                   over, n / grp, tmax, z);
        else
            EXPECT(over > n / grp / 2, "%s biased form: only %zu of %zu groups with T > 2: the test cannot tell "
                   "a biased codec", comp, over, n / grp);
        if (rank == 0)
            printf("# unbiasedness, %s %s form on %s, %d calls np %d: %zu of %zu groups with T > 2, max T "
                   "%.3g, Z %.3g\n", comp, biased ? "biased" : "residual-free", algo, calls, nranks, over, n / grp,
                   tmax, z);
        MPI_Comm_free(&c);
    }
    free(sum);
    free(sq);
    free(buf);
}

/* Split and dup communicators, calls interleaved on two of them. */
