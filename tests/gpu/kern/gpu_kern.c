/*
 * The CUDA kernels of libhipress_cuda.so on a real GPU, bit for bit against
 * the CPU compressors (tests/gpu/kern/check_kern.c holds their emulation to the same
 * bytes on any machine).  Run by scripts/kit/gpu-check and
 * tests/gpu/device/run_gpu_device.sh; exits 77 (skipped) where no GPU is usable.
 *
 *   gpu_kern [--quick] [--small] [--only LIST]
 *                        the module from HIPRESS_CUDA_MODULE, else the
 *                        usual places (hp_gpu_module); --small leaves out
 *                        the sizes of 4 Mi elements and more, --only runs
 *                        the formats of LIST (comma-separated: none, onebit,
 *                        tbq, terngrad, q2, q4, q8, graddrop, dgc, fp16,
 *                        bf16, ops for the buffer operations): the short
 *                        runs under compute-sanitizer (scripts/gpu-kit)
 *
 * Every format, many sizes (tails, partial blocks, several pieces and CTAs),
 * parameters and inputs (ties, signed zeros, NaN, Inf, residuals that
 * overflow, float lane sums that overflow): the payload, the residual and
 * the state after an encode must be the CPU's bytes; decodes (overwrite and
 * accumulate) of the CPU's messages must give the CPU's bits; malformed
 * messages must be rejected exactly when the CPU rejects them; the buffer
 * operations (fold, momentum, add, divide, convert) and powersgd's
 * stream-ordered steps (start Q, orthonormalisation, the flagged
 * reconstruction and copy, the NaN/Inf flag) must match the CPU's.
 *
 * This file: the program's state, the device-memory helpers and main;
 * gpu_kern_fmt.c the formats' cases, gpu_kern_ops.c the buffer operations
 * and powersgd's steps (gpu_kern.h between them).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_config.h"
#include "hp_gpu.h"
#include "gpu_kern.h"

extern char **environ;

const hp_gpu_ops_v2_t *g;
hp_gpu_ptr_t where = {HP_MEM_DEVICE, 0, NULL};
void *cx;
int failures, cases, quick, small_only;
const char *only;
/* the sizes of 4 Mi elements and more (left out by --small) */
const size_t large[2] = {(1u << 22) + 5, (1u << 24) + 3};

void *dev(const void *host, size_t bytes)
{
    void *d = NULL;
    if (g->dev_alloc(&where, bytes ? bytes : 4, &d) != HP_GPU_OK ||
        (host != NULL && bytes > 0 && g->base.memcpy_h2d(d, host, bytes, &where) != HP_GPU_OK)) {
        fprintf(stderr, "gpu_kern: device memory: %s\n", g->base.last_error());
        exit(1);
    }
    return d;
}

void back(void *host, const void *d, size_t bytes)
{
    if (bytes > 0 && g->base.memcpy_d2h(host, d, bytes, &where) != HP_GPU_OK) {
        fprintf(stderr, "gpu_kern: copy to host: %s\n", g->base.last_error());
        exit(1);
    }
}

int same_bits(const float *a, const float *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) {
            *at = i;
            return 0;
        }
    return 1;
}

/* The stand-in driver's counters (tests/gpu/standins/mock_cuda.c), when it is the
 * driver; NULL on a real one. */
unsigned long long (*mock_count)(const char *what);
void *cs;   /* the caller's stream of the device-message runs */
void *cx2;  /* a second codec context: the producer of their input */

unsigned long long host_waits(void)
{
    return mock_count != NULL ? mock_count("syncs") + mock_count("d2h") + mock_count("h2d") : 0;
}

/* NAME is in --only's list (or there is no list) */
int selected(const char *name)
{
    size_t len = strlen(name);
    for (const char *p = only; p != NULL; p = strchr(p, ',')) {
        if (*p == ',')
            p++;
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
    }
    return only == NULL;
}

