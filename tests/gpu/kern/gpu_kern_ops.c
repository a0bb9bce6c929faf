/*
 * tests/gpu/kern/gpu_kern's buffer operations and powersgd's steps on the
 * device against the CPU, bit for bit: fold, momentum and add, ncclAvg's
 * divide, powersgd's stream-ordered steps and the NaN/Inf flag, and the
 * 16-bit conversions of a compressed ncclAllReduce (`--only ops`).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_elem.h"
#include "hp_gpu.h"
#include "hp_ops_sparse.h"
#include "hp_psgd.h"
#include "gpu_kern.h"

/* fold, momentum and add against the CPU's expressions */
void buffer_ops(size_t n)
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
void divide_ops(size_t n)
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
void psgd_ops(size_t m, size_t c, size_t r, uint64_t seed)
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
void convert_ops(size_t n)
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
