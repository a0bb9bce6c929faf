/*
 * The CUDA kernels of libhipress_cuda.so on a real GPU, bit for bit against
 * the CPU compressors (tests/gpu/check_kern.c holds their emulation to the same
 * bytes on any machine).  Run by scripts/gpu-check and
 * tests/gpu/run_gpu_device.sh; exits 77 (skipped) where no GPU is usable.
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
 */
#include <dlfcn.h>
#include <math.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_config.h"
#include "hp_elem.h"
#include "hp_gpu.h"
#include "hp_ops_sparse.h"
#include "hp_psgd.h"
#include "kern_data.h"

extern char **environ;

static const hp_gpu_ops_v2_t *g;
static hp_gpu_ptr_t where = {HP_MEM_DEVICE, 0, NULL};
static void *cx;
static int failures, cases, quick, small_only;
static const char *only;
/* the sizes of 4 Mi elements and more (left out by --small) */
static const size_t large[] = {(1u << 22) + 5, (1u << 24) + 3};

#define FAILF(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, "\n"); failures++; } while (0)


enum { D_GRAD, D_TIES, D_SIGNED_ZERO, D_WIDE, D_HUGE, D_NAN, D_INF, D_ZERO, D_DENORM, D_EDGE, D_N };
static const char *dname[D_N] = {"grad", "ties", "signed-zero", "wide", "huge", "nan", "inf", "zero",
                                 "denorm", "edge"};
/* D_DENORM and D_EDGE: fp16 and bf16 only (sweep) */

static void fill(float *x, size_t n, int kind, uint64_t seed)
{
    rs = seed;
    for (size_t i = 0; i < n; i++) {
        double v = 0.0;
        for (int k = 0; k < 4; k++)
            v += unit() - 0.5;
        switch (kind) {
        case D_GRAD: case D_NAN: case D_INF: x[i] = (float)(0.01 * sin((double)i * 0.0007) + 0.003 * v); break;
        case D_TIES: x[i] = (float)((int)(rnd() % 7) - 3) * 0.5f; break;
        case D_SIGNED_ZERO: x[i] = (rnd() & 1) ? -0.0f : (rnd() % 5 == 0 ? 1.0f : 0.0f); break;
        case D_WIDE: x[i] = (float)(v * pow(10.0, (double)((i * 7 + i / 32) % 61) - 30.0)); break;
        case D_HUGE: x[i] = (float)(v * (rnd() % 4 == 0 ? 3e38 : pow(10.0, (double)(rnd() % 60) - 30.0))); break;
        case D_ZERO: x[i] = 0.0f; break;
        case D_DENORM: x[i] = (float)v * 1e-40f; break;
        case D_EDGE: x[i] = edge_value(i, n); break;
        }
    }
    if (kind == D_NAN && n > 0)
        x[rnd() % n] = NAN;
    if (kind == D_INF && n > 0)
        x[rnd() % n] = -INFINITY;
}

static void *dev(const void *host, size_t bytes)
{
    void *d = NULL;
    if (g->dev_alloc(&where, bytes ? bytes : 4, &d) != HP_GPU_OK ||
        (host != NULL && bytes > 0 && g->base.memcpy_h2d(d, host, bytes, &where) != HP_GPU_OK)) {
        fprintf(stderr, "gpu_kern: device memory: %s\n", g->base.last_error());
        exit(1);
    }
    return d;
}

static void back(void *host, const void *d, size_t bytes)
{
    if (bytes > 0 && g->base.memcpy_d2h(host, d, bytes, &where) != HP_GPU_OK) {
        fprintf(stderr, "gpu_kern: copy to host: %s\n", g->base.last_error());
        exit(1);
    }
}

static int same_bits(const float *a, const float *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) {
            *at = i;
            return 0;
        }
    return 1;
}

typedef struct {
    const char *name;
    int kind, fmt, resid, state, overflow;
    hipress_comp_params_t p;
} kc_t;

/* The format as the device backend gets it: the compressor's hook. */
static hp_gpu_enc_t enc_args(const kc_t *t, size_t n)
{
    hp_gpu_enc_t e;
    memset(&e, 0, sizeof(e));
    if (hp_comp_gpu_fmt(t->kind, &t->p, n, 0, &e.fmt) != HP_OK || e.fmt.id != (uint32_t)t->fmt)
        FAILF("%s n=%zu: the compressor gives no device format %d", t->name, n, t->fmt);
    e.n = n;
    return e;
}

/* The stand-in driver's counters (tests/gpu/mock_cuda.c), when it is the
 * driver; NULL on a real one. */
static unsigned long long (*mock_count)(const char *what);
static void *cs;   /* the caller's stream of the device-message runs */
static void *cx2;  /* a second codec context: the producer of their input */
static unsigned devmsg_runs;

static unsigned long long host_waits(void)
{
    return mock_count != NULL ? mock_count("syncs") + mock_count("d2h") + mock_count("h2d") : 0;
}

