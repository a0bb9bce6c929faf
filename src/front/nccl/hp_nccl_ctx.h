/*
 * One ncclAllReduce's view of NCCL (src/front/nccl/hp_nccl_ctx.c): the caller's
 * communicator and stream, NCCL's real calls, the bound of the call's
 * waits, NCCL's first error, and the NCCL transport built on them (both
 * forms: host-synchronous and stream-ordered).  The NCCL front end's call
 * context (hp_dcall_t.fctx, src/front/nccl/hp_front_nccl.c).
 */
#ifndef HP_NCCL_CTX_H
#define HP_NCCL_CTX_H

#include "hp_comm.h"
#include "hp_tp_nccl.h"
#include <nccl.h>

/* The real NCCL functions the compressed path calls (never hipress' own
 * wrappers): the agreement's allreduce and the transport's point-to-point
 * calls and groups.  Every operation is enqueued on the caller's stream. */
typedef struct hp_nccl_xport {
    ncclResult_t (*allreduce)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
    ncclResult_t (*send)(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                         cudaStream_t stream);
    ncclResult_t (*recv)(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                         cudaStream_t stream);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    ncclResult_t (*count)(const ncclComm_t comm, int *count_p);
    ncclResult_t (*user_rank)(const ncclComm_t comm, int *rank_p);
    /* ncclCommGetAsyncError: polled after an enqueue that answered
     * ncclInProgress (a non-blocking communicator); may be NULL */
    ncclResult_t (*async_error)(ncclComm_t comm, ncclResult_t *async_p);
    const char *(*error_string)(ncclResult_t rc);   /* may be NULL */
} hp_nccl_xport_t;

typedef struct hp_nccl_ctx {
    const hp_nccl_xport_t *x;
    hp_comm_t             *c;         /* the communicator's state (its device memory) */
    ncclComm_t             comm;
    cudaStream_t           stream;
    double                 timeout;   /* HIPRESS_TIMEOUT: the bound of a poll of ncclInProgress */
    ncclResult_t           err;       /* NCCL's first error in this call: nothing more is enqueued */
    void                  *cx;        /* a stream-ordered call's codec context (its ordering hooks) */
    int                    averaged;  /* the result was divided by NCCL (ncclAvg of a plain plan) */
    int                    joined;    /* the codec's streams wait for the caller's (no host wait yet) */
    int                    held;      /* enqueues in progress: the state's enq is held (hp_comm_t) */
    int                    group_open;   /* the transport's group is open */
    /* the first failure of this rank alone in an exchange of the call (a
     * wait, a copy): the exchange still ran on every rank, with this
     * rank's part as it could be; the call fails at its failure agreement
     * (hp_nccl_ctx_local) */
    hp_status_t            local;
    int                    borrow_lost;  /* the borrowed bytes could not be saved: NaN at the end */
    /* a rank without the communicator's device memory still takes part in
     * the settings agreement: on the bytes of the user's buffer, saved on
     * the host and put back at the call's end */
    void                  *borrow, *saved;
    size_t                 borrow_bytes, saved_bytes;
    /* the transport's environments over this context: host-synchronous
     * (no ordering hooks), stream-ordered (hp_tp_nccl_init_async); the
     * call's transport */
    hp_tp_nccl_env_t       env, aenv;
    hp_transport_t         tp;
} hp_nccl_ctx_t;

/* A call's context on (comm, stream) of communicator state c with NCCL's
 * calls x and the poll bound timeout. */
void hp_nccl_ctx_init(hp_nccl_ctx_t *t, const hp_nccl_xport_t *x, hp_comm_t *c, ncclComm_t comm,
                      cudaStream_t stream, double timeout);

/* The end of a call's context: what it borrowed put back (or, where it
 * could not be saved, NaN: the call then fails on every rank alike, as a
 * pass-through of that buffer).  HP_OK or HP_ERR_DEVICE. */
hp_status_t hp_nccl_ctx_end(hp_nccl_ctx_t *t);

