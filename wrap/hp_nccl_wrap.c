/*
 * NCCL interposition: ncclAllReduce, the group calls, the calls that make a
 * communicator with a configuration (ncclCommInitRankConfig, ncclCommSplit:
 * whether it is non-blocking) and the calls that end one.  Built when
 * configure finds nccl.h.  The real functions come from the next object
 * that defines them (dlsym(RTLD_NEXT)), or, when the NCCL library was loaded
 * into a local scope (a Python extension's dependency), from any loaded
 * object that defines them; both are resolved at the first call of each
 * function.
 *
 * ncclAllReduce calls are classified (hp_nccl.h) and counted.  By default
 * (HIPRESS_NCCL=pass) every call goes to the real function with its
 * arguments unchanged.  With HIPRESS_NCCL=compress, an eligible call (float32, float16, bfloat16)
 * outside the user's groups runs the experimental compressed path
 * (src/front/hp_front_nccl.c: the MPI path's plan and algorithms over
 * NCCL); one that opens a group is held back until the group ends or grows
 * (held_call_t).  Settings load at the first call when the
 * process never called MPI_Init (torchrun).
 */
#define _GNU_SOURCE
#include "hp_global.h"
#include "hp_gpu.h"
#include "hp_comp.h"
#include "hp_front_nccl.h"
#include "hp_nccl_elem.h"
#include <dlfcn.h>
#include <link.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HP_WRAP HP_EXPORT

/* --------------------------------------------------- the real functions */

typedef struct {
    const char    *name;
    void *_Atomic  fn;
    _Atomic int    failed;
} hp_real_t;

struct names_walk {
    char  **names;
    size_t  n, cap;
};

static int names_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct names_walk *w = (struct names_walk *)arg;
    (void)size;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
        return 0;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        char **p = realloc(w->names, cap * sizeof(*p));
        if (p == NULL)
            return 1;
        w->names = p;
        w->cap = cap;
    }
    if ((w->names[w->n] = strdup(info->dlpi_name)) != NULL)
        w->n++;
    return 0;
}

/* A definition of `name` other than `self` in any loaded object, looked up
 * through that object's own handle (which sees its local-scope
 * dependencies).  The names are collected first: dlopen must not run under
 * dl_iterate_phdr's lock. */
static void *scan_loaded(const char *name, void *self)
{
    struct names_walk w = {NULL, 0, 0};
    void *fn = NULL;

    dl_iterate_phdr(names_cb, &w);
    for (size_t i = 0; i < w.n; i++) {
        void *h = fn == NULL ? dlopen(w.names[i], RTLD_LAZY | RTLD_NOLOAD) : NULL;
        if (h != NULL) {
            void *f = dlsym(h, name);
            if (f != NULL && f != self)
                fn = f;
            dlclose(h);
        }
        free(w.names[i]);
    }
    free(w.names);
    return fn;
}

static void *real_get(hp_real_t *r, void *self)
{
    void *fn = atomic_load_explicit(&r->fn, memory_order_acquire);
    char pname[64];

    if (HP_LIKELY(fn != NULL))
        return fn;
    fn = dlsym(RTLD_NEXT, r->name);
    if (fn == NULL || fn == self)
        fn = scan_loaded(r->name, self);
    if (fn == NULL) {
        /* NCCL's profiling names, for a library that defines only those */
        snprintf(pname, sizeof(pname), "p%s", r->name);
        fn = scan_loaded(pname, self);
    }
    if (fn == NULL) {
        if (atomic_exchange(&r->failed, 1) == 0) {
            fprintf(stderr, "hipress: error: %s was called, but no NCCL library in this process defines it "
                    "(hipress forwards NCCL calls to the real library; is libnccl.so.2 loaded?)\n", r->name);
            fflush(stderr);
        }
        return NULL;
    }
    atomic_store_explicit(&r->fn, fn, memory_order_release);
    return fn;
}

#define HP_REAL_DECL(fn) static hp_real_t real_##fn = {#fn, NULL, 0}
/* The real `fn`, typed as nccl.h declares it; NULL (after one error line)
 * when none is loaded. */
