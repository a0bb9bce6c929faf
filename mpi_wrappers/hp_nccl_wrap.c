/*
 * NCCL interposition: ncclAllReduce, the group calls and the operations
 * that may join a group, the calls that make a communicator (whether it is
 * non-blocking) and the calls that end one.  Built when configure finds
 * nccl.h.  The real functions: src/front/nccl/hp_nccl_real.h.
 *
 * ncclAllReduce calls are classified (hp_eligible.h, the user's groups:
 * hp_nccl_group.h) and counted.  By default (HIPRESS_NCCL=pass) every call
 * goes to the real function with its arguments unchanged.  With
 * HIPRESS_NCCL=compress an eligible call outside the user's groups runs
 * the driver on its communicator's state (src/front/nccl/hp_front_nccl.c); one
 * that opens a group is held back until the group ends or grows.  Settings
 * load at the first call when the process never called MPI_Init (torchrun).
 *
 * Lifecycle.  Each communicator's state (hp_comm_t) lives in a registry
 * that holds one reference; a call holds another while it runs.
 * ncclCommDestroy, ncclCommFinalize and ncclCommAbort detach the state
 * (no new call finds it, and a new communicator at the same address starts
 * afresh), close it (a call in progress on another thread enqueues nothing
 * more on the communicator: hp_comm_close), call the real function, and
 * only then let go: PyTorch's watchdog aborts a communicator whose kernel
 * hangs, and nothing on that path may wait for the device (an aborted
 * state's device memory is kept and counted, never freed).
 */
#define _GNU_SOURCE
#include "hp_front_nccl.h"
#include "hp_front.h"
#include "hp_global.h"
#include "hp_gpu.h"
#include "hp_backend.h"
#include "hp_comp.h"
#include "hp_nccl_group.h"
#include "hp_nccl_real.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HP_WRAP HP_EXPORT

HP_REAL_DECL(ncclAllReduce);
HP_REAL_DECL(ncclGroupStart);
HP_REAL_DECL(ncclGroupEnd);
HP_REAL_DECL(ncclCommDestroy);
HP_REAL_DECL(ncclCommAbort);
HP_REAL_DECL(ncclCommFinalize);
HP_REAL_DECL(ncclCommSplit);
HP_REAL_DECL(ncclBroadcast);
HP_REAL_DECL(ncclBcast);
HP_REAL_DECL(ncclReduce);
HP_REAL_DECL(ncclAllGather);
HP_REAL_DECL(ncclReduceScatter);
HP_REAL_DECL(ncclSend);
HP_REAL_DECL(ncclRecv);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
HP_REAL_DECL(ncclAlltoAll);
HP_REAL_DECL(ncclGather);
HP_REAL_DECL(ncclScatter);
#endif
HP_REAL_DECL(ncclCommCount);
HP_REAL_DECL(ncclCommUserRank);
HP_REAL_DECL(ncclCommGetAsyncError);
HP_REAL_DECL(ncclGetErrorString);
HP_REAL_DECL(ncclCommInitRankConfig);
HP_REAL_DECL(ncclCommInitRank);

/* The communicators' states. */
static hp_registry_t reg = HP_REGISTRY_INIT;

/* The state of comm with a reference, made from the job's settings when
 * missing and `create`; NULL when none (or no memory). */
static hp_comm_t *comm_state(ncclComm_t comm, int create)
{
    hp_comm_t *c = hp_registry_get(&reg, comm);
    if (c != NULL || !create)
        return c;
    if ((c = hp_comm_new(&hp_front_nccl, comm, 0, 0)) == NULL)
        return NULL;
    hp_comm_get(c);   /* the caller's; the registry takes the first */
    hp_registry_add(&reg, c);
    return c;
}

/* The setting `id` of comm's state, or the job's. */
static long long comm_setting(ncclComm_t comm, int id)
{
    hp_comm_t *c = hp_registry_get(&reg, comm);
    long long v = hp_cfg_i(c != NULL ? &c->cfg : &hp_g.cfg, id);
    hp_comm_put(c);
    return v;
}

