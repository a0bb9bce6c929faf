/*
 * hipress-bench --kernels --gpu [--bytes N] [--device D] [--csv]: the device
 * codec's throughput on `bytes` (default 256 MiB) of gradient-like floats in
 * device memory, against a device-to-device copy of the same bytes timed in
 * the same repetitions (cuda/hp_cuda_module.c cuda_bench): encode leaves the
 * message in device memory (no copy to the host), decode overwrites.  Rates
 * are raw float bytes per second (1 GB = 1e9 bytes), medians of 7.
 *
 * The tool links libhipress.so only (its public API): it loads the CUDA
 * module itself, from HIPRESS_CUDA_MODULE, else next to libhipress.so (as
 * the library does), and uses the module's table.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipress.h"
#define HP_GPU_OPS_ONLY
#include "hp_gpu.h"

typedef struct {
    const char *name;
    hp_gpu_enc_t e;
} fmt_row_t;

static fmt_row_t rows[16];
static int csv_out;

static void row(void *arg, int f, const char *op, double gbps, double copy_gbps, size_t payload)
{
    size_t bytes = *(const size_t *)arg;
    double wr = (double)bytes / (double)(payload + 12);
    if (csv_out)
        printf("%s,%s,%zu,%.3f,%.3f,%.3f,%.2f\n", rows[f].name, op, bytes, gbps, copy_gbps, gbps / copy_gbps, wr);
    else
        printf("%-14s %-7s %10zu %9.1f %12.1f %9.2f %11.2f\n", rows[f].name, op, bytes >> 20, gbps, copy_gbps,
               gbps / copy_gbps, wr);
    fflush(stdout);
}

/* The module: HIPRESS_CUDA_MODULE, else next to libhipress.so. */
static void *open_module(char *path, size_t len)
{
    const char *env = getenv("HIPRESS_CUDA_MODULE");
    Dl_info info;
    char dir[PATH_MAX];
    const char *cands[3] = {"%s/hipress/libhipress_cuda.so", "%s/libhipress_cuda.so", "%s/.libs/libhipress_cuda.so"};
    if (env != NULL && env[0] != '\0') {
        snprintf(path, len, "%s", env);
        return dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (dladdr((void *)hipress_version, &info) == 0 || info.dli_fname == NULL ||
        realpath(info.dli_fname, dir) == NULL)
        return NULL;
    if (strrchr(dir, '/') != NULL)
        *strrchr(dir, '/') = '\0';
    for (int i = 0; i < 3; i++) {
        void *h;
        snprintf(path, len, cands[i], dir);
        if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != NULL)
            return h;
    }
    return NULL;
}

static void add(int *n, const char *name, uint32_t fmt, uint32_t block, int ef)
{
    fmt_row_t *r = &rows[(*n)++];
    memset(r, 0, sizeof(*r));
    r->name = name;
    r->e.fmt = fmt;
    r->e.block = block;
    r->e.bits = 2;
    r->e.scale = 4.0f;   /* HIPRESS_TBQ_SCALE's default */
    r->e.k_full = (uint32_t)((block + 999) / 1000);   /* ceil(block * 0.001), HIPRESS_SPARSE_RATIO */
    r->e.residual = ef ? (float *)(uintptr_t)1 : NULL;   /* a non-NULL template: with a residual */
}

int hp_bench_kernels_gpu(int csv, size_t bytes, int device)
{
    char path[PATH_MAX + 64];
    const hp_gpu_ops_v2_t *(*get)(void);
    const hp_gpu_ops_v2_t *g;
    void *h = open_module(path, sizeof(path));
    int n = 0, rc;

    csv_out = csv;
    if (h == NULL || (get = (const hp_gpu_ops_v2_t *(*)(void))dlsym(h, HP_GPU_OPS_V2_SYMBOL)) == NULL ||
        (g = get()) == NULL || g->base.version != HP_GPU_OPS_V2_VERSION) {
        fprintf(stderr, "hipress-bench: no CUDA module with the device codec (%s)\n", h == NULL ? dlerror() : path);
        return 2;
    }
    if (g->base.init(1) != HP_GPU_OK) {
        fprintf(stderr, "hipress-bench: %s\n", g->base.last_error());
        return 2;
    }
    /* the defaults of the settings, as the library resolves them */
    add(&n, "none", HP_GPU_FMT_NONE, 1, 0);
    add(&n, "onebit", HP_GPU_FMT_ONEBIT, 4096, 1);
    add(&n, "onebit-noef", HP_GPU_FMT_ONEBIT, 4096, 0);
    add(&n, "tbq", HP_GPU_FMT_TBQ, 4096, 1);
    add(&n, "tbq-b65536", HP_GPU_FMT_TBQ, 65536, 1);   /* blocks larger than a CTA: two passes */
    add(&n, "terngrad", HP_GPU_FMT_TERNGRAD, 4096, 0);
    add(&n, "graddrop", HP_GPU_FMT_SPARSE, 65536, 1);
    add(&n, "dgc", HP_GPU_FMT_SPARSE, 65536, 1);
    rows[n - 1].e.state = (float *)(uintptr_t)1;
    rows[n - 1].e.momentum = 0.9f;
    add(&n, "fp16", HP_GPU_FMT_FP16, 1024, 0);
    add(&n, "bf16", HP_GPU_FMT_BF16, 1, 0);
    for (int i = 0; i < n; i++)
        if (rows[i].e.fmt == HP_GPU_FMT_SPARSE && bytes / 4 % rows[i].e.block)
            rows[i].e.k_last = (uint32_t)((bytes / 4 % rows[i].e.block + 999) / 1000);
    if (csv)
        printf("compressor,op,bytes,gbps,d2d_copy_gbps,ratio_to_copy,wire_ratio\n");
    else
        printf("# hipress-bench --kernels --gpu: %zu MiB of float32 in device memory, device %d, median of 7\n"
               "# module %s (%s); encode leaves the message on the device, decode overwrites\n"
               "%-14s %-7s %10s %9s %12s %9s %11s\n",
               bytes >> 20, device, path, g->base.build, "compressor", "op", "MiB", "GB/s", "d2d GB/s", "ratio",
               "wire_ratio");
    {
        hp_gpu_enc_t fmts[16];
        for (int i = 0; i < n; i++)
            fmts[i] = rows[i].e;
        rc = g->bench(device, bytes, 7, fmts, n, row, &bytes);
    }
    if (rc != HP_GPU_OK) {
        fprintf(stderr, "hipress-bench: %s\n", g->base.last_error());
        return 1;
    }
    return 0;
}
