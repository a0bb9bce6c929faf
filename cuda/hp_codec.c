/*
 * The device codec (see hp_codec.h): every format's encode and decode as
 * launches and copies, the host-side checks of a payload, the workspace.
 */
#include "hp_codec.h"
#include "hp_kern.h"
#include "hp_klaunch.h"
#include <string.h>

#define CK(expr) do { if ((expr) != 0) return HP_GPU_ERR_DEVICE; } while (0)
#define STREAM(cx) ((cx)->dev->stream((cx)->self, HP_STREAM_COMPUTE))

/* ---------------------------------------------------------- workspace */

/* Slot `slot` of at least `bytes`; growing it waits for both streams (the
 * old buffer may still be read), which happens in the first calls only. */
static int ws_need(hp_codec_t *cx, int slot, size_t bytes, void **p_p)
{
    size_t nb;
    void *p = NULL;
    if (cx->wsb[slot] >= bytes && cx->ws[slot] != NULL) {
        *p_p = cx->ws[slot];
        return HP_GPU_OK;
    }
    nb = cx->wsb[slot] * 2 > bytes ? cx->wsb[slot] * 2 : bytes;
    nb = (nb + 65535) & ~(size_t)65535;
    if (cx->ws[slot] != NULL) {
        CK(cx->dev->sync(cx->self, HP_STREAM_COMPUTE));
        CK(cx->dev->sync(cx->self, HP_STREAM_COPY));
        cx->dev->release(cx->self, cx->ws[slot]);
        cx->ws[slot] = NULL;
        cx->wsb[slot] = 0;
    }
    if (cx->dev->alloc(cx->self, nb, &p) != 0)
        return HP_GPU_ERR_NOMEM;
    cx->ws[slot] = p;
    cx->wsb[slot] = nb;
    *p_p = p;
    return HP_GPU_OK;
}

int hp_codec_init(hp_codec_t *cx, const hp_dev_ops_t *dev, void *self)
{
    void *p;
    int st;
    memset(cx, 0, sizeof(*cx));
    cx->dev = dev;
    cx->self = self;
    cx->piece = HP_CODEC_PIECE;
    if ((st = ws_need(cx, HP_WS_INFO, 64, &p)) != HP_GPU_OK)
        return st;
    if (dev->halloc(self, 64, (void **)&cx->hinfo) != 0)
        return HP_GPU_ERR_NOMEM;
    CK(dev->memset(self, p, 0, 64, HP_STREAM_COMPUTE));
    CK(dev->sync(self, HP_STREAM_COMPUTE));
    return HP_GPU_OK;
}

void hp_codec_fini(hp_codec_t *cx)
{
    if (cx->dev == NULL)
        return;
    cx->dev->sync(cx->self, HP_STREAM_COMPUTE);
    cx->dev->sync(cx->self, HP_STREAM_COPY);
    for (int i = 0; i < HP_WS_N; i++)
        if (cx->ws[i] != NULL)
            cx->dev->release(cx->self, cx->ws[i]);
    if (cx->hinfo != NULL)
        cx->dev->hrelease(cx->self, cx->hinfo);
    memset(cx, 0, sizeof(*cx));
}

static uint32_t *info(hp_codec_t *cx)
{
    return (uint32_t *)cx->ws[HP_WS_INFO];
}

/* After the kernels queued so far: the copy stream may read their output. */
static int to_copy_stream(hp_codec_t *cx)
{
    CK(cx->dev->record(cx->self, HP_EV_PIECE, HP_STREAM_COMPUTE));
    CK(cx->dev->wait(cx->self, HP_STREAM_COPY, HP_EV_PIECE));
    return HP_GPU_OK;
}

/* The info words to the host, after everything queued; waits. */
static int read_info(hp_codec_t *cx)
{
    int st;
    if ((st = to_copy_stream(cx)) != HP_GPU_OK)
        return st;
    CK(cx->dev->copy(cx->self, cx->hinfo, info(cx), HP_INFO_WORDS * 4, HP_STREAM_COPY));
    CK(cx->dev->sync(cx->self, HP_STREAM_COPY));
    if (cx->hinfo[2] != 0)
        cx->bad = 1;
    return HP_GPU_OK;
}

