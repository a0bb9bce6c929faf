/*
 * `graddrop` (EF, sparse): v = g + residual; send the elements of largest |v|
 * -- at most k = ceil(n * HIPRESS_SPARSE_RATIO), or the k the framework asks
 * for when it re-encodes an aggregate -- as sorted (index, value) pairs, with
 * a threshold estimated from a random sample (HIPRESS_SAMPLE_RATIO) and an
 * exact top-k when more than k pass it; the residual keeps v with the sent
 * entries zeroed.
 */
#include "hp_comp.h"
#include "hp_ops_sparse.h"

static size_t graddrop_max_payload(size_t n, const hipress_comp_params_t *p)
{
    return hp_sparse_max_payload(n, p);
}

static int graddrop_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    hp_sparse_src_t src = {.g = a->in, .r = a->residual, .u = NULL, .m = 0.0f};
    return hp_sparse_encode(a, &src, a->residual, NULL, len_p, nonfinite_p);
}

static int graddrop_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                           const hipress_comp_params_t *p)
{
    (void)p;
    return hp_sparse_decode(payload, len, n, out, accumulate);
}

const hipress_compressor_v1_t hp_comp_graddrop = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "graddrop",
    .flags = HIPRESS_COMP_EF | HIPRESS_COMP_SPARSE,
    .max_payload = graddrop_max_payload,
    .encode = graddrop_encode,
    .decode = graddrop_decode,
};

/* The device format of the sparse messages (cuda/codec/hp_codec_sparse.c), dgc's
 * too: blocks of G, the k of each from the settings.  A k of the encode's
 * own (an aggregate re-encoded at the density of its contributors) has no
 * device form: the kernels keep the k of the settings. */
hp_status_t hp_sparse_gpu_fmt(const hipress_comp_params_t *p, size_t n, size_t k, hp_gpu_fmt_t *f)
{
    const size_t G = hp_sparse_grain(p);
    if (k != 0)
        return HP_ERR_UNSUPPORTED;
    f->id = HP_GPU_FMT_SPARSE;
    f->block = (uint32_t)G;
    f->iarg[0] = (uint32_t)hp_sparse_k(G, 0, p);
    f->iarg[1] = n % G ? (uint32_t)hp_sparse_k(n % G, 0, p) : 0;
    f->iarg[2] = (uint32_t)hp_kind_none;   /* the dense fallback's kind: a device decoder takes it */
    f->payload = hp_sparse_max_payload(n, p);
    return HP_OK;
}

const hp_comp_ext_t hp_compx_graddrop = {
    .qclass = HP_QCLASS_SPARSE,
    .max_stages = 2,   /* ps, tree and ring within the noise of the textbook form (doc/accuracy.md) */
    .grain = hp_sparse_grain,
    .gpu_fmt = hp_sparse_gpu_fmt,
    .unbiased = hp_unbiased_dense_q,   /* staging buffers: as dgc's (doc/compressors.md, 'Staging buffers') */
    .sgd_only = 1,
};
