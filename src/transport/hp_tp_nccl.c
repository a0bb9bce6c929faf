/*
 * The NCCL transport, host-synchronous: posts are held and issued together
 * at the first wait after them, as one NCCL group of ncclSend/ncclRecv on
 * the caller's stream, each of the capacity both sides agreed (NCCL needs
 * matching counts when it enqueues; the message carries its own length).
 * The messages live in host memory, as the algorithms and the device
 * backend keep them: a flush copies the sends into device staging, runs
 * the group, waits for the stream and copies the receives back.
 *
 * A flush completes as a whole: every receive in it must be matched by a
 * send its peer issues without first waiting for this rank.  So the
 * transport is HP_TP_PHASED: an algorithm posts each phase's receives with
 * that phase's sends (ps its phase-3 receives after phase 2, tree its
 * broadcast receive after its reduction; ring and allgather post that way
 * anyway), and every rank's k-th flush of a call then holds the k-th phase
 * of every rank: the groups match across ranks as a collective's would.
 * The asynchronous form (hp_tp_nccl_init_async, its own ops table) moves
 * messages that are device memory already: a flush enqueues the group on
 * the stream and returns, with no staging and no host wait (doc/gpu.md).
 */
#include "hp_tp_nccl.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    int         send, flags;
    const void *src;      /* send: the message */
    void       *dst;      /* receive: the buffer */
    size_t      len, cap; /* bytes of the message (send), of the capacity */
    int         peer;
} op_t;

typedef struct {
    const hp_tp_nccl_env_t *env;
    op_t                   *ops;
    size_t                  n, room;
    uint64_t                gen;      /* batches flushed so far */
    int                     async;    /* the asynchronous form: device messages, no wait */
    hp_status_t             failed;   /* the first failed batch's status (sticky) */
} queue_t;

#define Q(tp) ((queue_t *)(tp)->impl.ptr[0])
#define ALIGN(x) (((x) + 15) & ~(size_t)15)

static hp_status_t post(hp_transport_t *tp, op_t op, hp_req_t *req)
{
    queue_t *q = Q(tp);
    if (q->n == q->room) {
        size_t room = q->room ? 2 * q->room : 16;
        op_t *o = realloc(q->ops, room * sizeof(op_t));
        if (o == NULL)
            return HP_ERR_NOMEM;
        q->ops = o;
        q->room = room;
    }
    q->ops[q->n++] = op;
    req->impl.u64[0] = q->gen;
    return HP_OK;
}

/* The asynchronous form: the held posts as one group on the stream, on the
 * messages' own device memory, ordered after their producers and before
 * their consumers; nothing waits. */
static hp_status_t flush_async(hp_transport_t *tp)
{
    queue_t *q = Q(tp);
    const hp_tp_nccl_env_t *e = q->env;
    hp_status_t st = HP_OK;
    double t0 = hp_now();

    if (e->order_in != NULL)
        HP_CHECK_KEEP(e->order_in(e->ctx), st);
    /* the whole group is issued, whatever fails inside it (as below) */
    HP_CHECK_KEEP(e->group_start(e->ctx), st);
    for (size_t i = 0; i < q->n; i++) {
        op_t *o = &q->ops[i];
        HP_CHECK_KEEP(o->send ? e->send(e->ctx, o->src, o->cap, o->peer) : e->recv(e->ctx, o->dst, o->cap, o->peer),
                      st);
    }
    HP_CHECK_KEEP(e->group_end(e->ctx), st);
    if (e->order_out != NULL)
        HP_CHECK_KEEP(e->order_out(e->ctx), st);
    q->n = 0;
    q->gen++;
    tp->t_wait += hp_now() - t0;
    if (st != HP_OK && q->failed == HP_OK)
        q->failed = st;
    return q->failed;
}

/* Issue every held post as one group and wait for it.  A local failure
 * (a wait for the staging memory, a copy) still issues the group, so no
 * peer waits for a part of it; what arrives then is not copied back.  Only
 * where no rank has the staging memory (agreed) does no rank issue it. */
