/*
 * The NCCL API of the IPC stand-in (ipc_proto.h): every function nccl.h
 * declares, so that any program built against it (PyTorch's
 * ProcessGroupNCCL, hipress) loads this libnccl.so.2 in NCCL's place.
 *
 * Done: communicators (ncclGetUniqueId, ncclCommInitRank, ...Config with
 * blocking or not, ...InitAll for one device, ...InitRankScalable,
 * ncclCommSplit, ncclCommShrink, ncclCommFinalize, ncclCommDestroy,
 * ncclCommAbort, the queries, ncclCommGetAsyncError), the collectives
 * (ncclAllReduce, ncclBroadcast, ncclBcast, ncclReduce, ncclAllGather,
 * ncclReduceScatter, ncclAlltoAll, ncclGather, ncclScatter: sum, prod,
 * max, min, avg and premultiplied sums of every integer and float type but
 * the 8-bit floats, which only move), ncclSend, ncclRecv, groups (nested,
 * over several communicators and streams), ncclMemAlloc, ncclMemFree.
 * ncclCommRegister registers nothing (NCCL's registration is an
 * optimisation).  Refused with ncclInvalidUsage and a message:
 * ncclCommWindowRegister, ncclCommRevoke, and the functions of later NCCL
 * releases (REFUSE below); ncclGroupSimulateEnd drops the group,
 * estimating 0.
 */
#include "ipc_proto.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

/* the calling thread's group */
static __thread int depth;
static __thread hpi_task_t *tasks;
static __thread int ntasks, cap;
static __thread ncclResult_t group_err;

static ncclResult_t launch_or_queue(const hpi_task_t *t)
{
    if (depth == 0) {
        hpi_task_t one = *t;
        return hpi_group_launch(&one, 1);
    }
    if (ntasks == cap) {
        int nc = cap ? 2 * cap : 16;
        hpi_task_t *nt = realloc(tasks, (size_t)nc * sizeof(*nt));
        if (nt == NULL)
            return group_err = hpi_error(ncclSystemError, "out of memory");
        tasks = nt;
        cap = nc;
    }
    tasks[ntasks++] = *t;
    return ncclSuccess;
}

API ncclResult_t ncclGroupStart(void)
{
    depth++;
    return ncclSuccess;
}

API ncclResult_t ncclGroupEnd(void)
{
    ncclResult_t rc;
    if (depth == 0)
        return hpi_error(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--depth > 0)
        return ncclSuccess;
    rc = group_err != ncclSuccess ? group_err : hpi_group_launch(tasks, ntasks);
    ntasks = 0;
    group_err = ncclSuccess;
    return rc;
}

API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *info)
{
    if (depth == 0)
        return hpi_error(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
    if (--depth == 0) {
        ntasks = 0;
        group_err = ncclSuccess;
    }
    if (info != NULL)
        info->estimatedTime = 0.0f;
    return ncclSuccess;
}

/* ------------------------------------------------------ reductions */

static pthread_mutex_t op_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int         used, dtype;
    ncclComm_t  comm;
    double      f;
    int64_t     i;
    const void *p;
} premul[64];

static ncclResult_t set_op(hpi_task_t *t, ncclRedOp_t op)
{
    int k = (int)op - (int)ncclNumOps;
    switch (op) {
    case ncclSum: case ncclProd: case ncclMax: case ncclMin:
        t->op = (int)op;
        return ncclSuccess;
    case ncclAvg:
        t->op = HPI_SUM;
        t->div = hpi_comm_size(t->comm);
        return ncclSuccess;
    default:
        break;
    }
    pthread_mutex_lock(&op_mu);
    if (k < 0 || k >= 64 || !premul[k].used || premul[k].comm != t->comm || premul[k].dtype != t->dtype) {
        pthread_mutex_unlock(&op_mu);
        return hpi_error(ncclInvalidArgument, "reduction op %d is not one of this communicator's for %s", (int)op,
                         hpi_dtype_name(t->dtype));
    }
    t->op = HPI_SUM;
    t->premul = 1;
    t->scale_f = premul[k].f;
    t->scale_i = premul[k].i;
    t->scale_p = premul[k].p;
    pthread_mutex_unlock(&op_mu);
    return ncclSuccess;
}

