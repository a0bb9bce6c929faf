/*
 * `tbq` (threshold binary quantisation, error feedback): three levels -tau,
 * 0, +tau with 2-bit codes, one tau per block of B = HIPRESS_TBQ_BLOCK
 * elements (a power of two >= 32).
 *
 *   v = in + residual
 *   tau_b = HIPRESS_TBQ_THRESHOLD when > 0, else HIPRESS_TBQ_SCALE * mean |v|
 *           over block b (summed in the hp_ops order, chunk by chunk, a chunk
 *           being min(B, HP_OPS_CHUNK) elements, divided in double, rounded
 *           to float, times the scale in float, at most FLT_MAX)
 *   code = 2 if v >= tau_b, 0 if v <= -tau_b, else 1;  decode (code-1) * tau_b
 *   tau_b == 0 (block all zero, or a mean that underflows): every code is 1
 *   new residual = v - decode
 *
 * Blocks start at element 0 of the message; the algorithms start every
 * message on a multiple of B (the compressor's grain), so blocks sit at the
 * same absolute elements whatever the partitioning.
 *
 * Payload (nb = ceil(n/B) blocks): nb little-endian floats tau_b, then
 * ceil(n/4) bytes of codes, element i at bits 2*(i%4) of byte i/4; the bits
 * after element n-1 are zero.  A decoder rejects a tau that is not finite
 * or negative, code 3, nonzero padding, and tau_b == 0 with any code other
 * than 1 in its block.
 *
 * Passes: (A) when a tau needs the mean or a residual must be protected:
 * mean |v| per block and NaN/Inf, over the whole message before anything is
 * written; (B) per chunk: codes, and the residual.  Where in + residual
 * overflows (finite input, huge residual) that element's v is in alone: its
 * error feedback is dropped.
 */
#include "hp_comp.h"
#include "hp_ops.h"
#include <float.h>
#include <math.h>
#include <string.h>

static uint32_t block_of(const hipress_comp_params_t *p)
{
    /* 0: parameters from a caller built before the field existed */
    return p != NULL && p->tbq_block != 0 ? p->tbq_block : 4096u;
}

static int block_ok(uint32_t b)
{
    return b >= 32 && (b & (b - 1)) == 0;
}

static size_t payload_bytes(size_t n, uint32_t b)
{
    return 4 * ((n + b - 1) / b) + (n + 3) / 4;
}

static size_t tbq_max_payload(size_t n, const hipress_comp_params_t *p)
{
    uint32_t b = block_of(p);
    return payload_bytes(n, block_ok(b) ? b : 32);
}

static size_t tbq_grain(const hipress_comp_params_t *p)
{
    uint32_t b = block_of(p);
    return block_ok(b) ? b : 1;
}

/* v = in + r, except where that overflows: there v = in (the element's
 * error feedback is dropped).  Scalar and shared by every ISA path. */
static void v_reset(const float *in, const float *r, float *v, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        float t = in[i] + r[i];
        v[i] = hp_nonfinite(t) ? in[i] : t;
    }
}

