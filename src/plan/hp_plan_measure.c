/*
 * The cost model's inputs, measured: the per-rank network rate and the
 * per-message latency on the communicator the algorithm runs on (every rank
 * sending at once), and the codec's encode and decode rates on the call's
 * memory, through its backend (a device buffer's codec is timed on the
 * device, not on the CPU).  Every input is agreed over all ranks with a max
 * before use, so every rank plans the same.
 */
#include "hp_plan.h"
#include "hp_backend.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Seconds for every rank of pc to send `bytes` to its right neighbour while
 * receiving from its left one: the per-rank rate under concurrent sends. */
static double ring_exchange_time(hp_transport_t *tp, void *sbuf, void *rbuf, size_t bytes, int reps)
{
    const int r = tp->rank, N = tp->size;
    double best = INFINITY;
    for (int i = 0; i < reps; i++) {
        int64_t sync = 0;
        double t0;
        /* start together: an agreement is the barrier */
        hp_tp_agree(tp, HP_TP_INT64, &sync, 1, "the plan's measurement of the network");
        t0 = hp_now();
        hp_tp_exchange(tp, sbuf, bytes, (r + 1) % N, rbuf, bytes, (r + N - 1) % N);
        best = HP_MIN(best, hp_now() - t0);
    }
    return best;
}

/* Encode and decode times of compressor `kind` on n floats of
 * gradient-like data in the call's memory, measured while every rank does
 * the same (so shared cores count).  Pessimistic (1 s) when memory is
 * short. */
static void codec_times(const hp_plan_comm_t *pc, size_t n, double *enc_t, double *dec_t)
{
    hp_mem_t *m = pc->mem;
    hp_comp_t *c = hp_comp_get(pc->kind);
    size_t cap = hp_msg_max_bytes(pc->kind, n, pc->params) + HP_MSG_EXCEPT_BYTES;
    size_t extra = m->ops->work_host_bytes(3 * n);
    float *host = hp_aligned_alloc(n * sizeof(float) + extra);
    void *msg = m->ops->scratch != NULL ? m->ops->scratch(m, cap) : hp_aligned_alloc(cap);
    hp_status_t err0 = m->err;
    float *v = host != NULL ? m->ops->work(m, (char *)host + n * sizeof(float), 3 * n) : NULL;

    *enc_t = *dec_t = 1.0;
    if (v != NULL && msg != NULL) {
        float *res = v + n, *out = v + 2 * n;
        uint64_t x = 88172645463325252ULL;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            host[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5) * 1e-2f;
        }
        m->ops->copy(m, v, host, n * sizeof(float));
        memset(host, 0, n * sizeof(float));
        m->ops->copy(m, res, host, n * sizeof(float));
        m->ops->copy(m, out, host, n * sizeof(float));
        *enc_t = *dec_t = INFINITY;
        for (int rep = 0; rep < 2; rep++) {
            hipress_encode_args_t a;
            size_t len = 0, except = 0;
            int nonfinite = 0;
            double t0 = hp_now();
            memset(&a, 0, sizeof(a));
            a.in = v;
            a.n = n;
            a.params = pc->params;
            a.residual = (c->flags & HIPRESS_COMP_EF) ? res : NULL;
            a.state = (c->flags & HIPRESS_COMP_MOMENTUM) ? out : NULL;
            if (m->ops->encode(m, pc->kind, &a, HP_SRC_INPUT, NULL, msg, cap, &len, &nonfinite, &except) != HP_OK ||
                m->ops->sync(m) != HP_OK)
                break;
            *enc_t = HP_MIN(*enc_t, hp_now() - t0);
            t0 = hp_now();
            m->ops->decode(m, pc->kind, msg, len, n, out, 1, pc->params);
            m->ops->sync(m);
            *dec_t = HP_MIN(*dec_t, hp_now() - t0);
        }
        if (!(*enc_t < INFINITY))
            *enc_t = *dec_t = 1.0;
    }
    /* a failure here is the measurement's (pessimistic rates), not the call's */
    m->err = err0;
    if (m->ops->scratch == NULL)
        free(msg);
    free(host);
}

/* Model inputs, measured by the ranks of `ac` (the communicator the
 * algorithm runs on) and agreed with a max over them. */