/* ------------------------------------------------------------- encode */

/* Copy [lo, hi) of the device payload to the same bytes of out. */
static int put(hp_codec_t *cx, uint8_t *out, const uint8_t *dmsg, size_t lo, size_t hi)
{
    if (hi > lo && !cx->devonly)
        CK(cx->dev->copy(cx->self, out + lo, dmsg + lo, hi - lo, HP_STREAM_COPY));
    return HP_GPU_OK;
}

/* onebit and tbq: pieces of whole blocks, each copied out when done. */
static int enc_blocks(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    const size_t n = e->n, B = e->block, nb = (n + B - 1) / B;
    const size_t piece = (cx->piece + B - 1) / B * B;
    void *s = STREAM(cx);
    int st;

    if (e->residual != NULL && hp_kl_finite(s, e->in, n, info(cx)) != 0)
        return HP_GPU_ERR_DEVICE;
    for (size_t p0 = 0; p0 < n; p0 += piece) {
        size_t len = n - p0 < piece ? n - p0 : piece, p1 = p0 + len;
        const float *x = e->in + p0;
        float *r = e->residual != NULL ? e->residual + p0 : NULL;
        if (e->fmt == HP_GPU_FMT_ONEBIT) {
            uint8_t *sc = dmsg + 8 * (p0 / B), *w = dmsg + 8 * nb + 4 * (p0 / 32);
            CK(hp_kl_onebit_enc(s, x, r, len, e->block, sc, w, info(cx)));
            if ((st = to_copy_stream(cx)) != HP_GPU_OK)
                return st;
            if ((st = put(cx, out, dmsg, 8 * (p0 / B), 8 * ((p1 + B - 1) / B))) != HP_GPU_OK ||
                (st = put(cx, out, dmsg, 8 * nb + 4 * (p0 / 32), 8 * nb + 4 * ((p1 + 31) / 32))) != HP_GPU_OK)
                return st;
        } else {
            uint8_t *ta = dmsg + 4 * (p0 / B), *co = dmsg + 4 * nb + p0 / 4;
            CK(hp_kl_tbq_enc(s, x, r, len, e->block, e->thr, e->scale, ta, co, info(cx)));
            if ((st = to_copy_stream(cx)) != HP_GPU_OK)
                return st;
            if ((st = put(cx, out, dmsg, 4 * (p0 / B), 4 * ((p1 + B - 1) / B))) != HP_GPU_OK ||
                (st = put(cx, out, dmsg, 4 * nb + p0 / 4, 4 * nb + (p1 + 3) / 4)) != HP_GPU_OK)
                return st;
        }
    }
    return HP_GPU_OK;
}

/* fp16 and bf16: pieces (of whole blocks for fp16), each copied out when
 * done: the halves of the piece, then (fp16) its blocks' exponent bytes. */
static int enc_halves(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    const size_t n = e->n, B = e->fmt == HP_GPU_FMT_FP16 ? e->block : 1;
    const size_t piece = (cx->piece + B - 1) / B * B;
    void *s = STREAM(cx);
    int st;

    /* a dense message carries every element */
    if (e->mask != NULL)
        CK(cx->dev->memset(cx->self, e->mask, 0, n * sizeof(float), HP_STREAM_COMPUTE));
    for (size_t p0 = 0; p0 < n; p0 += piece) {
        size_t len = n - p0 < piece ? n - p0 : piece, p1 = p0 + len;
        if (e->fmt == HP_GPU_FMT_FP16) {
            CK(hp_kl_f16_enc(s, e->in + p0, len, e->block, dmsg + 2 * p0, dmsg + 2 * n + p0 / B, info(cx)));
            if ((st = to_copy_stream(cx)) != HP_GPU_OK)
                return st;
            if ((st = put(cx, out, dmsg, 2 * p0, 2 * p1)) != HP_GPU_OK ||
                (st = put(cx, out, dmsg, 2 * n + p0 / B, 2 * n + (p1 + B - 1) / B)) != HP_GPU_OK)
                return st;
        } else {
            CK(hp_kl_bf16_enc(s, e->in + p0, len, dmsg + 2 * p0, info(cx)));
            if ((st = to_copy_stream(cx)) != HP_GPU_OK)
                return st;
            if ((st = put(cx, out, dmsg, 2 * p0, 2 * p1)) != HP_GPU_OK)
                return st;
        }
    }
    return HP_GPU_OK;
}

