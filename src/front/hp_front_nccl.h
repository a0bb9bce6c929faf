/*
 * The NCCL front end's experimental compressed ncclAllReduce
 * (HIPRESS_NCCL=compress): the MPI path's plan and algorithms over the NCCL
 * transport (src/transport/hp_tp_nccl.c), stream-ordered in a steady
 * state (src/front/hp_nccl_async.h), else host-synchronous.  Used by
 * wrap/hp_nccl_wrap.c, which decides eligibility and owns the
 * per-communicator registry; see doc/gpu.md, "Compressed ncclAllReduce
 * (experimental)".
 */
#ifndef HP_FRONT_NCCL_H
#define HP_FRONT_NCCL_H

#include "hp_config.h"
#include "hp_nccl_ctx.h"
#include <nccl.h>
#include <stddef.h>


/* (elem: HP_NCCL_ELEM_*, src/front/hp_nccl_elem.h; hp_nccl_xport_t:
 * src/front/hp_nccl_ctx.h) */
/* The compressed path's state of one communicator (agreement, error
 * feedback, device message memory); NULL until its first eligible call. */
typedef struct hp_nccl_cstate hp_nccl_cstate_t;

/*
 * An eligible ncclSum/ncclAvg call outside the user's groups, not
 * captured, with HIPRESS_NCCL=compress.  The first such call on a
 * communicator agrees the settings over NCCL (one small ncclAllReduce on
 * `stream`); a disagreement, the compressor none, one rank, or a rank
 * without the CUDA module's codec makes every later call pass through on
 * every rank.  Then each call is planned as on the MPI path (HIPRESS_ALGO,
 * HIPRESS_PARTITION_BYTES, or the cost model's measurement and exploration
 * over NCCL, agreed) and runs ring, tree, ps, allgather, a collective
 * compressor's run, or plain.  `nonblocking`: the communicator was made
 * non-blocking (informational: any ncclInProgress is polled out).  Returns
 * 1 when the call was taken (*rc_p: its result; the result is in recvbuff
 * on return, or once `stream` has run for a stream-ordered call), 0 when
 * it goes to NCCL unchanged.  *cs_p is
 * created on first use.
 */
int hp_nccl_comp_allreduce(hp_nccl_cstate_t **cs_p, const hp_config_t *cfg, const hp_nccl_xport_t *x,
                           const void *sendbuff, void *recvbuff, size_t count, int elem, int avg,
                           int nonblocking, ncclComm_t comm, cudaStream_t stream, ncclResult_t *rc_p);

/* The settings changed (hipress_nccl_comm_set): agree again at the next call. */
void hp_nccl_comp_reset(hp_nccl_cstate_t *cs);

/* Host copy of the residual held for buffer (buf, count), zeros when none:
 * 0, or -1 when it cannot be read. */
int hp_nccl_comp_residual(hp_nccl_cstate_t *cs, const void *buf, size_t count, float *out);

/* Release the state (the communicator ends); NULL is a no-op. */
void hp_nccl_comp_free(hp_nccl_cstate_t *cs);

#endif
