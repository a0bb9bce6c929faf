/*
 * powersgd's stream-ordered run on a device buffer (doc/powersgd.md
 * "Stream-ordered calls"): the steps of hp_psgd_run_dev with nothing on the
 * host -- no host copy of a factor, no host wait, no host branch on the
 * data.  Taken by hp_psgd_run_dev when the call's messages are device
 * memory (the backend's device-message mode: a stream-ordered compressed
 * ncclAllReduce), where the host cannot read what the ring sums.
 *
 *   Q^T = start Q (warm start or RNG)        psgd_start_q (hp_psgd_start_q)
 *   M = buffer + residual, flag |= M's NaN   add, flag_nonfinite
 *   P = M Q, P's flag float = NaN if flag    psgd_mq, fill, nan_if
 *   P summed over ranks (ring of `none`)     device messages
 *   flag |= P's NaN/Inf; sticky copied       flag_nonfinite, copy of bad_word
 *   failures agreed (the host's agreement)   int64 max in stream order
 *   P orthonormalised unless flagged         psgd_orth (hp_psgd_orthonormalise)
 *   Q_l^T = M^T P; Q summed over ranks       psgd_mtp; device messages
 *   flag |= Q's NaN/Inf; sticky copied       flag_nonfinite, copy of bad_word
 *   result = P Q^T; residual = M - P Q_l^T   psgd_recon_if (residual: flag clear)
 *   warm start = Q; NaN where flagged        copy_if, nan_if
 *
 * The host path's branches become the flag words: a NaN or Inf in any
 * rank's M travels as the NaN of P's last float (the NaN message of `none`
 * for its partition), so the summed P, the same bits on every rank, is
 * non-finite on every rank exactly where the host path's flag or its test
 * of P is set; a sum that overflowed is non-finite on every rank alike.  The
 * result is then NaN, the residual and warm start are left as they were.
 * The host path's agreement after P's sum is the same one-int64 max, in
 * stream order on device values (this rank's failure, the sticky flag of a
 * rejected message): where any rank failed or rejected part of P no rank
 * writes its residual or warm start, as on the host path; a rejected
 * message of Q's sum keeps them on the rank that rejected it.  The host
 * cannot branch on it: every rank runs both sums (a rank that failed sends
 * error messages in both), and the call's end agrees again on the device
 * and makes the result NaN (hp_nccl_async_end).
 */
#include "hp_algo.h"
#include "hp_psgd.h"
#include <math.h>

/* [0] the call's non-finite flag, [1] a copy of the codec's sticky flag,
 * [2, 3] the agreement after P's sum (an int64) */
#define FLAG_WORDS 4
#define FLAG_BYTES (4 * FLAG_WORDS)

static void dev(hp_status_t *st, int rc)
{
    if (*st == HP_OK && rc != HP_GPU_OK)
        *st = HP_ERR_DEVICE;
}

/* The sticky flag (a rejected message so far) into flag[1]. */
static void sticky(hp_status_t *st, const hp_gpu_ops_v2_t *g, void *cx, uint32_t *flag)
{
    uint32_t *word = NULL;
    dev(st, g->bad_word(cx, &word));
    if (*st == HP_OK)
        dev(st, g->copy(cx, flag + 1, word, 4));
}

/* The host path's agreement after P's sum, on the device: at a (an int64
 * of device memory) this rank's failure (1.0f's bits, high half) and the
 * sticky flag (low half), then their max over ranks in stream order.
 * Every rank takes part, failed or not. */
static void agree(hp_status_t *st, hp_call_t *call, const hp_gpu_ops_v2_t *g, void *cx, uint32_t *a)
{
    uint32_t *word = NULL;
    hp_req_t rq = HP_REQ_NULL;
    int bad = g->bad_word(cx, &word) != HP_GPU_OK;
    if (a == NULL)
        a = word;   /* (no workspace: this rank failed; its sticky pair, then unspecified) */
    bad |= a == NULL || g->fill(cx, (float *)(void *)a, *st != HP_OK ? 1.0f : 0.0f, 2) != HP_GPU_OK;
    bad |= a != word && g->copy(cx, a, word, 4) != HP_GPU_OK;
    if (bad && *st == HP_OK)
        *st = HP_ERR_DEVICE;
    if (a == NULL)
        return;
    if (HP_CHECK_OK(hp_tp_iagree(call->tp, HP_TP_INT64, a, 1, "powersgd's failure agreement after the sum of P", &rq),
                    *st))
        HP_CHECK_KEEP(hp_tp_wait(call->tp, &rq), *st);
}

/* A call that would not shrink: the plain ring, NaN as a whole where the
 * sum holds NaN or Inf (hp_psgd_run_dev's run_plain). */
