/*
 * The NCCL front end (src/front/nccl/hp_front_nccl.c): its table for the driver
 * and the call the ncclAllReduce wrapper (mpi_wrappers/hp_nccl_wrap.c) hands it.
 * No MPI: the NCCL-only library has it too.
 */
#ifndef HP_FRONT_NCCL_H
#define HP_FRONT_NCCL_H

#include "hp_comm.h"
#include "hp_nccl_ctx.h"
#include <nccl.h>
#include <stddef.h>

struct hp_front;
extern const struct hp_front hp_front_nccl;

/*
 * An eligible ncclSum/ncclAvg call (float32, float16 or bfloat16: elem is
 * HP_ELEM_*) outside the user's groups, not captured, with
 * HIPRESS_NCCL=compress, on communicator state c (the caller holds a
 * reference).  The first call on a communicator agrees its settings over
 * NCCL (a disagreement, the compressor none, one rank, or a rank without
 * the CUDA module's codec makes every later call pass through on every
 * rank).  pre: a failure of this rank known before the call (its capture
 * query failed): the call still makes every exchange its peers make, and
 * fails on every rank at its failure agreement.  Returns 1 when the call
 * was taken (*rc_p: its result; the result is in recvbuff on return, or
 * once `stream` has run for a stream-ordered call), 0 when it goes to NCCL
 * unchanged (*reason_p: why).
 */
int hp_nccl_allreduce(hp_comm_t *c, const hp_nccl_xport_t *x, const void *sendbuff, void *recvbuff, size_t count,
                      int elem, int avg, ncclComm_t comm, cudaStream_t stream, hp_status_t pre, ncclResult_t *rc_p,
                      int *reason_p);

/* A host copy of the residual c holds for buffer (buf, count), zeros when
 * none: 0, or -1 when it cannot be read. */
int hp_nccl_residual(hp_comm_t *c, const void *buf, size_t count, float *out);

#endif
