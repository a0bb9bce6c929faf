/*
 * The device codec's row of the sparse format (hp_codec_fmt.h): graddrop
 * and dgc, on the kernels of cuda/kern/hp_kern_sparse.cu.  The message is
 * encoded at once (a block's pairs are placed by a scan of every block's
 * count) and its length is the pair count the kernels report; the host
 * checks the length only, the kernels the indices.  In device memory
 * (encode_msg, decode_msg) the header carries that count, written and read
 * on the device.
 */
#include "hp_codec_fmt.h"
#include <string.h>

/* iarg[0]: kept per full block, iarg[1]: by a shorter last block, farg[0]:
 * the state's momentum (hp_gpu_fmt.def) */
static int sparse_enc_ok(const hp_gpu_enc_t *e)
{
    const uint32_t k_full = e->fmt.iarg[0], k_last = e->fmt.iarg[1];
    if (!hp_codec_block_ok(e->fmt.block) || k_full == 0 || k_full > e->fmt.block || k_last > k_full)
        return -1;
    return 0;
}

static int sparse_encode(hp_codec_t *cx, const hp_gpu_enc_t *e, uint8_t *out, uint8_t *dmsg)
{
    hp_kl_sparse_t a;
    void *tmp = NULL;
    int st;

    if ((st = hp_codec_ws(cx, HP_WS_TMP, hp_kl_sparse_tmp_bytes(e->n, e->fmt.block, e->fmt.iarg[0], e->fmt.iarg[1]),
                          &tmp)) != HP_GPU_OK)
        return st;
    memset(&a, 0, sizeof(a));
    a.g = e->in;
    a.r = e->residual;
    a.u = e->state;
    a.m = e->fmt.farg[0];
    a.mask = e->mask;
    a.gate = hp_codec_info(cx) + HP_INFO_MOM;
    a.n = e->n;
    a.G = e->fmt.block;
    a.k_full = e->fmt.iarg[0];
    a.k_last = e->fmt.iarg[1];
    a.payload = dmsg;
    a.tmp = tmp;
    a.info = hp_codec_info(cx);
    CK(hp_kl_sparse_enc(STREAM(cx), &a));
    if ((st = hp_codec_to_copy(cx)) != HP_GPU_OK || (st = hp_codec_put(cx, out, dmsg, 0, e->fmt.payload)) != HP_GPU_OK)
        return st;
    return HP_GPU_OK;
}

/* 8 bytes per pair: the count of info word 1 */
static size_t sparse_length(const hp_gpu_enc_t *e, const uint32_t *hinfo)
{
    (void)e;
    return 8 * (size_t)hinfo[1];
}

static int sparse_check(const hp_gpu_dec_t *d, const uint8_t *p, size_t plen)
{
    (void)p;
    return plen % 8 == 0 && plen / 8 <= d->n ? 0 : -1;
}

static int sparse_decode(hp_codec_t *cx, const hp_gpu_dec_t *d, const uint8_t *dp, size_t plen, float *dst,
                         uint32_t *bad)
{
    CK(hp_kl_sparse_dec(STREAM(cx), dp, plen / 8, d->n, dst, d->accumulate, bad));
    return HP_GPU_OK;
}

/* A message in device memory: the header and the pairs checked on the
 * device (hp_kl_sparse_dec_msg), the dense fallback `none` (iarg[2], its
 * kind) decoded as the host decoder does. */
static int sparse_decode_msg(hp_codec_t *cx, const hp_gpu_dec_t *d, uint32_t kind, const uint8_t *m, size_t cap,
                             float *dst, uint32_t *status)
{
    CK(hp_kl_sparse_dec_msg(STREAM(cx), m, cap, kind, d->fmt.iarg[2], d->n, dst, d->accumulate, status));
    return HP_GPU_OK;
}

const hp_codec_fmt_t hp_codec_fmt_sparse = {
    .enc_ok = sparse_enc_ok, .encode = sparse_encode, .length = sparse_length, .check = sparse_check,
    .decode = sparse_decode, .msg_unit = 8, .decode_msg = sparse_decode_msg,
};
