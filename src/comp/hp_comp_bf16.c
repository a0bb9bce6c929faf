/* `bf16`: bfloat16 (the upper half of a float), round to nearest even,
 * except that a finite float never becomes Inf: |x| beyond the largest
 * bfloat16 saturates to it (hp_bf16_enc; within 2^-8 |x|, as any rounding),
 * so bfloat16 has float32's range without a scale.  Payload: n
 * little-endian bfloat16 values.  A decoder rejects a NaN or Inf value
 * (NaN/Inf input travels as a non-finite message). */
#include "hp_comp.h"
#include "hp_ops.h"

static size_t bf16_max_payload(size_t n, const hipress_comp_params_t *p)
{
    (void)p;
    return 2 * n;
}

static int bf16_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    const hp_ops_t *ops = hp_ops_get(a->params ? a->params->isa : HP_ISA_AUTO);
    if (a->out_cap < 2 * a->n)
        return HIPRESS_COMP_ENOSPC;
    *nonfinite_p = ops->f32_to_bf16(a->in, a->n, (uint8_t *)a->out);
    *len_p = 2 * a->n;
    return HIPRESS_COMP_OK;
}

static int bf16_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                       const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    if (len != 2 * n)
        return HIPRESS_COMP_EINVAL;
    /* a valid message holds no NaN or Inf: NaN/Inf input is sent as a
     * non-finite message, and no finite value rounds to either */
    if (ops->bf16_to_f32((const uint8_t *)payload, n, out, accumulate ? HP_OUT_ADD : HP_OUT_SET))
        return HIPRESS_COMP_EINVAL;
    return HIPRESS_COMP_OK;
}

const hipress_compressor_v1_t hp_comp_bf16 = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "bf16",
    .flags = 0,
    .max_payload = bf16_max_payload,
    .encode = bf16_encode,
    .decode = bf16_decode,
};

/* The device format (cuda/codec/hp_codec_half.c): element-wise. */
static hp_status_t bf16_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    (void)k;
    f->id = HP_GPU_FMT_BF16;
    f->block = 1;
    f->payload = bf16_max_payload(n, p);
    return HP_OK;
}

const hp_comp_ext_t hp_compx_bf16 = {
    .qclass = HP_QCLASS_ROUNDING,
    .max_stages = 0,   /* every algorithm equal to plain (doc/accuracy.md) */
    .gpu_fmt = bf16_gpu_fmt,
    .owner_free = 1,   /* rounding to float16/bfloat16 (or none) costs an owner stage nothing */
};
