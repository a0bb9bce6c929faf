/*
 * The NCCL front end's table for the driver (hp_front.h), for
 * HIPRESS_NCCL=compress: an ncclAllReduce of float32, float16 or bfloat16
 * with ncclSum or ncclAvg, outside the user's groups, runs the driver's
 * steps over the NCCL transport (ncclSend/ncclRecv groups on the caller's
 * stream, src/transport/hp_tp_nccl.c).  So a call gives the MPI path's
 * bits for the same plan, data, call number and residuals, and the same
 * bits on every rank; ncclAvg then divides by N.
 *
 * A steady-state call of a format with device messages is stream-ordered:
 * the codec's streams join the caller's, the messages stay in device
 * memory, the failure agreement and the NaN of a failed call are on the
 * device, and nothing on the host waits.  Every other call is
 * host-synchronous (it waits for the caller's stream, stages the messages
 * through host memory), every wait bounded and watched.  The two forms
 * make the same NCCL calls, so ranks that took different forms still
 * match.  A failed call (a message a decoder rejects, a rank's local
 * failure) is NaN on every rank and returns ncclSuccess; an error of NCCL
 * itself is returned as NCCL's.  The interposition is mpi_wrappers/hp_nccl_wrap.c.
 */
#define _GNU_SOURCE
#include "hp_front_nccl.h"
#include "hp_front.h"
#include "hp_nccl_elem.h"
#include "hp_global.h"
#include "hp_comp.h"
#include "hp_ops.h"
#include "hp_watchdog.h"
#include <stdlib.h>
#include <string.h>

#define INPUT_WAIT "a compressed ncclAllReduce's wait for its input"

static const hp_gpu_ops_v2_t *codec(void)
{
    return hp_gpu_codec();
}

static hp_nccl_ctx_t *ctx_of(const hp_dcall_t *d)
{
    return d->fctx;
}

/* The communicator's size and rank (at its first call), and the device
 * memory its agreements and messages use, in the context of the buffers. */
static hp_status_t nccl_ready(hp_comm_t *c, hp_dcall_t *d)
{
    hp_nccl_ctx_t *t = ctx_of(d);
    hp_gpu_ptr_t where;
    hp_status_t st;

    if (c->size == 0 && (st = hp_nccl_size(t, &c->size, &c->rank)) != HP_OK)
        return st;
    if (c->msgs.p == NULL) {
        /* (the user's buffer's context: its first call's memory, in begin) */
        hp_gpu_ptr_query(d->recv, &where);
        c->msgs.where = where;
    }
    return HP_OK;
}

/* The call's transport and memory, and its input: the caller's stream
 * ordered after the communicator's previous call; a call that may be
 * stream-ordered joins the codec's streams to the caller's (what reads the
 * input first is the codec's), any other waits for the stream. */
static hp_status_t nccl_begin(hp_comm_t *c, hp_dcall_t *d)
{
    hp_nccl_ctx_t *t = ctx_of(d);
    const hp_gpu_ops_v2_t *g = codec();
    hp_gpu_ptr_t kinds[2];
    int candidate = hp_cfg_i(&c->cfg, HP_S_NCCL_ASYNC) == HP_NCCL_ASYNC_AUTO && !hp_cfg_i(&c->cfg, HP_S_VERIFY);
    hp_status_t st = HP_OK, order = HP_OK;

    /* after the communicator's previous call, whatever its stream, as NCCL
     * orders one communicator's operations: a stream-ordered one's work is
     * queued on its codec context's streams (their release events), and
     * this call's staging and messages reuse its memory */
    if (c->last_async && c->last_cx != NULL && g != NULL && g->stream_release(c->last_cx, t->stream) != HP_GPU_OK) {
        HP_WARN("nccl: cannot order a compressed ncclAllReduce after the communicator's previous one on another "
                "stream: %s", g->base.last_error());
        order = HP_ERR_DEVICE;
    }
    /* (a failed wait is this rank's local failure: the call still makes
     * every exchange, and fails at its failure agreement) */
    if (!candidate)
        hp_nccl_ctx_local(t, hp_nccl_stream_wait(t, INPUT_WAIT));
    HP_CHECK_GOTO(hp_tp_nccl_init(&t->tp, &t->env, c->rank, c->size), st, out);
    d->tp = &t->tp;
    hp_mem_begin_owned(&d->mem, d->recv, &c->owner);
    if (c->msgs.p == NULL) {
        /* at the first call, in its stream order: what its agreements need
         * (every rank has it, or says it cannot compress; the settings
         * agreement of a rank without it runs on the user's buffer,
         * hp_nccl_ctx.h) */
        t->borrow = d->recv;
        t->borrow_bytes = d->count * (d->elem == HP_ELEM_F32 ? 4 : 2);
        if (hp_nccl_dbuf(t, &c->msgs, &c->msgs.where, 65536, d->mem.cx, "compressed messages") == HP_OK)
            c->msgs.agreed = c->msgs.bytes;
    }
    hp_gpu_ptr_query(d->recv, &kinds[0]);
    kinds[1] = kinds[0];
    d->local_ok = g != NULL && d->mem.err == HP_OK && c->msgs.p != NULL &&
                  hp_gpu_compress_route(&c->cfg, kinds, d->recv, d->recv);
    t->joined = candidate && d->mem.cx != NULL && g->stream_join(d->mem.cx, t->stream) == HP_GPU_OK;
    if (candidate && !t->joined)
        hp_nccl_ctx_local(t, hp_nccl_stream_wait(t, INPUT_WAIT));
    hp_nccl_ctx_local(t, order);
    if (t->local != HP_OK && d->mem.err == HP_OK)
        d->mem.err = t->local;
out:
    return st;
}