HP_EXPORT int hipress_nccl_comm_set(void *nccl_comm, const char *name, const char *value)
{
    hp_comm_t *c;
    char err[512];
    int rc = HIPRESS_OK;

    if (nccl_comm == NULL || name == NULL || value == NULL)
        return HIPRESS_ERR_INVALID;
    hp_settings_without_mpi();
    if ((c = comm_state((ncclComm_t)nccl_comm, 1)) == NULL)
        return HIPRESS_ERR_NOMEM;
    if (hp_comm_set(c, name, value, err, sizeof(err)) != HP_OK) {
        HP_WARN("hipress_nccl_comm_set: %s", err);
        rc = HIPRESS_ERR_INVALID;
    }
    hp_comm_put(c);
    return rc;
}

/* --------------------------------------------------------------- groups */

/* The user's groups, per thread as NCCL's own group state is. */
static __thread hp_nccl_group_t tls_group;

static void count_nccl(int r)
{
    atomic_fetch_add_explicit(&hp_g.stats.reason[HP_FRONT_NCCL][r], 1, memory_order_relaxed);
}

/* Under HIPRESS_NCCL=compress, a float ncclAllReduce that is the first
 * operation of a depth-1 group (PyTorch's one-call group) is held back, not
 * given to NCCL: at the outermost ncclGroupEnd, if it was alone, it runs
 * compressed after the (then empty) group; when a second operation enters
 * the group first, it is given to NCCL just before that operation, so NCCL
 * sees the user's group in its order.  Per thread, as groups are. */
typedef struct {
    int            valid;
    const void    *sendbuff;
    void          *recvbuff;
    size_t         count;
    ncclDataType_t datatype;
    ncclRedOp_t    op;
    ncclComm_t     comm;
    cudaStream_t   stream;
    ncclResult_t   err;   /* the held call, given to NCCL late, failed: said at ncclGroupEnd */
    int            unknown;   /* its capture query failed (allreduce_classify) */
} held_call_t;
static __thread held_call_t tls_held;

static int allreduce_compress(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, int unknown, ncclResult_t *rc_p);

/* Poll ncclCommGetAsyncError while comm answers ncclInProgress, at most
 * HIPRESS_TIMEOUT seconds; its final answer (ncclSystemError after the
 * timeout, with a warning naming `what`). */
static ncclResult_t wait_async(ncclComm_t comm, const char *what)
{
    __typeof__(&ncclCommGetAsyncError) poll = HP_REAL_PLAIN(ncclCommGetAsyncError);
    double t0 = hp_now(), timeout = hp_cfg_d(&hp_g.cfg, HP_S_TIMEOUT);
    ncclResult_t st = ncclInProgress;
    unsigned spins = 0;
    if (poll == NULL)
        return ncclSystemError;
    while (poll(comm, &st) == ncclSuccess && st == ncclInProgress) {
        if (timeout > 0 && hp_now() - t0 > timeout) {
            HP_WARN("nccl: %s was still in progress after %.0f s (HIPRESS_TIMEOUT=%g s)", what, hp_now() - t0,
                    timeout);
            return ncclSystemError;
        }
        if (++spins > 64) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    return st;
}

/* Give call h to NCCL now; its result. */
static ncclResult_t held_release_as(const held_call_t *h)
{
    __typeof__(&ncclAllReduce) real = HP_REAL(ncclAllReduce);
    return real != NULL ? real(h->sendbuff, h->recvbuff, h->count, h->datatype, h->op, h->comm, h->stream)
                        : ncclSystemError;
}

/* Give the held call to NCCL now. */
static void held_release(void)
{
    held_call_t *h = &tls_held;
    ncclResult_t rc;
    if (!h->valid)
        return;
    h->valid = 0;
    rc = held_release_as(h);
    if (rc != ncclSuccess && h->err == ncclSuccess)
        h->err = rc;
}

/* An NCCL operation enters the current group (if any). */
static hp_nccl_group_class_t group_op(void)
{
    int demoted = 0;
    hp_nccl_group_class_t cls = hp_nccl_group_op(&tls_group, &demoted);
    if (demoted) {   /* the group's first call is part of the user's group after all */
        count_nccl(HP_ELIG_GROUP);
        held_release();
    }
    return cls;
}

HP_WRAP ncclResult_t ncclGroupStart(void)
{
    __typeof__(&ncclGroupStart) real = HP_REAL(ncclGroupStart);
    ncclResult_t rc;
    if (real == NULL)
        return ncclSystemError;
    rc = real();
    /* NCCL counts the depth even when it reports an error later */
    hp_nccl_group_start(&tls_group);
    return rc;
}

HP_WRAP ncclResult_t ncclGroupEnd(void)
{
    __typeof__(&ncclGroupEnd) real = HP_REAL(ncclGroupEnd);
    ncclResult_t rc;
    if (real == NULL)
        return ncclSystemError;
    rc = real();
    if (hp_nccl_group_end(&tls_group)) {
        count_nccl(HP_ELIG_YES);   /* a group of one eligible call, as PyTorch makes */
        if (tls_held.valid) {
            /* it was alone: compressed after the empty group, or given to
             * NCCL on its own (the same operation) */
            held_call_t h = tls_held;
            ncclResult_t hrc = ncclSuccess;
            tls_held.valid = 0;
            /* a non-blocking communicator's (empty) group still in
             * progress: nothing may be enqueued on it before it is done */
            if (rc == ncclInProgress)
                rc = wait_async(h.comm, "the user's ncclGroupEnd before a held ncclAllReduce");
            /* (when the group failed, NCCL's error comes back and the held
             * call is not run) */
            if (rc == ncclSuccess && !allreduce_compress(h.sendbuff, h.recvbuff, h.count, h.datatype, h.op, h.comm,
                                                         h.stream, h.unknown, &hrc))
                hrc = held_release_as(&h);
            if (rc == ncclSuccess)
                rc = hrc;
        }
    }
    if (tls_group.depth == 0) {
        held_release();   /* (none should be left) */
        if (rc == ncclSuccess)
            rc = tls_held.err;
        tls_held.err = ncclSuccess;
    }
    return rc;
}

/* ------------------------------------------------------------ allreduce */

/* The element type of the compressed path (HP_ELEM_*), -1 for others. */
static int elem_of(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat32: return HP_ELEM_F32;
    case ncclFloat16: return HP_ELEM_F16;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case ncclBfloat16: return HP_ELEM_BF16;
#endif
    default: return -1;
    }
}