int hp_codec_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, void *out, size_t cap, size_t *plen_p,
                    int *nonfinite_p)
{
    const size_t pmax = hp_gpu_payload_bytes(e);
    uint8_t *dmsg = NULL;
    void *s = STREAM(cx), *tmp = NULL;
    (void)tmp;
    int st;

    *plen_p = 0;
    *nonfinite_p = 0;
    if (pmax > cap || e->n == 0 || e->n > UINT32_MAX ||
        ((e->fmt == HP_GPU_FMT_ONEBIT || e->fmt == HP_GPU_FMT_TBQ || e->fmt == HP_GPU_FMT_SPARSE ||
          e->fmt == HP_GPU_FMT_FP16) &&
         (e->block < 32 || (e->block & (e->block - 1)) != 0)))
        return HP_GPU_ERR_INVALID;
    if ((e->fmt != HP_GPU_FMT_NONE || cx->devonly) && (st = ws_need(cx, HP_WS_MSG, pmax, (void **)&dmsg)) != HP_GPU_OK)
        return st;
    CK(cx->dev->memset(cx->self, info(cx), 0, 8, HP_STREAM_COMPUTE));

    switch (e->fmt) {
    case HP_GPU_FMT_NONE:
        /* the values as they are, straight from the buffer */
        if (e->mask != NULL)
            CK(cx->dev->memset(cx->self, e->mask, 0, e->n * sizeof(float), HP_STREAM_COMPUTE));
        if (cx->devonly) {
            CK(cx->dev->copy(cx->self, dmsg, e->in, 4 * e->n, HP_STREAM_COMPUTE));
            break;
        }
        if ((st = to_copy_stream(cx)) != HP_GPU_OK)
            return st;
        CK(cx->dev->copy(cx->self, out, e->in, 4 * e->n, HP_STREAM_COPY));
        break;
    case HP_GPU_FMT_ONEBIT:
    case HP_GPU_FMT_TBQ:
        if ((st = enc_blocks(cx, e, (uint8_t *)out, dmsg)) != HP_GPU_OK)
            return st;
        break;
    case HP_GPU_FMT_FP16:
    case HP_GPU_FMT_BF16:
        if ((st = enc_halves(cx, e, (uint8_t *)out, dmsg)) != HP_GPU_OK)
            return st;
        break;
    case HP_GPU_FMT_TERNGRAD: {
        const size_t nb = (e->n + e->block - 1) / e->block;
        if ((e->bits != 1 && e->bits != 2 && e->bits != 4 && e->bits != 8) || e->block < 32 ||
            (e->block & (e->block - 1)) != 0)
            return HP_GPU_ERR_INVALID;
        CK(hp_kl_tg_enc(s, e->in, e->n, e->block, e->bits, e->rng_key, e->rng_offset, dmsg, dmsg + 8 * nb,
                        info(cx)));
        if ((st = to_copy_stream(cx)) != HP_GPU_OK || (st = put(cx, (uint8_t *)out, dmsg, 0, pmax)) != HP_GPU_OK)
            return st;
        break;
    }
    case HP_GPU_FMT_SPARSE: {
        hp_kl_sparse_t a;
        if (e->k_full == 0 || e->k_full > e->block || e->k_last > e->k_full)
            return HP_GPU_ERR_INVALID;
        if ((st = ws_need(cx, HP_WS_TMP, hp_kl_sparse_tmp_bytes(e->n, e->block, e->k_full, e->k_last), &tmp)) !=
            HP_GPU_OK)
            return st;
        memset(&a, 0, sizeof(a));
        a.g = e->in;
        a.r = e->residual;
        a.u = e->state;
        a.m = e->momentum;
        a.mask = e->mask;
        a.n = e->n;
        a.G = e->block;
        a.k_full = e->k_full;
        a.k_last = e->k_last;
        a.payload = dmsg;
        a.tmp = tmp;
        a.info = info(cx);
        CK(hp_kl_sparse_enc(s, &a));
        if ((st = to_copy_stream(cx)) != HP_GPU_OK || (st = put(cx, (uint8_t *)out, dmsg, 0, pmax)) != HP_GPU_OK)
            return st;
        break;
    }
    default:
        return HP_GPU_ERR_UNSUPPORTED;
    }
    if ((st = read_info(cx)) != HP_GPU_OK)
        return st;
    if (cx->hinfo[0] & HP_K_F_NONFINITE) {
        *nonfinite_p = 1;
        return HP_GPU_OK;
    }
    if (e->fmt == HP_GPU_FMT_SPARSE)
        *plen_p = 8 * (size_t)cx->hinfo[1];
    else
        *plen_p = pmax;
    return HP_GPU_OK;
}

