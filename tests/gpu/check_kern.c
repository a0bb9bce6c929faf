/*
 * The GPU codec on the CPU: the CUDA kernels' per-thread functions
 * (cuda/hp_kern.h) run over the kernels' grid by cuda/hp_kern_emu.c, driven
 * by the codec the module runs (cuda/hp_codec_frame.c) with host memory standing
 * in for the device.  Every encode must give the CPU compressor's bytes,
 * residual and state, bit for bit, and every decode its output, on many
 * sizes (tails, partial blocks, one and many pieces), parameters and inputs
 * (zeros, ties, signed zeros, denormals, NaN, Inf, residuals that overflow,
 * sums that overflow a float lane); malformed messages must be rejected
 * exactly when the CPU decoders reject them.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_ops.h"
#include "hp_ops_sparse.h"
#include "hp_codec.h"
#include "hp_kern.h"
#include "hp_klaunch.h"
#include "kern_data.h"

#define REQUIRE_MSG(c, ...) \
    do { if (!(c)) ck_abort_msg(__VA_ARGS__); } while (0)

/* ------------------------------------------------ host as the device */

static int h_alloc(void *self, size_t bytes, void **p_p)
{
    (void)self;
    *p_p = calloc(1, bytes);
    return *p_p != NULL ? 0 : -1;
}
static void h_release(void *self, void *p) { (void)self; free(p); }
static int h_copy(void *self, void *dst, const void *src, size_t bytes, int stream)
{
    (void)self; (void)stream;
    memmove(dst, src, bytes);
    return 0;
}
static int h_memset(void *self, void *p, int byte, size_t bytes, int stream)
{
    (void)self; (void)stream;
    memset(p, byte, bytes);
    return 0;
}
static int h_event(void *self, int a, int b) { (void)self; (void)a; (void)b; return 0; }
static int h_sync(void *self, int a) { (void)self; (void)a; return 0; }
static void *h_stream(void *self, int s) { (void)self; (void)s; return NULL; }

static const hp_dev_ops_t host_dev = {
    .alloc = h_alloc, .release = h_release, .halloc = h_alloc, .hrelease = h_release,
    .copy = h_copy, .memset = h_memset, .record = h_event, .wait = h_event,
    .sync = h_sync, .sync_event = h_sync, .stream = h_stream,
};

/* ------------------------------------------------------------- data */


enum { D_GRAD, D_ZERO, D_CONST, D_TIES, D_SIGNED_ZERO, D_DENORM, D_HUGE, D_WIDE, D_NAN, D_INF, D_SPARSEISH, D_N,
       D_EDGE = D_N /* fp16/bf16 only (not in sweep) */ };
static const char *dname[D_N + 1] = {"grad", "zero", "const", "ties", "signed-zero", "denorm", "huge", "wide",
                                     "nan", "inf", "sparse-ish", "edge"};

static void fill(float *x, size_t n, int kind, uint64_t seed)
{
    rs = seed;
    for (size_t i = 0; i < n; i++) {
        double g = 0.0;
        for (int k = 0; k < 4; k++)
            g += unit() - 0.5;
        switch (kind) {
        case D_GRAD: x[i] = (float)(0.01 * sin((double)i * 0.0007) + 0.003 * g); break;
        case D_ZERO: x[i] = 0.0f; break;
        case D_CONST: x[i] = 0.25f; break;
        case D_TIES: x[i] = (float)((int)(rnd() % 7) - 3) * 0.5f; break;
        case D_SIGNED_ZERO: x[i] = (rnd() & 1) ? -0.0f : (rnd() % 5 == 0 ? 1.0f : 0.0f); break;
        case D_DENORM: x[i] = (float)g * 1e-40f; break;
        case D_HUGE:
            /* magnitudes from 1e-30 to 3e38: float lane sums overflow, and
             * the exact form's order decides its rounding */
            x[i] = (float)(g * (rnd() % 4 == 0 ? 3e38 : pow(10.0, (double)(rnd() % 60) - 30.0)));
            break;
        case D_WIDE:
            /* magnitudes from 1e-30 to 1e30, by lane: the double sums of
             * the lane totals round, so their order shows */
            x[i] = (float)(g * pow(10.0, (double)((i * 7 + i / 32) % 61) - 30.0));
            break;
        case D_NAN: case D_INF: x[i] = (float)g; break;
        case D_SPARSEISH: x[i] = rnd() % 100 == 0 ? (float)g : 0.0f; break;
        case D_EDGE: x[i] = edge_value(i, n); break;
        }
    }
    if (kind == D_NAN && n > 0)
        x[rnd() % n] = NAN;
    if (kind == D_INF && n > 0)
        x[rnd() % n] = (rnd() & 1) ? INFINITY : -INFINITY;
}

static const size_t sizes[] = {1, 7, 31, 32, 33, 100, 2047, 2048, 2049, 4095, 4096, 4097,
                               16383, 16384, 16385, 40000, 65537, 200003};

/* --------------------------------------------------------- the runs */

typedef struct {
    int      kind;
    int      fmt;
    hipress_comp_params_t p;
    int      resid;     /* error feedback residual present */
    int      state;     /* sparse: momentum state present */
    int      overflow;  /* the residual holds values near FLT_MAX */
    size_t   piece;     /* codec piece size */
} kcase_t;

