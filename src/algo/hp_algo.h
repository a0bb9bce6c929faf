/*
 * CaSync: the compression-aware collectives, written against the transport
 * table (src/transport/hp_transport.h) and the backend table
 * (src/backend/hp_backend.h), never against MPI or a device directly.
 * Every algorithm follows contract 1 (doc/dev/contracts.md): the final value of each element comes
 * from decoding one message that every rank decodes.  What an algorithm may
 * assume of the transport is only what hp_transport.h promises: messages
 * between one pair of ranks match in posting order, a received message's
 * length is read from its header (hp_msg_len) within the capacity both
 * sides posted, a buffer is the transport's from its post to its wait, and
 * nothing about timing or the order across peers (the test build's delay
 * transport, tests/mpi/run_tables.sh, breaks everything else).
 */
#ifndef HP_ALGO_H
#define HP_ALGO_H

#include "hp_backend.h"
#include "hp_comp.h"
#include "hp_residual.h"
#include "hp_transport.h"

/* One compressed allreduce in progress. */
typedef struct hp_call {
    hp_transport_t             *tp;
    hp_mem_t                   *mem;        /* the buffer's memory and its operations; NULL: host */
    float                      *buf;        /* n floats: input on entry, result on exit */
    size_t                      n;
    size_t                      base;       /* element index of buf[0] in the user's buffer */
    int                         kind;       /* compressor: the worker's codec */
    int                         sum_kind;   /* the codec of an owner's complete sum (hp_call_encode_sum) */
    const hipress_comp_params_t *params;    /* for this call (hp_comp_ext_t.call_params) */
    hp_residual_store_t        *res;        /* the communicator's store */
    hp_res_buf_t               *rb;         /* this buffer's state; NULL: no error feedback */
    float                      *resid;      /* rb's residual, n floats, or NULL */
    float                      *mom;        /* momentum state masked where sent (dgc), or NULL */
    float                      *state;      /* a plugin's MOMENTUM state vector, or NULL */
    size_t                      grain;      /* every message starts on a multiple of it */
    uint64_t                    seed, call_no;
    size_t                      part_elems; /* pipeline partition, elements */
    int                         corrupt;    /* test knob: corrupt first message */
    int                         kill;       /* test knob: SIGKILL at the first decode */
    /* the merge in progress (hp_call_merge_begin): its range and 0 none,
     * 1 own data and messages finite so far, 2 something non-finite */
    size_t                      mg_off, mg_len;
    int                         mg_state;
    /* scratch memory owned by the caller, valid until the call ends */
    void                     *(*scratch)(void *ctx, size_t bytes);
    void                       *scratch_ctx;
    /* results */
    double                      t_encode, t_decode;
    double                      t_wait;     /* blocked in the transport's waits */
    size_t                      wire;       /* message bytes this rank posted */
    unsigned long long          nonfinite;
    unsigned long long          excepts;    /* values sent as message exceptions */
    hp_status_t                 err;        /* first local error (sticky) */
} hp_call_t;

/* Encode buf[off .. off+len) (an element range of the whole buffer, off a
 * multiple of call->grain) as one message into out (cap bytes).  Error
 * feedback: a compressor with HIPRESS_COMP_EF encodes v = buf + residual
 * and keeps what it lost in the residual; any other compressor (and the
 * dense fallback below) folds the residual into what it sends, exactly as
 * far as its format allows, and clears it -- so a residual always enters
 * this rank's next encode of its element.  `hop` keys the random
 * generator.  `contribs` is how many ranks' data the values aggregate: a
 * sparse compressor keeps the density hp_sparse_density(contribs) per block,
 * and the message goes dense (`none`) when 8 k2 >= 4 len.  Returns the
 * message length; on a local failure writes an error message instead and
 * records call->err. */
size_t hp_call_encode(hp_call_t *call, size_t off, size_t len, int hop, int contribs,
                      void *out, size_t cap);

/* hp_call_encode for an owner's complete sum of `contribs` ranks' data: in
 * the call's sum codec (call->sum_kind; HIPRESS_SUM_CODEC), with the same
 * residual (the owner's error feedback, where either codec keeps one), keys
 * and failure handling.  A sum codec that is the worker's is exactly
 * hp_call_encode. */
size_t hp_call_encode_sum(hp_call_t *call, size_t off, size_t len, int hop, int contribs,
                          void *out, size_t cap);

