/*
 * A stand-in for NCCL, built as tests/gpu/mock/.libs/libnccl.so.2 (soname
 * libnccl.so.2) from the real nccl.h, so the prototypes are NCCL's.  It
 * records every call it receives, with its arguments, and keeps the group
 * depth per thread as NCCL does (ncclGroupEnd outside a group is
 * ncclInvalidUsage).  Communicators are made with mock_nccl_comm_new().
 * Tests read the record through mock_nccl_*.
 *
 * Replay: with MOCK_NCCL_MPI=1 in the environment of an MPI program (after
 * MPI_Init), ncclAllGather and ncclAllReduce also move the data, through
 * PMPI over MPI_COMM_WORLD (whatever the communicator), and ncclCommCount
 * and ncclCommUserRank answer the world's size and rank; device pointers of
 * the stand-in driver (tests/gpu/mock_cuda.c) are read and written through
 * their host shadow.  ncclSend and ncclRecv move data too: inside a group
 * they are held and posted at the outermost ncclGroupEnd, as PMPI
 * point-to-point on MPI_COMM_WORLD matched in posting order per peer, and
 * the group end waits for them all (NCCL's rule: a group of sends and
 * receives completes as a whole); outside a group each completes at once.
 * A receive that gets fewer bytes than it posted fails the group
 * (ncclInvalidUsage): NCCL needs the counts of a send and its receive to
 * match.  Otherwise no data moves, and a communicator has one rank.
 * Operations complete when called: in replay mode, what the stand-in
 * driver has queued on the operation's stream before it runs first
 * (mock_cuda_stream_flush, so the driver's deferred mode,
 * MOCK_CUDA_DEFERRED, orders them as a GPU would); nothing queued after it
 * runs before it.
 *
 * Built with -DMOCK_NCCL_NO_MPI (tests/gpu/mock_nompi/libnccl.so.2) it names
 * no MPI symbol and never replays through MPI (tests/gpu/run_nompi.sh).
 *
 * Without MPI (MOCK_NCCL_SHM=1, tests/gpu/mock_nccl_shm.c): a communicator
 * made by ncclCommInitRank or ncclCommInitRankConfig with an id of
 * ncclGetUniqueId (the processes of a torchrun-like launcher,
 * tests/gpu/nompi_launch.c) joins the id's shared-memory segment, and its
 * ncclAllReduce, ncclAllGather, ncclBroadcast, ncclBcast, ncclSend and
 * ncclRecv move the data between its ranks as the MPI form does through
 * MPI (sends and receives held to the group's end, the stream flushed
 * first, device pointers through their shadow; the reduction in rank
 * order), and ncclCommCount and ncclCommUserRank answer its size and rank.
 * Every wait is bounded (MOCK_NCCL_TIMEOUT).  Other communicators (made by
 * mock_nccl_comm_new or ncclCommSplit) have one rank and move nothing.
 *
 * Non-blocking communicators: one made by ncclCommInitRankConfig or
 * ncclCommSplit with config->blocking == 0 (a split without a config
 * inherits its parent's) answers ncclInProgress from its creation, from
 * ncclAllReduce outside a group and from the ncclGroupEnd of a group it
 * took part in; ncclCommGetAsyncError then answers ncclInProgress
 * MOCK_NCCL_POLLS times (default 3) and ncclSuccess after, and only then
 * does the operation happen (the data of its ncclAllReduce, or its group's
 * sends and receives, moves at that last poll): a caller that reads the
 * result before polling it out reads the old bytes.  Any operation on the
 * communicator while one is in progress is ncclInvalidUsage, as NCCL
 * requires ncclCommGetAsyncError to be polled out first.
 */
#include <dlfcn.h>
#ifdef MOCK_NCCL_NO_MPI
#include "mock_nompi_mpi.h"   /* the build for a process without MPI: replay off */
#else
#include <mpi.h>
#endif
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mock_nccl.h"
#include "mock_nccl_shm.h"

#define API __attribute__((visibility("default")))


static mock_call_t *calls;
static int ncalls, room;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int depth;

/* (the record grows: a pointer from mock_nccl_call is valid until the
 * next NCCL call) */
