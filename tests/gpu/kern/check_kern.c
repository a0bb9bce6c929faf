/*
 * The GPU codec on the CPU: the CUDA kernels' per-thread functions
 * (cuda/kern/hp_kern.h) run over the kernels' grid by tests/gpu/emu/hp_kern_emu.c, driven
 * by the codec the module runs (cuda/codec/hp_codec_frame.c) with host memory standing
 * in for the device.  Every encode must give the CPU compressor's bytes,
 * residual and state, bit for bit, and every decode its output, on many
 * sizes (tails, partial blocks, one and many pieces), parameters and inputs
 * (zeros, ties, signed zeros, denormals, NaN, Inf, residuals that overflow,
 * sums that overflow a float lane); malformed messages must be rejected
 * exactly when the CPU decoders reject them.
 *
 * This file: the data, the comparisons every test runs (encode, the
 * message in device memory, a malformed message) on host memory standing
 * in for the device (kern_host_dev.c), the radix pick and the suite; the formats' sweeps
 * are check_kern_fmt.c, the device messages' header and failure flag
 * check_kern_msg.c (check_kern.h between them).  kern_data.h's stream is
 * drawn from here only (once per program).
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
#include "check_kern.h"
#include "kern_host_dev.h"

/* ------------------------------------------------------------- data */

static const char *dname[D_N + 1] = {"grad", "zero", "const", "ties", "signed-zero", "denorm", "huge", "wide",
                                     "nan", "inf", "sparse-ish", "edge"};

void fill(float *x, size_t n, int kind, uint64_t seed)
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

/* --------------------------------------------------------- the runs */

/* The format as the device backend gets it: the compressor's hook. */
hp_gpu_enc_t enc_args(const kcase_t *t, size_t n)
{
    hp_gpu_enc_t e;
    memset(&e, 0, sizeof(e));
    ck_assert_int_eq(hp_comp_gpu_fmt(t->kind, &t->p, n, 0, &e.fmt), HP_OK);
    ck_assert_uint_eq(e.fmt.id, (uint32_t)t->fmt);
    e.n = n;
    return e;
}

hp_codec_t *codec(size_t piece)
{
    static hp_codec_t cx;
    if (cx.dev == NULL)
        ck_assert_int_eq(hp_codec_init(&cx, &kern_host_dev, NULL), HP_GPU_OK);
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
void compare_encode(const kcase_t *t, size_t n, int dkind, uint64_t seed)
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

kcase_t tc(const char *name, int fmt)
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

/* A malformed message: the codec (host checks, then the device's sticky
 * flag) must reject it exactly when the CPU decoder does. */
void compare_reject(const kcase_t *t, size_t n, uint64_t seed)
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

/* ------------------------------------------------------------- tests */

/* The sparse select's digit choice (the formats' tests are
 * check_kern_fmt.c, the device messages' check_kern_msg.c): here, where
 * kern_data.h's stream is. */
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

/* ------------------------------------------------------------ suite */

static Suite *suite(void)
{
    Suite *s = suite_create("kern");
    TCase *t = tcase_create("encode");
    tcase_set_timeout(t, 600);
    kern_add_fmt_tests(t);
    kern_add_msg_tests(t);
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
