/*
 * The NCCL front end's entry (hp_nccl_entry.h): the communicators' states,
 * the user's groups, the classification of an ncclAllReduce, the held call
 * and the public hipress_nccl_* calls.  The wrappers
 * (mpi_wrappers/hp_nccl_wrap.c) only resolve the real functions and hand
 * calls here; the compressed run is src/front/nccl/hp_front_nccl.c's.
 *
 * ncclAllReduce calls are classified (hp_eligible.h, the user's groups:
 * hp_nccl_group.h) and counted.  By default (HIPRESS_NCCL=pass) every call
 * goes to the real function with its arguments unchanged.  With
 * HIPRESS_NCCL=compress an eligible call outside the user's groups runs
 * the driver on its communicator's state; one that opens a group is held
 * back until the group ends or grows.  Settings load at the first call
 * when the process never called MPI_Init (torchrun).
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
#include "hp_nccl_entry.h"
#include "hp_front_nccl.h"
#include "hp_front.h"
#include "hp_global.h"
#include "hp_nccl_group.h"
#include "hp_nccl_real.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The communicators' states. */
static hp_registry_t reg = HP_REGISTRY_INIT;

/* A new state for comm from the job's settings, in the registry, with a
 * reference for the caller; NULL when there is no memory. */
static hp_comm_t *state_new(ncclComm_t comm)
{
    hp_comm_t *c = hp_comm_new(&hp_front_nccl, comm, 0, 0);
    if (c == NULL)
        return NULL;
    hp_comm_get(c);   /* the caller's; the registry takes the first */
    hp_registry_add(&reg, c);
    return c;
}

/* Rank 0's word on the job's settings once they are in without MPI_Init,
 * as MPI_Init's is (a process without a rank says it too). */
static void notice_settings(void)
{
    if (hp_log_rank <= 0)
        hp_comm_notice_settings();
}

/* The settings of a process that may never call MPI_Init. */
static void settings(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    hp_settings_without_mpi();
    pthread_once(&once, notice_settings);
}

/* ------------------------------------------------------------ groups */

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
    ncclResult_t   err;       /* the held call, given to NCCL late, failed: said at ncclGroupEnd */
    int            unknown;   /* its capture query failed (classify) */
} held_call_t;
static __thread held_call_t tls_held;

static int compress(hp_comm_t *c, const held_call_t *k, ncclResult_t *rc_p);

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

void hp_nccl_entry_group_start(void)
{
    hp_nccl_group_start(&tls_group);
}

void hp_nccl_entry_member(void)
{
    group_op();
}

