/*
 * CompLL sparse operators: sample-threshold select, exact top-k selection,
 * (index, value) packing and the validating scatter decoder.  graddrop and
 * dgc are composed from these; the CUDA versions share the per-element
 * functions below.
 *
 * Wire format of a sparse payload: `sent` pairs, each a little-endian uint32
 * index followed by the float value, indices strictly increasing and < n,
 * values finite (8 * sent bytes; no count field: it is len / 8).
 *
 * Encoding: a check that the input is finite (the operator layer's
 * scanner, hp_ops_t.nonfinite), a threshold from a random
 * sample, then one pass that updates state and residual in place and
 * collects the indices at or above the threshold, and an exact top-k on
 * those few.  Every path computes v with the same float operations (no FMA),
 * so all select the same indices and store the same bits.
 */
#ifndef HP_OPS_SPARSE_H
#define HP_OPS_SPARSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "hipress_compressor.h"

#if defined(__CUDACC__)
#define HP_SPARSE_HD __host__ __device__ __forceinline__
#else
#define HP_SPARSE_HD static inline
#endif

/* Kernel paths: the `isa` arguments below are resolved levels of hp_ops.h
 * (HP_ISA_GENERIC or HP_ISA_AVX2, hp_isa_resolve); every path selects the
 * same indices and packs the same bytes. */

/* Smallest sample drawn to estimate the threshold; partitions of at most
 * HP_SPARSE_EXACT_N elements are selected exactly without sampling. */
#define HP_SPARSE_MIN_SAMPLE 1024
#define HP_SPARSE_EXACT_N    4096

/*
 * Where the value v_i under selection comes from:
 *   u'_i = m * u_i + g_i        when u != NULL (dgc momentum), else u'_i = g_i
 *   v_i  = r_i + u'_i           when r != NULL (error feedback), else v_i = u'_i
 * graddrop uses g and r; dgc uses all four.
 */
typedef struct {
    const float *g;
    const float *r;
    const float *u;
    float m;
} hp_sparse_src_t;

HP_SPARSE_HD float hp_sparse_u_at(const float *g, const float *u, float m, size_t i)
{
    return u != NULL ? m * u[i] + g[i] : g[i];
}

HP_SPARSE_HD float hp_sparse_v_at(const hp_sparse_src_t *s, size_t i)
{
    float x = hp_sparse_u_at(s->g, s->u, s->m, i);
    return s->r != NULL ? s->r[i] + x : x;
}

/* |f| as its bit pattern: for finite f, a >= b as floats iff the bits
 * compare the same way as unsigned integers; NaN and Inf are >= 0x7f800000. */
HP_SPARSE_HD uint32_t hp_sparse_absbits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b & 0x7fffffffu;
}

/*
 * Threshold estimate: draws s = max(HP_SPARSE_MIN_SAMPLE, sample_ratio * n)
 * elements (at most n), one from each of s equal strata, at offsets chosen
 * by the counter RNG (folded key `key`, counters offset .. offset+s-1), and
 * returns the |v| bits of the rank-th largest sampled magnitude, with rank a
 * little above the expected s * k / n so that, in most calls, at least k of
 * the n elements are >= it (level 0 is the first guess; each higher level
 * lowers it).  Returns 1 (the smallest non-zero magnitude: every non-zero
 * element passes) when the rank runs past the sample.  scratch: 2s uint32.
 * *sample_p receives s.
 */
uint32_t hp_sparse_threshold(const hp_sparse_src_t *src, size_t n, size_t k, double sample_ratio,
                             uint64_t key, uint64_t offset, int level, uint32_t *scratch,
                             size_t *sample_p);

/* Sample size hp_sparse_threshold draws for n elements (its scratch size). */
size_t hp_sparse_sample_size(size_t n, double sample_ratio);

/*
 * Filter: appends to idx[] the indices i in [*pos_p, n) with |v_i| bits >=
 * thr (clamped to [1, 2^31 - 1]), in increasing order, until idx holds cap
 * entries or the range ends; *pos_p is advanced to where it stopped (n when
 * done).  Sets *nonfinite_p to 1 when it meets a NaN or Inf v.  Returns the
 * number appended.
 */
size_t hp_sparse_filter(const hp_sparse_src_t *src, size_t n, uint32_t thr, size_t *pos_p,
                        uint32_t *idx, size_t cap, int *nonfinite_p, int isa);

