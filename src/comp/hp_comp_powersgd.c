/*
 * `powersgd`: rank-r power-iteration compression (Vogels et al., NeurIPS'19),
 * a collective compressor (HIPRESS_COMP_COLLECTIVE): a call is its own two
 * small allreduces instead of a CaSync algorithm.  This file holds its math
 * and its message: the shapes, the start Q, the orthonormalisation, the
 * host passes over the matrix (the reference the device passes follow), the
 * residual rule and the ABI encode/decode.  The runs of a call are in the
 * algorithm layer, one per backend (src/algo/hp_collectives.def):
 * src/algo/hp_algo_psgd.c on host memory, src/algo/hp_algo_psgd_dev.c on a
 * device buffer; src/comp/hp_psgd.h is what they share with this file.
 *
 * The n floats are read as a near-square m x c matrix M, row-major, padded
 * with zeros at the end of the last row (see hp_psgd_shape).  One call:
 *
 *   M = input + residual                      (error feedback, per rank)
 *   P = M Q                                   (Q: c x r, warm-started)
 *   P = sum over ranks of P                   (ring of `none`: same bits everywhere)
 *   P = orthonormalise(P)                     (deterministic, on identical input)
 *   Ql = M^T P;  Q = sum over ranks of Ql     (ring of `none`)
 *   result = P Q^T                            (identical inputs -> identical bits)
 *   residual = M - P Ql^T;  next warm start = Q
 *
 * Whatever P is, as long as it is orthonormal and the same on every rank,
 * result = P P^T (sum of M) and the residuals sum to (I - P P^T)(sum of M),
 * so error feedback loses nothing even when ranks' warm starts differ.
 *
 * Layouts: P is m x r row-major (row i = the r coefficients of matrix row i);
 * Q is kept transposed, r x c row-major ("qt"), so that every kernel runs
 * along matrix rows with unit stride.  The products run on the operator
 * layer's low-rank kernels (hp_ops_t lr_dot, lr_axpy, lr_recon: a generic
 * and an AVX2 path, HIPRESS_ISA), without BLAS: they run in the caller's
 * thread, never change a BLAS thread count the application relies on, and
 * give the same bits on every rank and ISA: no contraction, and one
 * summation order per product --
 *   M Q:     per column tile, 8 lanes (lane l takes elements l, l+8, ...),
 *            the tail after the lanes, lanes combined as
 *            ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)); tiles added in order;
 *   M^T P:   each element adds its rows in row order;
 *   P Q^T:   each element adds its r terms in k order.
 * Only P Q^T must agree across ranks (its inputs do); the others are local
 * but deterministic too, so the ABI encoder is reproducible.
 *
 * The ABI encode/decode (for plugins' tooling, the fuzzers and the kernel
 * benchmark) is a local, single-rank factorisation message:
 *   u32 r | u32 m | u32 c | P: m*r floats (m x r) | Q^T: r*c floats (r x c)
 * and decodes to P Q^T.  r = 0 marks a call that would not shrink the data
 * (r (m + c) >= n): then the n values follow as plain floats.
 */
#include "hp_psgd.h"
#include "hp_elem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PSGD_SUBHDR 12              /* u32 r, m, c in front of an ABI payload */
#define PSGD_RNG_TAG 0x50534744u    /* "PSGD": fourth word of the Q start key */

/* A column of P whose component orthogonal to the columns before it is at
 * most this fraction of its own norm is taken as dependent and zeroed.  Float
 * rounding of P = M Q leaves about 1e-6 of a column's norm in directions it
 * does not really have (c = 4096); a hundred times that is still noise. */
#define PSGD_DEP_TOL 1e-4

/* ------------------------------------------------------------ geometry */

/* c = the power of two nearest to sqrt(n) (lo = the largest power of two
 * with lo^2 <= n; c = lo when n <= 2 lo^2, else 2 lo), m = ceil(n / c):
 * c^2 <= 2n, n < 2c^2, m c >= n, and the padding m c - n is less than one
 * row.  Rows of a power of two keep the matrix structure of the tensors in
 * a fused buffer whose rows are a multiple of c long (most layers' widths
 * are powers of two): a 1024 x 1024 weight at an offset that is a multiple
 * of 1024 is exactly a block of M.  n = 0 gives 0 x 0 and r = 0. */
