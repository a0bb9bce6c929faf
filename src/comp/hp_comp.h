/*
 * CompLL registry and the wire format of one encoded message.
 *
 * Message = 12-byte header + payload:
 *   u8 magic (0xC5) | u8 kind (registry index, or HP_KIND_ERROR) |
 *   u8 flags (HP_MSG_NONFINITE) | u8 version (1) | u32 n | u32 payload bytes
 * A message whose input held NaN/Inf has the NONFINITE flag and no payload; it
 * decodes to NaN.  A message of kind HP_KIND_ERROR tells the receiver that the
 * sender failed; the receiver keeps the protocol going and reports an error.
 *
 * Exceptions (flag HP_MSG_EXCEPT): a partial sum of finite inputs can hold
 * values no format carries (an overflow to +-Inf, Inf - Inf, |x| >= 2^126).
 * Such a message carries them verbatim before the compressor's payload:
 *   u32 k (1..HP_MSG_MAX_EXCEPT) | k x (u32 index, f32 value) | payload
 * indices strictly increasing and below n, every value non-finite or of
 * magnitude >= 2^126; the payload encodes the rest with those elements at 0,
 * and the decoder sets them (or adds them, when accumulating) exactly.
 */
#ifndef HP_COMP_H
#define HP_COMP_H

#include "hp_core.h"
#include "hipress_compressor.h"
#include "hp_gpu_fmt.h"

#define HP_MSG_HEADER 12
#define HP_MSG_MAGIC 0xC5
#define HP_MSG_VERSION 1
#define HP_MSG_NONFINITE 0x1
#define HP_MSG_EXCEPT 0x2
#define HP_MSG_MAX_EXCEPT 64
#define HP_MSG_EXCEPT_BYTES (4 + 8 * HP_MSG_MAX_EXCEPT) /* room the algorithms add to a message */
#define HP_KIND_ERROR 0xFF
#define HP_MAX_COMPRESSORS 32

typedef struct {
    uint8_t  magic, kind, flags, version;
    uint32_t n;
    uint32_t payload;
} hp_msg_header_t;

typedef const hipress_compressor_v1_t hp_comp_t;

/* The built-ins' kinds: their index in the registry (hp_builtins.def),
 * HP_BUILTIN_none = 0 ... ; plugins follow from HP_BUILTIN_COUNT. */
enum {
#define HP_BUILTIN(name) HP_BUILTIN_##name,
#include "hp_builtins.def"
#undef HP_BUILTIN
    HP_BUILTIN_COUNT
};

/* How much one lossy stage (an encode on an element's path) costs: the
 * plan's quality budget has a default per class (hp_plan.c). */
typedef enum {
    HP_QCLASS_EXACT = 0, /* lossless (none) */
    HP_QCLASS_ROUNDING,  /* fp16, bf16: one rounding per encode */
    HP_QCLASS_QUANT,     /* onebit, tbq, terngrad: a few levels per element */
    HP_QCLASS_SPARSE,    /* graddrop, dgc: most elements deferred */
    HP_QCLASS_LOWRANK,   /* powersgd: one low-rank approximation */
    HP_QCLASS_N
} hp_qclass_t;

/* What the framework knows of a compressor beyond its public ops struct.
 * Built-ins define hp_compx_<name> next to hp_comp_<name>; a plugin gets a
 * default derived from its flags.  The framework dispatches through these
 * hooks, never by comparing names. */
