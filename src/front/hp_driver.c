/*
 * The compressed allreduce of one eligible call: plan (measure, model,
 * explore, fix), hierarchy, algorithm, failure agreement, verification and
 * statistics.
 */
#include "hp_state.h"
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_ops.h"
#include "hp_watchdog.h"
#include <math.h>
#include <signal.h>
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

/* The communicator the algorithm runs on in mode `hier` (1: the inter-node
 * one; MPI_COMM_NULL on a rank that is not a node leader in leaders mode). */
static MPI_Comm algo_comm(const hp_comm_state_t *cs, int hier)
{
    if (!hier)
        return cs->priv;
    return cs->hier_2d ? cs->cross : cs->leaders;
}

/* Ranks the algorithm of mode `hier` runs on. */
static int algo_size(const hp_comm_state_t *cs, int hier)
{
    return hier ? cs->nodes : cs->size;
}

/* The cost model's inputs of mode `hier`, measured once per compressor and
 * agreed over every rank of the communicator (so every rank plans the
 * same): flat on the private communicator; hierarchical on the inter-node
 * communicators (every cross communicator at once, as the calls run), plus
 * the rate inside a node. */
static hp_status_t ensure_inputs(hp_comm_state_t *cs, int hier)
{
    hp_status_t st = HP_OK;
    MPI_Comm ac = algo_comm(cs, hier);
    hp_plan_inputs_t in;
    double v[5] = {0, 0, 0, 0, 0}, vmax[5];

    if (cs->have_inputs[hier] && cs->inputs_kind[hier] == cs->kind)
        return HP_OK;
    memset(&in, 0, sizeof(in));
    if (ac != MPI_COMM_NULL)
        st = measure_inputs(cs, ac, &in);
    if (hier) {
        void *sb = calloc(2, 1 << 20);
        if (sb != NULL) {
            double t = ring_exchange_time(cs->node, sb, (char *)sb + (1 << 20), 1 << 20, 3);
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
        double fail = st != HP_OK, anyfail = 0;
        if (PMPI_Allreduce(&fail, &anyfail, 1, MPI_DOUBLE, MPI_MAX, cs->priv) != MPI_SUCCESS || anyfail > 0)
            return HP_ERR_MPI;
        if (PMPI_Allreduce(v, vmax, 5, MPI_DOUBLE, MPI_MAX, cs->priv) != MPI_SUCCESS)
            return HP_ERR_MPI;
    }
    cs->inputs[hier].bw = 1.0 / HP_MAX(vmax[0], 1e-12);
    cs->inputs[hier].alpha = vmax[1];
    cs->inputs[hier].enc_rate = 1.0 / HP_MAX(vmax[2], 1e-12);
    cs->inputs[hier].dec_rate = 1.0 / HP_MAX(vmax[3], 1e-12);
    if (hier) {
        cs->intra_bw = (double)(1 << 20) / HP_MAX(vmax[4], 1e-9);
        HP_INFO("hierarchy: %.3g GB/s per rank inside a node", cs->intra_bw / 1e9);
    }
    cs->have_inputs[hier] = 1;
    cs->inputs_kind[hier] = cs->kind;
    return HP_OK;
}

/* The elements one rank's algorithm handles in mode `hier`: its node's
 * shard in 2D mode, the whole buffer otherwise. */
static size_t algo_count(const hp_comm_state_t *cs, int hier, size_t count)
{
    return hier && cs->hier_2d ? (count + (size_t)cs->node_size - 1) / (size_t)cs->node_size : count;
}

/* Modelled seconds of the exact exchanges inside a node in mode `hier`:
 * reduce-scatter and allgather (2D), or reduce and broadcast (leaders). */
static double intra_time(const hp_comm_state_t *cs, int hier, size_t count)
{
    double S = 4.0 * (double)count, k = (double)cs->node_size;
    if (!hier || cs->intra_bw <= 0)
        return 0;
    return (cs->hier_2d ? 2.0 * (k - 1) / k * S : 2.0 * S) / cs->intra_bw;
}

/* The quality budget of this communicator's compressor (0: no limit). */
static int comm_budget(const hp_comm_state_t *cs)
{
    return hp_plan_budget(cs->kind, hp_cfg_i(&cs->cfg, HP_S_MAX_STAGES));
}

/* A fixed algorithm beyond the quality budget still runs: say so once. */
static void warn_budget(hp_comm_state_t *cs, const hp_plan_t *plan)
{
    static atomic_int warned;   /* once per process: every communicator would say the same */
    int budget = comm_budget(cs);
    if (plan->compress && budget > 0 && plan->stages > budget && !(cs->warned & HP_WARNED_BUDGET)) {
        cs->warned |= HP_WARNED_BUDGET;
        if (cs->rank == 0 && atomic_exchange(&warned, 1) == 0)
            HP_WARN("HIPRESS_ALGO=%s puts each element through %d lossy stages with %s, over the quality "
                    "budget of %d (HIPRESS_MAX_STAGES; doc/accuracy.md): it runs, but accuracy may suffer",
                    hp_algo_name(plan->algo), plan->stages, hp_comp_get(cs->kind)->name, budget);
    }
}

/* The hierarchical modes a call may use under the settings: bit 0 flat,
 * bit 1 hierarchical. */
static int plan_modes(const hp_comm_state_t *cs)
{
    long long h = hp_cfg_i(&cs->cfg, HP_S_HIERARCHICAL);
    if (!cs->hier_avail || h == HP_HIER_OFF || hp_comp_is_collective(cs->kind))
        return 1;   /* (a collective compressor runs its own exchanges, flat) */
    return h == HP_HIER_ON ? 2 : 3;
}

/* Insert p into the candidates by modelled time (plain, t_model 0, first). */
static void add_candidate(hp_plan_slot_t *ps, hp_plan_t p)
{
    int i;
    if (ps->ncand >= HP_PLAN_CANDIDATES) {
        if (p.t_model >= ps->cand[ps->ncand - 1].t_model)
            return;
        ps->ncand--;
    }
    i = ps->ncand++;
    while (i > 0 && ps->cand[i - 1].compress && ps->cand[i - 1].t_model > p.t_model) {
        ps->cand[i] = ps->cand[i - 1];
        i--;
    }
    ps->cand[i] = p;
}

/* The plan for this call; *explore_p receives the plan slot being explored
 * (time the call and report with plan_report), or NULL. */
static hp_status_t plan_for(hp_comm_state_t *cs, size_t count, hp_plan_t *plan_p,
                            hp_plan_slot_t **explore_p)
{
    int algo = (int)hp_cfg_i(&cs->cfg, HP_S_ALGO);
    size_t part_bytes = (size_t)hp_cfg_i(&cs->cfg, HP_S_PARTITION_BYTES);
    int allow_plain = (int)hp_cfg_i(&cs->cfg, HP_S_ALLOW_PLAIN);
    int budget = comm_budget(cs);
    int modes = plan_modes(cs);
    hp_plan_slot_t *ps = &cs->plans[size_class(count * sizeof(float))];
    hp_status_t st;

    *explore_p = NULL;
    if (ps->state == 2) {
        *plan_p = ps->chosen;
        return HP_OK;
    }
    if (hp_comp_is_collective(cs->kind) && (algo != HP_ALGO_AUTO || !allow_plain)) {
        /* a collective compressor runs its own exchanges whatever HIPRESS_ALGO says */
        ps->chosen = (hp_plan_t){1, HP_ALGO_AUTO, 1, 0, hp_plan_stages(HP_ALGO_AUTO, cs->size), 0};
        ps->state = 2;
        *plan_p = ps->chosen;
        return HP_OK;
    }
    if (algo != HP_ALGO_AUTO && part_bytes > 0 && modes != 3) {
        /* fixed entirely by the settings: nothing to measure */
        int h = modes == 2;
        ps->chosen = hp_plan_choose(&cs->inputs[h], cs->kind, &cs->params, algo_count(cs, h, count),
                                    algo_size(cs, h), algo, part_bytes, 0, 0);
        ps->chosen.hier = h;
        ps->state = 2;
        *plan_p = ps->chosen;
        warn_budget(cs, plan_p);
        return HP_OK;
    }
    if (ps->state == 0) {
        /* candidates: plain (T0 is measured, not modelled); a collective
         * compressor; else per hierarchical mode the algorithms within the
         * quality budget (or the fixed one), in the model's order while
         * within HP_PLAN_PRUNE of its best: the model prunes and sets K, the
         * measurement decides */
        double best = INFINITY;
        hp_plan_t all[2 * 4];
        int nall = 0;
        ps->ncand = 0;
        if (allow_plain && algo == HP_ALGO_AUTO)
            add_candidate(ps, (hp_plan_t){0, HP_ALGO_RING, 1, 0, 0, 0});
        if (hp_comp_is_collective(cs->kind)) {
            add_candidate(ps, (hp_plan_t){1, HP_ALGO_AUTO, 1, 0, 1, 0});
        } else {
            for (int h = 0; h < 2; h++) {
                if (!(modes & (1 << h)))
                    continue;
                if ((st = ensure_inputs(cs, h)) != HP_OK)
                    return st;
                for (int k = 0; k < 4; k++) {
                    hp_plan_t p = hp_plan_choose(&cs->inputs[h], cs->kind, &cs->params,
                                                 algo_count(cs, h, count), algo_size(cs, h), algo,
                                                 part_bytes, algo == HP_ALGO_AUTO ? budget : 0, k);
                    if (!p.compress)
                        break;
                    p.hier = h;
                    p.t_model += intra_time(cs, h, count);
                    best = HP_MIN(best, p.t_model);
                    all[nall++] = p;
                }
            }
            for (int i = 0; i < nall; i++)
                if (all[i].t_model <= HP_PLAN_PRUNE * best)
                    add_candidate(ps, all[i]);
        }
        ps->trial = 0;
        ps->state = 1;
    }
    if (ps->ncand == 1) {
        /* nothing to compare */
        ps->chosen = ps->cand[0];
        ps->state = 2;
        *plan_p = ps->chosen;
        warn_budget(cs, plan_p);
        return HP_OK;
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
    /* Among compressed candidates the lowest median of each one's calls
     * wins (robust to a first call that sets up connections and to a lucky
     * one alike).  Plain wins over it only when it dominates: its slowest
     * call faster, by HP_PLAN_MARGIN, than the compressed candidate's
     * fastest.  Near a tie, or on a machine whose timings swing more than
     * the difference, the job stays compressed: the same job must not be
     * compressed in one run and not in the next by chance. */
    int best = -1, plain = -1, comp;
    double lo_best = 0, hi_plain = 0;
    for (int k = 0; k < ps->ncand; k++) {
        med[k] = median3(ps->t[k]);
        if (!ps->cand[k].compress)
            plain = k;
        else if (best < 0 || med[k] < med[best])
            best = k;
    }
    comp = best;
    if (best >= 0 && plain >= 0) {
        lo_best = HP_MIN(HP_MIN(ps->t[best][0], ps->t[best][1]), ps->t[best][2]);
        hi_plain = HP_MAX(HP_MAX(ps->t[plain][0], ps->t[plain][1]), ps->t[plain][2]);
    }
    if (best < 0 || (plain >= 0 && hi_plain < (1.0 - HP_PLAN_MARGIN) * lo_best))
        best = plain;
    ps->chosen = ps->cand[best];
    ps->state = 2;
    {
        char a[48], line[96];
        int c = size_class(count * sizeof(float));
        hp_plan_str(&ps->chosen, a, sizeof(a));
        if (plain >= 0 && comp >= 0)
            snprintf(line, sizeof(line), "%s (median %.0f us compressed, %.0f us plain)", a,
                     med[comp] * 1e6, med[plain] * 1e6);
        else
            snprintf(line, sizeof(line), "%s (%.0f us; plain not allowed)", a, med[best] * 1e6);
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

/* The algorithms by id (HP_ALGO_*); HP_ALGO_AUTO runs a collective
 * compressor's own hook. */
static hp_status_t (*const algo_run[])(hp_call_t *) = {
    [HP_ALGO_AUTO] = hp_algo_collective,
    [HP_ALGO_RING] = hp_algo_ring,
    [HP_ALGO_TREE] = hp_algo_tree,
    [HP_ALGO_PS] = hp_algo_ps,
    [HP_ALGO_ALLGATHER] = hp_algo_allgather,
};

static hp_status_t run_algo(hp_call_t *call, const hp_plan_t *plan)
{
    int a = plan->algo >= 0 && plan->algo < (int)HP_ARRAY_SIZE(algo_run) ? plan->algo : HP_ALGO_RING;
    atomic_fetch_add_explicit(&hp_g.stats.algo_calls[a], 1, memory_order_relaxed);
    return algo_run[a](call);
}

/* Elements per partition for K partitions of the algorithm's unit (a span
 * of whole grains for ring and ps, the buffer otherwise). */
static size_t part_elems(const hp_plan_t *plan, size_t n, int N, size_t grain)
{
    size_t unit = (plan->algo == HP_ALGO_RING || plan->algo == HP_ALGO_PS)
                      ? hp_span_len(n, (size_t)N, 0, grain) : n;
    size_t K = HP_MAX(plan->parts, 1);
    return HP_MAX((unit + K - 1) / K, 1);
}

/* This call's buffer state (error feedback), NULL when there is none: a
 * compressor that keeps state creates it, any call finds what an earlier
 * one left so it can be folded in.  Staging buffers are found here. */
static hp_res_buf_t *buffer_state(hp_comm_state_t *cs, void *recvbuf, size_t count, int create)
{
    int staging = 0;
    hp_res_buf_t *rb = hp_residual_buffer(cs->res, (uintptr_t)recvbuf, count, create,
                                          (hp_layout_t)cs->layout, &staging);
    if (staging && !(cs->warned & HP_WARNED_STAGING)) {
        cs->warned |= HP_WARNED_STAGING;
        HP_WARN("the buffer at %p is reduced with more than one element count (now %zu): it is a "
                "staging buffer, such as a fusion buffer, whose layout changes between calls; error "
                "feedback is off for it and its residuals were dropped (counted in HIPRESS_STATS). "
                "See doc/usage.md, 'Error feedback and buffer layouts', for a stable layout",
                recvbuf, count);
    }
    return rb;
}

/* buffer_state for the memory of the call: a device buffer's vectors are
 * device memory (NULL when the buffer holds vectors of another memory). */
static hp_res_buf_t *call_buffer_state(hp_comm_state_t *cs, hp_mem_t *mem, void *recvbuf, size_t count,
                                       int create)
{
    hp_res_buf_t *rb = buffer_state(cs, recvbuf, count, create);
    return rb != NULL && hp_residual_bind(rb, hp_mem_residual(mem)) ? rb : NULL;
}

/* Message memory of a call on device memory (page-locked). */
static void *mem_scratch_cb(void *ctx, size_t bytes)
{
    hp_mem_t *m = (hp_mem_t *)ctx;
    return m->ops->scratch(m, bytes);
}

/* The residual rb holds for a buffer of count elements, or NULL. */
static float *held_residual(const hp_res_buf_t *rb, size_t count)
{
    return rb != NULL && rb->len[HP_RES_R] == count ? rb->vec[HP_RES_R] : NULL;
}

/* Warnings about residual memory, once per communicator. */
static void warn_residuals(hp_comm_state_t *cs)
{
    hp_residual_info_t ri;
    hp_residual_info(cs->res, &ri);
    if (ri.stranded > cs->res_seen.stranded && !(cs->warned & HP_WARNED_STRAND)) {
        cs->warned |= HP_WARNED_STRAND;
        HP_WARN("residuals of buffers that were reduced once and never again were evicted: the "
                "program reduces gradients in new buffers each step, so error feedback cannot "
                "follow them (see doc/usage.md, 'Error feedback and buffer layouts')");
    }
    if (ri.oversize > cs->res_seen.oversize && !(cs->warned & HP_WARNED_OVERSIZE)) {
        cs->warned |= HP_WARNED_OVERSIZE;
        HP_WARN("a buffer's error-feedback state does not fit in HIPRESS_RESIDUAL_MAX_MB=%lld: it "
                "runs without error feedback", hp_cfg_i(&cs->cfg, HP_S_RESIDUAL_MAX_MB));
    }
}

/* A call the plan sends plain.  What this rank still owes for the buffer
 * travels with it, exactly (unless the data holds NaN or Inf: then the
 * result is NaN anyway and the residual waits). */
static int plain_call(hp_comm_state_t *cs, hp_mem_t *mem, const void *sendbuf, void *recvbuf, size_t count,
                      MPI_Comm comm)
{
    hp_res_buf_t *rb = call_buffer_state(cs, mem, recvbuf, count, 0);
    float *r = held_residual(rb, count);

    hp_wd_wait_t w;
    int rc;

    if (r != NULL) {
        if (sendbuf != MPI_IN_PLACE)
            mem->ops->copy(mem, recvbuf, sendbuf, count * sizeof(float));
        sendbuf = MPI_IN_PLACE;
        if (mem->ops->fold(mem, (float *)recvbuf, r, count))
            atomic_fetch_add_explicit(&hp_g.stats.res_folded, 1, memory_order_relaxed);
    }
    hp_wd_enter(&w, "an allreduce the plan sent plain", -1);
    rc = hp_mem_pmpi_allreduce(mem, sendbuf, recvbuf, count, comm);
    hp_wd_leave(&w);
    return rc;
}

/* dgc's momentum correction where this rank's own gradient enters: its
 * contribution to elements [base, base+len) of the buffer (of count
 * elements; buf points at element base) becomes u = m u + g, before any
 * encode, and every stage then applies plain error feedback to what it
 * encodes; u is masked where this rank's messages carried an element.  A
 * range holding NaN or Inf skips it for this call (u stays as it was).
 * Returns u at element base, or NULL. */
static float *apply_momentum(hp_comm_state_t *cs, hp_mem_t *mem, hp_res_buf_t *rb, float m, float *buf,
                             size_t base, size_t len, size_t count)
{
    float *u;
    if (rb == NULL || !(m > 0.0f))
        return NULL;
    u = hp_residual_vec(cs->res, rb, HP_RES_U, count);
    if (u == NULL)
        return NULL;
    u += base;
    return mem->ops->momentum(mem, u, buf, m, len) ? u : NULL;
}

/* The exact exchanges inside a node of the 2D hierarchy, point to point
 * (Open MPI's MPI_Reduce_scatter of 64 MiB on two ranks took 150 to 240 ms
 * where these take 12 to 25).  Shard q is [off[q], off[q] + len[q]) of buf.
 * reduce-scatter: this rank's shard becomes the sum of every node rank's
 * shard, added in node-rank order after its own (tmp: room for the others'
 * shards); allgather: every shard from its owner. */
static hp_status_t node_exchange(hp_comm_state_t *cs, float *buf, const int *len, const int *off,
                                 float *tmp, int gather)
{
    const int k = cs->node_size, me = cs->node_rank;
    MPI_Request *rq = malloc(2 * (size_t)k * sizeof(MPI_Request));
    hp_status_t st = HP_OK;
    hp_wd_wait_t w;
    size_t at = 0;
    int m = 0;

    if (rq == NULL)
        return HP_ERR_NOMEM;
    for (int q = 0; q < k; q++) {
        if (q == me)
            continue;
        if (PMPI_Irecv(gather ? buf + off[q] : tmp + at, gather ? len[q] : len[me], MPI_FLOAT, q, 7101,
                       cs->node, &rq[m++]) != MPI_SUCCESS)
            st = HP_ERR_MPI;
        at += (size_t)len[me];
    }
    for (int q = 0; q < k; q++) {
        if (q == me)
            continue;
        if (PMPI_Isend(gather ? buf + off[me] : buf + off[q], gather ? len[me] : len[q], MPI_FLOAT, q, 7101,
                       cs->node, &rq[m++]) != MPI_SUCCESS)
            st = HP_ERR_MPI;
    }
    hp_wd_enter(&w, gather ? "the node allgather of a compressed allreduce"
                           : "the node reduction of a compressed allreduce", -1);
    if (PMPI_Waitall(m, rq, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        st = HP_ERR_MPI;
    hp_wd_leave(&w);
    free(rq);
    if (st == HP_OK && !gather) {
        const hp_ops_t *ops = hp_ops_get(cs->params.isa);
        float *mine = buf + off[me];
        at = 0;
        for (int q = 0; q < k; q++) {
            if (q == me)
                continue;
            ops->add(mine, tmp + at, mine, (size_t)len[me]);
            at += (size_t)len[me];
        }
    }
    return st;
}

/* Fold what this rank holds for elements [off, off+len) into its data
 * (buf is the whole buffer): where it encodes nothing lossy this call. */
static void fold_range(hp_mem_t *mem, float *r, float *buf, size_t off, size_t len)
{
    if (r == NULL || len == 0)
        return;
    if (mem->ops->fold(mem, buf + off, r + off, len))
        atomic_fetch_add_explicit(&hp_g.stats.res_folded, 1, memory_order_relaxed);
}

int hp_allreduce_agree(MPI_Comm comm, hp_comm_state_t *cs, size_t count, int local_ok, int *rc_p)
{
    long long v[3] = {!local_ok, (long long)count, -(long long)count}, out[3];
    hp_wd_wait_t w;
    int rc;

    *rc_p = MPI_SUCCESS;
    if (hp_comm_state_ready(cs, comm) != HP_OK)
        return 0;   /* (a failed split fails on every rank: they pass through together) */
    hp_wd_enter(&w, "the agreement on a call's eligibility", -1);
    rc = PMPI_Allreduce(v, out, 3, MPI_LONG_LONG, MPI_MAX, cs->priv);
    hp_wd_leave(&w);
    if (rc != MPI_SUCCESS)
        return 0;
    if (out[1] != -out[2]) {
        if (cs->rank == 0)
            HP_WARN("an MPI_Allreduce of MPI_FLOAT with MPI_SUM was called with %lld to %lld elements on "
                    "the ranks of one communicator: the counts must be equal (an erroneous program)",
                    -out[2], out[1]);
        atomic_fetch_add_explicit(&hp_g.stats.errors, 1, memory_order_relaxed);
        PMPI_Comm_call_errhandler(comm, MPI_ERR_COUNT);
        *rc_p = MPI_ERR_COUNT;
        return -1;
    }
    return out[0] == 0;
}

int hp_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm,
                            hp_comm_state_t *cs)
{
    hp_transport_t tp;
    hp_call_t call;
    hp_plan_t plan;
    hp_plan_slot_t *explore = NULL;
    hp_status_t st;
    hp_comp_t *comp;
    const hp_comp_ext_t *ext;
    hipress_comp_params_t cparams;
    hp_res_buf_t *rb = NULL;
    hp_wd_wait_t wdw;
    hp_mem_t mem;
    float *exact = NULL;
    int failed, is_algo_rank, keeps_state, hier, *hier_counts = NULL;
    size_t base = 0, n_algo = count, grain;
    double t0 = hp_now();
    MPI_Comm ac;

    hp_wd_start(hp_cfg_d(&hp_g.cfg, HP_S_TIMEOUT));
    /* the first call of a communicator or size class sets up and measures
     * with collectives: watched too */
    hp_wd_enter(&wdw, "the set-up of a compressed allreduce", -1);
    st = hp_comm_state_ready(cs, comm);
    if (st != HP_OK) {
        hp_wd_leave(&wdw);
        HP_WARN("cannot set up hipress on a communicator: %s", hipress_status_string(st));
        goto err;
    }
    st = plan_for(cs, count, &plan, &explore);
    hp_wd_leave(&wdw);
    if (st != HP_OK)
        goto err;
    /* host or device memory: the operations on the buffer, for the call */
    hp_mem_begin(&mem, recvbuf);
    if (hp_mem_is_device(&mem)) {
        atomic_fetch_add_explicit(&hp_g.stats.dev_calls[HP_COLL_ALLREDUCE], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(plan.compress ? &hp_g.stats.dev_compressed : &hp_g.stats.dev_staged[HP_COLL_ALLREDUCE],
                                  1, memory_order_relaxed);
    }
    if (!plan.compress) {
        int rc = plain_call(cs, &mem, sendbuf, recvbuf, count, comm);
        if (hp_mem_end(&mem) != HP_OK && rc == MPI_SUCCESS)
            rc = MPI_ERR_OTHER;
        atomic_fetch_add_explicit(&hp_g.stats.plan_plain, 1, memory_order_relaxed);
        if (explore != NULL && rc == MPI_SUCCESS)
            plan_report(cs, explore, hp_now() - t0, count);
        hp_comm_state_sync_stats(cs);
        return rc;
    }

    comp = hp_comp_get(cs->kind);
    ext = hp_comp_ext(cs->kind);
    keeps_state = (comp->flags & (HIPRESS_COMP_EF | HIPRESS_COMP_MOMENTUM)) != 0;
    if (sendbuf != MPI_IN_PLACE)
        mem.ops->copy(&mem, recvbuf, sendbuf, count * sizeof(float));
    if (hp_cfg_i(&cs->cfg, HP_S_VERIFY)) {
        exact = malloc(count * sizeof(float));
        if (exact != NULL)
            mem.ops->copy(&mem, exact, recvbuf, count * sizeof(float));
        if (exact == NULL || PMPI_Allreduce(MPI_IN_PLACE, exact, (int)count, MPI_FLOAT, MPI_SUM, cs->priv) != MPI_SUCCESS) {
            free(exact);
            exact = NULL;
        }
    }
    rb = call_buffer_state(cs, &mem, recvbuf, count, keeps_state);
    /* the node exchanges of the hierarchy work on host memory: a device
     * buffer runs the flat algorithm (every rank of the call passes device
     * memory, so every rank decides the same) */
    hier = plan.hier && !hp_mem_is_device(&mem);
    ac = algo_comm(cs, hier);
    is_algo_rank = ac != MPI_COMM_NULL;
    /* this call's parameters (dgc's warm-up counts calls on the buffer) */
    cparams = cs->params;
    if (ext->call_params != NULL)
        ext->call_params(&cparams, rb != NULL ? rb->calls : 0);
    grain = hp_comp_grain(cs->kind, &cparams);
    if (hier && cs->hier_2d) {
        /* 2D: reduce-scatter inside the node (exact), this rank compresses
         * its shard with the same node rank of every other node, allgather
         * inside the node.  What it owes for the other shards goes into the
         * node reduction. */
        float *r = held_residual(rb, count), *shard;
        int *cnt = malloc(2 * (size_t)cs->node_size * sizeof(int));
        base = hp_span_off(count, (size_t)cs->node_size, (size_t)cs->node_rank, grain);
        n_algo = hp_span_len(count, (size_t)cs->node_size, (size_t)cs->node_rank, grain);
        fold_range(&mem, r, (float *)recvbuf, 0, base);
        fold_range(&mem, r, (float *)recvbuf, base + n_algo, count - base - n_algo);
        shard = hp_comm_scratch2(cs, HP_MAX(n_algo * (size_t)(cs->node_size - 1), 1) * sizeof(float));
        if (cnt == NULL || shard == NULL) {
            st = HP_ERR_NOMEM;
        } else {
            for (int q = 0; q < cs->node_size; q++) {
                cnt[q] = (int)hp_span_len(count, (size_t)cs->node_size, (size_t)q, grain);
                cnt[cs->node_size + q] = (int)hp_span_off(count, (size_t)cs->node_size, (size_t)q, grain);
            }
            st = node_exchange(cs, (float *)recvbuf, cnt, cnt + cs->node_size, shard, 0);
        }
        hier_counts = cnt;
        atomic_fetch_add_explicit(&hp_g.stats.hier_calls, 1, memory_order_relaxed);
    } else if (hier) {
        /* leaders: exact sum on each node's leader; a rank that encodes
         * nothing this call sends what it owes with its data */
        if (!is_algo_rank)
            fold_range(&mem, held_residual(rb, count), (float *)recvbuf, 0, count);
        hp_wd_enter(&wdw, "the node reduction of a compressed allreduce", -1);
        if (PMPI_Reduce(cs->node_rank == 0 ? MPI_IN_PLACE : recvbuf, cs->node_rank == 0 ? recvbuf : NULL,
                        (int)count, MPI_FLOAT, MPI_SUM, 0, cs->node) != MPI_SUCCESS)
            st = HP_ERR_MPI;
        hp_wd_leave(&wdw);
        atomic_fetch_add_explicit(&hp_g.stats.hier_calls, 1, memory_order_relaxed);
    }
    memset(&call, 0, sizeof(call));
    call.err = st;
    tp.bytes_sent = 0;
    if (is_algo_rank) {
        int acsize;
        PMPI_Comm_size(ac, &acsize);
        hp_tp_init(&tp, ac, hier ? cs->world_inter : cs->world_priv);
        if (acsize < 2) {
            /* one node: the node reduction was the whole job, and what this
             * rank owes goes with it */
            if (st == HP_OK)
                fold_range(&mem, held_residual(rb, count), (float *)recvbuf, base, n_algo);
            is_algo_rank = 0;
        } else {
            call.tp = &tp;
            call.mem = &mem;
            call.buf = (float *)recvbuf + base;
            call.n = n_algo;
            call.base = base;
            call.kind = cs->kind;
            call.params = &cparams;
            call.res = cs->res;
            call.rb = rb;
            call.resid = (rb != NULL && (comp->flags & HIPRESS_COMP_EF))
                             ? hp_residual_vec(cs->res, rb, HP_RES_R, count) : held_residual(rb, count);
            if (call.resid != NULL)
                call.resid += base;
            if (ext->momentum != NULL)
                call.mom = apply_momentum(cs, &mem, rb, ext->momentum(&cparams), call.buf, base, n_algo, count);
            else if (rb != NULL && (comp->flags & HIPRESS_COMP_MOMENTUM) &&
                     (call.state = hp_residual_vec(cs->res, rb, HP_RES_U, count)) != NULL)
                call.state += base;
            call.grain = grain;
            call.seed = (uint64_t)hp_cfg_i(&cs->cfg, HP_S_SEED);
            call.call_no = cs->ncalls;
            call.part_elems = part_elems(&plan, n_algo, acsize, call.grain);
            call.corrupt = hp_cfg_i(&cs->cfg, HP_S_TEST_CORRUPT) == cs->rank;
            call.kill = hp_cfg_i(&cs->cfg, HP_S_TEST_KILL_RANK) == hp_g.world_rank &&
                        (unsigned long long)hp_cfg_i(&cs->cfg, HP_S_TEST_KILL_CALL) == cs->ncalls;
            call.scratch = mem.ops->scratch != NULL ? mem_scratch_cb : scratch_cb;
            call.scratch_ctx = mem.ops->scratch != NULL ? (void *)&mem : (void *)cs;
            if (call.err == HP_OK)
                st = run_algo(&call, &plan);
        }
    }
    if (rb != NULL)
        rb->calls++;
    cs->ncalls++;
    if (hier && cs->hier_2d) {
        if (hier_counts == NULL ||
            node_exchange(cs, (float *)recvbuf, hier_counts, hier_counts + cs->node_size, NULL, 1) != HP_OK)
            st = HP_ERR_MPI;
        free(hier_counts);
    } else if (hier) {
        hp_wd_enter(&wdw, "the node broadcast of a compressed allreduce", -1);
        if (PMPI_Bcast(recvbuf, (int)count, MPI_FLOAT, 0, cs->node) != MPI_SUCCESS)
            st = HP_ERR_MPI;
        hp_wd_leave(&wdw);
    }
    /* the device's queued work done, and a malformed message it found */
    {
        hp_status_t ms = mem.ops->sync(&mem);
        if (st == HP_OK)
            st = ms;
    }

    /* failure protocol: every rank learns whether any rank failed */
    failed = st != HP_OK;
    hp_wd_enter(&wdw, "the failure agreement of a compressed allreduce", -1);
    if (PMPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, cs->priv) != MPI_SUCCESS)
        failed = 1;
    hp_wd_leave(&wdw);
    if (failed && st == HP_OK)
        st = HP_ERR_PEER;
    if (exact != NULL && !failed) {
        float *got = hp_mem_is_device(&mem) ? malloc(count * sizeof(float)) : (float *)recvbuf;
        if (got != NULL && got != recvbuf)
            mem.ops->copy(&mem, got, recvbuf, count * sizeof(float));
        if (got != NULL)
            verify_result(cs, exact, got, count);
        if (got != recvbuf)
            free(got);
    }
    free(exact);
    hp_mem_end(&mem);
    if (explore != NULL && !failed)
        plan_report(cs, explore, hp_now() - t0, count);

    warn_residuals(cs);
    hp_comm_state_sync_stats(cs);
    atomic_fetch_add_explicit(&hp_g.stats.compressed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_raw, count * sizeof(float), memory_order_relaxed);
    if (is_algo_rank) {
        atomic_fetch_add_explicit(&hp_g.stats.bytes_wire, tp.bytes_sent, memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.nonfinite, call.nonfinite, memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.excepts, call.excepts, memory_order_relaxed);
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

HP_EXPORT int hipress_comm_residual(MPI_Comm comm, const void *buf, size_t count, float *out)
{
    hp_comm_state_t *cs;
    hp_res_buf_t *rb;
    const float *r;
    if (!hp_g.initialized || buf == NULL || (out == NULL && count > 0))
        return HIPRESS_ERR_INVALID;
    cs = hp_comm_state(comm, 0);
    /* a lookup with layout trust: it must not count as a call on the buffer */
    rb = cs != NULL ? hp_residual_buffer(cs->res, (uintptr_t)buf, count, 0, HP_LAYOUT_TRUST, NULL) : NULL;
    r = held_residual(rb, count);
    if (r != NULL) {
        if (hp_mem_residual_read(rb, r, out, count) != 0)
            return HIPRESS_ERR_DEVICE;
    } else if (count > 0) {
        memset(out, 0, count * sizeof(float));
    }
    return HIPRESS_OK;
}
