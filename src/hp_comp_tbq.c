/*
 * `tbq` (threshold binary quantisation, error feedback): three levels -tau,
 * 0, +tau with 2-bit codes.
 *
 *   v = in + residual
 *   tau = HIPRESS_TBQ_THRESHOLD when > 0, else HIPRESS_TBQ_SCALE * mean |v|
 *         over the partition (summed in the hp_ops order, chunk by chunk,
 *         divided in double, rounded to float, times the scale in float, at
 *         most FLT_MAX)
 *   code = 2 if v >= tau, 0 if v <= -tau, else 1;  decode (code - 1) * tau
 *   tau == 0 (v all zero, or a mean that underflows): every code is 1
 *   new residual = v - decode
 *
 * Payload: tau as a little-endian float, then ceil(n/4) bytes of codes,
 * element i at bits 2*(i%4) of byte i/4; the bits after element n-1 are
 * zero.  A decoder rejects tau that is not finite or negative, code 3,
 * nonzero padding, and tau == 0 with any code other than 1.
 *
 * Passes: (A) over the partition when tau needs the mean or a residual must
 * be protected: mean |v| and NaN/Inf; (B) per chunk: codes, and the residual.
 * Where in + residual overflows (finite input, huge residual) that element's
 * v is in alone: its error feedback is dropped.
 */
#include "hp_comp.h"
#include "hp_ops.h"
#include <float.h>
#include <math.h>
#include <string.h>

static size_t tbq_max_payload(size_t n, const hipress_comp_params_t *p)
{
    (void)p;
    return 4 + (n + 3) / 4;
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
    const size_t n = a->n, plen = 4 + (n + 3) / 4;
    float thr = a->params ? a->params->tbq_threshold : 0.0f;
    float scale = a->params ? a->params->tbq_scale : 1.0f;
    uint8_t *out = (uint8_t *)a->out, *packed = out + 4;
    float v[HP_OPS_CHUNK], tau = thr;
    uint8_t codes[HP_OPS_CHUNK];
    int checked = 0, reset = 0;

    if (!(thr >= 0.0f) || !isfinite(thr) || (thr == 0.0f && !(scale > 0.0f && isfinite(scale))))
        return HIPRESS_COMP_EINVAL;
    if (a->out_cap < plen)
        return HIPRESS_COMP_ENOSPC;
    *len_p = plen;
    *nonfinite_p = 0;

    /* pass A: mean |v| when tau needs it, and the NaN/Inf check before any
     * residual is written (a sum of |v| in double is finite exactly when
     * every v is) */
    if (thr == 0.0f || a->residual != NULL) {
        double asum = 0.0;
        for (size_t c = 0; c < n; c += HP_OPS_CHUNK) {
            size_t m = HP_MIN((size_t)HP_OPS_CHUNK, n - c);
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
        }
        if (thr == 0.0f) {
            tau = n ? (float)(asum / (double)n) * scale : 0.0f;
            if (!(tau <= FLT_MAX))
                tau = FLT_MAX;
        }
        checked = 1;
    }

    /* pass B: codes and, with the chunk in cache, residual = v - decode
     * (forward: the hardware prefetchers follow it; going backwards to reuse
     * what pass A left in cache measured slower) */
    memcpy(out, &tau, 4);
    for (size_t c = 0; c < n; c += HP_OPS_CHUNK) {
        size_t m = HP_MIN((size_t)HP_OPS_CHUNK, n - c);
        const float *x = a->in + c, *r = a->residual ? a->residual + c : NULL;
        float *res = a->residual ? a->residual + c : NULL;
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
    const uint8_t *packed = (const uint8_t *)payload + 4;
    uint8_t codes[HP_OPS_CHUNK], mn, mx;
    float tau;

    if (len != 4 + (n + 3) / 4)
        return HIPRESS_COMP_EINVAL;
    memcpy(&tau, payload, 4);
    if (!isfinite(tau) || (hp_f2u(tau) >> 31) != 0)
        return HIPRESS_COMP_EINVAL;
    for (size_t c = 0; c < n; c += HP_OPS_CHUNK) {
        size_t m = HP_MIN((size_t)HP_OPS_CHUNK, n - c);
        if (ops->unpack(packed + c / 4, m, 2, codes, &mn, &mx) != 0 || mx > 2 ||
            (tau == 0.0f && (mn != 1 || mx != 1)))
            return HIPRESS_COMP_EINVAL;
        ops->dequant(codes, m, 0.0f, -1.0f, tau, out + c, accumulate ? HP_OUT_ADD : HP_OUT_SET);
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