static int op_is_sum(ncclRedOp_t op)
{
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    if (op == ncclAvg)
        return 1;
#endif
    return op == ncclSum;
}

/* Classify and count one ncclAllReduce (one descriptor, as the MPI front
 * end's); eligible calls of a group that may hold only them are counted at
 * ncclGroupEnd.  Returns 1 when the call is eligible and outside any
 * group, 2 when it is eligible and the first of a depth-1 group (decided
 * at ncclGroupEnd), else 0.  *unknown_p: the query of whether the stream
 * is captured failed on this rank alone, so the call is taken as its peers
 * take it, to fail there on every rank alike (never given to NCCL alone
 * while they compress). */
static int allreduce_classify(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, int *unknown_p)
{
    hp_nccl_group_class_t cls;
    hp_call_desc_t d;
    hp_comm_t *c;
    const hp_config_t *cfg = &hp_g.cfg;
    hp_elig_t r;

    hp_settings_without_mpi();
    atomic_fetch_add_explicit(&hp_g.stats.calls[HP_FRONT_NCCL], 1, memory_order_relaxed);
    cls = group_op();
    memset(&d, 0, sizeof(d));
    c = comm != NULL ? hp_registry_get(&reg, comm) : NULL;
    if (c != NULL) {
        cfg = &c->cfg;
        d.opted_out = c->opted_out;
    }
    d.enabled = hp_cfg_i(&hp_g.cfg, HP_S_ENABLE) && hp_cfg_i(&hp_g.cfg, HP_S_GPU) != HP_GPU_SETTING_OFF;
    d.min_bytes = (size_t)hp_cfg_i(cfg, HP_S_MIN_BYTES);
    hp_comm_put(c);
    d.null_handle = comm == NULL;
    d.op_is_sum = op_is_sum(op);
    d.dtype_is_float = elem_of(datatype) >= 0;
    d.elem_size = datatype == ncclFloat32 ? 4 : 2;
    d.count = count > (size_t)LLONG_MAX ? -1 : (long long)count;
    d.sendbuf = sendbuff;
    d.recvbuf = recvbuff;
    d.in_place = sendbuff == recvbuff && recvbuff != NULL;
    d.in_user_group = cls == HP_NCCL_IN_USER_GROUP;
    r = hp_eligible(&d);
    *unknown_p = 0;
    if (r == HP_ELIG_YES) {
        /* last, as it costs a driver call */
        d.capturing = hp_gpu_stream_capturing((void *)stream);
        if (d.capturing == -2) {
            HP_WARN("nccl: cannot ask the driver whether the stream of an ncclAllReduce is being captured: the "
                    "call fails on every rank (NaN) rather than reach NCCL on this rank alone");
            d.capturing = 0;
            *unknown_p = 1;
        }
        r = hp_eligible(&d);
    }
    if (r == HP_ELIG_YES && cls == HP_NCCL_SOLE_SO_FAR) {
        hp_nccl_group_set_pending(&tls_group);
        return 2;
    }
    count_nccl(r);
    return r == HP_ELIG_YES && cls == HP_NCCL_NO_GROUP;
}