static int tbq_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    const hp_ops_t *ops = hp_ops_get(a->params ? a->params->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(a->params);
    const size_t n = a->n;
    const size_t step = HP_MIN((size_t)B, (size_t)HP_OPS_CHUNK);
    float thr = a->params ? a->params->tbq_threshold : 0.0f;
    float scale = a->params ? a->params->tbq_scale : 4.0f;   /* HIPRESS_TBQ_SCALE's default */
    uint8_t *out = (uint8_t *)a->out, *packed;
    float v[HP_OPS_CHUNK];
    uint8_t codes[HP_OPS_CHUNK];
    size_t nb, plen;
    int checked = 0, reset = 0;

    if (!block_ok(B) || !(thr >= 0.0f) || !isfinite(thr) ||
        (thr == 0.0f && !(scale > 0.0f && isfinite(scale))))
        return HIPRESS_COMP_EINVAL;
    nb = (n + B - 1) / B;
    plen = payload_bytes(n, B);
    if (a->out_cap < plen)
        return HIPRESS_COMP_ENOSPC;
    *len_p = plen;
    *nonfinite_p = 0;
    packed = out + 4 * nb;

    /* pass A: mean |v| per block when tau needs it, and the NaN/Inf check
     * before any residual is written (a sum of |v| in double is finite
     * exactly when every v is) */
    if (thr == 0.0f || a->residual != NULL) {
        double asum = 0.0;
        for (size_t c = 0; c < n; c += step) {
            size_t m = HP_MIN(step, n - c);
            const float *r = a->residual ? a->residual + c : NULL;
            double s = ops->abs_sum(a->in + c, r, m, NULL);
            if (!isfinite(s)) {
                if (r == NULL || ops->nonfinite(a->in + c, m)) {
                    *nonfinite_p = 1; /* NaN/Inf in the input: nothing written */
                    return HIPRESS_COMP_OK;
                }
                /* finite input, in + residual overflowed */
                reset = 1;
                v_reset(a->in + c, r, v, m);
                s = ops->abs_sum(v, NULL, m, NULL);
            }
            asum += s; /* chunk results in chunk order: part of the definition */
            if (c + m == n || (c + m) % B == 0) {
                /* end of block c / B */
                size_t blen = c + m - (c / B) * B;
                float tau = thr;
                if (thr == 0.0f) {
                    tau = (float)(asum / (double)blen) * scale;
                    if (!(tau <= FLT_MAX))
                        tau = FLT_MAX;
                }
                memcpy(out + 4 * (c / B), &tau, 4);
                asum = 0.0;
            }
        }
        checked = 1;
    } else {
        for (size_t b = 0; b < nb; b++)
            memcpy(out + 4 * b, &thr, 4);
    }

    /* pass B: codes and, with the chunk in cache, residual = v - decode
     * (forward: the hardware prefetchers follow it) */
    for (size_t c = 0; c < n; c += step) {
        size_t m = HP_MIN(step, n - c);
        const float *x = a->in + c, *r = a->residual ? a->residual + c : NULL;
        float *res = a->residual ? a->residual + c : NULL;
        float tau;
        memcpy(&tau, out + 4 * (c / B), 4);
        if (res && reset) {
            /* the rare overflow path: v = in where in + r overflows */
            v_reset(x, res, res, m);
            x = res;
            r = NULL;
        } else if (!res && !checked && ops->nonfinite(x, m)) {
            *nonfinite_p = 1;
            return HIPRESS_COMP_OK;
        }
        /* codes of v = x + r (the same bits as pass A) and, in the same
         * pass, the new residual v - decode */
        if (tau > 0.0f) {
            ops->quant_ternary(x, r, m, tau, codes, res);
        } else {
            if (r)
                ops->add(x, r, res, m); /* v - 0 */
            memset(codes, 1, m);
        }
        ops->pack(codes, m, 2, packed + c / 4);
    }
    return HIPRESS_COMP_OK;
}

static int tbq_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                      const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(p);
    const size_t step = HP_MIN((size_t)B, (size_t)HP_OPS_CHUNK);
    const uint8_t *taus = (const uint8_t *)payload, *packed;
    uint8_t codes[HP_OPS_CHUNK], mn, mx;
    size_t nb;

    if (!block_ok(B) || len != payload_bytes(n, B))
        return HIPRESS_COMP_EINVAL;
    nb = (n + B - 1) / B;
    packed = taus + 4 * nb;
    for (size_t b = 0; b < nb; b++) {
        float tau;
        memcpy(&tau, taus + 4 * b, 4);
        if (!isfinite(tau) || (hp_f2u(tau) >> 31) != 0)
            return HIPRESS_COMP_EINVAL;
    }
    /* validated chunk by chunk as it is written (a rejected message leaves
     * out unspecified, as hp_msg_decode documents) */
    for (size_t c = 0; c < n; c += step) {
        size_t m = HP_MIN(step, n - c);
        float tau;
        memcpy(&tau, taus + 4 * (c / B), 4);
        if (ops->unpack(packed + c / 4, m, 2, codes, &mn, &mx) != 0 || mx > 2 ||
            (tau == 0.0f && (mn != 1 || mx != 1)))
            return HIPRESS_COMP_EINVAL;
        ops->dequant(codes, m, 0.0f, -1.0f, tau, out + c, accumulate ? HP_OUT_ADD : HP_OUT_SET);
    }
    return HIPRESS_COMP_OK;
}