/* ------------------------------------------------------------- decode */

int hp_codec_check(const hp_gpu_dec_t *d, const void *payload, size_t plen)
{
    const uint8_t *p = (const uint8_t *)payload;
    const size_t n = d->n, B = d->block ? d->block : 1;
    switch (d->fmt) {
    case HP_GPU_FMT_NONE:
        return plen == 4 * n ? 0 : -1;
    case HP_GPU_FMT_ONEBIT: {
        const size_t nb = (n + B - 1) / B, words = (n + 31) / 32;
        const uint8_t *bits = p + 8 * nb;
        if (B < 32 || (B & (B - 1)) || plen != 8 * nb + 4 * words)
            return -1;
        /* padding bits after element n-1 */
        if ((n & 7) && (bits[n / 8] >> (n & 7)) != 0)
            return -1;
        for (size_t i = (n + 7) / 8; i < 4 * words; i++)
            if (bits[i] != 0)
                return -1;
        /* scales finite, with the sign of their class (the empty-class rule
         * needs the bits: on the device) */
        for (size_t b = 0; b < nb; b++) {
            float sc[2];
            memcpy(sc, p + 8 * b, 8);
            if (hp_nonfinite(sc[0]) || hp_nonfinite(sc[1]) || !(sc[0] >= 0.0f) || !(sc[1] <= 0.0f))
                return -1;
        }
        return 0;
    }
    case HP_GPU_FMT_TBQ: {
        const size_t nb = (n + B - 1) / B;
        if (B < 32 || (B & (B - 1)) || plen != 4 * nb + (n + 3) / 4)
            return -1;
        for (size_t b = 0; b < nb; b++) {
            float tau;
            memcpy(&tau, p + 4 * b, 4);
            if (hp_nonfinite(tau) || (hp_f2u(tau) >> 31) != 0)
                return -1;
        }
        if ((n & 3) && (p[4 * nb + n / 4] >> (2 * (n & 3))) != 0)
            return -1;
        return 0;
    }
    case HP_GPU_FMT_TERNGRAD: {
        const uint32_t b = d->bits;
        const size_t nb = (n + B - 1) / B;
        const double top = 0x1p127 * (1.0 + 0x1p-20);
        if ((b != 1 && b != 2 && b != 4 && b != 8) || B < 32 || (B & (B - 1)) || plen != 8 * nb + (n * b + 7) / 8)
            return -1;
        for (size_t j = 0; j < nb; j++) {
            float pr[2];
            memcpy(pr, p + 8 * j, 8);
            if (!((hp_f2u(pr[0]) & 0x7fffffffu) < HP_K_TG_LIMIT_BITS))
                return -1;
            if (hp_f2u(pr[1]) != 0 && !(pr[1] > 0.0f && (double)pr[1] * (double)((1u << b) - 1u) <= top))
                return -1;
        }
        /* padding bits after element n-1 (a block whose gap is 0 must have
         * codes 0: checked on the device) */
        if (((n * b) & 7) && (p[8 * nb + n * b / 8] >> ((n * b) & 7)) != 0)
            return -1;
        return 0;
    }
    case HP_GPU_FMT_SPARSE:
        return plen % 8 == 0 && plen / 8 <= n ? 0 : -1;
    case HP_GPU_FMT_FP16: {
        /* the exponents in range (the rule against the halves needs every
         * half: on the device) */
        const size_t nb = (n + B - 1) / B;
        if (B < 32 || (B & (B - 1)) || plen != 2 * n + nb)
            return -1;
        for (size_t b = 0; b < nb; b++) {
            int e = (int8_t)p[2 * n + b];
            if (e < HP_F16_EMIN || e > HP_F16_EMAX)
                return -1;
        }
        return 0;
    }
    case HP_GPU_FMT_BF16:
        return plen == 2 * n ? 0 : -1;
    default:
        return -1;
    }
}