static hp_status_t run_plain(hp_call_t *call, const hp_gpu_ops_v2_t *g, void *cx)
{
    uint32_t *flag = (uint32_t *)(void *)hp_call_work(call, NULL, 2);
    hp_status_t st = flag != NULL ? HP_OK : HP_ERR_NOMEM, rs;
    dev(&st, flag != NULL ? g->fill(cx, (float *)(void *)flag, 0.0f, 2) : HP_GPU_OK);
    if (st == HP_OK)
        hp_call_fold(call, 0, call->n);
    rs = hp_call_ring_sum(call, call->buf, call->n, 0, call->corrupt, st);
    if (st == HP_OK)
        st = rs;
    if (st == HP_OK) {
        dev(&st, g->flag_nonfinite(cx, call->buf, call->n, flag));
        dev(&st, g->nan_if(cx, call->buf, call->n, flag, 4));
    }
    return st;
}

hp_status_t hp_psgd_run_stream(hp_call_t *call)
{
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    const size_t n = call->n;
    void *cx = call->mem->cx;
    size_t m, c, r, pn;
    float *res = call->resid, *qwarm = NULL, *w, *dp = NULL, *dqt = NULL, *dqs = NULL;
    double *work = NULL;
    uint32_t *flag = NULL;
    int q_new = 1;
    hp_status_t st = HP_OK, rs;
    double t0;

    hp_psgd_shape(n, hp_psgd_rank(call->params), &m, &c, &r);
    if (hp_psgd_skip(n, m, c, r))
        return run_plain(call, g, cx);

    t0 = hp_now();
    if (call->rb != NULL) {
        q_new = call->rb->vec[HP_RES_AUX] == NULL || call->rb->len[HP_RES_AUX] != r * c;
        qwarm = hp_residual_vec(call->res, call->rb, HP_RES_AUX, r * c);
    }
    /* device workspace: the orthonormalisation's m r doubles, the flag
     * words, P with its flag float, Q_l^T, the summed Q^T */
    pn = m * r + 1;
    w = hp_call_work(call, NULL, 2 * m * r + FLAG_WORDS + pn + 2 * r * c);
    if (w == NULL) {
        HP_WARN("powersgd: cannot allocate the device workspace for %zu elements", n);
        st = HP_ERR_NOMEM;
    } else {
        work = (double *)(void *)w;
        flag = (uint32_t *)(void *)(w + 2 * m * r);
        dp = w + 2 * m * r + FLAG_WORDS;
        dqt = dp + pn;
        dqs = dqt + r * c;
    }
    if (st == HP_OK) {
        dev(&st, g->fill(cx, (float *)(void *)flag, 0.0f, FLAG_WORDS));
        dev(&st, g->psgd_start_q(cx, dqt, q_new ? NULL : qwarm, r, c, hp_psgd_q_key(call->seed, call->call_no)));
        if (res != NULL)
            dev(&st, g->add(cx, call->buf, res, n));
        dev(&st, g->flag_nonfinite(cx, call->buf, n, flag));
        dev(&st, g->psgd_mq(cx, call->buf, n, m, c, r, hp_psgd_tile_cols(r, c), dqt, dp));
        /* the flag travels with P (the host path's float 1.0 there): NaN */
        dev(&st, g->fill(cx, dp + m * r, 0.0f, 1));
        dev(&st, g->nan_if(cx, dp + m * r, 1, flag, 4));
    }
    call->t_encode += hp_now() - t0;

    /* (a rank that failed sends error messages in both sums: its peers run both) */
    rs = hp_call_ring_sum(call, dp, pn, 0, call->corrupt, st);
    if (st == HP_OK)
        st = rs;
    t0 = hp_now();
    agree(&st, call, g, cx, flag != NULL ? flag + 2 : NULL);
    if (st == HP_OK) {
        dev(&st, g->flag_nonfinite(cx, dp, pn, flag));
        dev(&st, g->psgd_orth(cx, dp, m, r, work, flag, FLAG_BYTES));
        dev(&st, g->psgd_mtp(cx, call->buf, n, m, c, r, dp, dqt));   /* Q_l^T */
        dev(&st, g->copy(cx, dqs, dqt, r * c * sizeof(float)));
    }
    call->t_encode += hp_now() - t0;

    rs = hp_call_ring_sum(call, dqs, r * c, 0, 0, st);
    if (st == HP_OK)
        st = rs;
    t0 = hp_now();
    if (st == HP_OK) {
        dev(&st, g->flag_nonfinite(cx, dqs, r * c, flag));
        sticky(&st, g, cx, flag);
        dev(&st, g->psgd_recon_if(cx, call->buf, res, n, c, r, dp, dqs, dqt, flag, FLAG_BYTES));
        if (qwarm != NULL)
            dev(&st, g->copy_if(cx, qwarm, dqs, r * c, flag, FLAG_BYTES));
        dev(&st, g->nan_if(cx, call->buf, n, flag, FLAG_BYTES));
    }
    call->t_decode += hp_now() - t0;
    if (HP_ST_CLASS(st) == HP_ERR_DEVICE)
        HP_WARN("powersgd stream-ordered on the device: %s", g->base.last_error());
    return st;
}