/* A failure of this rank alone (st) kept as the call's first (t->local):
 * st. */
hp_status_t hp_nccl_ctx_local(hp_nccl_ctx_t *t, hp_status_t st);

/* A host wait for the caller's stream: within the CUDA module's bound
 * (half of HIPRESS_TIMEOUT: the wait fails, naming `what`, with a
 * warning), watched by the no-progress watchdog (HIPRESS_TIMEOUT ends the
 * process naming it).  HP_OK or HP_ERR_DEVICE. */
hp_status_t hp_nccl_stream_wait(hp_nccl_ctx_t *t, const char *what);

/* The one poll of NCCL's answer ncclInProgress (a non-blocking
 * communicator's enqueue or group): async_error (ncclCommGetAsyncError) on
 * comm until it answers otherwise, at most `timeout` seconds (0: no bound),
 * and no longer once *closed is set (the communicator's end on another
 * thread; NULL: none).  NCCL's final answer; ncclInvalidUsage when the poll
 * fails or is closed; ncclSystemError after the bound, with a warning
 * naming `what` and saying `then` (what follows). */
ncclResult_t hp_nccl_poll(ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *), ncclComm_t comm, double timeout,
                          _Atomic int *closed, const char *what, const char *then);

/* The result rc of one enqueue on the communicator: ncclInProgress (a
 * non-blocking communicator) is polled out with ncclCommGetAsyncError, at
 * most t->timeout seconds (then a warning naming `what`, ncclSystemError);
 * an error is kept in t->err.  HP_OK when the operation is enqueued, else
 * NCCL's code (HP_ST_NCCL). */
hp_status_t hp_nccl_settle(hp_nccl_ctx_t *t, ncclResult_t rc, const char *what);

/* hipress' own enqueues on the communicator, each while it holds the
 * state's enq (so none runs after the communicator's end on another
 * thread: then, or after an NCCL error of the call, they are refused):
 * an ncclAllReduce on the caller's stream, settled (`what` names it); the
 * communicator's size and this rank. */
hp_status_t hp_nccl_allreduce_op(hp_nccl_ctx_t *t, const void *send, void *recv, size_t count,
                                 ncclDataType_t type, ncclRedOp_t op, const char *what);
hp_status_t hp_nccl_size(hp_nccl_ctx_t *t, int *size_p, int *rank_p);

/* Whether every rank has `ok` (*all_p), agreed with NCCL's own calls on
 * the communicator's device memory (never through the transport: it runs
 * inside the transport's flush), host-synchronously.  Every rank must call
 * it at the same point: where a need that is the same on every rank (a
 * function of agreed values) meets what every rank is known to hold. */
hp_status_t hp_nccl_agree_ok(hp_nccl_ctx_t *t, int ok, int *all_p);

/* hp_comm_dbuf for this call (cx: its codec context, in whose stream order
 * new memory is had), the new memory then released to the caller's stream
 * and waited for: memory of the stream-ordered allocator is valid only in
 * the order of its stream, and the caller's stream moves it with NCCL, the
 * module's own stream copies into it.  HP_OK when b holds the memory (a
 * failed wait for it is the call's local failure: hp_nccl_ctx_local), or
 * an error where it could not be had. */
hp_status_t hp_nccl_dbuf(hp_nccl_ctx_t *t, hp_dbuf_t *b, const hp_gpu_ptr_t *where, size_t bytes, void *cx,
                         const char *what);

/* A stream-ordered call's device memory (the communicator's msgs): the
 * failure agreement in its first 64 bytes, the messages after them.  At
 * least `bytes`, grown only after a wait for the stream (earlier calls may
 * still use it), or NULL. */
void *hp_nccl_async_dbuf(hp_nccl_ctx_t *t, size_t bytes);

/* The message slots' memory of a stream-ordered call (hp_mem_device_msgs'
 * msg_alloc, ctx a hp_nccl_ctx_t): `bytes` after the agreement's 64. */
void *hp_nccl_async_msgs(void *ctx, size_t bytes);

#endif
