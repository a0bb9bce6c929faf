/*
 * The stand-in NCCL's operations as entries of the stand-in driver's
 * streams (tests/gpu/standins/mock_cuda.h's external entries).  An operation is a
 * set of transfers, each one direction of one pair of ranks: a group's
 * sends and receives on one communicator, or a collective (every pair,
 * both ways, for ncclAllReduce and ncclAllGather; the root to each other
 * rank for ncclBroadcast).  A transfer is numbered when its operation is
 * enqueued (per pair and direction, in the order of the calls: NCCL's
 * matching rule) and moves only when both sides have reached it: the
 * sender's and the receiver's operations are at the heads of their
 * streams.  So a send whose receive is never posted never completes, and
 * the stand-in driver's wait-for graph sees what it waits for.
 *
 * When both sides are there, their descriptions must match (a send meets a
 * receive of the same count and type; a collective the same collective),
 * else the receiver names both sides on stderr and both fail the transfer.
 * A transfer whose peer is gone or aborted, or that saw no progress for
 * MOCK_NCCL_TIMEOUT seconds (default 60), fails with a line naming it.  A
 * failed operation leaves its outputs as they were and is the
 * communicator's asynchronous error (ncclCommGetAsyncError).
 */
#define _GNU_SOURCE
#include "mock_nccl_int.h"
#include "mock_cuda.h"
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { X_WAIT, X_MOVE, X_DONE, X_FAIL };
enum { E_P2P, E_COLL, E_LOCAL };

typedef struct {
    int         send, peer, state;
    uint64_t    n;
    const void *app;     /* the caller's pointer */
    void       *buf;     /* its host bytes (resolved when reached) */
    size_t      bytes, moved;
    uint64_t    hdr;     /* the transfer's number, ahead of its bytes on the channel */
    size_t      hmoved;
    mock_desc_t d;
} xfer_t;

typedef struct entry {
    mock_comm_t  *c;
    void         *stream;
    int           kind, coll, dt, op, root;
    const void   *sendbuff;
    void         *recvbuff;
    size_t        count;
    xfer_t       *x;
    int           nx, room, failed;
    unsigned      opno;
    char         *tmp;       /* ncclAllReduce: every rank's contribution */
    double        t_last, t_check;
    struct entry *next;      /* held list */
} entry_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double timeout_s(void)
{
    const char *v = getenv("MOCK_NCCL_TIMEOUT");
    return v != NULL && atof(v) > 0 ? atof(v) : 60.0;
}

/* The stand-in driver's functions (NULL without it). */
static void *cuda_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD), *f = NULL;
    if (h != NULL) {
        f = dlsym(h, name);
        dlclose(h);
    }
    return f;
}

/* Host memory holding p's bytes: the stand-in driver's shadow of a device
 * pointer, else p. */
static void *host_of(const void *p)
{
    static void *(*shadow)(const void *);
    if (shadow == NULL)
        *(void **)&shadow = cuda_sym("mock_cuda_shadow");
    return shadow != NULL ? shadow(p) : (void *)(uintptr_t)p;
}

const char *mock_dt_name(int dt)
{
    static const char *const names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                                        "float32", "float64", "bfloat16"};
    return dt >= 0 && dt < (int)(sizeof(names) / sizeof(names[0])) ? names[dt] : "?";
}

const char *mock_kind_name(int k)
{
    switch (k) {
    case MOCK_D_SEND: return "ncclSend";
    case MOCK_D_RECV: return "ncclRecv";
    case MOCK_D_ALLREDUCE: return "ncclAllReduce";
    case MOCK_D_ALLGATHER: return "ncclAllGather";
    case MOCK_D_BCAST: return "ncclBroadcast";
    case MOCK_D_ALLTOALL: return "ncclAlltoAll";
    case MOCK_D_GATHER: return "ncclGather";
    case MOCK_D_SCATTER: return "ncclScatter";
    default: return "?";
    }
}

/* ------------------------------------------------------------ building */

static entry_t *ent_new(mock_comm_t *c, void *stream, int kind)
{
    entry_t *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->c = c;
    e->stream = stream;
    e->kind = c->world == NULL ? E_LOCAL : kind;
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
    return e;
}

void mock_ent_free(entry_t *e)
{
    mock_comm_t *c = e->c;
    free(e->x);
    free(e->tmp);
    free(e);
    mock_comm_unref(c);
}

