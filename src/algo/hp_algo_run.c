/*
 * Running a plan (hp_algo.h, hp_algo_run): the call's set-up over its
 * buffer (error-feedback vectors, dgc's momentum, grain, keys), then the
 * plan's row of the algorithm table, or a collective compressor's run, flat
 * or through the node hierarchy.  The hierarchy is a composite of three
 * stages around a flat algorithm: the exact reduction inside the node
 * (point to point on the node's transport, sums in node-rank order so the
 * bits do not depend on the MPI), the algorithm among the nodes, and the
 * exchange back inside the node.  Every rank runs every stage's exchanges
 * whatever failed locally, so no peer waits for ever.
 */
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_ops.h"
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ set-up */

/* dgc's momentum correction where this rank's own gradient enters: its
 * contribution to elements [base, base+len) of the buffer (of count
 * elements; buf points at element base) becomes u = m u + g, before any
 * encode, and every stage then applies plain error feedback to what it
 * encodes; u is masked where this rank's messages carried an element.  A
 * range holding NaN or Inf skips it for this call (u stays as it was).
 * Returns u at element base, or NULL. */
static float *apply_momentum(hp_residual_store_t *res, hp_mem_t *mem, hp_res_buf_t *rb, float m, float *buf,
                             size_t base, size_t len, size_t count)
{
    float *u;
    if (rb == NULL || !(m > 0.0f))
        return NULL;
    u = hp_residual_vec(res, rb, HP_RES_U, count);
    if (u == NULL)
        return NULL;
    u += base;
    return mem->ops->momentum(mem, u, buf, m, len) ? u : NULL;
}

static float *held_residual(const hp_res_buf_t *rb, size_t count)
{
    return rb != NULL && rb->len[HP_RES_R] == count ? rb->vec[HP_RES_R] : NULL;
}

void hp_call_prepare(hp_call_t *call, const hp_call_env_t *env, float *data, size_t count, size_t base, size_t n)
{
    hp_comp_t *comp = hp_comp_get(env->kind);
    const hp_comp_ext_t *ext = hp_comp_ext(env->kind);
    hp_res_buf_t *rb = env->rb;

    memset(call, 0, sizeof(*call));
    call->err = env->mem->err;
    call->tp = env->tp;
    call->mem = env->mem;
    call->buf = data + base;
    call->n = n;
    call->base = base;
    call->kind = env->kind;
    call->sum_kind = env->sum_kind;
    call->params = env->params;
    call->res = env->res;
    call->rb = rb;
    /* a residual where either codec keeps one: the worker's error, and the
     * owner's of the sums it re-encodes (terngrad has one for that alone) */
    call->resid = (rb != NULL && ((comp->flags | hp_comp_get(env->sum_kind)->flags) & HIPRESS_COMP_EF))
                      ? hp_residual_vec(env->res, rb, HP_RES_R, count) : held_residual(rb, count);
    if (call->resid != NULL)
        call->resid += base;
    if (ext->momentum != NULL)
        call->mom = apply_momentum(env->res, env->mem, rb, ext->momentum(env->params), call->buf, base, n, count);
    else if (rb != NULL && (comp->flags & HIPRESS_COMP_MOMENTUM) &&
             (call->state = hp_residual_vec(env->res, rb, HP_RES_U, count)) != NULL)
        call->state += base;
    call->grain = hp_comp_grain2(env->kind, env->sum_kind, env->params);
    call->seed = env->seed;
    call->call_no = env->call_no;
    call->corrupt = env->corrupt;
    call->kill = env->kill;
    call->scratch = env->scratch;
    call->scratch_ctx = env->scratch_ctx;
}

/* Fold what this rank holds for elements [off, off+len) into its data
 * (buf is the whole buffer): where it encodes nothing lossy this call. */
static void fold_range(const hp_call_env_t *env, float *buf, size_t count, size_t off, size_t len,
                       unsigned *folded_p)
{
    float *r = held_residual(env->rb, count);
    if (r == NULL || len == 0)
        return;
    if (env->mem->ops->fold(env->mem, buf + off, r + off, len))
        (*folded_p)++;
}

/* The flat run of the plan on elements [base, base + n) of data; pre: a
 * failure of this rank before the run (it still runs, sending error
 * messages, so no peer waits). */
