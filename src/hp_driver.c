/*
 * The compressed allreduce of one eligible call: plan (measure, model,
 * explore, fix), hierarchy, algorithm, failure agreement, verification and
 * statistics.
 */
#include "hp_state.h"
#include "hp_algo.h"
#include "hp_comp.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *scratch_cb(void *ctx, size_t bytes)
{
    hp_comm_state_t *cs = (hp_comm_state_t *)ctx;
    /* test knob: this rank's message buffers cannot be had (an error message
     * still fits, so the protocol can complete) */
    if (hp_cfg_i(&cs->cfg, HP_S_TEST_NOMEM) == cs->rank && cs->nomem_call != cs->ncalls + 1) {
        cs->nomem_call = cs->ncalls + 1;    /* the first request of each call fails */
        return NULL;
    }
    return hp_comm_scratch(cs, bytes);
}

static int size_class(size_t bytes)
{
    int c = 0;
    while (c + 1 < HP_PLAN_CLASSES && ((size_t)1 << (c + 1)) <= bytes)
        c++;
    return c;
}

/* ------------------------------------------------------------ measure */

/* Seconds for every rank of pc to send `bytes` to its right neighbour while
 * receiving from its left one: the per-rank rate under concurrent sends. */
static double ring_exchange_time(MPI_Comm pc, void *sbuf, void *rbuf, int bytes, int reps)
{
    int r, N;
    double best = INFINITY;
    PMPI_Comm_rank(pc, &r);
    PMPI_Comm_size(pc, &N);
    for (int i = 0; i < reps; i++) {
        double t0;
        PMPI_Barrier(pc);
        t0 = PMPI_Wtime();
        PMPI_Sendrecv(sbuf, bytes, MPI_BYTE, (r + 1) % N, 7002, rbuf, bytes, MPI_BYTE,
                      (r + N - 1) % N, 7002, pc, MPI_STATUS_IGNORE);
        best = HP_MIN(best, PMPI_Wtime() - t0);
    }
    return best;
}

/* Encode and decode rates of compressor `kind` on 8 MiB of gradient-like data,
 * measured while every rank does the same (so shared cores count). */
static void codec_times(hp_comm_state_t *cs, int kind, size_t n, double *enc_t, double *dec_t)
{
    hp_comp_t *c = hp_comp_get(kind);
    size_t cap = hp_msg_max_bytes(kind, n, &cs->params);
    float *v = hp_aligned_alloc(3 * n * sizeof(float));
    void *msg = hp_aligned_alloc(cap);
    *enc_t = *dec_t = 1.0;   /* pessimistic when memory is short */
    if (v != NULL && msg != NULL) {
        float *res = v + n, *out = v + 2 * n;
        hipress_encode_args_t a;
        uint64_t x = 88172645463325252ULL;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            v[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5) * 1e-2f;
        }
        memset(res, 0, 2 * n * sizeof(float));
        *enc_t = *dec_t = INFINITY;
        for (int rep = 0; rep < 2; rep++) {
            size_t len = 0;
            int nonfinite = 0;
            double t0 = hp_now();
            memset(&a, 0, sizeof(a));
            a.in = v;
            a.n = n;
            a.params = &cs->params;
            a.residual = (c->flags & HIPRESS_COMP_EF) ? res : NULL;
            a.state = (c->flags & HIPRESS_COMP_MOMENTUM) ? out : NULL;
            if (hp_msg_encode(kind, &a, msg, cap, &len, &nonfinite) != HP_OK)
                break;
            *enc_t = HP_MIN(*enc_t, hp_now() - t0);
            t0 = hp_now();
            hp_msg_decode(kind, msg, len, n, out, 1, &cs->params);
            *dec_t = HP_MIN(*dec_t, hp_now() - t0);
        }
    }
    free(v);
    free(msg);
}

/* Model inputs, measured by the ranks of `pc` (the communicator the
 * algorithm runs on) and agreed with a max over them. */