/* The format as the device backend gets it: the compressor's hook. */
static hp_gpu_enc_t enc_args(const kcase_t *t, size_t n)
{
    hp_gpu_enc_t e;
    memset(&e, 0, sizeof(e));
    ck_assert_int_eq(hp_comp_gpu_fmt(t->kind, &t->p, n, 0, &e.fmt), HP_OK);
    ck_assert_uint_eq(e.fmt.id, (uint32_t)t->fmt);
    e.n = n;
    return e;
}

static hp_codec_t *codec(size_t piece)
{
    static hp_codec_t cx;
    if (cx.dev == NULL)
        ck_assert_int_eq(hp_codec_init(&cx, &host_dev, NULL), HP_GPU_OK);
    cx.piece = piece;
    return &cx;
}

/* A device message buffer: cap bytes, the bytes after what is written
 * junk (a slot of fixed capacity holds the previous message's bytes). */
static uint8_t *junk_slot(size_t cap, uint64_t seed)
{
    uint8_t *m = malloc(cap);
    rs = seed;
    for (size_t i = 0; i < cap; i++)
        m[i] = (uint8_t)rnd();
    return m;
}

/* The message in device memory (hp_codec_encode_msg) against the CPU's
 * message cm (clen bytes; cnf: the NaN message), the residual and state it
 * leaves against the CPU's (rc, uc), and hp_codec_decode_msg of the CPU's
 * message against hp_msg_decode, in both modes. */
static void compare_devmsg(const kcase_t *t, size_t n, const float *x, const float *r0, const float *u0,
                           const float *rc, const float *uc, const uint8_t *cm, size_t clen, int cnf,
                           const hp_gpu_enc_t *e0, const char *what, uint64_t seed)
{
    hp_comp_t *c = hp_comp_get(t->kind);
    const size_t cap = HP_MSG_HEADER + e0->fmt.payload + 16;
    hp_gpu_enc_t e = *e0;
    float *rg = malloc(n * 4), *ug = malloc(n * 4), *oc = malloc(n * 4), *og = malloc(n * 4);
    uint8_t *dm = junk_slot(cap, seed), *in = junk_slot(cap, seed + 1);
    hp_gpu_dec_t d;
    int st, bad = 0;

    memcpy(rg, r0, n * 4);
    memcpy(ug, u0, n * 4);
    e.in = x;
    e.residual = t->resid ? rg : NULL;
    e.state = t->state ? ug : NULL;
    st = hp_codec_encode_msg(codec(t->piece), &e, (uint32_t)t->kind, dm, cap);
    REQUIRE_MSG(st == HP_GPU_OK, "%s n=%zu: device-message encode failed (%d)", c->name, n, st);
    REQUIRE_MSG(hp_msg_len(dm, cap) == clen, "%s n=%zu %s: device message of %zu bytes, cpu %zu", c->name, n, what,
                hp_msg_len(dm, cap), clen);
    /* (a sparse format's length is the data's: its pairs, at most the largest) */
    REQUIRE_MSG(cnf || clen == HP_MSG_HEADER + e.fmt.payload ||
                    (t->fmt == HP_GPU_FMT_SPARSE && clen <= HP_MSG_HEADER + e.fmt.payload),
                "%s n=%zu: not of the format's length", c->name, n);
    for (size_t i = 0; i < clen; i++)
        REQUIRE_MSG(cm[i] == dm[i], "%s n=%zu %s block %u resid %d: device message byte %zu of %zu: cpu %02x gpu %02x",
                    c->name, n, what, e.fmt.block, t->resid, i, clen, cm[i], dm[i]);
    for (size_t i = 0; i < n; i++) {
        REQUIRE_MSG(hp_f2u(rc[i]) == hp_f2u(rg[i]), "%s n=%zu %s: device message residual[%zu] cpu %a gpu %a",
                    c->name, n, what, i, rc[i], rg[i]);
        REQUIRE_MSG(hp_f2u(uc[i]) == hp_f2u(ug[i]), "%s n=%zu %s: device message state[%zu]", c->name, n, what, i);
    }

    /* the CPU's message, from a slot with junk after it, decoded on the device */
    memcpy(in, cm, clen);
    memset(&d, 0, sizeof(d));
    d.fmt = e.fmt;
    d.n = n;
    for (int acc = 0; acc < 2; acc++) {
        fill(oc, n, D_GRAD, seed + 9);
        memcpy(og, oc, n * 4);
        d.accumulate = acc;
        ck_assert_int_eq(hp_msg_decode(t->kind, cm, clen, n, oc, acc, &t->p), HP_OK);
        ck_assert_int_eq(hp_codec_decode_msg(codec(t->piece), &d, (uint32_t)t->kind, in, cap, og), HP_GPU_OK);
        ck_assert_int_eq(hp_codec_sync(codec(t->piece), &bad), HP_GPU_OK);
        REQUIRE_MSG(!bad, "%s n=%zu %s: a valid device message flagged bad", c->name, n, what);
        for (size_t i = 0; i < n; i++)
            REQUIRE_MSG(hp_f2u(oc[i]) == hp_f2u(og[i]), "%s n=%zu %s acc %d: device-message decode[%zu] cpu %a gpu %a",
                        c->name, n, what, acc, i, oc[i], og[i]);
    }
    free(rg); free(ug); free(oc); free(og); free(dm); free(in);
}