static void record(const char *fn, const void *s, void *r, size_t count, int dt, int op, int root, void *comm,
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

/* A stand-in communicator. */
typedef struct p2p p2p_t;
typedef struct {
    int          nonblocking;
    int          pending;     /* polls of ncclCommGetAsyncError before the operation in progress happens */
    int          op;          /* 0 none, 1 an allreduce, 2 a group's sends and receives */
    const void  *sendbuff;
    void        *recvbuff;
    size_t       count;
    ncclDataType_t dt;
    ncclRedOp_t  redop;
    p2p_t       *p2p;         /* op 2: the group's */
    int          np2p;
    mock_shm_t  *world;       /* MOCK_NCCL_SHM: the ranks it moves data between */
} mock_comm_t;

API ncclComm_t mock_nccl_comm_new(void)
{
    return (ncclComm_t)calloc(1, sizeof(mock_comm_t));
}

/* Whether comm has an operation in progress (polls left). */
API int mock_nccl_pending(ncclComm_t comm)
{
    return comm != NULL ? ((mock_comm_t *)comm)->pending : 0;
}

static int polls_set;

/* The polls of the next operations in progress (0: MOCK_NCCL_POLLS). */
API void mock_nccl_set_polls(int n)
{
    polls_set = n;
}

static int polls(void)
{
    const char *v = getenv("MOCK_NCCL_POLLS");
    if (polls_set > 0)
        return polls_set;
    return v != NULL && atoi(v) > 0 ? atoi(v) : 3;
}

/* The communicator's next operation: ncclInvalidUsage while one is in
 * progress. */
static int busy(ncclComm_t comm)
{
    return comm != NULL && ((mock_comm_t *)comm)->pending > 0;
}

static void comm_free(ncclComm_t comm)
{
    if (comm != NULL) {
        free(((mock_comm_t *)comm)->p2p);
        mock_shm_leave(((mock_comm_t *)comm)->world);
    }
    free(comm);
}

/* The communicator's shared-memory ranks (MOCK_NCCL_SHM), or NULL. */
static mock_shm_t *world_of(ncclComm_t comm)
{
    return comm != NULL ? ((mock_comm_t *)comm)->world : NULL;
}

static ncclComm_t next_split;

/* The communicator the next ncclCommSplit returns (an address that held
 * another communicator before, say). */
API void mock_nccl_next_split(ncclComm_t c)
{
    next_split = c;
}

/* ------------------------------------------------------------- replay */

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

/* Host memory holding p's bytes: the stand-in driver's shadow of a device
 * pointer, else p. */
static void *host_of(const void *p)
{
    static void *(*shadow)(const void *);
    if (shadow == NULL) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL) {
            shadow = (void *(*)(const void *))dlsym(h, "mock_cuda_shadow");
            dlclose(h);
        }
    }
    return shadow != NULL ? shadow(p) : (void *)(uintptr_t)p;
}

/* Replay: run what the stand-in driver queued on `stream` so far (the
 * operation reads its buffers now). */
static void run_stream(cudaStream_t stream)
{
    static void (*flush)(void *);
    if (flush == NULL) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL) {
            flush = (void (*)(void *))dlsym(h, "mock_cuda_stream_flush");
            dlclose(h);
        }
    }
    if (flush != NULL)
        flush(stream);
}

