/*
 * The sparse message payload (see hp_ops_sparse.h): per block of
 * HIPRESS_SPARSE_BLOCK elements, the top-k (index, value) pairs the
 * operators of hp_ops_sparse.c select, and its validating decoder; the
 * block size, k per block and the largest payload, and dgc's density
 * warm-up.  This file uses the operators; they use nothing of it.
 */
#include "hp_ops_sparse.h"
#include "hp_ops.h"
#include "hp_elem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- encode */

size_t hp_sparse_grain(const hipress_comp_params_t *params)
{
    uint32_t g = params != NULL ? params->sparse_block : 0;
    /* 0: parameters from a caller built before the field existed */
    return g >= 32 && (g & (g - 1)) == 0 ? g : HP_SPARSE_DEFAULT_BLOCK;
}

size_t hp_sparse_k_blocks(size_t n, const hipress_comp_params_t *params)
{
    const size_t g = hp_sparse_grain(params);
    size_t k = 0;
    for (size_t off = 0; off < n; off += g)
        k += hp_sparse_k(n - off < g ? n - off : g, 0, params);
    return k;
}

size_t hp_sparse_max_payload(size_t n, const hipress_comp_params_t *params)
{
    return 8 * hp_sparse_k_blocks(n, params);
}

double hp_dgc_density(double ratio, uint32_t warmup, unsigned long long call)
{
    const double start = 0.25;
    double d;
    if (warmup == 0 || call >= warmup || !(ratio < start))
        return ratio;
    d = start * pow(ratio / start, (double)call / (double)warmup);
    return d > ratio ? d : ratio;
}

/* One block: top-k of n elements (k given), input known finite when the
 * block writes state.  The payload's indices are relative to the block. */
static int encode_block(const hipress_encode_args_t *a, const hp_sparse_src_t *src, float *r_out,
                        float *u_out, size_t k, int isa, size_t *out_len_p, int *nonfinite_p)
{
    const size_t n = a->n;
    const double sratio = a->params != NULL ? a->params->sample_ratio : HP_SPARSE_DEFAULT_SAMPLE;
    const int writes = r_out != NULL || u_out != NULL;
    hp_sparse_src_t post; /* v after the fused pass: read back from memory */
    size_t s = 0, m = 0;
    uint32_t *idx = NULL, *scratch = NULL, thr;
    uint64_t key;
    int level = 0, exact, first = 1, bad = 0, rc = HIPRESS_COMP_OK;

    *out_len_p = 0;
    *nonfinite_p = 0;
    if (n == 0)
        return HIPRESS_COMP_OK;
    key = hp_rng_key(a->rng_key);

    /* small partitions, or a sample so large it would be most of them */
    exact = n <= HP_SPARSE_EXACT_N || hp_sparse_sample_size(n, sratio) * 2 >= n;
    if (exact) {
        thr = 1;
    } else {
        scratch = (uint32_t *)malloc(2 * hp_sparse_sample_size(n, sratio) * sizeof(uint32_t));
        if (scratch == NULL)
            return HIPRESS_COMP_ENOMEM;
        thr = hp_sparse_threshold(src, n, k, sratio, key, a->rng_offset, 0, scratch, &s);
    }
    /* room for every index, so the fused pass never stops halfway; only the
     * pages the candidates touch are ever used */
    idx = (uint32_t *)malloc(n * sizeof(uint32_t));
    if (idx == NULL) {
        rc = HIPRESS_COMP_ENOMEM;
        goto out;
    }

    post = *src;
    if (writes) {
        post.g = r_out != NULL ? r_out : u_out;
        post.r = NULL;
        post.u = NULL;
    }
    for (;;) {
        size_t pos = 0;
        if (first && writes)
            m = hp_sparse_filter_commit(src, r_out, u_out, n, thr, &pos, idx, n, &bad, isa);
        else
            m = hp_sparse_filter(&post, n, thr, &pos, idx, n, &bad, isa);
        if (first && bad) {
            /* finite input, but v overflowed: the NaN message, and error
             * feedback starts again from zero (what overflowed cannot be
             * kept, and the old values are gone) */
            *nonfinite_p = 1;
            if (r_out != NULL)
                memset(r_out, 0, n * sizeof(float));
            if (u_out != NULL)
                memset(u_out, 0, n * sizeof(float));
            goto out;
        }
        first = 0;
        if (m >= k || thr <= 1)
            break;
        /* fewer than k passed: lower the threshold (deeper in the same
         * sample, read back from the stored v) */
        {
            uint32_t t;
            do {
                t = hp_sparse_threshold(&post, n, k, sratio, key, a->rng_offset, ++level, scratch, &s);
            } while (t >= thr && t > 1);
            thr = t;
        }
    }

    if (m > k) {
        /* scratch for 2m magnitudes: the unused tail of idx when it is long
         * enough (the usual case: m is a small fraction of n).  Should the
         * allocation fail, v stays whole in the residual, so nothing is
         * lost: the next call sends it. */
        const int own = 3 * m > n;
        uint32_t *tk = own ? (uint32_t *)malloc(2 * m * sizeof(uint32_t)) : idx + m;
        if (tk == NULL) {
            rc = HIPRESS_COMP_ENOMEM;
            goto out;
        }
        m = hp_sparse_topk(&post, idx, m, k, tk);
        if (own)
            free(tk);
    }
    hp_sparse_pack(&post, idx, m, a->out);
    hp_sparse_mask(r_out, u_out, idx, m);
    *out_len_p = 8 * m;
out:
    free(idx);
    free(scratch);
    return rc;
}