/* Encode x on the CPU and through the codec; compare everything. */
static void compare_encode(const kcase_t *t, size_t n, int dkind, uint64_t seed)
{
    hp_comp_t *c = hp_comp_get(t->kind);
    float *x = malloc(n * 4), *r0 = malloc(n * 4), *u0 = malloc(n * 4);
    float *rc = malloc(n * 4), *uc = malloc(n * 4), *rg = malloc(n * 4), *ug = malloc(n * 4);
    size_t cap = hp_msg_max_bytes(t->kind, n, &t->p), clen = 0, glen = 0;
    uint8_t *cm = malloc(cap), *gm = malloc(cap);
    hipress_encode_args_t a;
    hp_gpu_enc_t e = enc_args(t, n);
    int cnf = 0, gnf = 0, st;
    const char *what = dname[dkind];

    fill(x, n, dkind, seed);
    fill(r0, n, D_GRAD, seed + 1);
    fill(u0, n, D_GRAD, seed + 2);
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
    a.rng_key[1] = 3;
    a.rng_key[2] = 7;
    a.rng_key[3] = 1;
    a.rng_offset = 12345;
    st = hp_msg_encode(t->kind, &a, cm, cap, &clen, &cnf);
    REQUIRE_MSG(st == HP_OK, "%s: cpu encode failed", c->name);

    e.in = x;
    e.residual = t->resid ? rg : NULL;
    e.state = t->state ? ug : NULL;
    e.rng_key = hp_rng_key(a.rng_key);
    e.rng_offset = a.rng_offset;
    st = hp_codec_encode(codec(t->piece), &e, gm + HP_MSG_HEADER, cap - HP_MSG_HEADER, &glen, &gnf);
    REQUIRE_MSG(st == HP_GPU_OK, "%s n=%zu: codec encode failed (%d)", c->name, n, st);

    REQUIRE_MSG(cnf == gnf, "%s n=%zu %s block %u: non-finite cpu %d gpu %d", c->name, n, what, e.fmt.block, cnf, gnf);
    if (!cnf) {
        REQUIRE_MSG(clen == HP_MSG_HEADER + glen, "%s n=%zu %s: length cpu %zu gpu %zu", c->name, n, what,
                    clen - HP_MSG_HEADER, glen);
        for (size_t i = 0; i < glen; i++)
            REQUIRE_MSG(cm[HP_MSG_HEADER + i] == gm[HP_MSG_HEADER + i],
                        "%s n=%zu %s block %u iarg %u resid %d: payload byte %zu of %zu: cpu %02x gpu %02x",
                        c->name, n, what, e.fmt.block, e.fmt.iarg[0], t->resid, i, glen, cm[HP_MSG_HEADER + i],
                        gm[HP_MSG_HEADER + i]);
    }
    for (size_t i = 0; i < n; i++) {
        REQUIRE_MSG(hp_f2u(rc[i]) == hp_f2u(rg[i]), "%s n=%zu %s overflow %d: residual[%zu] cpu %a gpu %a",
                    c->name, n, what, t->overflow, i, rc[i], rg[i]);
        REQUIRE_MSG(hp_f2u(uc[i]) == hp_f2u(ug[i]), "%s n=%zu %s: state[%zu] cpu %a gpu %a", c->name, n, what,
                    i, uc[i], ug[i]);
    }

    compare_devmsg(t, n, x, r0, u0, rc, uc, cm, clen, cnf, &e, what, seed);

    /* the CPU's message decoded through the codec, both modes */
    if (!cnf) {
        hp_gpu_dec_t d;
        float *oc = malloc(n * 4), *og = malloc(n * 4);
        int bad = 0;
        memset(&d, 0, sizeof(d));
        d.fmt = e.fmt;
        d.n = n;
        for (int acc = 0; acc < 2; acc++) {
            fill(oc, n, D_GRAD, seed + 9);
            memcpy(og, oc, n * 4);
            d.accumulate = acc;
            ck_assert_int_eq(hp_msg_decode(t->kind, cm, clen, n, oc, acc, &t->p), HP_OK);
            ck_assert_int_eq(hp_codec_decode(codec(t->piece), &d, cm + HP_MSG_HEADER, clen - HP_MSG_HEADER, og),
                             HP_GPU_OK);
            ck_assert_int_eq(hp_codec_sync(codec(t->piece), &bad), HP_GPU_OK);
            REQUIRE_MSG(!bad, "%s n=%zu: a valid message flagged bad", c->name, n);
            for (size_t i = 0; i < n; i++)
                REQUIRE_MSG(hp_f2u(oc[i]) == hp_f2u(og[i]), "%s n=%zu %s acc %d: decode[%zu] cpu %a gpu %a",
                            c->name, n, what, acc, i, oc[i], og[i]);
        }
        free(oc);
        free(og);
    }
    free(x); free(r0); free(u0); free(rc); free(uc); free(rg); free(ug); free(cm); free(gm);
}

static kcase_t tc(const char *name, int fmt)
{
    kcase_t t;
    memset(&t, 0, sizeof(t));
    t.kind = hp_comp_find(name);
    ck_assert_int_ge(t.kind, 0);
    t.fmt = fmt;
    hipress_comp_params_default(&t.p);
    t.p.isa = HP_ISA_AUTO;
    t.piece = HP_CODEC_PIECE;
    return t;
}