/*
 * Exact top-k of the m candidates idx[0..m) (increasing indices): keeps the k
 * largest |v| (ties to the lower index) in place, still in increasing index
 * order, and returns how many are kept (min(m, k)).  scratch: 2m uint32.
 */
size_t hp_sparse_topk(const hp_sparse_src_t *src, uint32_t *idx, size_t m, size_t k,
                      uint32_t *scratch);

/* Writes the m pairs (idx[j], v_idx[j]) to out (8m bytes, any alignment). */
void hp_sparse_pack(const hp_sparse_src_t *src, const uint32_t *idx, size_t m, void *out);

/*
 * The filter fused with the update of the state, in place: as
 * hp_sparse_filter, and for each element it passes stores u' into u and v
 * into r (r must be src->r, u must be src->u; NULL: not kept; g, r and u
 * distinct vectors).  Afterwards v is in r (or u when r is NULL).  Returns 0
 * without doing anything when r or u are not the vectors of src.
 */
size_t hp_sparse_filter_commit(const hp_sparse_src_t *src, float *r, float *u, size_t n,
                               uint32_t thr, size_t *pos_p, uint32_t *idx, size_t cap,
                               int *nonfinite_p, int isa);

/* Zero r and u (either may be NULL) at the m indices idx[]. */
void hp_sparse_mask(float *r, float *u, const uint32_t *idx, size_t m);

/*
 * The whole sparse encode shared by graddrop and dgc.  With a->k == 0 the
 * range is cut into blocks of G = sparse_block elements (from element 0 of
 * the message; the algorithms start messages on multiples of G, so blocks
 * are absolute), and each block of b elements keeps k_b = ceil(b *
 * sparse_ratio) (at least 1, at most b); with a->k != 0 the whole range is
 * one block keeping a->k.  Each block sends exactly min(k_b, number of
 * non-zero v) elements -- those of largest |v|, ties to the lower index --
 * as sorted pairs, and leaves u' in the state and v in the residual, both
 * zeroed at the sent indices.  r_out / u_out must be src->r / src->u (NULL:
 * none kept).
 * NaN or Inf in the input: *nonfinite_p = 1, residual and state untouched.
 * A finite input whose v overflows to Inf also gives *nonfinite_p = 1, and
 * resets residual and state to zero (their old values are gone by then).
 * HIPRESS_COMP_ENOMEM after the update leaves v whole in the residual.
 */
int hp_sparse_encode(const hipress_encode_args_t *a, const hp_sparse_src_t *src, float *r_out,
                     float *u_out, size_t *out_len_p, int *nonfinite_p);

/* k the encoder uses for one block of n elements (args k, else
 * ceil(n * ratio), at least 1, at most n). */
size_t hp_sparse_k(size_t n, size_t args_k, const hipress_comp_params_t *params);

/* Elements per top-k block (params->sparse_block; 65536 when unset). */
size_t hp_sparse_grain(const hipress_comp_params_t *params);

/* k over all the blocks of n elements (args k 0). */
size_t hp_sparse_k_blocks(size_t n, const hipress_comp_params_t *params);

/* Bytes of the largest payload when args k is 0: 8 * hp_sparse_k_blocks(n, p). */
size_t hp_sparse_max_payload(size_t n, const hipress_comp_params_t *params);

/* dgc's warm-up: the density of the `call`-th call (from 0) on a buffer,
 * 0.25 * (ratio / 0.25)^(call / warmup) for call < warmup, then ratio. */
double hp_dgc_density(double ratio, uint32_t warmup, unsigned long long call);

/*
 * Validating decoder of a sparse payload: len % 8 == 0, at most n pairs,
 * indices strictly increasing and < n, values finite; HIPRESS_COMP_EINVAL
 * (nothing written) otherwise.  Then out[idx] += value (accumulate) or out is
 * zero-filled and out[idx] = value.
 */
int hp_sparse_decode(const void *payload, size_t len, size_t n, float *out, int accumulate);

/* Defaults of HIPRESS_SPARSE_RATIO, HIPRESS_SAMPLE_RATIO and
 * HIPRESS_SPARSE_BLOCK, used when a caller passes no params; the bits of
 * |v| at or above which a float is NaN or Inf. */
#define HP_SPARSE_DEFAULT_RATIO 0.001
#define HP_SPARSE_DEFAULT_SAMPLE 0.01
#define HP_SPARSE_DEFAULT_BLOCK 65536
#define HP_SPARSE_NONFINITE_BITS 0x7f800000u

#endif