/* A rank is about to merge messages into its own data buf[off .. off+len)
 * and encode the sum (a relay or an owner): note whether its own data holds
 * NaN or Inf.  The decodes until that encode note whether a message was
 * non-finite; the encode then knows where a non-finite value of the sum came
 * from: from an input (the message is non-finite: NaN on every rank) or from
 * adding finite values (an overflow: sent as exceptions, hp_msg_encode_x, so
 * that element alone is +-Inf as in MPI_Allreduce).  Call it before waiting
 * for the messages: the check runs while they travel. */
void hp_call_merge_begin(hp_call_t *call, size_t off, size_t len);

/* Decode a message into buf[off .. off+len); records errors in call->err
 * (a bad message is never applied). */
void hp_call_decode(hp_call_t *call, const void *msg, size_t msg_len, size_t off, size_t len,
                    int accumulate);

/* The same into an arbitrary destination of len floats. */
void hp_call_decode_to(hp_call_t *call, const void *msg, size_t msg_len, float *dst, size_t len,
                       int accumulate);

/* hp_call_decode of a message hp_call_encode_sum made (of the sum codec or
 * the dense fallback; anything else is rejected). */
void hp_call_decode_sum(hp_call_t *call, const void *msg, size_t msg_len, size_t off, size_t len,
                        int accumulate);

/* Decode `count` messages of buf[off .. off+len) and add them in order:
 * buf = d_0 + d_1 + ... (accumulate: buf + d_0 + ...), the same bits as
 * hp_call_decode one after the other, through the compressor's decode_many
 * (block by block, in cache) when every message is a finite one of its
 * kind.  Errors as hp_call_decode. */
#define HP_DECODE_MANY_MAX 64
void hp_call_decode_many(hp_call_t *call, void *const *msgs, const size_t *lens, int count, size_t off,
                         size_t len, int accumulate);

/* The buffer's memory operations for the algorithms: copy and add n floats
 * (both in the buffer's memory), and a work vector of n floats in it.  A
 * call that carves its message slots with hp_call_slots asks for
 * hp_call_work_bytes(call, n) extra bytes and passes them to hp_call_work
 * (the CPU uses them; the device gives device memory).  NULL when memory is
 * short (the call is then marked failed), or for n = 0. */
void hp_call_copy(hp_call_t *call, float *dst, const float *src, size_t n);
void hp_call_add(hp_call_t *call, float *dst, const float *src, size_t n);
size_t hp_call_work_bytes(const hp_call_t *call, size_t n);
float *hp_call_work(hp_call_t *call, void *host_extra, size_t n);

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
/* The message operations of the call's memory (hp_mem_ops_t): the length
 * to decode a received message of a slot of cap bytes with (hp_msg_len on
 * host messages), and an error message for len elements written into out
 * (hp_msg_error), its length.  The algorithms never read or write message
 * bytes themselves: the messages may be device memory. */
size_t hp_call_msg_len(hp_call_t *call, const void *msg, size_t cap);
size_t hp_call_msg_error(hp_call_t *call, void *out, size_t len);

/* Wait for every request of `count` slots; the transport's failure
 * (hp_tp_failure) if one failed. */
hp_status_t hp_slots_wait(hp_call_t *call, hp_slot_t *slots, size_t count);

/* Grain-aligned split: [0, n) cut into `parts` spans whose boundaries fall
 * on multiples of g elements; span i gets its share of the ceil(n/g) grains
 * (the first ones one more), the last grain may be partial, and a span may
 * be empty.  g = 1 is the plain even split (hp_chunk_off).  A span of a
 * span whose start is a multiple of g has absolute boundaries on multiples
 * of g too, so no compressor block ever straddles two messages. */
static inline size_t hp_span_off(size_t n, size_t parts, size_t i, size_t g)
{
    size_t ng = (n + g - 1) / g, o = g * hp_chunk_off(ng, parts, i);
    return o < n ? o : n;
}
static inline size_t hp_span_len(size_t n, size_t parts, size_t i, size_t g)
{
    return hp_span_off(n, parts, i + 1, g) - hp_span_off(n, parts, i, g);
}

/* Partitions of a range of len elements: how many (>= 1, at most one per
 * grain). */
static inline size_t hp_call_parts(const hp_call_t *call, size_t len)
{
    size_t pe = call->part_elems ? call->part_elems : len;
    size_t g = call->grain ? call->grain : 1;
    size_t p = (len + pe - 1) / (pe ? pe : 1), ng = (len + g - 1) / g;
    p = p < ng ? p : ng;
    return p ? p : 1;
}

/* Largest message for len elements: of the worker's codec, and of the sum
 * codec. */