/* Whole messages in device memory (encode_msg, decode_msg, nan_if), forked
 * from and joined back to a caller's stream, in one stream-ordered run that
 * the host waits for only at its end, whose input another codec context
 * copies in and hands over through the caller's stream (so a missing join
 * reads the input before it is there, under MOCK_CUDA_DEFERRED=1): the message must be the CPU's bytes
 * (cm, clen; cnf the NaN message) and leave the CPU's residual and state
 * (r, u), the device decode of the CPU's message the CPU's decode (o, of
 * `acc`), and a message that lies about its element count must give NaN
 * through the sticky flag, all with no host synchronisation or host copy
 * in between (counted by the stand-in driver). */
static void devmsg(const kc_t *t, size_t n, const hp_gpu_enc_t *e0, float *dr, float *du, const unsigned char *cm,
                   size_t clen, int cnf, const float *r, const float *u, const float *o, int acc, const float *o0)
{
    float *dxin = dev(NULL, n * 4);
    const size_t cap = HP_MSG_HEADER + e0->fmt.payload + 16;
    unsigned char *hm = calloc(1, cap), *bm = calloc(1, cap);
    float *tmp = malloc(n * 4);
    void *dm, *din, *dbad;
    float *dout, *dnan;
    uint32_t *word = NULL, hw = 0;
    hp_gpu_enc_t e = *e0;
    hp_gpu_dec_t d = {e0->fmt, acc, n};
    unsigned long long w0;
    size_t at = 0;
    int bad = 0, ok = 1;

    memcpy(hm, cm, clen);
    memcpy(bm, cm, clen);
    bm[4] ^= 1;   /* the element count: rejected whatever the payload */
    dm = dev(NULL, cap);
    din = dev(hm, cap);
    dbad = dev(bm, cap);
    dout = dev(o0, n * 4);
    dnan = dev(o0, n * 4);
    e.residual = t->resid ? dr : NULL;
    e.state = t->state ? du : NULL;
    if (g->bad_word(cx, &word) != HP_GPU_OK)
        ok = 0;
    w0 = host_waits();
    e.in = dxin;
    ok = ok && g->copy(cx2, dxin, e0->in, n * 4) == HP_GPU_OK && g->stream_release(cx2, cs) == HP_GPU_OK &&
         g->stream_join(cx, cs) == HP_GPU_OK &&
         g->encode_msg(cx, &e, (uint32_t)t->kind, dm, cap) == HP_GPU_OK &&
         (cnf || g->decode_msg(cx, &d, (uint32_t)t->kind, din, cap, dout) == HP_GPU_OK) &&
         g->decode_msg(cx, &d, (uint32_t)t->kind, dbad, cap, dnan) == HP_GPU_OK &&
         g->nan_if(cx, dnan, n, word, 4) == HP_GPU_OK && g->stream_release(cx, cs) == HP_GPU_OK;
    if (!ok) {
        FAILF("%s n=%zu: a device-message call failed: %s", t->name, n, g->base.last_error());
        goto out;
    }
    if (host_waits() != w0)
        FAILF("%s n=%zu: %llu host synchronisations or copies in a device-message run", t->name, n,
              host_waits() - w0);
    /* the host's first wait alternates: the caller's stream (a missing
     * release leaves the codec's work unrun under MOCK_CUDA_DEFERRED=1) or
     * the codec's (a missing join runs it before its input is there) */
    if (++devmsg_runs & 1) {
        if (g->sync(cx, &bad) != HP_GPU_OK || !bad)
            FAILF("%s n=%zu: sync did not report the rejected device message", t->name, n);
    }
    if (g->stream_wait(cs, "gpu_kern's caller stream") != HP_GPU_OK) {
        FAILF("%s n=%zu: the caller's stream: %s", t->name, n, g->base.last_error());
        goto out;
    }
    back(hm, dm, cap);
    if (memcmp(hm, cm, clen) != 0)
        FAILF("%s n=%zu: the device message differs from the cpu's (%zu bytes)", t->name, n, clen);
    back(tmp, dr, n * 4);
    if (t->resid && !same_bits(r, tmp, n, &at))
        FAILF("%s n=%zu: device message residual[%zu] cpu %a gpu %a", t->name, n, at, r[at], tmp[at]);
    back(tmp, du, n * 4);
    if (t->state && !same_bits(u, tmp, n, &at))
        FAILF("%s n=%zu: device message state[%zu]", t->name, n, at);
    if (!cnf) {
        back(tmp, dout, n * 4);
        if (!same_bits(o, tmp, n, &at))
            FAILF("%s n=%zu acc %d: device-message decode[%zu] cpu %a gpu %a", t->name, n, acc, at, o[at], tmp[at]);
    }
    back(tmp, dnan, n * 4);
    for (size_t i = 0; i < n; i++)
        if (!isnan(tmp[i])) {
            FAILF("%s n=%zu: a rejected device message left element %zu not NaN", t->name, n, i);
            break;
        }
    if (!(devmsg_runs & 1)) {
        back(&hw, word, 4);
        if (!(hw & 8u))
            FAILF("%s n=%zu: the sticky flag is not set after a rejected message", t->name, n);
        g->sync(cx, &bad);   /* clears it */
        if (!bad)
            FAILF("%s n=%zu: sync did not report the rejected device message", t->name, n);
    }
out:
    g->dev_free(&where, dxin);
    g->dev_free(&where, dm);
    g->dev_free(&where, din);
    g->dev_free(&where, dbad);
    g->dev_free(&where, dout);
    g->dev_free(&where, dnan);
    free(hm); free(bm); free(tmp);
}