void hp_psgd_shape(size_t n, uint32_t rank, size_t *m_p, size_t *c_p, size_t *r_p)
{
    size_t c = 0, m = 0, r;
    if (n > 0) {
        size_t lo = 1;
        while ((lo * 2) * (lo * 2) <= n)
            lo *= 2;
        c = n <= 2 * lo * lo ? lo : 2 * lo;
        m = (n + c - 1) / c;
    }
    r = rank;
    r = HP_MIN(r, m);
    r = HP_MIN(r, c);
    *m_p = m;
    *c_p = c;
    *r_p = r;
}

/* 1 when the factors are no smaller than the data: 4 r (m + c) >= 4 n. */
int hp_psgd_skip(size_t n, size_t m, size_t c, size_t r)
{
    return r == 0 || r * (m + c) >= n;
}

/* Bytes of one rank's message: h + 4 r (m + c), or h + 4 n when skipped. */
size_t hp_psgd_wire_bytes(size_t n, uint32_t rank)
{
    size_t m, c, r;
    hp_psgd_shape(n, rank, &m, &c, &r);
    return HP_MSG_HEADER + 4 * (hp_psgd_skip(n, m, c, r) ? n : r * (m + c));
}

uint32_t hp_psgd_rank(const hipress_comp_params_t *p)
{
    return p != NULL && p->powersgd_rank > 0 ? p->powersgd_rank : HP_PSGD_DEFAULT_RANK;
}

/* The kernels for HIPRESS_ISA (params->isa: 0 auto, 1 generic, 2 avx2): the
 * operator table of that level.  Both give the same bytes. */
const hp_ops_t *hp_psgd_kernels(const hipress_comp_params_t *params)
{
    return hp_ops_get(params != NULL ? params->isa : HP_ISA_AUTO);
}

/* ------------------------------------------------- orthonormalisation */

static double dot_d(const double *a, const double *b, size_t m)
{
    double s = 0.0;
    for (size_t i = 0; i < m; i++)
        s += a[i] * b[i];
    return s;
}

/* Orthonormalise the r columns of the m x r row-major matrix p in place:
 * modified Gram-Schmidt in double, each column projected twice against the
 * columns before it.  A column that is zero, or whose new component is at
 * most PSGD_DEP_TOL of its norm, becomes exactly zero (so rank-deficient and
 * zero inputs give orthonormal-or-zero columns, never NaN).  The input must
 * be finite.  work: m r doubles.  Returns the number of nonzero columns.
 * A pure function of p's bits: every rank computes the same result. */
size_t hp_psgd_orthonormalise(float *p, size_t m, size_t r, double *work)
{
    size_t kept = 0;
    for (size_t k = 0; k < r; k++)
        for (size_t i = 0; i < m; i++)
            work[k * m + i] = (double)p[i * r + k];
    for (size_t k = 0; k < r; k++) {
        double *v = work + k * m;
        double n0 = sqrt(dot_d(v, v, m)), nv = 0.0;
        if (n0 > 0.0) {
            for (int pass = 0; pass < 2; pass++)
                for (size_t j = 0; j < k; j++) {
                    const double *q = work + j * m;   /* unit or zero */
                    double d = dot_d(q, v, m);
                    for (size_t i = 0; i < m; i++)
                        v[i] -= d * q[i];
                }
            nv = sqrt(dot_d(v, v, m));
        }
        if (n0 > 0.0 && nv > PSGD_DEP_TOL * n0) {
            double s = 1.0 / nv;
            for (size_t i = 0; i < m; i++)
                v[i] *= s;
            kept++;
        } else {
            for (size_t i = 0; i < m; i++)
                v[i] = 0.0;
        }
    }
    for (size_t k = 0; k < r; k++)
        for (size_t i = 0; i < m; i++)
            p[i * r + k] = (float)work[k * m + i];
    return kept;
}

/* ------------------------------------------------------------ the power step */

/* The start Q (transposed, r x c) of a call: rows of a warm start scaled to
 * unit norm (the scale of a column of Q does not change the span of P, and
 * unit columns keep P = M Q from overflowing); rows that are zero, non-finite
 * or absent come from the counter RNG under a key without the rank, so every
 * rank draws the same.  Deterministic on identical warm starts. */
uint64_t hp_psgd_q_key(uint64_t seed, uint64_t call_no)
{
    const uint64_t key4[4] = {seed, 0, call_no, PSGD_RNG_TAG};
    return hp_rng_key(key4);
}

