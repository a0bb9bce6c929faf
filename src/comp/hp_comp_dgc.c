/*
 * `dgc` (EF, sparse, momentum): deep gradient compression's momentum
 * correction on top of graddrop.  With u the momentum state and v the
 * residual: u = m * u + g; v = v + u; send the elements of largest |v| as
 * graddrop does, then zero u and v at the sent indices (momentum factor
 * masking), m = HIPRESS_DGC_MOMENTUM.  The momentum lives here, so it is meant
 * for a momentum-free optimizer.  Same payload and decoder as graddrop.
 */
#include "hp_comp.h"
#include "hp_ops_sparse.h"

static size_t dgc_max_payload(size_t n, const hipress_comp_params_t *p)
{
    return hp_sparse_max_payload(n, p);
}

static int dgc_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    /* default HIPRESS_DGC_MOMENTUM when called without params */
    float m = a->params != NULL ? a->params->dgc_momentum : 0.9f;
    hp_sparse_src_t src = {.g = a->in, .r = a->residual, .u = a->state, .m = m};
    return hp_sparse_encode(a, &src, a->residual, a->state, len_p, nonfinite_p);
}

static int dgc_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                      const hipress_comp_params_t *p)
{
    (void)p;
    return hp_sparse_decode(payload, len, n, out, accumulate);
}

const hipress_compressor_v1_t hp_comp_dgc = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "dgc",
    .flags = HIPRESS_COMP_EF | HIPRESS_COMP_SPARSE | HIPRESS_COMP_MOMENTUM,
    .max_payload = dgc_max_payload,
    .encode = dgc_encode,
    .decode = dgc_decode,
};

static float dgc_momentum(const hipress_comp_params_t *p)
{
    return p != NULL ? p->dgc_momentum : 0.0f;
}

/* DGC's warm-up: the density falls geometrically from 25% to
 * HIPRESS_SPARSE_RATIO over the first HIPRESS_DGC_WARMUP calls on a buffer. */
static void dgc_call_params(hipress_comp_params_t *p, unsigned long long call)
{
    p->sparse_ratio = hp_dgc_density(p->sparse_ratio, p->dgc_warmup, call);
}

/* The device format: graddrop's, with the momentum of the state. */
static hp_status_t dgc_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    hp_status_t st = hp_sparse_gpu_fmt(p, n, k, f);
    f->farg[0] = p->dgc_momentum;
    return st;
}

const hp_comp_ext_t hp_compx_dgc = {
    .qclass = HP_QCLASS_SPARSE,
    .max_stages = 2,   /* as graddrop (doc/accuracy.md) */
    .grain = hp_sparse_grain,
    .momentum = dgc_momentum,
    .call_params = dgc_call_params,
    .gpu_fmt = dgc_gpu_fmt,
    .unbiased = hp_unbiased_dense_q,   /* staging buffers: top-k is biased; unbiased random-k at this density has a variance of 1/ratio: a dense q codec (doc/compressors.md, 'Staging buffers') */
    .sgd_only = 1,
};
