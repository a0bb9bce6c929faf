/*
 * `fp16`: IEEE half precision with one power-of-two scale per block of
 * B = hipress_comp_params_t.fp16_block elements (a power of two >= 32; 0 is
 * the default, 1024), so that a finite float never becomes Inf: a block's
 * largest |v| is brought into binary16's top binade, [2^15, 2^16), before
 * rounding (the rule, exact and clamped, is hp_f16_block_exp in hp_elem.h).
 *
 *   e_b = hp_f16_block_exp(largest |v| of block b as float bits)
 *   h_i = hp_f16_enc(v_i, 2^e_b): round to nearest even, +-65504 at most
 *   decode: hp_f16_dec(h_i, 2^-e_b) = h_i * 2^-e_b
 *
 * Payload (nb = ceil(n/B) blocks): n little-endian binary16 values, then nb
 * signed bytes e_b; 2n + nb bytes.  Blocks start at element 0 of the
 * message; the algorithms start every message on a multiple of B (the
 * grain), so a block sits at the same absolute elements whatever the
 * partitioning, and the bytes of a call do not depend on it.
 *
 * A decoder rejects: a length other than 2n + nb; e outside [HP_F16_EMIN,
 * HP_F16_EMAX]; a NaN or Inf half (the encoder sends NaN/Inf input as a
 * non-finite message and never rounds a finite value to Inf); and a block
 * that breaks the rule: e < HP_F16_EMAX with no half in [2^15, 65504] (the
 * encoder puts the block's largest there), or all halves +-0 with e other
 * than 0 or HP_F16_EMAX (a block of float subnormals has e = HP_F16_EMAX,
 * and under a denormals-are-zero mode (DAZ) the multiply reads them as 0).
 *
 * Passes per block: the largest |v| (which also finds NaN/Inf), then the
 * conversion while the block is in cache.
 */
#include "hp_comp.h"
#include "hp_ops.h"

static uint32_t block_of(const hipress_comp_params_t *p)
{
    /* 0: the default (the field is unset by callers built before it) */
    return p != NULL && p->fp16_block != 0 ? p->fp16_block : 1024u;
}

static int block_ok(uint32_t b)
{
    return b >= 32 && (b & (b - 1)) == 0;
}

static size_t payload_bytes(size_t n, uint32_t b)
{
    return 2 * n + (n + b - 1) / b;
}

static size_t fp16_max_payload(size_t n, const hipress_comp_params_t *p)
{
    uint32_t b = block_of(p);
    return payload_bytes(n, block_ok(b) ? b : 32);
}

static size_t fp16_grain(const hipress_comp_params_t *p)
{
    uint32_t b = block_of(p);
    return block_ok(b) ? b : 1;
}

static int fp16_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    const hp_ops_t *ops = hp_ops_get(a->params ? a->params->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(a->params);
    const size_t n = a->n;
    uint8_t *halves = (uint8_t *)a->out, *exps;

    if (!block_ok(B))
        return HIPRESS_COMP_EINVAL;
    if (a->out_cap < payload_bytes(n, B))
        return HIPRESS_COMP_ENOSPC;
    exps = halves + 2 * n;
    *nonfinite_p = 0;
    for (size_t s = 0, b = 0; s < n; s += B, b++) {
        size_t len = HP_MIN((size_t)B, n - s);
        uint32_t m = ops->absmax(a->in + s, len);
        int e;
        if (m >= 0x7f800000u) {
            *nonfinite_p = 1; /* the framework sends the non-finite message */
            return HIPRESS_COMP_OK;
        }
        e = hp_f16_block_exp(m);
        exps[b] = (uint8_t)(int8_t)e;
        ops->f32_to_f16(a->in + s, len, hp_exp2i(e), halves + 2 * s);
    }
    *len_p = payload_bytes(n, B);
    return HIPRESS_COMP_OK;
}

static int fp16_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                       const hipress_comp_params_t *p)
{
    const hp_ops_t *ops = hp_ops_get(p ? p->isa : HP_ISA_AUTO);
    const uint32_t B = block_of(p);
    const uint8_t *halves = (const uint8_t *)payload, *exps;

    if (!block_ok(B) || len != payload_bytes(n, B))
        return HIPRESS_COMP_EINVAL;
    exps = halves + 2 * n;
    for (size_t b = 0; b < (n + B - 1) / B; b++) {
        int e = (int8_t)exps[b];
        if (e < HP_F16_EMIN || e > HP_F16_EMAX)
            return HIPRESS_COMP_EINVAL;
    }
    /* validated block by block as it is written (a rejected message leaves
     * out unspecified, as hp_msg_decode documents) */
    for (size_t s = 0, b = 0; s < n; s += B, b++) {
        int e = (int8_t)exps[b];
        unsigned mx = ops->f16_to_f32(halves + 2 * s, HP_MIN((size_t)B, n - s), hp_exp2i(-e),
                                      out + s, accumulate ? HP_OUT_ADD : HP_OUT_SET);
        if (mx >= 0x7c00u || (mx == 0 && e != 0 && e != HP_F16_EMAX) ||
            (mx != 0 && mx < 0x7800u && e < HP_F16_EMAX))
            return HIPRESS_COMP_EINVAL;
    }
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

/* The device format (cuda/codec/hp_codec_half.c): blocks of B. */
static hp_status_t fp16_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    const uint32_t b = block_of(p);
    (void)k;
    if (!block_ok(b))
        return HP_ERR_INVALID;
    f->id = HP_GPU_FMT_FP16;
    f->block = b;
    f->payload = payload_bytes(n, b);
    return HP_OK;
}

const hp_comp_ext_t hp_compx_fp16 = {
    .qclass = HP_QCLASS_ROUNDING,
    .max_stages = 0,   /* every algorithm equal to plain (doc/accuracy.md) */
    .grain = fp16_grain,
    .gpu_fmt = fp16_gpu_fmt,
    .owner_free = 1,   /* rounding to float16/bfloat16 (or none) costs an owner stage nothing */
};