static hp_status_t measure_inputs(const hp_plan_comm_t *pc, hp_transport_t *ac, hp_plan_inputs_t *in)
{
    const int X = 1 << 20;
    const size_t n = 1 << 21;   /* 8 MiB: out of cache, as real gradients are */
    double t[4], tmax[4];
    double gbps = hp_cfg_d(pc->cfg, HP_S_NET_GBPS), lat = hp_cfg_d(pc->cfg, HP_S_NET_LATENCY_US);
    double skew = hp_cfg_d(pc->cfg, HP_S_TEST_PLAN_SKEW);
    int r = ac->rank;
    void *sb = calloc(2, (size_t)X);
    hp_status_t st;

    if (sb == NULL)
        return HP_ERR_NOMEM;
    t[0] = lat > 0 ? lat * 1e-6 : ring_exchange_time(ac, sb, (char *)sb + X, 1, 10);
    t[1] = gbps > 0 ? (double)X * 8 / (gbps * 1e9) + t[0]
                    : ring_exchange_time(ac, sb, (char *)sb + X, X, 3);
    free(sb);
    codec_times(pc, n, &t[2], &t[3]);
    for (int i = 0; i < 4; i++)
        t[i] *= 1.0 + skew * r;       /* test knob: ranks measure differently */
    memcpy(tmax, t, sizeof(t));
    HP_CHECK_GOTO(hp_tp_agree(ac, HP_TP_DOUBLE, tmax, 4, "the plan's agreement on its measurements"), st, out);
    in->alpha = tmax[0];
    in->bw = (double)X / HP_MAX(tmax[1] - tmax[0], 1e-9);
    in->enc_rate = 4.0 * (double)n / HP_MAX(tmax[2], 1e-9);
    in->dec_rate = 4.0 * (double)n / HP_MAX(tmax[3], 1e-9);
    HP_INFO("cost model inputs (%s memory): %.3g GB/s per rank, %.1f us per message, encode %.3g GB/s, "
            "decode %.3g GB/s", pc->mem->ops->name, in->bw / 1e9, in->alpha * 1e6, in->enc_rate / 1e9,
            in->dec_rate / 1e9);
out:
    return st;
}

hp_status_t hp_plan_ensure_inputs(hp_planner_t *pl, const hp_plan_comm_t *pc, int hier)
{
    hp_status_t st = HP_OK;
    const int mk = hp_plan_key(pc);
    hp_transport_t *ac = pc->algo[hier];
    hp_plan_inputs_t in;
    double v[5] = {0, 0, 0, 0, 0}, vmax[5];

    if (pl->have_inputs[mk][hier] && pl->inputs_kind[mk][hier] == pc->kind)
        return HP_OK;
    memset(&in, 0, sizeof(in));
    if (ac != NULL)
        st = measure_inputs(pc, ac, &in);
    if (hier) {
        void *sb = calloc(2, 1 << 20);
        if (sb != NULL) {
            double t = ring_exchange_time(pc->node, sb, (char *)sb + (1 << 20), 1 << 20, 3);
            v[4] = t > 0 ? t : 1e-9;
            free(sb);
        } else {
            st = HP_ERR_NOMEM;
        }
    }
    /* agree: the slowest measurement of every rank (ranks that measured
     * nothing, non-leaders, contribute zeros), and any failure */
    v[0] = in.bw > 0 ? 1.0 / in.bw : 0;
    v[1] = in.alpha;
    v[2] = in.enc_rate > 0 ? 1.0 / in.enc_rate : 0;
    v[3] = in.dec_rate > 0 ? 1.0 / in.dec_rate : 0;
    {
        int fail = st != HP_OK;
        HP_CHECK_GOTO(hp_tp_agree_flag(pc->all, &fail), st, out);
        if (fail)
            return HP_ERR_MPI;
        memcpy(vmax, v, sizeof(v));
        HP_CHECK_GOTO(hp_tp_agree(pc->all, HP_TP_DOUBLE, vmax, 5, "the plan's agreement on its measurements"), st,
                      out);
    }
    pl->inputs[mk][hier].bw = 1.0 / HP_MAX(vmax[0], 1e-12);
    pl->inputs[mk][hier].alpha = vmax[1];
    pl->inputs[mk][hier].enc_rate = 1.0 / HP_MAX(vmax[2], 1e-12);
    pl->inputs[mk][hier].dec_rate = 1.0 / HP_MAX(vmax[3], 1e-12);
    if (hier) {
        pl->intra_bw = (double)(1 << 20) / HP_MAX(vmax[4], 1e-9);
        HP_INFO("hierarchy: %.3g GB/s per rank inside a node", pl->intra_bw / 1e9);
    }
    pl->have_inputs[mk][hier] = 1;
    pl->inputs_kind[mk][hier] = pc->kind;
out:
    return st;
}
