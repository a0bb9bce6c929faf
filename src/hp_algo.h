/*
 * CaSync: the compression-aware collectives, written against hp_transport.
 * Every algorithm follows contract 1: the final value of each element comes
 * from decoding one message that every rank decodes.
 */
#ifndef HP_ALGO_H
#define HP_ALGO_H

#include "hp_comp.h"
#include "hp_eligible.h"
#include "hp_residual.h"
#include "hp_transport.h"

/* One compressed allreduce in progress. */
typedef struct hp_call {
    hp_transport_t             *tp;
    float                      *buf;        /* n floats: input on entry, result on exit */
    size_t                      n;
    int                         kind;       /* compressor */
    const hipress_comp_params_t *params;
    hp_residual_store_t        *res;        /* NULL: no error feedback */
    uintptr_t                   res_addr;   /* residual key: recvbuf and count */
    size_t                      res_count;
    uint64_t                    seed, call_no;
    size_t                      part_elems; /* pipeline partition, elements */
    int                         corrupt;    /* test knob: corrupt first message */
    /* scratch memory owned by the caller, valid until the call ends */
    void                     *(*scratch)(void *ctx, size_t bytes);
    void                       *scratch_ctx;
    /* results */
    double                      t_encode, t_decode;
    unsigned long long          nonfinite;
    hp_status_t                 err;        /* first local error (sticky) */
} hp_call_t;

/* Encode buf[off .. off+len) (an element range of the whole buffer) as one
 * message into out (cap bytes), with error feedback when the compressor wants
 * it.  `hop` keys the random generator.  `contribs` is how many ranks' data
 * the values aggregate: a sparse compressor keeps k2 = min(len, contribs * k)
 * elements and the message goes dense (`none`) when 8 k2 >= 4 len.  Returns
 * the message length; on a local failure writes an error message instead and
 * records call->err. */
size_t hp_call_encode(hp_call_t *call, size_t off, size_t len, int hop, int contribs,
                      void *out, size_t cap);

/* Decode a message into buf[off .. off+len); records errors in call->err
 * (a bad message is never applied). */
void hp_call_decode(hp_call_t *call, const void *msg, size_t msg_len, size_t off, size_t len,
                    int accumulate);

/* The same into an arbitrary destination of len floats. */
void hp_call_decode_to(hp_call_t *call, const void *msg, size_t msg_len, float *dst, size_t len,
                       int accumulate);

/* Carve `count` message slots of *cap_p bytes (plus `extra_bytes` returned in
 * *extra_p) from the call's scratch.  When that memory cannot be had, the
 * call is marked failed (HP_ERR_NOMEM) and the slots shrink to room for an
 * error message (*cap_p updated, *extra_p = NULL): the rank still takes part
 * in the protocol, so no peer hangs.  NULL only when even that fails. */
typedef struct {
    void    *buf;
    size_t   len;
    hp_req_t req;
} hp_slot_t;
hp_slot_t *hp_call_slots(hp_call_t *call, size_t count, size_t *cap_p, size_t extra_bytes,
                         void **extra_p);
/* Wait for every request of `count` slots; HP_ERR_MPI if one failed. */
hp_status_t hp_slots_wait(hp_call_t *call, hp_slot_t *slots, size_t count);

/* Partitions of a range of len elements: how many (>= 1). */
static inline size_t hp_call_parts(const hp_call_t *call, size_t len)
{
    size_t pe = call->part_elems ? call->part_elems : len;
    size_t p = (len + pe - 1) / (pe ? pe : 1);
    return p ? p : 1;
}

/* Largest message for len elements. */
static inline size_t hp_call_msg_cap(const hp_call_t *call, size_t len)
{
    return hp_msg_max_bytes(call->kind, len, call->params);
}

hp_status_t hp_algo_ring(hp_call_t *call);
hp_status_t hp_algo_ps(hp_call_t *call);
hp_status_t hp_algo_tree(hp_call_t *call);
hp_status_t hp_algo_allgather(hp_call_t *call);

/* Collective compressors (HIPRESS_COMP_COLLECTIVE) drive the whole allreduce
 * themselves; hp_algo_collective dispatches by compressor name.
 * HP_ERR_UNSUPPORTED when the compressor has no collective implementation. */
hp_status_t hp_algo_collective(hp_call_t *call);
hp_status_t hp_powersgd_run(hp_call_t *call);     /* src/hp_comp_powersgd.c */

#endif
