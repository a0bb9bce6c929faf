/*
 * Compressed against exact MPI_Allreduce, on host and on device buffers, in
 * the same run (scripts/kit/gpu-check; under the preloaded libhipress.so, ranks
 * sharing device rank % devices).
 *
 *   mpi_cuda_bench [-c COMPRESSOR] [-b MIN] [-e MAX] [-n ITERS] [-w WARMUP]
 *
 * Per size (MIN to MAX bytes, doubling; default 4M to 256M), four
 * communicators with the same settings: host exact (opted out: plain
 * MPI), host compressed, device exact (opted out: staged through host
 * memory, as Debian's Open MPI needs) and device compressed.  Compression
 * is forced (HIPRESS_ALLOW_PLAIN=0; the algorithm and partitions are the
 * plan's), hierarchy off (ranks sharing one node would otherwise reduce
 * exactly inside it).  Time per call: the mean over ITERS calls after
 * WARMUP (the plan's exploration), the slowest rank's.  Prints CSV:
 * bytes,compressor,host_exact_ms,host_comp_ms,host_speedup,dev_exact_ms,
 * dev_comp_ms,dev_speedup,host_plan,dev_plan.
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static MPI_Comm make_comm(const char *comp, int exact)
{
    MPI_Comm c;
    MPI_Info info;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Info_create(&info);
    MPI_Info_set(info, "hipress_compressor", comp);
    MPI_Info_set(info, "hipress_allow_plain", "0");
    MPI_Info_set(info, "hipress_hierarchical", "off");
    MPI_Info_set(info, "hipress_min_bytes", "0");
    if (exact)
        MPI_Info_set(info, "hipress_compress", "false");
    MPI_Comm_set_info(c, info);
    MPI_Info_free(&info);
    return c;
}

static double timed(MPI_Comm c, void *buf, size_t n, int iters, int warm)
{
    double t0, t, tmax;
    for (int i = 0; i < warm; i++)
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c);
    MPI_Barrier(c);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c);
    t = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, c);
    return tmax * 1e3;
}

static size_t parse_bytes(const char *s)
{
    char *e;
    double v = strtod(s, &e);
    if (*e == 'K' || *e == 'k') v *= 1024;
    else if (*e == 'M' || *e == 'm') v *= 1024 * 1024;
    else if (*e == 'G' || *e == 'g') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

int main(int argc, char **argv)
{
    const char *comp = "onebit";
    size_t lo = 4u << 20, hi = 256u << 20;
    int iters = 10, warm = 20, ndev = 0;
    int (*plan)(MPI_Comm, size_t, char *, size_t);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-c")) comp = argv[i + 1];
        else if (!strcmp(argv[i], "-b")) lo = parse_bytes(argv[i + 1]);
        else if (!strcmp(argv[i], "-e")) hi = parse_bytes(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-w")) warm = atoi(argv[i + 1]);
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1 || cudaSetDevice(rank % ndev) != cudaSuccess) {
        fprintf(stderr, "rank %d: no CUDA device\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    plan = (int (*)(MPI_Comm, size_t, char *, size_t))dlsym(RTLD_DEFAULT, "hipress_comm_plan");
    if (rank == 0)
        printf("bytes,compressor,host_exact_ms,host_comp_ms,host_speedup,dev_exact_ms,dev_comp_ms,dev_speedup,"
               "host_plan,dev_plan\n");
    for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
        size_t n = bytes / sizeof(float);
        float *h = malloc(bytes);
        void *d = NULL;
        MPI_Comm he = make_comm(comp, 1), hc = make_comm(comp, 0), de = make_comm(comp, 1), dc = make_comm(comp, 0);
        double t[4];
        char ph[64] = "?", pd[64] = "?";
        if (h == NULL || cudaMalloc(&d, bytes) != cudaSuccess) {
            fprintf(stderr, "rank %d: out of memory for %zu bytes\n", rank, bytes);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (size_t i = 0; i < n; i++)
            h[i] = (float)(1e-3 * sin((double)i * 0.00037 + rank) + 1e-4 * (double)((i * 2654435761u) % 1000) / 1000.0);
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
        t[0] = timed(he, h, n, iters, 2);
        t[1] = timed(hc, h, n, iters, warm);
        t[2] = timed(de, d, n, iters, 2);
        t[3] = timed(dc, d, n, iters, warm);
        if (plan != NULL) {
            plan(hc, bytes, ph, sizeof(ph));
            plan(dc, bytes, pd, sizeof(pd));
            for (char *p = ph; *p; p++)
                *p = *p == ',' ? ';' : *p;
            for (char *p = pd; *p; p++)
                *p = *p == ',' ? ';' : *p;
        }
        if (rank == 0) {
            printf("%zu,%s,%.3f,%.3f,%.2f,%.3f,%.3f,%.2f,%s,%s\n", bytes, comp, t[0], t[1], t[0] / t[1], t[2], t[3],
                   t[2] / t[3], ph, pd);
            fflush(stdout);
        }
        MPI_Comm_free(&he);
        MPI_Comm_free(&hc);
        MPI_Comm_free(&de);
        MPI_Comm_free(&dc);
        cudaFree(d);
        free(h);
    }
    MPI_Finalize();
    return 0;
}