#define HP_REAL(fn) ((__typeof__(&fn))real_get(&real_##fn, (void *)fn))

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
HP_REAL_DECL(ncclCommCount);
HP_REAL_DECL(ncclCommUserRank);
HP_REAL_DECL(ncclCommGetAsyncError);
HP_REAL_DECL(ncclGetErrorString);
HP_REAL_DECL(ncclCommInitRankConfig);
/* A real function hipress does not wrap. */
#define HP_REAL_PLAIN(fn) ((__typeof__(&fn))real_get(&real_##fn, NULL))

/* ------------------------------------------- per-communicator registry */

/* State of one NCCL communicator: made by hipress_nccl_comm_set, released
 * when the communicator ends.  A small chained hash table under one lock;
 * calls skip the lock while it is empty. */
typedef struct comm_entry {
    ncclComm_t         comm;
    hp_config_t        cfg;       /* hp_g.cfg plus this communicator's overrides */
    hp_nccl_cstate_t  *cs;        /* the compressed path's state, or NULL */
    int                nonblocking;   /* made with config->blocking == 0 (or split from one) */
    struct comm_entry *next;
} comm_entry_t;

#define HP_NCCL_BUCKETS 64
static struct {
    pthread_mutex_t lock;
    _Atomic size_t  count;
    comm_entry_t   *bucket[HP_NCCL_BUCKETS];
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t comm_hash(ncclComm_t comm)
{
    uint64_t x = (uint64_t)(uintptr_t)comm;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)(x % HP_NCCL_BUCKETS);
}

/* Under reg.lock. */
static comm_entry_t *comm_find(ncclComm_t comm)
{
    for (comm_entry_t *e = reg.bucket[comm_hash(comm)]; e != NULL; e = e->next)
        if (e->comm == comm)
            return e;
    return NULL;
}

/* Drop comm's state; returns 1 when there was some. */
static int comm_release(ncclComm_t comm)
{
    comm_entry_t **pp, *e = NULL;
    if (atomic_load_explicit(&reg.count, memory_order_relaxed) == 0 || comm == NULL)
        return 0;
    pthread_mutex_lock(&reg.lock);
    for (pp = &reg.bucket[comm_hash(comm)]; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->comm == comm) {
            e = *pp;
            *pp = e->next;
            atomic_fetch_sub(&reg.count, 1);
            break;
        }
    pthread_mutex_unlock(&reg.lock);
    if (e != NULL)
        hp_nccl_comp_free(e->cs);
    free(e);
    return e != NULL;
}

/* comm's entry, made from the job's settings when missing (NULL: no
 * memory).  Under reg.lock. */
static comm_entry_t *comm_get(ncclComm_t comm)
{
    comm_entry_t *e = comm_find(comm);
    size_t b;
    if (e != NULL || (e = calloc(1, sizeof(*e))) == NULL)
        return e;
    b = comm_hash(comm);
    e->comm = comm;
    e->cfg = hp_g.cfg;
    e->next = reg.bucket[b];
    reg.bucket[b] = e;
    atomic_fetch_add(&reg.count, 1);
    return e;
}

/* The settings that apply to comm (read under the lock). */
static void comm_settings(ncclComm_t comm, int *enabled_p, int *opted_out_p, size_t *min_bytes_p)
{
    comm_entry_t *e;

    *enabled_p = hp_cfg_i(&hp_g.cfg, HP_S_ENABLE) && hp_cfg_i(&hp_g.cfg, HP_S_GPU) != HP_GPU_SETTING_OFF;
    *opted_out_p = 0;
    *min_bytes_p = (size_t)hp_cfg_i(&hp_g.cfg, HP_S_MIN_BYTES);
    if (atomic_load_explicit(&reg.count, memory_order_relaxed) == 0 || comm == NULL)
        return;
    pthread_mutex_lock(&reg.lock);
    if ((e = comm_find(comm)) != NULL) {
        *opted_out_p = !hp_cfg_i(&e->cfg, HP_S_ENABLE);
        *min_bytes_p = (size_t)hp_cfg_i(&e->cfg, HP_S_MIN_BYTES);
    }
    pthread_mutex_unlock(&reg.lock);
}

