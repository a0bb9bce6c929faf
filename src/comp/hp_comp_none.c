/* `none`: the values as they are (lossless).  NaN/Inf travel as values, so the
 * result is exactly the ring-ordered float sum, as plain MPI would give, but
 * for a NaN's bits: a sum that is NaN is hp_elem.h's one NaN (hp_canon). */
#include "hp_comp.h"
#include "hp_elem.h"
#include <string.h>

static size_t none_max_payload(size_t n, const hipress_comp_params_t *p)
{
    (void)p;
    return 4 * n;
}

static int none_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    if (a->out_cap < 4 * a->n)
        return HIPRESS_COMP_ENOSPC;
    memcpy(a->out, a->in, 4 * a->n);
    *len_p = 4 * a->n;
    *nonfinite_p = 0;
    return HIPRESS_COMP_OK;
}

static int none_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                       const hipress_comp_params_t *p)
{
    const float *in = (const float *)payload;
    (void)p;
    if (len != 4 * n)
        return HIPRESS_COMP_EINVAL;
    if (!accumulate) {
        memcpy(out, payload, len);
        return HIPRESS_COMP_OK;
    }
    if (((uintptr_t)payload & 3u) == 0) {
        /* (out may hold NaN or Inf: a NaN stored canonical, as the
         * kernels' accumulating store does) */
        for (size_t i = 0; i < n; i++)
            out[i] = hp_canon(out[i] + in[i]);
    } else {
        for (size_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, (const char *)payload + 4 * i, 4);
            out[i] = hp_canon(out[i] + v);
        }
    }
    return HIPRESS_COMP_OK;
}

const hipress_compressor_v1_t hp_comp_none = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "none",
    .flags = HIPRESS_COMP_LOSSLESS,
    .max_payload = none_max_payload,
    .encode = none_encode,
    .decode = none_decode,
};

/* The device format (cuda/codec/hp_codec_frame.c): the values as they are. */
static hp_status_t none_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    (void)k;
    f->id = HP_GPU_FMT_NONE;
    f->block = 1;
    f->payload = none_max_payload(n, p);
    return HP_OK;
}

const hp_comp_ext_t hp_compx_none = {
    .qclass = HP_QCLASS_EXACT,
    .max_stages = 0,   /* exact (doc/accuracy.md) */
    .gpu_fmt = none_gpu_fmt,
    .owner_free = 1,   /* rounding to float16/bfloat16 (or none) costs an owner stage nothing */
};
