/*
 * `terngrad`: b-bit (HIPRESS_TERNGRAD_BITS: 1, 2, 4, 8) min-max uniform
 * quantisation with unbiased stochastic rounding, one range per block of
 * B = HIPRESS_TERNGRAD_BLOCK elements (a power of two >= 32); no residual.
 *
 *   per block j:  L = 2^b - 1;  gap_j = (max_j - min_j) / L   (float)
 *   q_i = clamp(floor((g_i - min_j) * (1/gap_j) + u_i), 0, L)
 *         (1/gap once in float: a multiply instead of a divide per element)
 *   u_i = hp_rng_unit(hp_rng_key(rng_key), rng_offset + i)
 *   decode min_j + q * gap_j
 *
 * A range per block rather than per message: a message is a whole shard of
 * a fused buffer (every layer's gradient), and a partial sum's range is
 * wider still, so one range made the rounding noise of small layers as large
 * as the largest layer's values (tree diverged in 2 runs of 10 on the
 * training of doc/accuracy.md; with blocks it stays with plain).
 *
 * Payload (nb = ceil(n/B)): nb pairs (min_j, gap_j) of little-endian floats,
 * then ceil(n*b/8) bytes of codes, element i at bit (i*b)%8 of byte i*b/8
 * (B*b/8 is whole, so each block's codes start on a byte), zero padding.
 * When gap_j == 0 (max == min, or 1/gap overflows: a range below 2^-128 L)
 * the pair is (min_j, +0), the block's codes are 0 and it decodes to min_j.
 *
 * Range limit: an input with |g| >= 2^126 (or NaN/Inf) is reported as
 * non-finite, so that max - min, gap * L and min + q * gap never overflow;
 * decoders check every |min_j| < 2^126, gap_j == +0 (codes 0) or
 * 0 < gap_j with gap_j * L <= 2^127 (1 + 2^-20), and the zero padding.
 */
#include "hp_comp.h"
#include "hp_ops.h"
#include <float.h>
#include <math.h>
#include <string.h>

#define TG_LIMIT_BITS 0x7e800000u /* 2^126 */

static int bits_ok(uint32_t b)
{
    return b == 1 || b == 2 || b == 4 || b == 8;
}

static uint32_t bits_of(const hipress_comp_params_t *p)
{
    return p ? p->terngrad_bits : 2u;
}

static uint32_t block_of(const hipress_comp_params_t *p)
{
    /* 0: parameters from a caller built before the field existed */
    return p != NULL && p->terngrad_block != 0 ? p->terngrad_block : 4096u;
}

static int block_ok(uint32_t B)
{
    return B >= 32 && (B & (B - 1)) == 0;
}

static size_t payload_bytes(size_t n, uint32_t b, uint32_t B)
{
    return 8 * ((n + B - 1) / B) + (n * b + 7) / 8;
}

static size_t tg_max_payload(size_t n, const hipress_comp_params_t *p)
{
    uint32_t b = bits_of(p), B = block_of(p);
    return payload_bytes(n, bits_ok(b) ? b : 8, block_ok(B) ? B : 32);
}

static size_t tg_grain(const hipress_comp_params_t *p)
{
    uint32_t B = block_of(p);
    return block_ok(B) ? B : 1;
}

static int tg_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    const hp_ops_t *ops = hp_ops_get(a->params ? a->params->isa : HP_ISA_AUTO);
    const uint32_t b = bits_of(a->params), B = block_of(a->params);
    const size_t n = a->n, nb = (n + B - 1) / B;
    uint8_t *out = (uint8_t *)a->out, *packed;
    float levels, pair[2];
    uint32_t absmax = 0;
    uint64_t key;
    float u[HP_OPS_CHUNK];
    uint8_t codes[HP_OPS_CHUNK];

    if (!bits_ok(b) || !block_ok(B))
        return HIPRESS_COMP_EINVAL;
    if (a->out_cap < payload_bytes(n, b, B))
        return HIPRESS_COMP_ENOSPC;
    levels = (float)((1u << b) - 1u);
    packed = out + 8 * nb;

    /* pass A: each block's min and max (chunk results combined in chunk
     * order), written as the block's pair; nothing else until all is finite */
    for (size_t j = 0; j < nb; j++) {
        const size_t s = j * B, m = HP_MIN((size_t)B, n - s);
        float mn = INFINITY, mx = -INFINITY;
        for (size_t c = 0; c < m; c += HP_OPS_CHUNK) {
            float cmn, cmx;
            uint32_t cam;
            ops->minmax(a->in + s + c, HP_MIN((size_t)HP_OPS_CHUNK, m - c), &cmn, &cmx, &cam);
            mn = cmn < mn ? cmn : mn;
            mx = cmx > mx ? cmx : mx;
            absmax = cam > absmax ? cam : absmax;
        }
        pair[0] = mn;
        pair[1] = (mx - mn) / levels;
        memcpy(out + 8 * j, pair, 8);
    }
    if (absmax >= TG_LIMIT_BITS) {
        *len_p = 8;
        *nonfinite_p = 1;
        return HIPRESS_COMP_OK;
    }
    *nonfinite_p = 0;

    /* pass B: per block, stochastic rounding and packing, chunk by chunk */
    key = hp_rng_key(a->rng_key);
    for (size_t j = 0; j < nb; j++) {
        const size_t s = j * B, m = HP_MIN((size_t)B, n - s);
        float inv;
        memcpy(pair, out + 8 * j, 8);
        inv = 1.0f / pair[1];
        if (!(inv <= FLT_MAX)) {
            /* gap 0, or below 2^-128: every value is min to < 1e-36 */
            pair[1] = 0.0f;
            memcpy(out + 8 * j, pair, 8);
            memset(packed + s * b / 8, 0, (m * b + 7) / 8);
            continue;
        }
        for (size_t c = 0; c < m; c += HP_OPS_CHUNK) {
            size_t k = HP_MIN((size_t)HP_OPS_CHUNK, m - c);
            ops->rng_unit(key, a->rng_offset + s + c, k, u);
            ops->quant_stoch(a->in + s + c, u, k, pair[0], inv, levels, codes);
            ops->pack(codes, k, b, packed + (s + c) * b / 8);
        }
    }
    *len_p = payload_bytes(n, b, B);
    return HIPRESS_COMP_OK;
}