static void sweep(kcase_t t, int all_data)
{
    for (size_t s = 0; s < HP_ARRAY_SIZE(sizes); s++)
        for (int d = 0; d < D_N; d++) {
            if (!all_data && d != D_GRAD && d != D_NAN && d != D_TIES && d != D_WIDE)
                continue;
            compare_encode(&t, sizes[s], d, 1000 * s + (uint64_t)d);
        }
}

/* ------------------------------------------------------------- tests */

START_TEST(test_none)
{
    kcase_t t = tc("none", HP_GPU_FMT_NONE);
    sweep(t, 1);
}
END_TEST

START_TEST(test_onebit)
{
    static const uint32_t blocks[] = {32, 64, 2048, 4096, 16384, 32768};
    kcase_t t = tc("onebit", HP_GPU_FMT_ONEBIT);
    for (int resid = 0; resid < 2; resid++)
        for (size_t b = 0; b < HP_ARRAY_SIZE(blocks); b++) {
            t.p.onebit_block = blocks[b];
            t.resid = resid;
            t.overflow = 0;
            sweep(t, b == 3);
            if (resid) {
                t.overflow = 1;
                sweep(t, 0);
            }
        }
}
END_TEST

START_TEST(test_onebit_pieces)
{
    /* small pieces: every piece boundary of the copies */
    kcase_t t = tc("onebit", HP_GPU_FMT_ONEBIT);
    t.p.onebit_block = 64;
    t.piece = 100;   /* rounded up to whole blocks */
    t.resid = 1;
    sweep(t, 1);
}
END_TEST

START_TEST(test_tbq)
{
    static const uint32_t blocks[] = {32, 2048, 4096, 65536};
    static const float thr[] = {0.0f, 0.003f};
    static const float scale[] = {1.0f, 0.37f};
    kcase_t t = tc("tbq", HP_GPU_FMT_TBQ);
    for (int resid = 0; resid < 2; resid++)
        for (size_t b = 0; b < HP_ARRAY_SIZE(blocks); b++)
            for (int k = 0; k < 2; k++) {
                t.p.tbq_block = blocks[b];
                t.p.tbq_threshold = thr[k];
                t.p.tbq_scale = scale[k];
                t.resid = resid;
                t.overflow = 0;
                sweep(t, b == 2 && k == 0);
                if (resid) {
                    t.overflow = 1;
                    sweep(t, 0);
                }
            }
    t.p.tbq_block = 32;
    t.p.tbq_threshold = 0.0f;
    t.piece = 70;
    t.resid = 1;
    t.overflow = 0;
    sweep(t, 1);
}
END_TEST

START_TEST(test_terngrad)
{
    static const uint32_t bits[] = {1, 2, 4, 8};
    static const uint32_t blocks[] = {32, 4096, 65536};
    kcase_t t = tc("terngrad", HP_GPU_FMT_TERNGRAD);
    for (size_t k = 0; k < 3; k++)
        for (size_t b = 0; b < 4; b++) {
            t.p.terngrad_block = blocks[k];
            t.p.terngrad_bits = bits[b];
            sweep(t, b == 1 && k == 1);
        }
}
END_TEST

START_TEST(test_terngrad_signed_zero)
{
    /* min and max of signed zeros: which zero the CPU keeps */
    kcase_t t = tc("terngrad", HP_GPU_FMT_TERNGRAD);
    for (size_t n = 1; n < 5000; n = n * 3 + 1)
        for (uint64_t s = 0; s < 20; s++)
            compare_encode(&t, n, D_SIGNED_ZERO, s);
}
END_TEST

START_TEST(test_q)
{
    /* q2, q4, q8: every width, blocks below, at and above a chunk, both
     * roundings, with and without a residual, residuals that overflow */
    static const char *names[] = {"q2", "q4", "q8"};
    static const uint32_t blocks[] = {32, 512, 4096, 65536};
    for (size_t w = 0; w < 3; w++) {
        kcase_t t = tc(names[w], HP_GPU_FMT_Q);
        for (size_t k = 0; k < HP_ARRAY_SIZE(blocks); k++)
            for (uint32_t rnd_ = 0; rnd_ < 2; rnd_++)
                for (int resid = 0; resid < 2; resid++) {
                    t.p.q_block = blocks[k];
                    t.p.q_rounding = rnd_;
                    t.resid = resid;
                    t.overflow = 0;
                    sweep(t, k == 1 && resid);
                    if (resid && k < 2) {
                        t.overflow = 1;
                        sweep(t, 0);
                    }
                }
    }
}
END_TEST

START_TEST(test_q_signed_zero)
{
    /* which zero the CPU's min and max keep, with v = x + r too */
    kcase_t t = tc("q4", HP_GPU_FMT_Q);
    for (int resid = 0; resid < 2; resid++) {
        t.resid = resid;
        for (size_t n = 1; n < 5000; n = n * 3 + 1)
            for (uint64_t s = 0; s < 10; s++)
                compare_encode(&t, n, D_SIGNED_ZERO, s);
    }
}
END_TEST