int hp_codec_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const void *payload, size_t plen, float *dst)
{
    const int slot = cx->dec_slot, acc = d->accumulate;
    const size_t n = d->n, B = d->block;
    uint8_t *dp = NULL;
    void *s = STREAM(cx);
    uint32_t *bad = info(cx) + 2;
    int st;

    if (n == 0)
        return HP_GPU_OK;
    if (cx->devonly) {
        dp = (uint8_t *)(uintptr_t)payload;
    } else {
        if (hp_codec_check(d, payload, plen) != 0)
            return HP_GPU_ERR_INVALID;
        if ((st = ws_need(cx, HP_WS_DEC0 + slot, plen ? plen : 8, (void **)&dp)) != HP_GPU_OK)
            return st;
        cx->dec_slot ^= 1;
        /* the staging buffer is free once the kernels of its last message ran */
        CK(cx->dev->wait(cx->self, HP_STREAM_COPY, HP_EV_FREE0 + slot));
        if (plen > 0)
            CK(cx->dev->copy(cx->self, dp, payload, plen, HP_STREAM_COPY));
        CK(cx->dev->record(cx->self, HP_EV_DEC0 + slot, HP_STREAM_COPY));
        CK(cx->dev->wait(cx->self, HP_STREAM_COMPUTE, HP_EV_DEC0 + slot));
    }

    switch (d->fmt) {
    case HP_GPU_FMT_NONE:
        if (acc)
            CK(hp_kl_add(s, dst, (const float *)dp, n));
        else
            CK(cx->dev->copy(cx->self, dst, dp, 4 * n, HP_STREAM_COMPUTE));
        break;
    case HP_GPU_FMT_ONEBIT:
        CK(hp_kl_onebit_dec(s, dp, dp + 8 * ((n + B - 1) / B), n, d->block, dst, acc, bad));
        break;
    case HP_GPU_FMT_TBQ:
        CK(hp_kl_tbq_dec(s, dp, dp + 4 * ((n + B - 1) / B), n, d->block, dst, acc, bad));
        break;
    case HP_GPU_FMT_TERNGRAD:
        CK(hp_kl_tg_dec(s, dp, dp + 8 * ((n + B - 1) / B), n, d->block, d->bits, dst, acc, bad));
        break;
    case HP_GPU_FMT_SPARSE:
        CK(hp_kl_sparse_dec(s, dp, plen / 8, n, dst, acc, bad));
        break;
    case HP_GPU_FMT_FP16:
        CK(hp_kl_f16_dec(s, dp, dp + 2 * n, n, d->block, dst, acc, bad));
        break;
    case HP_GPU_FMT_BF16:
        CK(hp_kl_bf16_dec(s, dp, n, dst, acc, bad));
        break;
    default:
        return HP_GPU_ERR_UNSUPPORTED;
    }
    if (cx->devonly)
        return HP_GPU_OK;
    CK(cx->dev->record(cx->self, HP_EV_FREE0 + slot, HP_STREAM_COMPUTE));
    /* the caller may reuse the payload once it is on the device */
    CK(cx->dev->sync_event(cx->self, HP_EV_DEC0 + slot));
    return HP_GPU_OK;
}