ncclResult_t hp_nccl_entry_group_end(ncclResult_t rc)
{
    if (hp_nccl_group_end(&tls_group)) {
        count_nccl(HP_ELIG_YES);   /* a group of one eligible call, as PyTorch makes */
        if (tls_held.valid) {
            /* it was alone: compressed after the empty group, or given to
             * NCCL on its own (the same operation) */
            held_call_t h = tls_held;
            ncclResult_t hrc = ncclSuccess;
            hp_comm_t *c;
            tls_held.valid = 0;
            /* a non-blocking communicator's (empty) group still in
             * progress: nothing may be enqueued on it before it is done */
            if (rc == ncclInProgress) {
                __typeof__(&ncclCommGetAsyncError) poll = HP_REAL(ncclCommGetAsyncError);
                rc = poll == NULL ? ncclSystemError
                                  : hp_nccl_poll(poll, h.comm, hp_cfg_d(&hp_g.cfg, HP_S_TIMEOUT), NULL,
                                                 "the user's ncclGroupEnd before a held ncclAllReduce",
                                                 ": the held ncclAllReduce is not run");
            }
            /* (when the group failed, NCCL's error comes back and the held
             * call is not run) */
            if (rc == ncclSuccess) {
                c = hp_registry_get(&reg, h.comm);
                if (!compress(c, &h, &hrc))
                    hrc = held_release_as(&h);
                hp_comm_put(c);
            }
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

/* The element type of the compressed path (HP_ELEM_*) of a float sum. */
static int elem_of(ncclDataType_t t)
{
    return t == ncclFloat32 ? HP_ELEM_F32 : t == ncclFloat16 ? HP_ELEM_F16 : HP_ELEM_BF16;
}

/* The settings of c, or the job's. */
static const hp_config_t *cfg_of(const hp_comm_t *c)
{
    return c != NULL ? &c->cfg : &hp_g.cfg;
}

/* An ncclAllReduce is counted. */
static void count_call(void)
{
    settings();
    atomic_fetch_add_explicit(&hp_g.stats.calls[HP_FRONT_NCCL], 1, memory_order_relaxed);
}

/* The descriptor of a call, as far as the job's settings and its own
 * arguments say (hp_eligible's first criteria). */
static void desc_init(hp_call_desc_t *d, ncclComm_t comm, int float_sum)
{
    memset(d, 0, sizeof(*d));
    d->enabled = hp_cfg_i(&hp_g.cfg, HP_S_ENABLE) && hp_cfg_i(&hp_g.cfg, HP_S_GPU) != HP_GPU_SETTING_OFF;
    d->null_handle = comm == NULL;
    d->op_is_sum = d->dtype_is_float = float_sum;
}

void hp_nccl_entry_pass(ncclComm_t comm, ncclDataType_t datatype, ncclRedOp_t op)
{
    hp_call_desc_t d;
    count_call();
    group_op();
    desc_init(&d, comm, 1);
    d.op_is_sum = hp_nccl_entry_float_sum(ncclFloat32, op);
    d.dtype_is_float = hp_nccl_entry_float_sum(datatype, ncclSum);
    count_nccl(hp_eligible(&d));
}

/* Classify and count one float-sum ncclAllReduce on its communicator's
 * state c (NULL: none yet), with one descriptor as the MPI front end's;
 * eligible calls of a group that may hold only them are counted at
 * ncclGroupEnd.  Returns 1 when the call is eligible and outside any
 * group, 2 when it is eligible and the first of a depth-1 group (decided
 * at ncclGroupEnd), else 0.  k->unknown: the query of whether the stream
 * is captured failed on this rank alone, so the call is taken as its peers
 * take it, to fail there on every rank alike (never given to NCCL alone
 * while they compress). */
static int classify(hp_comm_t *c, held_call_t *k)
{
    hp_nccl_group_class_t cls;
    hp_call_desc_t d;
    hp_elig_t r;

    count_call();
    cls = group_op();
    desc_init(&d, k->comm, 1);
    if (c != NULL)
        d.opted_out = c->opted_out;
    d.min_bytes = (size_t)hp_cfg_i(cfg_of(c), HP_S_MIN_BYTES);
    d.elem_size = k->datatype == ncclFloat32 ? 4 : 2;
    d.count = k->count > (size_t)LLONG_MAX ? -1 : (long long)k->count;
    d.sendbuf = k->sendbuff;
    d.recvbuf = k->recvbuff;
    d.in_place = k->sendbuff == k->recvbuff && k->recvbuff != NULL;
    d.in_user_group = cls == HP_NCCL_IN_USER_GROUP;
    r = hp_eligible(&d);
    k->unknown = 0;
    if (r == HP_ELIG_YES) {
        /* last, as it costs a driver call */
        d.capturing = hp_gpu_stream_capturing((void *)k->stream);
        if (d.capturing == -2) {
            HP_WARN("nccl: cannot ask the driver whether the stream of an ncclAllReduce is being captured: the "
                    "call fails on every rank (NaN) rather than reach NCCL on this rank alone");
            d.capturing = 0;
            k->unknown = 1;
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
 * bypass its wrappers.  Resolved at the first compressed call. */
static const hp_nccl_xport_t *real_calls(void)
{
    static hp_nccl_xport_t x;
    static _Atomic int have_x;
    hp_nccl_xport_t y;

    if (atomic_load_explicit(&have_x, memory_order_acquire))
        return &x;
    y.allreduce = HP_REAL(ncclAllReduce);
    y.send = HP_REAL(ncclSend);
    y.recv = HP_REAL(ncclRecv);
    y.group_start = HP_REAL(ncclGroupStart);
    y.group_end = HP_REAL(ncclGroupEnd);
    y.count = HP_REAL(ncclCommCount);
    y.user_rank = HP_REAL(ncclCommUserRank);
    y.async_error = HP_REAL(ncclCommGetAsyncError);
    y.error_string = HP_REAL(ncclGetErrorString);
    if (y.allreduce == NULL || y.send == NULL || y.recv == NULL || y.group_start == NULL || y.group_end == NULL ||
        y.count == NULL || y.user_rank == NULL)
        return NULL;
    x = y;   /* (the same values from any thread) */
    atomic_store_explicit(&have_x, 1, memory_order_release);
    return &x;
}

/* HIPRESS_NCCL=compress: the compressed path takes call k on its
 * communicator's state c (the caller's reference; NULL: made here).
 * Returns 1 when it did (*rc_p: the result). */
static int compress(hp_comm_t *c, const held_call_t *k, ncclResult_t *rc_p)
{
    const hp_nccl_xport_t *x;
    hp_gpu_ptr_t where;
    hp_comm_t *made = NULL;
    int taken, reason, avg = 0;

    if (hp_cfg_i(cfg_of(c), HP_S_NCCL) != HP_NCCL_SETTING_COMPRESS || (x = real_calls()) == NULL)
        return 0;
    /* NCCL's buffers are device memory on every rank: a host buffer (a
     * program's error, or a stand-in NCCL) goes to NCCL as it came */
    hp_gpu_ptr_query(k->recvbuff, &where);
    if (where.kind == HP_MEM_HOST)
        return 0;
    if (c == NULL && (c = made = state_new(k->comm)) == NULL)
        return 0;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    avg = k->op == ncclAvg;
#endif
    taken = hp_nccl_allreduce(c, x, k->sendbuff, k->recvbuff, k->count, elem_of(k->datatype), avg, k->comm,
                              k->stream, k->unknown ? HP_ERR_DEVICE : HP_OK, rc_p, &reason);
    hp_comm_put(made);
    return taken;
}

int hp_nccl_entry_allreduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, ncclResult_t *rc_p)
{
    held_call_t k = {1, sendbuff, recvbuff, count, datatype, op, comm, stream, ncclSuccess, 0};
    /* the one lookup of the call: its state, with a reference */
    hp_comm_t *c = comm != NULL ? hp_registry_get(&reg, comm) : NULL;
    int cand = classify(c, &k), taken = 0;

    if (cand == 1) {
        taken = compress(c, &k, rc_p);
    } else if (cand == 2 && hp_cfg_i(cfg_of(c), HP_S_NCCL) == HP_NCCL_SETTING_COMPRESS) {
        /* the first call of a group: held until the group ends or grows */
        k.err = tls_held.err;
        tls_held = k;
        *rc_p = ncclSuccess;
        taken = 1;
    }
    hp_comm_put(c);
    return taken;
}

/* ------------------------------------------------------ communicators */

/* How long a communicator's end waits for a compressed call on another
 * thread to finish the enqueue it is in (microseconds, unless NCCL blocks
 * in it: a connection to a peer that is gone, which only the end frees). */
#define HP_NCCL_CLOSE_WAIT 2.0

hp_comm_t *hp_nccl_entry_comm_close(ncclComm_t comm, const char *fn)
{
    hp_comm_t *c = comm != NULL ? hp_registry_detach(&reg, comm) : NULL;
    if (c != NULL && hp_comm_close(c, HP_NCCL_CLOSE_WAIT) != 0)
        HP_WARN("nccl: %s: a compressed ncclAllReduce on another thread was still inside NCCL after %.0f s; "
                "ending the communicator under it", fn, HP_NCCL_CLOSE_WAIT);
    return c;
}

void hp_nccl_entry_comm_release(hp_comm_t *c, int aborted)
{
    if (c == NULL)
        return;
    hp_comm_end(c, aborted);
    atomic_fetch_add_explicit(&hp_g.stats.nccl_comms_released, 1, memory_order_relaxed);
}

/* Under HIPRESS_NCCL=compress the device codec is set up for the current
 * context here, where NCCL itself synchronises the device, rather than in
 * the first compressed call (hp_gpu_codec_setup). */
void hp_nccl_entry_comm_made(ncclComm_t comm, int nonblocking)
{
    hp_comm_t *c = hp_registry_detach(&reg, comm);
    if (c != NULL)
        hp_comm_end(c, 0);
    settings();
    if (comm != NULL && hp_cfg_i(&hp_g.cfg, HP_S_NCCL) == HP_NCCL_SETTING_COMPRESS && hp_cfg_i(&hp_g.cfg, HP_S_ENABLE))
        hp_gpu_codec_setup(&hp_g.cfg);
    if (!nonblocking || comm == NULL)
        return;
    if ((c = state_new(comm)) == NULL) {
        HP_WARN("nccl: no memory to remember a non-blocking communicator (its ncclInProgress answers are "
                "still polled out)");
        return;
    }
    c->nonblocking = 1;
    hp_comm_put(c);
}

int hp_nccl_entry_comm_nonblocking(ncclComm_t comm)
{
    hp_comm_t *c = comm != NULL ? hp_registry_get(&reg, comm) : NULL;
    int nb = c != NULL && c->nonblocking;
    hp_comm_put(c);
    return nb;
}

/* ------------------------------------------------------------- public */

HP_EXPORT int hipress_nccl_comm_set(void *nccl_comm, const char *name, const char *value)
{
    hp_comm_t *c;
    char err[512];
    int rc = HIPRESS_OK;

    if (nccl_comm == NULL || name == NULL || value == NULL)
        return HIPRESS_ERR_INVALID;
    settings();
    if ((c = hp_registry_get(&reg, nccl_comm)) == NULL && (c = state_new((ncclComm_t)nccl_comm)) == NULL)
        return HIPRESS_ERR_NOMEM;
    if (hp_comm_set(c, name, value, err, sizeof(err)) != HP_OK) {
        HP_WARN("hipress_nccl_comm_set: %s", err);
        rc = HIPRESS_ERR_INVALID;
    }
    hp_comm_put(c);
    return rc;
}

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