START_TEST(test_q_hook)
{
    /* the hook's format: bits, block, rounding and the encoder's own size;
     * settings the encoder rejects have no device form either */
    static const char *names[] = {"q2", "q4", "q8"};
    for (unsigned w = 0; w < 3; w++) {
        kcase_t t = tc(names[w], HP_GPU_FMT_Q);
        hp_gpu_fmt_t f;
        t.p.q_block = 1024;
        t.p.q_rounding = 1;
        ck_assert_int_eq(hp_comp_gpu_fmt(t.kind, &t.p, 100003, 0, &f), HP_OK);
        ck_assert_uint_eq(f.id, HP_GPU_FMT_Q);
        ck_assert_uint_eq(f.block, 1024);
        ck_assert_uint_eq(f.iarg[0], 2u << w);
        ck_assert_uint_eq(f.iarg[1], 1);
        ck_assert_uint_eq(f.payload, hp_comp_get(t.kind)->max_payload(100003, &t.p));
        t.p.q_rounding = 2;
        ck_assert_int_eq(hp_comp_gpu_fmt(t.kind, &t.p, 100003, 0, &f), HP_ERR_INVALID);
        t.p.q_rounding = 0;
        t.p.q_block = 48;
        ck_assert_int_eq(hp_comp_gpu_fmt(t.kind, &t.p, 100003, 0, &f), HP_ERR_INVALID);
    }
}
END_TEST

START_TEST(test_sparse)
{
    static const uint32_t blocks[] = {32, 1024, 65536};
    static const double ratios[] = {0.001, 0.01, 0.3};
    kcase_t t = tc("graddrop", HP_GPU_FMT_SPARSE);
    for (size_t b = 0; b < HP_ARRAY_SIZE(blocks); b++)
        for (size_t q = 0; q < HP_ARRAY_SIZE(ratios); q++)
            for (int resid = 0; resid < 2; resid++) {
                t.p.sparse_block = blocks[b];
                t.p.sparse_ratio = ratios[q];
                t.resid = resid;
                t.overflow = 0;
                sweep(t, b == 1 || q == 0);
                if (resid && q == 1) {
                    t.overflow = 1;
                    sweep(t, 0);
                }
            }
}
END_TEST

START_TEST(test_dgc_state)
{
    /* dgc's encoder with its momentum state (u = m u + g) */
    kcase_t t = tc("dgc", HP_GPU_FMT_SPARSE);
    t.p.dgc_momentum = 0.9f;
    t.p.sparse_block = 4096;
    for (int resid = 0; resid < 2; resid++) {
        t.resid = resid;
        t.state = 1;
        sweep(t, 1);
    }
}
END_TEST

/* fp16 and bf16: the sizes of the task (tails of blocks of 32 and 1024,
 * one piece and several), every data kind and the edges. */
static const size_t half_sizes[] = {1, 31, 1023, 1024, 1025, 4097, 100003};

static void sweep_halves(kcase_t t)
{
    for (size_t s = 0; s < HP_ARRAY_SIZE(half_sizes); s++)
        for (int d = 0; d <= D_EDGE; d++)
            compare_encode(&t, half_sizes[s], d, 5000 * s + (uint64_t)d);
}

START_TEST(test_fp16)
{
    static const uint32_t blocks[] = {32, 1024, 0 /* the default: 1024 */, 4096};
    kcase_t t = tc("fp16", HP_GPU_FMT_FP16);
    for (size_t b = 0; b < HP_ARRAY_SIZE(blocks); b++) {
        t.p.fp16_block = blocks[b];
        sweep_halves(t);
    }
    /* pieces: every piece boundary of the copies (100 -> 128, whole blocks) */
    t.p.fp16_block = 32;
    t.piece = 100;
    sweep_halves(t);
    /* a value that scales to [65520, 65536) in every block of 32, beside
     * values that round to each side of binary16's ties */
    for (uint64_t seed = 0; seed < 50; seed++) {
        size_t n = 32 * (1 + seed % 9) + seed % 5;
        compare_encode(&t, n, D_EDGE, 90000 + seed);
    }
}
END_TEST

START_TEST(test_bf16)
{
    kcase_t t = tc("bf16", HP_GPU_FMT_BF16);
    sweep_halves(t);
    t.piece = 100;
    sweep_halves(t);
}
END_TEST

START_TEST(test_f16_block_rule)
{
    /* the device's block check against the CPU decoder on every kind of
     * block: largest |h| at each binade edge, every exponent */
    static const uint16_t mxs[] = {0x0000, 0x0001, 0x03ff, 0x0400, 0x77ff, 0x7800, 0x7bff, 0x7c00, 0x7c01, 0x7fff};
    kcase_t t = tc("fp16", HP_GPU_FMT_FP16);
    hp_gpu_dec_t d;
    const size_t n = 64;
    uint8_t pl[2 * 64 + 2];
    float o[64];
    t.p.fp16_block = 32;
    memset(&d, 0, sizeof(d));
    ck_assert_int_eq(hp_comp_gpu_fmt(t.kind, &t.p, n, 0, &d.fmt), HP_OK);
    ck_assert_uint_eq(d.fmt.payload, sizeof(pl));
    d.n = n;
    for (int e = -128; e < 128; e++)
        for (size_t k = 0; k < HP_ARRAY_SIZE(mxs); k++) {
            int cpu, gpu, bad = 0;
            memset(pl, 0, sizeof(pl));
            hp_k_st16(pl + 2 * 5, mxs[k]);
            hp_k_st16(pl + 2 * 6, (uint16_t)(0x8000u | (mxs[k] >> 1)));
            pl[2 * n] = (uint8_t)(int8_t)e;
            pl[2 * n + 1] = 0;
            cpu = hp_comp_get(t.kind)->decode(pl, sizeof(pl), n, o, 0, &t.p) == HIPRESS_COMP_OK;
            gpu = hp_codec_decode(codec(HP_CODEC_PIECE), &d, pl, sizeof(pl), o) == HP_GPU_OK;
            ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
            gpu = gpu && !bad;
            REQUIRE_MSG(cpu == gpu, "e %d largest %04x: cpu accepts %d, gpu %d", e, mxs[k], cpu, gpu);
        }
}
END_TEST

