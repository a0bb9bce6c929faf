/*
 * tests/gpu/kern/gpu_kern's formats: each case (one) encodes on the CPU and on
 * the device and holds the payload, the residual and the state to the
 * CPU's bytes, the decodes of the CPU's message to its bits, the same as
 * whole messages in device memory in one stream-ordered run (devmsg), and
 * malformed messages to the CPU's verdict; sweep runs a case over sizes
 * and kinds of data, release_run and sparse_run the pieces beside the
 * sweeps.  The data (fill) is here too, drawn from kern_data.h's stream,
 * which one() also draws its malformed bytes from (kern_data.h: once per
 * program).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_gpu.h"
#include "kern_data.h"
#include "gpu_kern.h"

const char *dname[D_N] = {"grad", "ties", "signed-zero", "wide", "huge", "nan", "inf", "zero",
                          "denorm", "edge"};

void fill(float *x, size_t n, int kind, uint64_t seed)
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

static unsigned devmsg_runs;

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

kc_t kc(const char *name, int fmt)
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
void release_run(void)
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
void sparse_run(void)
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

void sweep(kc_t t, const size_t *ns, size_t nn, int all)
{
    const int halves = t.fmt == HP_GPU_FMT_FP16 || t.fmt == HP_GPU_FMT_BF16;
    if (!selected(t.name) || (small_only && ns == large))
        return;
    for (size_t s = 0; s < nn; s++)
        for (int d = 0; d < D_N; d++)
            if ((d < D_DENORM || halves) && (all || d == D_GRAD || d == D_NAN || d == D_WIDE || d == D_TIES))
                one(&t, ns[s], d, 100 * s + (uint64_t)d);
}
