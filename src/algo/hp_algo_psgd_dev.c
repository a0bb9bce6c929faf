/*
 * powersgd's run on a device buffer (a row of hp_collectives.def): the steps
 * of hp_psgd_run_cpu (src/algo/hp_algo_psgd.c; the math in
 * src/comp/hp_comp_powersgd.c) with the passes over the matrix on the GPU,
 * through the CUDA module's codec, and the small factors on the host.
 *
 *   M = buffer + residual, P = M Q           device (the CPU's summation order)
 *   P summed over ranks (ring of `none`)     host (P is m x r floats)
 *   P orthonormalised                        host (hp_psgd_orthonormalise: a
 *                                            pure function of P, which every
 *                                            rank has the same)
 *   Q_l = M^T P; Q summed over ranks         device; host
 *   result = P Q^T, residual = M - P Q_l^T   device (the CPU's order)
 *
 * What every rank decodes -- the summed P, the orthonormalised P, the summed
 * Q and the result -- has the same bits on every rank and on both paths: the
 * passes follow the CPU's summation orders, so a device rank and a host rank
 * of one call agree, and the local products could be any deterministic
 * order for identity across ranks alone (a BLAS's would do; this one keeps
 * the CPU's bits and needs nothing but the driver).
 */
#include "hp_algo.h"
#include "hp_psgd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The NaN result (the test was agreed: identical sums on every rank). */
static void fill_nan(hp_call_t *call, const hp_gpu_ops_v2_t *g)
{
    if (g->fill(call->mem->cx, call->buf, NAN, call->n) != HP_GPU_OK && call->mem->err == HP_OK)
        call->mem->err = HP_ERR_DEVICE;
    call->nonfinite++;
}

static hp_status_t run_plain(hp_call_t *call, const hp_gpu_ops_v2_t *g)
{
    hp_status_t st;
    int bad = 0;
    hp_call_fold(call, 0, call->n);
    st = hp_call_ring_sum(call, call->buf, call->n, 0, call->corrupt, HP_OK);
    if (st == HP_OK && g->nonfinite(call->mem->cx, call->buf, call->n, &bad) != HP_GPU_OK)
        return HP_ERR_DEVICE;
    if (st == HP_OK && bad)
        fill_nan(call, g);
    return st;
}

#define DEV(expr) do { if ((expr) != HP_GPU_OK) { st = HP_ERR_DEVICE; goto out; } } while (0)

hp_status_t hp_psgd_run_dev(hp_call_t *call)
{
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    const hp_ops_t *K = hp_psgd_kernels(call->params);   /* the host's share: scans */
    const size_t n = call->n;
    void *cx = call->mem != NULL ? call->mem->cx : NULL;
    size_t m, c, r, pn, T;
    float *res = call->resid, *qwarm = NULL, *p = NULL, *qt, *qs, *warm, *dp = NULL, *dqt, *dqs;
    double *work;
    int q_new = 1, bad = 0;
    hp_status_t st = HP_OK;
    double t0;

    if (g == NULL || cx == NULL)   /* no codec context (hp_mem_begin said why) */
        return hp_psgd_run_failed(call, HP_ERR_DEVICE);
    if (call->mem->msg_alloc != NULL)   /* device messages: nothing may wait */
        return hp_psgd_run_stream(call);
    hp_psgd_shape(n, hp_psgd_rank(call->params), &m, &c, &r);
    if (hp_psgd_skip(n, m, c, r))
        return run_plain(call, g);

    t0 = hp_now();
    if (call->rb != NULL) {
        q_new = call->rb->vec[HP_RES_AUX] == NULL || call->rb->len[HP_RES_AUX] != r * c;
        qwarm = hp_residual_vec(call->res, call->rb, HP_RES_AUX, r * c);
    }
    T = hp_psgd_tile_cols(r, c);
    pn = m * r + 1;
    p = hp_aligned_alloc(m * r * sizeof(double) + (pn + 3 * r * c) * sizeof(float));
    if (p == NULL || (dp = hp_call_work(call, NULL, m * r + 2 * r * c)) == NULL) {
        HP_WARN("powersgd: cannot allocate the workspace for %zu elements", n);
        free(p);
        return hp_psgd_run_failed(call, HP_ERR_NOMEM);
    }
    work = (double *)(void *)p;
    p = (float *)(work + m * r);
    qt = p + pn;
    qs = qt + r * c;
    warm = qs + r * c;
    dqt = dp + m * r;
    dqs = dqt + r * c;

    /* M = input + residual in place, P = M Q (the residual is written only
     * once the call is known to be finite) */
    if (!q_new && qwarm != NULL)
        DEV(g->copy(cx, warm, qwarm, r * c * sizeof(float)));
    hp_psgd_start_q(qt, q_new || qwarm == NULL ? NULL : warm, r, c, call->seed, call->call_no);
    DEV(g->copy(cx, dqt, qt, r * c * sizeof(float)));
    if (res != NULL)
        DEV(g->add(cx, call->buf, res, n));
    DEV(g->nonfinite(cx, call->buf, n, &bad));
    if (bad) {
        memset(p, 0, m * r * sizeof(float));
    } else {
        DEV(g->psgd_mq(cx, call->buf, n, m, c, r, T, dqt, dp));
        DEV(g->copy(cx, p, dp, m * r * sizeof(float)));
    }
    p[m * r] = bad ? 1.0f : 0.0f;
    call->t_encode += hp_now() - t0;

    /* every rank must take the same branch from here on */
    st = hp_call_ring_sum_agreed(call, p, pn, 1, call->corrupt, HP_OK);
    if (st != HP_OK)
        goto out;
    if (p[m * r] != 0.0f || K->nonfinite(p, m * r)) {
        fill_nan(call, g);
        goto out;
    }

    t0 = hp_now();
    hp_psgd_orthonormalise(p, m, r, work);
    DEV(g->copy(cx, dp, p, m * r * sizeof(float)));
    DEV(g->psgd_mtp(cx, call->buf, n, m, c, r, dp, dqt));   /* Q_l^T */
    DEV(g->copy(cx, qs, dqt, r * c * sizeof(float)));
    call->t_encode += hp_now() - t0;

    st = hp_call_ring_sum(call, qs, r * c, 1, 0, HP_OK);
    if (st != HP_OK)
        goto out;
    if (K->nonfinite(qs, r * c)) {
        /* the sum overflowed: identical on every rank, like the P test */
        fill_nan(call, g);
        goto out;
    }

    /* result = P Q^T; residual = M - P Q_l^T; next warm start = Q */
    t0 = hp_now();
    DEV(g->copy(cx, dqs, qs, r * c * sizeof(float)));
    DEV(g->psgd_recon(cx, call->buf, res, n, c, r, dp, dqs, dqt));
    if (qwarm != NULL)
        DEV(g->copy(cx, qwarm, dqs, r * c * sizeof(float)));
    call->t_decode += hp_now() - t0;
out:
    if (HP_ST_CLASS(st) == HP_ERR_DEVICE)
        HP_WARN("powersgd on the device: %s", g->base.last_error());
    free(work);
    return st;
}
