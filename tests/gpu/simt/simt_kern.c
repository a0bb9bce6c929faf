/*
 * The CUDA kernels of cuda/kern/hp_kern*.cu, compiled for the CPU and run on the
 * strict SIMT emulator (tests/gpu/simt, doc/dev/simt.md), bit for bit against the
 * CPU: every format through the device codec the module runs
 * (cuda/codec/hp_codec*.c) as tests/gpu/kern/check_kern.c drives it -- the payload, the
 * residual and the state of an encode, the message in device memory, the
 * decodes of the CPU's message in both modes, a corrupted message accepted
 * exactly when the CPU accepts it -- and the buffer operations and
 * powersgd's steps as tests/gpu/kern/gpu_kern_ops.c drives them, and the
 * module's self-test kernel (cuda/module/hp_cuda_kernels.cu), on the sizes
 * and block sizes where the grids change shape, under several scheduling
 * seeds.
 * tests/gpu/simt/run_simt.sh runs it plain and under ThreadSanitizer and
 * AddressSanitizer.
 *
 *   simt_kern [--quick] [--sizes LIST] [--large LIST] [--seeds LIST] [--only LIST]
 *     --quick: every kernel, grid shape and path, with fewer data kinds
 *              and parameters (the sanitizer builds' runs);
 *     --sizes: every case at these sizes (default 1,31,32,33,4095,4097);
 *     --large: the formats' default parameters at these (default 1048577);
 *     --seeds: the scheduling seeds, each a full run (default 1);
 *     --only:  the groups to run (onebit,tbq,tg,q,sparse,half,none,ops).
 * Prints "N kernels launched" (distinct kernels), how many the preload
 * (hp_kl_preload) asked for and how many shared-memory accesses the race
 * detector checked; exits 1 on any difference.
 */
#include <math.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_ops.h"
#include "hp_psgd.h"
#include "hp_codec.h"
#include "hp_kern.h"
#include "hp_klaunch.h"
#include "hp_simt_api.h"
#include "kern_data.h"
#include "simt_kern.h"
#include "kern_host_dev.h"

int simt_failures, simt_cases;
static const char *only;

hp_codec_t *simt_codec(void)
{
    static hp_codec_t cx;
    if (cx.dev == NULL && hp_codec_init(&cx, &kern_host_dev, NULL) != HP_GPU_OK) {
        fprintf(stderr, "simt_kern: no codec\n");
        exit(1);
    }
    return &cx;
}

/* ------------------------------------------------------------- data */

const char *const simt_dname[D_N] = {"grad", "ties", "signed-zero", "wide", "huge", "nan", "inf", "zero", "const",
                                 "sparse-ish", "edge", "big"};

void simt_fill(float *x, size_t n, int kind, uint64_t seed)
{
    rs = seed;
    for (size_t i = 0; i < n; i++) {
        double g = 0.0;
        for (int k = 0; k < 4; k++)
            g += unit() - 0.5;
        switch (kind) {
        case D_TIES: x[i] = (float)((int)(rnd() % 7) - 3) * 0.5f; break;
        case D_SIGNED_ZERO: x[i] = (rnd() & 1) ? -0.0f : (rnd() % 5 == 0 ? 1.0f : 0.0f); break;
        case D_WIDE: x[i] = (float)(g * pow(10.0, (double)((i * 7 + i / 32) % 61) - 30.0)); break;
        case D_HUGE: x[i] = (float)(g * (rnd() % 4 == 0 ? 3e38 : pow(10.0, (double)(rnd() % 60) - 30.0))); break;
        case D_ZERO: x[i] = 0.0f; break;
        case D_CONST: x[i] = 0.25f; break;
        case D_SPARSEISH: x[i] = rnd() % 100 == 0 ? (float)g : 0.0f; break;
        case D_EDGE: x[i] = edge_value(i, n); break;
        case D_BIG: x[i] = (float)((rnd() & 1 ? 1.0 : -1.0) * (1e37 + 3e38 * unit() * 0.9)); break;
        default: x[i] = (float)(0.01 * sin((double)i * 0.0007) + 0.003 * g); break;
        }
    }
    if (kind == D_NAN && n > 0)
        x[rnd() % n] = hp_u2f(simt_nan_bits[rnd() % SIMT_NAN_KINDS]);
    if (kind == D_INF && n > 0)
        x[rnd() % n] = (rnd() & 1) ? INFINITY : -INFINITY;
}