static hp_status_t nccl_widen(hp_comm_t *c, hp_dcall_t *d)
{
    const void *src = d->send != NULL ? d->send : d->recv;
    d->data = d->recv;
    if (d->elem == HP_ELEM_F32)
        return HP_OK;
    /* the copy is the input from here on */
    d->send = NULL;
    return hp_nccl_widen(c, ctx_of(d), &d->mem, src, d->count, d->elem, &d->data);
}

/* The user's reduction (ncclAvg as asked), waited for. */
static hp_status_t nccl_plain(hp_comm_t *c, hp_dcall_t *d, const void *send)
{
    hp_nccl_ctx_t *t = ctx_of(d);
    ncclRedOp_t op = ncclSum;
    hp_status_t st = HP_OK;
    (void)c;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    if (d->avg)
        op = ncclAvg;
    t->averaged = d->avg;
#endif
    /* the input in the caller's stream order: its widened copy (the codec's
     * streams) included */
    if (t->joined && codec()->stream_release(d->mem.cx, t->stream) != HP_GPU_OK)
        hp_nccl_ctx_local(t, hp_nccl_stream_wait(t, INPUT_WAIT));
    HP_CHECK_GOTO(hp_nccl_allreduce_op(t, send != NULL ? send : d->data, d->data, d->count, ncclFloat32, op,
                                       "an ncclAllReduce the plan sent plain"),
                  st, out);
    /* (a failed wait: NCCL's result is still every rank's, in stream order,
     * and what the codec does with it next waits for it on the device) */
    if (hp_nccl_stream_wait(t, "an ncclAllReduce the plan sent plain") != HP_OK && d->mem.cx != NULL &&
        codec()->stream_join(d->mem.cx, t->stream) != HP_GPU_OK)
        st = HP_ERR_DEVICE;
out:
    return st;
}

/* The device memory a compressed run may ask of the communicator's
 * (the agreements' 64 bytes, then the messages: the host-synchronous
 * form's staging of one flush, or the stream-ordered form's message
 * slots), bounded from agreed values only, so every rank reserves alike:
 * the algorithms' largest, allgather's, holds 2 N P slots of a part's
 * capacity (each rounded to 64 bytes), in the worker's or the sum codec's
 * format. */
static size_t reserve_bytes(const hp_comm_t *c, const hp_dcall_t *d, const hp_plan_t *plan, const hp_codecs_t *cc,
                            int sum_kind)
{
    const size_t N = (size_t)c->size, P = HP_MAX(plan->parts, 1) * N;
    size_t cap = HP_MAX(hp_msg_max_bytes(cc->kind, d->count, cc->p), hp_msg_max_bytes(sum_kind, d->count, cc->p));
    cap = HP_MAX(cap, hp_msg_max_bytes(hp_kind_none, d->count, cc->p));
    return 64 + (2 * N + 2) * cap + 2 * N * (P + 1) * (64 + HP_MSG_EXCEPT_BYTES + 64);
}

