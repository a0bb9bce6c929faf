/*
 * The device codec's rows of the block quantisers (hp_codec_fmt.h): onebit,
 * tbq, terngrad and q (q2, q4, q8), on the kernels of cuda/kern/hp_kern_quant.cu.
 * onebit and tbq encode in pieces of whole blocks, each piece's two regions
 * (scales or thresholds, then bits or codes) copied to the host as soon as
 * its kernel ran; terngrad and q encode the message at once.  The host checks what a
 * decoder can see without every element (length, padding, scales and
 * ranges); the kernels check the rest.
 */
#include "hp_codec_fmt.h"
#include <string.h>

static int block_enc_ok(const hp_gpu_enc_t *e)
{
    return hp_codec_block_ok(e->fmt.block) ? 0 : -1;
}

/* ------------------------------------------------------------- onebit */

/* payload: nb pairs of scales (8 bytes each), then a bit word per 32 elements */
static int onebit_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    const size_t n = e->n, B = e->fmt.block, nb = (n + B - 1) / B;
    const size_t piece = (cx->piece + B - 1) / B * B;
    void *s = STREAM(cx);
    int st;

    if (e->residual != NULL && hp_kl_finite(s, e->in, n, hp_codec_info(cx)) != 0)
        return HP_GPU_ERR_DEVICE;
    for (size_t p0 = 0; p0 < n; p0 += piece) {
        size_t len = n - p0 < piece ? n - p0 : piece, p1 = p0 + len;
        float *r = e->residual != NULL ? e->residual + p0 : NULL;
        uint8_t *sc = dmsg + 8 * (p0 / B), *w = dmsg + 8 * nb + 4 * (p0 / 32);
        CK(hp_kl_onebit_enc(s, e->in + p0, r, len, e->fmt.block, sc, w, hp_codec_info(cx)));
        if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK)
            return st;
        if ((st = hp_codec_put(cx, out, dmsg, 8 * (p0 / B), 8 * ((p1 + B - 1) / B))) != HP_GPU_OK ||
            (st = hp_codec_put(cx, out, dmsg, 8 * nb + 4 * (p0 / 32), 8 * nb + 4 * ((p1 + 31) / 32))) != HP_GPU_OK)
            return st;
    }
    return HP_GPU_OK;
}

static int onebit_check(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen)
{
    /* padding, scales finite with the sign of their class (the empty-class
     * rule needs the bits: on the device) */
    if (!hp_codec_block_ok(d->fmt.block) || plen != d->fmt.payload)
        return -1;
    return hp_codec_items_ok(d, HP_K_CHK_ONEBIT, p);
}

static int onebit_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const uint8_t *dp, size_t plen, float *dst,
                         uint32_t *bad)
{
    const size_t n = d->n, B = d->fmt.block;
    (void)plen;
    CK(hp_kl_onebit_dec(STREAM(cx), dp, dp + 8 * ((n + B - 1) / B), n, d->fmt.block, dst, d->accumulate, bad));
    return HP_GPU_OK;
}

const hp_codec_fmt_t hp_codec_fmt_onebit = {
    .enc_ok = block_enc_ok, .encode = onebit_encode, .check = onebit_check, .decode = onebit_decode,
    .dcheck = HP_K_CHK_ONEBIT,
};

/* ---------------------------------------------------------------- tbq */

/* payload: nb thresholds (4 bytes each), then four 2-bit codes a byte;
 * farg[0]: fixed threshold, farg[1]: scale (hp_gpu_fmt.def) */
static int tbq_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    const size_t n = e->n, B = e->fmt.block, nb = (n + B - 1) / B;
    const size_t piece = (cx->piece + B - 1) / B * B;
    const float thr = e->fmt.farg[0], scale = e->fmt.farg[1];
    void *s = STREAM(cx);
    int st;

    if (e->residual != NULL && hp_kl_finite(s, e->in, n, hp_codec_info(cx)) != 0)
        return HP_GPU_ERR_DEVICE;
    for (size_t p0 = 0; p0 < n; p0 += piece) {
        size_t len = n - p0 < piece ? n - p0 : piece, p1 = p0 + len;
        float *r = e->residual != NULL ? e->residual + p0 : NULL;
        uint8_t *ta = dmsg + 4 * (p0 / B), *co = dmsg + 4 * nb + p0 / 4;
        CK(hp_kl_tbq_enc(s, e->in + p0, r, len, e->fmt.block, thr, scale, ta, co, hp_codec_info(cx)));
        if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK)
            return st;
        if ((st = hp_codec_put(cx, out, dmsg, 4 * (p0 / B), 4 * ((p1 + B - 1) / B))) != HP_GPU_OK ||
            (st = hp_codec_put(cx, out, dmsg, 4 * nb + p0 / 4, 4 * nb + (p1 + 3) / 4)) != HP_GPU_OK)
            return st;
    }
    return HP_GPU_OK;
}

static int tbq_check(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen)
{
    /* thresholds finite and not negative, the padding codes zero */
    if (!hp_codec_block_ok(d->fmt.block) || plen != d->fmt.payload)
        return -1;
    return hp_codec_items_ok(d, HP_K_CHK_TBQ, p);
}