/* A malformed message: the codec (host checks, then the device's sticky
 * flag) must reject it exactly when the CPU decoder does. */
static void compare_reject(const kcase_t *t, size_t n, uint64_t seed)
{
    size_t cap = hp_msg_max_bytes(t->kind, n, &t->p), len = 0;
    uint8_t *m = malloc(cap + 64);
    float *x = malloc(n * 4), *o = malloc(n * 4);
    hipress_encode_args_t a;
    hp_gpu_enc_t e = enc_args(t, n);
    hp_gpu_dec_t d;
    int nf = 0;

    fill(x, n, D_TIES, seed);
    memset(&a, 0, sizeof(a));
    a.in = x;
    a.n = n;
    a.params = &t->p;
    ck_assert_int_eq(hp_msg_encode(t->kind, &a, m, cap, &len, &nf), HP_OK);
    memset(&d, 0, sizeof(d));
    d.fmt = e.fmt;
    d.n = n;
    rs = seed;
    for (int trial = 0; trial < 60; trial++) {
        uint8_t *mm = malloc(len + 8);
        size_t ml = len;
        int cpu, gpu, bad = 0, mode = (int)(rnd() % 4);
        memcpy(mm, m, len);
        if (mode == 0 && len > HP_MSG_HEADER) {          /* flip a bit */
            size_t i = HP_MSG_HEADER + rnd() % (len - HP_MSG_HEADER);
            mm[i] ^= (uint8_t)(1u << (rnd() % 8));
        } else if (mode == 1 && len > HP_MSG_HEADER) {   /* a random byte */
            mm[HP_MSG_HEADER + rnd() % (len - HP_MSG_HEADER)] = (uint8_t)rnd();
        } else if (mode == 2 && len > HP_MSG_HEADER) {   /* a special float at a float boundary */
            static const uint32_t specials[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x80000000u, 0x00000001u};
            size_t words = (len - HP_MSG_HEADER) / 4;
            if (words > 0) {
                uint32_t v = specials[rnd() % 5];
                memcpy(mm + HP_MSG_HEADER + 4 * (rnd() % words), &v, 4);
            }
        } else {                                         /* a length off by a few */
            ml = len + (rnd() % 2 ? 8 : 0) - (len > HP_MSG_HEADER + 8 && rnd() % 2 ? 8 : 0);
            if (ml > len)
                memset(mm + len, 0, ml - len);
        }
        /* keep the header consistent with the length (that check is the framework's) */
        {
            uint32_t p32 = (uint32_t)(ml - HP_MSG_HEADER);
            memcpy(mm + 8, &p32, 4);
        }
        cpu = hp_msg_decode(t->kind, mm, ml, n, o, 0, &t->p) == HP_OK;
        gpu = hp_codec_decode(codec(t->piece), &d, mm + HP_MSG_HEADER, ml - HP_MSG_HEADER, o) == HP_GPU_OK;
        ck_assert_int_eq(hp_codec_sync(codec(t->piece), &bad), HP_GPU_OK);
        gpu = gpu && !bad;
        REQUIRE_MSG(cpu == gpu, "n=%zu trial %d mode %d: cpu accepts %d, gpu accepts %d", n, trial, mode, cpu, gpu);
        {
            /* the same message in device memory, checked on the device */
            size_t dcap = (ml > HP_MSG_HEADER + d.fmt.payload ? ml : HP_MSG_HEADER + d.fmt.payload) + 8;
            uint8_t *dm = junk_slot(dcap, seed + (uint64_t)trial);
            memcpy(dm, mm, ml);
            ck_assert_int_eq(hp_codec_decode_msg(codec(t->piece), &d, (uint32_t)t->kind, dm, dcap, o), HP_GPU_OK);
            ck_assert_int_eq(hp_codec_sync(codec(t->piece), &bad), HP_GPU_OK);
            REQUIRE_MSG(cpu == !bad, "n=%zu trial %d mode %d: cpu accepts %d, device message accepted %d", n, trial,
                        mode, cpu, !bad);
            free(dm);
        }
        free(mm);
    }
    free(m);
    free(x);
    free(o);
}

START_TEST(test_reject)
{
    static const char *names[] = {"none", "onebit", "tbq", "terngrad", "graddrop", "fp16", "bf16", "q2", "q4", "q8"};
    static const int fmts[] = {HP_GPU_FMT_NONE, HP_GPU_FMT_ONEBIT, HP_GPU_FMT_TBQ, HP_GPU_FMT_TERNGRAD,
                               HP_GPU_FMT_SPARSE, HP_GPU_FMT_FP16, HP_GPU_FMT_BF16, HP_GPU_FMT_Q, HP_GPU_FMT_Q,
                               HP_GPU_FMT_Q};
    static const size_t ns[] = {1, 33, 4097, 20000};
    for (int k = 0; k < 10; k++) {
        kcase_t t = tc(names[k], fmts[k]);
        t.p.onebit_block = 64;
        t.p.tbq_block = 64;
        t.p.fp16_block = 64;
        t.p.q_block = 64;
        t.p.sparse_ratio = 0.05;
        for (size_t s = 0; s < 4; s++)
            compare_reject(&t, ns[s], 77 + s);
    }
}
END_TEST