/* The run's device memory (by agreement where it grows: hp_nccl_agree_ok),
 * then whether it is stream-ordered: a steady-state call (not an
 * exploration) of ring, ps, allgather or tree on formats with device
 * messages, or a built-in collective compressor's device run (its sums
 * the `none` ring).  The same choice on every rank (agreed settings and
 * plan); a rank that cannot set it up runs the host-synchronous form,
 * which makes the same NCCL calls. */
static hp_status_t nccl_prepare(hp_comm_t *c, hp_dcall_t *d, const hp_plan_t *plan, int explore,
                                const hp_codecs_t *cc, int sum_kind)
{
    hp_nccl_ctx_t *t = ctx_of(d);
    const size_t need = reserve_bytes(c, d, plan, cc, sum_kind);
    const int algo = plan->algo, kind = cc->kind;
    const hipress_comp_params_t *p = cc->p;
    hp_status_t st;
    int ok, all = 0;

    d->async = 0;
    t->cx = d->mem.cx;
    if (need > c->msgs.agreed) {
        /* the same on every rank: each grows, in the call's stream order
         * (after the stream: the old memory's last users), and they agree
         * (a rank whose wait failed cannot grow, and says so) */
        ok = hp_nccl_stream_wait(t, "a compressed ncclAllReduce's wait before growing its device messages") == HP_OK;
        if (ok)
            c->dev_busy = 0;
        ok = ok && hp_nccl_dbuf(t, &c->msgs, &c->msgs.where, need, d->mem.cx, "compressed messages") == HP_OK;
        if ((st = hp_nccl_agree_ok(t, ok, &all)) != HP_OK)
            return st;
        if (!all)
            return HP_ERR_NOMEM;
        c->msgs.agreed = c->msgs.bytes;
        /* (the agreement ran on the caller's stream: the codec's streams
         * wait for it again before they read the input) */
        if (t->joined && codec()->stream_join(d->mem.cx, t->stream) != HP_GPU_OK)
            t->joined = 0;
    }
    /* what failed on this rank alone so far fails the run (carried to the
     * failure agreement) */
    if (t->local != HP_OK && d->mem.err == HP_OK)
        d->mem.err = t->local;
    if (!t->joined)
        return HP_OK;
    if (explore || d->mem.cx == NULL || d->mem.err != HP_OK)
        ok = 0;
    else if (hp_comp_is_collective(kind))
        ok = algo == HP_ALGO_AUTO && kind < HP_BUILTIN_COUNT && hp_mem_device_msgs_format(hp_kind_none, p);
    else
        ok = (algo == HP_ALGO_RING || algo == HP_ALGO_PS || algo == HP_ALGO_ALLGATHER || algo == HP_ALGO_TREE) &&
             hp_mem_device_msgs_format(kind, p) && (sum_kind == kind || hp_mem_device_msgs_format(sum_kind, p));
    if (ok) {
        hp_tp_fini(&t->tp);
        if (hp_tp_nccl_init_async(&t->tp, &t->aenv, c->rank, c->size) == HP_OK &&
            hp_mem_device_msgs(&d->mem, hp_nccl_async_msgs, t) == HP_OK) {
            d->async = 1;
            return HP_OK;
        }
        hp_tp_fini(&t->tp);
        HP_WARN("nccl: cannot start a stream-ordered compressed ncclAllReduce (%s): this rank runs it "
                "host-synchronously", codec()->base.last_error());
        if (hp_tp_nccl_init(&t->tp, &t->env, c->rank, c->size) != HP_OK)
            d->mem.err = HP_ERR_NOMEM;
    }
    /* (the codec's streams joined the caller's: the host form waits) */
    if (hp_nccl_stream_wait(t, INPUT_WAIT) != HP_OK && d->mem.err == HP_OK)
        d->mem.err = HP_ERR_DEVICE;
    t->joined = 0;
    return HP_OK;
}

/* This rank's failure flag of a stream-ordered call: one non-negative
 * int64, the local failure in its high half (1.0f's bits), the codec's
 * sticky flag (a message rejected on the device) in its low half. */
