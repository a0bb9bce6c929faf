/*
 * `onebit` (error feedback): the sign of each element and two scales per
 * block of B = HIPRESS_ONEBIT_BLOCK elements (a power of two >= 32).
 *
 *   v = in + residual;  bit_i = v_i >= 0
 *   s+ = mean of v over the set bits of the block, s- = over the clear bits
 *        (sums in double in the hp_ops lane order, chunk by chunk; a class
 *        with no element has scale +0)
 *   decode: bit ? s+ : s-;  new residual = v - decode
 *
 * Payload (ceil(n/B) = nb blocks): nb pairs of little-endian floats (s+, s-),
 * then ceil(n/32) little-endian 32-bit words of bits, bit i of the partition
 * at bit i%32 of word i/32; the bits after element n-1 are zero.
 *
 * Passes: (A) per chunk v, sign sums and bits, which also find NaN/Inf;
 * (B) only when there is a residual and v was finite: residual = v - decode.
 * B runs after A has seen the whole partition, so a NaN anywhere leaves the
 * whole residual untouched.  s+ and s- have the sign of the values they
 * average, so v - decode never overflows.
 */
#include "hp_comp.h"
#include "hp_ops.h"
#include <math.h>
#include <string.h>

static uint32_t block_of(const hipress_comp_params_t *p)
{
    return p ? p->onebit_block : 4096u;
}

static int block_ok(uint32_t b)
{
    return b >= 32 && (b & (b - 1)) == 0;
}

static size_t payload_bytes(size_t n, uint32_t b)
{
    return 8 * ((n + b - 1) / b) + 4 * ((n + 31) / 32);
}

static size_t onebit_max_payload(size_t n, const hipress_comp_params_t *p)
{
    uint32_t b = block_of(p);
    return payload_bytes(n, block_ok(b) ? b : 32);
}

static size_t popcount_bytes(const uint8_t *p, size_t nbytes)
{
    size_t c = 0, i = 0;
    for (; i + 8 <= nbytes; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        c += (size_t)__builtin_popcountll(w);
    }
    for (; i < nbytes; i++)
        c += (size_t)__builtin_popcount(p[i]);
    return c;
}

static int onebit_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    const hp_ops_t *ops = hp_ops_get(a->params ? a->params->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(a->params);
    const size_t n = a->n;
    size_t nb, plen;
    uint8_t *scales = (uint8_t *)a->out, *bits;
    float v[HP_OPS_CHUNK];
    int bad = 0;

    if (!block_ok(B))
        return HIPRESS_COMP_EINVAL;
    nb = (n + B - 1) / B;
    plen = payload_bytes(n, B);
    if (a->out_cap < plen)
        return HIPRESS_COMP_ENOSPC;
    bits = scales + 8 * nb;
    /* bytes of the last word past ceil(n/8): pack_sign writes the rest */
    memset(bits + (n + 7) / 8, 0, 4 * ((n + 31) / 32) - (n + 7) / 8);

    for (size_t blk = 0; blk < nb; blk++) {
        size_t start = blk * B, len = HP_MIN((size_t)B, n - start), npos = 0;
        double pos = 0.0, neg = 0.0;
        float sc[2];
        for (size_t c = 0; c < len; c += HP_OPS_CHUNK) {
            size_t m = HP_MIN((size_t)HP_OPS_CHUNK, len - c), at = start + c;
            const float *x = a->in + at;
            double p, q;
            if (a->residual) {
                ops->add(x, a->residual + at, v, m);
                x = v;
            }
            ops->sign_sum(x, m, &p, &q);
            pos += p;
            neg += q;
            ops->pack_sign(x, m, bits + at / 8);
            npos += popcount_bytes(bits + at / 8, (m + 7) / 8);
        }
        bad |= !isfinite(pos) || !isfinite(neg);
        sc[0] = npos ? (float)(pos / (double)npos) : 0.0f;
        sc[1] = len - npos ? (float)(neg / (double)(len - npos)) : 0.0f;
        memcpy(scales + 8 * blk, sc, 8);
    }
    *len_p = plen;
    *nonfinite_p = bad;
    if (bad || a->residual == NULL)
        return HIPRESS_COMP_OK;

    for (size_t blk = 0; blk < nb; blk++) {
        size_t start = blk * B, len = HP_MIN((size_t)B, n - start);
        float sc[2];
        memcpy(sc, scales + 8 * blk, 8);
        for (size_t c = 0; c < len; c += HP_OPS_CHUNK) {
            size_t m = HP_MIN((size_t)HP_OPS_CHUNK, len - c), at = start + c;
            float *r = a->residual + at;
            ops->add(a->in + at, r, r, m); /* r = v, the same bits as in pass A */
            ops->select1(bits + at / 8, m, sc[0], sc[1], r, HP_OUT_SUB);
        }
    }
    return HIPRESS_COMP_OK;
}

static int onebit_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                         const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(p);
    const uint8_t *scales = (const uint8_t *)payload, *bits;
    size_t nb, nbits_bytes;

    if (!block_ok(B) || len != payload_bytes(n, B))
        return HIPRESS_COMP_EINVAL;
    nb = (n + B - 1) / B;
    bits = scales + 8 * nb;
    nbits_bytes = 4 * ((n + 31) / 32);
    /* padding bits after element n-1 must be zero */
    if ((n & 7) && (bits[n / 8] >> (n & 7)) != 0)
        return HIPRESS_COMP_EINVAL;
    for (size_t i = (n + 7) / 8; i < nbits_bytes; i++)
        if (bits[i] != 0)
            return HIPRESS_COMP_EINVAL;
    /* scales: finite, with the sign of their class, +0 for an empty class */
    for (size_t blk = 0; blk < nb; blk++) {
        size_t start = blk * B, bl = HP_MIN((size_t)B, n - start);
        size_t npos = popcount_bytes(bits + start / 8, (bl + 7) / 8);
        float sc[2];
        memcpy(sc, scales + 8 * blk, 8);
        if (!isfinite(sc[0]) || !isfinite(sc[1]) || !(sc[0] >= 0.0f) || !(sc[1] <= 0.0f) ||
            (npos == 0 && hp_f2u(sc[0]) != 0) || (npos == bl && hp_f2u(sc[1]) != 0))
            return HIPRESS_COMP_EINVAL;
    }
    for (size_t blk = 0; blk < nb; blk++) {
        size_t start = blk * B, bl = HP_MIN((size_t)B, n - start);
        float sc[2];
        memcpy(sc, scales + 8 * blk, 8);
        ops->select1(bits + start / 8, bl, sc[0], sc[1], out + start,
                     accumulate ? HP_OUT_ADD : HP_OUT_SET);
    }
    return HIPRESS_COMP_OK;
}

const hipress_compressor_v1_t hp_comp_onebit = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "onebit",
    .flags = HIPRESS_COMP_EF,
    .max_payload = onebit_max_payload,
    .encode = onebit_encode,
    .decode = onebit_decode,
};