entry_t *mock_ent_p2p(mock_comm_t *c, void *stream)
{
    return ent_new(c, stream, E_P2P);
}

static xfer_t *add_xfer(entry_t *e, int send, int peer, const void *app, size_t bytes, const mock_desc_t *d)
{
    if (e->nx == e->room) {
        int room = e->room ? 2 * e->room : 8;
        xfer_t *x = realloc(e->x, (size_t)room * sizeof(*x));
        if (x == NULL)
            return NULL;
        e->x = x;
        e->room = room;
    }
    memset(&e->x[e->nx], 0, sizeof(xfer_t));
    e->x[e->nx].send = send;
    e->x[e->nx].peer = peer;
    e->x[e->nx].app = app;
    e->x[e->nx].bytes = bytes;
    e->x[e->nx].d = *d;
    return &e->x[e->nx++];
}

int mock_ent_add(entry_t *e, int send, const void *buf, size_t count, int dt, int peer)
{
    mock_desc_t d = {send ? MOCK_D_SEND : MOCK_D_RECV, dt, -1, -1, count, count * mock_shm_dt_bytes(dt), 0, 0};
    if (e->kind == E_LOCAL)
        return 0;
    if (peer < 0 || peer >= e->c->size) {
        fprintf(stderr, "mock_nccl rank %d: an %s with peer %d of %d ranks\n", e->c->rank, mock_kind_name(d.kind),
                peer, e->c->size);
        return -1;
    }
    return add_xfer(e, send, peer, buf, d.bytes, &d) != NULL ? 0 : -1;
}

entry_t *mock_ent_coll(mock_comm_t *c, void *stream, int kind, const void *send, void *recv, size_t count, int dt,
                       int op, int root)
{
    entry_t *e = ent_new(c, stream, E_COLL);
    size_t bytes = count * mock_shm_dt_bytes(dt);
    mock_desc_t d = {kind, dt, op, root, count, bytes, 0, 0};
    if (e == NULL)
        return NULL;
    e->coll = kind;
    e->sendbuff = send;
    e->recvbuff = recv;
    e->count = count;
    e->dt = dt;
    e->op = op;
    e->root = root;
    if (e->kind == E_LOCAL)
        return e;
    if (kind == MOCK_D_ALLREDUCE && (e->tmp = malloc((size_t)c->size * bytes + 1)) == NULL) {
        mock_ent_free(e);
        return NULL;
    }
    for (int p = 0; p < c->size; p++) {
        char *chunk_s = (char *)(uintptr_t)send + (size_t)p * bytes, *chunk_r = (char *)recv + (size_t)p * bytes;
        if (p == c->rank)
            continue;
        if (kind == MOCK_D_BCAST || kind == MOCK_D_SCATTER) {
            if (c->rank == root)
                add_xfer(e, 1, p, kind == MOCK_D_SCATTER ? chunk_s : send, bytes, &d);
            else if (p == root)
                add_xfer(e, 0, p, recv, bytes, &d);
            continue;
        }
        if (kind == MOCK_D_GATHER) {
            if (c->rank == root)
                add_xfer(e, 0, p, chunk_r, bytes, &d);
            else if (p == root)
                add_xfer(e, 1, p, send, bytes, &d);
            continue;
        }
        if (kind == MOCK_D_ALLTOALL) {
            add_xfer(e, 1, p, chunk_s, bytes, &d);
            add_xfer(e, 0, p, chunk_r, bytes, &d);
            continue;
        }
        add_xfer(e, 1, p, send, bytes, &d);
        add_xfer(e, 0, p, kind == MOCK_D_ALLREDUCE ? (void *)(e->tmp + (size_t)p * bytes)
                                                   : (void *)((char *)recv + (size_t)p * bytes), bytes, &d);
    }
    return e;
}

static void fail(entry_t *e, ncclResult_t rc)
{
    e->failed = 1;
    if (e->c->async_err == ncclSuccess)
        e->c->async_err = rc;
}

/* ------------------------------------------------------------ the entry */

