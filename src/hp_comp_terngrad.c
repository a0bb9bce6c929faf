/*
 * `terngrad`: b-bit (HIPRESS_TERNGRAD_BITS: 1, 2, 4, 8) min-max uniform
 * quantisation with unbiased stochastic rounding; no residual.
 *
 *   L = 2^b - 1;  gap = (max - min) / L   (float)
 *   q_i = clamp(floor((g_i - min) * (1/gap) + u_i), 0, L)
 *         (1/gap once in float: a multiply instead of a divide per element)
 *   u_i = hp_rng_unit(hp_rng_key(rng_key), rng_offset + i)
 *   decode min + q * gap
 *
 * Payload: min and gap as little-endian floats, then ceil(n*b/8) bytes of
 * codes (element i at bit (i*b)%8 of byte i*b/8, zero padding).  When
 * gap == 0 (max == min, or 1/gap overflows: a range below 2^-128 L) the
 * payload is the 8 bytes (min, +0) alone and decodes to min everywhere.
 *
 * Range limit: an input with |g| >= 2^126 (or NaN/Inf) is reported as
 * non-finite, so that max - min, gap * L and min + q * gap never overflow;
 * decoders check |min| < 2^126, 0 < gap and gap * L <= 2^127 (1 + 2^-20).
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

static size_t tg_max_payload(size_t n, const hipress_comp_params_t *p)
{
    uint32_t b = bits_of(p);
    return 8 + (n * (bits_ok(b) ? b : 8) + 7) / 8;
}

static int tg_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    const hp_ops_t *ops = hp_ops_get(a->params ? a->params->isa : HP_ISA_AUTO);
    const uint32_t b = bits_of(a->params);
    const size_t n = a->n;
    uint8_t *out = (uint8_t *)a->out;
    float mn = INFINITY, mx = -INFINITY, gap, inv, levels, hdr[2];
    uint32_t absmax = 0;
    uint64_t key;
    float u[HP_OPS_CHUNK];
    uint8_t codes[HP_OPS_CHUNK];

    if (!bits_ok(b))
        return HIPRESS_COMP_EINVAL;
    if (a->out_cap < 8 + (n * b + 7) / 8)
        return HIPRESS_COMP_ENOSPC;
    levels = (float)((1u << b) - 1u);

    /* pass A: min, max (chunk results combined in chunk order) and range */
    for (size_t c = 0; c < n; c += HP_OPS_CHUNK) {
        size_t m = HP_MIN((size_t)HP_OPS_CHUNK, n - c);
        float cmn, cmx;
        uint32_t cam;
        ops->minmax(a->in + c, m, &cmn, &cmx, &cam);
        mn = cmn < mn ? cmn : mn;
        mx = cmx > mx ? cmx : mx;
        absmax = cam > absmax ? cam : absmax;
    }
    if (absmax >= TG_LIMIT_BITS) {
        *len_p = 8;
        *nonfinite_p = 1;
        return HIPRESS_COMP_OK;
    }
    *nonfinite_p = 0;
    if (n == 0)
        mn = mx = 0.0f;
    gap = (mx - mn) / levels;
    inv = 1.0f / gap;
    if (!(inv <= FLT_MAX)) /* gap 0, or below 2^-128: every value is min to < 1e-36 */
        gap = 0.0f;
    hdr[0] = mn;
    hdr[1] = gap == 0.0f ? 0.0f : gap; /* +0 in the min-only form */
    memcpy(out, hdr, 8);
    if (gap == 0.0f) {
        *len_p = 8;
        return HIPRESS_COMP_OK;
    }

    /* pass B: stochastic rounding and packing, chunk by chunk */
    key = hp_rng_key(a->rng_key);
    for (size_t c = 0; c < n; c += HP_OPS_CHUNK) {
        size_t m = HP_MIN((size_t)HP_OPS_CHUNK, n - c);
        ops->rng_unit(key, a->rng_offset + c, m, u);
        ops->quant_stoch(a->in + c, u, m, mn, inv, levels, codes);
        ops->pack(codes, m, b, out + 8 + c * b / 8);
    }
    *len_p = 8 + (n * b + 7) / 8;
    return HIPRESS_COMP_OK;
}

static int tg_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                     const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t b = bits_of(p);
    const uint8_t *packed = (const uint8_t *)payload + 8;
    const int mode = accumulate ? HP_OUT_ADD : HP_OUT_SET;
    uint8_t codes[HP_OPS_CHUNK], cmn, cmx;
    float hdr[2];

    if (!bits_ok(b) || len < 8)
        return HIPRESS_COMP_EINVAL;
    memcpy(hdr, payload, 8);
    if (!((hp_f2u(hdr[0]) & 0x7fffffffu) < TG_LIMIT_BITS))
        return HIPRESS_COMP_EINVAL;
    if (len == 8) {
        /* min only: every element decodes to min */
        if (hp_f2u(hdr[1]) != 0)
            return HIPRESS_COMP_EINVAL;
        for (size_t i = 0; i < n; i++)
            out[i] = accumulate ? out[i] + hdr[0] : hdr[0];
        return HIPRESS_COMP_OK;
    }
    if (len != 8 + (n * b + 7) / 8 || !(hdr[1] > 0.0f) ||
        !((double)hdr[1] * (double)((1u << b) - 1u) <= 0x1p127 * (1.0 + 0x1p-20)))
        return HIPRESS_COMP_EINVAL;
    for (size_t c = 0; c < n; c += HP_OPS_CHUNK) {
        size_t m = HP_MIN((size_t)HP_OPS_CHUNK, n - c);
        if (ops->unpack(packed + c * b / 8, m, b, codes, &cmn, &cmx) != 0)
            return HIPRESS_COMP_EINVAL;
        ops->dequant(codes, m, hdr[0], 0.0f, hdr[1], out + c, mode);
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

const hp_comp_ext_t hp_compx_terngrad = {
    .qclass = HP_QCLASS_QUANT,
    .max_stages = 0,   /* unbiased, no residual: every algorithm within 0.3 points of plain (doc/accuracy.md) */
};