static hp_status_t nccl_async_flag(hp_comm_t *c, hp_dcall_t *d, hp_status_t st)
{
    const hp_gpu_ops_v2_t *g = codec();
    uint32_t *word = NULL;
    /* (the messages' memory may have grown since the call began) */
    d->dflag = c->msgs.p;
    if (d->mem.cx == NULL || d->dflag == NULL)
        return HP_ERR_DEVICE;
    if (g->fill(d->mem.cx, (float *)d->dflag, st != HP_OK ? 1.0f : 0.0f, 2) != HP_GPU_OK ||
        g->bad_word(d->mem.cx, &word) != HP_GPU_OK || g->copy(d->mem.cx, d->dflag, word, 4) != HP_GPU_OK)
        return HP_ERR_DEVICE;
    return HP_OK;
}

static hp_status_t nccl_finish(hp_comm_t *c, hp_dcall_t *d, hp_status_t st)
{
    hp_nccl_ctx_t *t = ctx_of(d);
    hp_status_t fs = HP_OK;
    if (d->async) {
        /* outcome on the device: ncclAvg's division, then NaN where any
         * rank failed (the agreement's flag) */
        const hp_gpu_ops_v2_t *g = codec();
        if ((d->avg && g->divide(d->mem.cx, d->data, d->count, (float)c->size) != HP_GPU_OK) ||
            g->nan_if(d->mem.cx, d->data, d->count, d->dflag, 8) != HP_GPU_OK)
            fs = HP_ERR_DEVICE;
        c->dev_busy = 1;
    } else if (st != HP_OK) {
        hp_nccl_fill_nan(&d->mem, d->data, d->count);
        d->mem.ops->sync(&d->mem);
    } else if (d->avg && !t->averaged) {
        fs = hp_nccl_divide(&d->mem, d->data, d->count, c->size);
    }
    HP_CHECK_KEEP(hp_nccl_narrow(&d->mem, d->data, d->recv, d->count, d->elem), fs);
    return fs;
}

/* The end: the caller's stream waits for the codec's (stream-ordered), or
 * the codec's work is waited for; the call's transport released. */
static hp_status_t nccl_end(hp_comm_t *c, hp_dcall_t *d)
{
    hp_nccl_ctx_t *t = ctx_of(d);
    const hp_gpu_ops_v2_t *g = codec();
    hp_status_t st = HP_OK;
    if (d->mem.cx != NULL && c->owner != NULL) {
        c->last_cx = d->mem.cx;
        c->last_where = d->mem.where;
        c->last_async = d->async;
    }
    if (d->async && d->mem.cx != NULL) {
        if (g->stream_release(d->mem.cx, t->stream) != HP_GPU_OK || g->call_release(d->mem.cx) != HP_GPU_OK)
            st = HP_ERR_DEVICE;
        d->mem.cx = NULL;
    } else {
        /* the caller's stream after the codec's work too, whatever the
         * host's wait for it says (a failed one leaves a failed call's NaN
         * still queued there) */
        if (d->mem.cx != NULL && g->stream_release(d->mem.cx, t->stream) != HP_GPU_OK)
            st = HP_ERR_DEVICE;
        HP_CHECK_KEEP(hp_mem_end(&d->mem), st);
        /* (not waited for: the next call orders itself after it, as after a
         * stream-ordered one) */
        if (st != HP_OK)
            c->last_async = 1;
    }
    HP_CHECK_KEEP(hp_nccl_ctx_end(t), st);
    hp_tp_fini(&t->tp);
    return st;
}

/* HIPRESS_VERIFY: the real ncclAllReduce of a device copy of the data.
 * Every rank first agrees that every rank has the memory for it, so no
 * rank runs it alone. */