static void one(const kc_t *t, size_t n, int dk, uint64_t seed)
{
    size_t cap = hp_msg_max_bytes(t->kind, n, &t->p), clen = 0, plen = 0, at = 0;
    float *x = malloc(n * 4), *r = malloc(n * 4), *u = malloc(n * 4), *tmp = malloc(n * 4), *o = malloc(n * 4);
    unsigned char *cm = malloc(cap), *gm = malloc(cap);
    float *dx, *dr, *du, *dout, *dr2, *du2;
    hipress_encode_args_t a;
    hp_gpu_enc_t e = enc_args(t, n);
    int cnf = 0, gnf = 0, bad = 0;

    cases++;
    fill(x, n, dk, seed);
    fill(r, n, D_GRAD, seed + 1);
    fill(u, n, D_GRAD, seed + 2);
    if (t->overflow)
        for (size_t i = 0; i < n; i += 3)
            r[i] = (i & 1) ? FLT_MAX : -FLT_MAX;
    dx = dev(x, n * 4);
    dr = dev(r, n * 4);
    du = dev(u, n * 4);
    dr2 = dev(r, n * 4);
    du2 = dev(u, n * 4);
    dout = dev(NULL, n * 4);

    memset(&a, 0, sizeof(a));
    a.in = x;
    a.n = n;
    a.params = &t->p;
    a.residual = t->resid ? r : NULL;
    a.state = t->state ? u : NULL;
    a.rng_key[0] = seed;
    a.rng_key[1] = 1;
    a.rng_key[2] = 2;
    a.rng_key[3] = 3;
    a.rng_offset = 777;
    if (hp_msg_encode(t->kind, &a, cm, cap, &clen, &cnf) != HP_OK) {
        FAILF("%s n=%zu: cpu encode failed", t->name, n);
        goto out;
    }
    e.in = dx;
    e.residual = t->resid ? dr : NULL;
    e.state = t->state ? du : NULL;
    e.rng_key = hp_rng_key(a.rng_key);
    e.rng_offset = a.rng_offset;
    if (g->encode(cx, &e, gm + HP_MSG_HEADER, cap - HP_MSG_HEADER, &plen, &gnf, &bad) != HP_GPU_OK) {
        FAILF("%s n=%zu: device encode failed: %s", t->name, n, g->base.last_error());
        goto out;
    }
    if (cnf != gnf) {
        FAILF("%s n=%zu %s: non-finite cpu %d gpu %d", t->name, n, dname[dk], cnf, gnf);
    } else if (!cnf && (clen != HP_MSG_HEADER + plen || memcmp(cm + HP_MSG_HEADER, gm + HP_MSG_HEADER, plen) != 0)) {
        size_t i = 0;
        while (i < plen && i + HP_MSG_HEADER < clen && cm[HP_MSG_HEADER + i] == gm[HP_MSG_HEADER + i])
            i++;
        FAILF("%s n=%zu %s: payload differs at byte %zu (cpu %zu bytes, gpu %zu)", t->name, n, dname[dk], i,
              clen - HP_MSG_HEADER, plen);
    }
    back(tmp, dr, n * 4);
    if (!same_bits(r, tmp, n, &at))
        FAILF("%s n=%zu %s overflow %d: residual[%zu] cpu %a gpu %a", t->name, n, dname[dk], t->overflow, at,
              r[at], tmp[at]);
    back(tmp, du, n * 4);
    if (!same_bits(u, tmp, n, &at))
        FAILF("%s n=%zu %s: state[%zu] cpu %a gpu %a", t->name, n, dname[dk], at, u[at], tmp[at]);
    /* the same encode as a whole message in device memory, and the CPU's
     * message decoded there (every format: a sparse one's length, its
     * pairs, is written into the header on the device) */
    {
        float *o0 = malloc(n * 4);
        const int acc = (int)(seed & 1);
        fill(o0, n, D_GRAD, seed + 6);
        memcpy(o, o0, n * 4);
        if (!cnf && hp_msg_decode(t->kind, cm, clen, n, o, acc, &t->p) != HP_OK)
            FAILF("%s n=%zu: cpu decode failed", t->name, n);
        devmsg(t, n, &e, dr2, du2, cm, clen, cnf, r, u, o, acc, o0);
        free(o0);
    }
    /* the CPU's message decoded on the device, both modes */
    if (!cnf) {
        hp_gpu_dec_t d = {e.fmt, 0, n};
        for (int acc = 0; acc < 2; acc++) {
            fill(o, n, D_GRAD, seed + 5);
            g->base.memcpy_h2d(dout, o, n * 4, &where);
            d.accumulate = acc;
            if (hp_msg_decode(t->kind, cm, clen, n, o, acc, &t->p) != HP_OK ||
                g->decode(cx, &d, cm + HP_MSG_HEADER, clen - HP_MSG_HEADER, dout) != HP_GPU_OK ||
                g->sync(cx, &bad) != HP_GPU_OK || bad) {
                FAILF("%s n=%zu: decode of a valid message failed (bad %d)", t->name, n, bad);
                continue;
            }
            back(tmp, dout, n * 4);
            if (!same_bits(o, tmp, n, &at))
                FAILF("%s n=%zu %s acc %d: decode[%zu] cpu %a gpu %a", t->name, n, dname[dk], acc, at, o[at], tmp[at]);
        }
        /* malformed versions of it */
        for (int trial = 0; trial < (quick ? 4 : 16) && clen > HP_MSG_HEADER; trial++) {
            unsigned char *mm = malloc(clen);
            int cpu, gpu;
            memcpy(mm, cm, clen);
            mm[HP_MSG_HEADER + rnd() % (clen - HP_MSG_HEADER)] ^= (unsigned char)(1u << (rnd() % 8));
            cpu = hp_msg_decode(t->kind, mm, clen, n, o, 0, &t->p) == HP_OK;
            gpu = g->decode(cx, &d, mm + HP_MSG_HEADER, clen - HP_MSG_HEADER, dout) == HP_GPU_OK;
            bad = 0;
            g->sync(cx, &bad);
            gpu = gpu && !bad;
            if (cpu != gpu)
                FAILF("%s n=%zu trial %d: a malformed message: cpu accepts %d, gpu accepts %d", t->name, n, trial,
                      cpu, gpu);
            free(mm);
        }
    }
out:
    g->dev_free(&where, dx);
    g->dev_free(&where, dr);
    g->dev_free(&where, du);
    g->dev_free(&where, dout);
    g->dev_free(&where, dr2);
    g->dev_free(&where, du2);
    free(x); free(r); free(u); free(tmp); free(o); free(cm); free(gm);
}