static hp_status_t measure_inputs(hp_comm_state_t *cs, MPI_Comm pc, hp_plan_inputs_t *in)
{
    const int X = 1 << 20;
    const size_t n = 1 << 21;   /* 8 MiB: out of cache, as real gradients are */
    double t[4], tmax[4];
    double gbps = hp_cfg_d(&cs->cfg, HP_S_NET_GBPS), lat = hp_cfg_d(&cs->cfg, HP_S_NET_LATENCY_US);
    double skew = hp_cfg_d(&cs->cfg, HP_S_TEST_PLAN_SKEW);
    int r;
    void *sb = calloc(2, (size_t)X);

    if (sb == NULL)
        return HP_ERR_NOMEM;
    PMPI_Comm_rank(pc, &r);
    t[0] = lat > 0 ? lat * 1e-6 : ring_exchange_time(pc, sb, (char *)sb + X, 1, 10);
    t[1] = gbps > 0 ? (double)X * 8 / (gbps * 1e9) + t[0]
                    : ring_exchange_time(pc, sb, (char *)sb + X, X, 3);
    free(sb);
    codec_times(cs, cs->kind, n, &t[2], &t[3]);
    for (int i = 0; i < 4; i++)
        t[i] *= 1.0 + skew * r;       /* test knob: ranks measure differently */
    if (PMPI_Allreduce(t, tmax, 4, MPI_DOUBLE, MPI_MAX, pc) != MPI_SUCCESS)
        return HP_ERR_MPI;
    in->alpha = tmax[0];
    in->bw = (double)X / HP_MAX(tmax[1] - tmax[0], 1e-9);
    in->enc_rate = 4.0 * (double)n / HP_MAX(tmax[2], 1e-9);
    in->dec_rate = 4.0 * (double)n / HP_MAX(tmax[3], 1e-9);
    HP_INFO("cost model inputs: %.3g GB/s per rank, %.1f us per message, encode %.3g GB/s, decode %.3g GB/s",
            in->bw / 1e9, in->alpha * 1e6, in->enc_rate / 1e9, in->dec_rate / 1e9);
    return HP_OK;
}

/* The communicator the algorithm runs on (leaders in hierarchical mode). */
static MPI_Comm algo_comm(const hp_comm_state_t *cs)
{
    return cs->hier ? cs->leaders : cs->priv;
}

static hp_status_t ensure_inputs(hp_comm_state_t *cs)
{
    hp_status_t st = HP_OK;
    if (cs->have_inputs && cs->inputs_kind == cs->kind)
        return HP_OK;
    if (algo_comm(cs) != MPI_COMM_NULL)
        st = measure_inputs(cs, algo_comm(cs), &cs->inputs);
    if (cs->hier) {
        /* node members take their leader's (agreed) inputs */
        int ok = st == HP_OK, all;
        PMPI_Bcast(&cs->inputs, sizeof(cs->inputs), MPI_BYTE, 0, cs->node);
        PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, cs->priv);
        st = all ? HP_OK : HP_ERR_MPI;
    }
    if (st == HP_OK) {
        cs->have_inputs = 1;
        cs->inputs_kind = cs->kind;
    }
    return st;
}

static int algo_size(const hp_comm_state_t *cs)
{
    int n = cs->size;
    if (cs->hier) {
        n = 0;
        if (cs->leaders != MPI_COMM_NULL)
            PMPI_Comm_size(cs->leaders, &n);
        PMPI_Bcast(&n, 1, MPI_INT, 0, cs->node);
    }
    return n;
}

/* The plan for this call; *explore_p receives the plan slot being explored
 * (time the call and report with plan_report), or NULL. */
