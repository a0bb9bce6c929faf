/*
 * hipress-bench: compressed MPI_Allreduce against plain PMPI_Allreduce, timed
 * in the same run, nccl-tests style.
 *
 *   mpirun -np 4 hipress-bench -b 8K -e 64M -f 2 -n 20 -w 5 -c onebit -a auto [--csv]
 *
 * The compressed path is the interposed MPI_Allreduce on a duplicate of
 * MPI_COMM_WORLD configured with hipress_comm_set (compressor, algorithm,
 * HIPRESS_MIN_BYTES=0); the baseline calls PMPI_Allreduce directly.  Times
 * are medians over -n iterations; each iteration's time is the maximum over
 * ranks.  wire_ratio = bytes a plain ring would send / bytes hipress sent.
 */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipress.h"

static int rank, nranks;

/* hipress-bench --kernels: single-process compressor throughput
 * (src/tools/hp_bench_kernels.c). */
int hp_bench_kernels(int csv, size_t bytes, const char *only);
/* hipress-bench --kernels --gpu: the device codec (src/tools/hp_bench_gpu.c). */
int hp_bench_kernels_gpu(int csv, size_t bytes, int device);
/* hipress-bench --quality FILE: accumulated error over recorded gradients
 * against the textbook form (src/tools/hp_bench_quality.c). */
int hp_bench_quality(const char *path, char *comps, char *algos, int T, int csv);

static void die(const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "hipress-bench: %s\n", msg);
    MPI_Finalize();
    exit(2);
}

static size_t parse_size(const char *s)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || v < 0)
        die("bad size (use e.g. 8K, 64M, 1G)");
    switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1048576; end++; break;
    case 'g': case 'G': v *= 1073741824; end++; break;
    default: break;
    }
    if (*end != '\0')
        die("bad size (use e.g. 8K, 64M, 1G)");
    return (size_t)v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Gradient-like data: a smooth per-rank pattern plus noise, deterministic. */
static void fill(float *x, size_t n, int r, int iter)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL * (uint64_t)(r + 1) + (uint64_t)iter * 7919u;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        float u = (float)((s >> 40) * (1.0 / 16777216.0)) - 0.5f;
        x[i] = 0.01f * u + 0.001f * sinf((float)i * 0.001f + (float)r);
    }
}