API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                          ncclScalarResidence_t residence, ncclComm_t comm)
{
    int k;
    if (op == NULL || scalar == NULL || comm == NULL || hpi_dtype_size(datatype) == 0)
        return hpi_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: a NULL argument or an unknown type");
    pthread_mutex_lock(&op_mu);
    for (k = 0; k < 64 && premul[k].used; k++)
        ;
    if (k == 64) {
        pthread_mutex_unlock(&op_mu);
        return hpi_error(ncclInvalidUsage, "more than 64 premultiplied sums at once");
    }
    memset(&premul[k], 0, sizeof(premul[k]));
    premul[k].used = 1;
    premul[k].dtype = datatype;
    premul[k].comm = comm;
    if (residence == ncclScalarDevice) {
        premul[k].p = scalar;
    } else {
        switch (datatype) {
        case ncclFloat16: premul[k].f = hpi_h2f(*(uint16_t *)scalar); break;
        case ncclBfloat16: premul[k].f = hpi_b2f(*(uint16_t *)scalar); break;
        case ncclFloat32: premul[k].f = *(float *)scalar; break;
        case ncclFloat64: premul[k].f = *(double *)scalar; break;
        case ncclInt8: premul[k].i = *(int8_t *)scalar; break;
        case ncclUint8: premul[k].i = *(uint8_t *)scalar; break;
        case ncclInt32: premul[k].i = *(int32_t *)scalar; break;
        case ncclUint32: premul[k].i = *(uint32_t *)scalar; break;
        default: premul[k].i = *(int64_t *)scalar; break;
        }
    }
    *op = (ncclRedOp_t)((int)ncclNumOps + k);
    pthread_mutex_unlock(&op_mu);
    return ncclSuccess;
}

API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    int k = (int)op - (int)ncclNumOps;
    ncclResult_t rc = ncclSuccess;
    pthread_mutex_lock(&op_mu);
    if (k < 0 || k >= 64 || !premul[k].used || premul[k].comm != comm)
        rc = hpi_error(ncclInvalidArgument, "ncclRedOpDestroy: op %d is not one of this communicator's", (int)op);
    else
        premul[k].used = 0;
    pthread_mutex_unlock(&op_mu);
    return rc;
}

/* --------------------------------------------------------- operations */

static ncclResult_t task(int kind, const void *s, void *r, size_t count, ncclDataType_t dt, int root,
                         ncclComm_t comm, cudaStream_t stream, hpi_task_t *t)
{
    if (comm == NULL)
        return hpi_error(ncclInvalidArgument, "%s: a NULL communicator", hpi_kind_name(kind));
    memset(t, 0, sizeof(*t));
    t->kind = kind;
    t->comm = comm;
    t->stream = (void *)stream;
    t->sbuf = s;
    t->rbuf = r;
    t->count = count;
    t->dtype = (int)dt;
    t->root = root;
    t->call = hpi_comm_next_call(comm);
    return ncclSuccess;
}

static ncclResult_t reduction(int kind, const void *s, void *r, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                              int root, ncclComm_t comm, cudaStream_t stream)
{
    hpi_task_t t;
    ncclResult_t rc = task(kind, s, r, count, dt, root, comm, stream, &t);
    if (rc == ncclSuccess)
        rc = set_op(&t, op);
    return rc != ncclSuccess ? rc : launch_or_queue(&t);
}

API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return reduction(HPI_K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

API ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return reduction(HPI_K_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return reduction(HPI_K_REDSCAT, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream)
{
    hpi_task_t t;
    ncclResult_t rc = task(HPI_K_BCAST, sendbuff, recvbuff, count, datatype, root, comm, stream, &t);
    return rc != ncclSuccess ? rc : launch_or_queue(&t);
}

API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                               ncclComm_t comm, cudaStream_t stream)
{
    hpi_task_t t;
    ncclResult_t rc = task(HPI_K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, 0, comm, stream, &t);
    return rc != ncclSuccess ? rc : launch_or_queue(&t);
}

API ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    hpi_task_t t;
    ncclResult_t rc = task(HPI_K_SEND, sendbuff, NULL, count, datatype, peer, comm, stream, &t);
    return rc != ncclSuccess ? rc : launch_or_queue(&t);
}

API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    hpi_task_t t;
    ncclResult_t rc = task(HPI_K_RECV, NULL, recvbuff, count, datatype, peer, comm, stream, &t);
    return rc != ncclSuccess ? rc : launch_or_queue(&t);
}

/* ncclAlltoAll, ncclGather, ncclScatter: sends, receives and a local copy
 * as one group.  what: 0 all-to-all, 1 gather, 2 scatter. */
