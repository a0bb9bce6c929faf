/*
 * The IPC stand-in NCCL's enqueue (ipc_proto.h): a group's operations as
 * chunk steps on one stream, interleaved (step k of every operation before
 * step k + 1 of any), so that a group's sends and receives progress
 * together as NCCL's do: a rank sending a message longer than its peer's
 * FIFO to a peer that sends one back in the same group does not wait for
 * itself.  A group of sends and receives only goes in turns instead
 * (p2p_turns), whatever the order of its calls.  Every wait is a stream
 * wait on a flag value (ipc_proto.h); the host never waits here.
 */
#include "ipc_proto.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const hpi_engine_t *E;

/* an engine step that failed breaks the communicator: part of the group
 * is enqueued */
#define TRY(c, call, what)                                                                          \
    do {                                                                                            \
        if ((call) != 0)                                                                            \
            return hpi_comm_fail((c), ncclUnhandledCudaError, "%s: %s", (what), E->last_error()); \
    } while (0)

typedef struct {
    hpi_comm_t *c;
    uint64_t    sent0[HPI_MAX_RANKS];
} launch_comm_t;

/* ------------------------------------------------------------ chunks */

static ncclResult_t send_chunk(hpi_comm_t *c, void *s, int p, const void *src, size_t len)
{
    int me = hpi_comm_rank(c);
    uint64_t g = (*hpi_sent(c, p))++, S = hpi_slots(c);
    int slot = (int)(g % S);
    if (g >= S)
        TRY(c, E->wait_geq(s, hpi_consumed_flag(c, me, p, slot), (uint32_t)(g - S + 1)), "waiting for a free slot");
    if (len > 0)
        TRY(c, E->copy(s, hpi_fifo_slot(c, p, me, slot), src, len), "copying a chunk to a peer");
    TRY(c, E->write(s, hpi_ready_flag(c, p, me, slot), (uint32_t)(g + 1)), "signalling a chunk");
    return ncclSuccess;
}

static ncclResult_t recv_wait(hpi_comm_t *c, void *s, int p, void **slot_p)
{
    int me = hpi_comm_rank(c);
    uint64_t g = *hpi_rcvd(c, p), S = hpi_slots(c);
    *slot_p = hpi_fifo_slot(c, me, p, (int)(g % S));
    TRY(c, E->wait_geq(s, hpi_ready_flag(c, me, p, (int)(g % S)), (uint32_t)(g + 1)), "waiting for a chunk");
    return ncclSuccess;
}

static ncclResult_t recv_release(hpi_comm_t *c, void *s, int p)
{
    uint64_t g = (*hpi_rcvd(c, p))++, S = hpi_slots(c);
    TRY(c, E->write(s, hpi_consumed_flag(c, p, hpi_comm_rank(c), (int)(g % S)), (uint32_t)(g + 1)),
        "releasing a slot");
    return ncclSuccess;
}

static ncclResult_t reduce(hpi_comm_t *c, void *s, const hpi_task_t *t, void *dst, const void *const *src, int nsrc,
                           uint64_t n, int scale)
{
    hpi_red_t r;
    memset(&r, 0, sizeof(r));
    r.dst = dst;
    for (int i = 0; i < nsrc; i++)
        r.src[i] = src[i];
    r.nsrc = nsrc;
    r.count = n;
    r.dtype = t->dtype;
    r.op = scale ? HPI_SCALE : t->op;
    r.div = scale ? 0 : t->div;
    r.scale_f = t->scale_f;
    r.scale_i = t->scale_i;
    r.scale_p = t->scale_p;
    if (n > 0)
        TRY(c, E->reduce(s, &r), "launching a reduction");
    return ncclSuccess;
}

/* this rank's contribution to a reduction: a premultiplied sum's is
 * scaled into the scratch chunk first */
static ncclResult_t own(hpi_comm_t *c, void *s, const hpi_task_t *t, const char *src, uint64_t n, const void **out_p)
{
    ncclResult_t rc;
    *out_p = src;
    if (!t->premul || n == 0)
        return ncclSuccess;
    if ((rc = reduce(c, s, t, hpi_scratch(c), (const void *const *)&src, 1, n, 1)) != ncclSuccess)
        return rc;
    *out_p = hpi_scratch(c);
    return ncclSuccess;
}