static kc_t kc(const char *name, int fmt)
{
    kc_t t;
    memset(&t, 0, sizeof(t));
    t.name = name;
    t.kind = hp_comp_find(name);
    t.fmt = fmt;
    hipress_comp_params_default(&t.p);
    return t;
}

/* call_release ends a call with no host wait: a rejected message's sticky
 * flag, read on the device by nan_if, is cleared in stream order before the
 * pool's next call on the same context, whose valid message must then
 * decode to the CPU's bits, not NaN. */
static void release_run(void)
{
    kc_t t = kc("q4", HP_GPU_FMT_Q);
    const size_t n = 4097;
    size_t cap = hp_msg_max_bytes(t.kind, n, &t.p) + 16, clen = 0, at = 0;
    float *x = malloc(n * 4), *o0 = malloc(n * 4), *o = malloc(n * 4), *tmp = malloc(n * 4);
    unsigned char *cm = calloc(1, cap), *bm;
    hipress_encode_args_t a;
    hp_gpu_enc_t e = enc_args(&t, n);
    hp_gpu_dec_t d = {e.fmt, 0, n};
    void *c1 = NULL, *c2 = NULL, *dgood, *dbad;
    float *dout1, *dout2;
    uint32_t *w1 = NULL, *w2 = NULL;
    unsigned long long w0;
    int nf = 0, bad = 0, ok;

    cases++;
    fill(x, n, D_GRAD, 31);
    fill(o0, n, D_GRAD, 32);
    memset(&a, 0, sizeof(a));
    a.in = x;
    a.n = n;
    a.params = &t.p;
    if (hp_msg_encode(t.kind, &a, cm, cap, &clen, &nf) != HP_OK || nf) {
        FAILF("release: cpu encode failed");
        goto out_free;
    }
    memcpy(o, o0, n * 4);
    hp_msg_decode(t.kind, cm, clen, n, o, 0, &t.p);
    bm = calloc(1, cap);
    memcpy(bm, cm, clen);
    bm[1] ^= 1;   /* another kind: rejected */
    dgood = dev(cm, cap);
    dbad = dev(bm, cap);
    free(bm);
    dout1 = dev(o0, n * 4);
    dout2 = dev(o0, n * 4);
    if (g->call_begin(&where, &c1) != HP_GPU_OK || g->bad_word(c1, &w1) != HP_GPU_OK) {
        FAILF("release: call_begin: %s", g->base.last_error());
        goto out;
    }
    w0 = host_waits();
    ok = g->decode_msg(c1, &d, (uint32_t)t.kind, dbad, cap, dout1) == HP_GPU_OK &&
         g->nan_if(c1, dout1, n, w1, 4) == HP_GPU_OK && g->call_release(c1) == HP_GPU_OK &&
         g->call_begin(&where, &c2) == HP_GPU_OK && g->bad_word(c2, &w2) == HP_GPU_OK &&
         g->decode_msg(c2, &d, (uint32_t)t.kind, dgood, cap, dout2) == HP_GPU_OK &&
         g->nan_if(c2, dout2, n, w2, 4) == HP_GPU_OK;
    if (!ok) {
        FAILF("release: a stream-ordered call failed: %s", g->base.last_error());
        goto out;
    }
    if (c2 != c1)
        FAILF("release: the pool did not give the released context again");
    if (host_waits() != w0)
        FAILF("release: %llu host synchronisations or copies", host_waits() - w0);
    if (g->call_end(c2, &bad) != HP_GPU_OK || bad)
        FAILF("release: the next call on the context saw the sticky flag (bad %d)", bad);
    c2 = NULL;
    back(tmp, dout1, n * 4);
    for (size_t i = 0; i < n; i++)
        if (!isnan(tmp[i])) {
            FAILF("release: a rejected message left element %zu not NaN", i);
            break;
        }
    back(tmp, dout2, n * 4);
    if (!same_bits(o, tmp, n, &at))
        FAILF("release: decode[%zu] after a released call: cpu %a gpu %a", at, o[at], tmp[at]);
out:
    if (c2 != NULL)
        g->call_end(c2, &bad);
    g->dev_free(&where, dgood);
    g->dev_free(&where, dbad);
    g->dev_free(&where, dout1);
    g->dev_free(&where, dout2);
out_free:
    free(x); free(o0); free(o); free(tmp); free(cm);
}

