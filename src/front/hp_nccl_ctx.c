/*
 * One compressed ncclAllReduce's view of NCCL (hp_nccl_ctx.h): its bounded
 * host waits for the caller's stream, the poll of an enqueue NCCL answers
 * with ncclInProgress (a non-blocking communicator), and the NCCL
 * transport's hooks on the caller's communicator and stream
 * (src/transport/hp_tp_nccl.h): groups, sends, receives and the
 * agreements' max, the host-synchronous form's copies and staging, the
 * stream-ordered form's ordering hooks (events: the stream waits for the
 * codec before a group, the codec for the stream after it).
 */
#define _GNU_SOURCE
#include "hp_nccl_ctx.h"
#include "hp_backend.h"
#include "hp_watchdog.h"
#include <sched.h>
#include <string.h>
#include <time.h>

static const hp_gpu_ops_v2_t *codec(void)
{
    return hp_gpu_codec();
}

/* ------------------------------------------------------ bounded waits */

int hp_nccl_stream_wait(hp_nccl_ctx_t *t, const char *what)
{
    const hp_gpu_ops_v2_t *g = codec();
    hp_wd_wait_t w;
    int rc;
    hp_wd_enter(&w, what, -1);
    rc = g->stream_wait != NULL ? g->stream_wait(t->stream, what) : g->base.stream_sync(t->stream);
    hp_wd_leave(&w);
    if (rc != HP_GPU_OK)
        HP_WARN("nccl: %s failed: %s", what, g->base.last_error());
    return rc == HP_GPU_OK ? 0 : -1;
}

int hp_nccl_settle(hp_nccl_ctx_t *t, ncclResult_t rc, const char *what)
{
    double t0;
    unsigned spins = 0;

    if (rc == ncclInProgress) {
        if (t->x->async_error == NULL) {
            HP_WARN("nccl: %s answered ncclInProgress, and this NCCL has no ncclCommGetAsyncError to wait for it",
                    what);
            rc = ncclInvalidUsage;
        }
        t0 = hp_now();
        while (rc == ncclInProgress) {
            ncclResult_t st = ncclInProgress;
            if (t->x->async_error(t->comm, &st) != ncclSuccess) {
                rc = ncclInvalidUsage;
                break;
            }
            rc = st;
            if (rc != ncclInProgress)
                break;
            if (t->timeout > 0 && hp_now() - t0 > t->timeout) {
                HP_WARN("nccl: %s was still in progress after %.0f s (ncclCommGetAsyncError answers "
                        "ncclInProgress; HIPRESS_TIMEOUT=%g s): the compressed ncclAllReduce fails and enqueues "
                        "nothing more on this communicator", what, hp_now() - t0, t->timeout);
                rc = ncclSystemError;
                break;
            }
            if (++spins > 64) {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            } else {
                sched_yield();
            }
        }
    }
    if (rc != ncclSuccess && t->err == ncclSuccess)
        t->err = rc;
    return rc == ncclSuccess ? 0 : -1;
}

/* ------------------------------------------------ the NCCL transport */

static int tp_group_start(void *c)
{
    hp_nccl_ctx_t *t = c;
    /* (ncclGroupStart only opens the thread's group: nothing to wait for) */
    return t->err == ncclSuccess && t->x->group_start() == ncclSuccess ? 0 : -1;
}

static int tp_group_end(void *c)
{
    hp_nccl_ctx_t *t = c;
    /* the group is closed whatever failed inside it (NCCL counts the depth) */
    return hp_nccl_settle(t, t->x->group_end(), "the transport's group of ncclSend and ncclRecv");
}

static int tp_send(void *c, const void *dev, size_t bytes, int peer)
{
    hp_nccl_ctx_t *t = c;
    if (t->err != ncclSuccess)
        return -1;
    return hp_nccl_settle(t, t->x->send(dev, bytes, ncclUint8, peer, t->comm, t->stream),
                          "an ncclSend of the transport");
}

static int tp_recv(void *c, void *dev, size_t bytes, int peer)
{
    hp_nccl_ctx_t *t = c;
    if (t->err != ncclSuccess)
        return -1;
    return hp_nccl_settle(t, t->x->recv(dev, bytes, ncclUint8, peer, t->comm, t->stream),
                          "an ncclRecv of the transport");
}