/* NaNs with payloads (quiet, negative, signalling, NVIDIA's and C's): a
 * path that lets the hardware choose a NaN's bits shows */
const uint32_t simt_nan_bits[SIMT_NAN_KINDS] = {0x7fc12345u, 0xffc00001u, 0x7f800001u, 0x7fffffffu, 0x7fc00000u};

void simt_nonfinite(float *x, size_t n, uint64_t seed)
{
    rs = seed;
    for (size_t k = 0; k < 4 && n > 0; k++) {
        x[rnd() % n] = hp_u2f(simt_nan_bits[k % (SIMT_NAN_KINDS - 1)]);
        x[rnd() % n] = (k & 1) ? -INFINITY : INFINITY;
    }
}

int simt_canonical(const float *x, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != x[i] && hp_f2u(x[i]) != HP_NAN_BITS) {
            *at = i;
            return 0;
        }
    return 1;
}

int simt_same(const float *a, const float *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) {
            *at = i;
            return 0;
        }
    return 1;
}

static uint8_t *junk(size_t cap, uint64_t seed)
{
    uint8_t *m = malloc(cap);
    rs = seed;
    for (size_t i = 0; i < cap; i++)
        m[i] = (uint8_t)rnd();
    return m;
}

static int selected(const char *group)
{
    size_t len = strlen(group);
    for (const char *p = only; p != NULL; p = strchr(p, ',')) {
        if (*p == ',')
            p++;
        if (strncmp(p, group, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
    }
    return only == NULL;
}

/* ------------------------------------------------------ the formats */

typedef struct {
    const char *name;
    int kind, fmt, resid, state, overflow;
    hipress_comp_params_t p;
} kc_t;

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

/* An accumulating decode into NaNs with payloads computed each NaN it
 * stored canonical: every element of a dense message, the sent ones of a
 * sparse message (the others are not written and keep their bits) */
static int acc_canonical(const kc_t *t, const uint8_t *msg, size_t len, const float *out, size_t n, size_t *at)
{
    if (t->fmt != HP_GPU_FMT_SPARSE)
        return simt_canonical(out, n, at);
    for (size_t j = 0; j < (len - HP_MSG_HEADER) / 8; j++) {
        uint32_t i;
        memcpy(&i, msg + HP_MSG_HEADER + 8 * j, 4);
        if (i < n && !simt_canonical(out + i, 1, at)) {
            *at = i;
            return 0;
        }
    }
    return 1;
}

/* One encode on the CPU and on the kernels; the CPU's message decoded by
 * the kernels; the message in device memory; a corrupted one. */
static void one(const kc_t *t, size_t n, int dk, uint64_t seed)
{
    const size_t cap = hp_msg_max_bytes(t->kind, n, &t->p), dcap = cap + 16;
    float *x = malloc(n * 4 + 4), *r0 = malloc(n * 4 + 4), *u0 = malloc(n * 4 + 4), *rc = malloc(n * 4 + 4);
    float *uc = malloc(n * 4 + 4), *rg = malloc(n * 4 + 4), *ug = malloc(n * 4 + 4), *oc = malloc(n * 4 + 4);
    float *og = malloc(n * 4 + 4);
    uint8_t *cm = malloc(cap), *gm = malloc(cap), *dm = junk(dcap, seed), *in = junk(dcap, seed + 1);
    hipress_encode_args_t a;
    hp_gpu_enc_t e;
    hp_gpu_dec_t d;
    size_t clen = 0, glen = 0, at = 0;
    int cnf = 0, gnf = 0, bad = 0;

    simt_cases++;
    memset(&e, 0, sizeof(e));
    if (hp_comp_gpu_fmt(t->kind, &t->p, n, 0, &e.fmt) != HP_OK || e.fmt.id != (uint32_t)t->fmt) {
        FAILF("%s n=%zu: no device format", t->name, n);
        goto out;
    }
    simt_fill(x, n, dk, seed);
    simt_fill(r0, n, D_GRAD, seed + 2);
    simt_fill(u0, n, D_GRAD, seed + 3);
    if (t->overflow)
        for (size_t i = 0; i < n; i += 3)
            r0[i] = (i & 1) ? FLT_MAX : -FLT_MAX;
    memcpy(rc, r0, n * 4);
    memcpy(rg, r0, n * 4);
    memcpy(uc, u0, n * 4);
    memcpy(ug, u0, n * 4);
    memset(&a, 0, sizeof(a));
    a.in = x;
    a.n = n;
    a.params = &t->p;
    a.residual = t->resid ? rc : NULL;
    a.state = t->state ? uc : NULL;
    a.rng_key[0] = seed;
    a.rng_key[1] = 5;
    a.rng_offset = 4321;
    if (hp_msg_encode(t->kind, &a, cm, cap, &clen, &cnf) != HP_OK) {
        FAILF("%s n=%zu: cpu encode failed", t->name, n);
        goto out;
    }
    e.in = x;
    e.n = n;
    e.residual = t->resid ? rg : NULL;
    e.state = t->state ? ug : NULL;
    e.rng_key = hp_rng_key(a.rng_key);
    e.rng_offset = a.rng_offset;
    if (hp_codec_encode(simt_codec(), &e, gm + HP_MSG_HEADER, cap - HP_MSG_HEADER, &glen, &gnf) != HP_GPU_OK) {
        FAILF("%s n=%zu: codec encode failed", t->name, n);
        goto out;
    }
    if (cnf != gnf)
        FAILF("%s n=%zu %s block %u: non-finite cpu %d gpu %d", t->name, n, simt_dname[dk], e.fmt.block, cnf, gnf);
    else if (!cnf && (clen != HP_MSG_HEADER + glen || memcmp(cm + HP_MSG_HEADER, gm + HP_MSG_HEADER, glen) != 0))
        FAILF("%s n=%zu %s block %u resid %d: the payload differs (cpu %zu bytes, gpu %zu)", t->name, n, simt_dname[dk],
              e.fmt.block, t->resid, clen - HP_MSG_HEADER, glen);
    if (!simt_same(rc, rg, n, &at))
        FAILF("%s n=%zu %s: residual[%zu] cpu %a gpu %a", t->name, n, simt_dname[dk], at, rc[at], rg[at]);
    if (!simt_same(uc, ug, n, &at))
        FAILF("%s n=%zu %s: state[%zu] cpu %a gpu %a", t->name, n, simt_dname[dk], at, uc[at], ug[at]);

    /* the message in device memory, from the same residual and state */
    memcpy(rg, r0, n * 4);
    memcpy(ug, u0, n * 4);
    if (hp_codec_encode_msg(simt_codec(), &e, (uint32_t)t->kind, dm, dcap) != HP_GPU_OK ||
        hp_msg_len(dm, dcap) != clen || memcmp(dm, cm, clen) != 0)
        FAILF("%s n=%zu %s: the device message differs from the cpu's", t->name, n, simt_dname[dk]);
    if (!simt_same(rc, rg, n, &at) || !simt_same(uc, ug, n, &at))
        FAILF("%s n=%zu %s: device message: residual or state [%zu]", t->name, n, simt_dname[dk], at);

    memset(&d, 0, sizeof(d));
    d.fmt = e.fmt;
    d.n = n;
    for (int acc = 0; acc < 2 && !cnf; acc++) {
        simt_fill(oc, n, D_GRAD, seed + 9);
        if (acc)   /* adding into NaNs (with payloads) and Infs */
            simt_nonfinite(oc, n, seed + 11);
        memcpy(og, oc, n * 4);
        d.accumulate = acc;
        if (hp_msg_decode(t->kind, cm, clen, n, oc, acc, &t->p) != HP_OK ||
            hp_codec_decode(simt_codec(), &d, cm + HP_MSG_HEADER, clen - HP_MSG_HEADER, og) != HP_GPU_OK ||
            hp_codec_sync(simt_codec(), &bad) != HP_GPU_OK || bad)
            FAILF("%s n=%zu: decode of a valid message failed (bad %d)", t->name, n, bad);
        else if (!simt_same(oc, og, n, &at))
            FAILF("%s n=%zu %s acc %d: decode[%zu] cpu 0x%08x gpu 0x%08x", t->name, n, simt_dname[dk], acc, at,
                  hp_f2u(oc[at]), hp_f2u(og[at]));
        else if (acc && !acc_canonical(t, cm, clen, og, n, &at))
            FAILF("%s n=%zu acc %d: decode[%zu] is the NaN 0x%08x, not 0x%08x", t->name, n, acc, at, hp_f2u(og[at]),
                  HP_NAN_BITS);
    }
    /* the CPU's message in device memory, junk after it */
    memcpy(in, cm, clen);
    simt_fill(oc, n, D_GRAD, seed + 10);
    memcpy(og, oc, n * 4);
    d.accumulate = (int)(seed & 1);
    if (!cnf && hp_msg_decode(t->kind, cm, clen, n, oc, d.accumulate, &t->p) != HP_OK)
        FAILF("%s n=%zu: cpu decode failed", t->name, n);
    if (hp_codec_decode_msg(simt_codec(), &d, (uint32_t)t->kind, in, dcap, og) != HP_GPU_OK ||
        hp_codec_sync(simt_codec(), &bad) != HP_GPU_OK || bad)
        FAILF("%s n=%zu %s: a valid device message rejected", t->name, n, simt_dname[dk]);
    else if (!cnf && !simt_same(oc, og, n, &at))
        FAILF("%s n=%zu %s: device-message decode[%zu] cpu %a gpu %a", t->name, n, simt_dname[dk], at, oc[at], og[at]);
    else if (cnf && n > 0 && !isnan(og[0]))
        FAILF("%s n=%zu: the NaN message did not decode to NaN", t->name, n);

    /* a bit flipped in the payload: accepted by both decoders, or by none */
    if (!cnf && clen > HP_MSG_HEADER) {
        int cpu, gpu, dev;
        rs = seed * 7 + 1;
        memcpy(in, cm, clen);
        in[HP_MSG_HEADER + rnd() % (clen - HP_MSG_HEADER)] ^= (uint8_t)(1u << (rnd() % 8));
        cpu = hp_msg_decode(t->kind, in, clen, n, oc, 0, &t->p) == HP_OK;
        gpu = hp_codec_decode(simt_codec(), &d, in + HP_MSG_HEADER, clen - HP_MSG_HEADER, og) == HP_GPU_OK;
        bad = 0;
        hp_codec_sync(simt_codec(), &bad);
        gpu = gpu && !bad;
        dev = hp_codec_decode_msg(simt_codec(), &d, (uint32_t)t->kind, in, dcap, og) == HP_GPU_OK;
        bad = 0;
        hp_codec_sync(simt_codec(), &bad);
        dev = dev && !bad;
        if (cpu != gpu || cpu != dev)
            FAILF("%s n=%zu: a corrupted message: cpu accepts %d, codec %d, device message %d", t->name, n, cpu,
                  gpu, dev);
    }
out:
    free(x); free(r0); free(u0); free(rc); free(uc); free(rg); free(ug); free(oc); free(og);
    free(cm); free(gm); free(dm); free(in);
}

typedef struct {
    const int *k;
    size_t n;
} kinds_t;

static void sweep(kc_t t, const size_t *ns, size_t nn, kinds_t d, uint64_t seed)
{
    for (size_t s = 0; s < nn; s++)
        for (size_t k = 0; k < d.n; k++)
            one(&t, ns[s], d.k[k], seed + 100 * s + (uint64_t)d.k[k]);
}

/* ------------------------------------------------------------- runs */

static int quick;   /* --quick: every grid shape and path, fewer data kinds and parameters */
static const int dg[] = {D_GRAD}, dgn[] = {D_GRAD, D_NAN}, d4[] = {D_GRAD, D_NAN, D_TIES, D_WIDE};
static const int dall[] = {D_GRAD, D_TIES, D_SIGNED_ZERO, D_WIDE, D_HUGE, D_NAN, D_INF, D_ZERO, D_CONST, D_SPARSEISH};
static const int dhalf[] = {D_GRAD, D_TIES, D_SIGNED_ZERO, D_WIDE, D_HUGE, D_NAN, D_INF, D_ZERO, D_EDGE};
static const int dhq[] = {D_EDGE, D_NAN}, dsq[] = {D_GRAD, D_CONST};
/* with a residual near FLT_MAX: x + r overflows */
static const int dover[] = {D_GRAD, D_BIG}, dbig[] = {D_BIG};
#define N_(a) (sizeof(a) / sizeof((a)[0]))
#define K_(a) ((kinds_t){a, N_(a)})
/* the data kinds of a sweep: the full list, or the quick one */
#define D(full, q) (quick ? K_(q) : K_(full))

/* Every case at the sizes ns; the formats' usual parameters at the large. */
static void run(const size_t *ns, size_t nn, const size_t *large, size_t nl, uint64_t seed)
{
    if (selected("none")) {
        kc_t t = kc("none", HP_GPU_FMT_NONE);
        sweep(t, ns, nn, D(dall, dgn), seed);
        sweep(t, large, nl, K_(dg), seed);
    }
    if (selected("onebit")) {
        /* below a chunk, the register path (2048 to 16384), past a CTA's span */
        static const uint32_t blocks[] = {32, 64, 2048, 4096, 16384, 32768};
        kc_t t = kc("onebit", HP_GPU_FMT_ONEBIT);
        for (size_t b = 0; b < N_(blocks); b++)
            for (t.resid = 0; t.resid < 2 && !(quick && (b == 1 || b == 2 || b == 4)); t.resid++) {
                t.p.onebit_block = blocks[b];
                t.overflow = 0;
                sweep(t, ns, nn, b == 3 ? D(dall, dgn) : D(d4, dg), seed);
                if ((t.overflow = t.resid))
                    sweep(t, ns, nn, D(dover, dbig), seed);
            }
        t.p.onebit_block = 4096;
        t.overflow = 0;
        t.resid = 1;
        sweep(t, large, nl, K_(dg), seed);
        t.p.onebit_block = 64;
        t.resid = 0;
        sweep(t, large, nl, K_(dg), seed);
    }
    if (selected("tbq")) {
        static const uint32_t blocks[] = {32, 2048, 4096, 65536};
        kc_t t = kc("tbq", HP_GPU_FMT_TBQ);
        for (size_t b = 0; b < N_(blocks); b++)
            for (int k = 0; k < 2 && !(quick && b == 1); k++)
                for (t.resid = 0; t.resid < 2; t.resid++) {
                    t.p.tbq_block = blocks[b];
                    t.p.tbq_threshold = k ? 0.003f : 0.0f;
                    t.p.tbq_scale = k ? 0.37f : 1.0f;
                    t.overflow = 0;
                    sweep(t, ns, nn, b == 2 && !k ? D(dall, dgn) : D(d4, dg), seed);
                    if ((t.overflow = t.resid && !k))
                        sweep(t, ns, nn, D(dover, dbig), seed);
                }
        t.p.tbq_block = 4096;
        t.p.tbq_threshold = 0.0f;
        t.p.tbq_scale = 1.0f;
        t.overflow = 0;
        for (t.resid = 0; t.resid < 2; t.resid++)
            sweep(t, large, nl, K_(dg), seed);
    }
    if (selected("tg")) {
        static const uint32_t bits[] = {1, 2, 4, 8}, blocks[] = {32, 4096, 65536};
        kc_t t = kc("terngrad", HP_GPU_FMT_TERNGRAD);
        for (size_t k = 0; k < N_(blocks) - quick; k++)
            for (size_t b = 0; b < N_(bits); b++) {
                t.p.terngrad_block = blocks[k];
                t.p.terngrad_bits = bits[b];
                sweep(t, ns, nn, b == 1 && k == 1 ? D(dall, dgn) : D(d4, dg), seed);
            }
        t.p.terngrad_block = 4096;
        t.p.terngrad_bits = 2;
        sweep(t, large, nl, K_(dg), seed);
    }
    if (selected("q")) {
        static const char *names[] = {"q2", "q4", "q8"};
        static const uint32_t blocks[] = {32, 512, 4096, 65536};
        for (size_t w = 0; w < 3; w++) {
            kc_t t = kc(names[w], HP_GPU_FMT_Q);
            for (size_t k = 0; k < N_(blocks); k++)
                for (uint32_t st = 0; st < 2; st++)
                    for (t.resid = 0; t.resid < 2; t.resid++) {
                        if (quick && w != 1 && !(k == 1 && st == 1 && t.resid))
                            continue;   /* q2 and q8 at one setting */
                        t.p.q_block = blocks[k];
                        t.p.q_rounding = st;
                        t.overflow = 0;
                        sweep(t, ns, nn, k == 1 && t.resid ? D(dall, dgn) : D(d4, dg), seed);
                        if ((t.overflow = t.resid && k < 2 && (!quick || w == 1)))
                            sweep(t, ns, nn, D(dover, dbig), seed);
                    }
            t.p.q_block = 512;
            t.p.q_rounding = 1;
            t.resid = 1;
            t.overflow = 0;
            sweep(t, large, w == 1 ? nl : 0, K_(dg), seed);
        }
    }
    if (selected("sparse")) {
        /* every selection width (min(block, 1024) threads), the candidate
         * list and the whole-block path (const data: one bin) */
        static const uint32_t blocks[] = {32, 64, 128, 256, 512, 1024, 4096, 65536};
        static const double ratios[] = {0.001, 0.01, 0.3};
        kc_t t = kc("graddrop", HP_GPU_FMT_SPARSE);
        for (size_t b = 0; b < N_(blocks); b++)
            for (size_t q = 0; q < N_(ratios); q++)
                for (t.resid = 0; t.resid < 2; t.resid++) {
                    if (quick ? !(q == 1 && t.resid) && !(b == 1 && q == 2 && !t.resid)
                              : q != 1 && b != 0 && b != 5 && b != 7)
                        continue;   /* the other ratios at 32, 1024 and 65536 */
                    t.p.sparse_block = blocks[b];
                    t.p.sparse_ratio = ratios[q];
                    t.overflow = 0;
                    sweep(t, ns, nn, q != 1 ? D(d4, dg) : b == 7 ? D(dall, dsq) : D(dall, dg), seed);
                    if ((t.overflow = t.resid && q == 1 && (!quick || b == 1 || b == 5)))
                        sweep(t, ns, nn, D(dover, dbig), seed);
                }
        t.p.sparse_block = 65536;
        t.p.sparse_ratio = 0.001;
        t.resid = 1;
        t.overflow = 0;
        sweep(t, large, nl, K_(dsq), seed);   /* const: the whole-block path */
        t = kc("dgc", HP_GPU_FMT_SPARSE);
        t.p.dgc_momentum = 0.9f;
        t.p.sparse_block = 4096;
        t.state = 1;
        for (t.resid = 0; t.resid < 2; t.resid++)
            sweep(t, ns, nn, D(d4, dg), seed);
        sweep(t, large, nl, K_(dg), seed);
    }
    if (selected("half")) {
        /* every CTA width (min(block, 256) threads), values kept or read again */
        static const uint32_t blocks[] = {32, 64, 128, 256, 1024, 4096};
        kc_t t = kc("fp16", HP_GPU_FMT_FP16);
        for (size_t b = 0; b < N_(blocks) - quick; b++) {
            t.p.fp16_block = blocks[b];
            sweep(t, ns, nn, D(dhalf, dhq), seed);
        }
        t.p.fp16_block = 1024;
        sweep(t, large, nl, K_(dg), seed);
        t = kc("bf16", HP_GPU_FMT_BF16);
        sweep(t, ns, nn, D(dhalf, dgn), seed);
        sweep(t, large, nl, K_(dg), seed);
    }
    if (selected("ops")) {
        for (size_t s = 0; s < nn; s++) {
            simt_selftest(ns[s]);
            simt_ops(ns[s], seed + s);
            simt_masked("none", HP_GPU_FMT_NONE, ns[s], seed + s);
            simt_masked("q4", HP_GPU_FMT_Q, ns[s], seed + s);
            simt_masked("graddrop", HP_GPU_FMT_SPARSE, ns[s], seed + s);
        }
        for (size_t s = 0; s < nl; s++)
            simt_ops(large[s], seed);
        simt_psgd(1, 16, 1, seed + 50);
        simt_psgd(157, 256, 4, seed + 51);
        simt_psgd(40, 64, 8, seed + 52);
    }
}

static size_t list(const char *s, size_t *out, size_t max)
{
    size_t n = 0;
    while (s != NULL && *s && n < max) {
        char *end;
        out[n++] = (size_t)strtoull(s, &end, 0);
        s = *end == ',' ? end + 1 : NULL;
    }
    return n;
}

int main(int argc, char **argv)
{
    size_t ns[32], large[8], seeds[16];
    size_t nn = list("1,31,32,33,4095,4097", ns, 32), nl = list("1048577", large, 8), nseed = 0;
    char names[4096];
    size_t launched, preloaded;
    int loaded;

    seeds[nseed++] = hp_simt_get_seed();
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--sizes") == 0 && v)
            nn = list(v, ns, 32);
        else if (strcmp(argv[i], "--large") == 0 && v)
            nl = strcmp(v, "none") == 0 ? 0 : list(v, large, 8);
        else if (strcmp(argv[i], "--seeds") == 0 && v)
            nseed = list(v, seeds, 16);
        else if (strcmp(argv[i], "--only") == 0 && v)
            only = v;
        else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
            continue;
        } else {
            fprintf(stderr, "usage: simt_kern [--quick] [--sizes LIST] [--large LIST|none] [--seeds LIST] "
                    "[--only LIST]\n");
            return 2;
        }
        i++;
    }
    loaded = hp_kl_preload();
    for (size_t k = 0; k < nseed; k++) {
        hp_simt_set_seed(seeds[k]);
        run(ns, nn, large, nl, 1000 * (uint64_t)k);
        /* the large sizes under the first seed only */
        nl = 0;
    }
    launched = hp_simt_kernels(HP_SIMT_LAUNCHED, names, sizeof(names));
    preloaded = hp_simt_kernels(HP_SIMT_PRELOADED, NULL, 0);
    printf("# simt_kern: %d cases, %llu grids, %llu CTAs, %zu seeds\n", simt_cases, hp_simt_launches(), hp_simt_ctas(),
           nseed);
    printf("# launched:\n%s", names);
    hp_simt_kernels(HP_SIMT_BLOCKS, names, sizeof(names));
    printf("# most threads per block:\n%s", names);
    printf("simt_kern: %zu kernels launched, %zu kernels preloaded (%d instances)\n", launched, preloaded, loaded);
    printf("simt_kern: %llu shared-memory accesses checked for races\n", hp_simt_race_checked());
    if (simt_failures) {
        printf("simt_kern: %d failures in %d cases\n", simt_failures, simt_cases);
        return 1;
    }
    printf("simt_kern: ok, %d cases bit for bit against the CPU\n", simt_cases);
    return 0;
}