static uint64_t key_of(const entry_t *e, const xfer_t *x)
{
    uint64_t k = mock_shm_uid(e->c->world), s = x->send ? (uint64_t)e->c->rank : (uint64_t)x->peer;
    uint64_t d = x->send ? (uint64_t)x->peer : (uint64_t)e->c->rank;
    k ^= (s * 0x9E3779B97F4A7C15ULL) ^ (d * 0xC2B2AE3D27D4EB4FULL) ^ (x->n * 0x165667B19E3779F9ULL);
    k ^= k >> 29;
    return k * 0xBF58476D1CE4E5B9ULL;
}

static void x_reach(void *arg)
{
    entry_t *e = arg;
    mock_comm_t *c = e->c;
    e->t_last = e->t_check = now();
    if (e->kind == E_LOCAL)
        return;
    for (int i = 0; i < e->nx; i++) {
        xfer_t *x = &e->x[i];
        uint64_t *top = x->send ? &c->wtop[x->peer] : &c->rtop[x->peer];
        x->buf = host_of(x->app);
        mock_shm_reach(c->world, x->send ? c->rank : x->peer, x->send ? x->peer : c->rank, x->send, x->n, &x->d);
        if (*top < x->n)
            *top = x->n;
    }
    if (e->coll == MOCK_D_ALLREDUCE)
        memcpy(e->tmp + (size_t)c->rank * e->count * mock_shm_dt_bytes(e->dt), host_of(e->sendbuff),
               e->count * mock_shm_dt_bytes(e->dt));
}

static int same(const mock_desc_t *a, const mock_desc_t *b)
{
    if (a->kind == MOCK_D_SEND || a->kind == MOCK_D_RECV)
        return b->kind == (a->kind == MOCK_D_SEND ? MOCK_D_RECV : MOCK_D_SEND) && a->count == b->count &&
               a->dt == b->dt;
    return a->kind == b->kind && a->count == b->count && a->dt == b->dt && a->op == b->op && a->root == b->root;
}

static void say_mismatch(const entry_t *e, const xfer_t *x, const mock_desc_t *p)
{
    fprintf(stderr, "mock_nccl: count or type mismatch on communicator %04llx: rank %d's %s of %llu x %s %s rank %d "
            "(its operation #%u) meets rank %d's %s of %llu x %s %s rank %d (its operation #%u)\n",
            (unsigned long long)(mock_shm_uid(e->c->world) & 0xffff), e->c->rank, mock_kind_name(x->d.kind),
            (unsigned long long)x->d.count, mock_dt_name(x->d.dt), x->send ? "to" : "from", x->peer, x->d.opno,
            x->peer, mock_kind_name(p->kind), (unsigned long long)p->count, mock_dt_name(p->dt), x->send ? "from" : "to",
            e->c->rank, p->opno);
}

/* One transfer, as far as it goes now: 1 when something moved. */
static int x_step(entry_t *e, xfer_t *x)
{
    mock_comm_t *c = e->c;
    uint64_t *cur = x->send ? &c->wnext[x->peer] : &c->rnext[x->peer];
    mock_desc_t pd;
    size_t k;
    if (x->state == X_WAIT) {
        if (*cur != x->n ||
            !mock_shm_reached(c->world, x->send ? c->rank : x->peer, x->send ? x->peer : c->rank, !x->send, x->n,
                              &pd))
            return 0;
        if (!same(&x->d, &pd)) {
            if (!x->send)
                say_mismatch(e, x, &pd);
            x->state = X_FAIL;
            (*cur)++;
            fail(e, ncclInvalidUsage);
            return 1;
        }
        x->state = X_MOVE;
        x->hdr = x->n;
    }
    if (x->state != X_MOVE)
        return 0;
    k = 0;
    if (x->hmoved < 8) {
        size_t m = x->send ? mock_shm_write(c->world, x->peer, (char *)&x->hdr + x->hmoved, 8 - x->hmoved)
                           : mock_shm_read(c->world, x->peer, (char *)&x->hdr + x->hmoved, 8 - x->hmoved);
        x->hmoved += m;
        k += m;
        if (x->hmoved < 8)
            return k > 0;
        if (x->hdr != x->n) {
            fprintf(stderr, "mock_nccl rank %d: the channel from rank %d is out of step (transfer %llu, got %llu)\n",
                    c->rank, x->peer, (unsigned long long)x->n, (unsigned long long)x->hdr);
            x->state = X_FAIL;
            fail(e, ncclSystemError);
            return 1;
        }
    }
    if (x->moved < x->bytes) {
        size_t m = x->send ? mock_shm_write(c->world, x->peer, (const char *)x->buf + x->moved, x->bytes - x->moved)
                           : mock_shm_read(c->world, x->peer, (char *)x->buf + x->moved, x->bytes - x->moved);
        x->moved += m;
        k += m;
    }
    if (x->moved == x->bytes) {
        x->state = X_DONE;
        (*cur)++;
        if (!x->send && e->kind == E_P2P)
            mock_shm_mutate(c->world, x->peer, x->buf, x->bytes);
        return 1;
    }
    return k > 0;
}