static ncclResult_t exchange(int what, const void *s, void *r, size_t count, ncclDataType_t dt, int root,
                             ncclComm_t comm, cudaStream_t stream)
{
    size_t seg = count * hpi_dtype_size(dt);
    int N, me;
    ncclResult_t rc = ncclSuccess, rc2;
    hpi_task_t t;
    if (comm == NULL || (seg == 0 && count > 0))
        return hpi_error(ncclInvalidArgument, "a NULL communicator or an unknown datatype");
    N = hpi_comm_size(comm);
    me = hpi_comm_rank(comm);
    if (root < 0 || root >= N)
        return hpi_error(ncclInvalidArgument, "root %d of a communicator of %d ranks", root, N);
    ncclGroupStart();
    for (int p = 0; p < N && rc == ncclSuccess; p++) {
        const char *sp = (what == 1 ? (const char *)s : (const char *)s + p * seg);
        char *rp = what == 2 ? (char *)r : (char *)r + p * seg;
        int sends = p != me && (what == 0 || (what == 1 && p == root) || (what == 2 && me == root));
        int recvs = p != me && (what == 0 || (what == 1 && me == root) || (what == 2 && p == root));
        if (p == me && (what == 0 || me == root))
            rc = task(HPI_K_COPY, sp, rp, count, dt, 0, comm, stream, &t);
        else if (sends)
            rc = task(HPI_K_SEND, what == 1 ? s : sp, NULL, count, dt, p, comm, stream, &t);
        else
            t.kind = 0;
        if (rc == ncclSuccess && t.kind != 0)
            rc = launch_or_queue(&t);
        if (rc == ncclSuccess && recvs) {
            rc = task(HPI_K_RECV, NULL, what == 1 ? (char *)r + p * seg : rp, count, dt, p, comm, stream, &t);
            if (rc == ncclSuccess)
                rc = launch_or_queue(&t);
        }
    }
    if (rc != ncclSuccess)
        group_err = rc;   /* the whole group fails, the user's too */
    rc2 = ncclGroupEnd();
    return rc != ncclSuccess ? rc : rc2;
}

API ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclComm_t comm, cudaStream_t stream)
{
    return exchange(0, sendbuff, recvbuff, count, datatype, 0, comm, stream);
}

API ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream)
{
    return exchange(1, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

API ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                             ncclComm_t comm, cudaStream_t stream)
{
    return exchange(2, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

/* ------------------------------------------------------ communicators */

API ncclResult_t ncclGetVersion(int *version)
{
    if (version == NULL)
        return hpi_error(ncclInvalidArgument, "ncclGetVersion: NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

API ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (id == NULL)
        return hpi_error(ncclInvalidArgument, "ncclGetUniqueId: NULL");
    hpi_unique_id(id);
    return ncclSuccess;
}

static int config_blocking(const ncclConfig_t *config)
{
    const char *e = getenv("NCCL_COMM_BLOCKING");
    if (config != NULL && config->blocking != NCCL_CONFIG_UNDEF_INT)
        return config->blocking != 0;
    return e == NULL || atoi(e) != 0;
}

/* a blocking creation that failed leaves nothing; a non-blocking one
 * leaves the communicator, whose ncclCommGetAsyncError says why */
static ncclResult_t create(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank, int blocking)
{
    ncclResult_t rc;
    hpi_comm_t *c = NULL;
    if (comm == NULL || id == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommInitRank: a NULL argument");
    rc = hpi_comm_create(id, nranks, rank, blocking, &c);
    if (rc != ncclSuccess && rc != ncclInProgress && c != NULL && blocking) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", hpi_last_error());
        hpi_comm_abort(c);
        hpi_error(rc, "%s", msg);
        c = NULL;
    }
    *comm = c;
    return rc;
}

API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return create(comm, nranks, &commId, rank, config_blocking(NULL));
}

API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                        ncclConfig_t *config)
{
    return create(comm, nranks, &commId, rank, config_blocking(config));
}

API ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                          ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId < 1 || commIds == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommInitRankScalable: no unique id");
    return create(newcomm, nranks, &commIds[0], myrank, config_blocking(config));
}

API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    ncclUniqueId id;
    (void)devlist;
    if (ndev != 1)
        return hpi_error(ncclInvalidUsage, "ncclCommInitAll of %d devices: the IPC stand-in runs one rank per "
                         "process", ndev);
    hpi_unique_id(&id);
    return create(comms, 1, &id, 0, 1);
}