static inline size_t hp_call_msg_cap(const hp_call_t *call, size_t len)
{
    return hp_msg_max_bytes(call->kind, len, call->params) + HP_MSG_EXCEPT_BYTES;
}
static inline size_t hp_call_sum_cap(const hp_call_t *call, size_t len)
{
    return hp_msg_max_bytes(call->sum_kind, len, call->params) + HP_MSG_EXCEPT_BYTES;
}

/* ------------------------------------------------------- running a plan */

/* The node hierarchy of a communicator (HIPRESS_HIERARCHICAL), built by the
 * front end that knows the nodes: the ranks of one node reduce exactly
 * among themselves, the algorithm runs among the nodes, the result is
 * exchanged back inside each node. */
typedef struct hp_hier {
    int             avail;      /* several nodes, and a node of several ranks */
    int             is_2d;      /* every node the same size: reduce-scatter inside the node, each
                                 * rank compresses its shard with its peers of the other nodes,
                                 * allgather inside the node; else leaders: reduce to node rank 0,
                                 * the leaders compress, broadcast */
    int             node_rank, node_size, nodes;
    int             built;      /* made for mode and k */
    long long       mode, k;
    hp_transport_t *tp_node;    /* the node's ranks */
    hp_transport_t *tp_inter;   /* the ranks the algorithm runs on across the nodes (NULL on a rank
                                 * that is not one: a non-leader) */
} hp_hier_t;

/* What the driver gives a call: the ranks, the memory, the codecs and this
 * call's parameters, the error-feedback state, the keys of the random
 * generator, the scratch, and the test knobs. */
typedef struct hp_call_env {
    hp_transport_t              *tp;        /* the ranks the algorithm runs on (flat) */
    hp_mem_t                    *mem;       /* the buffer's memory */
    int                          kind;      /* compressor */
    int                          sum_kind;  /* its sum codec where the plan has an owner stage */
    const hipress_comp_params_t *params;    /* this call's (hp_comp_ext_t.call_params) */
    hp_residual_store_t         *res;
    hp_res_buf_t                *rb;        /* the buffer's state, or NULL */
    uint64_t                     seed, call_no;
    int                          corrupt, kill;   /* test knobs */
    void                      *(*scratch)(void *ctx, size_t bytes);    /* messages */
    void                      *(*scratch2)(void *ctx, size_t bytes);   /* a hierarchical call's shards */
    void                        *scratch_ctx;
} hp_call_env_t;

/* Fill *call (zeroed here) for elements [base, base + n) of data (count
 * elements), which holds this rank's data: residual and momentum vectors
 * at base (dgc's momentum applied to the range), grain, seed, call number,
 * scratch. */
void hp_call_prepare(hp_call_t *call, const hp_call_env_t *env, float *data, size_t count, size_t base, size_t n);

/* Run a plan on data (count floats, this rank's input; the result on
 * return): algorithm `algo` (a row of the table; HP_ALGO_AUTO: a collective
 * compressor's own run) with `parts` pipeline partitions per unit, flat, or
 * through the node hierarchy when hier is not NULL (the composite of
 * src/algo/hp_algo_run.c: the exact reduction inside the node, the algorithm
 * among the nodes on hier->tp_inter, the exchange back inside the node).
 * *call holds the run's results (times, counts, first error); *folded_p
 * counts the residuals folded into data where this rank encodes nothing
 * lossy.  Every rank runs the same exchanges whatever fails locally. */
hp_status_t hp_algo_run(hp_call_t *call, const hp_call_env_t *env, float *data, size_t count, int algo,
                        size_t parts, const hp_hier_t *hier, unsigned *folded_p);

/* ------------------------------------------------------------ the table */

/* The codecs of a call: the worker's, which encodes a rank's own data and
 * the partial sums relays pass on (ring, tree), and the sum codec, with
 * which an owner re-encodes a complete sum (ps; HIPRESS_SUM_CODEC). */
typedef struct {
    int                          kind, sum_kind;
    const hipress_comp_params_t *p, *sum_p;
} hp_codecs_t;

/* What one call of an algorithm costs a rank: bytes it puts on the wire,
 * raw bytes it encodes and decodes, messages on the critical path. */
typedef struct {
    double wire, enc, dec, msgs;
} hp_algo_volume_t;

/* What the pipeline partitions: a rank's grain-aligned share, or all. */
typedef enum { HP_UNIT_SHARD, HP_UNIT_ALL } hp_algo_unit_t;

/* Algorithm ids: 0 is `auto` (and, in a plan, a collective compressor's own
 * exchanges); the rows of hp_algos.def follow in order. */