static size_t dt_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static ncclResult_t replay_allgather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t dt)
{
    size_t bytes = sendcount * dt_size(dt);
    void *tmp = malloc(bytes ? bytes : 1);
    int rc;
    if (tmp == NULL)
        return ncclSystemError;
    memcpy(tmp, host_of(sendbuff), bytes);
    rc = PMPI_Allgather(tmp, (int)bytes, MPI_BYTE, host_of(recvbuff), (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    free(tmp);
    return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

/* float32 sum, avg, max, min; int64 and float64 sum, max, min; other
 * types move nothing. */
static ncclResult_t replay_allreduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,
                                     ncclRedOp_t op, mock_shm_t *w)
{
    MPI_Datatype mt = dt == ncclFloat32 ? MPI_FLOAT : dt == ncclInt64 ? MPI_LONG_LONG
                    : dt == ncclFloat64 ? MPI_DOUBLE : MPI_DATATYPE_NULL;
    MPI_Op mo = op == ncclMax ? MPI_MAX : op == ncclMin ? MPI_MIN : MPI_SUM;
    size_t bytes = count * dt_size(dt);
    void *tmp;
    int rc, n = 1;
    if (w != NULL)
        return (ncclResult_t)mock_shm_allreduce(w, host_of(sendbuff), host_of(recvbuff), count, dt, op);
    if (mt == MPI_DATATYPE_NULL || (op != ncclSum && op != ncclAvg && op != ncclMax && op != ncclMin))
        return ncclSuccess;
    if ((tmp = malloc(bytes ? bytes : 1)) == NULL)
        return ncclSystemError;
    memcpy(tmp, host_of(sendbuff), bytes);
    rc = PMPI_Allreduce(tmp, host_of(recvbuff), (int)count, mt, mo, MPI_COMM_WORLD);
    free(tmp);
    PMPI_Comm_size(MPI_COMM_WORLD, &n);
    if (op == ncclAvg && dt == ncclFloat32) {
        float *r = (float *)host_of(recvbuff);
        for (size_t i = 0; i < count; i++)
            r[i] = r[i] / (float)n;
    }
    return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

/* ------------------------------------------------------------ NCCL API */

API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    *count = 1;
    if (world_of(comm) != NULL)
        *count = mock_shm_size(world_of(comm));
    else if (replay())
        PMPI_Comm_size(MPI_COMM_WORLD, count);
    return ncclSuccess;
}

API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    *rank = 0;
    if (world_of(comm) != NULL)
        *rank = mock_shm_rank(world_of(comm));
    else if (replay())
        PMPI_Comm_rank(MPI_COMM_WORLD, rank);
    return ncclSuccess;
}

/* Sends and receives of the open group (replay mode), posted at its end. */
struct p2p {
    int         send;
    void       *buf;
    size_t      bytes;
    int         peer;
    mock_shm_t *world;        /* MOCK_NCCL_SHM: its communicator's, else MPI */
};
static __thread p2p_t *p2p;
static __thread int np2p, room2p;
/* a non-blocking communicator that took part in the open group */
static __thread mock_comm_t *group_nb;

/* ops[0..n) through shared memory: one communicator's. */
static ncclResult_t p2p_run_shm(p2p_t *ops, int n)
{
    mock_shm_op_t *o = malloc((size_t)n * sizeof(*o));
    int rc = ncclSuccess;
    if (o == NULL)
        return ncclSystemError;
    for (int i = 0; i < n && rc == ncclSuccess; i++) {
        o[i] = (mock_shm_op_t){ops[i].send, ops[i].buf, ops[i].bytes, ops[i].peer};
        rc = ops[i].world == ops[0].world ? ncclSuccess : ncclInvalidUsage;
    }
    if (rc != ncclSuccess)
        fprintf(stderr, "mock_nccl (shm): a group of sends and receives on more than one communicator\n");
    else if ((rc = mock_shm_run(ops[0].world, o, n)) == ncclSuccess)
        mock_shm_drop(ops[0].world, o, n);   /* (the mutation, when asked for) */
    free(o);
    return (ncclResult_t)rc;
}

/* Post ops[0..n) as PMPI point-to-point and wait for them all. */
static ncclResult_t p2p_run(p2p_t *ops, int n)
{
    MPI_Request *rq = malloc((size_t)(n > 0 ? n : 1) * sizeof(MPI_Request));
    MPI_Status *sts = malloc((size_t)(n > 0 ? n : 1) * sizeof(MPI_Status));
    int rc = MPI_SUCCESS, short_recv = 0;
    if (n > 0 && ops[0].world != NULL) {
        free(rq);
        free(sts);
        return p2p_run_shm(ops, n);
    }
    if (rq == NULL || sts == NULL) {
        free(rq);
        free(sts);
        return ncclSystemError;
    }
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        p2p_t *p = &ops[i];
        rc = p->send ? PMPI_Isend(p->buf, (int)p->bytes, MPI_BYTE, p->peer, 7301, MPI_COMM_WORLD, &rq[i])
                     : PMPI_Irecv(p->buf, (int)p->bytes, MPI_BYTE, p->peer, 7301, MPI_COMM_WORLD, &rq[i]);
        if (rc != MPI_SUCCESS)
            n = i;
    }
    if (n > 0 && PMPI_Waitall(n, rq, sts) != MPI_SUCCESS)
        rc = MPI_ERR_OTHER;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        int got = 0;
        if (!ops[i].send && (PMPI_Get_count(&sts[i], MPI_BYTE, &got) != MPI_SUCCESS || (size_t)got != ops[i].bytes))
            short_recv = 1;
    }
    free(rq);
    free(sts);
    return rc != MPI_SUCCESS ? ncclSystemError : short_recv ? ncclInvalidUsage : ncclSuccess;
}

/* The thread's held sends and receives: run now, or handed to the
 * non-blocking communicator of the group (run at its last poll). */