static int tbq_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const uint8_t *dp, size_t plen, float *dst,
                      uint32_t *bad)
{
    const size_t n = d->n, B = d->fmt.block;
    (void)plen;
    CK(hp_kl_tbq_dec(STREAM(cx), dp, dp + 4 * ((n + B - 1) / B), n, d->fmt.block, dst, d->accumulate, bad));
    return HP_GPU_OK;
}

const hp_codec_fmt_t hp_codec_fmt_tbq = {
    .enc_ok = block_enc_ok, .encode = tbq_encode, .check = tbq_check, .decode = tbq_decode,
    .dcheck = HP_K_CHK_TBQ,
};

/* ----------------------------------------------------------- terngrad */

/* payload: nb pairs (min, gap), then the codes of iarg[0] bits each */
static int tg_bits_ok(uint32_t b)
{
    return b == 1 || b == 2 || b == 4 || b == 8;
}

static int tg_enc_ok(const hp_gpu_enc_t *e)
{
    return tg_bits_ok(e->fmt.iarg[0]) && hp_codec_block_ok(e->fmt.block) ? 0 : -1;
}

static int tg_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    const size_t nb = (e->n + e->fmt.block - 1) / e->fmt.block;
    int st;
    CK(hp_kl_tg_enc(STREAM(cx), e->in, e->n, e->fmt.block, e->fmt.iarg[0], e->rng_key, e->rng_offset, dmsg,
                    dmsg + 8 * nb, hp_codec_info(cx)));
    if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK || (st = hp_codec_put(cx, out, dmsg, 0, e->fmt.payload)) != HP_GPU_OK)
        return st;
    return HP_GPU_OK;
}

static int tg_check(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen)
{
    /* every block's (min, gap) in range, the padding bits after element
     * n-1 zero (a block whose gap is 0 must have codes 0: checked on the
     * device) */
    if (!tg_bits_ok(d->fmt.iarg[0]) || !hp_codec_block_ok(d->fmt.block) || plen != d->fmt.payload)
        return -1;
    return hp_codec_items_ok(d, HP_K_CHK_TG, p);
}

static int tg_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const uint8_t *dp, size_t plen, float *dst,
                     uint32_t *bad)
{
    const size_t n = d->n, B = d->fmt.block;
    (void)plen;
    CK(hp_kl_tg_dec(STREAM(cx), dp, dp + 8 * ((n + B - 1) / B), n, d->fmt.block, d->fmt.iarg[0], dst,
                    d->accumulate, bad));
    return HP_GPU_OK;
}

const hp_codec_fmt_t hp_codec_fmt_terngrad = {
    .enc_ok = tg_enc_ok, .encode = tg_encode, .check = tg_check, .decode = tg_decode,
    .dcheck = HP_K_CHK_TG,
};

/* --------------------------------------------------------- q2, q4, q8 */

/* terngrad's payload (nb pairs, then the codes of iarg[0] bits: 2, 4, 8),
 * made with a residual and either rounding (iarg[1]); terngrad's host
 * checks and decoder, which are the CPU q decoder's checks.  A dense
 * message: the mask (dgc's momentum, when q re-encodes an owner's sum) is
 * zeroed whole, unless the message is non-finite (as the CPU's
 * hp_mask_sent). */
static int q_enc_ok(const hp_gpu_enc_t *e)
{
    const uint32_t b = e->fmt.iarg[0];
    return (b == 2 || b == 4 || b == 8) && e->fmt.iarg[1] <= 1 && hp_codec_block_ok(e->fmt.block) ? 0 : -1;
}

static int q_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    const size_t nb = (e->n + e->fmt.block - 1) / e->fmt.block;
    int st;
    /* (the mask after the codes kernel, gated on the message's flags and
     * on the call's momentum, HP_INFO_MOM: what the kernel's would be, and
     * nothing where the momentum was not applied) */
    CK(hp_kl_q_enc(STREAM(cx), e->in, e->residual, NULL, e->n, e->fmt.block, e->fmt.iarg[0], e->fmt.iarg[1],
                   e->rng_key, e->rng_offset, dmsg, dmsg + 8 * nb, hp_codec_info(cx)));
    if (e->mask != NULL)
        CK(hp_kl_mask_zero(STREAM(cx), e->mask, e->n, hp_codec_info(cx), hp_codec_info(cx) + HP_INFO_MOM));
    if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK || (st = hp_codec_put(cx, out, dmsg, 0, e->fmt.payload)) != HP_GPU_OK)
        return st;
    return HP_GPU_OK;
}

static int q_check(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen)
{
    const uint32_t b = d->fmt.iarg[0];
    return (b == 2 || b == 4 || b == 8) ? tg_check(d, p, plen) : -1;
}

const hp_codec_fmt_t hp_codec_fmt_q = {
    .enc_ok = q_enc_ok, .encode = q_encode, .check = q_check, .decode = tg_decode,
    .dcheck = HP_K_CHK_TG,
};