/* Several messages of one range added in order, chunk by chunk (each
 * chunk of out stays in cache while every message adds to it): the bits of
 * decoding them one after the other. */
static int tbq_decode_many(const void *const *payloads, const size_t *lens, int count, size_t n,
                           float *out, int accumulate, const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(p);
    const size_t step = HP_MIN((size_t)B, (size_t)HP_OPS_CHUNK), nb = (n + B - 1) / B;
    uint8_t codes[HP_OPS_CHUNK], mn, mx;

    if (!block_ok(B))
        return HIPRESS_COMP_EINVAL;
    for (int j = 0; j < count; j++) {
        if (lens[j] != payload_bytes(n, B))
            return HIPRESS_COMP_EINVAL;
        for (size_t b = 0; b < nb; b++) {
            float tau;
            memcpy(&tau, (const uint8_t *)payloads[j] + 4 * b, 4);
            if (!isfinite(tau) || (hp_f2u(tau) >> 31) != 0)
                return HIPRESS_COMP_EINVAL;
        }
    }
    for (size_t c = 0; c < n; c += step) {
        size_t m = HP_MIN(step, n - c);
        for (int j = 0; j < count; j++) {
            const uint8_t *taus = (const uint8_t *)payloads[j];
            float tau;
            memcpy(&tau, taus + 4 * (c / B), 4);
            if (ops->unpack(taus + 4 * nb + c / 4, m, 2, codes, &mn, &mx) != 0 || mx > 2 ||
                (tau == 0.0f && (mn != 1 || mx != 1)))
                return HIPRESS_COMP_EINVAL;
            ops->dequant(codes, m, 0.0f, -1.0f, tau, out + c, (accumulate || j > 0) ? HP_OUT_ADD : HP_OUT_SET);
        }
    }
    return HIPRESS_COMP_OK;
}

const hipress_compressor_v1_t hp_comp_tbq = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "tbq",
    .flags = HIPRESS_COMP_EF,
    .max_payload = tbq_max_payload,
    .encode = tbq_encode,
    .decode = tbq_decode,
};

/* The device format (cuda/codec/hp_codec_quant.c): blocks of B, with the
 * threshold and the scale tbq_encode takes. */
static hp_status_t tbq_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    const uint32_t B = block_of(p);
    const float thr = p->tbq_threshold, scale = p->tbq_scale;
    (void)k;
    if (!block_ok(B) || !(thr >= 0.0f) || !isfinite(thr) || (thr == 0.0f && !(scale > 0.0f && isfinite(scale))))
        return HP_ERR_INVALID;
    f->id = HP_GPU_FMT_TBQ;
    f->block = B;
    f->farg[0] = thr;
    f->farg[1] = scale;
    f->payload = payload_bytes(n, B);
    return HP_OK;
}

const hp_comp_ext_t hp_compx_tbq = {
    .decode_many = tbq_decode_many,
    .qclass = HP_QCLASS_QUANT,
    .max_stages = 1,   /* ps, ring, tree 2.0 to 3.2 points below the textbook form (10 seeds, doc/accuracy.md) */
    .grain = tbq_grain,
    .gpu_fmt = tbq_gpu_fmt,
    .sum_codec = hp_sum_codec_q4,   /* as onebit's (doc/accuracy.md, 'Sum codecs') */
    .unbiased = hp_unbiased_dense_q,   /* staging buffers: as onebit's (doc/compressors.md, 'Staging buffers') */
    .sgd_only = 1,
};
