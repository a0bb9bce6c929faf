/*
 * The device codec (see hp_codec.h): every encode and decode through the
 * row of its format (hp_codec_fmt.h), found by the
 * format's id in a table built from src/comp/hp_gpu_fmt.def -- so this file
 * knows no format but `none`, the values as they are.  The rows of the
 * other formats are in the files of their families: hp_codec_quant.c
 * (onebit, tbq, terngrad), hp_codec_half.c (fp16, bf16), hp_codec_sparse.c
 * (graddrop, dgc).
 */
#include "hp_codec_fmt.h"
#include <string.h>

int hp_codec_init(hp_codec_t *cx, const hp_dev_ops_t *dev, void *self)
{
    void *p;
    int st;
    memset(cx, 0, sizeof(*cx));
    cx->dev = dev;
    cx->self = self;
    cx->piece = HP_CODEC_PIECE;
    if ((st = hp_codec_ws(cx, HP_WS_INFO, 64, &p)) != HP_GPU_OK)
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

void hp_codec_fini_q(hp_codec_t *cx)
{
    if (cx->dev == NULL)
        return;
    if (cx->dev->release_q == NULL) {
        hp_codec_fini(cx);
        return;
    }
    /* (a context whose streams are stuck frees nothing: nothing runs) */
    if (cx->dev->record(cx->self, HP_EV_WS, HP_STREAM_COPY) == 0 &&
        cx->dev->wait(cx->self, HP_STREAM_COMPUTE, HP_EV_WS) == 0)
        for (int i = 0; i < HP_WS_N; i++)
            if (cx->ws[i] != NULL)
                cx->dev->release_q(cx->self, cx->ws[i], HP_STREAM_COMPUTE);
    if (cx->hinfo != NULL)
        cx->dev->hrelease(cx->self, cx->hinfo);
    memset(cx, 0, sizeof(*cx));
}

/* The info words to the host, after everything queued; waits. */
static int read_info(hp_codec_t *cx)
{
    int st;
    if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK)
        return st;
    CK(cx->dev->copy(cx->self, cx->hinfo, hp_codec_info(cx), HP_INFO_WORDS * 4, HP_STREAM_COPY));
    CK(cx->dev->sync(cx->self, HP_STREAM_COPY));
    if (cx->hinfo[2] != 0)
        cx->bad = 1;
    return HP_GPU_OK;
}

/* ----------------------------------------------------------- formats */

/* The rows by format id (hp_gpu_fmt.def). */
static const hp_codec_fmt_t *const fmt_rows[] = {
#define HP_GPU_FMT_ROW(id, NAME, name) [id] = &hp_codec_fmt_##name,
#include "hp_gpu_fmt.def"
#undef HP_GPU_FMT_ROW
};

static const hp_codec_fmt_t *fmt_row(uint32_t id)
{
    return id < sizeof(fmt_rows) / sizeof(fmt_rows[0]) ? fmt_rows[id] : NULL;
}

/* `none`: the values as they are, straight from the buffer (no kernel). */
static int none_enc_ok(const hp_gpu_enc_t *e)
{
    (void)e;
    return 0;
}

static int none_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    int st;
    if (e->mask != NULL)
        CK(hp_kl_mask_zero(STREAM(cx), e->mask, e->n, NULL, hp_codec_info(cx) + HP_INFO_MOM));
    if (cx->devonly) {
        CK(cx->dev->copy(cx->self, dmsg, e->in, 4 * e->n, HP_STREAM_COMPUTE));
        return HP_GPU_OK;
    }
    if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK)
        return st;
    CK(cx->dev->copy(cx->self, out, e->in, 4 * e->n, HP_STREAM_COPY));
    return HP_GPU_OK;
}

static int none_check(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen)
{
    (void)p;
    return plen == d->fmt.payload ? 0 : -1;
}

