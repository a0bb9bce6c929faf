/*
 * The NCCL front end's device-side endings of a compressed ncclAllReduce
 * (src/front/hp_nccl_async.c): NaN and ncclAvg's divide on a failed or
 * host-synchronous call, and the stream-ordered form's choice and end
 * (HIPRESS_NCCL_ASYNC; doc/gpu.md, "Stream-ordered calls").
 */
#ifndef HP_NCCL_ASYNC_H
#define HP_NCCL_ASYNC_H

#include "hp_backend.h"
#include "hp_transport.h"

/* NaN in recv[0..count) (the codec's fill, else through host memory). */
void hp_nccl_fill_nan(hp_mem_t *m, float *recv, size_t count);

/* recv /= N through a host copy (ncclAvg of a host-synchronous call). */
hp_status_t hp_nccl_divide(hp_mem_t *m, float *recv, size_t count, int N);

/* Whether a call may be stream-ordered before its plan is known, from
 * what every rank has alike (the agreed settings, the call's element
 * type): HIPRESS_NCCL_ASYNC=auto, float32, float16 or bfloat16 (elem:
 * HP_NCCL_ELEM_*; ncclSum or ncclAvg), not verified (HIPRESS_VERIFY).  A
 * candidate's input is not waited for: the codec's streams are joined to
 * the caller's stream before anything reads it (a 16-bit call's widen
 * included). */
int hp_nccl_async_candidate(const hp_config_t *cfg, int elem);

/* With its plan: compressed, not exploring, ring, ps, allgather or tree
 * (each algorithm's messages are the backend's and the transport's, so
 * the device-message table and the asynchronous transport serve them
 * unchanged: tree forwards a received message's bytes as they came), and the
 * worker's and the sum codec's formats with device messages; or a built-in
 * collective compressor (powersgd: its device run is stream-ordered, its
 * sums need `none`'s device message). */
int hp_nccl_async_plan(int algo, int explore, int kind, int sum_kind, const hipress_comp_params_t *p);

/* The end of a stream-ordered call on the device: the failure agreement
 * (this rank's local failure st and the codec's sticky flag, one int64 at
 * dflag, device memory, the max over the ranks through tp's iagree in
 * stream order), ncclAvg's divide by the ranks (avg: the module's divide,
 * the host's bits), NaN in recv[0..count) where any rank failed (nan_if),
 * a 16-bit call's float32 result recv narrowed into the user's buffer
 * `user` (elem other than HP_NCCL_ELEM_F32: hp_nccl_narrow), the
 * caller's stream made to wait for the codec's work, and the codec context
 * released without a wait (m->cx NULL after).  HP_OK when all of it was
 * enqueued; an error leaves m->cx to the caller (which then ends the call
 * host-synchronously), *agreed_p 1 when the agreement was enqueued all the
 * same (the caller must not make another). */
hp_status_t hp_nccl_async_end(hp_mem_t *m, hp_transport_t *tp, void *dflag, hp_status_t st, float *recv,
                              size_t count, int avg, void *user, int elem, void *stream, int *agreed_p);

#endif