/* every rank's contribution, rank order, into dst */
static ncclResult_t gather_reduce(hpi_comm_t *c, void *s, const hpi_task_t *t, const void *mine, void *dst,
                                  uint64_t n)
{
    const void *src[HPI_MAX_RANKS] = {0};
    int N = hpi_comm_size(c), me = hpi_comm_rank(c);
    ncclResult_t rc;
    for (int r = 0; r < N; r++) {
        void *slot;
        if (r == me) {
            src[r] = mine;
        } else {
            if ((rc = recv_wait(c, s, r, &slot)) != ncclSuccess)
                return rc;
            src[r] = slot;
        }
    }
    if ((rc = reduce(c, s, t, dst, src, N, n, 0)) != ncclSuccess)
        return rc;
    for (int r = 0; r < N; r++)
        if (r != me && (rc = recv_release(c, s, r)) != ncclSuccess)
            return rc;
    return ncclSuccess;
}

/* ------------------------------------------------------------- steps */

static uint64_t steps_of(const hpi_task_t *t)
{
    size_t es = hpi_dtype_size(t->dtype), chunk = hpi_chunk(t->comm);
    if (t->kind == HPI_K_SEND || t->kind == HPI_K_RECV || t->kind == HPI_K_COPY)
        return (t->count * es + chunk - 1) / chunk;
    return (t->count + chunk / es - 1) / (chunk / es);
}

static ncclResult_t step(const hpi_task_t *t, uint64_t k, void *s)
{
    hpi_comm_t *c = t->comm;
    int N = hpi_comm_size(c), me = hpi_comm_rank(c), p;
    size_t es = hpi_dtype_size(t->dtype), chunk = hpi_chunk(c), E1 = chunk / es;
    uint64_t e0 = k * E1, n = t->count - e0 < E1 ? t->count - e0 : E1, off = e0 * es, len = n * es;
    uint64_t seg = t->count * es;
    const char *sb = t->sbuf;
    char *rb = t->rbuf;
    const void *mine;
    void *slot;
    ncclResult_t rc;

    if (t->kind == HPI_K_SEND || t->kind == HPI_K_RECV || t->kind == HPI_K_COPY) {
        off = k * chunk;
        len = seg - off < chunk ? seg - off : chunk;
    }
    switch (t->kind) {
    case HPI_K_SEND:
        return send_chunk(c, s, t->root, sb + off, len);
    case HPI_K_COPY:
        if (rb != sb)
            TRY(c, E->copy(s, rb + off, sb + off, len), "copying locally");
        return ncclSuccess;
    case HPI_K_RECV:
        if ((rc = recv_wait(c, s, t->root, &slot)) != ncclSuccess)
            return rc;
        TRY(c, E->copy(s, rb + off, slot, len), "copying a chunk out");
        return recv_release(c, s, t->root);
    case HPI_K_ALLREDUCE:
        if ((rc = own(c, s, t, sb + off, n, &mine)) != ncclSuccess)
            return rc;
        for (int j = 1; j < N; j++)
            if ((rc = send_chunk(c, s, (me + j) % N, mine, len)) != ncclSuccess)
                return rc;
        return gather_reduce(c, s, t, mine, rb + off, n);
    case HPI_K_REDUCE:
        if ((rc = own(c, s, t, sb + off, n, &mine)) != ncclSuccess)
            return rc;
        if (me != t->root)
            return send_chunk(c, s, t->root, mine, len);
        return gather_reduce(c, s, t, mine, rb + off, n);
    case HPI_K_BCAST:
        if (me == t->root) {
            if (rb != sb)
                TRY(c, E->copy(s, rb + off, sb + off, len), "copying the root's chunk");
            for (int j = 1; j < N; j++)
                if ((rc = send_chunk(c, s, (me + j) % N, sb + off, len)) != ncclSuccess)
                    return rc;
            return ncclSuccess;
        }
        if ((rc = recv_wait(c, s, t->root, &slot)) != ncclSuccess)
            return rc;
        TRY(c, E->copy(s, rb + off, slot, len), "copying a chunk out");
        return recv_release(c, s, t->root);
    case HPI_K_ALLGATHER:
        for (int j = 1; j < N; j++)
            if ((rc = send_chunk(c, s, (me + j) % N, sb + off, len)) != ncclSuccess)
                return rc;
        if (rb + me * seg + off != sb + off)
            TRY(c, E->copy(s, rb + me * seg + off, sb + off, len), "copying the own chunk");
        for (int j = 1; j < N; j++) {
            p = (me + N - j) % N;
            if ((rc = recv_wait(c, s, p, &slot)) != ncclSuccess)
                return rc;
            TRY(c, E->copy(s, rb + p * seg + off, slot, len), "copying a chunk out");
            if ((rc = recv_release(c, s, p)) != ncclSuccess)
                return rc;
        }
        return ncclSuccess;
    case HPI_K_REDSCAT:
        for (int j = 1; j < N; j++) {
            p = (me + j) % N;
            if ((rc = own(c, s, t, sb + p * seg + off, n, &mine)) != ncclSuccess ||
                (rc = send_chunk(c, s, p, mine, len)) != ncclSuccess)
                return rc;
        }
        if ((rc = own(c, s, t, sb + me * seg + off, n, &mine)) != ncclSuccess)
            return rc;
        return gather_reduce(c, s, t, mine, rb + off, n);
    default:
        return hpi_error(ncclInternalError, "unknown operation %d", t->kind);
    }
}

