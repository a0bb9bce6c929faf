/* `fp16`: IEEE half precision, round to nearest even. */
#include "hp_comp.h"
#include "hp_elem.h"

static size_t fp16_max_payload(size_t n, const hipress_comp_params_t *p)
{
    (void)p;
    return 2 * n;
}

static int fp16_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    uint16_t *o = (uint16_t *)a->out;
    uint32_t bad = 0;
    if (a->out_cap < 2 * a->n)
        return HIPRESS_COMP_ENOSPC;
    for (size_t i = 0; i < a->n; i++) {
        float v = a->in[i];
        bad |= (uint32_t)hp_nonfinite(v);
        o[i] = hp_f32_to_f16(v);
    }
    *len_p = 2 * a->n;
    *nonfinite_p = bad != 0;
    return HIPRESS_COMP_OK;
}

static int fp16_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                       const hipress_comp_params_t *p)
{
    const uint16_t *in = (const uint16_t *)payload;
    (void)p;
    if (len != 2 * n)
        return HIPRESS_COMP_EINVAL;
    if (accumulate)
        for (size_t i = 0; i < n; i++)
            out[i] += hp_f16_to_f32(in[i]);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = hp_f16_to_f32(in[i]);
    return HIPRESS_COMP_OK;
}

const hipress_compressor_v1_t hp_comp_fp16 = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "fp16",
    .flags = 0,
    .max_payload = fp16_max_payload,
    .encode = fp16_encode,
    .decode = fp16_decode,
};
