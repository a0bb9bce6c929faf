/*
 * Error feedback conserves gradient (contract 2, doc/dev/contracts.md), under the preload:
 * over any sequence of calls on one buffer, the sum of all outputs plus
 * every rank's held residual equals the sum of all ranks' inputs, up to
 * float rounding -- while the plan changes at random between calls
 * (algorithm, partition size, auto's exploration with its plain calls,
 * hierarchical mode on and off, compressor switches, the owners' sum codec
 * (HIPRESS_SUM_CODEC, whose error stays in the owner's residual), in place
 * or not).
 * Also: every rank ends each call with the same bits, and a residual that
 * must be dropped (opting the communicator out) is counted.
 *
 *   mpirun -np N tests/mpi/mpi_conserve [calls]
 *
 * The sums are kept in double; the held residual is read with
 * hipress_comm_residual.  Inputs have a common part (the "gradient mean")
 * and a per-rank part, so a lost residual shows as a relative error of
 * about 1 / calls, far above the rounding bound checked here.
 */
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipress.h"

static int rank, nranks, failed, passed;

#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (cond) {                                                                \
            passed++;                                                              \
        } else {                                                                   \
            failed++;                                                              \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__);    \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
        }                                                                          \
    } while (0)

/* The public API, found in the preloaded library. */
static int (*comm_set)(MPI_Comm, const char *, const char *);
static int (*comm_residual)(MPI_Comm, const void *, size_t, float *);
static void (*stats_get)(hipress_stats_t *);
static const hipress_compressor_v1_t *(*find)(const char *);