HP_EXPORT int hipress_nccl_comm_set(void *nccl_comm, const char *name, const char *value)
{
    ncclComm_t comm = (ncclComm_t)nccl_comm;
    comm_entry_t *e, *fresh = NULL;
    hp_config_t cfg;
    char err[512];

    if (comm == NULL || name == NULL || value == NULL)
        return HIPRESS_ERR_INVALID;
    hp_settings_without_mpi();
    pthread_mutex_lock(&reg.lock);
    e = comm_find(comm);
    cfg = e != NULL ? e->cfg : hp_g.cfg;
    pthread_mutex_unlock(&reg.lock);
    if (hp_config_set(&cfg, name, value, hp_comp_name_ok, err, sizeof(err)) != HP_OK) {
        HP_WARN("hipress_nccl_comm_set: %s", err);
        return HIPRESS_ERR_INVALID;
    }
    if (e == NULL && (fresh = calloc(1, sizeof(*fresh))) == NULL)
        return HIPRESS_ERR_NOMEM;
    pthread_mutex_lock(&reg.lock);
    e = comm_find(comm);   /* again: another thread may have made it */
    if (e == NULL && fresh != NULL) {
        size_t b = comm_hash(comm);
        fresh->comm = comm;
        fresh->next = reg.bucket[b];
        reg.bucket[b] = fresh;
        atomic_fetch_add(&reg.count, 1);
        e = fresh;
        fresh = NULL;
    }
    if (e != NULL) {
        e->cfg = cfg;
        hp_nccl_comp_reset(e->cs);   /* agreed again at the next compressed call */
    }
    pthread_mutex_unlock(&reg.lock);
    free(fresh);
    return e != NULL ? HIPRESS_OK : HIPRESS_ERR_NOMEM;
}

/* --------------------------------------------------------------- groups */

/* The user's groups, per thread as NCCL's own group state is. */
static __thread hp_nccl_group_t tls_group;

static void count_nccl(hp_nccl_elig_t r)
{
    atomic_fetch_add_explicit(&hp_g.stats.nccl_reason[r], 1, memory_order_relaxed);
}

/* Under HIPRESS_NCCL=compress, a float ncclAllReduce that is the first
 * operation of a depth-1 group (PyTorch's one-call group) is held back, not
 * given to NCCL: at the outermost ncclGroupEnd, if it was alone, it runs
 * compressed after the (then empty) group; when a second operation enters
 * the group first, it is given to NCCL just before that operation, so NCCL
 * sees the user's group in its order.  Per thread, as groups are. */
typedef struct {
    int          valid;
    const void  *sendbuff;
    void        *recvbuff;
    size_t       count;
    ncclDataType_t datatype;
    ncclRedOp_t  op;
    ncclComm_t   comm;
    cudaStream_t stream;
    ncclResult_t err;     /* the held call, given to NCCL late, failed: said at ncclGroupEnd */
} held_call_t;
static __thread held_call_t tls_held;

static int allreduce_compress(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, ncclResult_t *rc_p);

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

/* Give call h to NCCL now; *rc_p its result. */
static void held_release_as(const held_call_t *h, ncclResult_t *rc_p)
{
    __typeof__(&ncclAllReduce) real = HP_REAL(ncclAllReduce);
    *rc_p = real != NULL ? real(h->sendbuff, h->recvbuff, h->count, h->datatype, h->op, h->comm, h->stream)
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
    held_release_as(h, &rc);
    if (rc != ncclSuccess && h->err == ncclSuccess)
        h->err = rc;
}