void hp_psgd_start_q(float *qt, const float *warm, size_t r, size_t c, uint64_t seed, uint64_t call_no)
{
    const uint64_t key = hp_psgd_q_key(seed, call_no);
    for (size_t k = 0; k < r; k++) {
        float *q = qt + k * c;
        double ss = 0.0;
        if (warm != NULL) {
            memcpy(q, warm + k * c, c * sizeof(float));
            for (size_t j = 0; j < c; j++)
                ss += (double)q[j] * (double)q[j];
        }
        if (!(ss > 0.0) || !isfinite(ss)) {
            ss = 0.0;
            for (size_t j = 0; j < c; j++) {
                q[j] = 2.0f * hp_rng_unit(key, (uint64_t)(k * c + j)) - 1.0f;
                ss += (double)q[j] * (double)q[j];
            }
        }
        if (ss > 0.0) {
            float s = (float)(1.0 / sqrt(ss));
            for (size_t j = 0; j < c; j++)
                q[j] *= s;
        }
    }
}

/* Rows of M: row i holds elements [i c, i c + len) of the buffer. */
static size_t row_len(size_t n, size_t c, size_t i)
{
    size_t off = i * c;
    return off + c <= n ? c : n - off;
}

/* Columns per tile of the passes: a tile of Q^T (r x T floats, about 128
 * KiB) stays in the L2 cache while the rows of M stream past it, so M is
 * read from memory once and Q^T from cache (for r = 4 and up to 8192
 * columns there is one tile). */
size_t hp_psgd_tile_cols(size_t r, size_t c)
{
    size_t t = (size_t)32768 / HP_MAX(r, 1);
    t = t < 64 ? 64 : t & ~(size_t)7;
    return HP_MIN(t, c);
}

/* The rows i .. i + nr - 1 that go through a pass together: up to four,
 * but the short last row (padding) on its own. */
static size_t row_group(size_t n, size_t m, size_t c, size_t i)
{
    size_t nr = HP_MIN(4, m - i);
    if (nr > 1 && row_len(n, c, i + nr - 1) < row_len(n, c, i))
        nr--;
    return nr;
}

/* P = M Q for M = a + b (b may be NULL), tile by tile (p: the sum over tiles
 * in tile order).  M is stored in mout as it is formed when mout is not
 * NULL (mout may be a); otherwise rowbuf (T floats) holds a + b.  Returns
 * nonzero when M holds NaN or Inf. */
int hp_psgd_pass_mq(const hp_ops_t *K, const float *a, const float *b, float *mout,
                    float *rowbuf, size_t n, size_t m, size_t c, size_t r, const float *qt,
                    float *p)
{
    const size_t T = hp_psgd_tile_cols(r, c);
    int bad = 0;
    memset(p, 0, m * r * sizeof(float));
    for (size_t j0 = 0; j0 < c; j0 += T)
        for (size_t i = 0; i < m; i++) {
            size_t len = row_len(n, c, i), off = i * c + j0, seg;
            const float *row;
            if (len <= j0)
                continue;
            seg = HP_MIN(T, len - j0);
            if (b != NULL) {
                float *dst = mout != NULL ? mout + off : rowbuf;
                K->add(a + off, b + off, dst, seg);
                bad |= K->nonfinite(dst, seg);
                row = dst;
            } else {
                if (mout != NULL && mout != a)
                    memcpy(mout + off, a + off, seg * sizeof(float));
                row = a + off;
                bad |= K->nonfinite(row, seg);
            }
            K->lr_dot(row, seg, qt + j0, c, r, p + i * r);
        }
    return bad;
}

/* qt = M^T P (r x c, transposed) for M = a + b (b may be NULL), streaming M
 * once, tile by tile, four rows at a time; every element of qt adds its
 * rows in row order.  rowbuf: 4 T floats, used when b is not NULL. */