/* ------------------------------------------------------------ checks */

static ncclResult_t check(const hpi_task_t *t)
{
    hpi_comm_t *c = t->comm;
    int N = hpi_comm_size(c), red = t->kind == HPI_K_ALLREDUCE || t->kind == HPI_K_REDUCE ||
                                    t->kind == HPI_K_REDSCAT;
    ncclResult_t rc = hpi_comm_status(c);
    int cap;
    if (rc == ncclInProgress)
        return hpi_error(ncclInvalidUsage, "%s on a communicator whose creation has not finished",
                         hpi_kind_name(t->kind));
    if (rc != ncclSuccess)
        return rc;
    if (hpi_dtype_size(t->dtype) == 0)
        return hpi_error(ncclInvalidArgument, "%s: unknown datatype %d", hpi_kind_name(t->kind), t->dtype);
    if (red && (t->dtype == ncclFloat8e4m3 || t->dtype == ncclFloat8e5m2))
        return hpi_error(ncclInvalidArgument, "%s of %s: the IPC stand-in does not reduce 8-bit floats",
                         hpi_kind_name(t->kind), hpi_dtype_name(t->dtype));
    if (t->root < 0 || t->root >= N)
        return hpi_error(ncclInvalidArgument, "%s: %s %d of a communicator of %d ranks", hpi_kind_name(t->kind),
                         t->kind == HPI_K_SEND || t->kind == HPI_K_RECV ? "peer" : "root", t->root, N);
    if ((t->kind == HPI_K_SEND || t->kind == HPI_K_RECV) && t->root == hpi_comm_rank(c))
        return hpi_error(ncclInvalidUsage, "%s to or from itself (rank %d)", hpi_kind_name(t->kind), t->root);
    if (t->count > 0 && ((t->kind != HPI_K_RECV && t->sbuf == NULL) || (t->kind != HPI_K_SEND && t->rbuf == NULL)))
        return hpi_error(ncclInvalidArgument, "%s: a NULL buffer", hpi_kind_name(t->kind));
    if ((cap = E->capturing(t->stream)) != 0)
        return hpi_error(cap < 0 ? ncclUnhandledCudaError : ncclInvalidUsage, "%s: %s", hpi_kind_name(t->kind),
                         cap < 0 ? E->last_error() : "the IPC stand-in cannot be captured into a CUDA graph");
    return ncclSuccess;
}

static ncclResult_t post_all(const hpi_task_t *t)
{
    hpi_comm_t *c = t->comm;
    int N = hpi_comm_size(c), me = hpi_comm_rank(c);
    uint64_t bytes = t->count * hpi_dtype_size(t->dtype);
    ncclResult_t rc = ncclSuccess;
    switch (t->kind) {
    case HPI_K_COPY:
        return ncclSuccess;
    case HPI_K_SEND:
        return hpi_post(c, 0, t->root, t, bytes);
    case HPI_K_RECV:
        return hpi_post(c, 1, t->root, t, bytes);
    case HPI_K_BCAST:
    case HPI_K_REDUCE: {
        int out = (t->kind == HPI_K_BCAST) == (me == t->root);
        if (me != t->root)
            return hpi_post(c, out ? 0 : 1, t->root, t, bytes);
        for (int p = 0; p < N && rc == ncclSuccess; p++)
            if (p != me)
                rc = hpi_post(c, out ? 0 : 1, p, t, bytes);
        return rc;
    }
    default:
        for (int p = 0; p < N && rc == ncclSuccess; p++)
            if (p != me && (rc = hpi_post(c, 0, p, t, bytes)) == ncclSuccess)
                rc = hpi_post(c, 1, p, t, bytes);
        return rc;
    }
}

