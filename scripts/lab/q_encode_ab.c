/*
 * q_encode_ab: the encode of one compressor from two or more builds of
 * libhipress.so in one process, interleaved, against memcpy timed in the
 * same repetition (the A/B of the q codecs' encode):
 *
 *   mpicc -O2 -Iinclude -o /tmp/q_encode_ab scripts/lab/q_encode_ab.c -ldl -lm
 *   /tmp/q_encode_ab NAME STOCH BYTES REPS LIB [LIB ...]
 *     e.g. /tmp/q_encode_ab q4 1 67108864 9 /tmp/qold/_build/.libs/libhipress.so _build/.libs/libhipress.so
 *
 * NAME a compressor, STOCH its HIPRESS_Q_ROUNDING (0 nearest, 1
 * stochastic), BYTES of gradient-like floats (hipress-bench --kernels'
 * data; below 64 MiB the encode runs 64 MiB / BYTES times a timing), with
 * a residual.  Each library is dlopen'ed on its own (RTLD_LOCAL), so the
 * builds are timed in one process on the same input; per repetition
 * memcpy first, then every library's encode, the order rotated by one each
 * repetition.  Times are the thread's CPU time.  Prints per library the
 * median GB/s and the median (range) of the ratio to the same repetition's
 * memcpy, and a warning when the libraries' last payloads or residuals
 * differ in any byte (they must not: same input, same calls).
 * HIPRESS_ISA=generic runs the portable kernels; Q_AB_RESIDUAL=0 encodes
 * without a residual (the residual-free form a staging buffer runs, e.g.
 * HIPRESS_STAGING_CODEC's q4 with STOCH 1).  Q_AB_PIECE=P (bytes, a
 * multiple of 2048 dividing BYTES) encodes the buffer as BYTES/P
 * consecutive calls of P bytes each (input, residual and payload at the
 * piece's offset, rng_offset the piece's first element), as an algorithm's
 * partitions call it, while memcpy still copies BYTES in one call.
 */
#include "hipress.h"
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static int cmp(const void *a, const void *b)
{
    double x = *(double *)a, y = *(double *)b;
    return (x > y) - (x < y);
}
static double med(double *v, int n)
{
    double t[1024];
    memcpy(t, v, n * 8);
    qsort(t, n, 8, cmp);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}
