/*
 * `q2`, `q4`, `q8`: b-bit (2, 4, 8) max-min uniform quantisation, one range
 * per block of B = HIPRESS_Q_BLOCK elements (a power of two >= 32, default
 * 512), round to nearest with error feedback or stochastic rounding
 * (HIPRESS_Q_ROUNDING).  Made to re-encode sums (an owner's shard of a
 * reduction, doc/compressors.md), and a compressor of its own.
 *
 *   v = in + residual (in alone without a residual)
 *   per block j:  L = 2^b - 1;  min_j, max_j of v;  gap_j = (max_j - min_j) / L
 *   nearest:     q = clamp(floor((v - min_j) * (1/gap_j) + 1/2), 0, L)
 *   stochastic:  q = clamp(floor((v - min_j) * (1/gap_j) + u_i), 0, L),
 *                u_i = hp_rng_q_unit(hp_rng_key(rng_key), rng_offset + i)
 *                (the q codecs' own generator, src/ops/hp_elem.h: two 32-bit
 *                multiplies an element; terngrad keeps hp_rng_unit)
 *   decode min_j + q * gap_j;  new residual = v - decode
 * (1/gap once per block in float, as terngrad: a multiply per element.)
 * The two roundings share one format; the decoder does not need to know
 * which one made a message.
 *
 * Payload (nb = ceil(n/B)): nb pairs (min_j, gap_j) of little-endian floats,
 * then ceil(n*b/8) bytes of codes, element i at bit (i*b)%8 of byte i*b/8
 * (B*b/8 is whole, so each block's codes start on a byte), zero padding.
 * When gap_j == 0 (max == min, or 1/gap overflows: a range below 2^-128 L)
 * the pair is (min_j, +0), the block's codes are 0 and it decodes to min_j.
 *
 * Range limit (terngrad's): an input with |in| >= 2^126 (or NaN/Inf) is
 * reported as non-finite, the residual untouched -- the framework sends up
 * to 64 such finite values as exceptions -- so that max - min, gap * L and
 * min + q * gap never overflow.  Where a finite input's in + residual
 * overflows or reaches 2^126 (a residual that large), that element is
 * encoded as v = in: its error feedback is dropped.  Decoders check every
 * |min_j| < 2^126, gap_j == +0 (codes 0) or 0 < gap_j with
 * gap_j * L <= 2^127 (1 + 2^-20), the exact length and the zero padding.
 *
 * Passes: with a residual, a read-only check of the input's largest |in|
 * first (the residual is then written block by block, and a non-finite
 * input must leave all of it untouched); then per block: v = in + r in
 * place of r, min/max, and, with the block in cache, the codes packed in
 * registers and the new residual in one pass (quant_near_pack,
 * quant_stoch_rng_pack: stochastic rounding draws its u in that pass,
 * in registers too), while the next block's input and residual are
 * prefetched (the quantisation overlaps the memory reads of the next
 * block's min/max pass).
 *
 * Device kernels (cuda/codec/hp_codec_quant.c, format HP_GPU_FMT_Q): the same
 * bytes and residual bits (cuda/kern/hp_kern.h hp_k_q_v, hp_k_q_code); a device
 * buffer, and an owner's sum re-encoded by a q sum codec, encode there.
 */
#include "hp_comp.h"
#include "hp_ops.h"
#include <float.h>
#include <math.h>
#include <string.h>

#define Q_LIMIT_BITS 0x7e800000u /* 2^126 */
#define Q_DEFAULT_BLOCK 512u

static uint32_t block_of(const hipress_comp_params_t *p)
{
    /* 0: parameters from a caller built before the field existed */
    return p != NULL && p->q_block != 0 ? p->q_block : Q_DEFAULT_BLOCK;
}

static int block_ok(uint32_t B)
{
    return B >= 32 && (B & (B - 1)) == 0;
}

static int stochastic(const hipress_comp_params_t *p)
{
    return p != NULL && p->q_rounding == 1;
}

static size_t payload_bytes(size_t n, unsigned b, uint32_t B)
{
    return 8 * ((n + B - 1) / B) + (n * b + 7) / 8;
}

static size_t q_max_payload(size_t n, unsigned b, const hipress_comp_params_t *p)
{
    uint32_t B = block_of(p);
    return payload_bytes(n, b, block_ok(B) ? B : 32);
}

static size_t q_grain(const hipress_comp_params_t *p)
{
    uint32_t B = block_of(p);
    return block_ok(B) ? B : 1;
}

/* Min, max and largest |v| bits of one block of v = x + r (r NULL: x),
 * v stored into vout when not NULL (vout may be r); chunk results combined
 * in chunk order (part of the definition: every path chunks alike). */