enum {
    HP_ALGO_AUTO = 0,
#define HP_ALGO(ID, name, unit) HP_ALGO_##ID,
#include "hp_algos.def"
#undef HP_ALGO
    HP_ALGO_COUNT
};

typedef struct hp_algo_desc {
    const char    *name;
    hp_status_t  (*run)(hp_call_t *call);
    int          (*stages)(int N, int *sum_stages);
    void         (*volume)(const hp_codecs_t *c, size_t n, int N, hp_algo_volume_t *v);
    hp_algo_unit_t unit;
} hp_algo_desc_t;

/* Row `id` (1 .. HP_ALGO_COUNT-1), or NULL. */
const hp_algo_desc_t *hp_algo_get(int id);
/* "auto", "ring", ...; "?" for an unknown id. */
const char *hp_algo_name(int id);
/* "auto|ring|tree|ps|allgather": HIPRESS_ALGO's accepted values, from the
 * table (registered with the settings by hp_algo_register_settings). */
const char *hp_algo_accepted(void);
void hp_algo_register_settings(void);
/* The unit algorithm `id` partitions out of n elements on N ranks, in
 * elements (grain g). */
size_t hp_algo_unit_elems(int id, size_t n, int N, size_t g);

#define HP_ALGO(ID, name, unit)                                                       \
    hp_status_t hp_algo_##name##_run(hp_call_t *call);                                \
    int hp_algo_##name##_stages(int N, int *sum_stages);                              \
    void hp_algo_##name##_volume(const hp_codecs_t *c, size_t n, int N, hp_algo_volume_t *v);
#include "hp_algos.def"
#undef HP_ALGO

/* ceil(log2 N), 0 for N <= 1. */
static inline int hp_ceil_log2(int N)
{
    int l = 0;
    while ((1 << l) < N)
        l++;
    return l;
}

/* Collective compressors (hp_comp_is_collective) drive the whole allreduce
 * themselves: one run per backend, rows of src/algo/hp_collectives.def,
 * dispatched by the call's backend (src/algo/hp_algo_collective.c).  One
 * without a run for the call's backend runs its host run on host copies of
 * the buffer and of its error-feedback vectors.  HP_ERR_UNSUPPORTED when
 * the compressor has no run (a collective plugin: ABI v1 has no hook). */
hp_status_t hp_algo_collective(hp_call_t *call);

/* A run of a collective compressor on one backend. */
typedef hp_status_t (*hp_collective_run_t)(hp_call_t *call);

/* powersgd's runs: host memory (src/algo/hp_algo_psgd.c), a device buffer
 * through the CUDA module's passes (src/algo/hp_algo_psgd_dev.c). */
hp_status_t hp_psgd_run_cpu(hp_call_t *call);
hp_status_t hp_psgd_run_dev(hp_call_t *call);
/* Its stream-ordered form (src/algo/hp_algo_psgd_async.c), which
 * hp_psgd_run_dev takes when the call's messages are device memory (the
 * backend's device-message mode): no host wait, copy or branch on data. */
hp_status_t hp_psgd_run_stream(hp_call_t *call);
/* What both runs do when this rank cannot run the call: take part in the
 * call's exchanges with error messages (and in its agreement), so no peer
 * hangs; returns st. */
hp_status_t hp_psgd_run_failed(hp_call_t *call, hp_status_t st);

/* Sum v[0..len) over ranks with the `none` ring: every rank ends with the
 * same bits (contract 1, doc/dev/contracts.md), which PMPI_Allreduce does not promise.  v is host
 * memory when host is set, else the call's own memory.  corrupt: the
 * corruption test knob for this sum; a rank that has already failed (err
 * not HP_OK) sends error messages in its place and never touches v.  The
 * sums' times count as the call's. */
hp_status_t hp_call_ring_sum(hp_call_t *call, float *v, size_t len, int host, int corrupt, hp_status_t err);

/* hp_call_ring_sum, then the failure agreement, so that every rank takes the
 * same branch after it: HP_OK on every rank, or on every rank an error (this
 * rank's own, else HP_ERR_PEER). */
hp_status_t hp_call_ring_sum_agreed(hp_call_t *call, float *v, size_t len, int host, int corrupt,
                                    hp_status_t err);

/* Fold this rank's residual of buf[off .. off+len) into buf (buf += r,
 * r = 0), unless buf holds NaN or Inf there (then both stay as they are:
 * the call decodes to NaN and the residual waits).  No-op without one. */
void hp_call_fold(hp_call_t *call, size_t off, size_t len);

#endif
