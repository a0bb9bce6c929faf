/*
 * A stand-in for NCCL, built as tests/gpu/mock/.libs/libnccl.so.2 (soname
 * libnccl.so.2) from the real nccl.h, so the prototypes are NCCL's.  It
 * records every call it receives, with its arguments, and keeps the group
 * depth per thread as NCCL does (ncclGroupEnd outside a group is
 * ncclInvalidUsage).  Tests read the record through mock_nccl_*.
 *
 * Operations are entries of the caller's stream in the stand-in driver's
 * model (tests/gpu/standins/mock_nccl_ent.c): each completes only when the peers'
 * matching entries have been reached by their streams, so a send without
 * its receive never completes (and the driver's wait-for graph reports the
 * deadlock), and a count or type mismatch is reported naming both sides.
 * Inside a group, operations are held and enqueued at the outermost
 * ncclGroupEnd, as NCCL does.  An operation on a stream being captured is
 * recorded into the capture, not run.
 *
 * Communicators:
 *   - ncclCommInitRank / ncclCommInitRankConfig with an id of
 *     ncclGetUniqueId under MOCK_NCCL_SHM=1 (the processes of a
 *     torchrun-like launcher, tests/gpu/nccl/nompi_launch.c): the id's
 *     shared-memory segment (tests/gpu/standins/mock_nccl_shm.c);
 *   - under MOCK_NCCL_MPI=1 in an MPI program (after MPI_Init):
 *     mock_nccl_comm_new(), ncclCommInitRank(Config) and ncclCommSplit are
 *     collective over MPI_COMM_WORLD (a segment named through MPI, the only
 *     use of MPI: the data moves through shared memory), with MPI's ranks
 *     (a split: the ranks of its colour, ordered by key);
 *   - otherwise one rank: operations complete when reached and move
 *     nothing.
 * ncclAllReduce, ncclAllGather, ncclBroadcast, ncclBcast, ncclAlltoAll,
 * ncclGather, ncclScatter, ncclSend and ncclRecv (mock_nccl_ops.c) move
 * data between the ranks (device pointers of the stand-in driver through
 * their shadow; the reduction in rank order, so every rank gets the same
 * bits); ncclReduce and ncclReduceScatter move nothing.
 * ncclCommAbort makes the communicator's operations fail at once (and its
 * peers' transfers with it); ncclCommDestroy frees it once its operations
 * have ended.  Under MOCK_NCCL_CONNECT_HANG=1 the ncclGroupEnd of a group
 * with sends or receives blocks, as NCCL's does while it connects to a
 * peer that never answers, until every communicator in it is aborted
 * (then ncclSystemError, nothing enqueued; mock_nccl_connecting() says a
 * thread is in it).
 *
 * Non-blocking communicators: one made by ncclCommInitRankConfig or
 * ncclCommSplit with config->blocking == 0 (a split without a config
 * inherits its parent's) answers ncclInProgress from its creation, from an
 * operation outside a group and from the ncclGroupEnd of a group it took
 * part in; ncclCommGetAsyncError then answers ncclInProgress MOCK_NCCL_POLLS
 * times (default 3) and ncclSuccess after, and only then are the
 * operations enqueued: a caller that reads the result before polling it out
 * reads the old bytes.  Any operation on the communicator while one is in
 * progress is ncclInvalidUsage, as NCCL requires ncclCommGetAsyncError to
 * be polled out first.
 *
 * Built with -DMOCK_NCCL_NO_MPI (tests/gpu/mock_nompi/libnccl.so.2) it names
 * no MPI symbol (tests/gpu/nccl/run_nompi.sh).
 */
#include <dlfcn.h>
#ifdef MOCK_NCCL_NO_MPI
#include "mock_nompi_mpi.h"   /* the build for a process without MPI: replay off */
#else
#include <mpi.h>
#endif
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mock_nccl.h"
#include "mock_nccl_int.h"

#define API __attribute__((visibility("default")))

static mock_call_t *calls;
static int ncalls, room;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int depth;

/* (the record grows: a pointer from mock_nccl_call is valid until the
 * next NCCL call) */