/* The sparse formats' device-message pieces beside the sweeps: the dense
 * fallback `none` decoded by graddrop's device decoder (both modes: the
 * CPU's bits), and dgc's momentum in stream order (momentum_q), which
 * gates the masking of u on the device: with a NaN in the range (at its
 * end) no momentum is applied and a finite message of its first half masks
 * nothing; with none u' is the CPU's, masked at the message's elements --
 * each with no host synchronisation or copy. */
static void sparse_run(void)
{
    kc_t t = kc("graddrop", HP_GPU_FMT_SPARSE);
    const size_t n = 5000, n2 = n / 2;
    const float mom = 0.5f;
    const size_t cap = HP_MSG_HEADER + 4 * n + 16;
    float *x = malloc(n * 4), *u = malloc(n * 4), *o0 = malloc(n * 4), *o = malloc(n * 4), *tmp = malloc(n * 4);
    unsigned char *cm = calloc(1, cap), *hm = calloc(1, cap);
    hipress_encode_args_t a;
    hp_gpu_enc_t e = enc_args(&t, n2);
    hp_gpu_dec_t d = {enc_args(&t, n).fmt, 0, n};
    size_t clen = 0, at = 0;
    unsigned long long w0;
    int nf = 0, bad = 0;

    /* the dense fallback */
    fill(x, n, D_GRAD, 41);
    fill(o0, n, D_GRAD, 42);
    memset(&a, 0, sizeof(a));
    a.in = x;
    a.n = n;
    a.params = &t.p;
    if (hp_msg_encode(hp_kind_none, &a, cm, cap, &clen, &nf) != HP_OK) {
        FAILF("sparse: cpu encode of the dense fallback failed");
        goto out;
    }
    for (int acc = 0; acc < 2; acc++) {
        void *dm = dev(cm, cap);
        float *dout = dev(o0, n * 4);
        cases++;
        memcpy(o, o0, n * 4);
        d.accumulate = acc;
        if (hp_msg_decode(t.kind, cm, clen, n, o, acc, &t.p) != HP_OK)
            FAILF("sparse: the cpu rejects the dense fallback");
        w0 = host_waits();
        if (g->decode_msg(cx, &d, (uint32_t)t.kind, dm, cap, dout) != HP_GPU_OK)
            FAILF("sparse: decode_msg of the dense fallback: %s", g->base.last_error());
        if (host_waits() != w0)
            FAILF("sparse: %llu host waits in a device decode", host_waits() - w0);
        if (g->sync(cx, &bad) != HP_GPU_OK || bad)
            FAILF("sparse: the dense fallback rejected on the device (acc %d)", acc);
        back(tmp, dout, n * 4);
        if (!same_bits(o, tmp, n, &at))
            FAILF("sparse: dense fallback acc %d [%zu]: cpu %a gpu %a", acc, at, o[at], tmp[at]);
        g->dev_free(&where, dm);
        g->dev_free(&where, dout);
    }
    /* momentum in stream order, its masking gated on the device */
    for (int nan = 0; nan < 2; nan++) {
        float *dx, *du;
        void *dm;
        int applied = 1;
        cases++;
        fill(x, n, D_GRAD, 43 + (uint64_t)nan);
        fill(u, n, D_GRAD, 45);
        if (nan)
            x[n - 1] = NAN;
        dx = dev(x, n * 4);
        du = dev(u, n * 4);
        dm = dev(NULL, cap);
        /* the host's: cpu_momentum, then the mask where the message went */
        for (size_t i = 0; i < n && applied; i++)
            applied = isfinite(x[i]);
        for (size_t i = 0; i < n && applied; i++) {
            float v = mom * u[i];
            u[i] = v + x[i];
            x[i] = u[i];
        }
        a.in = x;
        a.n = n2;
        if (hp_msg_encode(t.kind, &a, cm, cap, &clen, &nf) != HP_OK || nf) {
            FAILF("sparse: cpu encode failed");
            goto next;
        }
        for (size_t j = 0; applied && j < (clen - HP_MSG_HEADER) / 8; j++) {
            uint32_t i;
            memcpy(&i, cm + HP_MSG_HEADER + 8 * j, 4);
            u[i] = 0.0f;
        }
        e.in = dx;
        e.mask = du;
        w0 = host_waits();
        if (g->momentum_q(cx, du, dx, mom, n) != HP_GPU_OK ||
            g->encode_msg(cx, &e, (uint32_t)t.kind, dm, cap) != HP_GPU_OK) {
            FAILF("sparse: momentum_q or encode_msg failed: %s", g->base.last_error());
            goto next;
        }
        if (host_waits() != w0)
            FAILF("sparse: %llu host waits in momentum_q and encode_msg", host_waits() - w0);
        if (g->sync(cx, &bad) != HP_GPU_OK || bad)
            FAILF("sparse: sync after momentum_q (bad %d)", bad);
        back(hm, dm, cap);
        if (hp_msg_len(hm, cap) != clen || memcmp(hm, cm, clen) != 0)
            FAILF("sparse: momentum %s: the device message differs from the cpu's", nan ? "not applied" : "applied");
        back(tmp, du, n * 4);
        if (!same_bits(u, tmp, n, &at))
            FAILF("sparse: momentum %s: u[%zu] cpu %a gpu %a", nan ? "not applied" : "applied", at, u[at], tmp[at]);
        back(tmp, dx, n * 4);
        if (!same_bits(x, tmp, n, &at))
            FAILF("sparse: momentum %s: buf[%zu] cpu %a gpu %a", nan ? "not applied" : "applied", at, x[at], tmp[at]);
next:
        g->dev_free(&where, dx);
        g->dev_free(&where, du);
        g->dev_free(&where, dm);
    }
out:
    free(x); free(u); free(o0); free(o); free(tmp); free(cm); free(hm);
}