API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t rc;
    (void)config;
    if (comm == NULL || newcomm == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommSplit: a NULL argument");
    if ((rc = hpi_comm_status(comm)) != ncclSuccess)
        return rc;
    return hpi_comm_split(comm, color, key, newcomm);
}

API ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                                ncclConfig_t *config, int shrinkFlags)
{
    (void)config;
    (void)shrinkFlags;
    if (comm == NULL || newcomm == NULL || (excludeRanksCount > 0 && excludeRanksList == NULL))
        return hpi_error(ncclInvalidArgument, "ncclCommShrink: a NULL argument");
    return hpi_comm_shrink(comm, excludeRanksList, excludeRanksCount, newcomm);
}

API ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (comm == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommFinalize: NULL");
    return hpi_comm_finalize(comm);
}

API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    return comm == NULL ? ncclSuccess : hpi_comm_destroy(comm);
}

API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    return comm == NULL ? ncclSuccess : hpi_comm_abort(comm);
}

API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    (void)comm;
    (void)revokeFlags;
    return hpi_error(ncclInvalidUsage, "ncclCommRevoke: not supported by the IPC stand-in");
}

API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (comm == NULL || asyncError == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommGetAsyncError: a NULL argument");
    *asyncError = hpi_comm_status(comm);
    return ncclSuccess;
}

API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (comm == NULL || count == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommCount: a NULL argument");
    *count = hpi_comm_size(comm);
    return ncclSuccess;
}

API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (comm == NULL || device == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommCuDevice: a NULL argument");
    *device = hpi_comm_device(comm);
    return ncclSuccess;
}

API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (comm == NULL || rank == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommUserRank: a NULL argument");
    *rank = hpi_comm_rank(comm);
    return ncclSuccess;
}

API ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    (void)size;
    if (comm == NULL || handle == NULL)
        return hpi_error(ncclInvalidArgument, "ncclCommRegister: a NULL argument");
    *handle = buff != NULL ? buff : (void *)comm;
    return ncclSuccess;
}

API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    (void)handle;
    return comm == NULL ? hpi_error(ncclInvalidArgument, "ncclCommDeregister: NULL") : ncclSuccess;
}

API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)
{
    (void)comm; (void)buff; (void)size; (void)win; (void)winFlags;
    return hpi_error(ncclInvalidUsage, "ncclCommWindowRegister: not supported by the IPC stand-in");
}

API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    (void)comm; (void)win;
    return hpi_error(ncclInvalidUsage, "ncclCommWindowDeregister: not supported by the IPC stand-in");
}

API ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (ptr == NULL)
        return hpi_error(ncclInvalidArgument, "ncclMemAlloc: NULL");
    if (hpi_engine()->mem_alloc(size, ptr) != 0)
        return hpi_error(ncclUnhandledCudaError, "ncclMemAlloc of %zu bytes: %s", size, hpi_engine()->last_error());
    return ncclSuccess;
}

API ncclResult_t ncclMemFree(void *ptr)
{
    if (ptr != NULL)
        hpi_engine()->mem_free(ptr);
    return ncclSuccess;
}

/* Functions of NCCL releases after 2.28, refused: a program built against a
 * newer header (a PyTorch wheel linked with immediate binding) still loads,
 * and a call says what is missing.  With a newer nccl.h they are declared
 * there, and tests/gpu/ipc/run_ipc.sh fails until they are written. */
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
#define REFUSE(name)                                                                         \
    API ncclResult_t name(void)                                                              \
    {                                                                                        \
        return hpi_error(ncclInvalidUsage, "%s: not supported by the IPC stand-in", #name); \
    }
REFUSE(ncclCommGetUniqueId)
REFUSE(ncclCommGrow)
REFUSE(ncclCommSuspend)
REFUSE(ncclCommResume)
REFUSE(ncclCommMemStats)
REFUSE(ncclCommQueryProperties)
REFUSE(ncclWinGetUserPtr)
REFUSE(ncclPutSignal)
REFUSE(ncclSignal)
REFUSE(ncclWaitSignal)
REFUSE(ncclDevCommCreate)
REFUSE(ncclDevCommDestroy)
REFUSE(ncclGetLsaMultimemDevicePointer)
REFUSE(ncclGetLsaDevicePointer)
REFUSE(ncclGetPeerDevicePointer)
#endif

API const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (ncclGetLastError says which)";
    case ncclSystemError: return "unhandled system error (ncclGetLastError says which)";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

API const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return hpi_last_error();
}