/* An NCCL operation enters the current group (if any). */
static hp_nccl_group_class_t group_op(void)
{
    int demoted = 0;
    hp_nccl_group_class_t cls = hp_nccl_group_op(&tls_group, &demoted);
    if (demoted) {   /* the group's first call is part of the user's group after all */
        count_nccl(HP_NELIG_GROUP);
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
        count_nccl(HP_NELIG_YES);   /* a group of one eligible call, as PyTorch makes */
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
            if (rc == ncclSuccess &&
                !allreduce_compress(h.sendbuff, h.recvbuff, h.count, h.datatype, h.op, h.comm, h.stream, &hrc))
                held_release_as(&h, &hrc);
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

static int nccl_elem_size(ncclDataType_t t, size_t *size_p)
{
    switch (t) {
    case ncclFloat32: *size_p = 4; return 1;
    case ncclFloat16: *size_p = 2; return 1;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case ncclBfloat16: *size_p = 2; return 1;
#endif
    default: *size_p = 0; return 0;
    }
}

static int nccl_op_ok(ncclRedOp_t op)
{
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    if (op == ncclAvg)
        return 1;
#endif
    return op == ncclSum;
}

/* Classify and count one ncclAllReduce; eligible calls of a group that may
 * hold only them are counted at ncclGroupEnd.  Returns 1 when the call is
 * eligible and outside any group, 2 when it is eligible and the first of a
 * depth-1 group (decided at ncclGroupEnd), else 0. */
static int allreduce_classify(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    hp_nccl_group_class_t cls;
    hp_nccl_desc_t d;
    hp_nccl_elig_t r;

    hp_settings_without_mpi();
    atomic_fetch_add_explicit(&hp_g.stats.nccl_calls, 1, memory_order_relaxed);
    cls = group_op();
    memset(&d, 0, sizeof(d));
    comm_settings(comm, &d.enabled, &d.opted_out, &d.min_bytes);
    d.null_handle = comm == NULL;
    d.dtype_ok = nccl_elem_size(datatype, &d.elem_size);
    d.op_ok = nccl_op_ok(op);
    d.count = count;
    d.sendbuf = sendbuff;
    d.recvbuf = recvbuff;
    d.in_user_group = cls == HP_NCCL_IN_USER_GROUP;
    r = hp_nccl_eligible(&d);
    if (r == HP_NELIG_YES) {
        /* last, as it costs a driver call */
        d.capturing = hp_gpu_stream_capturing((void *)stream);
        r = hp_nccl_eligible(&d);
    }
    if (r == HP_NELIG_YES && cls == HP_NCCL_SOLE_SO_FAR) {
        hp_nccl_group_set_pending(&tls_group);
        return 2;
    }
    count_nccl(r);
    return r == HP_NELIG_YES && cls == HP_NCCL_NO_GROUP;
}

/* Whether comm's calls are compressed (HIPRESS_NCCL). */
static int compress_mode(ncclComm_t comm)
{
    comm_entry_t *e;
    int on;
    if (atomic_load_explicit(&reg.count, memory_order_relaxed) == 0)
        return hp_cfg_i(&hp_g.cfg, HP_S_NCCL) == HP_NCCL_SETTING_COMPRESS;
    pthread_mutex_lock(&reg.lock);
    e = comm_find(comm);
    on = hp_cfg_i(e != NULL ? &e->cfg : &hp_g.cfg, HP_S_NCCL) == HP_NCCL_SETTING_COMPRESS;
    pthread_mutex_unlock(&reg.lock);
    return on;
}

/* The element types the compressed path takes (HP_NCCL_ELEM_*), or -1. */
static int compress_elem(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat32: return HP_NCCL_ELEM_F32;
    case ncclFloat16: return HP_NCCL_ELEM_F16;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case ncclBfloat16: return HP_NCCL_ELEM_BF16;
#endif
    default: return -1;
    }
}

/* HIPRESS_NCCL=compress: the experimental compressed path takes a float32,
 * float16 or bfloat16 call.  Returns 1 when it did (*rc_p: the result). */
static int allreduce_compress(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, ncclResult_t *rc_p)
{
    const int elem = compress_elem(datatype);
    hp_nccl_xport_t x;
    comm_entry_t *e;
    hp_config_t cfg;
    int avg = 0, nonblocking;

    pthread_mutex_lock(&reg.lock);
    e = atomic_load_explicit(&reg.count, memory_order_relaxed) ? comm_find(comm) : NULL;
    if (hp_cfg_i(e != NULL ? &e->cfg : &hp_g.cfg, HP_S_NCCL) != HP_NCCL_SETTING_COMPRESS ||
        (e == NULL && (e = comm_get(comm)) == NULL)) {
        pthread_mutex_unlock(&reg.lock);
        return 0;
    }
    cfg = e->cfg;
    nonblocking = e->nonblocking;
    pthread_mutex_unlock(&reg.lock);
    /* the entry is this communicator's; NCCL's rules keep one thread on a
     * communicator's collectives, and its release at ncclCommDestroy */
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    avg = op == ncclAvg;
#else
    (void)op;
#endif
    /* the real calls: hipress' own groups and sends bypass its wrappers */
    x.allreduce = HP_REAL(ncclAllReduce);
    x.send = HP_REAL(ncclSend);
    x.recv = HP_REAL(ncclRecv);
    x.group_start = HP_REAL(ncclGroupStart);
    x.group_end = HP_REAL(ncclGroupEnd);
    x.count = HP_REAL_PLAIN(ncclCommCount);
    x.user_rank = HP_REAL_PLAIN(ncclCommUserRank);
    x.async_error = HP_REAL_PLAIN(ncclCommGetAsyncError);
    x.error_string = HP_REAL_PLAIN(ncclGetErrorString);
    if (elem < 0 || x.allreduce == NULL || x.send == NULL || x.recv == NULL || x.group_start == NULL ||
        x.group_end == NULL)
        return 0;
    return hp_nccl_comp_allreduce(&e->cs, &cfg, &x, sendbuff, recvbuff, count, elem, avg, nonblocking, comm,
                                  stream, rc_p);
}

HP_WRAP ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclAllReduce) real = HP_REAL(ncclAllReduce);
    ncclResult_t rc;
    int cand;
    if (real == NULL)
        return ncclSystemError;
    cand = allreduce_classify(sendbuff, recvbuff, count, datatype, op, comm, stream);
    if (cand == 1 && allreduce_compress(sendbuff, recvbuff, count, datatype, op, comm, stream, &rc))
        return rc;
    if (cand == 2 && compress_elem(datatype) >= 0 && compress_mode(comm)) {
        /* the first call of a group: held until the group ends or grows */
        tls_held = (held_call_t){1, sendbuff, recvbuff, count, datatype, op, comm, stream, tls_held.err};
        return ncclSuccess;
    }
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

