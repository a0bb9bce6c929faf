/*
 * HIPRESS_VERIFY on the NCCL front end (src/front/hp_nccl_verify.c): the
 * exact sum of a compressed ncclAllReduce's input, made by the real
 * ncclAllReduce on a device copy before the compressed one, and the report
 * after it (src/front/hp_verify.h, shared with the MPI front end).  A
 * verified call is host-synchronous (hp_nccl_async_candidate).
 */
#ifndef HP_NCCL_VERIFY_H
#define HP_NCCL_VERIFY_H

#include "hp_backend.h"
#include "hp_config.h"
#include "hp_nccl_ctx.h"
#include "hp_transport.h"

/* One call's verification: off, or the exact result in host memory. */
typedef struct {
    int    on;      /* HIPRESS_VERIFY (agreed: the same on every rank) */
    float *exact;   /* NULL when it could not be made on this rank */
} hp_nccl_verify_t;

/* Before the compressed algorithm, where cfg's HIPRESS_VERIFY is on: the
 * exact sum of data (the call's float32 input, count floats of mem's device
 * memory, the device's work on it waited for here), divided by `ranks` for
 * ncclAvg as the compressed result will be (the host's float division).
 * The exact sum is an in-place ncclAllReduce (ncclSum, float32) of a
 * device copy on t's stream and communicator, then a host wait for that
 * stream.  Every rank calls it alike (the ncclAllReduce is a collective: a
 * rank without device memory for the copy cannot take part, as for the
 * messages' memory). */
void hp_nccl_verify_begin(hp_nccl_verify_t *v, const hp_config_t *cfg, hp_mem_t *mem, const float *data,
                          size_t count, int avg, int ranks, hp_nccl_ctx_t *t);

/* After it: where `report` (the failure agreement said every rank
 * succeeded: the same on every rank), the float32 result (device memory,
 * before a 16-bit call's narrowing) against the exact sum, and the
 * identity across tp's ranks (an agreement over tp); v released either way. */
void hp_nccl_verify_end(hp_nccl_verify_t *v, hp_transport_t *tp, hp_mem_t *mem, const float *result, size_t count,
                        int report);

#endif