int hp_sparse_encode(const hipress_encode_args_t *a, const hp_sparse_src_t *src, float *r_out,
                     float *u_out, size_t *out_len_p, int *nonfinite_p)
{
    const size_t n = a->n;
    /* an explicit k selects over the whole range; otherwise per block */
    const size_t g = a->k != 0 ? n : hp_sparse_grain(a->params);
    const int writes = r_out != NULL || u_out != NULL;
    size_t ktot, used = 0;
    int isa;

    *out_len_p = 0;
    *nonfinite_p = 0;
    if (n == 0)
        return HIPRESS_COMP_OK;
    if (n > UINT32_MAX || a->in == NULL || a->out == NULL || r_out != src->r || u_out != src->u)
        return HIPRESS_COMP_EINVAL;
    ktot = a->k != 0 ? hp_sparse_k(n, a->k, a->params) : hp_sparse_k_blocks(n, a->params);
    if (a->out_cap < 8 * ktot)
        return HIPRESS_COMP_ENOSPC;
    isa = hp_isa_resolve(a->params != NULL ? a->params->isa : HP_ISA_AUTO);

    /* NaN / Inf in the input: the NaN message, residual and state as they
     * were.  Checked first so the blocks below may write as they go. */
    if (writes && hp_ops_get(isa)->nonfinite(a->in, n)) {
        *nonfinite_p = 1;
        return HIPRESS_COMP_OK;
    }
    for (size_t off = 0; off < n; off += g) {
        hipress_encode_args_t b = *a;
        hp_sparse_src_t bs = *src;
        size_t len = 0;
        int rc;
        b.in = a->in + off;
        b.n = n - off < g ? n - off : g;
        b.out = (unsigned char *)a->out + used;
        b.out_cap = a->out_cap - used;
        b.rng_offset = a->rng_offset + off;
        bs.g = src->g + off;
        bs.r = src->r != NULL ? src->r + off : NULL;
        bs.u = src->u != NULL ? src->u + off : NULL;
        rc = encode_block(&b, &bs, r_out != NULL ? r_out + off : NULL,
                          u_out != NULL ? u_out + off : NULL,
                          a->k != 0 ? ktot : hp_sparse_k(b.n, 0, a->params), isa, &len,
                          nonfinite_p);
        if (rc != HIPRESS_COMP_OK || *nonfinite_p) {
            /* a block whose v overflowed resets error feedback (the message
             * decodes to NaN): all of it, as for one block */
            if (*nonfinite_p) {
                if (r_out != NULL)
                    memset(r_out, 0, n * sizeof(float));
                if (u_out != NULL)
                    memset(u_out, 0, n * sizeof(float));
            }
            *out_len_p = 0;
            return rc;
        }
        if (off != 0) {
            /* indices relative to the block become relative to the message */
            unsigned char *o = (unsigned char *)b.out;
            for (size_t j = 0; j < len / 8; j++) {
                uint32_t i;
                memcpy(&i, o + 8 * j, 4);
                i += (uint32_t)off;
                memcpy(o + 8 * j, &i, 4);
            }
        }
        used += len;
    }
    *out_len_p = used;
    return HIPRESS_COMP_OK;
}

/* --------------------------------------------------------------- decode */

int hp_sparse_decode(const void *payload, size_t len, size_t n, float *out, int accumulate)
{
    const unsigned char *p = (const unsigned char *)payload;
    const size_t m = len / 8;
    size_t next = 0; /* smallest index the next pair may carry */

    if (len % 8 != 0 || m > n || (len > 0 && payload == NULL) || (n > 0 && out == NULL))
        return HIPRESS_COMP_EINVAL;
    for (size_t j = 0; j < m; j++) {
        uint32_t i, vb;
        memcpy(&i, p + 8 * j, 4);
        memcpy(&vb, p + 8 * j + 4, 4);
        if ((size_t)i < next || (size_t)i >= n || (vb & HP_SPARSE_NONFINITE_BITS) == HP_SPARSE_NONFINITE_BITS)
            return HIPRESS_COMP_EINVAL;
        next = (size_t)i + 1;
    }
    if (!accumulate)
        memset(out, 0, n * sizeof(float));
    if (accumulate) {
        for (size_t j = 0; j < m; j++) {
            uint32_t i;
            float v;
            memcpy(&i, p + 8 * j, 4);
            memcpy(&v, p + 8 * j + 4, 4);
            out[i] = hp_canon(out[i] + v);   /* out may hold NaN: the kernels' store */
        }
    } else {
        for (size_t j = 0; j < m; j++) {
            uint32_t i;
            float v;
            memcpy(&i, p + 8 * j, 4);
            memcpy(&v, p + 8 * j + 4, 4);
            out[i] = v;
        }
    }
    return HIPRESS_COMP_OK;
}