void mock_record(const char *fn, const void *s, void *r, size_t count, int dt, int op, int root, void *comm,
                   void *stream)
{
    pthread_mutex_lock(&lock);
    if (ncalls == room) {
        int nroom = room ? 2 * room : 4096;
        mock_call_t *p = realloc(calls, (size_t)nroom * sizeof(mock_call_t));
        if (p != NULL) {
            calls = p;
            room = nroom;
        }
    }
    if (ncalls < room) {
        mock_call_t *c = &calls[ncalls++];
        memset(c, 0, sizeof(*c));
        strncpy(c->fn, fn, sizeof(c->fn) - 1);
        c->sendbuf = s;
        c->recvbuf = r;
        c->count = count;
        c->datatype = dt;
        c->op = op;
        c->root = root;
        c->comm = comm;
        c->stream = stream;
        c->depth = depth;
    }
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------ test API */

API int mock_nccl_ncalls(void)
{
    return ncalls;
}

static int connecting;

API int mock_nccl_connecting(void)
{
    return __atomic_load_n(&connecting, __ATOMIC_ACQUIRE);
}

/* The i-th call received (i < 0: from the end). */
API const mock_call_t *mock_nccl_call(int i)
{
    if (i < 0)
        i += ncalls;
    return i >= 0 && i < ncalls ? &calls[i] : NULL;
}

API int mock_nccl_depth(void)
{
    return depth;
}

int mock_in_group(void)
{
    return depth > 0;
}

static int polls_set;

/* The polls of the next operations in progress (0: MOCK_NCCL_POLLS). */
API void mock_nccl_set_polls(int n)
{
    polls_set = n;
}

int mock_polls(void)
{
    const char *v = getenv("MOCK_NCCL_POLLS");
    if (polls_set > 0)
        return polls_set;
    return v != NULL && atoi(v) > 0 ? atoi(v) : 3;
}

/* Whether comm has an operation in progress (polls left). */
API int mock_nccl_pending(ncclComm_t comm)
{
    return comm != NULL ? ((mock_comm_t *)comm)->pending : 0;
}

static ncclComm_t next_split;

/* The communicator the next ncclCommSplit returns (an address that held
 * another communicator before, say). */
API void mock_nccl_next_split(ncclComm_t c)
{
    next_split = c;
}

/* ------------------------------------------------------- communicators */

static int replay(void)
{
    static int on = -1;
    int init = 0, fin = 0;
    if (on < 0)
        on = getenv("MOCK_NCCL_MPI") != NULL && atoi(getenv("MOCK_NCCL_MPI")) != 0;
    if (!on)
        return 0;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    return init && !fin;
}

/* c (zeroed, or a test's address) as a communicator of world (NULL: one rank). */
static mock_comm_t *comm_init(mock_comm_t *c, mock_shm_t *world)
{
    int n = world != NULL ? mock_shm_size(world) : 1;
    memset(c, 0, sizeof(*c));
    c->world = world;
    c->size = n;
    c->rank = world != NULL ? mock_shm_rank(world) : 0;
    c->refs = 1;
    c->sseq = calloc((size_t)n, sizeof(uint64_t));
    c->rseq = calloc((size_t)n, sizeof(uint64_t));
    c->wnext = calloc((size_t)n, sizeof(uint64_t));
    c->rnext = calloc((size_t)n, sizeof(uint64_t));
    c->wtop = calloc((size_t)n, sizeof(uint64_t));
    c->rtop = calloc((size_t)n, sizeof(uint64_t));
    c->connected = calloc((size_t)n, 1);
    if (c->sseq == NULL || c->rseq == NULL || c->wnext == NULL || c->rnext == NULL || c->wtop == NULL ||
        c->rtop == NULL || c->connected == NULL)
        abort();
    for (int p = 0; p < n; p++)
        c->wnext[p] = c->rnext[p] = 1;
    return c;
}

static mock_comm_t *gone;
static pthread_mutex_t gone_lock = PTHREAD_MUTEX_INITIALIZER;

void mock_comm_unref(mock_comm_t *c)
{
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    mock_ent_order_free(c);
    mock_shm_leave(c->world);
    c->world = NULL;
    free(c->sseq);
    free(c->rseq);
    free(c->wnext);
    free(c->rnext);
    free(c->wtop);
    free(c->rtop);
    free(c->connected);
    pthread_mutex_lock(&gone_lock);
    c->gone = gone;
    gone = c;
    pthread_mutex_unlock(&gone_lock);
}

mock_comm_t *mock_comm_live(ncclComm_t comm, const char *fn)
{
    mock_comm_t *c = (mock_comm_t *)comm;
    if (c != NULL && __atomic_load_n(&c->closing, __ATOMIC_ACQUIRE)) {
        fprintf(stderr, "mock NCCL: %s on a communicator after its ncclCommDestroy or ncclCommAbort "
                        "(freed by the real library: a use after free)\n", fn);
        abort();
    }
    return c;
}

/* A segment of MPI_COMM_WORLD's ranks of colour `color` (every rank calls;
 * -1: all of them), ordered by key then world rank; NULL for a rank
 * outside it (or after a line on stderr). */
static mock_shm_t *world_join(int color, int key)
{
    static unsigned seq;
    char id[96];
    int rank = 0, size = 1, me = 0, n = 0, *all;
    mock_shm_t *w = NULL;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    memset(id, 0, sizeof(id));
    if (rank == 0)
        mock_shm_unique_id(id, sizeof(id) - 16);
    if ((all = malloc(2 * (size_t)size * sizeof(int))) == NULL ||
        PMPI_Bcast(id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
        PMPI_Allgather((int[2]){color, key}, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS) {
        free(all);
        fprintf(stderr, "mock_nccl: a communicator's rendezvous through MPI failed\n");
        return NULL;
    }
    seq++;
    for (int r = 0; r < size; r++) {
        if (all[2 * r] != color)
            continue;
        n++;
        if (r != rank && (all[2 * r + 1] < key || (all[2 * r + 1] == key && r < rank)))
            me++;
    }
    free(all);
    if (color != -1 || n == size) {
        snprintf(id + strlen(id), 16, "-c%d", color < 0 ? 0 : color & 0xffff);
        w = mock_shm_join(id, n, me);
    }
    return w;
}

static ncclComm_t comm_new(int collective)
{
    mock_comm_t *c = malloc(sizeof(*c));
    mock_shm_t *w = collective && replay() ? world_join(-1, 0) : NULL;
    if (c == NULL)
        return NULL;
    return (ncclComm_t)comm_init(c, w);
}

/* A communicator: one rank, or (MOCK_NCCL_MPI=1 after MPI_Init) every
 * rank of MPI_COMM_WORLD (collective). */
API ncclComm_t mock_nccl_comm_new(void)
{
    return comm_new(1);
}

/* --------------------------------------------------------------- groups */

static __thread gop_t *gops;
static __thread int ngops, gops_room;

int mock_group_add(const gop_t *g)
{
    if (ngops == gops_room) {
        int r = gops_room ? 2 * gops_room : 64;
        gop_t *p = realloc(gops, (size_t)r * sizeof(*p));
        if (p == NULL)
            return -1;
        gops = p;
        gops_room = r;
    }
    gops[ngops++] = *g;
    return 0;
}

/* An operation's entry on its stream now, or held for the polls of a
 * non-blocking communicator (1 then). */
ncclResult_t mock_submit(struct entry *e, mock_comm_t *c, int *held_p)
{
    if (e == NULL)
        return ncclSystemError;
    if (c->nonblocking) {
        mock_ent_hold(c, e);
        *held_p = 1;
        return ncclSuccess;
    }
    return mock_ent_enqueue(e);
}

/* The group's operations: consecutive sends and receives of one
 * communicator and stream in one entry, each collective in its own. */
/* MOCK_NCCL_CONNECT_HANG: a group with point-to-point operations blocks
 * until all its communicators are aborted.  1 when it did (the group
 * dropped). */
static int connect_hang(void)
{
    struct timespec ts = {0, 1000000};
    int p2p = 0, open;
    if (getenv("MOCK_NCCL_CONNECT_HANG") == NULL || atoi(getenv("MOCK_NCCL_CONNECT_HANG")) == 0)
        return 0;
    for (int i = 0; i < ngops; i++)
        p2p |= !gops[i].coll;
    if (!p2p)
        return 0;
    __atomic_add_fetch(&connecting, 1, __ATOMIC_ACQ_REL);
    do {
        nanosleep(&ts, NULL);
        open = 0;
        for (int i = 0; i < ngops; i++)
            open |= !__atomic_load_n(&gops[i].c->aborted, __ATOMIC_ACQUIRE);
    } while (open);
    __atomic_sub_fetch(&connecting, 1, __ATOMIC_ACQ_REL);
    ngops = 0;
    return 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ncclResult_t mock_connect(const gop_t *g, int n)
{
    const char *v = getenv("MOCK_NCCL_TIMEOUT");
    double t0 = now_s(), limit = v != NULL && atof(v) > 0 ? atof(v) : 60.0;
    struct timespec ts = {0, 200000};
    int waiting = 1;
    for (int i = 0; i < n; i++)
        if (!g[i].coll && g[i].c->world != NULL && !g[i].c->connected[g[i].peer])
            mock_shm_connect(g[i].c->world, g[i].peer);
    while (waiting) {
        waiting = 0;
        for (int i = 0; i < n; i++) {
            mock_comm_t *c = g[i].c;
            int p = g[i].peer;
            const char *why = NULL;
            if (g[i].coll || c->world == NULL || c->connected[p])
                continue;
            if (mock_shm_connected(c->world, p)) {
                c->connected[p] = 1;
                continue;
            }
            if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
                return ncclSystemError;
            if (mock_shm_aborted(c->world, p))
                why = "it aborted the communicator";
            else if (mock_shm_pid(c->world, p) > 0 && kill(mock_shm_pid(c->world, p), 0) != 0)
                why = "its process is gone";
            else if (now_s() - t0 > limit)
                why = "not within MOCK_NCCL_TIMEOUT";
            if (why != NULL) {
                fprintf(stderr, "mock_nccl rank %d: a group with a send or receive with rank %d (their first on "
                        "communicator %04llx: NCCL connects them in it) waits for rank %d to reach its own, and %s\n",
                        c->rank, p, (unsigned long long)(mock_shm_uid(c->world) & 0xffff), p, why);
                return ncclSystemError;
            }
            waiting = 1;
        }
        if (waiting)
            nanosleep(&ts, NULL);
    }
    return ncclSuccess;
}

static ncclResult_t group_flush(void)
{
    ncclResult_t rc = ncclSuccess;
    int held = 0;
    if (connect_hang())
        return ncclSystemError;
    if ((rc = mock_connect(gops, ngops)) != ncclSuccess) {
        ngops = 0;
        return rc;
    }
    for (int i = 0; i < ngops;) {
        gop_t *g = &gops[i];
        struct entry *e;
        ncclResult_t r;
        mock_comm_live((ncclComm_t)g->c, "ncclGroupEnd");
        if (g->coll) {
            e = mock_ent_coll(g->c, g->stream, g->coll, g->sbuf, g->rbuf, g->count, g->dt, g->op, g->peer);
            i++;
        } else {
            e = mock_ent_p2p(g->c, g->stream);
            for (; i < ngops && !gops[i].coll && gops[i].c == g->c && gops[i].stream == g->stream; i++)
                if (e != NULL && mock_ent_add(e, gops[i].send, gops[i].send ? gops[i].sbuf : gops[i].rbuf,
                                              gops[i].count, gops[i].dt, gops[i].peer) != 0 && rc == ncclSuccess)
                    rc = ncclInvalidArgument;
        }
        if ((r = mock_submit(e, g->c, &held)) != ncclSuccess && rc == ncclSuccess)
            rc = r;
        if (held)
            g->c->pending = mock_polls();
    }
    ngops = 0;
    return rc == ncclSuccess && held ? ncclInProgress : rc;
}

API ncclResult_t ncclGroupStart(void)
{
    mock_record("ncclGroupStart", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
    depth++;
    return ncclSuccess;
}

API ncclResult_t ncclGroupEnd(void)
{
    mock_record("ncclGroupEnd", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
    if (depth == 0)
        return ncclInvalidUsage;
    if (--depth > 0)
        return ncclSuccess;
    return group_flush();
}

/* ------------------------------------------------- communicators' lives */

int mock_busy(ncclComm_t comm)
{
    return comm != NULL && ((mock_comm_t *)comm)->pending > 0;
}

API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    *count = mock_comm_live(comm, "ncclCommCount") != NULL ? ((mock_comm_t *)comm)->size : 1;
    return ncclSuccess;
}

API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    *rank = mock_comm_live(comm, "ncclCommUserRank") != NULL ? ((mock_comm_t *)comm)->rank : 0;
    return ncclSuccess;
}

API ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    mock_record("ncclCommFinalize", NULL, NULL, 0, -1, -1, -1, comm, NULL);
    mock_seq_end(mock_comm_live(comm, "ncclCommFinalize"), "ncclCommFinalize");
    /* as a non-blocking communicator may answer */
    return getenv("MOCK_NCCL_NONBLOCKING") != NULL ? ncclInProgress : ncclSuccess;
}

/* The user lets go: the communicator goes once its operations ended. */
static void comm_drop(mock_comm_t *c)
{
    if (c == NULL)
        return;
    while (c->held != NULL) {
        /* (never enqueued: dropped with the communicator) */
        c->aborted = 1;
        mock_ent_release_held(c);
    }
    __atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
    mock_comm_unref(c);
}

API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    mock_record("ncclCommDestroy", NULL, NULL, 0, -1, -1, -1, comm, NULL);
    mock_seq_end(mock_comm_live(comm, "ncclCommDestroy"), "ncclCommDestroy");
    comm_drop(mock_comm_live(comm, "ncclCommDestroy"));
    return ncclSuccess;
}

API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    mock_comm_t *c = mock_comm_live(comm, "ncclCommAbort");
    mock_record("ncclCommAbort", NULL, NULL, 0, -1, -1, -1, comm, NULL);
    if (c != NULL) {
        __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
        if (c->world != NULL)
            mock_shm_abort(c->world);
    }
    comm_drop(c);
    return ncclSuccess;
}

API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    mock_comm_t *c, *parent = (mock_comm_t *)comm;
    mock_shm_t *w = NULL;
    mock_record("ncclCommSplit", NULL, NULL, 0, color, key, -1, comm, NULL);
    if (mock_busy(comm))
        return ncclInvalidUsage;
    /* replay: a split of a communicator of every rank is collective */
    if (parent != NULL && parent->world != NULL && replay()) {
        w = world_join(color, key);
        if (w == NULL && color != NCCL_SPLIT_NOCOLOR) {
            *newcomm = NULL;
            return ncclSystemError;
        }
    }
    if (color == NCCL_SPLIT_NOCOLOR) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    c = next_split != NULL ? (mock_comm_t *)next_split : malloc(sizeof(*c));
    next_split = NULL;
    if (c == NULL)
        return ncclSystemError;
    comm_init(c, w);
    *newcomm = (ncclComm_t)c;
    /* without a configuration, the parent's */
    c->nonblocking = config != NULL ? config->blocking == 0 : parent != NULL && parent->nonblocking;
    if (c->nonblocking) {
        c->pending = mock_polls();
        return ncclInProgress;
    }
    return ncclSuccess;
}

