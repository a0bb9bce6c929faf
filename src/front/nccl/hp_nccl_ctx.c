/*
 * One ncclAllReduce's view of NCCL (hp_nccl_ctx.h): its bounded host waits
 * for the caller's stream, the poll of an enqueue NCCL answers with
 * ncclInProgress (a non-blocking communicator), and the NCCL transport's
 * hooks on the caller's communicator and stream (src/transport/hp_tp_nccl.h):
 * groups, sends, receives and the agreements' max, the host-synchronous
 * form's copies and staging, the stream-ordered form's ordering hooks
 * (events: the stream waits for the codec before a group, the codec for
 * the stream after it).
 */
#define _GNU_SOURCE
#include "hp_nccl_ctx.h"
#include "hp_backend.h"
#include "hp_watchdog.h"
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const hp_gpu_ops_v2_t *codec(void)
{
    return hp_gpu_codec();
}

/* ------------------------------------------------------ bounded waits */

hp_status_t hp_nccl_ctx_local(hp_nccl_ctx_t *t, hp_status_t st)
{
    if (st != HP_OK && t->local == HP_OK)
        t->local = st;
    return st;
}

hp_status_t hp_nccl_stream_wait(hp_nccl_ctx_t *t, const char *what)
{
    const hp_gpu_ops_v2_t *g = codec();
    hp_wd_wait_t w;
    int rc;
    hp_wd_enter(&w, what, -1);
    rc = g->stream_wait != NULL ? g->stream_wait(t->stream, what) : g->base.stream_sync(t->stream);
    hp_wd_leave(&w);
    if (rc != HP_GPU_OK)
        HP_WARN("nccl: %s failed: %s", what, g->base.last_error());
    return rc == HP_GPU_OK ? HP_OK : HP_ERR_DEVICE;
}

