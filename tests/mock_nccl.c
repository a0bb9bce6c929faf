/*
 * A stand-in for NCCL, built as tests/mock/.libs/libnccl.so.2 (soname
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
 * the stand-in driver (tests/mock_cuda.c) are read and written through
 * their host shadow.  ncclSend and ncclRecv move data too: inside a group
 * they are held and posted at the outermost ncclGroupEnd, as PMPI
 * point-to-point on MPI_COMM_WORLD matched in posting order per peer, and
 * the group end waits for them all (NCCL's rule: a group of sends and
 * receives completes as a whole); outside a group each completes at once.
 * Otherwise no data moves, and a communicator has one rank.  Operations
 * complete when called (streams are ignored).
 */
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "mock_nccl.h"

#define API __attribute__((visibility("default")))


#define MAX_CALLS 4096
static mock_call_t calls[MAX_CALLS];
static int ncalls;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int depth;

static void record(const char *fn, const void *s, void *r, size_t count, int dt, int op, int root, void *comm,
                   void *stream)
{
    pthread_mutex_lock(&lock);
    if (ncalls < MAX_CALLS) {
        mock_call_t *c = &calls[ncalls++];
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

API ncclComm_t mock_nccl_comm_new(void)
{
    return (ncclComm_t)calloc(1, 64);
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

/* float32 sum, avg, max, min; int64 sum, max, min; other types move
 * nothing. */
static ncclResult_t replay_allreduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,
                                     ncclRedOp_t op)
{
    MPI_Datatype mt = dt == ncclFloat32 ? MPI_FLOAT : dt == ncclInt64 ? MPI_LONG_LONG : MPI_DATATYPE_NULL;
    MPI_Op mo = op == ncclMax ? MPI_MAX : op == ncclMin ? MPI_MIN : MPI_SUM;
    size_t bytes = count * dt_size(dt);
    void *tmp;
    int rc, n = 1;
    if (mt == MPI_DATATYPE_NULL || (op != ncclSum && op != ncclAvg && op != ncclMax && op != ncclMin))
        return ncclSuccess;
    if ((tmp = malloc(bytes ? bytes : 1)) == NULL)
        return ncclSystemError;
    memcpy(tmp, host_of(sendbuff), bytes);
    rc = PMPI_Allreduce(tmp, host_of(recvbuff), (int)count, mt, mo, MPI_COMM_WORLD);
    free(tmp);
    PMPI_Comm_size(MPI_COMM_WORLD, &n);
    if (op == ncclAvg) {
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
    if (replay())
        PMPI_Comm_size(MPI_COMM_WORLD, count);
    return ncclSuccess;
}

API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    *rank = 0;
    if (replay())
        PMPI_Comm_rank(MPI_COMM_WORLD, rank);
    return ncclSuccess;
}

/* Sends and receives of the open group (replay mode), posted at its end. */
#define MAX_P2P 1024
typedef struct {
    int         send;
    void       *buf;
    size_t      bytes;
    int         peer;
} p2p_t;
static __thread p2p_t p2p[MAX_P2P];
static __thread int np2p;

static ncclResult_t p2p_flush(void)
{
    MPI_Request rq[MAX_P2P];
    int n = np2p, rc = MPI_SUCCESS;
    np2p = 0;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        p2p_t *p = &p2p[i];
        rc = p->send ? PMPI_Isend(p->buf, (int)p->bytes, MPI_BYTE, p->peer, 7301, MPI_COMM_WORLD, &rq[i])
                     : PMPI_Irecv(p->buf, (int)p->bytes, MPI_BYTE, p->peer, 7301, MPI_COMM_WORLD, &rq[i]);
        if (rc != MPI_SUCCESS)
            n = i;
    }
    if (n > 0 && PMPI_Waitall(n, rq, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        rc = MPI_ERR_OTHER;
    return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

static ncclResult_t p2p_post(int send, const void *buf, size_t count, ncclDataType_t dt, int peer)
{
    if (!replay())
        return ncclSuccess;
    if (np2p >= MAX_P2P)
        return ncclInternalError;
    p2p[np2p++] = (p2p_t){send, host_of(buf), count * dt_size(dt), peer};
    return depth == 0 ? p2p_flush() : ncclSuccess;
}

API ncclResult_t ncclGroupStart(void)
{
    record("ncclGroupStart", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
    depth++;
    return ncclSuccess;
}

API ncclResult_t ncclGroupEnd(void)
{
    record("ncclGroupEnd", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
    if (depth == 0)
        return ncclInvalidUsage;
    depth--;
    return depth == 0 && np2p > 0 ? p2p_flush() : ncclSuccess;
}

API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    record("ncclAllReduce", sendbuff, recvbuff, count, datatype, op, -1, comm, stream);
    if (comm == NULL)
        return ncclInvalidArgument;
    return replay() ? replay_allreduce(sendbuff, recvbuff, count, datatype, op) : ncclSuccess;
}

API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                               int root, ncclComm_t comm, cudaStream_t stream)
{
    record("ncclBroadcast", sendbuff, recvbuff, count, datatype, -1, root, comm, stream);
    return ncclSuccess;
}

API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    record("ncclBcast", buff, buff, count, datatype, -1, root, comm, stream);
    return ncclSuccess;
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
    return replay() ? replay_allgather(sendbuff, recvbuff, sendcount, datatype) : ncclSuccess;
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
    return p2p_post(1, sendbuff, count, datatype, peer);
}

API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    record("ncclRecv", NULL, recvbuff, count, datatype, -1, peer, comm, stream);
    return p2p_post(0, recvbuff, count, datatype, peer);
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
    free(comm);
    return ncclSuccess;
}

API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    record("ncclCommAbort", NULL, NULL, 0, -1, -1, -1, comm, NULL);
    free(comm);
    return ncclSuccess;
}

API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    (void)config;
    record("ncclCommSplit", NULL, NULL, 0, color, key, -1, comm, NULL);
    *newcomm = next_split != NULL ? next_split : mock_nccl_comm_new();
    next_split = NULL;
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