static void block_minmax(const hp_ops_t *ops, const float *x, float *r, size_t m, float *vout,
                         float *mn_p, float *mx_p, uint32_t *am_p)
{
    float mn = INFINITY, mx = -INFINITY;
    uint32_t am = 0;
    for (size_t c = 0; c < m; c += HP_OPS_CHUNK) {
        float cmn, cmx;
        uint32_t cam;
        ops->minmax_add(x + c, r ? r + c : NULL, HP_MIN((size_t)HP_OPS_CHUNK, m - c),
                        vout ? vout + c : NULL, &cmn, &cmx, &cam);
        mn = cmn < mn ? cmn : mn;
        mx = cmx > mx ? cmx : mx;
        am = cam > am ? cam : am;
    }
    *mn_p = mn;
    *mx_p = mx;
    *am_p = am;
}

static int q_encode(const hipress_encode_args_t *a, unsigned b, size_t *len_p, int *nonfinite_p)
{
    const hp_ops_t *ops = hp_ops_get(a->params ? a->params->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(a->params);
    const int stoch = stochastic(a->params);
    const size_t n = a->n, nb = (n + B - 1) / B;
    const float levels = (float)((1u << b) - 1u);
    uint8_t *out = (uint8_t *)a->out, *packed;
    float *res = a->residual;
    uint64_t key = 0;
    uint8_t codes[HP_OPS_CHUNK];

    if (!block_ok(B) || (a->params != NULL && a->params->q_rounding > 1))
        return HIPRESS_COMP_EINVAL;
    if (a->out_cap < payload_bytes(n, b, B))
        return HIPRESS_COMP_ENOSPC;
    packed = out + 8 * nb;
    *nonfinite_p = 0;
    /* the residual is written block by block: the whole input must be known
     * to be in range first (one read-only pass) */
    if (res != NULL && ops->absmax(a->in, n) >= Q_LIMIT_BITS) {
        *len_p = 0;
        *nonfinite_p = 1;
        return HIPRESS_COMP_OK;
    }
    if (stoch)
        key = hp_rng_key(a->rng_key);

    for (size_t j = 0; j < nb; j++) {
        const size_t s = j * B, m = HP_MIN((size_t)B, n - s);
        const float *in = a->in + s;
        float *w = res != NULL ? res + s : NULL;   /* v = in + r in place of r */
        const float *v = w != NULL ? w : in;
        float pair[2], mn, mx, inv;
        uint32_t am;

        block_minmax(ops, in, w, m, w, &mn, &mx, &am);
        if (am >= Q_LIMIT_BITS) {
            if (w == NULL) {
                *len_p = 0;
                *nonfinite_p = 1;   /* the input's own: nothing else was written */
                return HIPRESS_COMP_OK;
            }
            /* in is in range (checked), in + r is not: v = in there */
            for (size_t i = 0; i < m; i++)
                w[i] = (hp_f2u(w[i]) & 0x7fffffffu) >= Q_LIMIT_BITS ? in[i] : w[i];
            block_minmax(ops, v, NULL, m, NULL, &mn, &mx, &am);
        }
        pair[0] = mn;
        pair[1] = (mx - mn) / levels;
        inv = 1.0f / pair[1];
        if (!(inv <= FLT_MAX)) {
            /* gap 0, or below 2^-128: every value is min to < 2^-120 */
            pair[1] = 0.0f;
            inv = 0.0f;
        }
        memcpy(out + 8 * j, pair, 8);
        if (j + 1 < nb) {
            /* the next block's input and residual on their way from memory
             * while this one is quantised in cache */
            const size_t s1 = s + B, m1 = HP_MIN((size_t)B, n - s1);
            for (size_t i = 0; i < m1; i += 16) {
                __builtin_prefetch(a->in + s1 + i);
                if (res != NULL)
                    __builtin_prefetch(res + s1 + i, 1);
            }
        }
        for (size_t c = 0; c < m; c += HP_OPS_CHUNK) {
            const size_t k = HP_MIN((size_t)HP_OPS_CHUNK, m - c);
            float *rout = res != NULL ? res + s + c : NULL;
            uint8_t *pk = packed + (s + c) * b / 8;
            if (pair[1] == 0.0f) {
                memset(codes, 0, k);
                if (rout != NULL)
                    ops->dequant(codes, k, pair[0], 0.0f, 0.0f, rout, HP_OUT_SUB);
                ops->pack(codes, k, b, pk);
            } else if (stoch) {
                ops->quant_stoch_rng_pack(v + c, key, a->rng_offset + s + c, k, pair[0], inv, pair[1], levels,
                                          b, pk, rout);
            } else {
                ops->quant_near_pack(v + c, k, pair[0], inv, pair[1], levels, b, pk, rout);
            }
        }
    }
    *len_p = payload_bytes(n, b, B);
    return HIPRESS_COMP_OK;
}

/* Everything a decoder checks of one block's pair. */
static int pair_ok(const float pair[2], unsigned b)
{
    const double top = 0x1p127 * (1.0 + 0x1p-20);
    if (!((hp_f2u(pair[0]) & 0x7fffffffu) < Q_LIMIT_BITS))
        return 0;
    return hp_f2u(pair[1]) == 0 ||
           (pair[1] > 0.0f && (double)pair[1] * (double)((1u << b) - 1u) <= top);
}

static int q_decode(const void *payload, size_t len, size_t n, float *out, int accumulate, unsigned b,
                    const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(p);
    const size_t nb = (n + B - 1) / B;
    const uint8_t *packed = (const uint8_t *)payload + 8 * nb;
    const int mode = accumulate ? HP_OUT_ADD : HP_OUT_SET;
    uint8_t codes[HP_OPS_CHUNK], cmn, cmx;
    float pair[2];

    if (!block_ok(B) || len != payload_bytes(n, b, B))
        return HIPRESS_COMP_EINVAL;
    /* every pair and the padding before any output is written */
    for (size_t j = 0; j < nb; j++) {
        memcpy(pair, (const uint8_t *)payload + 8 * j, 8);
        if (!pair_ok(pair, b))
            return HIPRESS_COMP_EINVAL;
    }
    if ((n * b) % 8 != 0 && (packed[n * b / 8] >> ((n * b) % 8)) != 0)
        return HIPRESS_COMP_EINVAL;
    for (size_t j = 0; j < nb; j++) {
        const size_t s = j * B, m = HP_MIN((size_t)B, n - s);
        memcpy(pair, (const uint8_t *)payload + 8 * j, 8);
        for (size_t c = 0; c < m; c += HP_OPS_CHUNK) {
            size_t k = HP_MIN((size_t)HP_OPS_CHUNK, m - c);
            ops->unpack(packed + (s + c) * b / 8, k, b, codes, &cmn, &cmx);
            if (hp_f2u(pair[1]) == 0 && cmx != 0)
                return HIPRESS_COMP_EINVAL;   /* a min-only block has codes 0 */
            ops->dequant(codes, k, pair[0], 0.0f, pair[1], out + s + c, mode);
        }
    }
    return HIPRESS_COMP_OK;
}

/* The device format (cuda/codec/hp_codec_quant.c, format q of hp_gpu_fmt.def):
 * blocks of B, b bits a code, the rounding; the payload this file's size. */
static hp_status_t q_gpu_fmt(const hipress_comp_params_t *p, size_t n, unsigned b, hp_gpu_fmt_t *f)
{
    const uint32_t B = block_of(p);
    if (!block_ok(B) || p->q_rounding > 1)
        return HP_ERR_INVALID;
    f->id = HP_GPU_FMT_Q;
    f->block = B;
    f->iarg[0] = b;
    f->iarg[1] = p->q_rounding;
    f->payload = payload_bytes(n, b, B);
    return HP_OK;
}

/* One row per bit width: the same code with b fixed. */
#define Q_DEFINE(B_)                                                                              \
    static size_t q##B_##_max_payload(size_t n, const hipress_comp_params_t *p)                   \
    {                                                                                             \
        return q_max_payload(n, B_, p);                                                           \
    }                                                                                             \
    static int q##B_##_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)    \
    {                                                                                             \
        return q_encode(a, B_, len_p, nonfinite_p);                                               \
    }                                                                                             \
    static int q##B_##_decode(const void *payload, size_t len, size_t n, float *out,              \
                              int accumulate, const hipress_comp_params_t *p)                     \
    {                                                                                             \
        return q_decode(payload, len, n, out, accumulate, B_, p);                                 \
    }                                                                                             \
    static hp_status_t q##B_##_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k,        \
                                       hp_gpu_fmt_t *f)                                           \
    {                                                                                             \
        (void)k;                                                                                  \
        return q_gpu_fmt(p, n, B_, f);                                                            \
    }                                                                                             \
    const hipress_compressor_v1_t hp_comp_q##B_ = {                                               \
        .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,                                            \
        .name = "q" #B_,                                                                          \
        /* error feedback in both roundings (the framework keeps a residual \
         * per compressor, not per setting): stochastic rounding is        \
         * unbiased given v, so E[decode] = in + residual */                \
        .flags = HIPRESS_COMP_EF,                                                                 \
        .max_payload = q##B_##_max_payload,                                                       \
        .encode = q##B_##_encode,                                                                 \
        .decode = q##B_##_decode,                                                                 \
    };                                                                                            \
    const hp_comp_ext_t hp_compx_q##B_ = {                                                        \
        .qclass = HP_QCLASS_QUANT,                                                                \
        .max_stages = 1, /* the class default: no convergence study of the q codecs yet */       \
        .grain = q_grain,                                                                         \
        .gpu_fmt = q##B_##_gpu_fmt,                                                               \
        .owner_free = (B_) >= 4, /* as an owner's sum codec (doc/accuracy.md, 'Sum codecs') */   \
        .sgd_only = (B_) < 4,    /* q2: +10% validation loss under AdamW (doc/accuracy.md, 'Adam') */ \
    };

Q_DEFINE(2)
Q_DEFINE(4)
Q_DEFINE(8)
