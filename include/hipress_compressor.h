/*
 * hipress compressor ABI.
 *
 * A compressor is a frozen, versioned ops struct.  Built-in compressors and
 * plugins (HIPRESS_PLUGIN=/path/to/lib.so, which must export the symbol
 * `hipress_compressor_v1`, or `hipress_compressors_v1` as a NULL-terminated
 * array) use the same struct.  The framework owns the message header, the
 * non-finite flag, error-feedback storage and the transport: a compressor only
 * turns n floats into a payload and back.
 *
 * Version rule: a new field or changed meaning makes a new struct
 * (hipress_compressor_v2); the loader looks for the newest it knows first.
 */
#ifndef HIPRESS_COMPRESSOR_H
#define HIPRESS_COMPRESSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HIPRESS_COMPRESSOR_ABI_VERSION 1

/* Flags of a compressor. */
#define HIPRESS_COMP_LOSSLESS   0x1u /* decode(encode(v)) == v bit for bit */
#define HIPRESS_COMP_EF         0x2u /* biased: wants an error-feedback residual */
#define HIPRESS_COMP_SPARSE     0x4u /* payload length varies with the data */
#define HIPRESS_COMP_COLLECTIVE 0x8u /* drives its own exchanges (powersgd) */
#define HIPRESS_COMP_MOMENTUM   0x10u /* wants a second state vector (dgc) */

/* Return codes of compressor callbacks (0 = success). */
#define HIPRESS_COMP_OK        0
#define HIPRESS_COMP_EINVAL   -1 /* malformed message or argument */
#define HIPRESS_COMP_ENOSPC   -2 /* output capacity too small */
#define HIPRESS_COMP_ENOMEM   -3

/* Parameters every built-in reads; plugins may ignore them.  Filled from the
 * HIPRESS_* settings of the communicator.  Part of ABI v1 as it stands: a
 * later version may only append fields (a plugin built against fewer never
 * reads the rest). */
typedef struct hipress_comp_params {
    uint32_t onebit_block;     /* HIPRESS_ONEBIT_BLOCK, power of two */
    float    tbq_threshold;    /* HIPRESS_TBQ_THRESHOLD, 0 = use tbq_scale */
    float    tbq_scale;        /* HIPRESS_TBQ_SCALE */
    uint32_t terngrad_bits;    /* HIPRESS_TERNGRAD_BITS: 1, 2, 4 or 8 */
    double   sparse_ratio;     /* HIPRESS_SPARSE_RATIO */
    double   sample_ratio;     /* HIPRESS_SAMPLE_RATIO */
    float    dgc_momentum;     /* HIPRESS_DGC_MOMENTUM */
    uint32_t powersgd_rank;    /* HIPRESS_POWERSGD_RANK */
    int      isa;              /* 0 auto, 1 generic, 2 avx2 */
    uint32_t tbq_block;        /* HIPRESS_TBQ_BLOCK, power of two: one threshold per block */
    uint32_t sparse_block;     /* HIPRESS_SPARSE_BLOCK, power of two: top-k per block */
    uint32_t dgc_warmup;       /* HIPRESS_DGC_WARMUP: calls of dgc's density warm-up */
    uint32_t fp16_block;       /* fp16: elements per scale block, a power of two >= 32;
                                * 0 = the default, 1024 */
    uint32_t terngrad_block;   /* terngrad: elements per min-max range, a power of two
                                * >= 32; 0 = the default, 4096 */
    uint32_t q_block;          /* q2, q4, q8: HIPRESS_Q_BLOCK, elements per min-max range, a power
                                * of two >= 32; 0 = the default, 512 */
    uint32_t q_rounding;       /* q2, q4, q8: HIPRESS_Q_ROUNDING, 0 nearest (the default), 1 stochastic */
} hipress_comp_params_t;

/* One encode call.  `in` holds n values; when the compressor has the EF flag
 * and `residual` is not NULL the compressor encodes v = in + residual and
 * stores v - decode(encode(v)) back into `residual` -- unless the input holds
 * NaN or Inf, in which case it sets *nonfinite_p = 1 and must leave residual
 * and state unchanged (the framework then sends a header-only message that
 * decodes to NaN). */
typedef struct hipress_encode_args {
    const float *in;
    float       *residual;   /* n floats or NULL */
    float       *state;      /* n floats or NULL (MOMENTUM compressors) */
    size_t       n;
    size_t       k;          /* sparse: elements to keep (0 = from params) */
    void        *out;        /* payload buffer */
    size_t       out_cap;    /* its capacity, >= max_payload(n) */
    uint64_t     rng_key[4]; /* seed, rank, call number, hop: counter RNG key */
    uint64_t     rng_offset; /* element offset of in[0] in the whole buffer */
    const hipress_comp_params_t *params;
} hipress_encode_args_t;

typedef struct hipress_compressor_v1 {
    uint32_t    abi_version;  /* HIPRESS_COMPRESSOR_ABI_VERSION */
    const char *name;         /* [a-z0-9_]+, unique */
    uint32_t    flags;        /* HIPRESS_COMP_* */
    /* Upper bound of the payload for n elements (header not included). */
    size_t (*max_payload)(size_t n, const hipress_comp_params_t *params);
    /* Encode; *out_len_p receives the payload length.  Returns HIPRESS_COMP_*. */
    int (*encode)(const hipress_encode_args_t *args, size_t *out_len_p, int *nonfinite_p);
    /* Decode a payload of `len` bytes holding n elements into out, adding to
     * out when accumulate != 0, overwriting it otherwise.  Must validate
     * everything (len, ranges, index order) and return HIPRESS_COMP_EINVAL
     * without touching memory outside out[0..n) on a bad message. */
    int (*decode)(const void *payload, size_t len, size_t n, float *out, int accumulate,
                  const hipress_comp_params_t *params);
} hipress_compressor_v1_t;

#ifdef __cplusplus
}
#endif
#endif /* HIPRESS_COMPRESSOR_H */