/* NAME is in --only's list (or there is no list) */
static int selected(const char *name)
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

static void sweep(kc_t t, const size_t *ns, size_t nn, int all)
{
    const int halves = t.fmt == HP_GPU_FMT_FP16 || t.fmt == HP_GPU_FMT_BF16;
    if (!selected(t.name) || (small_only && ns == large))
        return;
    for (size_t s = 0; s < nn; s++)
        for (int d = 0; d < D_N; d++)
            if ((d < D_DENORM || halves) && (all || d == D_GRAD || d == D_NAN || d == D_WIDE || d == D_TIES))
                one(&t, ns[s], d, 100 * s + (uint64_t)d);
}

/* fold, momentum and add against the CPU's expressions */
static void buffer_ops(size_t n)
{
    float *b = malloc(n * 4), *r = malloc(n * 4), *u = malloc(n * 4), *t = malloc(n * 4);
    float *db, *dr, *du;
    size_t at = 0;
    int applied = 0, bad = 0;
    cases++;
    fill(b, n, D_GRAD, 9);
    fill(r, n, D_WIDE, 10);
    fill(u, n, D_GRAD, 11);
    db = dev(b, n * 4);
    dr = dev(r, n * 4);
    du = dev(u, n * 4);
    g->fold(cx, db, dr, n);
    g->momentum(cx, du, db, 0.9f, n, &applied);
    g->add(cx, db, dr, n);   /* r is zero now: b unchanged */
    g->sync(cx, &bad);
    for (size_t i = 0; i < n; i++) {
        b[i] = b[i] + r[i];
        r[i] = 0.0f;
        u[i] = 0.9f * u[i] + b[i];
        b[i] = u[i];
        b[i] += r[i];
    }
    back(t, db, n * 4);
    if (!applied || !same_bits(b, t, n, &at))
        FAILF("buffer ops n=%zu: buf[%zu] cpu %a gpu %a (applied %d)", n, at, b[at], t[at], applied);
    back(t, du, n * 4);
    if (!same_bits(u, t, n, &at))
        FAILF("buffer ops n=%zu: momentum[%zu] cpu %a gpu %a", n, at, u[at], t[at]);
    g->dev_free(&where, db);
    g->dev_free(&where, dr);
    g->dev_free(&where, du);
    free(b); free(r); free(u); free(t);
}

/* ncclAvg's divide of a stream-ordered call (divide): the host's float
 * division, bit for bit, on every kind of data and for 3 and 7 ranks. */
static void divide_ops(size_t n)
{
    float *h = malloc(n * 4), *t = malloc(n * 4);
    float *d;
    size_t at = 0;
    int bad = 0;
    for (int k = 0; k < D_N; k++) {
        const float by = k & 1 ? 7.0f : 3.0f;
        cases++;
        fill(h, n, k, 40 + (uint64_t)k);
        d = dev(h, n * 4);
        if (g->divide(cx, d, n, by) != HP_GPU_OK || g->sync(cx, &bad) != HP_GPU_OK) {
            FAILF("divide n=%zu data %d: %s", n, k, g->base.last_error());
        } else {
            for (size_t i = 0; i < n; i++)
                h[i] = h[i] / by;
            back(t, d, n * 4);
            if (!same_bits(h, t, n, &at))
                FAILF("divide n=%zu data %d by %g: [%zu] cpu %a gpu %a", n, k, (double)by, at, h[at], t[at]);
        }
        g->dev_free(&where, d);
    }
    free(h); free(t);
}

/* powersgd's stream-ordered steps against the host's functions, bit for
 * bit, enqueued with no host synchronisation or copy in between (the
 * stand-in's counters): the start Q (hp_psgd_start_q: cold, warm, warm rows
 * zero, NaN or Inf drawn afresh), the orthonormalisation
 * (hp_psgd_orthonormalise: full rank, a dependent column, a zero one, tiny
 * and huge values; nothing when the flag is set), the reconstruction with
 * its residual written only when the flag is clear (hp_psgd_pass_recon),
 * the flagged copy, and the NaN/Inf flag on every kind of data. */