static int tg_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                     const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t b = bits_of(p), B = block_of(p);
    const size_t nb = (n + B - 1) / B;
    const uint8_t *packed = (const uint8_t *)payload + 8 * nb;
    const int mode = accumulate ? HP_OUT_ADD : HP_OUT_SET;
    const double top = 0x1p127 * (1.0 + 0x1p-20);
    uint8_t codes[HP_OPS_CHUNK], cmn, cmx;
    float pair[2];

    if (!bits_ok(b) || !block_ok(B) || len != payload_bytes(n, b, B))
        return HIPRESS_COMP_EINVAL;
    for (size_t j = 0; j < nb; j++) {
        const size_t s = j * B, m = HP_MIN((size_t)B, n - s);
        memcpy(pair, (const uint8_t *)payload + 8 * j, 8);
        if (!((hp_f2u(pair[0]) & 0x7fffffffu) < TG_LIMIT_BITS))
            return HIPRESS_COMP_EINVAL;
        if (hp_f2u(pair[1]) != 0 &&
            !(pair[1] > 0.0f && (double)pair[1] * (double)((1u << b) - 1u) <= top))
            return HIPRESS_COMP_EINVAL;
        for (size_t c = 0; c < m; c += HP_OPS_CHUNK) {
            size_t k = HP_MIN((size_t)HP_OPS_CHUNK, m - c);
            if (ops->unpack(packed + (s + c) * b / 8, k, b, codes, &cmn, &cmx) != 0)
                return HIPRESS_COMP_EINVAL;   /* nonzero padding */
            if (hp_f2u(pair[1]) == 0 && cmx != 0)
                return HIPRESS_COMP_EINVAL;   /* a min-only block has codes 0 */
            ops->dequant(codes, k, pair[0], 0.0f, pair[1], out + s + c, mode);
        }
    }
    return HIPRESS_COMP_OK;
}

const hipress_compressor_v1_t hp_comp_terngrad = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "terngrad",
    .flags = 0,
    .max_payload = tg_max_payload,
    .encode = tg_encode,
    .decode = tg_decode,
};

/* The device format (cuda/codec/hp_codec_quant.c): blocks of B, b bits a code. */
static hp_status_t tg_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    const uint32_t b = bits_of(p), B = block_of(p);
    (void)k;
    if (!bits_ok(b) || !block_ok(B))
        return HP_ERR_INVALID;
    f->id = HP_GPU_FMT_TERNGRAD;
    f->block = B;
    f->iarg[0] = b;
    f->payload = payload_bytes(n, b, B);
    return HP_OK;
}

/* The sum codec: the q codec of as many bits (at least 2), rounding to
 * nearest with the owner's residual -- the bytes of terngrad's own owner
 * stage, without its variance. */
static int tg_sum_codec(const hipress_comp_params_t *p)
{
    return p->terngrad_bits >= 8 ? HP_BUILTIN_q8 : p->terngrad_bits >= 4 ? HP_BUILTIN_q4 : HP_BUILTIN_q2;
}

const hp_comp_ext_t hp_compx_terngrad = {
    .qclass = HP_QCLASS_QUANT,
    .max_stages = 2,   /* unbiased, no residual: allgather and ps (with its q sum codec); ring and tree re-quantise at every hop and lose 9 to 11 points on MNIST-1D (doc/accuracy.md) */
    .grain = tg_grain,
    .gpu_fmt = tg_gpu_fmt,
    .sum_codec = tg_sum_codec,
    .sgd_only = 1,   /* unbiased, but its 2-bit code's variance inflates Adam's second moment (doc/accuracy.md, 'Adam') */
};
