/*
 * NCCL interposition: ncclAllReduce, the group calls and the operations
 * that may join a group, the calls that make a communicator (whether it is
 * non-blocking) and the calls that end one.  Built when configure finds
 * nccl.h.  Each wrapper resolves the real function (hp_nccl_real.h), gives
 * NCCL what is not a float-sum ncclAllReduce at once, and hands the rest to
 * the NCCL front end (hp_nccl_entry.h), which holds the communicators'
 * states, the user's groups and the compressed path.
 */
#define _GNU_SOURCE
#include "hp_nccl_entry.h"
#include "hp_nccl_real.h"
#include "hp_core.h"

#define HP_WRAP HP_EXPORT

HP_WRAP ncclResult_t ncclGroupStart(void)
{
    __typeof__(&ncclGroupStart) real = HP_REAL(ncclGroupStart);
    ncclResult_t rc;
    if (real == NULL)
        return ncclSystemError;
    rc = real();
    /* NCCL counts the depth even when it reports an error later */
    hp_nccl_entry_group_start();
    return rc;
}

HP_WRAP ncclResult_t ncclGroupEnd(void)
{
    __typeof__(&ncclGroupEnd) real = HP_REAL(ncclGroupEnd);
    if (real == NULL)
        return ncclSystemError;
    return hp_nccl_entry_group_end(real());
}

HP_WRAP ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclAllReduce) real = HP_REAL(ncclAllReduce);
    ncclResult_t rc;
    if (real == NULL)
        return ncclSystemError;
    if (!hp_nccl_entry_float_sum(datatype, op))
        hp_nccl_entry_pass(comm, datatype, op);
    else if (hp_nccl_entry_allreduce(sendbuff, recvbuff, count, datatype, op, comm, stream, &rc))
        return rc;
    return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

/* ---------------------------------- other operations (group members only) */

/* A wrapper that only tells the front end an operation entered. */
#define HP_NCCL_MEMBER(fn, params, args)                      \
    HP_WRAP ncclResult_t fn params                            \
    {                                                         \
        __typeof__(&fn) real = HP_REAL(fn);                   \
        if (real == NULL)                                     \
            return ncclSystemError;                           \
        hp_nccl_entry_member();                               \
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

/* The state is closed before the real function and let go after it:
 * nothing of hipress enqueues on a communicator NCCL has freed. */
#define HP_NCCL_END(fn, aborted)                                           \
    HP_WRAP ncclResult_t fn(ncclComm_t comm)                               \
    {                                                                      \
        __typeof__(&fn) real = HP_REAL(fn);                                \
        struct hp_comm *c;                                                 \
        ncclResult_t rc;                                                   \
        if (real == NULL)                                                  \
            return ncclSystemError;                                        \
        c = hp_nccl_entry_comm_close(comm, #fn);                           \
        /* may return ncclInProgress on a non-blocking communicator: as is */ \
        rc = real(comm);                                                   \
        hp_nccl_entry_comm_release(c, aborted);                            \
        return rc;                                                         \
    }

HP_NCCL_END(ncclCommFinalize, 0)
HP_NCCL_END(ncclCommDestroy, 0)
HP_NCCL_END(ncclCommAbort, 1)

/* ---------------------------------------------------- communicator start */

HP_WRAP ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    __typeof__(&ncclCommInitRank) real = HP_REAL(ncclCommInitRank);
    ncclResult_t rc;
    if (real == NULL)
        return ncclSystemError;
    rc = real(comm, nranks, commId, rank);
    if (rc == ncclSuccess && comm != NULL && *comm != NULL)
        hp_nccl_entry_comm_made(*comm, 0);
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
        hp_nccl_entry_comm_made(*comm, config != NULL && config->blocking == 0);
    return rc;
}

HP_WRAP ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    __typeof__(&ncclCommSplit) real = HP_REAL(ncclCommSplit);
    ncclResult_t rc;
    /* without a configuration the child inherits its parent's (nccl.h) */
    int nonblocking = config != NULL ? config->blocking == 0 : hp_nccl_entry_comm_nonblocking(comm);
    if (real == NULL)
        return ncclSystemError;
    rc = real(comm, color, key, newcomm, config);
    if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm != NULL && *newcomm != NULL)
        hp_nccl_entry_comm_made(*newcomm, nonblocking);
    return rc;
}