void hp_psgd_pass_mtp(const hp_ops_t *K, const float *a, const float *b, float *rowbuf,
                      size_t n, size_t m, size_t c, size_t r, const float *p, float *qt)
{
    const size_t T = hp_psgd_tile_cols(r, c);
    memset(qt, 0, r * c * sizeof(float));
    for (size_t j0 = 0; j0 < c; j0 += T)
        for (size_t i = 0, nr; i < m; i += nr) {
            size_t len = row_len(n, c, i), seg;
            const float *rows[4];
            nr = row_group(n, m, c, i);
            if (len <= j0)
                continue;
            seg = HP_MIN(T, len - j0);
            for (size_t t = 0; t < nr; t++) {
                size_t off = (i + t) * c + j0;
                if (b != NULL) {
                    K->add(a + off, b + off, rowbuf + t * T, seg);
                    rows[t] = rowbuf + t * T;
                } else {
                    rows[t] = a + off;
                }
            }
            K->lr_axpy(rows, p + i * r, nr, seg, qt + j0, c, r);
        }
}

/* The reconstruction over the whole matrix, tile by tile (hp_ops_t.lr_recon
 * for the meaning of the arguments; out, ma, mb, res: n floats or NULL). */
void hp_psgd_pass_recon(const hp_ops_t *K, const float *p, size_t n, size_t m, size_t c,
                        size_t r, const float *qts, float *out, int accumulate,
                        const float *qtl, const float *ma, const float *mb, float *res,
                        void *scratch)
{
    const size_t T = hp_psgd_tile_cols(r, c);
    for (size_t j0 = 0; j0 < c; j0 += T)
        for (size_t i = 0, nr; i < m; i += nr) {
            size_t len = row_len(n, c, i), off = i * c + j0;
            nr = row_group(n, m, c, i);
            if (len <= j0)
                continue;
            K->lr_recon(p + i * r, nr, r, HP_MIN(T, len - j0), c, qts ? qts + j0 : NULL,
                        out ? out + off : NULL, accumulate, qtl ? qtl + j0 : NULL,
                        ma ? ma + off : NULL, mb ? mb + off : NULL, res ? res + off : NULL, c,
                        scratch);
        }
}

/* ---------------------------------------------------------- ABI encode */

static size_t psgd_max_payload(size_t n, const hipress_comp_params_t *params)
{
    size_t m, c, r;
    hp_psgd_shape(n, hp_psgd_rank(params), &m, &c, &r);
    return PSGD_SUBHDR + 4 * (hp_psgd_skip(n, m, c, r) ? n : r * (m + c));
}

static void put_u32(unsigned char *o, size_t v)
{
    uint32_t x = (uint32_t)v;
    memcpy(o, &x, 4);
}

static int psgd_encode(const hipress_encode_args_t *a, size_t *len_p, int *nonfinite_p)
{
    const size_t n = a->n;
    size_t m, c, r, need;
    unsigned char *o = (unsigned char *)a->out;
    const hp_ops_t *K = hp_psgd_kernels(a->params);
    float *p, *qt, *rowbuf;
    void *ws, *pk;
    double *work;
    int bad;

    hp_psgd_shape(n, hp_psgd_rank(a->params), &m, &c, &r);
    need = psgd_max_payload(n, a->params);
    if (n > UINT32_MAX)
        return HIPRESS_COMP_EINVAL;
    if (a->out_cap < need)
        return HIPRESS_COMP_ENOSPC;
    *nonfinite_p = 0;
    if (hp_psgd_skip(n, m, c, r)) {
        /* plain values: lossless, so the residual becomes zero */
        float v;
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            v = a->residual != NULL ? a->in[i] + a->residual[i] : a->in[i];
            bad |= hp_nonfinite(v);
            memcpy(o + PSGD_SUBHDR + 4 * i, &v, 4);
        }
        if (bad) {
            *nonfinite_p = 1;
            *len_p = 0;
            return HIPRESS_COMP_OK;
        }
        if (a->residual != NULL)
            memset(a->residual, 0, n * sizeof(float));
        put_u32(o, 0);
        put_u32(o + 4, m);
        put_u32(o + 8, c);
        *len_p = need;
        return HIPRESS_COMP_OK;
    }

    /* workspace: kernel scratch, m r doubles, P (m r), Q^T (r c), 4 rows */
    ws = hp_aligned_alloc(HP_PSGD_SCRATCH(r) + m * r * sizeof(double) + (m * r + r * c + 4 * c) * sizeof(float));
    if (ws == NULL)
        return HIPRESS_COMP_ENOMEM;
    pk = ws;
    work = (double *)((char *)ws + HP_PSGD_SCRATCH(r));
    p = (float *)(work + m * r);
    qt = p + m * r;
    rowbuf = qt + r * c;

    hp_psgd_start_q(qt, NULL, r, c, a->rng_key[0], a->rng_key[2]);
    bad = hp_psgd_pass_mq(K, a->in, a->residual, NULL, rowbuf, n, m, c, r, qt, p);
    if (!bad)
        bad = K->nonfinite(p, m * r);
    if (!bad) {
        hp_psgd_orthonormalise(p, m, r, work);
        hp_psgd_pass_mtp(K, a->in, a->residual, rowbuf, n, m, c, r, p, qt);
        bad = K->nonfinite(qt, r * c);
    }
    if (bad) {
        free(ws);
        *nonfinite_p = 1;
        *len_p = 0;
        return HIPRESS_COMP_OK;
    }
    if (a->residual != NULL)    /* residual = (in + residual) - P Q^T */
        hp_psgd_pass_recon(K, p, n, m, c, r, NULL, NULL, 0, qt, a->in, a->residual, a->residual, pk);
    put_u32(o, r);
    put_u32(o + 4, m);
    put_u32(o + 8, c);
    memcpy(o + PSGD_SUBHDR, p, m * r * sizeof(float));
    memcpy(o + PSGD_SUBHDR + 4 * m * r, qt, r * c * sizeof(float));
    free(ws);
    *len_p = need;
    return HIPRESS_COMP_OK;
}

