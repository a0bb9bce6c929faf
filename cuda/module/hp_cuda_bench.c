/*
 * hipress-bench --kernels --gpu through the CUDA module (the table's bench):
 * every format's encode (the message left in device memory) and decode on
 * gradient-like floats, against a device-to-device copy of the same bytes
 * in the same run, medians of the repetitions.
 */
#include "hp_cuda_mod.h"
#include "hp_kern.h"
#include <math.h>
#include <stdlib.h>

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Gradient-like floats (a smooth part and counter-hash noise). */
static void bench_fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h = hp_mix64(0x243F6A8885A308D3ULL + i);
        double u = 0;
        for (int k = 0; k < 4; k++)
            u += (double)((h >> (16 * k)) & 0xffff) / 65536.0 - 0.5;
        x[i] = (float)(1e-3 * (double)((i >> 18) % 7 + 1) * (sin((double)i * 0.00037) + 0.8 * u));
    }
}

#define BENCH_MAXREPS 64

int hpcu_bench(int device, size_t bytes, int reps, const hp_gpu_enc_t *fmts, int nfmts,
                      void (*row)(void *arg, int fmt_index, const char *op, double gbps, double copy_gbps,
                                  size_t payload),
                      void *arg)
{
    const size_t n = bytes / sizeof(float);
    hp_gpu_ptr_t where = {HP_MEM_DEVICE, device, NULL};
    void *cxv = NULL;
    mod_cx_t *m;
    float *h = NULL, *in = NULL, *res = NULL, *state = NULL, *out = NULL;
    int st;

    NEED_DRIVER();
    if (reps < 1 || reps > BENCH_MAXREPS)
        reps = 7;
    /* a tool's process: the driver may not be initialised yet (creates no
     * context; the library itself never calls it) */
    if (hp_cu.Init(0) != CUDA_SUCCESS)
        return hp_cu_fail(HP_GPU_ERR_UNSUPPORTED, "cuInit failed: no usable driver");
    if ((st = hpcu_call_begin(&where, &cxv)) != HP_GPU_OK)
        return st;
    m = (mod_cx_t *)cxv;
    if ((h = malloc(bytes)) == NULL) {
        st = hp_cu_fail(HP_GPU_ERR_NOMEM, "out of host memory");
        goto out;
    }
    bench_fill(h, n);
    if ((st = hpcu_dev_alloc(&where, bytes, (void **)&in)) != HP_GPU_OK ||
        (st = hpcu_dev_alloc(&where, bytes, (void **)&res)) != HP_GPU_OK ||
        (st = hpcu_dev_alloc(&where, bytes, (void **)&state)) != HP_GPU_OK ||
        (st = hpcu_dev_alloc(&where, bytes, (void **)&out)) != HP_GPU_OK ||
        (st = hpcu_memcpy_h2d(in, h, bytes, &where)) != HP_GPU_OK)
        goto out;
    m->codec.devonly = 1;
    for (int f = 0; f < nfmts && st == HP_GPU_OK; f++) {
        hp_gpu_enc_t e = fmts[f];
        hp_gpu_dec_t d = {e.fmt, 0, n};
        double te[BENCH_MAXREPS], td[BENCH_MAXREPS], tc[BENCH_MAXREPS];
        size_t plen = 0;
        int nf = 0, bad = 0;
        e.n = n;
        e.in = in;
        e.residual = e.residual != NULL ? res : NULL;   /* a non-NULL template asks for one */
        e.state = e.state != NULL ? state : NULL;
        for (int r = -1; r < reps && st == HP_GPU_OK; r++) {
            double t0, t1, t2, t3;
            hp_cu_scope_t sc;
            hp_gpu_ptr_t w = hp_cu_cx_where(m);
            if ((st = hp_cu_scope_enter(&w, &sc)) != HP_GPU_OK)
                break;
            hp_codec_sync(&m->codec, &bad);
            t0 = hp_cu_now();
            if (m->codec.dev->copy(m, out, in, bytes, HP_STREAM_COMPUTE) != 0 ||
                m->codec.dev->sync(m, HP_STREAM_COMPUTE) != 0)
                st = hp_cu_fail(HP_GPU_ERR_DEVICE, "device-to-device copy failed");
            t1 = hp_cu_now();
            if (st == HP_GPU_OK)
                st = hp_codec_encode(&m->codec, &e, NULL, e.fmt.payload, &plen, &nf);
            t2 = hp_cu_now();
            if (st == HP_GPU_OK && !nf)
                st = hp_codec_decode(&m->codec, &d, m->codec.ws[HP_WS_MSG], plen, out);
            if (st == HP_GPU_OK)
                st = hp_codec_sync(&m->codec, &bad);
            t3 = hp_cu_now();
            hp_cu_scope_exit(&sc);
            if (st == HP_GPU_OK && (nf || bad))
                st = hp_cu_fail(HP_GPU_ERR_DEVICE, "benchmark message of format %u %s", e.fmt.id,
                          nf ? "came out non-finite" : "was rejected");
            if (r >= 0) {
                tc[r] = t1 - t0;
                te[r] = t2 - t1;
                td[r] = t3 - t2;
            }
        }
        if (st != HP_GPU_OK)
            break;
        {
            double mc = (double)bytes / median(tc, reps) / 1e9;
            row(arg, f, "encode", (double)bytes / median(te, reps) / 1e9, mc, plen);
            row(arg, f, "decode", (double)bytes / median(td, reps) / 1e9, mc, plen);
        }
    }
out:
    m->codec.devonly = 0;
    if (in != NULL) hpcu_dev_free(&where, in);
    if (res != NULL) hpcu_dev_free(&where, res);
    if (state != NULL) hpcu_dev_free(&where, state);
    if (out != NULL) hpcu_dev_free(&where, out);
    free(h);
    {
        int bad = 0, st2 = hpcu_call_end(cxv, &bad);
        if (st == HP_GPU_OK)
            st = st2;
    }
    return st;
}
