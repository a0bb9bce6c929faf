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
 * Passes: with a residual, a read-only NaN/Inf check of the input first
 * (the residual is then written block by block, and a NaN anywhere must
 * leave all of it untouched).  Then per block: v (in place of the
 * residual), sign sums and bits; and, with the block still in cache,
 * residual = v - decode.  Where in + residual
 * overflows (finite input, huge residual) that element's v is in alone: its
 * error feedback is dropped.  s+ and s- have the sign of the values they
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

/* set bits in p[0..nbytes) (SWAR: no popcnt instruction assumed) */
static size_t popcount_bytes(const uint8_t *p, size_t nbytes)
{
    size_t c = 0, i = 0;
    for (; i + 8 <= nbytes; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        w = w - ((w >> 1) & 0x5555555555555555ULL);
        w = (w & 0x3333333333333333ULL) + ((w >> 2) & 0x3333333333333333ULL);
        w = (w + (w >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
        c += (size_t)((w * 0x0101010101010101ULL) >> 56);
    }
    for (; i < nbytes; i++)
        for (unsigned b = p[i]; b; b &= b - 1)
            c++;
    return c;
}

/* Sign sums, bits and set count of one block of v = x + r (r may be NULL;
 * vout receives v when not NULL), chunk by chunk. */
static void block_stats(const hp_ops_t *ops, const float *x, const float *r, size_t len,
                        float *vout, uint8_t *bits, double *pos_p, double *neg_p, size_t *npos_p)
{
    double pos = 0.0, neg = 0.0;
    size_t npos = 0;
    for (size_t c = 0; c < len; c += HP_OPS_CHUNK) {
        size_t m = HP_MIN((size_t)HP_OPS_CHUNK, len - c);
        double p, q;
        npos += ops->sign_sum(x + c, r ? r + c : NULL, m, vout ? vout + c : NULL, &p, &q, bits + c / 8);
        pos += p; /* chunk results in chunk order: part of the definition */
        neg += q;
    }
    *pos_p = pos;
    *neg_p = neg;
    *npos_p = npos;
}

static void put_scales(uint8_t *at, double pos, double neg, size_t npos, size_t len, float sc[2])
{
    sc[0] = npos ? (float)(pos / (double)npos) : 0.0f;
    sc[1] = len - npos ? (float)(neg / (double)(len - npos)) : 0.0f;
    memcpy(at, sc, 8);
}

static int onebit_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    const hp_ops_t *ops = hp_ops_get(a->params ? a->params->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(a->params);
    const size_t n = a->n;
    size_t nb, plen;
    uint8_t *scales = (uint8_t *)a->out, *bits;

    if (!block_ok(B))
        return HIPRESS_COMP_EINVAL;
    nb = (n + B - 1) / B;
    plen = payload_bytes(n, B);
    if (a->out_cap < plen)
        return HIPRESS_COMP_ENOSPC;
    *len_p = plen;
    *nonfinite_p = 0;
    bits = scales + 8 * nb;
    /* bytes of the last word past ceil(n/8): sign_sum writes the rest */
    memset(bits + (n + 7) / 8, 0, 4 * ((n + 31) / 32) - (n + 7) / 8);

    if (a->residual == NULL) {
        for (size_t blk = 0; blk < nb; blk++) {
            size_t start = blk * B, len = HP_MIN((size_t)B, n - start), npos;
            double pos, neg;
            float sc[2];
            block_stats(ops, a->in + start, NULL, len, NULL, bits + start / 8, &pos, &neg, &npos);
            if (!isfinite(pos) || !isfinite(neg)) {
                *nonfinite_p = 1;
                return HIPRESS_COMP_OK;
            }
            put_scales(scales + 8 * blk, pos, neg, npos, len, sc);
        }
        return HIPRESS_COMP_OK;
    }

    /* The residual is written block by block, so the whole input must be
     * known finite first: one read-only pass.  Then each block: v = in + r
     * in place of r, sums and bits, r = v - decode while the block is in
     * cache. */
    if (ops->nonfinite(a->in, n)) {
        *nonfinite_p = 1;
        return HIPRESS_COMP_OK;
    }
    for (size_t blk = 0; blk < nb; blk++) {
        size_t start = blk * B, len = HP_MIN((size_t)B, n - start), npos;
        const float *in = a->in + start;
        float *v = a->residual + start;
        uint8_t *bb = bits + start / 8;
        double pos, neg;
        float sc[2];

        block_stats(ops, in, v, len, v, bb, &pos, &neg, &npos); /* v = in + r, in place */
        if (!isfinite(pos) || !isfinite(neg)) {
            /* finite input, but in + residual overflowed: v = in there, that
             * element's error feedback is dropped */
            for (size_t i = 0; i < len; i++)
                v[i] = hp_nonfinite(v[i]) ? in[i] : v[i];
            block_stats(ops, v, NULL, len, NULL, bb, &pos, &neg, &npos);
        }
        put_scales(scales + 8 * blk, pos, neg, npos, len, sc);
        for (size_t c = 0; c < len; c += HP_OPS_CHUNK)
            ops->select1(bb + c / 8, HP_MIN((size_t)HP_OPS_CHUNK, len - c), sc[0], sc[1], v + c,
                         HP_OUT_SUB);
    }
    return HIPRESS_COMP_OK;
}

/* Everything a decoder checks of a payload, before any output is written. */
static int onebit_check(const void *payload, size_t len, size_t n, uint32_t B)
{
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
    return HIPRESS_COMP_OK;
}

/* Block blk of a checked payload into out (the block's first element). */
static void onebit_block_out(const hp_ops_t *ops, const void *payload, size_t n, uint32_t B, size_t blk,
                             float *out, int mode)
{
    const uint8_t *scales = (const uint8_t *)payload;
    size_t nb = (n + B - 1) / B, start = blk * B, bl = HP_MIN((size_t)B, n - start);
    float sc[2];
    memcpy(sc, scales + 8 * blk, 8);
    ops->select1(scales + 8 * nb + start / 8, bl, sc[0], sc[1], out, mode);
}

static int onebit_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                         const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(p);
    int rc = onebit_check(payload, len, n, B);
    if (rc != HIPRESS_COMP_OK)
        return rc;
    for (size_t blk = 0; blk * B < n; blk++)
        onebit_block_out(ops, payload, n, B, blk, out + blk * B, accumulate ? HP_OUT_ADD : HP_OUT_SET);
    return HIPRESS_COMP_OK;
}

/* Several messages of one range added in order, block by block: each block
 * of out stays in cache while every message adds to it (the same bits as
 * decoding them one after the other). */
static int onebit_decode_many(const void *const *payloads, const size_t *lens, int count, size_t n,
                              float *out, int accumulate, const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(p);
    for (int j = 0; j < count; j++) {
        int rc = onebit_check(payloads[j], lens[j], n, B);
        if (rc != HIPRESS_COMP_OK)
            return rc;
    }
    for (size_t blk = 0; blk * B < n; blk++)
        for (int j = 0; j < count; j++)
            onebit_block_out(ops, payloads[j], n, B, blk, out + blk * B,
                             (accumulate || j > 0) ? HP_OUT_ADD : HP_OUT_SET);
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

static size_t onebit_grain(const hipress_comp_params_t *p)
{
    uint32_t b = block_of(p);
    return block_ok(b) ? b : 1;
}

/* The device format (cuda/codec/hp_codec_quant.c): blocks of B. */
static hp_status_t onebit_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    const uint32_t b = block_of(p);
    (void)k;
    if (!block_ok(b))
        return HP_ERR_INVALID;
    f->id = HP_GPU_FMT_ONEBIT;
    f->block = b;
    f->payload = payload_bytes(n, b);
    return HP_OK;
}

const hp_comp_ext_t hp_compx_onebit = {
    .decode_many = onebit_decode_many,
    .qclass = HP_QCLASS_QUANT,
    .max_stages = 1,   /* ps, ring, tree 1.3 to 2.1 points below the textbook form (10 seeds, doc/accuracy.md) */
    .grain = onebit_grain,
    .gpu_fmt = onebit_gpu_fmt,
    .sum_codec = hp_sum_codec_q4,   /* sign bits of a many-valued sum lose its magnitudes (doc/accuracy.md, 'Sum codecs') */
    .unbiased = hp_unbiased_dense_q,   /* staging buffers: a 1-bit unbiased encode errs by about 4x the value: a dense q codec, stochastic (doc/compressors.md, 'Staging buffers') */
    .sgd_only = 1,
};
