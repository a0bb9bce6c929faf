/*
 * powersgd's run on host memory (a row of hp_collectives.def): the steps of
 * one call (src/comp/hp_comp_powersgd.c has the math) with the two factors
 * summed over ranks by the exact `none` ring.  src/algo/hp_algo_psgd_dev.c
 * follows the same steps on a device buffer.
 */
#include "hp_algo.h"
#include "hp_psgd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill_nan(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = NAN;
}

/* A call that would not shrink: the plain ring.  A sum that holds NaN or Inf
 * (the same bits on every rank, so the test agrees by itself) becomes NaN as
 * a whole, as on the compressed path. */
static hp_status_t run_plain(hp_call_t *call, const hp_ops_t *K)
{
    hp_status_t st;
    /* exact: what this rank owes is sent with it */
    hp_call_fold(call, 0, call->n);
    st = hp_call_ring_sum(call, call->buf, call->n, 0, call->corrupt, HP_OK);
    if (st == HP_OK && K->nonfinite(call->buf, call->n)) {
        fill_nan(call->buf, call->n);
        call->nonfinite++;
    }
    return st;
}

/* The residual (the call's, n floats) and the warm-start Q^T (r c floats)
 * of this buffer.  Either may be NULL (no error feedback, or over the
 * store's bound); getting Q never evicts this buffer's residual. */
static void get_state(hp_call_t *call, size_t rc, float **res_p, float **q_p, int *q_new_p)
{
    *res_p = call->resid;
    *q_p = NULL;
    *q_new_p = 1;
    if (call->rb == NULL)
        return;
    *q_new_p = call->rb->vec[HP_RES_AUX] == NULL || call->rb->len[HP_RES_AUX] != rc;
    *q_p = hp_residual_vec(call->res, call->rb, HP_RES_AUX, rc);
}

hp_status_t hp_psgd_run_failed(hp_call_t *call, hp_status_t st)
{
    size_t m, c, r;
    float dummy = 0.0f;
    hp_psgd_shape(call->n, hp_psgd_rank(call->params), &m, &c, &r);
    if (hp_psgd_skip(call->n, m, c, r)) {
        /* the others run the plain ring */
        hp_call_ring_sum(call, &dummy, call->n, 1, 0, st);
        return st;
    }
    /* the others are about to sum P and its flag: take part with error
     * messages (the ring never touches the buffer of a failed call), then
     * agree */
    hp_call_ring_sum_agreed(call, &dummy, m * r + 1, 1, 0, st);
    return st;
}

hp_status_t hp_psgd_run_cpu(hp_call_t *call)
{
    const size_t n = call->n;
    const hp_ops_t *K = hp_psgd_kernels(call->params);
    size_t m, c, r, pn;
    float *res, *qwarm, *p, *qt, *qs;
    double *work;
    void *ws;
    int q_new, bad;
    hp_status_t st;
    double t0;

    hp_psgd_shape(n, hp_psgd_rank(call->params), &m, &c, &r);
    if (hp_psgd_skip(n, m, c, r))
        return run_plain(call, K);

    t0 = hp_now();
    get_state(call, r * c, &res, &qwarm, &q_new);
    /* P and one flag (ranks whose M holds NaN/Inf) travel together */
    pn = m * r + 1;
    ws = hp_aligned_alloc(HP_PSGD_SCRATCH(r) + m * r * sizeof(double) + (pn + 2 * r * c) * sizeof(float));
    if (ws == NULL) {
        HP_WARN("powersgd: cannot allocate the workspace for %zu elements", n);
        return hp_psgd_run_failed(call, HP_ERR_NOMEM);
    }
    work = (double *)((char *)ws + HP_PSGD_SCRATCH(r));
    p = (float *)(work + m * r);
    qt = p + pn;
    qs = qt + r * c;

    /* M = input + residual in place (buf becomes the result anyway; the
     * residual is written only once the call is known to be finite), P = M Q */
    hp_psgd_start_q(qt, q_new ? NULL : qwarm, r, c, call->seed, call->call_no);
    bad = hp_psgd_pass_mq(K, call->buf, res, call->buf, NULL, n, m, c, r, qt, p);
    if (bad)
        memset(p, 0, m * r * sizeof(float));
    p[m * r] = bad ? 1.0f : 0.0f;
    call->t_encode += hp_now() - t0;

    /* every rank must take the same branch from here on */
    st = hp_call_ring_sum_agreed(call, p, pn, 0, call->corrupt, HP_OK);
    if (st != HP_OK) {
        free(ws);
        return st;
    }
    /* the summed P is the same everywhere, so this test is agreed */
    if (p[m * r] != 0.0f || K->nonfinite(p, m * r)) {
        free(ws);
        fill_nan(call->buf, n);
        call->nonfinite++;
        return HP_OK;
    }

    t0 = hp_now();
    hp_psgd_orthonormalise(p, m, r, work);
    hp_psgd_pass_mtp(K, call->buf, NULL, NULL, n, m, c, r, p, qt);     /* Ql^T */
    memcpy(qs, qt, r * c * sizeof(float));
    call->t_encode += hp_now() - t0;

    st = hp_call_ring_sum(call, qs, r * c, 0, 0, HP_OK);
    if (st != HP_OK) {
        free(ws);
        return st;
    }
    if (K->nonfinite(qs, r * c)) {
        /* the sum overflowed: identical on every rank, like the P test */
        free(ws);
        fill_nan(call->buf, n);
        call->nonfinite++;
        return HP_OK;
    }

    /* result = P Q^T; residual = M - P Ql^T; next warm start = Q */
    t0 = hp_now();
    hp_psgd_pass_recon(K, p, n, m, c, r, qs, call->buf, 0, res != NULL ? qt : NULL, call->buf, NULL,
                       res, ws);
    if (qwarm != NULL)
        memcpy(qwarm, qs, r * c * sizeof(float));
    call->t_decode += hp_now() - t0;
    free(ws);
    return HP_OK;
}
