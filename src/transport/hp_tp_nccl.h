/*
 * The NCCL transport (src/transport/hp_tp_nccl.c): the algorithms' messages
 * between the ranks of an NCCL communicator, with NCCL's point-to-point
 * calls on the caller's stream.  What it needs of NCCL and of the device
 * comes from its user (the NCCL front end) as callbacks, so this layer
 * needs neither nccl.h nor the device backend.
 */
#ifndef HP_TP_NCCL_H
#define HP_TP_NCCL_H

#include "hp_transport.h"

typedef struct hp_tp_nccl_env {
    void *ctx;
    /* NCCL's real ncclGroupStart/End, ncclSend/ncclRecv of `bytes` uint8
     * on the communicator and stream of the call: HP_OK, or the status
     * with NCCL's code (HP_ST_NCCL) */
    hp_status_t (*group_start)(void *ctx);
    hp_status_t (*group_end)(void *ctx);
    hp_status_t (*send)(void *ctx, const void *dev, size_t bytes, int peer);
    hp_status_t (*recv)(void *ctx, void *dev, size_t bytes, int peer);
    /* ncclAllReduce with ncclMax of n int64 or double in device memory */
    hp_status_t (*max)(void *ctx, void *dev, size_t n, int is_double);
    /* wait for the stream; copies between host and device memory (a
     * device error: HP_ERR_DEVICE) */
    hp_status_t (*sync)(void *ctx);
    hp_status_t (*h2d)(void *ctx, void *dev, const void *host, size_t bytes);
    hp_status_t (*d2h)(void *ctx, void *host, const void *dev, size_t bytes);
    /* device memory of at least `bytes` for the transport's staging, kept
     * until the next request of it (grown, never shrunk).  NULL only where
     * every rank alike has none (an agreement said so): then no rank
     * issues the group.  *local_p: a failure of this rank alone (a wait
     * for the memory's earlier users): the memory is still the agreed
     * size, and every rank still issues the same NCCL calls on it, this
     * one without copying into or out of it (what it sends is garbage,
     * what it receives unread); the operation then fails on this rank */
    void *(*staging)(void *ctx, size_t bytes, hp_status_t *local_p);
    /* The asynchronous form only (hp_tp_nccl_init_async; NULL: nothing to
     * order): before a group, make the call's stream wait for what produced
     * its sends (the codec's streams: the module's stream_release); after
     * it, make what consumes its receives wait for the stream (stream_join). */
    hp_status_t (*order_in)(void *ctx);
    hp_status_t (*order_out)(void *ctx);
} hp_tp_nccl_env_t;

/* Build the NCCL transport of rank `rank` of `size` over env (kept by
 * pointer: it must outlive the transport).  Release with hp_tp_fini. */
hp_status_t hp_tp_nccl_init(hp_transport_t *tp, const hp_tp_nccl_env_t *env, int rank, int size);

/* The asynchronous form (the stream-ordered path; doc/gpu.md): the
 * messages are device memory of their capacity, a wait issues the held
 * posts as one group on the stream between order_in and order_out and
 * returns without waiting for the stream (complete in stream order), with
 * no staging copy and no host synchronisation; iagree enqueues its max on
 * values in device memory (complete in stream order too).  agree, with
 * values in host memory, stays host-synchronous (for a communicator's
 * first calls).  Release with hp_tp_fini. */
hp_status_t hp_tp_nccl_init_async(hp_transport_t *tp, const hp_tp_nccl_env_t *env, int rank, int size);

#endif