static hp_status_t plan_for(hp_comm_state_t *cs, size_t count, hp_plan_t *plan_p,
                            hp_plan_slot_t **explore_p)
{
    int algo = (int)hp_cfg_i(&cs->cfg, HP_S_ALGO);
    size_t part_bytes = (size_t)hp_cfg_i(&cs->cfg, HP_S_PARTITION_BYTES);
    int N;
    hp_plan_slot_t *ps = &cs->plans[size_class(count * sizeof(float))];
    hp_status_t st;

    *explore_p = NULL;
    if (ps->state == 2) {
        *plan_p = ps->chosen;
        return HP_OK;
    }
    N = algo_size(cs);
    if (N < 2) {
        /* a single node: the exact node reduction is the whole job */
        *plan_p = (hp_plan_t){1, HP_ALGO_RING, 1, 0};
        return HP_OK;
    }
    if (algo != HP_ALGO_AUTO && part_bytes > 0) {
        *plan_p = hp_plan_choose(&cs->inputs, cs->kind, &cs->params, count, N, algo, part_bytes, 0);
        return HP_OK;
    }
    if ((st = ensure_inputs(cs)) != HP_OK)
        return st;
    if (algo != HP_ALGO_AUTO) {
        ps->chosen = hp_plan_choose(&cs->inputs, cs->kind, &cs->params, count, N, algo, part_bytes, 0);
        ps->state = 2;
        *plan_p = ps->chosen;
        return HP_OK;
    }
    if (ps->state == 0 && (hp_comp_get(cs->kind)->flags & HIPRESS_COMP_COLLECTIVE)) {
        /* a collective compressor (powersgd) runs its own exchanges: the
         * only choice is whether to use it at all */
        ps->ncand = 2;
        ps->cand[0] = (hp_plan_t){0, HP_ALGO_RING, 1, 0};
        ps->cand[1] = (hp_plan_t){1, HP_ALGO_AUTO, 1, 0};
        ps->trial = 0;
        ps->state = 1;
    }
    if (ps->state == 0) {
        /* candidates: plain (T0 is measured, not modelled), then the
         * algorithms in the model's order while within HP_PLAN_PRUNE of its
         * best: the model prunes and sets K, the measurement decides */
        hp_plan_t best = hp_plan_choose(&cs->inputs, cs->kind, &cs->params, count, N, HP_ALGO_AUTO, part_bytes, 0);
        ps->ncand = 0;
        ps->cand[ps->ncand++] = (hp_plan_t){0, HP_ALGO_RING, 1, 0};
        for (int k = 0; ps->ncand < HP_PLAN_CANDIDATES; k++) {
            hp_plan_t p = hp_plan_choose(&cs->inputs, cs->kind, &cs->params, count, N, HP_ALGO_AUTO, part_bytes, k);
            if (!p.compress || p.t_model > HP_PLAN_PRUNE * best.t_model)
                break;
            ps->cand[ps->ncand++] = p;
        }
        ps->trial = 0;
        ps->state = 1;
    }
    *plan_p = ps->cand[ps->trial / HP_PLAN_REPS];
    *explore_p = ps;
    return HP_OK;
}

_Static_assert(HP_PLAN_REPS == 3, "median3 takes three trials");
static double median3(const double *v)
{
    double a = v[0], b = v[1], c = v[2];
    if (a > b) { double t = a; a = b; b = t; }
    if (b > c) b = c;
    return a > b ? a : b;
}

/* Record the agreed time of an exploration call; fix the plan when done. */
static void plan_report(hp_comm_state_t *cs, hp_plan_slot_t *ps, double t, size_t count)
{
    double tmax = t;
    int i = ps->trial / HP_PLAN_REPS;
    PMPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, cs->priv);
    double med[HP_PLAN_CANDIDATES];
    ps->t[i][ps->trial % HP_PLAN_REPS] = tmax;
    if (++ps->trial < ps->ncand * HP_PLAN_REPS)
        return;
    /* the median of each candidate's calls: robust to a first call that
     * sets up connections and to a lucky one alike */
    int best = 0;
    for (int k = 0; k < ps->ncand; k++) {
        med[k] = median3(ps->t[k]);
        if (med[k] < med[best])
            best = k;
    }
    ps->chosen = ps->cand[best];
    ps->state = 2;
    {
        char a[32], line[64];
        int c = size_class(count * sizeof(float));
        hp_plan_str(&ps->chosen, a, sizeof(a));
        snprintf(line, sizeof(line), "%s (%.0f us; plain %.0f us)", a, med[best] * 1e6, med[0] * 1e6);
        HP_INFO("plan for %zu bytes: %s", count * sizeof(float), line);
        pthread_mutex_lock(&hp_g.stats.stats_lock);
        snprintf(hp_g.stats.plan_text[c], sizeof(hp_g.stats.plan_text[c]), "%s", line);
        pthread_mutex_unlock(&hp_g.stats.stats_lock);
    }
}

/* ------------------------------------------------------------- verify */