static int none_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const uint8_t *dp, size_t plen, float *dst,
                       uint32_t *bad)
{
    (void)plen;
    (void)bad;
    if (d->accumulate)
        CK(hp_kl_add(STREAM(cx), dst, (const float *)dp, d->n));
    else
        CK(cx->dev->copy(cx->self, dst, dp, 4 * d->n, HP_STREAM_COMPUTE));
    return HP_GPU_OK;
}

const hp_codec_fmt_t hp_codec_fmt_none = {
    .enc_ok = none_enc_ok, .encode = none_encode, .check = none_check, .decode = none_decode, .direct = 1,
};

/* ------------------------------------------------------------- encode */

int hp_codec_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, void *out, size_t cap, size_t *plen_p,
                    int *nonfinite_p)
{
    const hp_codec_fmt_t *f = fmt_row(e->fmt.id);
    const size_t pmax = e->fmt.payload;
    uint8_t *dmsg = NULL;
    int st;

    *plen_p = 0;
    *nonfinite_p = 0;
    if (f == NULL)
        return HP_GPU_ERR_UNSUPPORTED;
    if (pmax > cap || e->n == 0 || e->n > UINT32_MAX || f->enc_ok(e) != 0)
        return HP_GPU_ERR_INVALID;
    if ((!f->direct || cx->devonly) && (st = hp_codec_ws(cx, HP_WS_MSG, pmax, (void **)&dmsg)) != HP_GPU_OK)
        return st;
    CK(cx->dev->memset(cx->self, hp_codec_info(cx), 0, 8, HP_STREAM_COMPUTE));
    if ((st = f->encode(cx, e, (uint8_t *)out, dmsg)) != HP_GPU_OK)
        return st;
    if ((st = read_info(cx)) != HP_GPU_OK)
        return st;
    if (cx->hinfo[0] & HP_K_F_NONFINITE) {
        *nonfinite_p = 1;
        return HP_GPU_OK;
    }
    *plen_p = f->length != NULL ? f->length(e, cx->hinfo) : pmax;
    return HP_GPU_OK;
}

/* ------------------------------------------------------------- decode */

int hp_codec_check(const hp_gpu_dec_t *d, const void *payload, size_t plen)
{
    const hp_codec_fmt_t *f = fmt_row(d->fmt.id);
    return f != NULL ? f->check(d, (const uint8_t *)payload, plen) : -1;
}

int hp_codec_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const void *payload, size_t plen, float *dst)
{
    const hp_codec_fmt_t *f = fmt_row(d->fmt.id);
    const int slot = cx->dec_slot;
    uint8_t *dp = NULL;
    int st;

    if (d->n == 0)
        return HP_GPU_OK;
    if (cx->devonly) {
        if (f == NULL)
            return HP_GPU_ERR_UNSUPPORTED;
        dp = (uint8_t *)(uintptr_t)payload;
    } else {
        if (hp_codec_check(d, payload, plen) != 0)
            return HP_GPU_ERR_INVALID;
        if ((st = hp_codec_ws(cx, HP_WS_DEC0 + slot, plen ? plen : 8, (void **)&dp)) != HP_GPU_OK)
            return st;
        cx->dec_slot ^= 1;
        /* the staging buffer is free once the kernels of its last message ran */
        CK(cx->dev->wait(cx->self, HP_STREAM_COPY, HP_EV_FREE0 + slot));
        if (plen > 0)
            CK(cx->dev->copy(cx->self, dp, payload, plen, HP_STREAM_COPY));
        CK(cx->dev->record(cx->self, HP_EV_DEC0 + slot, HP_STREAM_COPY));
        CK(cx->dev->wait(cx->self, HP_STREAM_COMPUTE, HP_EV_DEC0 + slot));
    }
    if ((st = f->decode(cx, d, dp, plen, dst, hp_codec_info(cx) + 2)) != HP_GPU_OK)
        return st;
    if (cx->devonly)
        return HP_GPU_OK;
    CK(cx->dev->record(cx->self, HP_EV_FREE0 + slot, HP_STREAM_COMPUTE));
    /* the caller may reuse the payload once it is on the device */
    CK(cx->dev->sync_event(cx->self, HP_EV_DEC0 + slot));
    return HP_GPU_OK;
}

