/*
 * hipress-bench --kernels [--bytes N] [-c comp,...] [--csv]: single-process
 * throughput of every registered compressor's (or the listed ones') encode
 * and decode on 64 MiB (or N bytes) of
 * gradient-like floats, against single-core memcpy timed in the same run;
 * the q codecs (q2, q4, q8) twice, rounding to nearest (their default) and
 * stochastically (rows "q2-stochastic", ...).  A buffer below 64 MiB (one
 * that fits a cache) is encoded, decoded and copied 64 MiB / N times per
 * timing, so that every timing covers 64 MiB.
 *
 * Per compressor, each repetition times memcpy, encode and decode back to
 * back, so a ratio compares rates measured in the same time window of a
 * shared machine; the medians are reported.  Encode of an error-feedback
 * compressor includes the residual update; decode overwrites (accumulate 0).
 * Rates are raw float bytes per second (1 GB = 1e9 bytes).  Times are the
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID): the same as wall time on an
 * idle machine, and not stretched when other processes share the cores
 * (the kernels are single-threaded and never block).  HIPRESS_ISA (auto,
 * generic, avx2) picks the kernel path, as in the library.
 *
 * Only the public API is used (the tool links libhipress.so).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hipress.h"

#define KB_BYTES ((size_t)64 << 20)
#define KB_REPS 7

static double kb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int kb_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double kb_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), kb_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Gradient-like data: a smooth component (layers of different scale) plus
 * noise from a counter hash; deterministic. */
static void kb_fill(float *x, size_t n)
{
    uint64_t z = 0x243F6A8885A308D3ULL;
    for (size_t i = 0; i < n; i++) {
        double layer = (double)((i >> 18) % 7 + 1);
        double u = 0;
        z += 0x9E3779B97F4A7C15ULL;
        uint64_t h = z;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
        h ^= h >> 31;
        /* sum of 4 uniform 16-bit parts: roughly normal */
        for (int k = 0; k < 4; k++)
            u += (double)((h >> (16 * k)) & 0xffff) / 65536.0 - 0.5;
        x[i] = (float)(1e-3 * layer * (sin((double)i * 0.00037) + 0.8 * u));
    }
}

static int kb_isa(void)
{
    const char *s = getenv("HIPRESS_ISA");
    if (s == NULL || !strcmp(s, "auto"))
        return 0;
    if (!strcmp(s, "generic"))
        return 1;
    if (!strcmp(s, "avx2"))
        return 2;
    fprintf(stderr, "hipress-bench: HIPRESS_ISA='%s': accepted values are auto, generic, avx2\n", s);
    exit(2);
}

/* The q codecs: a second row each, with stochastic rounding. */
static int kb_is_q(const char *name)
{
    return !strcmp(name, "q2") || !strcmp(name, "q4") || !strcmp(name, "q8");
}

/* 1 when name is in the comma-separated list (NULL: every name). */
static int kb_listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return list == NULL;
}