static void set(MPI_Comm c, const char *name, const char *value)
{
    if (comm_set(c, name, value) != HIPRESS_OK) {
        fprintf(stderr, "rank %d: hipress_comm_set(%s, %s) failed\n", rank, name, value);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* The same sequence on every rank (plan changes must agree). */
static uint64_t shared_rng = 0x243F6A8885A308D3ULL;
static unsigned pick(unsigned n)
{
    shared_rng ^= shared_rng << 13;
    shared_rng ^= shared_rng >> 7;
    shared_rng ^= shared_rng << 17;
    return (unsigned)(shared_rng % n);
}

/* Input of rank r, call t: a common smooth part plus per-rank noise. */
static float input(int r, int t, size_t i)
{
    uint64_t s = (uint64_t)(r + 1) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)t * 0xBF58476D1CE4E5B9ULL ^ i * 0x94D049BB133111EBULL;
    s ^= s >> 31;
    s *= 0xD6E8FEB86CA2D7A5ULL;
    s ^= s >> 29;
    double u = (double)(s >> 11) / 9007199254740992.0 - 0.5;
    return (float)(0.01 * sin(0.001 * (double)i + 0.3 * t) + 0.02 * u);
}

static uint64_t hash(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int same_everywhere(const void *v, size_t bytes)
{
    uint64_t h[2];
    h[0] = hash(v, bytes);
    h[1] = ~h[0];
    MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return h[0] == ~h[1];
}

/* One sequence of `calls` calls on one buffer of n floats, starting with
 * compressor `first` and switching among `pool` at random. */
static void sequence(const char *label, const char *first, const char *const *pool, int npool,
                     size_t n, int calls)
{
    static const char *algos[] = {"ring", "tree", "ps", "allgather", "auto"};
    static const char *parts[] = {"0", "16K", "64K", "1M"};
    static const char *sums[] = {"auto", "same", "q2", "q4", "q8", "fp16", "none"};
    MPI_Comm c;
    float *buf = malloc(n * sizeof(float)), *send = malloc(n * sizeof(float));
    float *res = malloc(n * sizeof(float));
    double *in_sum = calloc(n, sizeof(double)), *out_sum = calloc(n, sizeof(double));
    double *in_call = malloc(n * sizeof(double)), *res_sum = malloc(n * sizeof(double));
    double *scale = calloc(n, sizeof(double));
    double err2 = 0, ref2 = 0, worst = 0;
    hipress_stats_t s0, s1, sc;
    int mismatches = 0, errors = 0, stale = 0, live_checks = 0, hier = 0, node = 2;
    const char *comp = first;

    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set(c, "HIPRESS_MIN_BYTES", "0");
    set(c, "HIPRESS_COMPRESSOR", first);
    set(c, "HIPRESS_DGC_MOMENTUM", "0");
    /* start from a fixed algorithm (auto explores plain first) */
    set(c, "HIPRESS_ALGO", algos[pick(4)]);
    stats_get(&s0);
    for (int t = 0; t < calls; t++) {
        int in_place = pick(2);
        /* the plan changes between calls, the same on every rank */
        switch (pick(6)) {
        case 0: set(c, "HIPRESS_ALGO", algos[pick(5)]); break;
        case 1: set(c, "HIPRESS_PARTITION_BYTES", parts[pick(4)]); break;
        case 2:
            if (nranks >= 3) {
                hier = pick(2);
                node = pick(2) ? 2 : 3;
                set(c, "HIPRESS_HIERARCHICAL", hier ? "on" : "off");
                set(c, "HIPRESS_NODE_SIZE", node == 2 ? "2" : "3");
            }
            break;
        case 3: comp = pool[pick((unsigned)npool)]; set(c, "HIPRESS_COMPRESSOR", comp); break;
        case 4: set(c, "HIPRESS_ALLOW_PLAIN", pick(2) ? "1" : "0"); break;
        case 5: set(c, "HIPRESS_SUM_CODEC", sums[pick(7)]); break;   /* the owners' residuals */
        default: break;
        }
        for (size_t i = 0; i < n; i++) {
            float x = input(rank, t, i);
            (in_place ? buf : send)[i] = x;
            in_call[i] = x;
            scale[i] += fabs(x);
        }
        MPI_Allreduce(MPI_IN_PLACE, in_call, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        stats_get(&sc);
        if (MPI_Allreduce(in_place ? MPI_IN_PLACE : send, buf, (int)n, MPI_FLOAT, MPI_SUM, c) != MPI_SUCCESS)
            errors++;
        mismatches += !same_everywhere(buf, n * sizeof(float));
        {
            /* liveness: where this rank encoded nothing lossy this call (a
             * plain call of the plan, `none`, a hierarchical non-leader, a
             * single node), what it owed went into the call: nothing is held */
            hipress_stats_t se;
            int plain, sent_all;
            stats_get(&se);
            plain = se.compressed == sc.compressed;
            /* hierarchical with nodes of unequal sizes goes through node
             * leaders: the others encode nothing (with equal nodes every
             * rank compresses its shard, and with one node there is no
             * hierarchy) */
            sent_all = plain || strcmp(comp, "none") == 0 ||
                       (hier && strcmp(comp, "powersgd") != 0 &&   /* runs flat */
                        nranks > node && nranks % node != 0 && rank % node != 0);
            if (sent_all) {
                comm_residual(c, buf, n, res);
                live_checks++;
                for (size_t i = 0; i < n; i++)
                    if (res[i] != 0.0f) {
                        stale++;
                        break;
                    }
            }
        }
        for (size_t i = 0; i < n; i++) {
            in_sum[i] += in_call[i];
            out_sum[i] += buf[i];
            scale[i] += fabs(buf[i]);
        }
    }
    stats_get(&s1);
    comm_residual(c, buf, n, res);
    for (size_t i = 0; i < n; i++)
        res_sum[i] = res[i];
    MPI_Allreduce(MPI_IN_PLACE, res_sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, scale, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) {
        double e = out_sum[i] + res_sum[i] - in_sum[i];
        /* rounding: a few float ulps of what passed through each call */
        double tol = 2e-6 * scale[i] + 1e-30;
        err2 += e * e;
        ref2 += in_sum[i] * in_sum[i];
        if (fabs(e) / tol > worst)
            worst = fabs(e) / tol;
    }
    EXPECT(errors == 0, "%s: %d calls failed", label, errors);
    EXPECT(mismatches == 0, "%s: %d calls left ranks with different bits", label, mismatches);
    EXPECT(s1.compressed - s0.compressed > 0, "%s: nothing was compressed", label);
    EXPECT(stale == 0, "%s: %d of %d calls that sent everything left a residual held", label, stale,
           live_checks);
    EXPECT(worst <= 1.0, "%s: outputs + residuals - inputs off by %.3g of the rounding bound "
           "(relative L2 error %.3g)", label, worst, sqrt(err2 / ref2));
    if (rank == 0)
        printf("# %-26s n=%-7zu %d calls, %llu compressed: conservation error %.2e (L2 rel), "
               "%.2f of the rounding bound; %d liveness checks\n", label, n, calls,
               (unsigned long long)(s1.compressed - s0.compressed), sqrt(err2 / ref2), worst, live_checks);
    MPI_Comm_free(&c);
    free(buf), free(send), free(res), free(in_sum), free(out_sum), free(in_call), free(res_sum), free(scale);
}

/* Liveness, scripted: after a few onebit calls (residuals held), each way of
 * not encoding lossily must send what this rank owes in the same call. */
static void liveness(void)
{
    const size_t n = 50021;
    MPI_Comm c;
    float *buf = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float));
    int t = 0;
    struct { const char *what, *name, *value; int zero_here; } steps[] = {
        {"the compressor becomes none", "HIPRESS_COMPRESSOR", "none", 1},
        {"auto explores plain first", "HIPRESS_ALGO", "auto", 1},
        {"hierarchical, node size 2", "HIPRESS_HIERARCHICAL", "on",
         nranks > 2 && nranks % 2 != 0 && rank % 2 != 0},
    };

    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set(c, "HIPRESS_MIN_BYTES", "0");
    set(c, "HIPRESS_NODE_SIZE", "2");
    /* a fast network for the model: auto then times plain (where the model
     * puts plain far behind, it is not timed) */
    set(c, "HIPRESS_NET_GBPS", "1000");
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        int held = 0, left = 0;
        set(c, "HIPRESS_COMPRESSOR", "onebit");
        set(c, "HIPRESS_ALGO", "ring");
        set(c, "HIPRESS_HIERARCHICAL", "off");
        for (int j = 0; j < 2; j++, t++) {
            for (size_t i = 0; i < n; i++)
                buf[i] = input(rank, t, i);
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c);
        }
        comm_residual(c, buf, n, res);
        for (size_t i = 0; i < n; i++)
            held += res[i] != 0.0f;
        set(c, steps[k].name, steps[k].value);
        for (size_t i = 0; i < n; i++)
            buf[i] = input(rank, t, i);
        t++;
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c);
        comm_residual(c, buf, n, res);
        for (size_t i = 0; i < n; i++)
            left += res[i] != 0.0f;
        EXPECT(held > 0, "liveness (%s): onebit held nothing before", steps[k].what);
        if (steps[k].zero_here)
            EXPECT(left == 0, "liveness (%s): %d elements still held after the call", steps[k].what, left);
    }
    MPI_Comm_free(&c);
    free(buf), free(res);
}

