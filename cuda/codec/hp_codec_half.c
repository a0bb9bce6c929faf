/*
 * The device codec's rows of the 16-bit formats (hp_codec_fmt.h): fp16
 * (binary16 with a power-of-two scale per block) and bf16, on the kernels
 * of cuda/kern/hp_kern_half.cu.  Both encode in pieces (of whole blocks for
 * fp16), each piece's halves -- and fp16's exponent bytes of its blocks --
 * copied to the host as soon as its kernel ran.  A dense message carries
 * every element, so the mask is zeroed whole.
 */
#include "hp_codec_fmt.h"
#include <string.h>

/* ---------------------------------------------------------------- fp16 */

/* payload: n halves (2 bytes each), then an exponent byte per block */
static int f16_enc_ok(const hp_gpu_enc_t *e)
{
    return hp_codec_block_ok(e->fmt.block) ? 0 : -1;
}

static int f16_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    const size_t n = e->n, B = e->fmt.block;
    const size_t piece = (cx->piece + B - 1) / B * B;
    void *s = STREAM(cx);
    int st;

    if (e->mask != NULL)
        CK(hp_kl_mask_zero(s, e->mask, n, NULL, hp_codec_info(cx) + HP_INFO_MOM));
    for (size_t p0 = 0; p0 < n; p0 += piece) {
        size_t len = n - p0 < piece ? n - p0 : piece, p1 = p0 + len;
        CK(hp_kl_f16_enc(s, e->in + p0, len, e->fmt.block, dmsg + 2 * p0, dmsg + 2 * n + p0 / B, hp_codec_info(cx)));
        if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK)
            return st;
        if ((st = hp_codec_put(cx, out, dmsg, 2 * p0, 2 * p1)) != HP_GPU_OK ||
            (st = hp_codec_put(cx, out, dmsg, 2 * n + p0 / B, 2 * n + (p1 + B - 1) / B)) != HP_GPU_OK)
            return st;
    }
    return HP_GPU_OK;
}

static int f16_check(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen)
{
    /* the exponents in range (the rule against the halves needs every
     * half: on the device) */
    if (!hp_codec_block_ok(d->fmt.block) || plen != d->fmt.payload)
        return -1;
    return hp_codec_items_ok(d, HP_K_CHK_F16, p);
}

static int f16_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const uint8_t *dp, size_t plen, float *dst,
                      uint32_t *bad)
{
    (void)plen;
    CK(hp_kl_f16_dec(STREAM(cx), dp, dp + 2 * d->n, d->n, d->fmt.block, dst, d->accumulate, bad));
    return HP_GPU_OK;
}

const hp_codec_fmt_t hp_codec_fmt_fp16 = {
    .enc_ok = f16_enc_ok, .encode = f16_encode, .check = f16_check, .decode = f16_decode,
    .dcheck = HP_K_CHK_F16,
};

/* ---------------------------------------------------------------- bf16 */

/* payload: n bfloat16 values */
static int bf16_enc_ok(const hp_gpu_enc_t *e)
{
    (void)e;
    return 0;
}

static int bf16_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    const size_t n = e->n, piece = cx->piece;
    void *s = STREAM(cx);
    int st;

    if (e->mask != NULL)
        CK(hp_kl_mask_zero(s, e->mask, n, NULL, hp_codec_info(cx) + HP_INFO_MOM));
    for (size_t p0 = 0; p0 < n; p0 += piece) {
        size_t len = n - p0 < piece ? n - p0 : piece, p1 = p0 + len;
        CK(hp_kl_bf16_enc(s, e->in + p0, len, dmsg + 2 * p0, hp_codec_info(cx)));
        if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK)
            return st;
        if ((st = hp_codec_put(cx, out, dmsg, 2 * p0, 2 * p1)) != HP_GPU_OK)
            return st;
    }
    return HP_GPU_OK;
}

static int bf16_check(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen)
{
    (void)p;
    return plen == d->fmt.payload ? 0 : -1;
}

static int bf16_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const uint8_t *dp, size_t plen, float *dst,
                       uint32_t *bad)
{
    (void)plen;
    CK(hp_kl_bf16_dec(STREAM(cx), dp, d->n, dst, d->accumulate, bad));
    return HP_GPU_OK;
}

const hp_codec_fmt_t hp_codec_fmt_bf16 = {
    .enc_ok = bf16_enc_ok, .encode = bf16_encode, .check = bf16_check, .decode = bf16_decode,
};
