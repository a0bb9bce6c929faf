/*
 * The stand-in NCCL's operations (see mock_nccl.c): each call recorded,
 * then held in the open group or enqueued on its stream as an entry of the
 * stand-in driver (mock_nccl_ent.c).  ncclAllReduce, ncclAllGather,
 * ncclBroadcast, ncclBcast, ncclAlltoAll, ncclGather, ncclScatter, ncclSend
 * and ncclRecv move data; ncclReduce and ncclReduceScatter move nothing.
 */
#include <nccl.h>
#include "mock_nccl.h"
#include "mock_nccl_int.h"

#define API __attribute__((visibility("default")))

/* ----------------------------------------------------------- operations */

/* One operation: into the open group, or enqueued (held when non-blocking). */
static ncclResult_t operation(const gop_t *g)
{
    int held = 0;
    ncclResult_t rc;
    if (g->c == NULL)
        return ncclInvalidArgument;
    mock_comm_live((ncclComm_t)g->c, "an operation");
    if (mock_busy((ncclComm_t)g->c))
        return ncclInvalidUsage;
    if (g->c->aborted)
        return ncclInvalidUsage;
    if (mock_in_group())
        return mock_group_add(g) == 0 ? ncclSuccess : ncclSystemError;
    if (g->coll) {
        rc = mock_submit(mock_ent_coll(g->c, g->stream, g->coll, g->sbuf, g->rbuf, g->count, g->dt, g->op, g->peer), g->c,
                    &held);
    } else {
        struct entry *e;
        if ((rc = mock_connect(g, 1)) != ncclSuccess)
            return rc;
        e = mock_ent_p2p(g->c, g->stream);
        if (e != NULL && mock_ent_add(e, g->send, g->send ? g->sbuf : g->rbuf, g->count, g->dt, g->peer) != 0) {
            mock_ent_free(e);
            return ncclInvalidArgument;
        }
        rc = mock_submit(e, g->c, &held);
    }
    if (held) {
        g->c->pending = mock_polls();
        return ncclInProgress;
    }
    return rc;
}

API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    gop_t g = {MOCK_D_ALLREDUCE, 0, -1, datatype, op, sendbuff, recvbuff, count, (mock_comm_t *)comm, stream};
    mock_record("ncclAllReduce", sendbuff, recvbuff, count, datatype, op, -1, comm, stream);
    return operation(&g);
}

API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                               int root, ncclComm_t comm, cudaStream_t stream)
{
    gop_t g = {MOCK_D_BCAST, 0, root, datatype, -1, sendbuff, recvbuff, count, (mock_comm_t *)comm, stream};
    mock_record("ncclBroadcast", sendbuff, recvbuff, count, datatype, -1, root, comm, stream);
    return operation(&g);
}

API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    gop_t g = {MOCK_D_BCAST, 0, root, datatype, -1, buff, buff, count, (mock_comm_t *)comm, stream};
    mock_record("ncclBcast", buff, buff, count, datatype, -1, root, comm, stream);
    return operation(&g);
}

API ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    mock_record("ncclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream);
    return ncclSuccess;
}

API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                               ncclComm_t comm, cudaStream_t stream)
{
    gop_t g = {MOCK_D_ALLGATHER, 0, -1, datatype, -1, sendbuff, recvbuff, sendcount, (mock_comm_t *)comm, stream};
    mock_record("ncclAllGather", sendbuff, recvbuff, sendcount, datatype, -1, -1, comm, stream);
    return operation(&g);
}

API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    mock_record("ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, -1, comm, stream);
    return ncclSuccess;
}

API ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    gop_t g = {0, 1, peer, datatype, -1, sendbuff, NULL, count, (mock_comm_t *)comm, stream};
    mock_record("ncclSend", sendbuff, NULL, count, datatype, -1, peer, comm, stream);
    return operation(&g);
}

API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    gop_t g = {0, 0, peer, datatype, -1, NULL, recvbuff, count, (mock_comm_t *)comm, stream};
    mock_record("ncclRecv", NULL, recvbuff, count, datatype, -1, peer, comm, stream);
    return operation(&g);
}

/* rank i's count elements of sendbuff + i count to rank i, rank j's into
 * recvbuff + j count */
API ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclComm_t comm, cudaStream_t stream)
{
    gop_t g = {MOCK_D_ALLTOALL, 0, -1, datatype, -1, sendbuff, recvbuff, count, (mock_comm_t *)comm, stream};
    mock_record("ncclAlltoAll", sendbuff, recvbuff, count, datatype, -1, -1, comm, stream);
    return operation(&g);
}

/* every rank's count elements to root's recvbuff + rank count */
API ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream)
{
    gop_t g = {MOCK_D_GATHER, 0, root, datatype, -1, sendbuff, recvbuff, count, (mock_comm_t *)comm, stream};
    mock_record("ncclGather", sendbuff, recvbuff, count, datatype, -1, root, comm, stream);
    return operation(&g);
}

/* root's sendbuff + i count to rank i's recvbuff */
API ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                             ncclComm_t comm, cudaStream_t stream)
{
    gop_t g = {MOCK_D_SCATTER, 0, root, datatype, -1, sendbuff, recvbuff, count, (mock_comm_t *)comm, stream};
    mock_record("ncclScatter", sendbuff, recvbuff, count, datatype, -1, root, comm, stream);
    return operation(&g);
}