/* A staging buffer: one address reduced with two counts (a fusion buffer
 * whose layout changes) keeps no residual from then on, for any count,
 * while another buffer keeps its own; with HIPRESS_EF_LAYOUT=trust the
 * client vouches for the layout and both counts keep theirs. */
static void staging(void)
{
    const size_t n = 60013;
    MPI_Comm c;
    float *buf = malloc(n * sizeof(float)), *other = malloc(n * sizeof(float));
    float *res = malloc(n * sizeof(float));
    for (int mode = 0; mode < 2; mode++) {
        int held_n = 0, held_half = 0, held_other = 0;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        set(c, "HIPRESS_MIN_BYTES", "0");
        set(c, "HIPRESS_COMPRESSOR", "onebit");
        set(c, "HIPRESS_ALGO", "allgather");
        if (mode == 1)
            set(c, "HIPRESS_EF_LAYOUT", "trust");
        for (int t = 0; t < 4; t++) {
            /* tensors of one distribution, the same address, two counts */
            size_t cnt = t % 2 ? n / 2 : n;
            for (size_t i = 0; i < n; i++) {
                buf[i] = input(rank, 100 + t, i);
                other[i] = input(rank, 200 + t, i);
            }
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)cnt, MPI_FLOAT, MPI_SUM, c);
            MPI_Allreduce(MPI_IN_PLACE, other, (int)n, MPI_FLOAT, MPI_SUM, c);
        }
        comm_residual(c, buf, n, res);
        for (size_t i = 0; i < n; i++)
            held_n += res[i] != 0.0f;
        comm_residual(c, buf, n / 2, res);
        for (size_t i = 0; i < n / 2; i++)
            held_half += res[i] != 0.0f;
        comm_residual(c, other, n, res);
        for (size_t i = 0; i < n; i++)
            held_other += res[i] != 0.0f;
        if (mode == 0) {
            EXPECT(held_n == 0 && held_half == 0, "staging buffer: residuals held for it (%d, %d)", held_n,
                   held_half);
            EXPECT(held_other > 0, "staging buffer: the other buffer lost its residual");
        } else {
            EXPECT(held_n > 0 && held_half > 0, "EF_LAYOUT=trust: residuals not kept per count (%d, %d)",
                   held_n, held_half);
        }
        MPI_Comm_free(&c);
    }
    free(buf), free(other), free(res);
}