/* ---------------------------------------------------------- ABI decode */

static int psgd_decode(const void *payload, size_t len, size_t n, float *out, int accumulate,
                       const hipress_comp_params_t *params)
{
    const unsigned char *in = (const unsigned char *)payload;
    const hp_ops_t *K = hp_psgd_kernels(params);
    uint32_t r32, m32, c32;
    size_t m, c, r0, r, nf;
    float *f;
    void *mem;

    if (payload == NULL || len < PSGD_SUBHDR || n > UINT32_MAX)
        return HIPRESS_COMP_EINVAL;
    memcpy(&r32, in, 4);
    memcpy(&m32, in + 4, 4);
    memcpy(&c32, in + 8, 4);
    hp_psgd_shape(n, 0, &m, &c, &r0);
    r = r32;
    if (m32 != m || c32 != c)
        return HIPRESS_COMP_EINVAL;
    if (r == 0) {
        nf = n;
    } else {
        if (r > HP_MIN(m, c) || hp_psgd_skip(n, m, c, r))
            return HIPRESS_COMP_EINVAL;
        nf = r * (m + c);
    }
    if (len - PSGD_SUBHDR != 4 * nf)
        return HIPRESS_COMP_EINVAL;
    /* copy to aligned memory, validating before anything is written */
    mem = hp_aligned_alloc(HP_PSGD_SCRATCH(r) + HP_MAX(nf, 1) * sizeof(float));
    if (mem == NULL)
        return HIPRESS_COMP_ENOMEM;
    f = (float *)((char *)mem + HP_PSGD_SCRATCH(r));
    memcpy(f, in + PSGD_SUBHDR, nf * sizeof(float));
    if (K->nonfinite(f, nf)) {
        free(mem);
        return HIPRESS_COMP_EINVAL;
    }
    if (r == 0) {
        for (size_t i = 0; i < n; i++)
            out[i] = accumulate ? out[i] + f[i] : f[i];
    } else {
        hp_psgd_pass_recon(K, f, n, m, c, r, f + m * r, out, accumulate, NULL, NULL, NULL, NULL,
                           mem);
    }
    free(mem);
    return HIPRESS_COMP_OK;
}

const hipress_compressor_v1_t hp_comp_powersgd = {
    .abi_version = HIPRESS_COMPRESSOR_ABI_VERSION,
    .name = "powersgd",
    .flags = HIPRESS_COMP_EF | HIPRESS_COMP_COLLECTIVE,
    .max_payload = psgd_max_payload,
    .encode = psgd_encode,
    .decode = psgd_decode,
};

const hp_comp_ext_t hp_compx_powersgd = {
    .qclass = HP_QCLASS_LOWRANK,
    .gpu = HP_GPU_FMT_POWERSGD,
    .max_stages = 0,   /* its own exchange, one stage (doc/accuracy.md) */
    .unbiased = hp_unbiased_dense_q,   /* staging buffers: a low-rank projection is biased: a dense q codec (doc/compressors.md, 'Staging buffers') */
    .sgd_only = 1,
};