static hp_status_t run_flat(hp_call_t *call, const hp_call_env_t *env, float *data, size_t count, size_t base,
                            size_t n, int algo, size_t parts, hp_status_t pre)
{
    const hp_algo_desc_t *a = hp_algo_get(algo);
    size_t unit;
    hp_status_t st;

    hp_call_prepare(call, env, data, count, base, n);
    if (call->err == HP_OK)
        call->err = pre;
    unit = hp_algo_unit_elems(algo, n, env->tp->size, call->grain);
    call->part_elems = HP_MAX((unit + HP_MAX(parts, 1) - 1) / HP_MAX(parts, 1), 1);
    env->tp->bytes_sent = 0;
    env->tp->t_wait = 0;
    st = a != NULL ? a->run(call) : hp_algo_collective(call);
    call->wire = env->tp->bytes_sent;
    call->t_wait = env->tp->t_wait;
    return st;
}

/* ----------------------------------------------------- the hierarchy */

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
        HP_CHECK_KEEP(recv ? hp_tp_irecv_bytes(tp, p, c, q, &rq[i]) : hp_tp_isend(tp, p, c, c, q, &rq[i]), st);
    }
    return st;
}

/* The exact exchanges inside a node of the 2D hierarchy, point to point
 * (Open MPI's MPI_Reduce_scatter of 64 MiB on two ranks took 150 to 240 ms
 * where these take 12 to 25).  Shard q is [off[q], off[q] + len[q]) of buf.
 * reduce-scatter: this rank's shard becomes the sum of every node rank's
 * shard, added in node-rank order after its own (tmp: room for the others'
 * shards); allgather: every shard from its owner. */
static hp_status_t node_exchange(const hp_hier_t *h, int isa, float *buf, const size_t *len, const size_t *off,
                                 float *tmp, int gather)
{
    const int k = h->node_size, me = h->node_rank;
    hp_transport_t *tp = h->tp_node;
    size_t nreq = 0, m = 0, at = 0;
    hp_req_t *rq;
    hp_status_t st = HP_OK;

    for (int q = 0; q < k; q++)
        if (q != me)
            nreq += node_pieces(len[me] * sizeof(float)) + node_pieces(len[q] * sizeof(float));
    rq = malloc(HP_MAX(nreq, 1) * sizeof(hp_req_t));
    if (rq == NULL)
        return HP_ERR_NOMEM;
    HP_CHECK_KEEP(hp_tp_group_begin(tp), st);
    for (int q = 0; q < k; q++) {
        size_t bytes = (gather ? len[q] : len[me]) * sizeof(float);
        if (q == me)
            continue;
        HP_CHECK_KEEP(node_post(tp, 1, gather ? buf + off[q] : tmp + at, bytes, q, rq + m), st);
        m += node_pieces(bytes);
        at += len[me];
    }
    for (int q = 0; q < k; q++) {
        size_t bytes = (gather ? len[me] : len[q]) * sizeof(float);
        if (q == me)
            continue;
        HP_CHECK_KEEP(node_post(tp, 0, gather ? buf + off[me] : buf + off[q], bytes, q, rq + m), st);
        m += node_pieces(bytes);
    }
    HP_CHECK_KEEP(hp_tp_group_end(tp), st);
    for (size_t i = 0; i < m; i++)
        HP_CHECK_KEEP(hp_tp_wait(tp, &rq[i]), st);
    free(rq);
    if (st == HP_OK && !gather) {
        const hp_ops_t *ops = hp_ops_get(isa);
        float *mine = buf + off[me];
        at = 0;
        for (int q = 0; q < k; q++) {
            if (q == me)
                continue;
            ops->add(mine, tmp + at, mine, len[me]);
            at += len[me];
        }
    }
    return st;
}

/* The exact exchanges of the leaders' hierarchy (nodes of different sizes),
 * point to point on the node's transport.  reduce: node rank 0 adds every
 * other node rank's buffer to its own, in node-rank order (tmp: room for
 * one buffer; NULL when it could not be had: the leader still receives,
 * into buf, so no peer waits, and the call fails); broadcast: node rank 0
 * sends its buffer to every other. */