/* ------------------------------------------ messages in device memory */

int hp_codec_encode_msg(hp_codec_t *cx, const hp_gpu_enc_t *e, uint32_t kind, void *dmsg, size_t cap)
{
    const hp_codec_fmt_t *f = fmt_row(e->fmt.id);
    uint8_t *m = (uint8_t *)dmsg;
    int st, devonly;

    if (f == NULL || (f->length != NULL && f->msg_unit == 0))
        return HP_GPU_ERR_UNSUPPORTED;
    if (kind > 0xFE || cap < HP_K_MSG_HEADER || e->fmt.payload > cap - HP_K_MSG_HEADER || e->n > UINT32_MAX)
        return HP_GPU_ERR_INVALID;
    CK(cx->dev->memset(cx->self, hp_codec_info(cx), 0, 8, HP_STREAM_COMPUTE));
    if (e->n > 0) {
        if (f->enc_ok(e) != 0)
            return HP_GPU_ERR_INVALID;
        /* the row's kernels write the payload in place; nothing is copied
         * to the host (the benchmark's device-only form) */
        devonly = cx->devonly;
        cx->devonly = 1;
        st = f->encode(cx, e, NULL, m + HP_K_MSG_HEADER);
        cx->devonly = devonly;
        if (st != HP_GPU_OK)
            return st;
    }
    if (f->msg_unit != 0) {
        /* a length of the data's: the count the kernels left in info word 1
         * (0 for an empty range: zeroed above) */
        CK(hp_kl_msg_header_count(STREAM(cx), m, kind, (uint32_t)e->n, f->msg_unit, hp_codec_info(cx) + 1,
                                  hp_codec_info(cx)));
        return HP_GPU_OK;
    }
    CK(hp_kl_msg_header(STREAM(cx), m, kind, (uint32_t)e->n, e->n > 0 ? (uint32_t)e->fmt.payload : 0u,
                        hp_codec_info(cx)));
    return HP_GPU_OK;
}

int hp_codec_decode_msg(hp_codec_t *cx, const hp_gpu_dec_t *d, uint32_t kind, const void *dmsg, size_t cap,
                        float *dst)
{
    const hp_codec_fmt_t *f = fmt_row(d->fmt.id);
    const uint8_t *m = (const uint8_t *)dmsg;
    uint32_t *status = hp_codec_info(cx) + HP_INFO_MSG;
    hp_k_msgfmt_t mf;
    int st;

    if (f == NULL || (f->length != NULL && f->decode_msg == NULL))
        return HP_GPU_ERR_UNSUPPORTED;
    if (kind > 0xFE || d->n > UINT32_MAX || cap < HP_K_MSG_HEADER)
        return HP_GPU_ERR_INVALID;
    if (f->decode_msg != NULL) {
        /* varying length: the row checks the header too, on the device */
        CK(cx->dev->memset(cx->self, status + 1, 0, 12, HP_STREAM_COMPUTE));
        if ((st = f->decode_msg(cx, d, kind, m, cap, dst, status)) != HP_GPU_OK)
            return st;
        CK(hp_kl_msg_fix(STREAM(cx), dst, d->n, status, hp_codec_info(cx) + 2));
        return HP_GPU_OK;
    }
    if (d->fmt.payload > cap - HP_K_MSG_HEADER)
        return HP_GPU_ERR_INVALID;
    /* the receiver's own parameters, which the host check refuses whatever
     * the bytes: a block that is no block, a width that is none */
    if (f->dcheck != HP_K_CHK_LEN && !hp_codec_block_ok(d->fmt.block))
        return HP_GPU_ERR_INVALID;
    if (f->dcheck == HP_K_CHK_TG && !(d->fmt.iarg[0] == 1 || d->fmt.iarg[0] == 2 || d->fmt.iarg[0] == 4 ||
                                      d->fmt.iarg[0] == 8))
        return HP_GPU_ERR_INVALID;
    mf = hp_codec_msgfmt(d, d->n > 0 ? f->dcheck : HP_K_CHK_LEN);
    CK(cx->dev->memset(cx->self, status + 1, 0, 8, HP_STREAM_COMPUTE));
    CK(hp_kl_msg_check(STREAM(cx), m, cap, kind, (uint32_t)d->fmt.payload, mf, status));
    if (d->n > 0 && (st = f->decode(cx, d, m + HP_K_MSG_HEADER, d->fmt.payload, dst, status + 2)) != HP_GPU_OK)
        return st;
    CK(hp_kl_msg_fix(STREAM(cx), dst, d->n, status, hp_codec_info(cx) + 2));
    return HP_GPU_OK;
}