int main(int argc, char **argv)
{
    static const size_t small[] = {1, 31, 33, 2047, 2049, 4097, 16385, 65537, 100003};
    static const char *formats[] = {"none", "onebit", "tbq", "terngrad", "q2", "q4", "q8", "graddrop", "dgc",
                                    "fp16", "bf16", "ops"};
    hp_config_t cfg;
    char err[600];
    hp_gpu_probe_t probe;
    const hp_gpu_ops_t *v1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--small") == 0) {
            small_only = 1;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: gpu_kern [--quick] [--small] [--only LIST]\n");
            return 2;
        }
    }
    for (const char *p = only; p != NULL; p = strchr(p, ',')) {
        size_t len;
        int known = 0;
        if (*p == ',')
            p++;
        len = strcspn(p, ",");
        for (size_t k = 0; k < sizeof(formats) / sizeof(formats[0]); k++)
            known |= strlen(formats[k]) == len && strncmp(p, formats[k], len) == 0;
        if (!known) {
            fprintf(stderr, "gpu_kern: --only: unknown format '%.*s' (known: none, onebit, tbq, terngrad, q2, q4, "
                    "q8, graddrop, dgc, fp16, bf16, ops)\n", (int)len, p);
            return 2;
        }
    }
    if (hp_config_load(&cfg, environ, hp_comp_name_ok, err, sizeof(err)) != HP_OK) {
        fprintf(stderr, "gpu_kern: %s\n", err);
        return 1;
    }
    hp_gpu_configure(&cfg);
    v1 = hp_gpu_module(1, err, sizeof(err));
    if (v1 == NULL || v1->probe(&probe) != HP_GPU_OK || probe.ndevices < 1) {
        printf("gpu_kern: no usable GPU here (%s): skipped\n", v1 == NULL ? err : "no device");
        return 77;
    }
    g = hp_gpu_module_v2();
    if (g == NULL) {
        printf("gpu_kern: the module has no device codec\n");
        return 1;
    }
    if (g->codec_probe(&where) != HP_GPU_OK || g->call_begin(&where, &cx) != HP_GPU_OK) {
        printf("gpu_kern: the codec's kernels do not run on device 0: %s\n", g->base.last_error());
        return 1;
    }
    printf("# gpu_kern: device 0 %s (sm_%d%d), module %s\n", probe.dev[0].name, probe.dev[0].cc_major,
           probe.dev[0].cc_minor, v1->build);
    if (g->base.stream_create(&where, &cs) != HP_GPU_OK || g->call_begin(&where, &cx2) != HP_GPU_OK) {
        printf("gpu_kern: no stream: %s\n", g->base.last_error());
        return 1;
    }
    {
        void *h = dlopen(HP_CUDA_DRIVER_LIB, RTLD_NOW | RTLD_NOLOAD);
        mock_count = h != NULL ? (unsigned long long (*)(const char *))dlsym(h, "mock_cuda_count") : NULL;
        printf("# device messages: host synchronisations and copies %s\n",
               mock_count != NULL ? "counted (the stand-in driver)" : "not counted (a real driver)");
    }
    {
        kc_t t = kc("none", HP_GPU_FMT_NONE);
        sweep(t, small, 9, 1);
    }
    {
        static const uint32_t blocks[] = {32, 1024, 4096, 16384, 65536};
        kc_t t = kc("onebit", HP_GPU_FMT_ONEBIT);
        for (size_t b = 0; b < 5; b++)
            for (int resid = 0; resid < 2; resid++) {
                t.p.onebit_block = blocks[b];
                t.resid = resid;
                t.overflow = 0;
                sweep(t, small, 9, b == 2);
                if (resid) {
                    t.overflow = 1;
                    sweep(t, small + 5, 4, 0);
                }
            }
        t.p.onebit_block = 4096;
        t.resid = 1;
        t.overflow = 0;
        sweep(t, large, quick ? 1 : 2, 0);
    }
    {
        static const uint32_t blocks[] = {32, 4096, 65536};
        kc_t t = kc("tbq", HP_GPU_FMT_TBQ);
        for (size_t b = 0; b < 3; b++)
            for (int k = 0; k < 2; k++)
                for (int resid = 0; resid < 2; resid++) {
                    t.p.tbq_block = blocks[b];
                    t.p.tbq_threshold = k ? 0.003f : 0.0f;
                    t.resid = resid;
                    t.overflow = 0;
                    sweep(t, small, 9, b == 1 && k == 0);
                    if (resid && k == 0) {
                        t.overflow = 1;
                        sweep(t, small + 5, 4, 0);
                    }
                }
        t.p.tbq_block = 4096;
        t.p.tbq_threshold = 0.0f;
        t.resid = 1;
        t.overflow = 0;
        sweep(t, large, quick ? 1 : 2, 0);
    }
    {
        static const uint32_t bits[] = {1, 2, 4, 8};
        static const uint32_t blocks[] = {32, 4096, 65536};
        kc_t t = kc("terngrad", HP_GPU_FMT_TERNGRAD);
        for (size_t k = 0; k < 3; k++)
            for (size_t b = 0; b < 4; b++) {
                t.p.terngrad_block = blocks[k];
                t.p.terngrad_bits = bits[b];
                sweep(t, small, 9, b == 1 && k == 1);
            }
        t.p.terngrad_bits = 2;
        t.p.terngrad_block = 4096;
        sweep(t, large, quick ? 1 : 2, 0);
    }
    {
        static const char *names[] = {"q2", "q4", "q8"};
        static const uint32_t blocks[] = {32, 512, 4096, 65536};
        for (size_t w = 0; w < 3; w++) {
            kc_t t = kc(names[w], HP_GPU_FMT_Q);
            for (size_t k = 0; k < 4; k++)
                for (uint32_t rounding = 0; rounding < 2; rounding++)
                    for (int resid = 0; resid < 2; resid++) {
                        t.p.q_block = blocks[k];
                        t.p.q_rounding = rounding;
                        t.resid = resid;
                        t.overflow = 0;
                        sweep(t, small, 9, k == 1 && resid);
                        if (resid && k == 1) {
                            t.overflow = 1;
                            sweep(t, small + 5, 4, 0);
                        }
                    }
            t.p.q_block = 512;
            t.p.q_rounding = w == 0;
            t.resid = 1;
            t.overflow = 0;
            sweep(t, large, quick ? 1 : 2, 0);
        }
    }
    {
        static const uint32_t blocks[] = {32, 4096, 65536};
        static const double ratios[] = {0.001, 0.01, 0.3};
        kc_t t = kc("graddrop", HP_GPU_FMT_SPARSE);
        for (size_t b = 0; b < 3; b++)
            for (size_t q = 0; q < 3; q++)
                for (int resid = 0; resid < 2; resid++) {
                    t.p.sparse_block = blocks[b];
                    t.p.sparse_ratio = ratios[q];
                    t.resid = resid;
                    t.overflow = 0;
                    sweep(t, small, 9, b == 2 && q == 0);
                    if (resid && q == 1) {
                        t.overflow = 1;
                        sweep(t, small + 5, 4, 0);
                    }
                }
        t.p.sparse_block = 65536;
        t.p.sparse_ratio = 0.001;
        t.resid = 1;
        t.overflow = 0;
        sweep(t, large, quick ? 1 : 2, 0);
        t = kc("dgc", HP_GPU_FMT_SPARSE);
        t.p.dgc_momentum = 0.9f;
        t.state = 1;
        for (int resid = 0; resid < 2; resid++) {
            t.resid = resid;
            sweep(t, small, 9, 1);
        }
    }
    {
        static const uint32_t blocks[] = {32, 1024, 4096};
        static const size_t hsizes[] = {1, 31, 1023, 1024, 1025, 4097, 100003};
        kc_t t = kc("fp16", HP_GPU_FMT_FP16);
        for (size_t b = 0; b < 3; b++) {
            t.p.fp16_block = blocks[b];
            sweep(t, hsizes, 7, 1);
        }
        t.p.fp16_block = 1024;
        sweep(t, large, quick ? 1 : 2, 0);
        t = kc("bf16", HP_GPU_FMT_BF16);
        sweep(t, hsizes, 7, 1);
        sweep(t, large, quick ? 1 : 2, 0);
    }
    if (selected("q4"))
        release_run();
    if (selected("graddrop"))
        sparse_run();
    if (selected("ops")) {
        buffer_ops(100003);
        divide_ops(100003);
        convert_ops(100003);
        psgd_ops(1, 16, 1, 50);
        psgd_ops(157, 256, 4, 51);
        psgd_ops(40, 64, 8, 52);
        psgd_ops(157, 256, 8, 54);
        psgd_ops(1024, 1024, 4, 53);
        if (!small_only)
            buffer_ops((1u << 22) + 1);
    }
    {
        int bad = 0;
        g->call_end(cx, &bad);
    }
    if (failures) {
        printf("gpu_kern: %d of %d cases failed\n", failures, cases);
        return 1;
    }
    printf("gpu_kern: ok, %d cases bit for bit against the CPU\n", cases);
    return 0;
}