/* ---------------------------------- other operations (group members only) */

HP_WRAP ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                   int root, ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclBroadcast) real = HP_REAL(ncclBroadcast);
    if (real == NULL)
        return ncclSystemError;
    group_op();
    return real(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

HP_WRAP ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream)
{
    __typeof__(&ncclBcast) real = HP_REAL(ncclBcast);
    if (real == NULL)
        return ncclSystemError;
    group_op();
    return real(buff, count, datatype, root, comm, stream);
}

HP_WRAP ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclReduce) real = HP_REAL(ncclReduce);
    if (real == NULL)
        return ncclSystemError;
    group_op();
    return real(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

HP_WRAP ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                                   ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclAllGather) real = HP_REAL(ncclAllGather);
    if (real == NULL)
        return ncclSystemError;
    group_op();
    return real(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

HP_WRAP ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                       cudaStream_t stream)
{
    __typeof__(&ncclReduceScatter) real = HP_REAL(ncclReduceScatter);
    if (real == NULL)
        return ncclSystemError;
    group_op();
    return real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

HP_WRAP ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                              ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclSend) real = HP_REAL(ncclSend);
    if (real == NULL)
        return ncclSystemError;
    group_op();
    return real(sendbuff, count, datatype, peer, comm, stream);
}

HP_WRAP ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                              cudaStream_t stream)
{
    __typeof__(&ncclRecv) real = HP_REAL(ncclRecv);
    if (real == NULL)
        return ncclSystemError;
    group_op();
    return real(recvbuff, count, datatype, peer, comm, stream);
}