/* HIPRESS_VERIFY: relative error against the exact sum and cross-rank identity. */
static void verify_result(hp_comm_state_t *cs, const float *exact, const float *got, size_t n)
{
    double num = 0, den = 0, rel;
    uint64_t h[2], hout[2];

    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)exact[i];
        num += d * d;
        den += (double)exact[i] * (double)exact[i];
    }
    rel = den > 0 ? sqrt(num / den) : sqrt(num);
    h[0] = hp_hash_bytes(HP_HASH_INIT, got, n * sizeof(float));
    h[1] = ~h[0];
    PMPI_Allreduce(h, hout, 2, MPI_UINT64_T, MPI_MAX, cs->priv);
    atomic_fetch_add_explicit(&hp_g.stats.verify_calls, 1, memory_order_relaxed);
    if (hout[0] != ~hout[1])
        atomic_fetch_add_explicit(&hp_g.stats.verify_mismatch, 1, memory_order_relaxed);
    pthread_mutex_lock(&hp_g.stats.stats_lock);
    if (!(rel <= hp_g.stats.max_rel_err))
        hp_g.stats.max_rel_err = rel;
    pthread_mutex_unlock(&hp_g.stats.stats_lock);
    HP_INFO("verify: %zu elements, relative error %.3g, identical on all ranks: %s", n, rel,
            hout[0] == ~hout[1] ? "yes" : "NO");
}

/* ------------------------------------------------------------- driver */

static hp_status_t run_algo(hp_call_t *call, const hp_plan_t *plan)
{
    hp_comp_t *c = hp_comp_get(call->kind);
    int slot = HP_ALGO_AUTO;   /* counts collective compressors */
    hp_status_t st;

    if (c->flags & HIPRESS_COMP_COLLECTIVE) {
        st = hp_algo_collective(call);
    } else {
        slot = plan->algo;
        switch (plan->algo) {
        case HP_ALGO_PS:        st = hp_algo_ps(call); break;
        case HP_ALGO_TREE:      st = hp_algo_tree(call); break;
        case HP_ALGO_ALLGATHER: st = hp_algo_allgather(call); break;
        default:                st = hp_algo_ring(call); slot = HP_ALGO_RING; break;
        }
    }
    atomic_fetch_add_explicit(&hp_g.stats.algo_calls[slot], 1, memory_order_relaxed);
    return st;
}

/* Elements per partition for K partitions of the algorithm's unit. */
static size_t part_elems(const hp_plan_t *plan, size_t n, int N)
{
    size_t unit = (plan->algo == HP_ALGO_RING || plan->algo == HP_ALGO_PS) ? (n + (size_t)N - 1) / (size_t)N : n;
    size_t K = HP_MAX(plan->parts, 1);
    return HP_MAX((unit + K - 1) / K, 1);
}