/* ------------------------------------------------------------ launch */

/* events joining a group's other streams to its launch stream, reused by
 * the thread (a wait binds to the record made just before it) */
static __thread void *ev_pool[64];
static __thread int ev_n;

static int pool_event(int i, void **ev_p)
{
    while (ev_n <= i && ev_n < 64 && E->event_new(&ev_pool[ev_n]) == 0)
        ev_n++;
    *ev_p = i < ev_n ? ev_pool[i] : NULL;
    return *ev_p == NULL ? -1 : 0;
}

static ncclResult_t join_streams(hpi_task_t *t, int n, void *L, int back)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        void *ev;
        int seen = t[i].stream == L;
        for (int j = 0; j < i && !seen; j++)
            seen = t[j].stream == t[i].stream;
        if (seen)
            continue;
        if (pool_event(back ? 0 : 1 + k++, &ev) != 0)
            return hpi_comm_fail(t[i].comm, ncclUnhandledCudaError, "cannot create an event: %s", E->last_error());
        if (back) {   /* the others wait for the launch stream's end */
            if (k++ == 0)
                TRY(t[i].comm, E->record(ev, L), "recording the group's end");
            TRY(t[i].comm, E->wait_event(t[i].stream, ev), "joining a stream to the group's end");
        } else {
            TRY(t[i].comm, E->record(ev, t[i].stream), "recording a stream's point");
            TRY(t[i].comm, E->wait_event(L, ev), "joining a stream to the group");
        }
    }
    return ncclSuccess;
}

/*
 * A group of sends and receives: its receives on the launch stream L, its
 * sends beside them on their communicators' send streams (forked from L
 * and joined back), each side in turns: turn j moves the j-th chunk of
 * every pair of this rank (a peer on a communicator, one way, the pair's
 * operations in the order of the calls).  A send then waits only for its
 * peer's receives of earlier turns, a receive only for its peer's send of
 * the same turn, whatever the order of the calls and however the peer
 * grouped its side, as NCCL's sends and receives progress apart: on one
 * stream, a rank whose receives come first waits for a peer whose
 * receives come first too, or whose sends are in a later group.
 */
static ncclResult_t p2p_turns(hpi_task_t *t, int n, const uint64_t *steps, void *L)
{
    uint64_t done[256] = {0};
    hpi_task_t *moved[256];
    hpi_comm_t *cs[64];
    void *ev;
    int left, ncs = 0;
    ncclResult_t rc = ncclSuccess;
    for (int i = 0; i < n && rc == ncclSuccess; i++)   /* the local copies first */
        for (; t[i].kind == HPI_K_COPY && done[i] < steps[i] && rc == ncclSuccess; done[i]++)
            rc = step(&t[i], done[i], L);
    for (int i = 0; i < n && rc == ncclSuccess; i++) {
        int j;
        for (j = 0; j < ncs && cs[j] != t[i].comm; j++)
            ;
        if (t[i].kind != HPI_K_SEND || steps[i] == 0 || j < ncs)
            continue;
        if (ncs == 0 && pool_event(0, &ev) != 0)
            return hpi_comm_fail(t[i].comm, ncclUnhandledCudaError, "cannot create an event: %s", E->last_error());
        if (ncs == 0)
            TRY(t[i].comm, E->record(ev, L), "recording the group's start");
        TRY(t[i].comm, E->wait_event(hpi_send_stream(t[i].comm), ev), "forking the group's sends");
        cs[ncs++] = t[i].comm;
    }
    do {
        for (int kind = HPI_K_SEND; kind <= HPI_K_RECV && rc == ncclSuccess; kind++) {
            int nm = 0;   /* the pairs that moved a chunk this turn */
            for (int i = 0; i < n && rc == ncclSuccess; i++) {
                int busy = 0;
                if (t[i].kind != kind || done[i] == steps[i])
                    continue;
                for (int j = 0; j < nm && !busy; j++)
                    busy = moved[j]->comm == t[i].comm && moved[j]->root == t[i].root;
                if (!busy) {
                    moved[nm++] = &t[i];
                    rc = step(&t[i], done[i]++, kind == HPI_K_SEND ? hpi_send_stream(t[i].comm) : L);
                }
            }
        }
        left = 0;
        for (int i = 0; i < n; i++)
            left |= done[i] < steps[i];
    } while (left && rc == ncclSuccess);
    for (int j = 0; j < ncs && rc == ncclSuccess; j++) {
        if (pool_event(1 + j, &ev) != 0)
            return hpi_comm_fail(cs[j], ncclUnhandledCudaError, "cannot create an event: %s", E->last_error());
        TRY(cs[j], E->record(ev, hpi_send_stream(cs[j])), "recording the group's sends' end");
        TRY(cs[j], E->wait_event(L, ev), "joining the group's sends");
    }
    return rc;
}