/* ---------------------------------------------------------- the rest */

int hp_codec_fill(hp_codec_t *cx, float *dst, float v, size_t n)
{
    CK(hp_kl_fill(STREAM(cx), dst, v, n));
    return HP_GPU_OK;
}

int hp_codec_fold(hp_codec_t *cx, float *buf, float *r, size_t n)
{
    uint32_t *f = info(cx) + 3;
    CK(cx->dev->memset(cx->self, f, 0, 4, HP_STREAM_COMPUTE));
    CK(hp_kl_finite(STREAM(cx), buf, n, f));
    CK(hp_kl_fold(STREAM(cx), buf, r, n, f));
    return HP_GPU_OK;
}

int hp_codec_add(hp_codec_t *cx, float *dst, const float *src, size_t n)
{
    CK(hp_kl_add(STREAM(cx), dst, src, n));
    return HP_GPU_OK;
}

int hp_codec_copy(hp_codec_t *cx, void *dst, const void *src, size_t bytes, int host_involved)
{
    if (bytes == 0)
        return HP_GPU_OK;
    CK(cx->dev->copy(cx->self, dst, src, bytes, HP_STREAM_COMPUTE));
    if (host_involved)
        CK(cx->dev->sync(cx->self, HP_STREAM_COMPUTE));
    return HP_GPU_OK;
}

int hp_codec_momentum(hp_codec_t *cx, float *u, float *buf, float m, size_t n, int *applied_p)
{
    uint32_t *f = info(cx) + 3;
    int st;
    CK(cx->dev->memset(cx->self, f, 0, 4, HP_STREAM_COMPUTE));
    CK(hp_kl_finite(STREAM(cx), buf, n, f));
    CK(hp_kl_momentum(STREAM(cx), u, buf, m, n, f));
    if ((st = read_info(cx)) != HP_GPU_OK)
        return st;
    *applied_p = !(cx->hinfo[3] & HP_K_F_NONFINITE);
    return HP_GPU_OK;
}

int hp_codec_nonfinite(hp_codec_t *cx, const float *x, size_t n, int *nonfinite_p)
{
    uint32_t *f = info(cx) + 3;
    int st;
    CK(cx->dev->memset(cx->self, f, 0, 4, HP_STREAM_COMPUTE));
    CK(hp_kl_finite(STREAM(cx), x, n, f));
    if ((st = read_info(cx)) != HP_GPU_OK)
        return st;
    *nonfinite_p = (cx->hinfo[3] & HP_K_F_NONFINITE) != 0;
    return HP_GPU_OK;
}

int hp_codec_work(hp_codec_t *cx, size_t bytes, void **p_p)
{
    return ws_need(cx, HP_WS_WORK, bytes ? bytes : 4, p_p);
}

int hp_codec_sync(hp_codec_t *cx, int *bad_p)
{
    int st;
    if ((st = read_info(cx)) != HP_GPU_OK)
        return st;
    CK(cx->dev->sync(cx->self, HP_STREAM_COMPUTE));
    *bad_p = cx->bad;
    if (cx->bad) {
        CK(cx->dev->memset(cx->self, info(cx) + 2, 0, 4, HP_STREAM_COMPUTE));
        CK(cx->dev->sync(cx->self, HP_STREAM_COMPUTE));
    }
    cx->bad = 0;
    return HP_GPU_OK;
}