ncclResult_t hp_nccl_poll(ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *), ncclComm_t comm, double timeout,
                          _Atomic int *closed, const char *what, const char *then)
{
    double t0 = hp_now();
    unsigned spins = 0;

    for (;;) {
        ncclResult_t st = ncclInProgress;
        if (async_error(comm, &st) != ncclSuccess)
            return ncclInvalidUsage;
        if (st != ncclInProgress)
            return st;
        if (closed != NULL && atomic_load_explicit(closed, memory_order_acquire))
            return ncclInvalidUsage;   /* (its end, on another thread, waits for this poll) */
        if (timeout > 0 && hp_now() - t0 > timeout) {
            HP_WARN("nccl: %s was still in progress after %.0f s (ncclCommGetAsyncError answers ncclInProgress; "
                    "HIPRESS_TIMEOUT=%g s)%s", what, hp_now() - t0, timeout, then);
            return ncclSystemError;
        }
        if (++spins > 64) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}

hp_status_t hp_nccl_settle(hp_nccl_ctx_t *t, ncclResult_t rc, const char *what)
{
    if (rc == ncclInProgress && t->x->async_error == NULL) {
        HP_WARN("nccl: %s answered ncclInProgress, and this NCCL has no ncclCommGetAsyncError to wait for it", what);
        rc = ncclInvalidUsage;
    } else if (rc == ncclInProgress) {
        rc = hp_nccl_poll(t->x->async_error, t->comm, t->timeout, &t->c->closed, what,
                          ": the compressed ncclAllReduce fails and enqueues nothing more on this communicator");
    }
    if (rc != ncclSuccess && t->err == ncclSuccess)
        t->err = rc;
    return rc == ncclSuccess ? HP_OK : HP_ST_NCCL(rc);
}

/* ------------------------------------------------------- enqueues */

/* An enqueue on the communicator begins: the state's enq held (once per
 * nesting: a group holds it from its start to its end), refused once the
 * communicator is closed (its end on another thread) or after an NCCL
 * error of this call (nothing more is enqueued then). */
static hp_status_t enq_enter(hp_nccl_ctx_t *t)
{
    if (t->held++ == 0)
        pthread_mutex_lock(&t->c->enq);
    if (atomic_load_explicit(&t->c->closed, memory_order_acquire) && t->err == ncclSuccess) {
        HP_WARN("nccl: the communicator was ended (ncclCommAbort, Destroy or Finalize) during a compressed "
                "ncclAllReduce: nothing more is enqueued on it");
        t->err = ncclInvalidUsage;
    }
    if (t->err == ncclSuccess)
        return HP_OK;
    if (--t->held == 0)
        pthread_mutex_unlock(&t->c->enq);
    return HP_ST_NCCL(t->err);
}

/* ... and ends, with the enqueue's status st. */
static hp_status_t enq_leave(hp_nccl_ctx_t *t, hp_status_t st)
{
    if (--t->held == 0)
        pthread_mutex_unlock(&t->c->enq);
    return st;
}

hp_status_t hp_nccl_allreduce_op(hp_nccl_ctx_t *t, const void *send, void *recv, size_t count,
                                 ncclDataType_t type, ncclRedOp_t op, const char *what)
{
    hp_status_t st = enq_enter(t);
    if (st != HP_OK)
        return st;
    return enq_leave(t, hp_nccl_settle(t, t->x->allreduce(send, recv, count, type, op, t->comm, t->stream), what));
}

hp_status_t hp_nccl_size(hp_nccl_ctx_t *t, int *size_p, int *rank_p)
{
    hp_status_t st = enq_enter(t);
    ncclResult_t rc;
    if (st != HP_OK)
        return st;
    if ((rc = t->x->count(t->comm, size_p)) == ncclSuccess)
        rc = t->x->user_rank(t->comm, rank_p);
    return enq_leave(t, rc == ncclSuccess ? HP_OK : HP_ST_NCCL(rc));
}

/* ------------------------------------------------ the NCCL transport */

static void *tp_staging(void *ctx, size_t bytes, hp_status_t *local_p);

/* A group holds the communicator from its start to its end (so it never
 * ends with a group of this thread open on it); one that could not open
 * is not closed. */
static hp_status_t tp_group_start(void *ctx)
{
    hp_nccl_ctx_t *t = ctx;
    hp_status_t st = enq_enter(t);
    ncclResult_t rc;
    /* (ncclGroupStart only opens the thread's group: nothing to wait for) */
    if (st != HP_OK)
        return st;
    if ((rc = t->x->group_start()) != ncclSuccess)
        return enq_leave(t, HP_ST_NCCL(rc));
    t->group_open = 1;
    return HP_OK;
}

static hp_status_t tp_group_end(void *ctx)
{
    hp_nccl_ctx_t *t = ctx;
    if (!t->group_open)
        return t->err == ncclSuccess ? HP_OK : HP_ST_NCCL(t->err);
    t->group_open = 0;
    /* the group is closed whatever failed inside it (NCCL counts the depth) */
    return enq_leave(t, hp_nccl_settle(t, t->x->group_end(), "the transport's group of ncclSend and ncclRecv"));
}

static hp_status_t tp_send(void *ctx, const void *dev, size_t bytes, int peer)
{
    hp_nccl_ctx_t *t = ctx;
    hp_status_t st = enq_enter(t);
    if (st != HP_OK)
        return st;
    return enq_leave(t, hp_nccl_settle(t, t->x->send(dev, bytes, ncclUint8, peer, t->comm, t->stream),
                                       "an ncclSend of the transport"));
}

static hp_status_t tp_recv(void *ctx, void *dev, size_t bytes, int peer)
{
    hp_nccl_ctx_t *t = ctx;
    hp_status_t st = enq_enter(t);
    if (st != HP_OK)
        return st;
    return enq_leave(t, hp_nccl_settle(t, t->x->recv(dev, bytes, ncclUint8, peer, t->comm, t->stream),
                                       "an ncclRecv of the transport"));
}

static hp_status_t tp_max(void *ctx, void *dev, size_t n, int is_double)
{
    return hp_nccl_allreduce_op(ctx, dev, dev, n, is_double ? ncclFloat64 : ncclInt64, ncclMax,
                                "an agreement's ncclAllReduce");
}

static hp_status_t tp_sync(void *ctx)
{
    return hp_nccl_ctx_local(ctx, hp_nccl_stream_wait(ctx, "a compressed ncclAllReduce's wait for its stream"));
}

/* A host copy of the transport, watched (HIPRESS_TIMEOUT names it). */
static hp_status_t watched_copy(void *ctx, void *dst, const void *src, size_t bytes, int to_device)
{
    const hp_gpu_ops_v2_t *g = codec();
    const hp_gpu_ptr_t *where = &((hp_nccl_ctx_t *)ctx)->c->msgs.where;
    hp_wd_wait_t w;
    int rc;
    hp_wd_enter(&w, to_device ? "a compressed ncclAllReduce's copy to the device"
                              : "a compressed ncclAllReduce's copy from the device", -1);
    rc = to_device ? g->base.memcpy_h2d(dst, src, bytes, where) : g->base.memcpy_d2h(dst, src, bytes, where);
    hp_wd_leave(&w);
    if (rc != HP_GPU_OK)
        HP_WARN("nccl: %s failed: %s", to_device ? "a compressed ncclAllReduce's copy to the device"
                                                 : "a compressed ncclAllReduce's copy from the device",
                g->base.last_error());
    return hp_nccl_ctx_local(ctx, rc == HP_GPU_OK ? HP_OK : HP_ERR_DEVICE);
}

static hp_status_t tp_h2d(void *ctx, void *dev, const void *host, size_t bytes)
{
    return watched_copy(ctx, dev, host, bytes, 1);
}

static hp_status_t tp_d2h(void *ctx, void *host, const void *dev, size_t bytes)
{
    return watched_copy(ctx, host, dev, bytes, 0);
}

static hp_status_t tp_order_in(void *ctx)
{
    hp_nccl_ctx_t *t = ctx;
    return codec()->stream_release(t->cx, t->stream) == HP_GPU_OK ? HP_OK : HP_ERR_DEVICE;
}

static hp_status_t tp_order_out(void *ctx)
{
    hp_nccl_ctx_t *t = ctx;
    return codec()->stream_join(t->cx, t->stream) == HP_GPU_OK ? HP_OK : HP_ERR_DEVICE;
}

/* Whether every rank has `ok`, agreed on the communicator's device memory
 * (what the ranks hold in common: its first 64 bytes), on the stream, with
 * NCCL's own calls (not the transport's: this runs inside its flush). */
hp_status_t hp_nccl_agree_ok(hp_nccl_ctx_t *t, int ok, int *all_p)
{
    /* (bytes 16 to 24 of the 64 the messages leave: a stream-ordered call's
     * failure flag, bytes 0 to 8, may still be read on the device) */
    char *at = (char *)t->c->msgs.p + 16;
    int64_t v = !ok, back = v;
    hp_status_t st;
    /* the max runs whatever failed here: a failed copy or wait of this
     * rank is its local failure, and it goes by what every rank read where
     * it could read it too, else by its own answer */
    (void)tp_h2d(t, at, &v, sizeof(v));
    st = tp_max(t, at, 1, 0);
    if (st == HP_OK && tp_sync(t) == HP_OK && tp_d2h(t, &back, at, sizeof(back)) == HP_OK)
        v = back;
    *all_p = st == HP_OK && v == 0 && ok;
    return st;
}

hp_status_t hp_nccl_dbuf(hp_nccl_ctx_t *t, hp_dbuf_t *b, const hp_gpu_ptr_t *where, size_t bytes, void *cx,
                         const char *what)
{
    void *old = b->p;
    hp_status_t st = hp_comm_dbuf(t->c, b, where, bytes, cx, what);
    if (st != HP_OK || b->p == old || cx == NULL)
        return st;
    if (codec()->stream_release(cx, t->stream) != HP_GPU_OK) {
        HP_WARN("nccl: cannot order the caller's stream after new device memory for %s: %s", what,
                codec()->base.last_error());
        hp_nccl_ctx_local(t, HP_ERR_DEVICE);
    } else {
        hp_nccl_ctx_local(t, hp_nccl_stream_wait(t, "a compressed ncclAllReduce's wait for its new device memory"));
    }
    return HP_OK;
}

void *hp_nccl_async_dbuf(hp_nccl_ctx_t *t, size_t bytes)
{
    hp_dbuf_t *b = &t->c->msgs;
    int all = 0;
    if (b->p != NULL && bytes <= b->agreed)
        return b->p;
    /* Beyond what every rank holds: a run's requests, which differ from
     * rank to rank (an owner's shard), stay within the reserve its
     * preparation agreed (hp_front_nccl.c); what asks beyond it asks alike
     * on every rank (the plan's measurements), so every rank is here: each
     * grows, after the stream (the old memory's last users), and they
     * agree; where any could not, every rank answers NULL alike. */
    if (b->p == NULL)
        return NULL;
    {
        /* (a rank whose wait fails cannot grow: it says so, every rank
         * answers NULL alike) */
        int ok = hp_nccl_stream_wait(t, "a compressed ncclAllReduce's wait before growing its device messages") ==
                 HP_OK;
        if (ok)
            t->c->dev_busy = 0;
        ok = ok && hp_nccl_dbuf(t, b, &b->where, bytes, t->cx, "compressed messages") == HP_OK;
        if (hp_nccl_agree_ok(t, ok, &all) != HP_OK || !all)
            return NULL;
    }
    b->agreed = b->bytes;
    return b->p;
}

/* The host-synchronous form's staging: the communicator's device memory,
 * once the stream-ordered work that may still use it is done (a failed
 * wait for it: the memory all the same, with the local failure). */
static void *tp_staging(void *ctx, size_t bytes, hp_status_t *local_p)
{
    hp_nccl_ctx_t *t = ctx;
    *local_p = HP_OK;
    if (t->c->msgs.p == NULL) {
        /* (only the settings agreement gets here: it says this rank cannot
         * compress, and every rank passes through; the user's buffer of
         * the same count on every rank holds it) */
        if (t->borrow == NULL || bytes > HP_MIN(t->borrow_bytes, (size_t)65536))
            return NULL;
        if (t->saved == NULL && !t->borrow_lost) {
            t->saved_bytes = HP_MIN(t->borrow_bytes, (size_t)65536);
            if (hp_nccl_stream_wait(t, "a compressed ncclAllReduce's wait for its input") != HP_OK ||
                (t->saved = malloc(t->saved_bytes)) == NULL ||
                tp_d2h(t, t->saved, t->borrow, t->saved_bytes) != HP_OK) {
                free(t->saved);
                t->saved = NULL;
                t->borrow_lost = 1;
            }
        }
        if (t->borrow_lost)
            *local_p = hp_nccl_ctx_local(t, HP_ERR_DEVICE);
        return t->borrow;
    }
    if (t->c->dev_busy) {
        if (hp_nccl_stream_wait(t, "a compressed ncclAllReduce's wait for its device messages") != HP_OK)
            *local_p = hp_nccl_ctx_local(t, HP_ERR_DEVICE);
        else
            t->c->dev_busy = 0;
    }
    return hp_nccl_async_dbuf(t, bytes);
}

void *hp_nccl_async_msgs(void *ctx, size_t bytes)
{
    char *p = hp_nccl_async_dbuf(ctx, 64 + bytes);
    return p != NULL ? p + 64 : NULL;
}

hp_status_t hp_nccl_ctx_end(hp_nccl_ctx_t *t)
{
    hp_status_t st = HP_OK;
    if (t->saved != NULL) {
        st = tp_h2d(t, t->borrow, t->saved, t->saved_bytes);
        free(t->saved);
        t->saved = NULL;
    } else if (t->borrow_lost) {
        /* the agreement wrote over the buffer's first bytes, which could
         * not be saved: NaN there, which the pass-through sums into every
         * rank's result alike */
        float nan[256];
        size_t bytes = HP_MIN(t->borrow_bytes, (size_t)65536);
        for (size_t i = 0; i < 256; i++)
            nan[i] = NAN;
        for (size_t off = 0; st == HP_OK && off < bytes; off += sizeof(nan))
            st = tp_h2d(t, (char *)t->borrow + off, nan, HP_MIN(sizeof(nan), bytes - off));
    }
    return st;
}

void hp_nccl_ctx_init(hp_nccl_ctx_t *t, const hp_nccl_xport_t *x, hp_comm_t *c, ncclComm_t comm,
                      cudaStream_t stream, double timeout)
{
    const hp_tp_nccl_env_t env = {t, tp_group_start, tp_group_end, tp_send, tp_recv, tp_max,
                                  tp_sync, tp_h2d, tp_d2h, tp_staging, NULL, NULL};
    memset(t, 0, sizeof(*t));
    t->x = x;
    t->c = c;
    t->comm = comm;
    t->stream = stream;
    t->timeout = timeout;
    t->err = ncclSuccess;
    t->env = env;
    t->aenv = env;
    t->aenv.order_in = tp_order_in;
    t->aenv.order_out = tp_order_out;
}