static hp_status_t node_leader(const hp_hier_t *h, int isa, float *buf, size_t count, float *tmp, int bcast)
{
    const int k = h->node_size, me = h->node_rank;
    const size_t bytes = count * sizeof(float), np = node_pieces(bytes);
    hp_transport_t *tp = h->tp_node;
    hp_req_t *rq = malloc(np * (size_t)HP_MAX(k - 1, 1) * sizeof(hp_req_t));
    size_t m = 0;
    hp_status_t st = HP_OK;

    if (rq == NULL)
        return HP_ERR_NOMEM;
    if (me != 0) {
        /* to the leader (reduce) or from it (broadcast) */
        HP_CHECK_KEEP(node_post(tp, bcast, buf, bytes, 0, rq), st);
        m = np;
    } else if (bcast) {
        for (int q = 1; q < k; q++, m += np)
            HP_CHECK_KEEP(node_post(tp, 0, buf, bytes, q, rq + m), st);
    } else {
        const hp_ops_t *ops = hp_ops_get(isa);
        if (tmp == NULL)
            st = HP_ERR_NOMEM;
        for (int q = 1; q < k; q++) {
            hp_status_t qs = node_post(tp, 1, tmp != NULL ? tmp : buf, bytes, q, rq);
            for (size_t i = 0; i < np; i++)
                HP_CHECK_KEEP(hp_tp_wait(tp, &rq[i]), qs);
            HP_CHECK_KEEP(qs, st);
            if (qs == HP_OK && st == HP_OK)
                ops->add(buf, tmp, buf, count);
        }
    }
    for (size_t i = 0; i < m; i++)
        HP_CHECK_KEEP(hp_tp_wait(tp, &rq[i]), st);
    free(rq);
    return st;
}

/* The composite: node stage, the algorithm among the nodes (on the ranks
 * of hier->tp_inter), node stage back.  What this rank owes for elements it
 * does not encode this call travels exactly with its data. */
static hp_status_t run_hier(hp_call_t *call, const hp_call_env_t *env, float *data, size_t count, int algo,
                            size_t parts, const hp_hier_t *h, unsigned *folded_p)
{
    const int isa = env->params->isa;
    const size_t grain = hp_comp_grain2(env->kind, env->sum_kind, env->params);
    hp_call_env_t inter = *env;
    size_t base = 0, n = count, *len = NULL, *off = NULL;
    hp_status_t st = HP_OK;
    int algo_rank = h->tp_inter != NULL;

    if (h->is_2d) {
        float *shard;
        base = hp_span_off(count, (size_t)h->node_size, (size_t)h->node_rank, grain);
        n = hp_span_len(count, (size_t)h->node_size, (size_t)h->node_rank, grain);
        fold_range(env, data, count, 0, base, folded_p);
        fold_range(env, data, count, base + n, count - base - n, folded_p);
        len = malloc(2 * (size_t)h->node_size * sizeof(size_t));
        shard = env->scratch2(env->scratch_ctx, HP_MAX(n * (size_t)(h->node_size - 1), 1) * sizeof(float));
        if (len == NULL || shard == NULL) {
            st = HP_ERR_NOMEM;
        } else {
            off = len + h->node_size;
            for (int q = 0; q < h->node_size; q++) {
                len[q] = hp_span_len(count, (size_t)h->node_size, (size_t)q, grain);
                off[q] = hp_span_off(count, (size_t)h->node_size, (size_t)q, grain);
            }
            st = node_exchange(h, isa, data, len, off, shard, 0);
        }
    } else {
        float *tmp = h->node_rank == 0 ? env->scratch2(env->scratch_ctx, HP_MAX(count, 1) * sizeof(float)) : NULL;
        if (!algo_rank)
            fold_range(env, data, count, 0, count, folded_p);
        st = node_leader(h, isa, data, count, tmp, 0);
    }
    memset(call, 0, sizeof(*call));
    call->err = st;
    if (algo_rank && h->tp_inter->size < 2) {
        /* one node: the node reduction was the whole job, and what this
         * rank owes goes with it */
        if (st == HP_OK)
            fold_range(env, data, count, base, n, folded_p);
    } else if (algo_rank) {
        inter.tp = h->tp_inter;
        HP_CHECK_KEEP(run_flat(call, &inter, data, count, base, n, algo, parts, st), st);
    }
    if (h->is_2d) {
        if (len == NULL)
            st = HP_ERR_NOMEM;
        else
            HP_CHECK_KEEP(node_exchange(h, isa, data, len, off, NULL, 1), st);
        free(len);
    } else {
        HP_CHECK_KEEP(node_leader(h, isa, data, count, NULL, 1), st);
    }
    return st;
}

hp_status_t hp_algo_run(hp_call_t *call, const hp_call_env_t *env, float *data, size_t count, int algo,
                        size_t parts, const hp_hier_t *hier, unsigned *folded_p)
{
    *folded_p = 0;
    if (hier != NULL)
        return run_hier(call, env, data, count, algo, parts, hier, folded_p);
    return run_flat(call, env, data, count, 0, count, algo, parts, HP_OK);
}