/* Transfers that cannot complete: a peer gone or aborted, this side
 * aborted, or no progress for MOCK_NCCL_TIMEOUT. */
static void x_check(entry_t *e, double t)
{
    mock_comm_t *c = e->c;
    int late = t - e->t_last > timeout_s();
    for (int i = 0; i < e->nx; i++) {
        xfer_t *x = &e->x[i];
        int pid = mock_shm_pid(c->world, x->peer), dead;
        const char *why = NULL;
        if (x->state == X_DONE || x->state == X_FAIL)
            continue;
        dead = pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
        if (c->aborted)
            why = "";
        else if (dead)
            why = "the peer's process is gone";
        else if (mock_shm_aborted(c->world, x->peer))
            why = "the peer aborted the communicator";
        else if (late)
            why = "no progress within MOCK_NCCL_TIMEOUT";
        if (why == NULL)
            continue;
        if (*why != '\0') {
            fprintf(stderr, "mock_nccl (shm) rank %d: a %s of %zu bytes %s rank %d is stuck at %zu bytes: %s\n",
                    c->rank, x->send ? "send" : "receive", x->bytes, x->send ? "to" : "from", x->peer, x->moved, why);
            if (dead)
                fprintf(stderr, "mock_nccl (shm) rank %d: rank %d (pid %d) has exited\n", c->rank, x->peer, pid);
        }
        x->state = X_FAIL;
        fail(e, ncclSystemError);
    }
}

/* The collective's result, once every transfer is done. */
static void finish(entry_t *e)
{
    mock_comm_t *c = e->c;
    size_t bytes = e->count * mock_shm_dt_bytes(e->dt);
    if (e->kind != E_COLL || e->failed)
        return;
    if (e->coll == MOCK_D_ALLREDUCE) {
        /* in rank order: the same bits everywhere */
        for (int p = 1; p < c->size; p++)
            if (mock_shm_reduce(e->tmp, e->tmp + (size_t)p * bytes, e->count, e->dt, e->op) != 0) {
                fprintf(stderr, "mock_nccl rank %d: ncclAllReduce of datatype %d with op %d is not emulated\n",
                        c->rank, e->dt, e->op);
                fail(e, ncclInvalidArgument);
                return;
            }
        if (e->op == ncclAvg)
            mock_shm_avg(e->tmp, e->count, e->dt, c->size);
        memcpy(host_of(e->recvbuff), e->tmp, bytes);
    } else if (e->coll == MOCK_D_ALLGATHER) {
        memmove((char *)host_of(e->recvbuff) + (size_t)c->rank * bytes, host_of(e->sendbuff), bytes);
    } else if (e->coll == MOCK_D_BCAST && c->rank == e->root && e->sendbuff != e->recvbuff) {
        memmove(host_of(e->recvbuff), host_of(e->sendbuff), bytes);
    } else if (e->coll == MOCK_D_ALLTOALL || (e->coll == MOCK_D_GATHER && c->rank == e->root)) {
        /* this rank's own chunk */
        memmove((char *)host_of(e->recvbuff) + (size_t)c->rank * bytes,
                (const char *)host_of(e->sendbuff) + (e->coll == MOCK_D_ALLTOALL ? (size_t)c->rank * bytes : 0), bytes);
    } else if (e->coll == MOCK_D_SCATTER && c->rank == e->root) {
        memmove(host_of(e->recvbuff), (const char *)host_of(e->sendbuff) + (size_t)c->rank * bytes, bytes);
    }
}

