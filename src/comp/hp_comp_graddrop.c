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

const hp_comp_ext_t hp_compx_graddrop = {
    .qclass = HP_QCLASS_SPARSE,
    .max_stages = 2,   /* ps, tree and ring within the noise of the textbook form (doc/accuracy.md) */
    .grain = hp_sparse_grain,
    .gpu = HP_GPU_FMT_SPARSE,
};