static ncclResult_t p2p_flush(void)
{
    int n = np2p;
    np2p = 0;
    if (group_nb != NULL && n > 0) {
        mock_comm_t *c = group_nb;
        free(c->p2p);
        c->p2p = malloc((size_t)n * sizeof(p2p_t));
        if (c->p2p == NULL)
            return ncclSystemError;
        memcpy(c->p2p, p2p, (size_t)n * sizeof(p2p_t));
        c->np2p = n;
        c->op = 2;
        return ncclSuccess;
    }
    return p2p_run(p2p, n);
}

static ncclResult_t p2p_post(int send, const void *buf, size_t count, ncclDataType_t dt, int peer,
                            ncclComm_t comm, cudaStream_t stream)
{
    if (world_of(comm) == NULL && !replay())
        return ncclSuccess;
    run_stream(stream);
    if (np2p == room2p) {
        int room = room2p ? 2 * room2p : 256;
        p2p_t *p = realloc(p2p, (size_t)room * sizeof(p2p_t));
        if (p == NULL)
            return ncclInternalError;
        p2p = p;
        room2p = room;
    }
    p2p[np2p++] = (p2p_t){send, host_of(buf), count * dt_size(dt), peer, world_of(comm)};
    return depth == 0 ? p2p_flush() : ncclSuccess;
}

/* An operation of comm enters the open group, or (outside groups) starts
 * on a non-blocking communicator: 1 when it is then in progress. */
static int nb_enter(ncclComm_t comm)
{
    mock_comm_t *c = (mock_comm_t *)comm;
    if (c == NULL || !c->nonblocking)
        return 0;
    if (depth > 0) {
        group_nb = c;
        return 0;
    }
    c->pending = polls();
    return 1;
}

API ncclResult_t ncclGroupStart(void)
{
    record("ncclGroupStart", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
    depth++;
    return ncclSuccess;
}

API ncclResult_t ncclGroupEnd(void)
{
    ncclResult_t rc = ncclSuccess;
    record("ncclGroupEnd", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
    if (depth == 0)
        return ncclInvalidUsage;
    depth--;
    if (depth > 0)
        return ncclSuccess;
    if (np2p > 0)
        rc = p2p_flush();
    if (group_nb != NULL && rc == ncclSuccess) {
        /* the group's non-blocking communicator: in progress until polled */
        group_nb->pending = polls();
        rc = ncclInProgress;
    }
    group_nb = NULL;
    return rc;
}

API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    record("ncclAllReduce", sendbuff, recvbuff, count, datatype, op, -1, comm, stream);
    if (comm == NULL)
        return ncclInvalidArgument;
    if (busy(comm))
        return ncclInvalidUsage;
    if (nb_enter(comm)) {
        /* the data moves at the last poll */
        mock_comm_t *c = (mock_comm_t *)comm;
        c->op = 1;
        c->sendbuff = sendbuff;
        c->recvbuff = recvbuff;
        c->count = count;
        c->dt = datatype;
        c->redop = op;
        return ncclInProgress;
    }
    if (world_of(comm) == NULL && !replay())
        return ncclSuccess;
    run_stream(stream);
    return replay_allreduce(sendbuff, recvbuff, count, datatype, op, world_of(comm));
}

API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                               int root, ncclComm_t comm, cudaStream_t stream)
{
    record("ncclBroadcast", sendbuff, recvbuff, count, datatype, -1, root, comm, stream);
    if (world_of(comm) == NULL)
        return ncclSuccess;
    run_stream(stream);
    return (ncclResult_t)mock_shm_bcast(world_of(comm), host_of(sendbuff), host_of(recvbuff),
                                        count * dt_size(datatype), root);
}

API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    record("ncclBcast", buff, buff, count, datatype, -1, root, comm, stream);
    if (world_of(comm) == NULL)
        return ncclSuccess;
    run_stream(stream);
    return (ncclResult_t)mock_shm_bcast(world_of(comm), host_of(buff), host_of(buff), count * dt_size(datatype),
                                        root);
}

API ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    record("ncclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream);
    return ncclSuccess;
}

API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                               ncclComm_t comm, cudaStream_t stream)
{
    record("ncclAllGather", sendbuff, recvbuff, sendcount, datatype, -1, -1, comm, stream);
    if (world_of(comm) == NULL && !replay())
        return ncclSuccess;
    run_stream(stream);
    if (world_of(comm) != NULL)
        return (ncclResult_t)mock_shm_allgather(world_of(comm), host_of(sendbuff), host_of(recvbuff),
                                                sendcount * dt_size(datatype));
    return replay_allgather(sendbuff, recvbuff, sendcount, datatype);
}

