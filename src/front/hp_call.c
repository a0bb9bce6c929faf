/*
 * The MPI front end's compressed allreduce of one eligible call: set-up
 * (communicator state, the buffer's memory, the plan), enqueue (the
 * hierarchy's exact stages and the algorithm), completion (the failure
 * agreement, verification, the plan's exploration timing, statistics).
 * The plan itself is src/plan/; the call's hp_call_t is built by the
 * set-up the NCCL front end shares (hp_call_setup.h).
 */
#include "hp_state.h"
#include "hp_call_setup.h"
#include "hp_verify.h"
#include "hp_backend_mpi.h"
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_ops.h"
#include "hp_watchdog.h"
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

/* ------------------------------------------------------------- driver */

static hp_status_t run_algo(hp_call_t *call, const hp_plan_t *plan)
{
    const hp_algo_desc_t *a = hp_algo_get(plan->algo);
    atomic_fetch_add_explicit(&hp_g.stats.algo_calls[a != NULL ? plan->algo : HP_ALGO_AUTO], 1,
                              memory_order_relaxed);
    return a != NULL ? a->run(call) : hp_algo_collective(call);
}

/* This call's buffer state (error feedback), NULL when there is none;
 * staging buffers are found (and warned of) here. */
static hp_res_buf_t *call_buffer_state(hp_comm_state_t *cs, hp_mem_t *mem, void *recvbuf, size_t count,
                                       int create)
{
    int staging = 0;
    hp_res_buf_t *rb = hp_call_buffer_state(cs->res, mem, recvbuf, count, create, cs->layout, &staging);
    /* a warning only where error feedback is lost: a compressor that needs
     * it, run without it (STAGING_FORM=biased); the residual-free form and
     * compressors without a residual lose nothing (the stats count them) */
    if (staging && cs->staging_form == HP_FORM_BIASED && hp_call_keeps_state(cs->kind, cs->sum_kind) &&
        !(cs->warned & HP_WARNED_STAGING)) {
        cs->warned |= HP_WARNED_STAGING;
        HP_WARN("the buffer at %p is reduced with more than one element count (now %zu): it is a "
                "staging buffer, such as a fusion buffer, whose layout changes between calls; under "
                "HIPRESS_STAGING_FORM=biased error feedback is off for it and its residuals were dropped "
                "(counted in HIPRESS_STATS). See doc/usage.md, 'Error feedback and buffer layouts'",
                recvbuf, count);
    }
    return rb;
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
    float *r = hp_call_held_residual(rb, count);

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

/* A shard travels in pieces of at most 1 GiB (the transport's messages are
 * counted in bytes, in an int); an empty one as one empty message. */
#define NODE_PIECE ((size_t)1 << 30)
static size_t node_pieces(size_t bytes)
{
    return bytes == 0 ? 1 : (bytes + NODE_PIECE - 1) / NODE_PIECE;
}

static hp_status_t node_post(hp_transport_t *tp, int recv, void *buf, size_t bytes, int q, hp_req_t *rq)
{
    hp_status_t st = HP_OK;
    for (size_t i = 0, n = node_pieces(bytes); i < n; i++) {
        char *p = (char *)buf + i * NODE_PIECE;
        size_t c = HP_MIN(bytes - i * NODE_PIECE, NODE_PIECE);
        rq[i] = HP_REQ_NULL;
        if ((recv ? hp_tp_irecv_bytes(tp, p, c, q, &rq[i]) : hp_tp_isend(tp, p, c, c, q, &rq[i])) != HP_OK)
            st = HP_ERR_MPI;
    }
    return st;
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
    hp_transport_t *tp = cs->tp_node;
    size_t nreq = 0, m = 0, at = 0;
    hp_req_t *rq;
    hp_status_t st = HP_OK;
    hp_wd_wait_t w;

    for (int q = 0; q < k; q++)
        if (q != me)
            nreq += node_pieces((size_t)len[me] * sizeof(float)) + node_pieces((size_t)len[q] * sizeof(float));
    rq = malloc(HP_MAX(nreq, 1) * sizeof(hp_req_t));
    if (rq == NULL)
        return HP_ERR_NOMEM;
    if (hp_tp_group_begin(tp) != HP_OK)
        st = HP_ERR_MPI;
    for (int q = 0; q < k; q++) {
        size_t bytes = (size_t)(gather ? len[q] : len[me]) * sizeof(float);
        if (q == me)
            continue;
        if (node_post(tp, 1, gather ? buf + off[q] : tmp + at, bytes, q, rq + m) != HP_OK)
            st = HP_ERR_MPI;
        m += node_pieces(bytes);
        at += (size_t)len[me];
    }
    for (int q = 0; q < k; q++) {
        size_t bytes = (size_t)(gather ? len[me] : len[q]) * sizeof(float);
        if (q == me)
            continue;
        if (node_post(tp, 0, gather ? buf + off[me] : buf + off[q], bytes, q, rq + m) != HP_OK)
            st = HP_ERR_MPI;
        m += node_pieces(bytes);
    }
    if (hp_tp_group_end(tp) != HP_OK)
        st = HP_ERR_MPI;
    hp_wd_enter(&w, gather ? "the node allgather of a compressed allreduce"
                           : "the node reduction of a compressed allreduce", -1);
    for (size_t i = 0; i < m; i++)
        if (hp_tp_wait(tp, &rq[i]) != HP_OK)
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

/* The exact exchanges of the leaders' hierarchy (nodes of different sizes),
 * point to point on the node's transport like node_exchange.  reduce: node
 * rank 0 adds every other node rank's buffer to its own, in node-rank order
 * (tmp: room for one buffer; NULL when it could not be had: the leader
 * still receives, into buf, so no peer waits, and the call fails), so the
 * sum's bits do not depend on the MPI; broadcast: node rank 0 sends its
 * buffer to every other. */
static hp_status_t node_leader(hp_comm_state_t *cs, float *buf, size_t count, float *tmp, int bcast)
{
    const int k = cs->node_size, me = cs->node_rank;
    const size_t bytes = count * sizeof(float), np = node_pieces(bytes);
    hp_transport_t *tp = cs->tp_node;
    hp_req_t *rq = malloc(np * (size_t)HP_MAX(k - 1, 1) * sizeof(hp_req_t));
    size_t m = 0;
    hp_status_t st = HP_OK;
    hp_wd_wait_t w;

    if (rq == NULL)
        return HP_ERR_NOMEM;
    hp_wd_enter(&w, bcast ? "the node broadcast of a compressed allreduce"
                          : "the node reduction of a compressed allreduce", -1);
    if (me != 0) {
        /* to the leader (reduce) or from it (broadcast) */
        if (node_post(tp, bcast, buf, bytes, 0, rq) != HP_OK)
            st = HP_ERR_MPI;
        m = np;
    } else if (bcast) {
        for (int q = 1; q < k; q++, m += np)
            if (node_post(tp, 0, buf, bytes, q, rq + m) != HP_OK)
                st = HP_ERR_MPI;
    } else {
        const hp_ops_t *ops = hp_ops_get(cs->params.isa);
        if (tmp == NULL)
            st = HP_ERR_NOMEM;
        for (int q = 1; q < k; q++) {
            int ok = node_post(tp, 1, tmp != NULL ? tmp : buf, bytes, q, rq) == HP_OK;
            for (size_t i = 0; i < np; i++)
                if (hp_tp_wait(tp, &rq[i]) != HP_OK)
                    ok = 0;
            if (!ok)
                st = HP_ERR_MPI;
            else if (st == HP_OK)
                ops->add(buf, tmp, buf, count);
        }
    }
    for (size_t i = 0; i < m; i++)
        if (hp_tp_wait(tp, &rq[i]) != HP_OK)
            st = HP_ERR_MPI;
    hp_wd_leave(&w);
    free(rq);
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

/* Whether this rank keeps no residual for (recvbuf, count) where its
 * compressor needs one: the residual-free form then runs on every rank
 * (HIPRESS_STAGING_FORM: unbiased or exact).  Detection is this rank's (its
 * addresses), so it enters the call's agreement. */
static int needs_form(const hp_comm_state_t *cs, const void *recvbuf, size_t count)
{
    if (cs->staging_form == HP_FORM_BIASED || !hp_call_keeps_state(cs->kind, cs->sum_kind))
        return 0;
    return cs->layout == HP_LAYOUT_NONE ||
           (cs->layout == HP_LAYOUT_DETECT && hp_residual_is_staging(cs->res, (uintptr_t)recvbuf, count));
}

int hp_allreduce_agree(MPI_Comm comm, hp_comm_state_t *cs, const void *recvbuf, size_t count, int local_ok,
                       int mem_kind, int *rc_p)
{
    int64_t out[6] = {!local_ok, (int64_t)count, -(int64_t)count, mem_kind, -(int64_t)mem_kind, 0};

    *rc_p = MPI_SUCCESS;
    if (hp_comm_state_ready(cs, comm) != HP_OK)
        return 0;   /* (a failed split fails on every rank: they pass through together) */
    out[5] = needs_form(cs, recvbuf, count);
    if (hp_tp_agree(cs->tp_priv, HP_TP_INT64, out, 6, "the agreement on a call's eligibility") != HP_OK)
        return 0;
    /* the plans' key: the buffers' memory where every rank has the same
     * kind, host memory's plans where they differ (every rank plans alike) */
    cs->call_mem_kind = out[3] == -out[4] ? (int)out[3] : 0;
    cs->call_form = out[5] != 0;
    if (out[1] != -out[2]) {
        if (cs->rank == 0)
            HP_WARN("an MPI_Allreduce of MPI_FLOAT with MPI_SUM was called with %lld to %lld elements on "
                    "the ranks of one communicator: the counts must be equal (an erroneous program)",
                    -(long long)out[2], (long long)out[1]);
        atomic_fetch_add_explicit(&hp_g.stats.errors, 1, memory_order_relaxed);
        PMPI_Comm_call_errhandler(comm, MPI_ERR_COUNT);
        *rc_p = MPI_ERR_COUNT;
        return -1;
    }
    return out[0] == 0;
}

/* One compressed MPI_Allreduce from set-up to completion.  On the MPI
 * transport a call is enqueued and completed in one go; the split keeps
 * what needs the call to be done (stats, the call counter, exploration
 * timing, verification) in completion. */
typedef struct {
    hp_comm_state_t      *cs;
    MPI_Comm              comm;
    void                 *recvbuf;
    size_t                count;
    hp_mem_t              mem;
    hp_plan_comm_t        pc;
    hp_plan_t             plan;
    hp_plan_slot_t       *explore;
    hipress_comp_params_t cparams;
    hp_res_buf_t         *rb;
    /* the codecs of the call: the communicator's, or their residual-free
     * form on a staging buffer (form) */
    int                   form, kind, sum_base;
    const hipress_comp_params_t *params;
    int                   sum_kind;   /* the plan's sum codec: sum_base where the algorithm
                                       * has an owner stage in it, else the worker's */
    hp_transport_t       *tp;         /* the algorithm's ranks' (NULL: not one of them) */
    hp_call_t             call;
    float                *exact;
    int                   hier, is_algo_rank, *hier_counts;
    double                t0;
    hp_status_t           st;
} mpi_call_t;

/* Record an exploration call's time; a plan fixed by it goes in the stats. */
static void report_plan(mpi_call_t *mc)
{
    char line[96];
    hp_plan_report(&mc->pc, mc->explore, hp_now() - mc->t0, mc->count, line, sizeof(line));
    if (line[0] != '\0') {
        int c = hp_plan_size_class(mc->count * sizeof(float));
        pthread_mutex_lock(&hp_g.stats.stats_lock);
        snprintf(hp_g.stats.plan_text[c], sizeof(hp_g.stats.plan_text[c]), "%s", line);
        pthread_mutex_unlock(&hp_g.stats.stats_lock);
    }
}

/* The plan's view of the communicator for this call. */
static void plan_comm(mpi_call_t *mc)
{
    hp_comm_state_t *cs = mc->cs;
    hp_plan_comm_t *pc = &mc->pc;
    pc->cfg = &cs->cfg;
    pc->kind = mc->kind;
    pc->sum_kind = mc->sum_base;
    pc->params = mc->params;
    pc->form = mc->form;
    pc->rank = cs->rank;
    pc->size = cs->size;
    pc->hier_avail = cs->hier_avail;
    pc->hier_2d = cs->hier_2d;
    pc->node_size = cs->node_size;
    pc->nodes = cs->nodes;
    pc->mem_kind = cs->call_mem_kind;
    pc->all = cs->tp_priv;
    pc->algo[0] = cs->tp_priv;
    pc->algo[1] = cs->hier_avail ? cs->tp_inter : NULL;
    pc->node = cs->tp_node;
    pc->mem = &mc->mem;
}

/* Set-up: the communicator's state, the buffer's memory, then the plan
 * (keyed by that memory).  A plain plan runs here. */
static int call_setup(mpi_call_t *mc, const void *sendbuf, int *rc_p)
{
    hp_comm_state_t *cs = mc->cs;
    hp_wd_wait_t wdw;
    hp_status_t st;

    hp_wd_start(hp_cfg_d(&hp_g.cfg, HP_S_TIMEOUT));
    /* the first call of a communicator or size class sets up and measures
     * with collectives: watched too */
    hp_wd_enter(&wdw, "the set-up of a compressed allreduce", -1);
    st = hp_comm_state_ready(cs, mc->comm);
    if (st != HP_OK) {
        hp_wd_leave(&wdw);
        HP_WARN("cannot set up hipress on a communicator: %s", hipress_status_string(st));
        mc->st = st;
        return -1;
    }
    hp_mem_begin(&mc->mem, mc->recvbuf);
    /* a staging buffer on some rank (agreed): the residual-free form, or
     * the call plain (HIPRESS_STAGING_FORM) */
    mc->form = cs->call_form && cs->staging_form == HP_FORM_UNBIASED;
    mc->kind = mc->form ? cs->form_kind : cs->kind;
    mc->sum_base = mc->form ? cs->form_sum_kind : cs->sum_kind;
    mc->params = mc->form ? &cs->form_params : &cs->params;
    plan_comm(mc);
    if (cs->call_form && cs->staging_form == HP_FORM_EXACT) {
        mc->plan = (hp_plan_t){.compress = 0};
        mc->explore = NULL;
        st = HP_OK;
    } else {
        st = hp_plan_for(&cs->planner, &mc->pc, mc->count, &mc->plan, &mc->explore);
    }
    hp_wd_leave(&wdw);
    if (st != HP_OK) {
        hp_mem_end(&mc->mem);
        mc->st = st;
        return -1;
    }
    if (hp_mem_is_device(&mc->mem)) {
        atomic_fetch_add_explicit(&hp_g.stats.dev_calls[HP_COLL_ALLREDUCE], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(mc->plan.compress ? &hp_g.stats.dev_compressed
                                                    : &hp_g.stats.dev_staged[HP_COLL_ALLREDUCE],
                                  1, memory_order_relaxed);
    }
    if (!mc->plan.compress) {
        int rc = plain_call(cs, &mc->mem, sendbuf, mc->recvbuf, mc->count, mc->comm);
        if (hp_mem_end(&mc->mem) != HP_OK && rc == MPI_SUCCESS)
            rc = MPI_ERR_OTHER;
        atomic_fetch_add_explicit(cs->call_form ? &hp_g.stats.form_exact : &hp_g.stats.plan_plain, 1,
                                  memory_order_relaxed);
        if (mc->explore != NULL && rc == MPI_SUCCESS)
            report_plan(mc);
        hp_comm_state_sync_stats(cs);
        *rc_p = rc;
        return 1;
    }
    if (sendbuf != MPI_IN_PLACE)
        mc->mem.ops->copy(&mc->mem, mc->recvbuf, sendbuf, mc->count * sizeof(float));
    if (hp_cfg_i(&cs->cfg, HP_S_VERIFY)) {
        mc->exact = malloc(mc->count * sizeof(float));
        if (mc->exact != NULL)
            mc->mem.ops->copy(&mc->mem, mc->exact, mc->recvbuf, mc->count * sizeof(float));
        if (mc->exact == NULL || PMPI_Allreduce(MPI_IN_PLACE, mc->exact, (int)mc->count, MPI_FLOAT, MPI_SUM,
                                                cs->priv) != MPI_SUCCESS) {
            free(mc->exact);
            mc->exact = NULL;
        }
    }
    mc->sum_kind = mc->plan.sum != NULL ? mc->sum_base : mc->kind;
    if (mc->form) {
        /* no residual: what this rank still holds for the buffer (its
         * layout unchanged here) travels in its data, unbiasedly encoded */
        hp_res_buf_t *rb = call_buffer_state(cs, &mc->mem, mc->recvbuf, mc->count, 0);
        fold_range(&mc->mem, hp_call_held_residual(rb, mc->count), (float *)mc->recvbuf, 0, mc->count);
        mc->rb = NULL;
        atomic_fetch_add_explicit(&hp_g.stats.form_unbiased, 1, memory_order_relaxed);
    } else {
        mc->rb = call_buffer_state(cs, &mc->mem, mc->recvbuf, mc->count,
                                   hp_call_keeps_state(mc->kind, mc->sum_kind));
    }
    /* the node exchanges work on host memory: the plans of device buffers
     * are flat (hp_plan_for), and a device buffer among host ones (the
     * ranks' memories differ: host plans) runs flat as before */
    mc->hier = mc->plan.hier && !hp_mem_is_device(&mc->mem);
    hp_call_params_for(mc->kind, mc->params, mc->rb, &mc->cparams);
    return 0;
}

/* Enqueue: the hierarchy's exact stage, the algorithm, the hierarchy's
 * exchange back. */
static void call_enqueue(mpi_call_t *mc)
{
    hp_comm_state_t *cs = mc->cs;
    float *recv = (float *)mc->recvbuf;
    const size_t count = mc->count;
    size_t base = 0, n_algo = count, grain = hp_comp_grain2(mc->kind, mc->sum_kind, &mc->cparams);
    hp_status_t st = HP_OK;

    mc->is_algo_rank = mc->pc.algo[mc->hier] != NULL;
    if (mc->hier && cs->hier_2d) {
        /* 2D: reduce-scatter inside the node (exact), this rank compresses
         * its shard with the same node rank of every other node, allgather
         * inside the node.  What it owes for the other shards goes into the
         * node reduction. */
        float *r = hp_call_held_residual(mc->rb, count), *shard;
        int *cnt = malloc(2 * (size_t)cs->node_size * sizeof(int));
        base = hp_span_off(count, (size_t)cs->node_size, (size_t)cs->node_rank, grain);
        n_algo = hp_span_len(count, (size_t)cs->node_size, (size_t)cs->node_rank, grain);
        fold_range(&mc->mem, r, recv, 0, base);
        fold_range(&mc->mem, r, recv, base + n_algo, count - base - n_algo);
        shard = hp_comm_scratch2(cs, HP_MAX(n_algo * (size_t)(cs->node_size - 1), 1) * sizeof(float));
        if (cnt == NULL || shard == NULL) {
            st = HP_ERR_NOMEM;
        } else {
            for (int q = 0; q < cs->node_size; q++) {
                cnt[q] = (int)hp_span_len(count, (size_t)cs->node_size, (size_t)q, grain);
                cnt[cs->node_size + q] = (int)hp_span_off(count, (size_t)cs->node_size, (size_t)q, grain);
            }
            st = node_exchange(cs, recv, cnt, cnt + cs->node_size, shard, 0);
        }
        mc->hier_counts = cnt;
        atomic_fetch_add_explicit(&hp_g.stats.hier_calls, 1, memory_order_relaxed);
    } else if (mc->hier) {
        /* leaders: exact sum on each node's leader; a rank that encodes
         * nothing this call sends what it owes with its data */
        float *tmp = cs->node_rank == 0 ? hp_comm_scratch2(cs, HP_MAX(count, 1) * sizeof(float)) : NULL;
        if (!mc->is_algo_rank)
            fold_range(&mc->mem, hp_call_held_residual(mc->rb, count), recv, 0, count);
        st = node_leader(cs, recv, count, tmp, 0);
        atomic_fetch_add_explicit(&hp_g.stats.hier_calls, 1, memory_order_relaxed);
    }
    memset(&mc->call, 0, sizeof(mc->call));
    mc->call.err = st;
    if (mc->is_algo_rank) {
        int acsize;
        /* the transport of ac; its counters are this call's */
        mc->tp = mc->hier ? cs->tp_inter : cs->tp_priv;
        mc->tp->bytes_sent = 0;
        mc->tp->t_wait = 0;
        acsize = mc->tp->size;
        if (acsize < 2) {
            /* one node: the node reduction was the whole job, and what this
             * rank owes goes with it */
            if (st == HP_OK)
                fold_range(&mc->mem, hp_call_held_residual(mc->rb, count), recv, base, n_algo);
            mc->is_algo_rank = 0;
        } else {
            hp_call_env_t env = {
                .tp = mc->tp, .mem = &mc->mem, .kind = mc->kind, .sum_kind = mc->sum_kind,
                .params = &mc->cparams, .res = cs->res,
                .rb = mc->rb, .seed = (uint64_t)hp_cfg_i(&cs->cfg, HP_S_SEED), .call_no = cs->ncalls,
                .corrupt = hp_cfg_i(&cs->cfg, HP_S_TEST_CORRUPT) == cs->rank,
                .kill = hp_cfg_i(&cs->cfg, HP_S_TEST_KILL_RANK) == hp_g.world_rank &&
                        (unsigned long long)hp_cfg_i(&cs->cfg, HP_S_TEST_KILL_CALL) == cs->ncalls,
            };
            hp_call_prepare(&mc->call, &env, recv, count, base, n_algo);
            mc->call.part_elems = hp_plan_part_elems(&mc->plan, n_algo, acsize, mc->call.grain);
            mc->call.scratch = mc->mem.ops->scratch != NULL ? hp_call_mem_scratch : scratch_cb;
            mc->call.scratch_ctx = mc->mem.ops->scratch != NULL ? (void *)&mc->mem : (void *)cs;
            if (mc->call.err == HP_OK)
                st = run_algo(&mc->call, &mc->plan);
        }
    }
    if (mc->rb != NULL)
        mc->rb->calls++;
    cs->ncalls++;
    if (mc->hier && cs->hier_2d) {
        if (mc->hier_counts == NULL ||
            node_exchange(cs, recv, mc->hier_counts, mc->hier_counts + cs->node_size, NULL, 1) != HP_OK)
            st = HP_ERR_MPI;
        free(mc->hier_counts);
    } else if (mc->hier) {
        if (node_leader(cs, recv, count, NULL, 1) != HP_OK)
            st = HP_ERR_MPI;
    }
    mc->st = st;
}

/* Completion: the device's queued work, the failure agreement (every rank
 * learns whether any rank failed), verification, the plan's exploration
 * timing and the stats. */
static void call_complete(mpi_call_t *mc)
{
    hp_comm_state_t *cs = mc->cs;
    hp_status_t st = mc->st, ms = mc->mem.ops->sync(&mc->mem);
    hp_req_t arq = HP_REQ_NULL;
    int64_t any = 0;
    int failed;

    if (st == HP_OK)
        st = ms;
    /* the failure agreement, started and completed through the transport
     * (on the MPI transport the two follow each other) */
    failed = hp_tp_agree_flag_start(cs->tp_priv, st != HP_OK, &any, &arq) != HP_OK ||
             hp_tp_wait(cs->tp_priv, &arq) != HP_OK || any != 0;
    if (failed && st == HP_OK)
        st = HP_ERR_PEER;
    if (mc->exact != NULL && !failed) {
        float *got = hp_mem_is_device(&mc->mem) ? malloc(mc->count * sizeof(float)) : (float *)mc->recvbuf;
        if (got != NULL && got != mc->recvbuf)
            mc->mem.ops->copy(&mc->mem, got, mc->recvbuf, mc->count * sizeof(float));
        if (got != NULL)
            hp_verify_report(cs->tp_priv, mc->exact, got, mc->count);
        if (got != mc->recvbuf)
            free(got);
    }
    free(mc->exact);
    hp_mem_end(&mc->mem);
    if (mc->explore != NULL && !failed)
        report_plan(mc);

    warn_residuals(cs);
    hp_comm_state_sync_stats(cs);
    atomic_fetch_add_explicit(&hp_g.stats.compressed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_raw, mc->count * sizeof(float), memory_order_relaxed);
    if (mc->is_algo_rank) {
        hp_call_t *call = &mc->call;
        atomic_fetch_add_explicit(&hp_g.stats.bytes_wire, mc->tp->bytes_sent, memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.nonfinite, call->nonfinite, memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.excepts, call->excepts, memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.ns_encode, (unsigned long long)(call->t_encode * 1e9), memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.ns_decode, (unsigned long long)(call->t_decode * 1e9), memory_order_relaxed);
        atomic_fetch_add_explicit(&hp_g.stats.ns_wait, (unsigned long long)(mc->tp->t_wait * 1e9), memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&hp_g.stats.ns_total, (unsigned long long)((hp_now() - mc->t0) * 1e9),
                              memory_order_relaxed);
    mc->st = st;
}

int hp_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm,
                            hp_comm_state_t *cs)
{
    mpi_call_t mc;
    int rc = MPI_SUCCESS, done;

    memset(&mc, 0, sizeof(mc));
    mc.cs = cs;
    mc.comm = comm;
    mc.recvbuf = recvbuf;
    mc.count = count;
    mc.t0 = hp_now();
    done = call_setup(&mc, sendbuf, &rc);
    if (done > 0)
        return rc;
    if (done == 0) {
        call_enqueue(&mc);
        call_complete(&mc);
        if (mc.st == HP_OK)
            return MPI_SUCCESS;
    }
    atomic_fetch_add_explicit(&hp_g.stats.errors, 1, memory_order_relaxed);
    HP_WARN("compressed allreduce of %zu floats failed: %s", count, hipress_status_string(mc.st));
    PMPI_Comm_call_errhandler(comm, hp_g.err_code);
    return hp_g.err_code;
}

HP_EXPORT int hipress_comm_plan(MPI_Comm comm, size_t bytes, char *buf, size_t len)
{
    hp_comm_state_t *cs = hp_comm_state(comm, 0);
    if (buf == NULL || len == 0)
        return HIPRESS_ERR_INVALID;
    if (cs == NULL) {
        snprintf(buf, len, "none");
        return HIPRESS_OK;
    }
    hp_plan_text(&cs->planner, bytes, buf, len);
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
    r = hp_call_held_residual(rb, count);
    if (r != NULL) {
        if (hp_mem_residual_read(rb, r, out, count) != 0)
            return HIPRESS_ERR_DEVICE;
    } else if (count > 0) {
        memset(out, 0, count * sizeof(float));
    }
    return HIPRESS_OK;
}