static hp_status_t flush(hp_transport_t *tp)
{
    queue_t *q = Q(tp);
    const hp_tp_nccl_env_t *e = q->env;
    size_t total = 0, off = 0;
    char *dev;
    hp_status_t st = HP_OK, local = HP_OK;
    double t0 = hp_now();

    if (q->n == 0)
        return q->failed;
    if (q->async)
        return flush_async(tp);
    for (size_t i = 0; i < q->n; i++)
        total += ALIGN(q->ops[i].cap);
    dev = e->staging(e->ctx, HP_MAX(total, 16), &local);
    if (dev == NULL) {
        st = local != HP_OK ? local : HP_ERR_NOMEM;
    } else {
        /* (a local failure: the memory may still be read by earlier work
         * queued on the device; the group itself is ordered after it) */
        st = local;
        for (size_t i = 0; local == HP_OK && i < q->n; i++) {
            if (q->ops[i].send)
                HP_CHECK_KEEP(e->h2d(e->ctx, dev + off, q->ops[i].src, q->ops[i].len), st);
            off += ALIGN(q->ops[i].cap);
        }
        HP_CHECK_KEEP(e->group_start(e->ctx), st);
        off = 0;
        for (size_t i = 0; i < q->n; i++) {
            op_t *o = &q->ops[i];
            HP_CHECK_KEEP(o->send ? e->send(e->ctx, dev + off, o->cap, o->peer)
                                  : e->recv(e->ctx, dev + off, o->cap, o->peer), st);
            off += ALIGN(o->cap);
        }
        HP_CHECK_KEEP(e->group_end(e->ctx), st);
        HP_CHECK_KEEP(e->sync(e->ctx), st);
    }
    off = 0;
    for (size_t i = 0; st == HP_OK && i < q->n; i++) {
        if (!q->ops[i].send)
            HP_CHECK_KEEP(e->d2h(e->ctx, q->ops[i].dst, dev + off, q->ops[i].cap), st);
        off += ALIGN(q->ops[i].cap);
    }
    q->n = 0;
    q->gen++;
    tp->t_wait += hp_now() - t0;
    if (st != HP_OK && q->failed == HP_OK)
        q->failed = st;
    return q->failed;
}

static hp_status_t nccl_isend(hp_transport_t *tp, const void *buf, size_t len, size_t cap, int peer,
                              hp_req_t *req)
{
    op_t op = {1, 0, buf, NULL, len, HP_MAX(cap, len), peer};
    /* (the message's bytes, as the MPI transport counts them: NCCL moves
     * the whole capacity, which the stats do not count) */
    tp->bytes_sent += len;
    return post(tp, op, req);
}

static hp_status_t nccl_irecv(hp_transport_t *tp, void *buf, size_t cap, int peer, int flags, hp_req_t *req)
{
    op_t op = {0, flags, NULL, buf, 0, cap, peer};
    return post(tp, op, req);
}

static hp_status_t nccl_wait(hp_transport_t *tp, hp_req_t *req)
{
    queue_t *q = Q(tp);
    /* a request of the batch still held: issue it now */
    if (req->impl.u64[0] == q->gen)
        return flush(tp);
    return q->failed;
}

static void nccl_progress(hp_transport_t *tp)
{
    (void)tp;   /* everything moves at the next wait */
}

/* The max of every rank's values, host-synchronously.  The collective
 * runs whatever failed on this rank (a peer waits for it).  A failure of
 * this rank alone (a wait, a copy) leaves the values those every rank
 * read where this rank could read them too, else its own (so its next
 * calls are its peers' wherever its values were theirs): the agreement
 * answers them, and the failure stays the transport's (every later wait
 * fails, so a run carries it to the call's failure agreement).  An error
 * of NCCL itself is returned. */
