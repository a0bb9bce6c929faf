/*
 * hipress-bench --quality FILE: how far the accumulated result of many
 * compressed calls drifts from the accumulated exact sum, per compressor and
 * algorithm, against the compressor's textbook form computed in the same run.
 *
 *   mpirun -np 4 hipress-bench --quality grads.bin [-c onebit,tbq] [-a ring,ps] [-T 100] [--csv]
 *
 * FILE holds recorded gradients of a real training (scripts/lab/convergence.py
 * --record): "HPGRAD1\0", uint32 ranks, uint32 steps, uint64 n, then float32
 * [steps][ranks][n].  Rank r replays row r of each step: T calls (default
 * 100, at most the steps recorded) of MPI_Allreduce in place on one buffer of
 * n floats, on a communicator of its own per (compressor, algorithm), with
 * HIPRESS_MIN_BYTES=0 and HIPRESS_ALLOW_PLAIN=0 (every call compressed) and
 * the plan otherwise as the environment sets it.
 *
 * Columns:
 *   rel_err       || sum_t out_t - sum_t exact_t ||_2 / || sum_t exact_t ||_2
 *                 (exact_t: the sum over ranks of step t's gradients, in
 *                 double, read from FILE)
 *   textbook      the same for the textbook form: every rank encodes its own
 *                 v = g + r once (worker-side error feedback) with the
 *                 compressor's own encode, decodes it, and the decoded
 *                 vectors are summed exactly (in double)
 *   ratio         rel_err / textbook
 *   held_l1       sum over ranks of |residual held| at the end (what the
 *                 ranks still owe), divided by || sum_t exact_t ||_1; with
 *                 conservation the drift of rel_err is this residual
 *   stages        lossy stages of the plan (hipress_comm_plan)
 *   ident         every call left every rank with the same bits
 * Compressor parameters come from the defaults and the HIPRESS_* variables
 * below (the same for both forms); dgc's density warm-up is applied to the
 * textbook form as the library applies it per buffer.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipress.h"

typedef struct {
    int    ranks, steps;
    size_t n;
    FILE  *f;
} qgrads_t;

static int q_rank, q_size;

static void q_die(const char *msg)
{
    if (q_rank == 0)
        fprintf(stderr, "hipress-bench --quality: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static void q_open(const char *path, qgrads_t *g)
{
    unsigned char h[24];
    uint32_t r, s;
    uint64_t n;
    g->f = fopen(path, "rb");
    if (g->f == NULL)
        q_die("cannot open the gradient file (make one with scripts/lab/convergence.py --record FILE)");
    if (fread(h, 1, sizeof(h), g->f) != sizeof(h) || memcmp(h, "HPGRAD1", 8) != 0)
        q_die("not a gradient file (no HPGRAD1 header)");
    memcpy(&r, h + 8, 4);
    memcpy(&s, h + 12, 4);
    memcpy(&n, h + 16, 8);
    if (r == 0 || s == 0 || n == 0 || n > ((size_t)1 << 31))
        q_die("gradient file header out of range");
    g->ranks = (int)r;
    g->steps = (int)s;
    g->n = (size_t)n;
}

/* Rank r's gradient of step t. */
static void q_read(qgrads_t *g, int t, int r, float *out)
{
    long long off = 24 + ((long long)t * g->ranks + r) * (long long)g->n * 4;
    if (fseeko(g->f, (off_t)off, SEEK_SET) != 0 || fread(out, sizeof(float), g->n, g->f) != g->n)
        q_die("short read of the gradient file");
}

/* Compressor parameters: defaults, then the environment's HIPRESS_* values
 * for the fields both forms must share. */
static void q_params(hipress_comp_params_t *p)
{
    const char *v;
    hipress_comp_params_default(p);
#define Q_U32(field, name) if ((v = getenv(name)) != NULL) p->field = (uint32_t)strtoul(v, NULL, 10)
#define Q_DBL(field, name) if ((v = getenv(name)) != NULL) p->field = strtod(v, NULL)
    Q_U32(onebit_block, "HIPRESS_ONEBIT_BLOCK");
    Q_U32(tbq_block, "HIPRESS_TBQ_BLOCK");
    Q_U32(sparse_block, "HIPRESS_SPARSE_BLOCK");
    Q_U32(dgc_warmup, "HIPRESS_DGC_WARMUP");
    Q_U32(powersgd_rank, "HIPRESS_POWERSGD_RANK");
    Q_DBL(sparse_ratio, "HIPRESS_SPARSE_RATIO");
    Q_DBL(sample_ratio, "HIPRESS_SAMPLE_RATIO");
    if ((v = getenv("HIPRESS_TBQ_SCALE")) != NULL) p->tbq_scale = (float)strtod(v, NULL);
    if ((v = getenv("HIPRESS_TBQ_THRESHOLD")) != NULL) p->tbq_threshold = (float)strtod(v, NULL);
    if ((v = getenv("HIPRESS_DGC_MOMENTUM")) != NULL) p->dgc_momentum = (float)strtod(v, NULL);
    if ((v = getenv("HIPRESS_TERNGRAD_BITS")) != NULL) p->terngrad_bits = (uint32_t)strtoul(v, NULL, 10);
    Q_U32(q_block, "HIPRESS_Q_BLOCK");
    if ((v = getenv("HIPRESS_Q_ROUNDING")) != NULL) p->q_rounding = strcmp(v, "stochastic") == 0;
#undef Q_U32
#undef Q_DBL
}