/* A communicator of ncclCommInitRank(Config): the id's segment
 * (MOCK_NCCL_SHM), every MPI rank (replay), or one rank. */
static ncclResult_t init_rank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    mock_comm_t *c = malloc(sizeof(*c));
    mock_shm_t *w = NULL;
    if (comm == NULL || c == NULL) {
        free(c);
        return ncclInvalidArgument;
    }
    if (mock_shm_on() && (w = mock_shm_join(id.internal, nranks, rank)) == NULL) {
        free(c);
        return ncclSystemError;
    }
    if (w == NULL && replay() && (w = world_join(-1, 0)) == NULL) {
        free(c);
        return ncclSystemError;
    }
    *comm = (ncclComm_t)comm_init(c, w);
    return ncclSuccess;
}

API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                        ncclConfig_t *config)
{
    ncclResult_t rc;
    mock_comm_t *c;
    mock_record("ncclCommInitRankConfig", NULL, NULL, (size_t)nranks, -1, -1, rank, NULL, NULL);
    if ((rc = init_rank(comm, nranks, commId, rank)) != ncclSuccess)
        return rc;
    c = (mock_comm_t *)*comm;
    c->nonblocking = config != NULL && config->blocking == 0;
    if (c->nonblocking) {
        c->pending = mock_polls();
        return ncclInProgress;
    }
    return ncclSuccess;
}

/* The id of a communicator: MOCK_NCCL_SHM's rendezvous name. */
API ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    mock_record("ncclGetUniqueId", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
    if (id == NULL)
        return ncclInvalidArgument;
    mock_shm_unique_id(id->internal, sizeof(id->internal));
    return ncclSuccess;
}

API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    mock_record("ncclCommInitRank", NULL, NULL, (size_t)nranks, -1, -1, rank, NULL, NULL);
    return init_rank(comm, nranks, commId, rank);
}

API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    mock_comm_t *c = mock_comm_live(comm, "ncclCommGetAsyncError");
    ncclResult_t rc = ncclSuccess;
    if (c == NULL || asyncError == NULL)
        return ncclInvalidArgument;
    if (c->pending > 0 && --c->pending > 0) {
        *asyncError = ncclInProgress;
        return ncclSuccess;
    }
    /* the operations in progress are enqueued now */
    if (c->held != NULL)
        rc = mock_ent_release_held(c);
    *asyncError = rc != ncclSuccess ? rc : c->async_err;
    return ncclSuccess;
}

API const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclInProgress: return "operation in progress";
    default: return "mock nccl error";
    }
}