/* Opting a communicator out drops what it held, counted. */
static void opt_out_counts(void)
{
    const size_t n = 30011;
    MPI_Comm c;
    float *buf = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float));
    double held = 0;
    int nonzero = 0;

    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set(c, "HIPRESS_MIN_BYTES", "0");
    set(c, "HIPRESS_COMPRESSOR", "onebit");
    set(c, "HIPRESS_ALGO", "ring");
    for (int t = 0; t < 3; t++) {
        for (size_t i = 0; i < n; i++)
            buf[i] = input(rank, t, i);
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c);
    }
    comm_residual(c, buf, n, res);
    for (size_t i = 0; i < n; i++) {
        held += fabs(res[i]);
        nonzero += res[i] != 0.0f;
    }
    EXPECT(nonzero > 0, "onebit holds no residual after 3 calls");
    set(c, "HIPRESS_ENABLE", "0");
    comm_residual(c, buf, n, res);
    nonzero = 0;
    for (size_t i = 0; i < n; i++)
        nonzero += res[i] != 0.0f;
    EXPECT(nonzero == 0, "opted out, but %d residual elements are still held", nonzero);
    if (rank == 0)
        printf("# opt-out dropped a residual of L1 mass %.4g (HIPRESS_STATS counts it)\n", held);
    MPI_Comm_free(&c);
    free(buf), free(res);
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 24, all_failed = 0;
    static const char *ef[] = {"onebit", "tbq", "graddrop", "dgc", "none"};
    static const char *onebit[] = {"onebit"}, *tbq[] = {"tbq"}, *gd[] = {"graddrop"}, *dgc[] = {"dgc"};
    static const char *psgd[] = {"powersgd", "onebit"};
    static const char *q[] = {"q2", "q4", "q8", "onebit", "none"};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    comm_set = (int (*)(MPI_Comm, const char *, const char *))dlsym(RTLD_DEFAULT, "hipress_comm_set");
    comm_residual = (int (*)(MPI_Comm, const void *, size_t, float *))dlsym(RTLD_DEFAULT, "hipress_comm_residual");
    stats_get = (void (*)(hipress_stats_t *))dlsym(RTLD_DEFAULT, "hipress_stats_get");
    find = (const hipress_compressor_v1_t *(*)(const char *))dlsym(RTLD_DEFAULT, "hipress_compressor_find");
    if (!comm_set || !comm_residual || !stats_get || !find) {
        if (rank == 0)
            fprintf(stderr, "mpi_conserve: libhipress is not preloaded\n");
        MPI_Finalize();
        return 1;
    }
    /* one compressor, the plan changing under it; sizes not divisible by
     * anything, below and above the blocks of every format */
    sequence("onebit", "onebit", onebit, 1, 100003, calls);
    sequence("tbq", "tbq", tbq, 1, 77777, calls);
    sequence("graddrop", "graddrop", gd, 1, 200003, calls);
    sequence("dgc (momentum 0)", "dgc", dgc, 1, 150001, calls);
    /* switching compressors: what one owes, the next carries (none folds it
     * in exactly) */
    sequence("switching onebit/tbq/...", "onebit", ef, 5, 65539, calls);
    /* the q codecs (round to nearest, error feedback), among themselves and
     * with onebit and none */
    sequence("switching q2/q4/q8/...", "q4", q, 5, 100003, calls);
    if (find("powersgd") != NULL)
        sequence("powersgd <-> onebit", "powersgd", psgd, 2, 40000, calls / 2);
    liveness();
    staging();
    opt_out_counts();

    MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_conserve np=%d: %d passed, %d failed\n", nranks, passed, all_failed);
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