/* The header of a message in device memory: every field mutated, against
 * hp_msg_decode; the two forms the device does not decode (the dense
 * fallback `none` and exceptions) rejected, as documented. */
static void devmsg_header(const char *name, int fmt)
{
    kcase_t t = tc(name, fmt);
    const int sparse = fmt == HP_GPU_FMT_SPARSE;
    const size_t n = 1000;
    size_t cap = hp_msg_max_bytes(t.kind, n, &t.p), len = 0, nlen = 0;
    uint8_t *m = malloc(cap), *nm = malloc(HP_MSG_HEADER + 4 * n);
    float *x = malloc(n * 4), *o = malloc(n * 4);
    hipress_encode_args_t a;
    hp_gpu_enc_t e = enc_args(&t, n);
    hp_gpu_dec_t d;
    int nf = 0, bad = 0;

    /* the constants hp_kern_msg.h spells for the module */
    ck_assert_uint_eq(HP_K_MSG_HEADER, HP_MSG_HEADER);
    ck_assert_uint_eq(HP_K_MSG_MAGIC, HP_MSG_MAGIC);
    ck_assert_uint_eq(HP_K_MSG_VERSION, HP_MSG_VERSION);
    ck_assert_uint_eq(HP_K_MSG_NONFINITE, HP_MSG_NONFINITE);
    ck_assert_uint_eq(HP_K_MSG_EXCEPT, HP_MSG_EXCEPT);
    ck_assert_uint_eq(HP_K_MSG_KIND_ERROR, HP_KIND_ERROR);

    fill(x, n, D_GRAD, 5);
    memset(&a, 0, sizeof(a));
    a.in = x;
    a.n = n;
    a.params = &t.p;
    ck_assert_int_eq(hp_msg_encode(t.kind, &a, m, cap, &len, &nf), HP_OK);
    memset(&d, 0, sizeof(d));
    d.fmt = e.fmt;
    d.n = n;
    for (int field = 0; field < 12; field++)
        for (int v = 0; v < 256; v += (field < 4 ? 1 : 37)) {
            uint8_t *mm = malloc(cap + 16);
            int cpu;
            uint32_t w;
            memcpy(mm, m, len);
            memset(mm + len, 0, cap + 16 - len);
            if (field < 4) {
                mm[field] = (uint8_t)v;
            } else if (field < 8) {
                w = (uint32_t)n + (uint32_t)(v - 111) * (field == 4 ? 1u : field == 5 ? 0x100u : field == 6 ? 0x10000u : 0x1000000u);
                memcpy(mm + 4, &w, 4);
            } else {
                w = (uint32_t)(len - HP_MSG_HEADER) + (uint32_t)(v - 111) * (field == 8 ? 1u : field == 9 ? 0x100u : field == 10 ? 0x10000u : 0x1000000u);
                memcpy(mm + 8, &w, 4);
            }
            if (mm[2] & HP_MSG_EXCEPT || (field == 1 && v == hp_kind_none && !sparse)) {
                free(mm);
                continue;   /* below */
            }
            memcpy(&w, mm + 8, 4);
            cpu = (size_t)w <= cap + 16 - HP_MSG_HEADER &&
                  hp_msg_decode(t.kind, mm, HP_MSG_HEADER + w, n, o, 0, &t.p) == HP_OK;
            ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, mm, cap + 16, o),
                             HP_GPU_OK);
            ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
            REQUIRE_MSG(cpu == !bad, "header byte field %d value %d: cpu accepts %d, device %d", field, v, cpu, !bad);
            free(mm);
        }
    /* exceptions and `none`: the host decodes them, the device rejects
     * them -- but `none` for a sparse format, its dense fallback, which
     * the device decodes as the host (both modes, the host's bits) */
    for (int acc = 0; acc < 2; acc++) {
        float *on = malloc(n * 4), *og = malloc(n * 4);
        hipress_encode_args_t an = a;
        fill(on, n, D_GRAD, 9);
        memcpy(og, on, n * 4);
        ck_assert_int_eq(hp_msg_encode(hp_kind_none, &an, nm, HP_MSG_HEADER + 4 * n, &nlen, &nf), HP_OK);
        ck_assert_int_eq(hp_msg_decode(t.kind, nm, nlen, n, on, acc, &t.p), HP_OK);
        d.accumulate = acc;
        ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, nm, nlen, og), HP_GPU_OK);
        d.accumulate = 0;
        ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
        ck_assert_int_eq(bad, !sparse);
        for (size_t i = 0; i < n && sparse; i++)
            REQUIRE_MSG(hp_f2u(on[i]) == hp_f2u(og[i]), "%s: the dense fallback, acc %d: [%zu] cpu %a gpu %a", name,
                        acc, i, on[i], og[i]);
        free(on);
        free(og);
    }
    if (sparse) {
        /* a sparse message with one exception: the host's form, which the
         * device rejects (a device sender never makes it) */
        uint8_t *xm = calloc(1, cap + 16);
        uint32_t k1 = 1, i0 = 0, pl = (uint32_t)(len - HP_MSG_HEADER) + 12;
        float big = 3e38f;
        memcpy(xm, m, HP_MSG_HEADER);
        xm[2] = HP_MSG_EXCEPT;
        memcpy(xm + 8, &pl, 4);
        memcpy(xm + HP_MSG_HEADER, &k1, 4);
        memcpy(xm + HP_MSG_HEADER + 4, &i0, 4);
        memcpy(xm + HP_MSG_HEADER + 8, &big, 4);
        memcpy(xm + HP_MSG_HEADER + 12, m + HP_MSG_HEADER, len - HP_MSG_HEADER);
        ck_assert_int_eq(hp_msg_decode(t.kind, xm, HP_MSG_HEADER + pl, n, o, 0, &t.p), HP_OK);
        ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, xm, cap + 16, o), HP_GPU_OK);
        ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
        ck_assert_int_eq(bad, 1);
        free(xm);
    } else {
        size_t xl = 0, ex = 0;
        uint8_t *xm = malloc(cap + HP_MSG_EXCEPT_BYTES);
        x[3] = 3e38f;
        x[4] = 3e38f;
        a.in = x;
        ck_assert_int_eq(hp_msg_encode_x(t.kind, &a, xm, cap + HP_MSG_EXCEPT_BYTES, HP_SRC_INPUT, &xl, &nf, &ex), HP_OK);
        ck_assert_uint_eq(ex, 2);
        ck_assert_int_eq(hp_msg_decode(t.kind, xm, xl, n, o, 0, &t.p), HP_OK);
        ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, xm, cap + HP_MSG_EXCEPT_BYTES,
                                             o), HP_GPU_OK);
        ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
        ck_assert_int_eq(bad, 1);
        /* the same input encoded on the device: the NaN message */
        e.in = x;
        ck_assert_int_eq(hp_codec_encode_msg(codec(HP_CODEC_PIECE), &e, (uint32_t)t.kind, xm, cap), HP_GPU_OK);
        ck_assert_uint_eq(hp_msg_len(xm, cap), HP_MSG_HEADER);
        ck_assert_uint_eq(xm[2], HP_MSG_NONFINITE);
        free(xm);
    }
    /* an error message (a peer's failure) is rejected: NaN follows */
    hp_msg_error(nm, n);
    ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, nm, cap, o), HP_GPU_OK);
    ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
    ck_assert_int_eq(bad, 1);
    free(m); free(nm); free(x); free(o);
}