API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    record("ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, -1, comm, stream);
    return ncclSuccess;
}

API ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    record("ncclSend", sendbuff, NULL, count, datatype, -1, peer, comm, stream);
    if (busy(comm))
        return ncclInvalidUsage;
    if (depth > 0)
        nb_enter(comm);
    return p2p_post(1, sendbuff, count, datatype, peer, comm, stream);
}

API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    record("ncclRecv", NULL, recvbuff, count, datatype, -1, peer, comm, stream);
    if (busy(comm))
        return ncclInvalidUsage;
    if (depth > 0)
        nb_enter(comm);
    return p2p_post(0, recvbuff, count, datatype, peer, comm, stream);
}

API ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    record("ncclCommFinalize", NULL, NULL, 0, -1, -1, -1, comm, NULL);
    /* as a non-blocking communicator may answer */
    return getenv("MOCK_NCCL_NONBLOCKING") != NULL ? ncclInProgress : ncclSuccess;
}

API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    record("ncclCommDestroy", NULL, NULL, 0, -1, -1, -1, comm, NULL);
    comm_free(comm);
    return ncclSuccess;
}

API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    record("ncclCommAbort", NULL, NULL, 0, -1, -1, -1, comm, NULL);
    comm_free(comm);
    return ncclSuccess;
}

API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    mock_comm_t *c;
    record("ncclCommSplit", NULL, NULL, 0, color, key, -1, comm, NULL);
    if (busy(comm))
        return ncclInvalidUsage;
    *newcomm = next_split != NULL ? next_split : mock_nccl_comm_new();
    next_split = NULL;
    c = (mock_comm_t *)*newcomm;
    /* without a configuration, the parent's */
    c->nonblocking = config != NULL ? config->blocking == 0 : comm != NULL && ((mock_comm_t *)comm)->nonblocking;
    if (c->nonblocking) {
        c->pending = polls();
        return ncclInProgress;
    }
    return ncclSuccess;
}

API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                        ncclConfig_t *config)
{
    mock_comm_t *c;
    record("ncclCommInitRankConfig", NULL, NULL, (size_t)nranks, -1, -1, rank, NULL, NULL);
    if (comm == NULL || (c = (mock_comm_t *)mock_nccl_comm_new()) == NULL)
        return ncclInvalidArgument;
    if (mock_shm_on() && (c->world = mock_shm_join(commId.internal, nranks, rank)) == NULL) {
        free(c);
        return ncclSystemError;
    }
    *comm = (ncclComm_t)c;
    c->nonblocking = config != NULL && config->blocking == 0;
    if (c->nonblocking) {
        c->pending = polls();
        return ncclInProgress;
    }
    return ncclSuccess;
}

/* The id of a communicator: MOCK_NCCL_SHM's rendezvous name. */
API ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    record("ncclGetUniqueId", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
    if (id == NULL)
        return ncclInvalidArgument;
    mock_shm_unique_id(id->internal, sizeof(id->internal));
    return ncclSuccess;
}

API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    mock_comm_t *c;
    record("ncclCommInitRank", NULL, NULL, (size_t)nranks, -1, -1, rank, NULL, NULL);
    if (comm == NULL || (c = (mock_comm_t *)mock_nccl_comm_new()) == NULL)
        return ncclInvalidArgument;
    if (mock_shm_on() && (c->world = mock_shm_join(commId.internal, nranks, rank)) == NULL) {
        free(c);
        return ncclSystemError;
    }
    *comm = (ncclComm_t)c;
    return ncclSuccess;
}

API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    mock_comm_t *c = (mock_comm_t *)comm;
    ncclResult_t rc = ncclSuccess;
    if (c == NULL || asyncError == NULL)
        return ncclInvalidArgument;
    if (c->pending > 0 && --c->pending > 0) {
        *asyncError = ncclInProgress;
        return ncclSuccess;
    }
    /* the operation in progress happens now */
    if (c->op == 1 && (replay() || c->world != NULL))
        rc = replay_allreduce(c->sendbuff, c->recvbuff, c->count, c->dt, c->redop, c->world);
    else if (c->op == 2)
        rc = p2p_run(c->p2p, c->np2p);
    free(c->p2p);
    c->p2p = NULL;
    c->np2p = 0;
    c->op = 0;
    *asyncError = rc;
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