typedef struct hp_comp_ext {
    hp_qclass_t qclass;
    /* The quality budget auto keeps to by default (HIPRESS_MAX_STAGES=0):
     * the most lossy stages an element may go through; 0 = no limit.  Set
     * from the convergence study (doc/accuracy.md). */
    int max_stages;
    /* Elements per independent block of the format: every message the
     * algorithms send starts on a multiple of it (an absolute element index
     * of the buffer), so a call's result does not depend on how the plan
     * partitions the buffer.  NULL: 1 (element-wise formats). */
    size_t (*grain)(const hipress_comp_params_t *p);
    /* Momentum of the worker-side state applied where this rank's own
     * gradient enters the call (dgc's momentum correction); 0 or NULL: none. */
    float (*momentum)(const hipress_comp_params_t *p);
    /* Parameters for the `call`-th compressed call (from 0) on one buffer
     * (dgc's density warm-up).  NULL: the settings as they are. */
    void (*call_params)(hipress_comp_params_t *p, unsigned long long call);
    /* Decode `count` payloads of n elements each (lens[j] bytes) and add
     * them into out in order: out (when accumulate) + d_0 + d_1 + ..., with
     * the bits of decoding them one after the other, but block by block, so
     * out stays in cache while every message adds to it.  A rejected
     * payload leaves out unspecified (as decode does).  NULL: one after the
     * other. */
    int (*decode_many)(const void *const *payloads, const size_t *lens, int count, size_t n, float *out,
                       int accumulate, const hipress_comp_params_t *p);
    /* The device format of a message of n elements under p (k: the
     * encode's hipress_encode_args_t.k, 0 for a decode), for the CUDA
     * module's kernels that encode and decode it with the same bytes: fills
     * *f (zeroed before: see hp_gpu_fmt.def for what its format reads) and
     * returns HP_OK; HP_ERR_UNSUPPORTED when this message has no device form
     * (the backend then encodes it on host copies), HP_ERR_INVALID when the
     * encoder would reject p.  NULL: no device kernels (a plugin: device
     * buffers are encoded on the host). */
    hp_status_t (*gpu_fmt)(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f);
    /* A collective compressor's passes on the device (HP_GPU_FMT_POWERSGD:
     * src/backend/hp_gpu_psgd.c); 0 otherwise. */
    uint32_t gpu;
    /* The sum codec under HIPRESS_SUM_CODEC=auto: the kind that re-encodes
     * a complete sum at its owner (ps's phase 2, and through it the
     * hierarchy's inter-node stage) for this worker's codec.  NULL: the
     * worker's own codec (`same`). */
    int (*sum_codec)(const hipress_comp_params_t *p);
    /* 1: an owner stage of this codec re-encoding the sum of another
     * compressor's messages costs the quality budget nothing (measured:
     * doc/accuracy.md, 'Sum codecs').  0: it costs one stage, as the
     * worker's codec does. */
    int owner_free;
    /* The form that runs where no residual can be kept (a staging buffer,
     * HIPRESS_EF_LAYOUT=none) under HIPRESS_STAGING_FORM=unbiased: the kind
     * of a codec that is unbiased without one, run with stochastic rounding
     * (hp_comp_unbiased_params).  NULL: the compressor itself (it keeps no
     * residual, or is unbiased with stochastic rounding: the q codecs). */
    int (*unbiased)(const hipress_comp_params_t *p);
    /* 1: it keeps momentum SGD's accuracy, not Adam's (the noise of its
     * code, biased and carried by a residual or unbiased but coarse,
     * inflates Adam's second moment: doc/accuracy.md, 'Adam'): unless the
     * job says HIPRESS_OPTIMIZER=sgd, every call runs the staging codec
     * (HIPRESS_STAGING_CODEC, stochastic, no residual) instead. */
    int sgd_only;
} hp_comp_ext_t;

/* Registry: built-ins first, then plugins in load order. */
int hp_comp_count(void);
hp_comp_t *hp_comp_get(int kind);
int hp_comp_find(const char *name);           /* kind or -1 */
int hp_comp_name_ok(const char *name);        /* 1 when registered */
hp_status_t hp_comp_load_plugin(const char *path, char *err, size_t errlen);
hp_status_t hp_comp_register(hp_comp_t *c, char *err, size_t errlen);

/* The extension of compressor `kind` (never NULL for a registered kind). */
const hp_comp_ext_t *hp_comp_ext(int kind);

/* 1 when compressor `kind` drives the whole allreduce itself (powersgd):
 * a built-in with HIPRESS_COMP_COLLECTIVE, whose runs are rows of the
 * algorithm layer (src/algo/hp_collectives.def).  A plugin's flag does not
 * count: ABI v1 has no hook for its exchanges, so it runs under the
 * algorithms like any other. */
int hp_comp_is_collective(int kind);

/* Elements per block of `kind` (hp_comp_ext_t.grain), at least 1. */
size_t hp_comp_grain(int kind, const hipress_comp_params_t *p);

/* The device format of a message of compressor `kind` (its
 * hp_comp_ext_t.gpu_fmt, with *f zeroed first); HP_ERR_UNSUPPORTED when it
 * has none or p is NULL. */
hp_status_t hp_comp_gpu_fmt(int kind, const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f);

/* The device format of graddrop's and dgc's sparse messages (their hook's
 * work; dgc adds its momentum). */
hp_status_t hp_sparse_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f);