START_TEST(test_devmsg_header)
{
    devmsg_header("q4", HP_GPU_FMT_Q);
    devmsg_header("graddrop", HP_GPU_FMT_SPARSE);
}
END_TEST

/* The failure flag turned into NaN on the device: any non-zero byte. */
START_TEST(test_nan_if)
{
    float v[100];
    uint8_t flag[8];
    for (uint32_t bytes = 1; bytes <= 8; bytes *= 2)
        for (int pos = -1; pos < (int)bytes; pos++) {
            for (int i = 0; i < 100; i++)
                v[i] = (float)i;
            memset(flag, 0, sizeof(flag));
            if (pos >= 0)
                flag[pos] = (uint8_t)(1u << (pos % 8));
            flag[bytes % 8] |= bytes < 8 ? 0x80 : 0;   /* beyond `bytes`: never read as set */
            ck_assert_int_eq(hp_codec_nan_if(codec(HP_CODEC_PIECE), v, 100, flag, bytes), HP_GPU_OK);
            for (int i = 0; i < 100; i++)
                ck_assert(pos >= 0 ? isnan(v[i]) : v[i] == (float)i);
        }
    /* the sticky word is where the module says it is */
    ck_assert_ptr_eq(hp_codec_bad_word(codec(HP_CODEC_PIECE)), (uint32_t *)codec(HP_CODEC_PIECE)->ws[HP_WS_INFO] + 2);
}
END_TEST

START_TEST(test_radix_pick)
{
    /* the digit choice against a sort, on small histograms */
    for (uint64_t s = 0; s < 200; s++) {
        uint32_t hist[16] = {0}, kk, above, d, total = 0;
        rs = s;
        for (int i = 0; i < 16; i++)
            total += hist[i] = (uint32_t)(rnd() % 4);
        if (total == 0)
            continue;
        kk = 1 + (uint32_t)(rnd() % total);
        {
            uint32_t k0 = kk, cum = 0;
            d = hp_k_radix_pick(hist, 16, &kk, &above);
            for (int i = 15; i > (int)d; i--)
                cum += hist[i];
            ck_assert_uint_eq(above, cum);
            ck_assert(cum < k0 && k0 <= cum + hist[d]);
            ck_assert_uint_eq(kk, k0 - cum);
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kern");
    TCase *t = tcase_create("encode");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_none);
    tcase_add_test(t, test_onebit);
    tcase_add_test(t, test_onebit_pieces);
    tcase_add_test(t, test_tbq);
    tcase_add_test(t, test_terngrad);
    tcase_add_test(t, test_terngrad_signed_zero);
    tcase_add_test(t, test_q);
    tcase_add_test(t, test_q_signed_zero);
    tcase_add_test(t, test_q_hook);
    tcase_add_test(t, test_sparse);
    tcase_add_test(t, test_dgc_state);
    tcase_add_test(t, test_fp16);
    tcase_add_test(t, test_bf16);
    tcase_add_test(t, test_f16_block_rule);
    tcase_add_test(t, test_reject);
    tcase_add_test(t, test_devmsg_header);
    tcase_add_test(t, test_nan_if);
    tcase_add_test(t, test_radix_pick);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