int hp_nccl_max(hp_nccl_ctx_t *t, void *dev, size_t n, int is_double)
{
    if (t->err != ncclSuccess)
        return -1;
    return hp_nccl_settle(t, t->x->allreduce(dev, dev, n, is_double ? ncclFloat64 : ncclInt64, ncclMax, t->comm,
                                             t->stream),
                          "an agreement's ncclAllReduce");
}

static int tp_max(void *c, void *dev, size_t n, int is_double)
{
    return hp_nccl_max(c, dev, n, is_double);
}

static int tp_sync(void *c)
{
    return hp_nccl_stream_wait(c, "a compressed ncclAllReduce's wait for its stream");
}

/* A host copy of the transport, watched (HIPRESS_TIMEOUT names it). */
static int watched_copy(void *c, void *dst, const void *src, size_t bytes, int to_device)
{
    const hp_gpu_ops_v2_t *g = codec();
    const hp_gpu_ptr_t *where = &((hp_nccl_ctx_t *)c)->msgs->where;
    hp_wd_wait_t w;
    int rc;
    hp_wd_enter(&w, to_device ? "a compressed ncclAllReduce's copy to the device"
                              : "a compressed ncclAllReduce's copy from the device", -1);
    rc = to_device ? g->base.memcpy_h2d(dst, src, bytes, where) : g->base.memcpy_d2h(dst, src, bytes, where);
    hp_wd_leave(&w);
    return rc == HP_GPU_OK ? 0 : -1;
}

static int tp_h2d(void *c, void *dev, const void *host, size_t bytes)
{
    return watched_copy(c, dev, host, bytes, 1);
}

static int tp_d2h(void *c, void *host, const void *dev, size_t bytes)
{
    return watched_copy(c, host, dev, bytes, 0);
}

/* (in the context of the buffers the agreement saw) */
static void *tp_staging(void *c, size_t bytes)
{
    hp_nccl_dbuf_t *b = ((hp_nccl_ctx_t *)c)->msgs;
    return hp_nccl_dev_grow(b, &b->where, bytes, "compressed messages") == 0 ? b->p : NULL;
}

static int tp_order_in(void *c)
{
    hp_nccl_ctx_t *t = c;
    return codec()->stream_release(t->cx, t->stream) == HP_GPU_OK ? 0 : -1;
}

static int tp_order_out(void *c)
{
    hp_nccl_ctx_t *t = c;
    return codec()->stream_join(t->cx, t->stream) == HP_GPU_OK ? 0 : -1;
}

void *hp_nccl_async_dbuf(hp_nccl_ctx_t *t, size_t bytes)
{
    hp_nccl_dbuf_t *b = t->msgs;
    /* grown in the call's stream order (earlier calls' use of it is before
     * on the codec's streams, which joined the caller's); without that,
     * after a wait */
    if (b->bytes < bytes && hp_gpu_module_v3() == NULL &&
        hp_nccl_stream_wait(t, "a compressed ncclAllReduce's wait before growing its device messages") != 0)
        return NULL;
    return hp_gpu_dev_grow(t->cx, &b->where, bytes, &b->p, &b->bytes, &b->where, "compressed messages") == 0 ? b->p
                                                                                                            : NULL;
}

void *hp_nccl_async_msgs(void *ctx, size_t bytes)
{
    char *p = hp_nccl_async_dbuf(ctx, 64 + bytes);
    return p != NULL ? p + 64 : NULL;
}

void hp_nccl_ctx_init(hp_nccl_ctx_t *t, const hp_nccl_xport_t *x, ncclComm_t comm, cudaStream_t stream,
                      double timeout, hp_nccl_dbuf_t *msgs)
{
    const hp_tp_nccl_env_t env = {t, tp_group_start, tp_group_end, tp_send, tp_recv, tp_max,
                                  tp_sync, tp_h2d, tp_d2h, tp_staging, NULL, NULL};
    memset(t, 0, sizeof(*t));
    t->x = x;
    t->comm = comm;
    t->stream = stream;
    t->timeout = timeout;
    t->err = ncclSuccess;
    t->msgs = msgs;
    t->env = env;
    t->aenv = env;
    t->aenv.order_in = tp_order_in;
    t->aenv.order_out = tp_order_out;
}