uint32_t *hp_codec_bad_word(hp_codec_t *cx)
{
    return hp_codec_info(cx) + 2;
}

int hp_codec_release(hp_codec_t *cx)
{
    CK(cx->dev->memset(cx->self, hp_codec_bad_word(cx), 0, 4, HP_STREAM_COMPUTE));
    cx->bad = 0;
    return HP_GPU_OK;
}

int hp_codec_divide(hp_codec_t *cx, float *dst, size_t n, float d)
{
    CK(hp_kl_divide(STREAM(cx), dst, n, d));
    return HP_GPU_OK;
}

int hp_codec_nan_if(hp_codec_t *cx, float *dst, size_t n, const void *flag, uint32_t bytes)
{
    CK(hp_kl_nan_if(STREAM(cx), dst, n, (const uint8_t *)flag, bytes));
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
    uint32_t *f = hp_codec_info(cx) + 3;
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

int hp_codec_convert(hp_codec_t *cx, void *dst, const void *src, size_t n, int how)
{
    CK(hp_kl_convert(STREAM(cx), dst, src, n, how));
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

int hp_codec_momentum_q(hp_codec_t *cx, float *u, float *buf, float m, size_t n)
{
    uint32_t *f = hp_codec_info(cx) + HP_INFO_MOM;
    CK(cx->dev->memset(cx->self, f, 0, 4, HP_STREAM_COMPUTE));
    CK(hp_kl_finite(STREAM(cx), buf, n, f));
    CK(hp_kl_momentum(STREAM(cx), u, buf, m, n, f));
    return HP_GPU_OK;
}

int hp_codec_momentum(hp_codec_t *cx, float *u, float *buf, float m, size_t n, int *applied_p)
{
    int st;
    if ((st = hp_codec_momentum_q(cx, u, buf, m, n)) != HP_GPU_OK || (st = hp_codec_to_copy(cx)) != HP_GPU_OK)
        return st;
    CK(cx->dev->copy(cx->self, cx->hinfo + HP_INFO_MOM, hp_codec_info(cx) + HP_INFO_MOM, 4, HP_STREAM_COPY));
    CK(cx->dev->sync(cx->self, HP_STREAM_COPY));
    *applied_p = !(cx->hinfo[HP_INFO_MOM] & HP_K_F_NONFINITE);
    return HP_GPU_OK;
}

int hp_codec_nonfinite(hp_codec_t *cx, const float *x, size_t n, int *nonfinite_p)
{
    uint32_t *f = hp_codec_info(cx) + 3;
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
    return hp_codec_ws(cx, HP_WS_WORK, bytes ? bytes : 4, p_p);
}

int hp_codec_sync(hp_codec_t *cx, int *bad_p)
{
    int st;
    if ((st = read_info(cx)) != HP_GPU_OK)
        return st;
    CK(cx->dev->sync(cx->self, HP_STREAM_COMPUTE));
    *bad_p = cx->bad;
    if (cx->bad) {
        CK(cx->dev->memset(cx->self, hp_codec_info(cx) + 2, 0, 4, HP_STREAM_COMPUTE));
        CK(cx->dev->sync(cx->self, HP_STREAM_COMPUTE));
    }
    cx->bad = 0;
    return HP_GPU_OK;
}