int hp_bench_kernels(int csv, size_t bytes, const char *only)
{
    const size_t B = bytes >= 64 ? bytes / 64 * 64 : KB_BYTES, n = B / sizeof(float);
    const int inner = B < KB_BYTES ? (int)(KB_BYTES / B) : 1;
    hipress_comp_params_t params;
    float *in, *res, *state, *out, *mdst;
    unsigned char *payload = NULL;
    int rc = 0;

    hipress_comp_params_default(&params);
    params.isa = kb_isa();
    in = malloc(B);
    res = malloc(B);
    state = malloc(B);
    out = malloc(B);
    mdst = malloc(B);
    if (!in || !res || !state || !out || !mdst) {
        fprintf(stderr, "hipress-bench: out of memory\n");
        return 2;
    }
    kb_fill(in, n);
    /* touch every page before timing */
    memset(res, 0, B);
    memset(state, 0, B);
    memset(out, 0, B);
    memset(mdst, 0, B);

    if (csv)
        printf("compressor,op,bytes,gbps,memcpy_gbps,ratio_to_memcpy,wire_ratio\n");
    else
        printf("# hipress-bench --kernels: %zu KiB of float32 (%d times a timing), median of %d, isa=%s\n"
               "%-16s %-7s %10s %9s %12s %9s %11s\n",
               B >> 10, inner, KB_REPS, params.isa == 0 ? "auto" : params.isa == 1 ? "generic" : "avx2",
               "compressor", "op", "KiB", "GB/s", "memcpy GB/s", "ratio", "wire_ratio");

    for (int k = 0; k < hipress_compressor_count(); k++) {
        const char *name = hipress_compressor_name(k);
        const hipress_compressor_v1_t *c = hipress_compressor_find(name);
        if (c == NULL || !kb_listed(only, name))
            continue;
        for (int stoch = 0; stoch < (kb_is_q(name) ? 2 : 1); stoch++) {
            double te[KB_REPS], td[KB_REPS], tm[KB_REPS], mc, ge, gd;
            hipress_comp_params_t p = params;
            char row[64];
            size_t cap, len = 0;
            int ok = 1;
            hipress_encode_args_t a;

            p.q_rounding = (uint32_t)stoch;
            snprintf(row, sizeof(row), "%s%s", name, stoch ? "-stochastic" : "");
            cap = c->max_payload(n, &p);
            if (c->flags & HIPRESS_COMP_SPARSE)
                cap = cap > 4 * n ? cap : 4 * n; /* a sparse encoder may send dense */
            payload = realloc(payload, cap + 64);
            if (payload == NULL) {
                fprintf(stderr, "hipress-bench: out of memory\n");
                rc = 2;
                break;
            }
            memset(payload, 0, cap);
            memset(res, 0, B);
            memset(state, 0, B);
            memset(&a, 0, sizeof(a));
            a.in = in;
            a.residual = (c->flags & HIPRESS_COMP_EF) ? res : NULL;
            a.state = (c->flags & HIPRESS_COMP_MOMENTUM) ? state : NULL;
            a.n = n;
            a.out = payload;
            a.out_cap = cap;
            a.rng_key[0] = 12345;
            a.params = &p;

            for (int r = -1; r < KB_REPS && ok; r++) { /* r = -1: warm-up */
                double t0, t1, t2, t3;
                int nf = 0;
                t0 = kb_now();
                for (int i = 0; i < inner; i++)
                    memcpy(mdst, in, B);
                t1 = kb_now();
                for (int i = 0; i < inner && ok; i++) {
                    a.rng_key[2] = (uint64_t)((r + 1) * inner + i); /* call number */
                    ok = c->encode(&a, &len, &nf) == HIPRESS_COMP_OK && !nf && len <= cap;
                }
                t2 = kb_now();
                for (int i = 0; i < inner && ok; i++)
                    ok = c->decode(payload, len, n, out, 0, &p) == HIPRESS_COMP_OK;
                t3 = kb_now();
                if (r >= 0) {
                    tm[r] = t1 - t0;
                    te[r] = t2 - t1;
                    td[r] = t3 - t2;
                }
            }
            if (!ok) {
                /* a collective compressor (powersgd) may need its own exchanges */
                if (csv)
                    printf("# %s: standalone encode/decode not available (flags 0x%x)\n", name, c->flags);
                else
                    printf("%-16s %-7s %s\n", name, "-", (c->flags & HIPRESS_COMP_COLLECTIVE)
                           ? "skipped: collective, no standalone encode/decode" : "failed");
                if (!(c->flags & HIPRESS_COMP_COLLECTIVE))
                    rc = 1;
                break;
            }
            mc = (double)B * inner / kb_median(tm, KB_REPS) / 1e9;
            ge = (double)B * inner / kb_median(te, KB_REPS) / 1e9;
            gd = (double)B * inner / kb_median(td, KB_REPS) / 1e9;
            for (int op = 0; op < 2; op++) {
                double g = op ? gd : ge, wr = (double)B / (double)(len + 12);
                if (csv)
                    printf("%s,%s,%zu,%.3f,%.3f,%.3f,%.2f\n", row, op ? "decode" : "encode", B, g, mc, g / mc,
                           wr);
                else
                    printf("%-16s %-7s %10zu %9.2f %12.2f %9.2f %11.2f\n", row, op ? "decode" : "encode", B >> 10,
                           g, mc, g / mc, wr);
            }
            fflush(stdout);
        }
        if (rc == 2)
            break;
    }
    free(payload);
    free(in);
    free(res);
    free(state);
    free(out);
    free(mdst);
    return rc;
}