/* The real calls the compressed path makes: hipress' own groups and sends
 * bypass its wrappers. */
static int real_calls(hp_nccl_xport_t *x)
{
    x->allreduce = HP_REAL(ncclAllReduce);
    x->send = HP_REAL(ncclSend);
    x->recv = HP_REAL(ncclRecv);
    x->group_start = HP_REAL(ncclGroupStart);
    x->group_end = HP_REAL(ncclGroupEnd);
    x->count = HP_REAL_PLAIN(ncclCommCount);
    x->user_rank = HP_REAL_PLAIN(ncclCommUserRank);
    x->async_error = HP_REAL_PLAIN(ncclCommGetAsyncError);
    x->error_string = HP_REAL_PLAIN(ncclGetErrorString);
    return x->allreduce != NULL && x->send != NULL && x->recv != NULL && x->group_start != NULL &&
           x->group_end != NULL && x->count != NULL && x->user_rank != NULL;
}

/* HIPRESS_NCCL=compress: the compressed path takes a float32, float16 or
 * bfloat16 call.  Returns 1 when it did (*rc_p: the result). */
static int allreduce_compress(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, int unknown, ncclResult_t *rc_p)
{
    static hp_nccl_xport_t x;
    static _Atomic int have_x;
    hp_gpu_ptr_t where;
    hp_comm_t *c;
    int taken, reason, avg = 0;

    if (comm_setting(comm, HP_S_NCCL) != HP_NCCL_SETTING_COMPRESS || elem_of(datatype) < 0)
        return 0;
    if (!atomic_load_explicit(&have_x, memory_order_acquire)) {
        hp_nccl_xport_t y;
        if (!real_calls(&y))
            return 0;
        x = y;   /* (the same values from any thread) */
        atomic_store_explicit(&have_x, 1, memory_order_release);
    }
    /* NCCL's buffers are device memory on every rank: a host buffer (a
     * program's error, or a stand-in NCCL) goes to NCCL as it came */
    hp_gpu_ptr_query(recvbuff, &where);
    if (where.kind == HP_MEM_HOST || (c = comm_state(comm, 1)) == NULL)
        return 0;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    avg = op == ncclAvg;
#else
    (void)op;
#endif
    taken = hp_nccl_allreduce(c, &x, sendbuff, recvbuff, count, elem_of(datatype), avg, comm, stream,
                              unknown ? HP_ERR_DEVICE : HP_OK, rc_p, &reason);
    hp_comm_put(c);
    return taken;
}

HP_WRAP ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclAllReduce) real = HP_REAL(ncclAllReduce);
    ncclResult_t rc;
    int cand, unknown = 0;
    if (real == NULL)
        return ncclSystemError;
    cand = allreduce_classify(sendbuff, recvbuff, count, datatype, op, comm, stream, &unknown);
    if (cand == 1 && allreduce_compress(sendbuff, recvbuff, count, datatype, op, comm, stream, unknown, &rc))
        return rc;
    if (cand == 2 && elem_of(datatype) >= 0 && comm_setting(comm, HP_S_NCCL) == HP_NCCL_SETTING_COMPRESS) {
        /* the first call of a group: held until the group ends or grows */
        tls_held = (held_call_t){1, sendbuff, recvbuff, count, datatype, op, comm, stream, tls_held.err, unknown};
        return ncclSuccess;
    }
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

/* ---------------------------------- other operations (group members only) */

/* A wrapper that only tells the group tracking an operation entered. */
#define HP_NCCL_MEMBER(fn, params, args)                      \
    HP_WRAP ncclResult_t fn params                            \
    {                                                         \
        __typeof__(&fn) real = HP_REAL(fn);                   \
        if (real == NULL)                                     \
            return ncclSystemError;                           \
        group_op();                                           \
        return real args;                                     \
    }