static int x_progress(void *arg)
{
    entry_t *e = arg;
    int moved = 0, left = 0;
    double t;
    if (e->kind == E_LOCAL)
        return 1;
    for (int i = 0; i < e->nx; i++)
        moved |= x_step(e, &e->x[i]);
    t = now();
    if (moved)
        e->t_last = t;
    if (e->c->aborted || t - e->t_check > 0.05) {
        e->t_check = t;
        x_check(e, t);
    }
    for (int i = 0; i < e->nx; i++)
        left += e->x[i].state != X_DONE && e->x[i].state != X_FAIL;
    if (left == 0) {
        finish(e);
        return 1;
    }
    return moved ? 2 : 0;
}

static int x_waits(void *arg, mock_wkey_t *w, int max)
{
    entry_t *e = arg;
    mock_comm_t *c = e->c;
    int k = 0;
    for (int i = 0; i < e->nx && k < max && e->kind != E_LOCAL; i++) {
        xfer_t *x = &e->x[i];
        if (x->state != X_WAIT ||
            mock_shm_reached(c->world, x->send ? c->rank : x->peer, x->send ? x->peer : c->rank, !x->send, x->n, NULL))
            continue;
        w[k].key = key_of(e, x);
        w[k++].pid = mock_shm_pid(c->world, x->peer);
    }
    return k;
}

static int x_keys(void *arg, uint64_t *k, int max)
{
    entry_t *e = arg;
    int n = 0;
    for (int i = 0; i < e->nx && n < max && e->kind != E_LOCAL; i++)
        k[n++] = key_of(e, &e->x[i]);
    return n;
}

static void x_describe(void *arg, char *buf, size_t len)
{
    entry_t *e = arg;
    unsigned long long cid = e->c->world != NULL ? mock_shm_uid(e->c->world) & 0xffff : 0;
    if (e->kind == E_COLL) {
        snprintf(buf, len, "%s of %zu x %s (communicator %04llx, operation #%u)", mock_kind_name(e->coll), e->count,
                 mock_dt_name(e->dt), cid, e->opno);
    } else {
        int s = 0, r = 0;
        for (int i = 0; i < e->nx; i++) {
            s += e->x[i].send;
            r += !e->x[i].send;
        }
        snprintf(buf, len, "a group of %d ncclSend and %d ncclRecv (communicator %04llx, operation #%u)", s, r, cid,
                 e->opno);
    }
}

/* A peer reached its side, or a later transfer of the same pair was
 * reached here (it waits for this one on the channel). */
static int x_wanted(void *arg)
{
    entry_t *e = arg;
    mock_comm_t *c = e->c;
    for (int i = 0; i < e->nx && e->kind != E_LOCAL; i++) {
        xfer_t *x = &e->x[i];
        if ((x->send ? c->wtop[x->peer] : c->rtop[x->peer]) > x->n ||
            mock_shm_reached(c->world, x->send ? c->rank : x->peer, x->send ? x->peer : c->rank, !x->send, x->n, NULL))
            return 1;
    }
    return 0;
}

static void x_release(void *arg)
{
    mock_ent_free(arg);
}

static int span_has(const void *a, size_t an, const void *p, size_t n)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)p;
    return a != NULL && an > 0 && n > 0 && x < y + n && y < x + an;
}

/* Whether the operation reads or writes [p, p + n): its buffers. */
static int x_uses(void *arg, const void *p, size_t n)
{
    entry_t *e = arg;
    size_t bytes = e->count * mock_shm_dt_bytes(e->dt), all = bytes * (size_t)e->c->size;
    if (e->kind != E_P2P && e->coll != 0) {
        int wide_s = e->coll == MOCK_D_ALLTOALL || e->coll == MOCK_D_SCATTER;
        int wide_r = e->coll == MOCK_D_ALLGATHER || e->coll == MOCK_D_ALLTOALL || e->coll == MOCK_D_GATHER;
        return span_has(e->sendbuff, wide_s ? all : bytes, p, n) || span_has(e->recvbuff, wide_r ? all : bytes, p, n);
    }
    for (int i = 0; i < e->nx; i++)
        if (span_has(e->x[i].app, e->x[i].bytes, p, n))
            return 1;
    return 0;
}

static const mock_ext_ops_t ext_ops = {x_reach, x_progress, x_waits, x_keys, x_describe, x_wanted, x_release, x_uses};

/* ------------------------------------------------------------ enqueue */