/* The density a sparse message aggregating `contribs` ranks keeps:
 * min(1, contribs * HIPRESS_SPARSE_RATIO) (the encoder then keeps
 * ceil(block * density) per block).  k2 is the element count that gives for
 * len elements; the message goes dense (`none`) when 8 k2 >= 4 len. */
double hp_sparse_density(int contribs, const hipress_comp_params_t *p);
size_t hp_sparse_k2(size_t len, int contribs, const hipress_comp_params_t *p);

/* The default quality budget of a plugin compressor's class, for
 * HIPRESS_MAX_STAGES=0: the most stages auto may choose (0 = no limit).
 * Built-ins carry their own (hp_comp_ext_t.max_stages). */
int hp_comp_default_budget(hp_qclass_t qclass);

/* Wire bytes of one message of len elements aggregating `contribs` ranks
 * (the cost model's volume: a sparse message at its density, dense beyond
 * it; a dense one at its bound). */
size_t hp_msg_wire_bytes(int kind, size_t len, int contribs, const hipress_comp_params_t *p);

/* Bytes of the largest message of n elements aggregating `contribs` ranks
 * that the algorithms may send, exceptions included: a sparse compressor's
 * message at its density (hp_call_encode makes it dense only when its
 * density says so, never because of the data), else hp_msg_max_bytes. */
size_t hp_msg_cap(int kind, size_t n, int contribs, const hipress_comp_params_t *p);

/* Bytes of the largest message for n elements. */
size_t hp_msg_max_bytes(int kind, size_t n, const hipress_comp_params_t *p);

/* Encode args->n values as one message of compressor `kind` into out (cap
 * bytes, >= hp_msg_max_bytes).  *len_p: total bytes; *nonfinite_p: 1 when
 * the input held NaN or Inf (message then decodes to NaN). */
hp_status_t hp_msg_encode(int kind, hipress_encode_args_t *args, void *out, size_t cap,
                          size_t *len_p, int *nonfinite_p);

/* Where the values of an encode come from, for hp_msg_encode_x. */
typedef enum {
    HP_SRC_INPUT,  /* this rank's input: NaN or Inf there makes the message non-finite */
    HP_SRC_BAD,    /* an input or a received message was non-finite: so is this one */
    HP_SRC_SUM     /* a sum of finite inputs and finite messages: what the format
                    * cannot carry (overflow) travels as exceptions */
} hp_src_t;

/* hp_msg_encode, except that when the compressor reports a non-finite input
 * that `src` says did not come from a non-finite input (HP_SRC_SUM: any
 * NaN/Inf/huge value; HP_SRC_INPUT: finite values of magnitude >= 2^126), up
 * to HP_MSG_MAX_EXCEPT such elements are sent as exceptions when cap has
 * room; otherwise (or with more) the message is non-finite as before.  The
 * exceptional elements of args->in are zeroed during the second encode and
 * restored: args->in must be writable.  *nonfinite_p is 0 for a message with
 * exceptions, *except_p (may be NULL) its number of exceptions. */
hp_status_t hp_msg_encode_x(int kind, hipress_encode_args_t *args, void *out, size_t cap,
                            hp_src_t src, size_t *len_p, int *nonfinite_p, size_t *except_p);

/* The second half of hp_msg_encode_x, for an encoder that made the
 * non-finite message of args elsewhere (the device codec, whose encode
 * leaves the residual and state as hp_msg_encode does): out holds that
 * message (*len_p bytes, *nonfinite_p = 1).  Replaces it with the message
 * with exceptions hp_msg_encode_x would send, or leaves it as it is. */
hp_status_t hp_msg_except(int kind, hipress_encode_args_t *args, void *out, size_t cap,
                          hp_src_t src, size_t *len_p, int *nonfinite_p, size_t *except_p);

/* An error message for n elements (12 bytes). */
size_t hp_msg_error(void *out, size_t n);

/* Write a message header (an encoder elsewhere made the payload). */
void hp_msg_put_header(void *out, int kind, int nonfinite, size_t n, size_t payload);

/* Validate and decode a message of `len` bytes that must hold n elements and
 * be of kind `kind` (or the dense fallback `none`).  accumulate: out += value.
 * Returns HP_ERR_MESSAGE on anything malformed (out then unspecified but
 * nothing outside out[0..n) is touched), HP_ERR_PEER for an error message. */
hp_status_t hp_msg_decode(int kind, const void *msg, size_t len, size_t n, float *out,
                          int accumulate, const hipress_comp_params_t *p);