static hp_status_t nccl_agree(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n, const char *what)
{
    queue_t *q = Q(tp);
    const hp_tp_nccl_env_t *e = q->env;
    hp_status_t st = flush(tp), cs = HP_OK, local = HP_OK;
    void *dev = e->staging(e->ctx, HP_MAX(8 * n, 16), &local), *back;
    (void)what;
    if (dev == NULL)
        return st != HP_OK ? st : local != HP_OK ? local : HP_ERR_NOMEM;
    if (local == HP_OK)
        HP_CHECK_KEEP(e->h2d(e->ctx, dev, values, 8 * n), local);
    HP_CHECK_KEEP(e->max(e->ctx, dev, n, type == HP_TP_DOUBLE), cs);
    HP_CHECK_KEEP(e->sync(e->ctx), local);
    if (cs == HP_OK) {
        /* (read aside: a failed copy leaves this rank's own values whole) */
        hp_status_t rs = (back = malloc(8 * n)) == NULL ? HP_ERR_NOMEM : e->d2h(e->ctx, back, dev, 8 * n);
        if (rs == HP_OK)
            memcpy(values, back, 8 * n);
        else if (local == HP_OK)
            local = rs;
        free(back);
    }
    if (local != HP_OK && q->failed == HP_OK)
        q->failed = local;
    if (HP_ST_CLASS(st) == HP_ERR_NCCL)
        return st;
    return cs;
}

static hp_status_t nccl_iagree(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n, const char *what,
                               hp_req_t *req)
{
    /* host-synchronous: done at once (the values on the host; the
     * stream-ordered form's, on the device, is nccl_iagree_async) */
    req->active = 0;
    return nccl_agree(tp, type, values, n, what);
}

/* The asynchronous form's: the max enqueued on device values after the
 * held posts, complete in stream order. */
static hp_status_t nccl_iagree_async(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n, const char *what,
                                     hp_req_t *req)
{
    queue_t *q = Q(tp);
    const hp_tp_nccl_env_t *e = q->env;
    hp_status_t st = flush(tp);
    (void)what;
    req->active = 0;
    if (e->order_in != NULL)
        HP_CHECK_KEEP(e->order_in(e->ctx), st);
    HP_CHECK_KEEP(e->max(e->ctx, values, n, type == HP_TP_DOUBLE), st);
    if (e->order_out != NULL)
        HP_CHECK_KEEP(e->order_out(e->ctx), st);
    return st;
}

static hp_status_t nccl_group(hp_transport_t *tp)
{
    (void)tp;   /* every batch is a group already */
    return HP_OK;
}

static void nccl_fini(hp_transport_t *tp)
{
    queue_t *q = Q(tp);
    if (q != NULL) {
        free(q->ops);
        free(q);
    }
    tp->impl.ptr[0] = NULL;
}

const hp_tp_ops_t hp_tp_nccl_ops = {
    .name = "nccl",
    .flags = HP_TP_PHASED,
    .isend = nccl_isend,
    .irecv = nccl_irecv,
    .wait = nccl_wait,
    .progress = nccl_progress,
    .agree = nccl_agree,
    .iagree = nccl_iagree,
    .group_begin = nccl_group,
    .group_end = nccl_group,
    .fini = nccl_fini,
};

static const hp_tp_ops_t hp_tp_nccl_async_ops = {
    .name = "nccl-async",
    .flags = HP_TP_PHASED,
    .isend = nccl_isend,
    .irecv = nccl_irecv,
    .wait = nccl_wait,
    .progress = nccl_progress,
    .agree = nccl_agree,
    .iagree = nccl_iagree_async,
    .group_begin = nccl_group,
    .group_end = nccl_group,
    .fini = nccl_fini,
};

hp_status_t hp_tp_nccl_init_async(hp_transport_t *tp, const hp_tp_nccl_env_t *env, int rank, int size)
{
    hp_status_t st = hp_tp_nccl_init(tp, env, rank, size);
    if (st == HP_OK) {
        Q(tp)->async = 1;
        tp->ops = &hp_tp_nccl_async_ops;
    }
    return st;
}

hp_status_t hp_tp_nccl_init(hp_transport_t *tp, const hp_tp_nccl_env_t *env, int rank, int size)
{
    queue_t *q = calloc(1, sizeof(*q));
    memset(tp, 0, sizeof(*tp));
    if (q == NULL)
        return HP_ERR_NOMEM;
    q->env = env;
    tp->impl.ptr[0] = q;
    tp->ops = &hp_tp_nccl_ops;
    tp->rank = rank;
    tp->size = size;
    return HP_OK;
}