static void psgd_ops(size_t m, size_t c, size_t r, uint64_t seed)
{
    const size_t n = m * c - (c > 1 ? c / 3 : 0), mr = m * r, rc = r * c;
    const hp_ops_t *K = hp_ops_get(HP_ISA_AUTO);
    const size_t tn = HP_MAX(n, HP_MAX(mr, rc));
    float *p = malloc(mr * 4), *q = malloc(rc * 4), *w = malloc(rc * 4), *t = malloc(tn * 4);
    float *mm = malloc(n * 4), *res = malloc(n * 4), *out = malloc(n * 4), *ql = malloc(rc * 4);
    double *work = malloc(mr * sizeof(double));
    void *scratch = hp_aligned_alloc(HP_PSGD_SCRATCH(r));
    float *dq, *dw, *dp, *dm, *dres, *dql, *dc;
    double *dwork;
    uint32_t *dflag, flags[4];
    const uint32_t zero[2] = {0, 0}, set[2] = {0, 1};
    size_t at = 0;
    unsigned long long w0;
    int bad = 0, waits;

    cases++;
    /* start Q: warm rows: 0 finite, 1 zero, 2 NaN, 3 Inf, the rest finite */
    fill(w, rc, D_GRAD, seed);
    if (r > 1)
        memset(w + c, 0, c * 4);
    if (r > 2)
        w[2 * c + c / 2] = NAN;
    if (r > 3)
        w[3 * c] = INFINITY;
    /* P: column 1 = 2 column 0 (dependent), column 2 zero, column 3 tiny,
     * column 4 huge, the others near column 0 (1e-3 off it: independent,
     * and the second projection changes their bits) */
    fill(p, mr, D_GRAD, seed + 1);
    for (size_t i = 0; i < m; i++) {
        if (r > 1)
            p[i * r + 1] = 2.0f * p[i * r];
        if (r > 2)
            p[i * r + 2] = 0.0f;
        if (r > 3)
            p[i * r + 3] *= 1e-30f;
        if (r > 4)
            p[i * r + 4] *= 1e30f;
        for (size_t k = 5; k < r; k++)
            p[i * r + k] = p[i * r] + 1e-3f * p[i * r + k];
    }
    fill(mm, n, D_GRAD, seed + 2);
    fill(res, n, D_WIDE, seed + 3);
    fill(ql, rc, D_GRAD, seed + 4);
    dq = dev(NULL, rc * 4);
    dw = dev(w, rc * 4);
    dp = dev(p, mr * 4);
    dwork = dev(NULL, mr * sizeof(double));
    dm = dev(mm, n * 4);
    dres = dev(res, n * 4);
    dql = dev(ql, rc * 4);
    dc = dev(NULL, rc * 4);
    dflag = dev(NULL, 4 * sizeof(uint32_t));   /* [0, 1] clear, [2, 3] set */
    g->copy(cx, dflag, zero, 8);
    g->copy(cx, dflag + 2, set, 8);
    g->sync(cx, &bad);

    w0 = host_waits();
    g->psgd_start_q(cx, dq, NULL, r, c, hp_psgd_q_key(seed, 7));
    g->psgd_start_q(cx, dc, dw, r, c, hp_psgd_q_key(seed, 8));
    g->psgd_orth(cx, dp, m, r, dwork, dflag, 8);
    g->psgd_orth(cx, dp, m, r, dwork, dflag + 2, 8);   /* flagged: nothing */
    g->psgd_recon_if(cx, dm, dres, n, c, r, dp, dq, dql, dflag, 8);
    g->copy_if(cx, dql, dc, rc, dflag + 2, 8);        /* flagged: kept */
    g->copy_if(cx, dw, dc, rc, dflag, 8);              /* clear: copied */
    waits = (int)(host_waits() - w0);
    if (g->sync(cx, &bad) != HP_GPU_OK)
        FAILF("psgd m=%zu c=%zu r=%zu: %s", m, c, r, g->base.last_error());
    if (mock_count != NULL && waits != 0)
        FAILF("psgd m=%zu c=%zu r=%zu: %d host synchronisations or copies", m, c, r, waits);

    hp_psgd_start_q(q, NULL, r, c, seed, 7);
    back(t, dq, rc * 4);
    if (!same_bits(q, t, rc, &at))
        FAILF("psgd start_q cold r=%zu c=%zu: [%zu] cpu %a gpu %a", r, c, at, q[at], t[at]);
    {
        float *qw = malloc(rc * 4);
        hp_psgd_start_q(qw, w, r, c, seed, 8);
        back(t, dc, rc * 4);
        if (!same_bits(qw, t, rc, &at))
            FAILF("psgd start_q warm r=%zu c=%zu: [%zu] cpu %a gpu %a", r, c, at, qw[at], t[at]);
        back(t, dw, rc * 4);
        if (!same_bits(qw, t, rc, &at))
            FAILF("psgd copy_if (clear) r=%zu c=%zu: [%zu]", r, c, at);
        back(t, dql, rc * 4);
        if (!same_bits(ql, t, rc, &at))
            FAILF("psgd copy_if (flagged) wrote [%zu]", at);
        free(qw);
    }
    hp_psgd_orthonormalise(p, m, r, work);
    back(t, dp, mr * 4);
    if (!same_bits(p, t, mr, &at))
        FAILF("psgd orth m=%zu r=%zu: [%zu] cpu %a gpu %a", m, r, at, p[at], t[at]);
    /* the host's reconstruction from the device's P (checked above) */
    hp_psgd_pass_recon(K, t, n, m, c, r, NULL, NULL, 0, ql, mm, NULL, res, scratch);
    hp_psgd_pass_recon(K, t, n, m, c, r, q, out, 0, NULL, NULL, NULL, NULL, scratch);
    back(t, dres, n * 4);
    if (!same_bits(res, t, n, &at))
        FAILF("psgd recon_if m=%zu c=%zu r=%zu: residual[%zu] cpu %a gpu %a", m, c, r, at, res[at], t[at]);
    back(t, dm, n * 4);
    if (!same_bits(out, t, n, &at))
        FAILF("psgd recon_if m=%zu c=%zu r=%zu: result[%zu] cpu %a gpu %a", m, c, r, at, out[at], t[at]);

    /* flagged: the residual kept (the one before), the result written */
    fill(res, n, D_WIDE, seed + 3);
    g->copy(cx, dres, res, n * 4);
    g->copy(cx, dm, mm, n * 4);
    g->psgd_recon_if(cx, dm, dres, n, c, r, dp, dq, dql, dflag + 2, 8);
    g->sync(cx, &bad);
    back(t, dres, n * 4);
    if (!same_bits(res, t, n, &at))
        FAILF("psgd recon_if flagged: residual[%zu] written", at);
    back(t, dm, n * 4);
    if (!same_bits(out, t, n, &at))
        FAILF("psgd recon_if flagged: result[%zu] cpu %a gpu %a", at, out[at], t[at]);

    /* the NaN/Inf flag on every kind of data (ORed into a set word too) */
    for (int k = 0; k < D_N; k++) {
        float *dx;
        int want;
        fill(t, n, k, seed + 10 + (uint64_t)k);
        want = K->nonfinite(t, n) != 0;
        dx = dev(t, n * 4);
        g->copy(cx, dflag, zero, 8);
        g->flag_nonfinite(cx, dx, n, dflag);
        g->flag_nonfinite(cx, dx, n, dflag + 1);
        g->sync(cx, &bad);
        back(flags, dflag, 8);
        if (flags[0] != (want ? 1u : 0u) || flags[1] != flags[0])
            FAILF("psgd flag_nonfinite n=%zu data %s: flag %u, want %d", n, dname[k], flags[0], want);
        g->dev_free(&where, dx);
    }
    g->dev_free(&where, dq); g->dev_free(&where, dw); g->dev_free(&where, dp); g->dev_free(&where, dwork);
    g->dev_free(&where, dm); g->dev_free(&where, dres); g->dev_free(&where, dql); g->dev_free(&where, dc);
    g->dev_free(&where, dflag);
    free(p); free(q); free(w); free(t); free(mm); free(res); free(out); free(ql); free(work);
    free(scratch);
}