int hp_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm,
                            hp_comm_state_t *cs)
{
    hp_transport_t tp;
    hp_call_t call;
    hp_plan_t plan;
    hp_plan_slot_t *explore = NULL;
    hp_status_t st;
    float *exact = NULL;
    int failed, is_algo_rank;
    double t0 = hp_now();
    MPI_Comm ac;

    st = hp_comm_state_ready(cs, comm);
    if (st != HP_OK) {
        HP_WARN("cannot set up hipress on a communicator: %s", hipress_status_string(st));
        goto err;
    }
    st = plan_for(cs, count, &plan, &explore);
    if (st != HP_OK)
        goto err;
    if (!plan.compress) {
        int rc = PMPI_Allreduce(sendbuf, recvbuf, (int)count, MPI_FLOAT, MPI_SUM, comm);
        atomic_fetch_add_explicit(&hp_g.stats.plan_plain, 1, memory_order_relaxed);
        if (explore != NULL && rc == MPI_SUCCESS)
            plan_report(cs, explore, hp_now() - t0, count);
        return rc;
    }

    if (sendbuf != MPI_IN_PLACE)
        memcpy(recvbuf, sendbuf, count * sizeof(float));
    if (hp_cfg_i(&cs->cfg, HP_S_VERIFY)) {
        exact = malloc(count * sizeof(float));
        if (exact == NULL || PMPI_Allreduce(recvbuf, exact, (int)count, MPI_FLOAT, MPI_SUM, cs->priv) != MPI_SUCCESS) {
            free(exact);
            exact = NULL;
        }
    }
    /* hierarchical: exact sum on each node's leader first */
    if (cs->hier) {
        int nr;
        PMPI_Comm_rank(cs->node, &nr);
        if (PMPI_Reduce(nr == 0 ? MPI_IN_PLACE : recvbuf, nr == 0 ? recvbuf : NULL, (int)count,
                        MPI_FLOAT, MPI_SUM, 0, cs->node) != MPI_SUCCESS)
            st = HP_ERR_MPI;
        atomic_fetch_add_explicit(&hp_g.stats.hier_calls, 1, memory_order_relaxed);
    }
    ac = algo_comm(cs);
    is_algo_rank = ac != MPI_COMM_NULL;
    memset(&call, 0, sizeof(call));
    call.err = st;
    if (is_algo_rank) {
        int acsize;
        PMPI_Comm_size(ac, &acsize);
        hp_tp_init(&tp, ac);
        call.tp = &tp;
        call.buf = (float *)recvbuf;
        call.n = count;
        call.kind = cs->kind;
        call.params = &cs->params;
        call.res = cs->res;
        call.res_addr = (uintptr_t)recvbuf;
        call.res_count = count;
        call.seed = (uint64_t)hp_cfg_i(&cs->cfg, HP_S_SEED);
        call.call_no = cs->ncalls;
        call.part_elems = part_elems(&plan, count, acsize);
        call.corrupt = hp_cfg_i(&cs->cfg, HP_S_TEST_CORRUPT) == cs->rank;
        call.scratch = scratch_cb;
        call.scratch_ctx = cs;
        if (acsize > 1 && call.err == HP_OK)
            st = run_algo(&call, &plan);
    } else {
        tp.bytes_sent = 0;
    }
    cs->ncalls++;
    if (cs->hier && PMPI_Bcast(recvbuf, (int)count, MPI_FLOAT, 0, cs->node) != MPI_SUCCESS)
        st = HP_ERR_MPI;

    /* failure protocol: every rank learns whether any rank failed */
    failed = st != HP_OK;
    if (PMPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, cs->priv) != MPI_SUCCESS)
        failed = 1;
    if (failed && st == HP_OK)
        st = HP_ERR_PEER;
    if (exact != NULL && !failed)
        verify_result(cs, exact, (float *)recvbuf, count);
    free(exact);
    if (explore != NULL && !failed)
        plan_report(cs, explore, hp_now() - t0, count);

    hp_comm_state_sync_stats(cs);
    atomic_fetch_add_explicit(&hp_g.stats.compressed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_raw, count * sizeof(float), memory_order_relaxed);
    if (is_algo_rank) {
        atomic_fetch_add_explicit(&hp_g.stats.bytes_wire, tp.bytes_sent, memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.nonfinite, call.nonfinite, memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.ns_encode, (unsigned long long)(call.t_encode * 1e9), memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.ns_decode, (unsigned long long)(call.t_decode * 1e9), memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.ns_wait, (unsigned long long)(tp.t_wait * 1e9), memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&hp_g.stats.ns_total, (unsigned long long)((hp_now() - t0) * 1e9), memory_order_relaxed);
    if (st == HP_OK)
        return MPI_SUCCESS;
err:
    atomic_fetch_add_explicit(&hp_g.stats.errors, 1, memory_order_relaxed);
    HP_WARN("compressed allreduce of %zu floats failed: %s", count, hipress_status_string(st));
    PMPI_Comm_call_errhandler(comm, hp_g.err_code);
    return hp_g.err_code;
}

HP_EXPORT int hipress_comm_plan(MPI_Comm comm, size_t bytes, char *buf, size_t len)
{
    hp_comm_state_t *cs = hp_comm_state(comm, 0);
    hp_plan_slot_t *ps;
    if (buf == NULL || len == 0)
        return HIPRESS_ERR_INVALID;
    if (cs == NULL) {
        snprintf(buf, len, "none");
        return HIPRESS_OK;
    }
    ps = &cs->plans[size_class(bytes)];
    if (ps->state == 2)
        hp_plan_str(&ps->chosen, buf, len);
    else
        snprintf(buf, len, ps->state == 1 ? "exploring" : "none");
    return HIPRESS_OK;
}