HP_NCCL_MEMBER(ncclBroadcast,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                ncclComm_t comm, cudaStream_t stream),
               (sendbuff, recvbuff, count, datatype, root, comm, stream))
HP_NCCL_MEMBER(ncclBcast, (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream),
               (buff, count, datatype, root, comm, stream))
HP_NCCL_MEMBER(ncclReduce,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                int root, ncclComm_t comm, cudaStream_t stream),
               (sendbuff, recvbuff, count, datatype, op, root, comm, stream))
HP_NCCL_MEMBER(ncclAllGather,
               (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                cudaStream_t stream),
               (sendbuff, recvbuff, sendcount, datatype, comm, stream))
HP_NCCL_MEMBER(ncclReduceScatter,
               (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                ncclComm_t comm, cudaStream_t stream),
               (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))
HP_NCCL_MEMBER(ncclSend, (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream),
               (sendbuff, count, datatype, peer, comm, stream))
HP_NCCL_MEMBER(ncclRecv, (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream),
               (recvbuff, count, datatype, peer, comm, stream))
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
/* (NCCL 2.28's collectives: a program's group of one of them with an
 * ncclAllReduce is a group of two, the allreduce given to NCCL in it) */
HP_NCCL_MEMBER(ncclAlltoAll,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                cudaStream_t stream),
               (sendbuff, recvbuff, count, datatype, comm, stream))
HP_NCCL_MEMBER(ncclGather,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                ncclComm_t comm, cudaStream_t stream),
               (sendbuff, recvbuff, count, datatype, root, comm, stream))
HP_NCCL_MEMBER(ncclScatter,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                ncclComm_t comm, cudaStream_t stream),
               (sendbuff, recvbuff, count, datatype, root, comm, stream))
#endif

/* ------------------------------------------------------ communicator end */

/* How long a communicator's end waits for a compressed call on another
 * thread to finish the enqueue it is in (microseconds, unless NCCL blocks
 * in it: a connection to a peer that is gone, which only the end frees). */
#define HP_NCCL_CLOSE_WAIT 2.0

/* A communicator's end: its state detached (no new call finds it; a new
 * communicator at the address starts afresh) and closed (a call in
 * progress on another thread enqueues nothing more on it), the real
 * function, then the state let go.  After an abort nothing may wait for
 * the device. */
#define HP_NCCL_END(fn, aborted)                                                            \
    HP_WRAP ncclResult_t fn(ncclComm_t comm)                                                \
    {                                                                                       \
        __typeof__(&fn) real = HP_REAL(fn);                                                 \
        hp_comm_t *c;                                                                       \
        ncclResult_t rc;                                                                    \
        if (real == NULL)                                                                   \
            return ncclSystemError;                                                         \
        c = comm != NULL ? hp_registry_detach(&reg, comm) : NULL;                           \
        if (c != NULL && hp_comm_close(c, HP_NCCL_CLOSE_WAIT) != 0)                         \
            HP_WARN("nccl: " #fn ": a compressed ncclAllReduce on another thread was still "  \
                    "inside NCCL after %.0f s; ending the communicator under it", HP_NCCL_CLOSE_WAIT); \
        /* may return ncclInProgress on a non-blocking communicator: as is */              \
        rc = real(comm);                                                                    \
        if (c != NULL) {                                                                    \
            hp_comm_end(c, aborted);                                                        \
            atomic_fetch_add_explicit(&hp_g.stats.nccl_comms_released, 1, memory_order_relaxed); \
        }                                                                                   \
        return rc;                                                                          \
    }

HP_NCCL_END(ncclCommFinalize, 0)
HP_NCCL_END(ncclCommDestroy, 0)
HP_NCCL_END(ncclCommAbort, 1)

/* A new communicator (from ncclCommInitRank, ncclCommInitRankConfig or
 * ncclCommSplit, which may set it and answer ncclInProgress when
 * non-blocking) starts from the job's settings, never from a communicator
 * that had its address before; a non-blocking one is remembered (its state
 * made).  Under HIPRESS_NCCL=compress the device codec is set up for the
 * current context here, where NCCL itself synchronises the device, rather
 * than in the first compressed call (hp_gpu_codec_setup). */