static double time_op(int plain, const float *src, float *dst, size_t n, MPI_Comm comm)
{
    double t0, dt, dtmax;
    MPI_Barrier(comm);
    t0 = MPI_Wtime();
    if (plain)
        PMPI_Allreduce(src, dst, (int)n, MPI_FLOAT, MPI_SUM, comm);
    else if (MPI_Allreduce(src, dst, (int)n, MPI_FLOAT, MPI_SUM, comm) != MPI_SUCCESS)
        die("compressed allreduce failed");
    dt = MPI_Wtime() - t0;
    PMPI_Allreduce(&dt, &dtmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    return dtmax;
}

/* Where the time of one compressed call goes (max over ranks, per call):
 * encode and decode inside the kernels, and transfer = the time the same
 * algorithm takes to move as many bytes with `none`, less its own copies.
 * When the pipeline overlaps them, total < encode + transfer + decode. */
static void print_breakdown(MPI_Comm comm, MPI_Comm xcomm, const hipress_stats_t *s0,
                            const hipress_stats_t *s1, int iters, size_t count, double total,
                            float *src, float *dst)
{
    double loc[2], mx[2], sent, sent_max, xfer = 0;
    hipress_stats_t x0, x1;
    size_t xcount;
    (void)comm;
    loc[0] = (s1->encode_s - s0->encode_s) / iters;
    loc[1] = (s1->decode_s - s0->decode_s) / iters;
    MPI_Allreduce(loc, mx, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    sent = (double)(s1->bytes_wire - s0->bytes_wire) / iters;
    MPI_Allreduce(&sent, &sent_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* `none` sends 2(N-1)/N of its buffer with ring/ps: size it to match */
    xcount = (size_t)(sent_max / (2.0 * (nranks - 1) / nranks) / sizeof(float));
    xcount = xcount < 1 ? 1 : (xcount > count ? count : xcount);
    {
        double *tx = malloc(sizeof(double) * (size_t)iters), lx, mxx;
        hipress_stats_get(&x0);
        for (int it = 0; it < iters; it++)
            tx[it] = time_op(0, src, dst, xcount, xcomm);
        hipress_stats_get(&x1);
        xfer = median(tx, iters);
        lx = (x1.encode_s - x0.encode_s + x1.decode_s - x0.decode_s) / iters;
        MPI_Allreduce(&lx, &mxx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        xfer = xfer > mxx ? xfer - mxx : 0;
        free(tx);
    }
    if (rank == 0)
        printf("#   breakdown per call: encode %.1f us + transfer %.1f us + decode %.1f us = %.1f us; "
               "total %.1f us (%.0f%% of the sum)\n", mx[0] * 1e6, xfer * 1e6, mx[1] * 1e6,
               (mx[0] + xfer + mx[1]) * 1e6, total * 1e6, 100.0 * total / (mx[0] + xfer + mx[1]));
    {
        /* the two small collectives of every compressed call, as the
         * library runs them (src/drive/hp_drive.c): the eligibility agreement
         * (6 int64, max) before it and the failure agreement (1 int64, max)
         * after it, timed alone on a communicator of the same ranks */
        double *ta = malloc(sizeof(double) * (size_t)iters), agree;
        int64_t v[6] = {0}, o[6];
        MPI_Comm ac;
        MPI_Comm_dup(MPI_COMM_WORLD, &ac);
        for (int it = 0; it < iters; it++) {
            double t0;
            PMPI_Barrier(ac);
            t0 = MPI_Wtime();
            PMPI_Allreduce(v, o, 6, MPI_INT64_T, MPI_MAX, ac);
            PMPI_Allreduce(v, o, 1, MPI_INT64_T, MPI_MAX, ac);
            ta[it] = MPI_Wtime() - t0;
        }
        agree = median(ta, iters);
        MPI_Allreduce(MPI_IN_PLACE, &agree, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
            printf("#   agreements per call (eligibility 6 x int64, failure 1 x int64): %.1f us, %.2f%% of the "
                   "call\n", agree * 1e6, 100.0 * agree / total);
        MPI_Comm_free(&ac);
        free(ta);
    }
}

int main(int argc, char **argv)
{
    size_t b = 8192, e = 64u << 20;
    double f = 2;
    int n = 20, w = 5, csv = 0, breakdown = 0, calls = 100;
    const char *comp = "onebit", *algo = "auto", *quality = NULL;
    int comp_set = 0, algo_set = 0;
    MPI_Comm comm, xcomm;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--kernels") == 0) {
            int kcsv = 0, gpu = 0, device = 0;
            size_t kbytes = 0;   /* the default: 256 MiB on the GPU, 64 MiB on the CPU */
            const char *only = NULL;   /* -c: these compressors only (the CPU's) */
            for (int j = 1; j < argc; j++) {
                kcsv |= strcmp(argv[j], "--csv") == 0;
                gpu |= strcmp(argv[j], "--gpu") == 0;
                if (strcmp(argv[j], "--bytes") == 0 && j + 1 < argc)
                    kbytes = parse_size(argv[j + 1]);
                if (strcmp(argv[j], "--device") == 0 && j + 1 < argc)
                    device = atoi(argv[j + 1]);
                if (strcmp(argv[j], "-c") == 0 && j + 1 < argc)
                    only = argv[j + 1];
            }
            return gpu ? hp_bench_kernels_gpu(kcsv, kbytes ? kbytes : (size_t)256 << 20, device)
                       : hp_bench_kernels(kcsv, kbytes, only);
        }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--csv") == 0) { csv = 1; continue; }
        if (strcmp(a, "--breakdown") == 0) { breakdown = 1; continue; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            if (rank == 0)
                printf("usage: hipress-bench [-b minbytes] [-e maxbytes] [-f factor] [-n iters] [-w warmup]\n"
                       "                     [-c compressor] [-a algorithm] [--csv] [--breakdown]\n"
                       "       hipress-bench --quality FILE [-c comp,comp..] [-a algo,algo..] [-T calls] [--csv]\n"
                       "       hipress-bench --kernels [--bytes N] [-c comp,..] [--csv]   (no mpirun needed)\n"
                       "       hipress-bench --kernels --gpu [--bytes N] [--device D] [--csv]\n");
            MPI_Finalize();
            return 0;
        }
        if (v == NULL)
            die("missing value after a flag (see --help)");
        if (strcmp(a, "-b") == 0) b = parse_size(v);
        else if (strcmp(a, "-e") == 0) e = parse_size(v);
        else if (strcmp(a, "-f") == 0) f = atof(v);
        else if (strcmp(a, "-n") == 0) n = atoi(v);
        else if (strcmp(a, "-w") == 0) w = atoi(v);
        else if (strcmp(a, "-c") == 0) { comp = v; comp_set = 1; }
        else if (strcmp(a, "-a") == 0) { algo = v; algo_set = 1; }
        else if (strcmp(a, "--quality") == 0) quality = v;
        else if (strcmp(a, "-T") == 0) calls = atoi(v);
        else die("unknown flag (see --help)");
        i++;
    }
    if (f < 1.01 || n < 1 || w < 0 || b < 4 || e < b)
        die("need -f > 1, -n >= 1, -w >= 0, 4 <= -b <= -e");
    if (quality != NULL) {
        char cl[256], al[128];
        if (calls < 1)
            die("need -T >= 1");
        snprintf(cl, sizeof(cl), "%s", comp_set ? comp : "onebit,tbq,terngrad,graddrop,dgc,fp16");
        snprintf(al, sizeof(al), "%s", algo_set ? algo : "ring,tree,ps,allgather,auto");
        hp_bench_quality(quality, cl, al, calls, csv);
        MPI_Finalize();
        return 0;
    }

    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (hipress_comm_set(comm, "HIPRESS_COMPRESSOR", comp) != HIPRESS_OK)
        die("unknown compressor (hipress_info --compressors); is libhipress loaded?");
    if (hipress_comm_set(comm, "HIPRESS_ALGO", algo) != HIPRESS_OK)
        die("unknown algorithm (hipress_info lists them)");
    hipress_comm_set(comm, "HIPRESS_MIN_BYTES", "0");
    /* -c names the compressor to time: its own form, as a job that says it
     * trains with SGD gets it, unless the environment says otherwise */
    if (getenv("HIPRESS_OPTIMIZER") == NULL)
        hipress_comm_set(comm, "HIPRESS_OPTIMIZER", "sgd");
    /* one buffer serves every size, one size after the other (as in
     * nccl-tests): each (address, count) is its own error-feedback buffer,
     * not a staging buffer */
    hipress_comm_set(comm, "HIPRESS_EF_LAYOUT", "trust");
    /* transfer-only reference for --breakdown: `none` through the same
     * algorithm on a buffer as large as the compressed messages */
    MPI_Comm_dup(MPI_COMM_WORLD, &xcomm);
    hipress_comm_set(xcomm, "HIPRESS_COMPRESSOR", "none");
    hipress_comm_set(xcomm, "HIPRESS_ALGO", strcmp(algo, "auto") == 0 ? "ring" : algo);
    hipress_comm_set(xcomm, "HIPRESS_MIN_BYTES", "0");

    float *src = malloc(e), *dst = malloc(e), *ref = malloc(e);
    double *tc = malloc(sizeof(double) * (size_t)n), *tb = malloc(sizeof(double) * (size_t)n);
    if (!src || !dst || !ref || !tc || !tb)
        die("out of memory");

    if (rank == 0) {
        if (csv)
            printf("bytes,count,type,compressor,algo,ranks,time_us,base_time_us,speedup,algbw_gbps,busbw_gbps,wire_ratio,rel_err,identical\n");
        else
            printf("# hipress-bench: %d ranks, compressor %s, algorithm %s\n"
                   "# %12s %11s %6s %10s %12s %12s %8s %9s %9s %8s %9s %5s\n",
                   nranks, comp, algo, "size(B)", "count", "type", "compress", "time(us)",
                   "plain(us)", "speedup", "algbw", "busbw", "wire", "rel_err", "ident");
    }
    for (double sz = (double)b; sz <= (double)e * 1.0000001; sz *= f) {
        size_t count = (size_t)sz / sizeof(float);
        hipress_stats_t s0, s1;
        double num = 0, den = 0, err, errmax, tmed, bmed, algbw, wire_ratio;
        uint64_t h = 14695981039346656037ULL, hh[2], hout[2];

        if (count == 0)
            continue;
        for (int it = 0; it < w; it++) {
            fill(src, count, rank, it);
            time_op(0, src, dst, count, comm);
            time_op(1, src, dst, count, comm);
        }
        /* an adaptive plan explores on its first calls: finish before timing */
        for (int it = 0; it < 32; it++) {
            char plan[64];
            hipress_comm_plan(comm, count * sizeof(float), plan, sizeof(plan));
            if (strcmp(plan, "exploring") != 0 && (strcmp(plan, "none") != 0 || it > 0))
                break;
            time_op(0, src, dst, count, comm);
        }
        hipress_stats_get(&s0);
        for (int it = 0; it < n; it++) {
            fill(src, count, rank, w + it);
            /* alternate the order so neither side always runs first */
            if (it % 2) {
                tb[it] = time_op(1, src, ref, count, comm);
                tc[it] = time_op(0, src, dst, count, comm);
            } else {
                tc[it] = time_op(0, src, dst, count, comm);
                tb[it] = time_op(1, src, ref, count, comm);
            }
        }
        hipress_stats_get(&s1);
        for (size_t i = 0; i < count; i++) {
            double d = (double)dst[i] - (double)ref[i];
            num += d * d;
            den += (double)ref[i] * ref[i];
        }
        err = den > 0 ? sqrt(num / den) : sqrt(num);
        MPI_Allreduce(&err, &errmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        {
            const unsigned char *p = (const unsigned char *)dst;
            for (size_t i = 0; i < count * sizeof(float); i++) { h ^= p[i]; h *= 1099511628211ULL; }
        }
        hh[0] = h; hh[1] = ~h;
        MPI_Allreduce(hh, hout, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        tmed = median(tc, n);
        bmed = median(tb, n);
        algbw = (double)(count * sizeof(float)) / tmed / 1e9;
        {
            double sent = (double)(s1.bytes_wire - s0.bytes_wire) / n, sent_max;
            double plain = 2.0 * (nranks - 1) / nranks * (double)(count * sizeof(float));
            MPI_Allreduce(&sent, &sent_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            wire_ratio = sent_max > 0 ? plain / sent_max : 0;
        }
        if (rank == 0) {
            const char *id = hout[0] == ~hout[1] ? "yes" : "no";
            if (csv)
                printf("%zu,%zu,float,%s,%s,%d,%.2f,%.2f,%.3f,%.4f,%.4f,%.2f,%.3e,%s\n",
                       count * sizeof(float), count, comp, algo, nranks, tmed * 1e6, bmed * 1e6,
                       bmed / tmed, algbw, algbw * 2.0 * (nranks - 1) / nranks, wire_ratio, errmax, id);
            else
                printf("  %12zu %11zu %6s %10s %12.1f %12.1f %8.2f %9.3f %9.3f %8.2f %9.2e %5s\n",
                       count * sizeof(float), count, "float", comp, tmed * 1e6, bmed * 1e6,
                       bmed / tmed, algbw, algbw * 2.0 * (nranks - 1) / nranks, wire_ratio, errmax, id);
            fflush(stdout);
        }
        if (breakdown)
            print_breakdown(comm, xcomm, &s0, &s1, n, count, tmed, src, dst);
    }
    free(src); free(dst); free(ref); free(tc); free(tb);
    MPI_Comm_free(&xcomm);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
