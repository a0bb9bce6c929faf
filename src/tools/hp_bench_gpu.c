/*
 * hipress-bench --kernels --gpu [--bytes N] [--device D] [--csv]: the device
 * codec's throughput on `bytes` (default 256 MiB) of gradient-like floats in
 * device memory, against a device-to-device copy of the same bytes timed in
 * the same repetitions (cuda/module/hp_cuda_module.c cuda_bench): encode leaves the
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
#include <math.h>
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

/* A row: compressor `comp`'s device format `id` for n elements on blocks
 * of `block`, the other parameters the defaults of the settings (p), as the
 * library resolves them; iarg0, farg0 and farg1 as the format's row of
 * src/comp/hp_gpu_fmt.def says.  The payload's size is the compressor's
 * own (its max_payload).  NULL when there is no such compressor. */
static fmt_row_t *add(int *nrows, const char *name, const char *comp, uint32_t id, size_t n, uint32_t block,
                      hipress_comp_params_t p, int ef, uint32_t iarg0, float farg0, float farg1)
{
    const hipress_compressor_v1_t *c = hipress_compressor_find(comp);
    fmt_row_t *r = &rows[(*nrows)++];
    if (c == NULL) {
        fprintf(stderr, "hipress-bench: no compressor %s\n", comp);
        return NULL;
    }
    if (block > 1)
        p.onebit_block = p.tbq_block = p.terngrad_block = p.sparse_block = p.fp16_block = block;
    memset(r, 0, sizeof(*r));
    r->name = name;
    r->e.fmt.id = id;
    r->e.fmt.block = block;
    r->e.fmt.iarg[0] = iarg0;
    r->e.fmt.farg[0] = farg0;
    r->e.fmt.farg[1] = farg1;
    r->e.fmt.payload = c->max_payload(n, &p);
    r->e.residual = ef ? (float *)(uintptr_t)1 : NULL;   /* a non-NULL template: with a residual */
    return r;
}

/* A sparse row of blocks of G: kept per block ceil(G * ratio) (at least 1),
 * by a shorter last block its own. */
static fmt_row_t *add_sparse(int *nrows, const char *name, size_t n, uint32_t G, hipress_comp_params_t p, float m)
{
    fmt_row_t *r;
    const double kf = ceil((double)G * p.sparse_ratio), kl = ceil((double)(n % G) * p.sparse_ratio);
    if ((r = add(nrows, name, name, HP_GPU_FMT_SPARSE, n, G, p, 1, kf >= 1.0 ? (uint32_t)kf : 1u, m, 0.0f)) == NULL)
        return NULL;
    r->e.fmt.iarg[1] = n % G == 0 ? 0u : kl >= 1.0 ? (uint32_t)kl : 1u;
    return r;
}

int hp_bench_kernels_gpu(int csv, size_t bytes, int device)
{
    char path[PATH_MAX + 64];
    const hp_gpu_ops_v2_t *(*get)(void);
    const hp_gpu_ops_v2_t *g;
    void *h = open_module(path, sizeof(path));
    int n = 0, rc;

    csv_out = csv;
    if (h == NULL || (get = (const hp_gpu_ops_v2_t *(*)(void))dlsym(h, HP_GPU_CODEC_SYMBOL)) == NULL ||
        (g = get()) == NULL || g->base.version != HP_GPU_CODEC_VERSION) {
        fprintf(stderr, "hipress-bench: no CUDA module with the device codec (%s)\n", h == NULL ? dlerror() : path);
        return 2;
    }
    if (g->base.init(1) != HP_GPU_OK) {
        fprintf(stderr, "hipress-bench: %s\n", g->base.last_error());
        return 2;
    }
    /* the defaults of the settings, as the library resolves them */
    {
        const size_t ne = bytes / 4;
        hipress_comp_params_t p;
        fmt_row_t *dgc, *q2s;
        hipress_comp_params_default(&p);
        /* tbq: no fixed threshold, HIPRESS_TBQ_SCALE; terngrad: 2 bits */
        if (!add(&n, "none", "none", HP_GPU_FMT_NONE, ne, 1, p, 0, 0, 0.0f, 0.0f) ||
            !add(&n, "onebit", "onebit", HP_GPU_FMT_ONEBIT, ne, 4096, p, 1, 0, 0.0f, 0.0f) ||
            !add(&n, "onebit-noef", "onebit", HP_GPU_FMT_ONEBIT, ne, 4096, p, 0, 0, 0.0f, 0.0f) ||
            !add(&n, "tbq", "tbq", HP_GPU_FMT_TBQ, ne, 4096, p, 1, 0, 0.0f, 4.0f) ||
            /* blocks larger than a CTA: two passes */
            !add(&n, "tbq-b65536", "tbq", HP_GPU_FMT_TBQ, ne, 65536, p, 1, 0, 0.0f, 4.0f) ||
            !add(&n, "terngrad", "terngrad", HP_GPU_FMT_TERNGRAD, ne, 4096, p, 0, 2, 0.0f, 0.0f) ||
            !add_sparse(&n, "graddrop", ne, 65536, p, 0.0f) ||
            !(dgc = add_sparse(&n, "dgc", ne, 65536, p, 0.9f)) ||
            !add(&n, "fp16", "fp16", HP_GPU_FMT_FP16, ne, 1024, p, 0, 0, 0.0f, 0.0f) ||
            !add(&n, "bf16", "bf16", HP_GPU_FMT_BF16, ne, 1, p, 0, 0, 0.0f, 0.0f) ||
            /* the q codecs on their default block (512), with a residual */
            !add(&n, "q4", "q4", HP_GPU_FMT_Q, ne, p.q_block, p, 1, 4, 0.0f, 0.0f) ||
            !(q2s = add(&n, "q2-stochastic", "q2", HP_GPU_FMT_Q, ne, p.q_block, p, 1, 2, 0.0f, 0.0f)))
            return 2;
        dgc->e.state = (float *)(uintptr_t)1;   /* with its momentum state */
        q2s->e.fmt.iarg[1] = 1;                 /* iarg[1]: stochastic rounding */
    }
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
