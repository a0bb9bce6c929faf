/*
 * The NCCL front end's entry (src/front/nccl/hp_nccl_entry.c): what the
 * nccl* wrappers (mpi_wrappers/hp_nccl_wrap.c) hand it.  A wrapper resolves
 * the real function (hp_nccl_real.h), passes what is not a float sum
 * straight to it, and gives this front end the rest: the user's groups,
 * the classification of an ncclAllReduce, the compressed run or the held
 * call, and the lifecycle of a communicator's state.  No MPI.
 */
#ifndef HP_NCCL_ENTRY_H
#define HP_NCCL_ENTRY_H

#include <nccl.h>

struct hp_comm;

/* Whether an ncclAllReduce of `datatype` with `op` is one the compressed
 * path may take: float32, float16 or bfloat16, with ncclSum or ncclAvg. */
static inline int hp_nccl_entry_float_sum(ncclDataType_t datatype, ncclRedOp_t op)
{
    int fl = datatype == ncclFloat32 || datatype == ncclFloat16, sum = op == ncclSum;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    fl = fl || datatype == ncclBfloat16;
    sum = sum || op == ncclAvg;
#endif
    return fl && sum;
}

/* An ncclAllReduce that is not a float sum: counted (why it passes), and
 * an operation of the user's group if one is open.  The wrapper gives it to
 * NCCL. */
void hp_nccl_entry_pass(ncclComm_t comm, ncclDataType_t datatype, ncclRedOp_t op);

/* A float-sum ncclAllReduce: classified and counted on its communicator's
 * state (found once), then, under HIPRESS_NCCL=compress, run compressed on
 * the caller's stream, or held when it opens a group of its own (decided
 * at the group's end).  Returns 1 when the front end took it (*rc_p: its
 * result), 0 when the wrapper gives it to NCCL unchanged. */
int hp_nccl_entry_allreduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, ncclResult_t *rc_p);

/* The user's groups, per thread as NCCL's: after the real ncclGroupStart
 * (NCCL counts the depth even when it reports an error later); after the
 * real ncclGroupEnd, whose result is rc: the held call of a group it was
 * alone in, run; the result for the user.  An operation other than
 * ncclAllReduce (ncclBroadcast, ncclSend...) entering the current group. */
void hp_nccl_entry_group_start(void);
ncclResult_t hp_nccl_entry_group_end(ncclResult_t rc);
void hp_nccl_entry_member(void);

/* A new communicator (ncclCommInitRank, ncclCommInitRankConfig or
 * ncclCommSplit made it, perhaps answering ncclInProgress): it starts from
 * the job's settings, never from a communicator that had its address
 * before; a non-blocking one is remembered.  Whether comm was made
 * non-blocking, as the front end saw it (a split's child without a
 * configuration inherits its parent's). */
void hp_nccl_entry_comm_made(ncclComm_t comm, int nonblocking);
int hp_nccl_entry_comm_nonblocking(ncclComm_t comm);

/* A communicator's end, around the real ncclCommDestroy, ncclCommFinalize
 * or ncclCommAbort (`fn`): before it, comm's state is detached (no new call
 * finds it; a communicator made later at the address starts afresh) and
 * closed (a compressed call on another thread enqueues nothing more), and
 * returned; after it, the state is let go.  aborted: nothing may wait for
 * the device (PyTorch's watchdog aborts a communicator whose kernel hangs). */
struct hp_comm *hp_nccl_entry_comm_close(ncclComm_t comm, const char *fn);
void hp_nccl_entry_comm_release(struct hp_comm *c, int aborted);

#endif