static void comm_made(ncclComm_t comm, int nonblocking)
{
    hp_comm_t *c = hp_registry_detach(&reg, comm);
    if (c != NULL)
        hp_comm_end(c, 0);
    hp_settings_without_mpi();
    if (comm != NULL && hp_cfg_i(&hp_g.cfg, HP_S_NCCL) == HP_NCCL_SETTING_COMPRESS && hp_cfg_i(&hp_g.cfg, HP_S_ENABLE))
        hp_gpu_codec_setup(&hp_g.cfg);
    if (!nonblocking || comm == NULL)
        return;
    if ((c = comm_state(comm, 1)) == NULL) {
        HP_WARN("nccl: no memory to remember a non-blocking communicator (its ncclInProgress answers are "
                "still polled out)");
        return;
    }
    c->nonblocking = 1;
    hp_comm_put(c);
}

/* Whether comm was made non-blocking (as hipress saw it). */
static int comm_nonblocking(ncclComm_t comm)
{
    hp_comm_t *c = comm != NULL ? hp_registry_get(&reg, comm) : NULL;
    int nb = c != NULL && c->nonblocking;
    hp_comm_put(c);
    return nb;
}

HP_WRAP ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    __typeof__(&ncclCommInitRank) real = HP_REAL(ncclCommInitRank);
    ncclResult_t rc;
    if (real == NULL)
        return ncclSystemError;
    rc = real(comm, nranks, commId, rank);
    if (rc == ncclSuccess && comm != NULL && *comm != NULL)
        comm_made(*comm, 0);
    return rc;
}

HP_WRAP ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                            ncclConfig_t *config)
{
    __typeof__(&ncclCommInitRankConfig) real = HP_REAL(ncclCommInitRankConfig);
    ncclResult_t rc;
    if (real == NULL)
        return ncclSystemError;
    rc = real(comm, nranks, commId, rank, config);
    if ((rc == ncclSuccess || rc == ncclInProgress) && comm != NULL && *comm != NULL)
        comm_made(*comm, config != NULL && config->blocking == 0);
    return rc;
}

HP_WRAP ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    __typeof__(&ncclCommSplit) real = HP_REAL(ncclCommSplit);
    ncclResult_t rc;
    /* without a configuration the child inherits its parent's (nccl.h) */
    int nonblocking = config != NULL ? config->blocking == 0 : comm_nonblocking(comm);
    if (real == NULL)
        return ncclSystemError;
    rc = real(comm, color, key, newcomm, config);
    if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm != NULL && *newcomm != NULL)
        comm_made(*newcomm, nonblocking);
    return rc;
}

/* ------------------------------------------------------------- public */

HP_EXPORT void hipress_nccl_stats_get(hipress_nccl_stats_t *s)
{
    unsigned long long pass = 0;
    for (int i = 1; i < HP_ELIG_NREASONS; i++)
        pass += atomic_load(&hp_g.stats.reason[HP_FRONT_NCCL][i]);
    memset(s, 0, sizeof(*s));
    s->calls = atomic_load(&hp_g.stats.calls[HP_FRONT_NCCL]);
    s->eligible = atomic_load(&hp_g.stats.reason[HP_FRONT_NCCL][HP_ELIG_YES]);
    s->passthrough = pass;
    s->in_group = atomic_load(&hp_g.stats.reason[HP_FRONT_NCCL][HP_ELIG_GROUP]);
    s->capturing = atomic_load(&hp_g.stats.reason[HP_FRONT_NCCL][HP_ELIG_CAPTURE]);
    s->comms_tracked = atomic_load(&reg.count);
    s->comms_released = atomic_load(&hp_g.stats.nccl_comms_released);
    s->group_depth = tls_group.depth;
    s->intercepted = 1;
}

HP_EXPORT int hipress_nccl_comm_residual(void *nccl_comm, const void *buf, size_t count, float *out)
{
    hp_comm_t *c;
    int rc;
    if (nccl_comm == NULL || buf == NULL || (out == NULL && count > 0))
        return HIPRESS_ERR_INVALID;
    c = hp_registry_get(&reg, nccl_comm);
    rc = hp_nccl_residual(c, buf, count, out);
    hp_comm_put(c);
    return rc == 0 ? HIPRESS_OK : HIPRESS_ERR_DEVICE;
}