static double mn(double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m)
            m = v[i];
    return m;
}
static double mx(double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}
typedef const hipress_compressor_v1_t *(*find_t)(const char *);
typedef void (*pdef_t)(hipress_comp_params_t *);
int main(int argc, char **argv)
{
    if (argc < 6 || argc > 5 + 8 || atoi(argv[4]) < 1 || atoi(argv[4]) > 1024 || strtoull(argv[3], 0, 0) < 1024) {
        fprintf(stderr, "usage: q_encode_ab NAME STOCH BYTES(>=1024) REPS(1..1024) LIB [LIB ...] (8 at most)\n");
        return 2;
    }
    const char *name = argv[1];
    int stoch = atoi(argv[2]);
    size_t B = strtoull(argv[3], 0, 0);
    int reps = atoi(argv[4]);
    int nl = argc - 5;
    size_t n = B / 4;
    size_t tot = (size_t)64 << 20;
    int inner = B < tot ? (int)(tot / B) : 1;
    float *in = malloc(B), *md = malloc(B);
    float *res[8];
    const char *pe = getenv("Q_AB_PIECE");
    size_t piece = pe ? strtoull(pe, 0, 0) : B;
    if (piece < 2048 || piece % 2048 || B % piece) {
        fprintf(stderr, "q_encode_ab: Q_AB_PIECE must be a multiple of 2048 dividing BYTES\n");
        return 2;
    }
    uint64_t z = 0x243F6A8885A308D3ULL;
    for (size_t i = 0; i < n; i++) {
        double layer = (double)((i >> 18) % 7 + 1);
        double u = 0;
        z += 0x9E3779B97F4A7C15ULL;
        uint64_t h = z;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
        h ^= h >> 31;
        for (int k = 0; k < 4; k++)
            u += (double)((h >> (16 * k)) & 0xffff) / 65536.0 - 0.5;
        in[i] = (float)(1e-3 * layer * (sin((double)i * 0.00037) + 0.8 * u));
    }
    memset(md, 0, B);
    const hipress_compressor_v1_t *c[8];
    hipress_comp_params_t p[8];
    unsigned char *pl[8];
    hipress_encode_args_t a[8];
    for (int l = 0; l < nl; l++) {
        void *h = dlopen(argv[5 + l], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        find_t f = (find_t)dlsym(h, "hipress_compressor_find");
        pdef_t d = (pdef_t)dlsym(h, "hipress_comp_params_default");
        d(&p[l]);
        p[l].q_rounding = stoch;
        const char *isa = getenv("HIPRESS_ISA");
        if (isa && !strcmp(isa, "generic"))
            p[l].isa = 1;
        c[l] = f(name);
        if (c[l] == NULL) {
            fprintf(stderr, "q_encode_ab: %s: no compressor '%s'\n", argv[5 + l], name);
            return 2;
        }
        size_t cap = c[l]->max_payload(piece / 4, &p[l]) * (B / piece);
        pl[l] = malloc(cap + 64);
        memset(pl[l], 0, cap);
        res[l] = malloc(B);
        memset(res[l], 0, B);
        memset(&a[l], 0, sizeof a[l]);
        a[l].in = in;
        const char *ra = getenv("Q_AB_RESIDUAL");
        a[l].residual = ra && !strcmp(ra, "0") ? NULL : res[l];
        a[l].n = piece / 4;
        a[l].out = pl[l];
        a[l].out_cap = cap / (B / piece);
        a[l].rng_key[0] = 12345;
        a[l].params = &p[l];
    }
    double tm[1024], te[8][1024], rat[8][1024];
    for (int r = -1; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < inner; i++)
            memcpy(md, in, B);
        double tmc = now() - t0;
        for (int q = 0; q < nl; q++) {
            int l = (q + (r < 0 ? 0 : r)) % nl;
            double t1 = now();
            for (int i = 0; i < inner; i++) {
                a[l].rng_key[2] = (uint64_t)((r + 1) * inner + i);
                for (size_t off = 0; off < n; off += piece / 4) {
                    hipress_encode_args_t e = a[l];
                    size_t len;
                    int nf;
                    e.in = in + off;
                    e.residual = a[l].residual ? a[l].residual + off : NULL;
                    e.out = pl[l] + off / (piece / 4) * a[l].out_cap;
                    e.rng_offset = off;
                    if (c[l]->encode(&e, &len, &nf) || nf) {
                        fprintf(stderr, "fail\n");
                        return 1;
                    }
                }
            }
            double t2 = now();
            if (r >= 0) {
                te[l][r] = t2 - t1;
                rat[l][r] = tmc / (t2 - t1);
            }
        }
        if (r >= 0)
            tm[r] = tmc;
    }
    /* same bytes across libraries (last encode) */
    for (int l = 1; l < nl; l++) {
        size_t cap = a[0].out_cap * (B / piece);
        if (memcmp(pl[0], pl[l], cap) || memcmp(res[0], res[l], B))
            printf("WARNING: lib %d bytes differ from lib 0\n", l);
    }
    if (piece != B)
        printf("[pieces of %zu B] ", piece);
    printf("%s%s%s %zu B: memcpy %.2f GB/s", name, stoch ? "-stochastic" : "", a[0].residual ? "" : " (no residual)", B,
           (double)B * inner / med(tm, reps) / 1e9);
    for (int l = 0; l < nl; l++)
        printf(" | L%d enc %.2f GB/s ratio %.3f (%.3f-%.3f)", l, (double)B * inner / med(te[l], reps) / 1e9,
               med(rat[l], reps), mn(rat[l], reps), mx(rat[l], reps));
    printf("\n");
    return 0;
}
