/*
 * The CUDA module's codec entry points (hp_cuda_mod.h): each works in its
 * codec context's CUDA context (IN_CX), names what it does for a wait that
 * times out (hp_cu_op_set), and runs the codec (hp_codec*.c) or a kernel on
 * the context's streams.
 */
#include "hp_cuda_mod.h"
#include "hp_klaunch.h"
#include "hp_kern.h"

static const char *const fmt_names[] = {
#define HP_GPU_FMT_ROW(id, NAME, name) [id] = #name,
#include "hp_gpu_fmt.def"
#undef HP_GPU_FMT_ROW
};

const char *hp_cu_fmt_name(uint32_t id)
{
    return id < sizeof(fmt_names) / sizeof(fmt_names[0]) && fmt_names[id] != NULL ? fmt_names[id] : "?";
}

int hpcu_encode(void *cx, const hp_gpu_enc_t *e, void *out, size_t cap, size_t *plen_p, int *nonfinite_p,
                       int *bad_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("the encode of %zu elements (%s)", e->n, hp_cu_fmt_name(e->fmt.id));
    IN_CX(m, st_ = hp_codec_encode(&m->codec, e, out, cap, plen_p, nonfinite_p);
             *bad_p = m->codec.bad;
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "encode of %zu elements (%s) failed", e->n, hp_cu_fmt_name(e->fmt.id)));
}

int hpcu_decode(void *cx, const hp_gpu_dec_t *d, const void *payload, size_t plen, float *dst)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("the decode of %zu elements (%s)", d->n, hp_cu_fmt_name(d->fmt.id));
    IN_CX(m, st_ = hp_codec_decode(&m->codec, d, payload, plen, dst);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "decode of %zu elements (%s) failed", d->n, hp_cu_fmt_name(d->fmt.id)));
}

int hpcu_encode_msg(void *cx, const hp_gpu_enc_t *e, uint32_t kind, void *dmsg, size_t cap)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("the device-message encode of %zu elements (%s)", e->n, hp_cu_fmt_name(e->fmt.id));
    IN_CX(m, st_ = hp_codec_encode_msg(&m->codec, e, kind, dmsg, cap);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "device-message encode of %zu elements (%s) failed", e->n,
                                           hp_cu_fmt_name(e->fmt.id)));
}

int hpcu_decode_msg(void *cx, const hp_gpu_dec_t *d, uint32_t kind, const void *dmsg, size_t cap, float *dst)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("the device-message decode of %zu elements (%s)", d->n, hp_cu_fmt_name(d->fmt.id));
    IN_CX(m, st_ = hp_codec_decode_msg(&m->codec, d, kind, dmsg, cap, dst);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "device-message decode of %zu elements (%s) failed", d->n,
                                           hp_cu_fmt_name(d->fmt.id)));
}

int hpcu_bad_word(void *cx, uint32_t **word_p)
{
    *word_p = hp_codec_bad_word(&((mod_cx_t *)cx)->codec);
    return HP_GPU_OK;
}

int hpcu_nan_if(void *cx, float *dst, size_t n, const void *flag, uint32_t bytes)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("a failure flag's NaN over %zu elements", n);
    IN_CX(m, st_ = hp_codec_nan_if(&m->codec, dst, n, flag, bytes);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "the NaN kernel over %zu elements failed", n));
}

int hpcu_divide(void *cx, float *dst, size_t n, float d)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("ncclAvg's divide of %zu elements", n);
    IN_CX(m, st_ = hp_codec_divide(&m->codec, dst, n, d);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "the divide kernel over %zu elements failed", n));
}

int hpcu_momentum_q(void *cx, float *u, float *buf, float mo, size_t n)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("dgc's momentum over %zu elements, in stream order", n);
    IN_CX(m, st_ = hp_codec_momentum_q(&m->codec, u, buf, mo, n);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "the momentum kernels over %zu elements failed", n));
}

int hpcu_stream_join(void *cx, void *stream)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    CUresult rc;
    IN_CX(m, rc = hp_cu.EventRecord(m->ev[HP_EV_JOIN], (CUstream)stream);
             if (rc == CUDA_SUCCESS) rc = hp_cu.StreamWaitEvent(m->s[HP_STREAM_COMPUTE], m->ev[HP_EV_JOIN], 0);
             if (rc == CUDA_SUCCESS) rc = hp_cu.StreamWaitEvent(m->s[HP_STREAM_COPY], m->ev[HP_EV_JOIN], 0);
             st_ = rc == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL("cuEventRecord/cuStreamWaitEvent (join)", rc));
}

int hpcu_stream_release(void *cx, void *stream)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    CUresult rc;
    IN_CX(m, rc = hp_cu.EventRecord(m->ev[HP_EV_REL0], m->s[HP_STREAM_COMPUTE]);
             if (rc == CUDA_SUCCESS) rc = hp_cu.StreamWaitEvent((CUstream)stream, m->ev[HP_EV_REL0], 0);
             if (rc == CUDA_SUCCESS) rc = hp_cu.EventRecord(m->ev[HP_EV_REL1], m->s[HP_STREAM_COPY]);
             if (rc == CUDA_SUCCESS) rc = hp_cu.StreamWaitEvent((CUstream)stream, m->ev[HP_EV_REL1], 0);
             st_ = rc == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL("cuEventRecord/cuStreamWaitEvent (release)", rc));
}

int hpcu_fill(void *cx, float *dst, float v, size_t n)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("a fill of %zu elements", n);
    IN_CX(m, st_ = hp_codec_fill(&m->codec, dst, v, n));
}

int hpcu_fold(void *cx, float *buf, float *r, size_t n)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("a residual's fold into %zu elements", n);
    IN_CX(m, st_ = hp_codec_fold(&m->codec, buf, r, n));
}