/* ------------------------------------------------------ communicator end */

/* The state goes before the real call: once NCCL frees the communicator its
 * address may come back at once for another thread's new one. */
static void release(ncclComm_t comm)
{
    if (comm_release(comm))
        atomic_fetch_add_explicit(&hp_g.stats.nccl_comms_released, 1, memory_order_relaxed);
}

HP_WRAP ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    __typeof__(&ncclCommFinalize) real = HP_REAL(ncclCommFinalize);
    if (real == NULL)
        return ncclSystemError;
    release(comm);
    /* may return ncclInProgress on a non-blocking communicator: as is */
    return real(comm);
}

HP_WRAP ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    __typeof__(&ncclCommDestroy) real = HP_REAL(ncclCommDestroy);
    if (real == NULL)
        return ncclSystemError;
    release(comm);
    return real(comm);
}

HP_WRAP ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    __typeof__(&ncclCommAbort) real = HP_REAL(ncclCommAbort);
    if (real == NULL)
        return ncclSystemError;
    release(comm);
    return real(comm);
}

/* A new communicator (from ncclCommInitRankConfig or ncclCommSplit, which
 * may set it and answer ncclInProgress when non-blocking) starts from the
 * job's settings, never from a communicator that had its address before;
 * a non-blocking one is remembered (its entry made). */
static void comm_made(ncclComm_t comm, int nonblocking)
{
    comm_entry_t *e;
    comm_release(comm);
    if (!nonblocking || comm == NULL)
        return;
    hp_settings_without_mpi();
    pthread_mutex_lock(&reg.lock);
    if ((e = comm_get(comm)) != NULL)
        e->nonblocking = 1;
    pthread_mutex_unlock(&reg.lock);
    if (e == NULL)
        HP_WARN("nccl: no memory to remember a non-blocking communicator (its ncclInProgress answers are "
                "still polled out)");
}

/* Whether comm was made non-blocking (as hipress saw it). */
static int comm_nonblocking(ncclComm_t comm)
{
    comm_entry_t *e;
    int nb = 0;
    if (atomic_load_explicit(&reg.count, memory_order_relaxed) == 0 || comm == NULL)
        return 0;
    pthread_mutex_lock(&reg.lock);
    if ((e = comm_find(comm)) != NULL)
        nb = e->nonblocking;
    pthread_mutex_unlock(&reg.lock);
    return nb;
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

HP_WRAP ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                   ncclConfig_t *config)
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
    for (int i = 1; i < HP_NELIG_NREASONS; i++)
        pass += atomic_load(&hp_g.stats.nccl_reason[i]);
    memset(s, 0, sizeof(*s));
    s->calls = atomic_load(&hp_g.stats.nccl_calls);
    s->eligible = atomic_load(&hp_g.stats.nccl_reason[HP_NELIG_YES]);
    s->passthrough = pass;
    s->in_group = atomic_load(&hp_g.stats.nccl_reason[HP_NELIG_GROUP]);
    s->capturing = atomic_load(&hp_g.stats.nccl_reason[HP_NELIG_CAPTURE]);
    s->comms_tracked = atomic_load(&reg.count);
    s->comms_released = atomic_load(&hp_g.stats.nccl_comms_released);
    s->group_depth = tls_group.depth;
    s->intercepted = 1;
}

HP_EXPORT int hipress_nccl_comm_residual(void *nccl_comm, const void *buf, size_t count, float *out)
{
    comm_entry_t *e;
    int rc;
    if (nccl_comm == NULL || buf == NULL || (out == NULL && count > 0))
        return HIPRESS_ERR_INVALID;
    pthread_mutex_lock(&reg.lock);
    e = comm_find((ncclComm_t)nccl_comm);
    rc = hp_nccl_comp_residual(e != NULL ? e->cs : NULL, buf, count, out);
    pthread_mutex_unlock(&reg.lock);
    return rc == 0 ? HIPRESS_OK : HIPRESS_ERR_DEVICE;
}