/* The length of the message in msg (a buffer of cap bytes), read from its
 * header: header, exceptions and payload.  0 when the header is not a
 * message's (magic, version, flags) or claims more than cap: no message is
 * shorter than HP_MSG_HEADER, and the decoders reject a length of 0.  A
 * receiver learns a message's length this way, never from the transport
 * (src/transport/hp_transport.h).  What the bytes say is the decoders' to
 * check. */
size_t hp_msg_len(const void *msg, size_t cap);

/* For a transport that knows how many bytes arrived in a message's buffer
 * (cap bytes; MPI, which moves only a message's own length): unless they
 * are exactly the message its header describes, mark it invalid, so that
 * hp_msg_len gives 0 and it is rejected -- a header claiming more than
 * arrived is never decoded from bytes left in the buffer from before, one
 * claiming less is rejected as a message with bytes after it was.  Writes
 * byte 0 at most. */
void hp_msg_arrived(void *msg, size_t got, size_t cap);

/* Read the header; HP_ERR_MESSAGE when len is too short or magic/version bad. */
hp_status_t hp_msg_header(const void *msg, size_t len, hp_msg_header_t *h);

/* The checks every decoder (host or device) makes of a message's header:
 * read it into h, HP_ERR_PEER for an error message, HP_ERR_MESSAGE unless it
 * holds n elements of kind `kind` (or `none`), with nothing after the header
 * when n is 0 and no payload when it is flagged non-finite.  On HP_OK the
 * caller is done when n is 0, fills NaN when h->flags has HP_MSG_NONFINITE,
 * and decodes the payload otherwise. */
hp_status_t hp_msg_check(const void *msg, size_t len, int kind, size_t n, hp_msg_header_t *h);

/* The sum codec of a communicator: HIPRESS_SUM_CODEC's value (`setting`,
 * the index of auto|same|q2|q4|q8|fp16|bf16|none, hp_sum_setting_t)
 * resolved for worker codec `kind`: auto asks the compressor
 * (hp_comp_ext_t.sum_codec), same and a collective compressor (which runs
 * its own exchanges) give `kind`. */
typedef enum {
    HP_SUM_AUTO = 0, HP_SUM_SAME, HP_SUM_Q2, HP_SUM_Q4, HP_SUM_Q8, HP_SUM_FP16, HP_SUM_BF16, HP_SUM_NONE
} hp_sum_setting_t;
int hp_comp_sum_kind(int kind, int setting, const hipress_comp_params_t *p);

/* What one owner stage of sum codec `sum_kind` costs the quality budget of
 * worker codec `kind`: 0 when it is another codec whose owner_free says so,
 * else 1 (a stage like any other). */
int hp_comp_sum_cost(int kind, int sum_kind);

/* The grain of a call whose worker codec is `kind` and sum codec
 * `sum_kind`: the least common multiple of both blocks, so that every
 * message of either codec starts on a block of both and no result depends
 * on the partitioning. */
size_t hp_comp_grain2(int kind, int sum_kind, const hipress_comp_params_t *p);

/* q4: the sum codec of the quantising compressors (onebit, tbq, terngrad). */
int hp_sum_codec_q4(const hipress_comp_params_t *p);

/* The residual-free form of compressor `kind` (hp_comp_ext_t.unbiased):
 * its own kind when it needs no residual, `dense_q` (the kind of
 * HIPRESS_STAGING_CODEC: q2, q4 or q8) where the compressor's form is a
 * dense q codec (hp_unbiased_dense_q).  Every element's expected result is
 * then the exact sum: E[decode(encode(v))] = v, stage after stage. */
int hp_comp_unbiased_kind(int kind, const hipress_comp_params_t *p, int dense_q);

/* The parameters of the residual-free form: p with stochastic rounding. */
void hp_comp_unbiased_params(const hipress_comp_params_t *p, hipress_comp_params_t *out);

/* A dense q codec with stochastic rounding (which one: HIPRESS_STAGING_CODEC,
 * q4 by default): the residual-free form of the biased compressors
 * (onebit, tbq, graddrop, dgc, powersgd; doc/compressors.md, 'Staging
 * buffers').  Returns HP_FORM_DENSE_Q, which hp_comp_unbiased_kind resolves. */
#define HP_FORM_DENSE_Q (-2)
int hp_unbiased_dense_q(const hipress_comp_params_t *p);

/* Built-in kinds that the algorithms refer to by name (the registry's
 * order: hp_builtins.def). */
#define hp_kind_none HP_BUILTIN_none

#endif