int hpcu_add(void *cx, float *dst, const float *src, size_t n)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("a sum of %zu elements", n);
    IN_CX(m, st_ = hp_codec_add(&m->codec, dst, src, n));
}

/* (the module's directions are the kernels') */
_Static_assert((int)HP_GPU_CVT_F16_F32 == (int)HP_KL_CVT_F16_F32 && (int)HP_GPU_CVT_BF16_F32 == (int)HP_KL_CVT_BF16_F32 &&
                   (int)HP_GPU_CVT_F32_F16 == (int)HP_KL_CVT_F32_F16 && (int)HP_GPU_CVT_F32_BF16 == (int)HP_KL_CVT_F32_BF16,
               "convert directions");

int hpcu_convert(void *cx, void *dst, const void *src, size_t n, int how)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    if (how < HP_GPU_CVT_F16_F32 || how > HP_GPU_CVT_F32_BF16)
        return HP_GPU_ERR_INVALID;
    hp_cu_op_set("a conversion of %zu elements", n);
    IN_CX(m, st_ = hp_codec_convert(&m->codec, dst, src, n, how));
}

int hpcu_copy(void *cx, void *dst, const void *src, size_t bytes)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_gpu_ptr_t a, b;
    int host = 1;
    if (hpcu_ptr_query(dst, &a) == HP_GPU_OK && hpcu_ptr_query(src, &b) == HP_GPU_OK)
        host = a.kind == HP_MEM_HOST || b.kind == HP_MEM_HOST;
    hp_cu_op_set("a copy of %zu bytes", bytes);
    IN_CX(m, st_ = hp_codec_copy(&m->codec, dst, src, bytes, host);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "a copy of %zu bytes failed", bytes));
}

int hpcu_momentum(void *cx, float *u, float *buf, float mo, size_t n, int *applied_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("dgc's momentum over %zu elements", n);
    IN_CX(m, st_ = hp_codec_momentum(&m->codec, u, buf, mo, n, applied_p));
}

int hpcu_nonfinite(void *cx, const float *x, size_t n, int *nonfinite_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("the NaN and Inf scan of %zu elements", n);
    IN_CX(m, st_ = hp_codec_nonfinite(&m->codec, x, n, nonfinite_p));
}

int hpcu_psgd_mq(void *cx, const float *M, size_t n, size_t mr, size_t c, size_t r, size_t T, const float *qt,
                        float *p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_mq(m->s[HP_STREAM_COMPUTE], M, n, mr, c, r, T, qt, p) == 0 ? HP_GPU_OK
                   : hp_cu_fail(HP_GPU_ERR_DEVICE, "powersgd's M Q kernel failed"));
}

int hpcu_psgd_mtp(void *cx, const float *M, size_t n, size_t mr, size_t c, size_t r, const float *p, float *qt)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_mtp(m->s[HP_STREAM_COMPUTE], M, n, mr, c, r, p, qt) == 0 ? HP_GPU_OK
                   : hp_cu_fail(HP_GPU_ERR_DEVICE, "powersgd's M^T P kernel failed"));
}

int hpcu_psgd_recon(void *cx, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                           const float *qs, const float *ql)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_recon(m->s[HP_STREAM_COMPUTE], buf, res, n, c, r, p, qs, ql) == 0 ? HP_GPU_OK
                   : hp_cu_fail(HP_GPU_ERR_DEVICE, "powersgd's reconstruction kernel failed"));
}

int hpcu_flag_nonfinite(void *cx, const float *x, size_t n, uint32_t *flag)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_finite(m->s[HP_STREAM_COMPUTE], x, n, flag) == 0 ? HP_GPU_OK
                   : hp_cu_fail(HP_GPU_ERR_DEVICE, "the NaN and Inf flag kernel over %zu elements failed", n));
}

int hpcu_psgd_start_q(void *cx, float *qt, const float *warm, size_t r, size_t c, uint64_t key)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_start_q(m->s[HP_STREAM_COMPUTE], qt, warm, r, c, key) == 0 ? HP_GPU_OK
                   : hp_cu_fail(HP_GPU_ERR_DEVICE, "powersgd's start Q kernel failed"));
}

int hpcu_psgd_orth(void *cx, float *p, size_t mr, size_t r, double *work, const void *flag, uint32_t bytes)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_orth(m->s[HP_STREAM_COMPUTE], p, mr, r, work, (const uint8_t *)flag, bytes) == 0
                   ? HP_GPU_OK : hp_cu_fail(HP_GPU_ERR_DEVICE, "powersgd's orthonormalisation kernel failed"));
}

int hpcu_psgd_recon_if(void *cx, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                              const float *qs, const float *ql, const void *flag, uint32_t bytes)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_recon_if(m->s[HP_STREAM_COMPUTE], buf, res, n, c, r, p, qs, ql, (const uint8_t *)flag,
                                       bytes) == 0
                   ? HP_GPU_OK : hp_cu_fail(HP_GPU_ERR_DEVICE, "powersgd's reconstruction kernel failed"));
}

int hpcu_copy_if(void *cx, float *dst, const float *src, size_t n, const void *flag, uint32_t bytes)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_copy_if(m->s[HP_STREAM_COMPUTE], dst, src, n, (const uint8_t *)flag, bytes) == 0
                   ? HP_GPU_OK : hp_cu_fail(HP_GPU_ERR_DEVICE, "a flagged copy of %zu elements failed", n));
}

int hpcu_work(void *cx, size_t bytes, void **p_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("the growth of the call's device scratch to %zu bytes", bytes);
    IN_CX(m, st_ = hp_codec_work(&m->codec, bytes, p_p);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "cannot allocate %zu bytes of device memory", bytes));
}