/* dgc's warm-up, as the library applies it (hp_dgc_density). */
static double q_dgc_density(double ratio, uint32_t warmup, int call)
{
    double d;
    if (warmup == 0 || (unsigned)call >= warmup || !(ratio < 0.25))
        return ratio;
    d = 0.25 * pow(ratio / 0.25, (double)call / (double)warmup);
    return d > ratio ? d : ratio;
}

static double q_l2_rel(const double *got, const double *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The textbook form's accumulated result over T steps into acc (n doubles). */
static int q_textbook(qgrads_t *g, const char *name, int T, float *buf, double *acc)
{
    const hipress_compressor_v1_t *c = hipress_compressor_find(name);
    hipress_comp_params_t p;
    hipress_encode_args_t a;
    const size_t n = g->n;
    float *res, *state, *dec;
    double *dsum;
    void *out;
    size_t cap;
    int collective;

    if (c == NULL)
        return -1;
    collective = (c->flags & HIPRESS_COMP_COLLECTIVE) != 0;
    if (collective)
        return 1;   /* powersgd has no per-rank textbook encode */
    q_params(&p);
    cap = c->max_payload(n, &p) + 4 * n;   /* room for dgc's warm-up density */
    res = calloc(n, sizeof(float));
    state = calloc(n, sizeof(float));
    dec = malloc(n * sizeof(float));
    dsum = malloc(n * sizeof(double));
    out = malloc(cap);
    if (!res || !state || !dec || !dsum || !out)
        q_die("out of memory");
    memset(acc, 0, n * sizeof(double));
    for (int t = 0; t < T; t++) {
        hipress_comp_params_t pt = p;
        size_t len = 0;
        int nonfinite = 0;
        if (strcmp(name, "dgc") == 0)
            pt.sparse_ratio = q_dgc_density(p.sparse_ratio, p.dgc_warmup, t);
        q_read(g, t, q_rank, buf);
        memset(&a, 0, sizeof(a));
        a.in = buf;
        a.n = n;
        a.residual = (c->flags & HIPRESS_COMP_EF) ? res : NULL;
        a.state = (c->flags & HIPRESS_COMP_MOMENTUM) ? state : NULL;
        a.out = out;
        a.out_cap = cap;
        a.rng_key[0] = 12345;
        a.rng_key[1] = (uint64_t)q_rank;
        a.rng_key[2] = (uint64_t)t;
        a.params = &pt;
        if (c->encode(&a, &len, &nonfinite) != 0 || nonfinite ||
            c->decode(out, len, n, dec, 0, &pt) != 0)
            q_die("textbook encode/decode failed");
        for (size_t i = 0; i < n; i++)
            dsum[i] = dec[i];
        MPI_Allreduce(MPI_IN_PLACE, dsum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++)
            acc[i] += dsum[i];
    }
    free(res), free(state), free(dec), free(dsum), free(out);
    return 0;
}

static int q_split(char *list, char **items, int max)
{
    int k = 0;
    for (char *s = strtok(list, ","); s != NULL && k < max; s = strtok(NULL, ","))
        items[k++] = s;
    return k;
}

int hp_bench_quality(const char *path, char *comps, char *algos, int T, int csv)
{
    qgrads_t g;
    char *clist[16], *alist[8];
    int nc, na;
    double *exact, *acc, *tacc, exact_l1 = 0;
    float *buf, *res;

    MPI_Comm_rank(MPI_COMM_WORLD, &q_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &q_size);
    q_open(path, &g);
    if (g.ranks != q_size) {
        char m[128];
        snprintf(m, sizeof(m), "the file was recorded with %d ranks: run with mpirun -np %d", g.ranks, g.ranks);
        q_die(m);
    }
    if (T > g.steps)
        T = g.steps;
    nc = q_split(comps, clist, 16);
    na = q_split(algos, alist, 8);
    exact = calloc(g.n, sizeof(double));
    acc = malloc(g.n * sizeof(double));
    tacc = malloc(g.n * sizeof(double));
    buf = malloc(g.n * sizeof(float));
    res = malloc(g.n * sizeof(float));
    if (!exact || !acc || !tacc || !buf || !res)
        q_die("out of memory");
    /* the accumulated exact sum, from the file (every rank the same) */
    for (int t = 0; t < T; t++)
        for (int r = 0; r < g.ranks; r++) {
            q_read(&g, t, r, buf);
            for (size_t i = 0; i < g.n; i++)
                exact[i] += buf[i];
        }
    for (size_t i = 0; i < g.n; i++)
        exact_l1 += fabs(exact[i]);
    if (q_rank == 0) {
        if (csv)
            printf("compressor,algo,ranks,calls,count,rel_err,textbook_rel_err,ratio,held_l1,stages,plan,identical\n");
        else
            printf("# hipress-bench --quality: %d ranks, %d calls of %zu floats from %s\n"
                   "# %-10s %-10s %10s %10s %7s %9s %-28s %5s\n", q_size, T, g.n, path,
                   "compress", "algo", "rel_err", "textbook", "ratio", "held_l1", "plan", "ident");
    }
    for (int ci = 0; ci < nc; ci++) {
        double trel = NAN;
        int tb = q_textbook(&g, clist[ci], T, buf, tacc);
        if (tb < 0) {
            if (q_rank == 0)
                fprintf(stderr, "hipress-bench --quality: no compressor '%s' (skipped)\n", clist[ci]);
            continue;
        }
        if (tb == 0)
            trel = q_l2_rel(tacc, exact, g.n);
        for (int ai = 0; ai < na; ai++) {
            MPI_Comm c;
            char plan[96] = "", stages[16] = "-";
            unsigned long long mismatch = 0;
            double rel, held = 0, held_all;
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
            if (hipress_comm_set(c, "HIPRESS_COMPRESSOR", clist[ci]) != HIPRESS_OK ||
                hipress_comm_set(c, "HIPRESS_ALGO", alist[ai]) != HIPRESS_OK)
                q_die("bad compressor or algorithm (hipress_info lists them)");
            hipress_comm_set(c, "HIPRESS_MIN_BYTES", "0");
            hipress_comm_set(c, "HIPRESS_ALLOW_PLAIN", "0");
            if (getenv("HIPRESS_OPTIMIZER") == NULL)   /* each compressor's own form */
                hipress_comm_set(c, "HIPRESS_OPTIMIZER", "sgd");
            memset(acc, 0, g.n * sizeof(double));
            for (int t = 0; t < T; t++) {
                uint64_t h = 14695981039346656037ULL, hh[2];
                const unsigned char *pb = (const unsigned char *)buf;
                q_read(&g, t, q_rank, buf);
                if (MPI_Allreduce(MPI_IN_PLACE, buf, (int)g.n, MPI_FLOAT, MPI_SUM, c) != MPI_SUCCESS)
                    q_die("compressed allreduce failed");
                for (size_t i = 0; i < g.n; i++)
                    acc[i] += buf[i];
                for (size_t i = 0; i < g.n * sizeof(float); i++) {
                    h ^= pb[i];
                    h *= 1099511628211ULL;
                }
                hh[0] = h;
                hh[1] = ~h;
                MPI_Allreduce(MPI_IN_PLACE, hh, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
                mismatch += hh[0] != ~hh[1];
            }
            rel = q_l2_rel(acc, exact, g.n);
            hipress_comm_residual(c, buf, g.n, res);
            for (size_t i = 0; i < g.n; i++)
                held += fabs(res[i]);
            MPI_Allreduce(&held, &held_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            hipress_comm_plan(c, g.n * sizeof(float), plan, sizeof(plan));
            {
                char *st = strstr(plan, ", ");
                if (st != NULL)
                    snprintf(stages, sizeof(stages), "%d", atoi(st + 2));
            }
            if (q_rank == 0) {
                if (csv)
                    printf("%s,%s,%d,%d,%zu,%.4e,%.4e,%.3f,%.4e,%s,\"%s\",%s\n", clist[ci], alist[ai], q_size,
                           T, g.n, rel, trel, rel / trel, held_all / exact_l1, stages, plan,
                           mismatch ? "no" : "yes");
                else
                    printf("  %-10s %-10s %10.3e %10.3e %7.2f %9.2e %-28s %5s\n", clist[ci], alist[ai], rel,
                           trel, rel / trel, held_all / exact_l1, plan, mismatch ? "no" : "yes");
                fflush(stdout);
            }
            MPI_Comm_free(&c);
        }
    }
    fclose(g.f);
    free(exact), free(acc), free(tacc), free(buf), free(res);
    return 0;
}