ncclResult_t hpi_group_launch(hpi_task_t *t, int n)
{
    launch_comm_t lc[64];
    int nc = 0;
    uint64_t steps[256], most = 0;
    int p2p = 1;
    void *L, *saved = NULL;
    ncclResult_t rc = ncclSuccess;

    if (E == NULL)
        E = hpi_engine();
    if (n == 0)
        return ncclSuccess;
    if (n > 256)
        return hpi_error(ncclInvalidUsage, "a group of %d operations: the IPC stand-in takes at most 256", n);
    L = t[0].stream;
    if (E->ctx_enter(hpi_comm_ctx(t[0].comm), &saved) != 0)
        return hpi_error(ncclUnhandledCudaError, "cannot make the communicator's context current: %s",
                         E->last_error());
    for (int i = 0; i < n && rc == ncclSuccess; i++)
        rc = check(&t[i]);
    for (int i = 0; i < n && rc == ncclSuccess; i++) {
        int j;
        for (j = 0; j < nc && lc[j].c != t[i].comm; j++)
            ;
        if (j == nc) {
            if (nc == 64) {
                rc = hpi_error(ncclInvalidUsage, "a group over more than 64 communicators");
                break;
            }
            lc[nc].c = t[i].comm;
            for (int p = 0; p < hpi_comm_size(t[i].comm); p++)
                lc[nc].sent0[p] = *hpi_sent(t[i].comm, p);
            nc++;
        }
        rc = post_all(&t[i]);
        steps[i] = steps_of(&t[i]);
        most = steps[i] > most ? steps[i] : most;
    }
    if (rc == ncclSuccess)
        rc = join_streams(t, n, L, 0);
    for (int i = 0; i < n && rc == ncclSuccess && p2p; i++)
        p2p = t[i].kind == HPI_K_SEND || t[i].kind == HPI_K_RECV || t[i].kind == HPI_K_COPY;
    if (rc == ncclSuccess && p2p)
        rc = p2p_turns(t, n, steps, L);
    for (uint64_t k = 0; k < most && rc == ncclSuccess && !p2p; k++)
        for (int i = 0; i < n && rc == ncclSuccess; i++)
            if (k < steps[i])
                rc = step(&t[i], k, L);
    /* a group completes when every chunk it sent was consumed */
    for (int j = 0; j < nc && rc == ncclSuccess; j++) {
        hpi_comm_t *c = lc[j].c;
        uint64_t S = hpi_slots(c);
        for (int p = 0; p < hpi_comm_size(c) && rc == ncclSuccess; p++) {
            uint64_t end = *hpi_sent(c, p), g = end - lc[j].sent0[p] > S ? end - S : lc[j].sent0[p];
            for (; g < end && rc == ncclSuccess; g++)
                if (E->wait_geq(L, hpi_consumed_flag(c, hpi_comm_rank(c), p, (int)(g % S)), (uint32_t)(g + 1)) != 0)
                    rc = hpi_comm_fail(c, ncclUnhandledCudaError, "waiting for the peer: %s", E->last_error());
        }
        if (rc == ncclSuccess)
            rc = hpi_comm_mark(c, L);
    }
    if (rc == ncclSuccess)
        rc = join_streams(t, n, L, 1);
    E->ctx_leave(saved);
    return rc;
}