static void number(entry_t *e)
{
    mock_comm_t *c = e->c;
    e->opno = ++c->opno;
    if (e->kind == E_COLL) {
        mock_desc_t d = {e->coll, e->dt, e->op, e->root, e->count, 0, e->opno, (uint32_t)c->rank};
        mock_seq_coll(c, &d);
    }
    for (int i = 0; i < e->nx; i++) {
        xfer_t *x = &e->x[i];
        x->n = x->send ? ++c->sseq[x->peer] : ++c->rseq[x->peer];
        x->d.opno = e->opno;
        x->d.rank = (uint32_t)c->rank;
        if (e->kind == E_P2P)
            mock_seq_p2p(c, x->send, x->peer, x->n, &x->d);
    }
}

/* NCCL orders one communicator's operations whatever their streams: it
 * records an event after each, which the next one's stream waits for when
 * it is another.  So does the stand-in (through the stand-in driver's
 * events, while a context is current; none: not ordered).  Before an
 * operation is queued on `stream`, and after (done 1). */
static void order(mock_comm_t *c, void *stream, int done)
{
    static int (*ev_create)(void **, unsigned), (*ev_record)(void *, void *), (*wait_ev)(void *, void *, unsigned);
    if (ev_create == NULL) {
        *(void **)&ev_record = cuda_sym("cuEventRecord");
        *(void **)&wait_ev = cuda_sym("cuStreamWaitEvent");
        *(void **)&ev_create = cuda_sym("cuEventCreate");
    }
    if (ev_create == NULL || ev_record == NULL || wait_ev == NULL)
        return;
    if (!done) {
        if (c->order_ev != NULL && c->last_stream != stream)
            wait_ev(stream, c->order_ev, 0);
        return;
    }
    if (c->order_ev == NULL && ev_create(&c->order_ev, 0) != 0)
        c->order_ev = NULL;
    if (c->order_ev != NULL && ev_record(c->order_ev, stream) == 0)
        c->last_stream = stream;
}

void mock_ent_order_free(mock_comm_t *c)
{
    int (*ev_destroy)(void *);
    *(void **)&ev_destroy = c->order_ev != NULL ? cuda_sym("cuEventDestroy_v2") : NULL;
    if (ev_destroy != NULL)
        ev_destroy(c->order_ev);
    c->order_ev = NULL;
}

ncclResult_t mock_ent_enqueue(entry_t *e)
{
    static mock_cuda_enqueue_ext_fn enq;
    static mock_cuda_captured_fn captured;
    char what[128];
    if (enq == NULL) {
        *(void **)&enq = cuda_sym("mock_cuda_enqueue_ext");
        *(void **)&captured = cuda_sym("mock_cuda_captured");
    }
    x_describe(e, what, sizeof(what));
    if (captured != NULL && captured(e->stream, what)) {
        /* recorded into the capture's graph, not run now */
        mock_ent_free(e);
        return ncclSuccess;
    }
    if (e->c->aborted) {
        mock_ent_free(e);
        return ncclInvalidUsage;
    }
    number(e);
    if (enq == NULL) {
        /* no stand-in driver: the operation runs here and now */
        int r;
        x_reach(e);
        while ((r = x_progress(e)) != 1) {
            struct timespec ts = {0, 100000};
            if (r == 0)
                nanosleep(&ts, NULL);
        }
        mock_ent_free(e);
        return ncclSuccess;
    }
    order(e->c, e->stream, 0);
    {
        mock_comm_t *c = e->c;
        void *stream = e->stream;
        if (enq(stream, &ext_ops, e) != 0) {
            mock_ent_free(e);
            return ncclUnhandledCudaError;
        }
        order(c, stream, 1);
    }
    return ncclSuccess;
}

void mock_ent_hold(mock_comm_t *c, entry_t *e)
{
    entry_t **pp = &c->held;
    while (*pp != NULL)
        pp = &(*pp)->next;
    e->next = NULL;
    *pp = e;
}

ncclResult_t mock_ent_release_held(mock_comm_t *c)
{
    ncclResult_t rc = ncclSuccess;
    while (c->held != NULL) {
        entry_t *e = c->held;
        ncclResult_t r;
        c->held = e->next;
        if ((r = mock_ent_enqueue(e)) != ncclSuccess && rc == ncclSuccess)
            rc = r;
    }
    return rc;
}