static hp_status_t nccl_exact(hp_comm_t *c, hp_dcall_t *d, float *out)
{
    hp_nccl_ctx_t *t = ctx_of(d);
    const hp_gpu_ops_v2_t *g = codec();
    const size_t bytes = HP_MAX(d->count, 1) * sizeof(float);
    const char *what = "HIPRESS_VERIFY's exact ncclAllReduce";
    int64_t missing;
    void *dev = NULL;
    hp_status_t st = HP_OK;

    missing = out == NULL || g->dev_alloc(&d->mem.where, bytes, &dev) != HP_GPU_OK;
    HP_CHECK_GOTO(hp_tp_agree(d->tp, HP_TP_INT64, &missing, 1, "HIPRESS_VERIFY's memory"), st, out);
    if (missing) {
        if (c->rank == 0)
            HP_WARN("nccl: HIPRESS_VERIFY: a rank has no memory for the exact sum of %zu floats: not verified",
                    d->count);
        st = HP_ERR_NOMEM;
        goto out;
    }
    /* (the input's producers on the codec's streams, a widening or the
     * copy of sendbuff, are done before the copy is summed) */
    d->mem.ops->copy(&d->mem, dev, d->data, d->count * sizeof(float));
    HP_CHECK_KEEP(d->mem.ops->sync(&d->mem), st);
    HP_CHECK_KEEP(hp_nccl_allreduce_op(t, dev, dev, d->count, ncclFloat32, ncclSum, what), st);
    HP_CHECK_KEEP(hp_nccl_stream_wait(t, what), st);
    if (st == HP_OK && g->base.memcpy_d2h(out, dev, d->count * sizeof(float), &d->mem.where) != HP_GPU_OK)
        st = HP_ERR_DEVICE;
    if (st == HP_OK && d->avg)
        hp_ops_get(HP_ISA_AUTO)->div(out, d->count, (float)c->size);
out:
    if (dev != NULL)
        g->dev_free(&d->mem.where, dev);
    return st;
}

const hp_front_t hp_front_nccl = {
    .name = "nccl",
    .prefix = "nccl: ",
    .call = "ncclAllReduce",
    .call_desc = "an ncclAllReduce",
    .on_failure = "; the result is NaN",
    .id = HP_FRONT_NCCL,
    .flags = 0,
    .ready = nccl_ready,
    .begin = nccl_begin,
    .widen = nccl_widen,
    .plain = nccl_plain,
    .prepare = nccl_prepare,
    .finish = nccl_finish,
    .end = nccl_end,
    .exact = nccl_exact,
    .async_flag = nccl_async_flag,
};

/* NCCL's result of a status: NCCL's own code where an NCCL call failed, a
 * device or memory failure as NCCL would say it; a call that failed on
 * every rank alike (its result NaN everywhere) is ncclSuccess. */
static ncclResult_t nccl_native(hp_status_t st)
{
    switch (HP_ST_CLASS(st)) {
    case HP_ERR_NCCL:    return HP_ST_CAUSE(st) != 0 ? (ncclResult_t)HP_ST_CAUSE(st) : ncclInternalError;
    case HP_ERR_DEVICE:  return ncclUnhandledCudaError;
    case HP_ERR_NOMEM:   return ncclSystemError;
    case HP_ERR_INVALID: return ncclInvalidArgument;
    default:             return ncclSuccess;
    }
}

int hp_nccl_allreduce(hp_comm_t *c, const hp_nccl_xport_t *x, const void *sendbuff, void *recvbuff, size_t count,
                      int elem, int avg, ncclComm_t comm, cudaStream_t stream, hp_status_t pre, ncclResult_t *rc_p,
                      int *reason_p)
{
    hp_nccl_ctx_t t;
    hp_dcall_t d;
    hp_status_t st;

    *rc_p = ncclSuccess;
    memset(&d, 0, sizeof(d));
    hp_nccl_ctx_init(&t, x, c, comm, stream, hp_cfg_d(&c->cfg, HP_S_TIMEOUT));
    hp_nccl_ctx_local(&t, pre);
    d.send = sendbuff == recvbuff ? NULL : sendbuff;
    d.recv = recvbuff;
    d.count = count;
    d.elem = elem;
    d.avg = avg;
    d.local_ok = 1;
    d.mem_kind = 1;   /* NCCL's buffers: device memory on every rank */
    d.fctx = &t;
    if (hp_drive(c, &d, &st, reason_p) == HP_DRIVE_PASS)
        return 0;
    *rc_p = t.err != ncclSuccess ? t.err : nccl_native(st);
    return 1;
}

int hp_nccl_residual(hp_comm_t *c, const void *buf, size_t count, float *out)
{
    hp_res_buf_t *rb = c != NULL ? hp_residual_buffer(c->res, (uintptr_t)buf, count, 0, HP_LAYOUT_TRUST, NULL) : NULL;
    if (rb == NULL || rb->len[HP_RES_R] != count || rb->vec[HP_RES_R] == NULL) {
        memset(out, 0, count * sizeof(float));
        return 0;
    }
    return hp_mem_residual_read(rb, rb->vec[HP_RES_R], out, count);
}
