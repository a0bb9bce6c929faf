/*
 * stream_rates: what this machine's memory moves at 64 MiB, to state the
 * traffic model of the q encode (doc/measured/q-encode-ab.md, "What
 * bounds the q encode with a residual") against measured rates rather than assumed ones:
 *
 *   cc -O3 -march=native -o /tmp/stream_rates scripts/lab/stream_rates.c
 *   /tmp/stream_rates [BYTES] [REPS]
 *
 * Per repetition, on BYTES of floats (default 64 MiB, 11 repetitions):
 *   read      the largest |x| bits           (reads S)
 *   rmw       r[i] = x[i] + r[i]            (reads 2S, writes S)
 *   memcpy    glibc memcpy(y, x)            (reads S, writes S)
 *   copy      y[i] = x[i] + 0, plain stores (reads S, writes S + allocate)
 * (memcpy counted as 2S: non-temporal or rep movsb stores, which on this
 * machine's glibc a 64 MiB copy uses, read no line before writing it.)
 * Prints each one's median time, its rate in GB/s of its own buffer and in
 * GB/s of the bytes it moves by the model above (plain stores counted with
 * their write-allocate read), so the model's traffic per second can be
 * compared across the kernels.  Thread CPU time, medians.
 */
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
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { K_READ, K_RMW, K_MEMCPY, K_COPY, K_N };
static const char *const names[K_N] = {"read", "rmw", "memcpy", "copy"};
/* bytes moved per byte of buffer, by the model in the header */
static const double traffic[K_N] = {1.0, 3.0, 2.0, 3.0};

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 64u << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 11;
    if (bytes < 4096 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: stream_rates [BYTES>=4096] [REPS 1..1000]\n");
        return 2;
    }
    size_t n = bytes / sizeof(float);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y),
          *r = malloc(n * sizeof *r);
    double *t[K_N];
    if (!x || !y || !r)
        return 1;
    for (int k = 0; k < K_N; k++)
        if (!(t[k] = malloc(reps * sizeof(double))))
            return 1;
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(i % 1000) * 1e-3f;
        r[i] = 0.0f;
        y[i] = 0.0f;
    }
    volatile float sink = 0.0f;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now();
        /* the largest |x| bits, as the q codecs' range check reads them
         * (vectorised at -O3, so the read runs at memory speed) */
        unsigned s = 0;
        const unsigned *xb = (const unsigned *)x;
        for (size_t i = 0; i < n; i++) {
            unsigned v = xb[i] & 0x7fffffffu;
            s = v > s ? v : s;
        }
        sink += (float)(s & 1u);
        double t1 = now();
        for (size_t i = 0; i < n; i++)
            r[i] = x[i] + r[i];
        double t2 = now();
        memcpy(y, x, n * sizeof *x);
        double t3 = now();
        /* + 0.0f (not an identity for -0) keeps the compiler from making
         * this loop a memcpy call, and lets it vectorise */
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] + 0.0f;
        double t4 = now();
        t[K_READ][rep] = t1 - t0;
        t[K_RMW][rep] = t2 - t1;
        t[K_MEMCPY][rep] = t3 - t2;
        t[K_COPY][rep] = t4 - t3;
    }
    printf("%zu bytes, %d repetitions (medians)\n", bytes, reps);
    for (int k = 0; k < K_N; k++) {
        double m = median(t[k], reps);
        printf("%-7s %8.3f ms  %6.2f GB/s of buffer  %6.2f GB/s moved (%.0fS)\n",
               names[k], 1e3 * m, bytes / m * 1e-9,
               traffic[k] * bytes / m * 1e-9, traffic[k]);
    }
    free(x), free(y), free(r);
    for (int k = 0; k < K_N; k++)
        free(t[k]);
    return sink == -1.0f;
}