/* The 16-bit conversions of a compressed ncclAllReduce (convert): float to
 * float16 and bfloat16 and back, against hp_elem.h's, on every kind of
 * data (ties, overflow, subnormals, NaN, Inf included). */
static void convert_ops(size_t n)
{
    float *x = malloc(n * 4), *w = malloc(n * 4);
    uint16_t *h = malloc(n * 2), *t = malloc(n * 2);
    size_t at = 0;
    for (int dk = 0; dk < D_N; dk++)
        for (int f16 = 0; f16 < 2; f16++) {
            float *dx, *dw;
            uint16_t *dh;
            int bad = 0;
            cases++;
            fill(x, n, dk, 40 + (uint64_t)dk);
            if (dk == D_HUGE)
                for (size_t i = 0; i < n; i += 7)
                    x[i] = 65519.0f + (float)(i % 3);   /* fp16's rounding edge to Inf */
            dx = dev(x, n * 4);
            dh = dev(NULL, n * 2);
            dw = dev(NULL, n * 4);
            g->convert(cx, dh, dx, n, f16 ? HP_GPU_CVT_F32_F16 : HP_GPU_CVT_F32_BF16);
            g->convert(cx, dw, dh, n, f16 ? HP_GPU_CVT_F16_F32 : HP_GPU_CVT_BF16_F32);
            g->sync(cx, &bad);
            back(t, dh, n * 2);
            back(w, dw, n * 4);
            for (size_t i = 0; i < n; i++)
                h[i] = f16 ? hp_f32_to_f16(x[i]) : hp_f32_to_bf16(x[i]);
            for (at = 0; at < n && h[at] == t[at]; at++)
                ;
            if (at < n)
                FAILF("convert %s %s n=%zu: [%zu] of %a: cpu 0x%04x gpu 0x%04x", f16 ? "f16" : "bf16", dname[dk], n,
                      at, x[at], h[at], t[at]);
            for (size_t i = 0; i < n; i++)
                x[i] = f16 ? hp_f16_to_f32(h[i]) : hp_bf16_to_f32(h[i]);
            if (!same_bits(x, w, n, &at))
                FAILF("convert back %s %s n=%zu: [%zu] cpu %a gpu %a", f16 ? "f16" : "bf16", dname[dk], n, at, x[at],
                      w[at]);
            g->dev_free(&where, dx);
            g->dev_free(&where, dh);
            g->dev_free(&where, dw);
        }
    free(x); free(w); free(h); free(t);
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
