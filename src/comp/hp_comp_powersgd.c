/*
 * `powersgd`: rank-r power-iteration compression (Vogels et al., NeurIPS'19),
 * a collective compressor (HIPRESS_COMP_COLLECTIVE): it drives its own two
 * small allreduces instead of running under a CaSync algorithm.
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
 * along matrix rows with unit stride.  The kernels are C on GCC vector types
 * (a generic SSE path and an AVX2 path, HIPRESS_ISA), without BLAS: they run
 * in the caller's thread, never change a BLAS thread count the application
 * relies on, and give the same bits on every rank and ISA: no contraction,
 * and one summation order per product --
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
#include "hp_algo.h"
#include "hp_elem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PSGD_DEFAULT_RANK 4
#define PSGD_SUBHDR 12              /* u32 r, m, c in front of an ABI payload */
#define PSGD_RNG_TAG 0x50534744u    /* "PSGD": fourth word of the Q start key */
/* A column of P whose component orthogonal to the columns before it is at
 * most this fraction of its own norm is taken as dependent and zeroed.  Float
 * rounding of P = M Q leaves about 1e-6 of a column's norm in directions it
 * does not really have (c = 4096); a hundred times that is still noise. */
#define PSGD_DEP_TOL 1e-4

/* Internal API, also used by tests/check_comp_powersgd.c. */
void hp_psgd_shape(size_t n, uint32_t rank, size_t *m_p, size_t *c_p, size_t *r_p);
int hp_psgd_skip(size_t n, size_t m, size_t c, size_t r);
size_t hp_psgd_wire_bytes(size_t n, uint32_t rank);
size_t hp_psgd_orthonormalise(float *p, size_t m, size_t r, double *work);
/* Also used by the device run (src/backend/hp_gpu_psgd.c), which follows the same
 * steps with the same summation orders. */
void hp_psgd_start_q(float *qt, const float *warm, size_t r, size_t c, uint64_t seed, uint64_t call_no);
size_t hp_psgd_tile_cols(size_t r, size_t c);
hp_status_t hp_psgd_ring_sum(hp_call_t *call, float *v, size_t len, int host, int corrupt, hp_status_t err);

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

static uint32_t param_rank(const hipress_comp_params_t *p)
{
    return p != NULL && p->powersgd_rank > 0 ? p->powersgd_rank : PSGD_DEFAULT_RANK;
}

/* ------------------------------------------------------------- kernels */

/* 16-byte vectors, native to every x86-64 (GCC keeps 32-byte vectors in
 * memory without AVX).  The 8 lanes of the summation order are a pair of
 * them: lo = lanes 0-3, hi = lanes 4-7. */
typedef float v4f __attribute__((vector_size(16)));

static inline v4f ld4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline void st4(float *p, v4f v)
{
    memcpy(p, &v, sizeof(v));
}

static inline v4f bc4(float x)
{
    return (v4f){x, x, x, x};
}

static inline float hsum8(v4f lo, v4f hi)
{
    return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
}

/* Non-finite tests: x - x is 0 for a finite x and NaN for NaN or Inf, so a
 * sum of them says whether any value was non-finite, without a branch per
 * element. */

/* Any NaN or Inf in v[0..len)? */
static int row_check(const float *v, size_t len)
{
    v4f bl = bc4(0.0f), bh = bl;
    float sbad = 0.0f;
    size_t j = 0;
    for (; j + 8 <= len; j += 8) {
        v4f vl = ld4(v + j), vh = ld4(v + j + 4);
        bl += vl - vl;
        bh += vh - vh;
    }
    for (; j < len; j++)
        sbad += v[j] - v[j];
    return hsum8(bl, bh) + sbad != 0.0f;
}

/* dst[0..len) = a + b (dst may be a or b); nonzero when a sum is NaN or Inf. */
static int row_add(float *dst, const float *a, const float *b, size_t len)
{
    v4f bl = bc4(0.0f), bh = bl;
    float sbad = 0.0f;
    size_t j = 0;
    for (; j + 8 <= len; j += 8) {
        v4f vl = ld4(a + j) + ld4(b + j), vh = ld4(a + j + 4) + ld4(b + j + 4);
        bl += vl - vl;
        bh += vh - vh;
        st4(dst + j, vl);
        st4(dst + j + 4, vh);
    }
    for (; j < len; j++) {
        float v = a[j] + b[j];
        sbad += v - v;
        dst[j] = v;
    }
    return hsum8(bl, bh) + sbad != 0.0f;
}

/* p[k] += sum_j row[j] qt[k ld + j], k < r (one row of a tile of M Q). */
static void row_dot(const float *row, size_t len, const float *qt, size_t ld, size_t r, float *p)
{
    size_t k = 0;
    for (; k + 4 <= r; k += 4) {
        const float *q0 = qt + k * ld, *q1 = q0 + ld, *q2 = q1 + ld, *q3 = q2 + ld;
        v4f a0l = bc4(0.0f), a0h = a0l, a1l = a0l, a1h = a0l;
        v4f a2l = a0l, a2h = a0l, a3l = a0l, a3h = a0l;
        float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
        size_t j = 0;
        for (; j + 8 <= len; j += 8) {
            v4f xl = ld4(row + j), xh = ld4(row + j + 4);
            a0l += xl * ld4(q0 + j);
            a0h += xh * ld4(q0 + j + 4);
            a1l += xl * ld4(q1 + j);
            a1h += xh * ld4(q1 + j + 4);
            a2l += xl * ld4(q2 + j);
            a2h += xh * ld4(q2 + j + 4);
            a3l += xl * ld4(q3 + j);
            a3h += xh * ld4(q3 + j + 4);
        }
        for (; j < len; j++) {
            t0 += row[j] * q0[j];
            t1 += row[j] * q1[j];
            t2 += row[j] * q2[j];
            t3 += row[j] * q3[j];
        }
        p[k] += hsum8(a0l, a0h) + t0;
        p[k + 1] += hsum8(a1l, a1h) + t1;
        p[k + 2] += hsum8(a2l, a2h) + t2;
        p[k + 3] += hsum8(a3l, a3h) + t3;
    }
    for (; k < r; k++) {
        const float *q0 = qt + k * ld;
        v4f a0l = bc4(0.0f), a0h = a0l;
        float t0 = 0.0f;
        size_t j = 0;
        for (; j + 8 <= len; j += 8) {
            a0l += ld4(row + j) * ld4(q0 + j);
            a0h += ld4(row + j + 4) * ld4(q0 + j + 4);
        }
        for (; j < len; j++)
            t0 += row[j] * q0[j];
        p[k] += hsum8(a0l, a0h) + t0;
    }
}

/* qt[k ld + j] += sum over the nr (<= 4) rows, in row order, of
 * p[i r + k] rows[i][j] (rows of M times rows of P: M^T P, streamed by row;
 * four rows per pass over qt keep its traffic low). */
static void rows_axpy(const float *const *rows, const float *p, size_t nr, size_t len,
                      float *qt, size_t ld, size_t r)
{
    for (size_t k = 0; k < r; k++) {
        float *q = qt + k * ld;
        size_t j = 0;
        if (nr == 4) {
            const float *x0 = rows[0], *x1 = rows[1], *x2 = rows[2], *x3 = rows[3];
            const float c0 = p[k], c1 = p[r + k], c2 = p[2 * r + k], c3 = p[3 * r + k];
            const v4f b0 = bc4(c0), b1 = bc4(c1), b2 = bc4(c2), b3 = bc4(c3);
            for (; j + 8 <= len; j += 8) {
                v4f al = ld4(q + j), ah = ld4(q + j + 4);
                al += ld4(x0 + j) * b0;
                ah += ld4(x0 + j + 4) * b0;
                al += ld4(x1 + j) * b1;
                ah += ld4(x1 + j + 4) * b1;
                al += ld4(x2 + j) * b2;
                ah += ld4(x2 + j + 4) * b2;
                al += ld4(x3 + j) * b3;
                ah += ld4(x3 + j + 4) * b3;
                st4(q + j, al);
                st4(q + j + 4, ah);
            }
            for (; j < len; j++) {
                float a = q[j];
                a += x0[j] * c0;
                a += x1[j] * c1;
                a += x2[j] * c2;
                a += x3[j] * c3;
                q[j] = a;
            }
        } else {
            for (size_t i = 0; i < nr; i++) {
                const float *x = rows[i];
                const float ci = p[i * r + k];
                const v4f bi = bc4(ci);
                for (j = 0; j + 4 <= len; j += 4)
                    st4(q + j, ld4(q + j) + ld4(x + j) * bi);
                for (; j < len; j++)
                    q[j] += x[j] * ci;
            }
        }
    }
}

/* Reconstruction P Q^T.  Every element is sum_k p[k] qt[k ld + j] in k
 * order, first term p[0] qt[j]; the blocked and the single-row paths below
 * both follow it, so a value does not depend on which path made it. */

/* Four columns of one row; pk: the row's coefficients, broadcast. */
static inline v4f recon4(const v4f *pk, size_t r, const float *qt, size_t ld, size_t j)
{
    v4f v = pk[0] * ld4(qt + j);
    for (size_t k = 1; k < r; k++)
        v += pk[k] * ld4(qt + k * ld + j);
    return v;
}

static inline float recon1(const float *p, size_t r, const float *qt, size_t ld, size_t j)
{
    float v = p[0] * qt[j];
    for (size_t k = 1; k < r; k++)
        v += p[k] * qt[k * ld + j];
    return v;
}

/* Eight columns of four rows (pk: 4 r coefficients, row t at pk + t r):
 * each row of Q^T is loaded once for all four rows.  acc[2 t + h] gets row
 * t, columns j + 4 h .. j + 4 h + 3. */
static inline void recon_4x8(const v4f *pk, size_t r, const float *qt, size_t ld, size_t j,
                             v4f *acc)
{
    const v4f *p0 = pk, *p1 = pk + r, *p2 = pk + 2 * r, *p3 = pk + 3 * r;
    v4f ql = ld4(qt + j), qh = ld4(qt + j + 4);
    v4f a0 = p0[0] * ql, b0 = p0[0] * qh, a1 = p1[0] * ql, b1 = p1[0] * qh;
    v4f a2 = p2[0] * ql, b2 = p2[0] * qh, a3 = p3[0] * ql, b3 = p3[0] * qh;
    for (size_t k = 1; k < r; k++) {
        const float *q = qt + k * ld + j;
        ql = ld4(q);
        qh = ld4(q + 4);
        a0 += p0[k] * ql;
        b0 += p0[k] * qh;
        a1 += p1[k] * ql;
        b1 += p1[k] * qh;
        a2 += p2[k] * ql;
        b2 += p2[k] * qh;
        a3 += p3[k] * ql;
        b3 += p3[k] * qh;
    }
    acc[0] = a0; acc[1] = b0; acc[2] = a1; acc[3] = b1;
    acc[4] = a2; acc[5] = b2; acc[6] = a3; acc[7] = b3;
}

/* nr (<= 4) consecutive rows, len columns, of a reconstruction; row t of
 * p / out / ma / mb / res at t r / t stride.  Stores:
 *   res (if not NULL): res = (ma + mb) - P Ql^T   (mb may be NULL; may be res)
 *   out (if not NULL): out = P Qs^T, or out += P Qs^T when accumulate
 * ma may be out (it is read first).  scratch: 4 r vectors (PSGD_SCRATCH). */
static void rows_recon(const float *p, size_t nr, size_t r, size_t len, size_t ld,
                       const float *qts, float *out, int accumulate, const float *qtl,
                       const float *ma, const float *mb, float *res, size_t stride, void *scratch)
{
    v4f *pk = (v4f *)scratch;
    size_t j = 0;
    for (size_t t = 0; t < nr; t++)
        for (size_t k = 0; k < r; k++)
            pk[t * r + k] = bc4(p[t * r + k]);
    if (nr == 4) {
        for (; j + 8 <= len; j += 8) {
            v4f acc[8];
            if (res != NULL) {
                recon_4x8(pk, r, qtl, ld, j, acc);
                for (size_t t = 0; t < 4; t++)
                    for (size_t h = 0; h < 2; h++) {
                        size_t o = t * stride + j + 4 * h;
                        v4f v = ld4(ma + o);
                        if (mb != NULL)
                            v += ld4(mb + o);
                        st4(res + o, v - acc[2 * t + h]);
                    }
            }
            if (out != NULL) {
                recon_4x8(pk, r, qts, ld, j, acc);
                for (size_t t = 0; t < 4; t++)
                    for (size_t h = 0; h < 2; h++) {
                        size_t o = t * stride + j + 4 * h;
                        st4(out + o, accumulate ? ld4(out + o) + acc[2 * t + h] : acc[2 * t + h]);
                    }
            }
        }
    }
    /* what is left (all of it when nr < 4), a row at a time */
    for (size_t t = 0; t < nr; t++) {
        const v4f *pt = pk + t * r;
        const float *prow = p + t * r;
        const size_t base = t * stride;
        size_t jj = j;
        for (; jj + 4 <= len; jj += 4) {
            size_t o = base + jj;
            if (res != NULL) {
                v4f v = ld4(ma + o);
                if (mb != NULL)
                    v += ld4(mb + o);
                st4(res + o, v - recon4(pt, r, qtl, ld, jj));
            }
            if (out != NULL) {
                v4f v = recon4(pt, r, qts, ld, jj);
                st4(out + o, accumulate ? ld4(out + o) + v : v);
            }
        }
        for (; jj < len; jj++) {
            size_t o = base + jj;
            if (res != NULL) {
                float v = mb != NULL ? ma[o] + mb[o] : ma[o];
                res[o] = v - recon1(prow, r, qtl, ld, jj);
            }
            if (out != NULL) {
                float v = recon1(prow, r, qts, ld, jj);
                out[o] = accumulate ? out[o] + v : v;
            }
        }
    }
}

/* ------------------------------------------------------ AVX2 kernels */

/* The same kernels on 8-lane AVX registers, chosen at run time
 * (HIPRESS_ISA).  They compute what the generic ones compute, bit for bit:
 * the same IEEE operations without contraction, one accumulator per output
 * with the same lanes (an 8-lane register is the lo/hi pair above), the
 * same tails.  Only how many outputs share a pass over the data differs. */

typedef struct {
    void (*dot)(const float *row, size_t len, const float *qt, size_t ld, size_t r, float *p);
    void (*axpy)(const float *const *rows, const float *p, size_t nr, size_t len, float *qt,
                 size_t ld, size_t r);
    void (*recon)(const float *p, size_t nr, size_t r, size_t len, size_t ld, const float *qts,
                  float *out, int accumulate, const float *qtl, const float *ma,
                  const float *mb, float *res, size_t stride, void *scratch);
} psgd_kern_t;

/* bytes of rows_recon scratch for rank r */
#define PSGD_SCRATCH(r) (4 * (r) * sizeof(v4f))

static const psgd_kern_t kern_generic = {row_dot, rows_axpy, rows_recon};

#if defined(__x86_64__) && defined(__GNUC__)
#define PSGD_AVX2 __attribute__((target("avx2")))

typedef float v8f __attribute__((vector_size(32)));

PSGD_AVX2 static inline v8f ld8(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof(v));
    return v;
}

PSGD_AVX2 static inline v8f bc8(float x)
{
    return (v8f){x, x, x, x, x, x, x, x};
}

#define st8(p, v) do { v8f st8_v_ = (v); memcpy((p), &st8_v_, sizeof(st8_v_)); } while (0)
#define hsum8v(v) (((v)[0] + (v)[1]) + ((v)[2] + (v)[3])) + (((v)[4] + (v)[5]) + ((v)[6] + (v)[7]))

/* row_dot, eight outputs per pass over the row */
PSGD_AVX2 static void row_dot_avx2(const float *row, size_t len, const float *qt, size_t ld,
                                   size_t r, float *p)
{
    size_t k = 0;
    for (; k + 8 <= r; k += 8) {
        const float *q = qt + k * ld;
        v8f a0 = bc8(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        float t[8] = {0};
        size_t j = 0;
        for (; j + 8 <= len; j += 8) {
            v8f x = ld8(row + j);
            a0 += x * ld8(q + j);
            a1 += x * ld8(q + ld + j);
            a2 += x * ld8(q + 2 * ld + j);
            a3 += x * ld8(q + 3 * ld + j);
            a4 += x * ld8(q + 4 * ld + j);
            a5 += x * ld8(q + 5 * ld + j);
            a6 += x * ld8(q + 6 * ld + j);
            a7 += x * ld8(q + 7 * ld + j);
        }
        for (; j < len; j++)
            for (size_t u = 0; u < 8; u++)
                t[u] += row[j] * q[u * ld + j];
        p[k] += hsum8v(a0) + t[0];
        p[k + 1] += hsum8v(a1) + t[1];
        p[k + 2] += hsum8v(a2) + t[2];
        p[k + 3] += hsum8v(a3) + t[3];
        p[k + 4] += hsum8v(a4) + t[4];
        p[k + 5] += hsum8v(a5) + t[5];
        p[k + 6] += hsum8v(a6) + t[6];
        p[k + 7] += hsum8v(a7) + t[7];
    }
    for (; k < r; k++) {
        const float *q0 = qt + k * ld;
        v8f a0 = bc8(0.0f);
        float t0 = 0.0f;
        size_t j = 0;
        for (; j + 8 <= len; j += 8)
            a0 += ld8(row + j) * ld8(q0 + j);
        for (; j < len; j++)
            t0 += row[j] * q0[j];
        p[k] += hsum8v(a0) + t0;
    }
}

/* rows_axpy: every element of qt adds its rows in row order */
PSGD_AVX2 static void rows_axpy_avx2(const float *const *rows, const float *p, size_t nr,
                                     size_t len, float *qt, size_t ld, size_t r)
{
    for (size_t k = 0; k < r; k++) {
        float *q = qt + k * ld;
        size_t j = 0;
        if (nr == 4) {
            const float *x0 = rows[0], *x1 = rows[1], *x2 = rows[2], *x3 = rows[3];
            const float c0 = p[k], c1 = p[r + k], c2 = p[2 * r + k], c3 = p[3 * r + k];
            const v8f b0 = bc8(c0), b1 = bc8(c1), b2 = bc8(c2), b3 = bc8(c3);
            for (; j + 8 <= len; j += 8) {
                v8f a = ld8(q + j);
                a += ld8(x0 + j) * b0;
                a += ld8(x1 + j) * b1;
                a += ld8(x2 + j) * b2;
                a += ld8(x3 + j) * b3;
                st8(q + j, a);
            }
            for (; j < len; j++) {
                float a = q[j];
                a += x0[j] * c0;
                a += x1[j] * c1;
                a += x2[j] * c2;
                a += x3[j] * c3;
                q[j] = a;
            }
        } else {
            for (size_t i = 0; i < nr; i++) {
                const float *x = rows[i];
                const float ci = p[i * r + k];
                const v8f bi = bc8(ci);
                for (j = 0; j + 8 <= len; j += 8)
                    st8(q + j, ld8(q + j) + ld8(x + j) * bi);
                for (; j < len; j++)
                    q[j] += x[j] * ci;
            }
        }
    }
}

/* eight columns of one row of a reconstruction */
PSGD_AVX2 static inline v8f recon8(const float *p, size_t r, const float *qt, size_t ld, size_t j)
{
    v8f v = bc8(p[0]) * ld8(qt + j);
    for (size_t k = 1; k < r; k++)
        v += bc8(p[k]) * ld8(qt + k * ld + j);
    return v;
}

/* sixteen columns of four rows: acc[2 t + h] = row t, columns j + 8 h .. */
PSGD_AVX2 static inline void recon_4x16(const float *p, size_t r, const float *qt, size_t ld,
                                        size_t j, v8f *acc)
{
    const float *p0 = p, *p1 = p + r, *p2 = p + 2 * r, *p3 = p + 3 * r;
    v8f ql = ld8(qt + j), qh = ld8(qt + j + 8);
    v8f a0 = bc8(p0[0]) * ql, b0 = bc8(p0[0]) * qh, a1 = bc8(p1[0]) * ql, b1 = bc8(p1[0]) * qh;
    v8f a2 = bc8(p2[0]) * ql, b2 = bc8(p2[0]) * qh, a3 = bc8(p3[0]) * ql, b3 = bc8(p3[0]) * qh;
    for (size_t k = 1; k < r; k++) {
        const float *q = qt + k * ld + j;
        v8f c;
        ql = ld8(q);
        qh = ld8(q + 8);
        c = bc8(p0[k]);
        a0 += c * ql;
        b0 += c * qh;
        c = bc8(p1[k]);
        a1 += c * ql;
        b1 += c * qh;
        c = bc8(p2[k]);
        a2 += c * ql;
        b2 += c * qh;
        c = bc8(p3[k]);
        a3 += c * ql;
        b3 += c * qh;
    }
    acc[0] = a0; acc[1] = b0; acc[2] = a1; acc[3] = b1;
    acc[4] = a2; acc[5] = b2; acc[6] = a3; acc[7] = b3;
}

/* rows_recon (same arguments and results) */
PSGD_AVX2 static void rows_recon_avx2(const float *p, size_t nr, size_t r, size_t len, size_t ld,
                                      const float *qts, float *out, int accumulate,
                                      const float *qtl, const float *ma, const float *mb,
                                      float *res, size_t stride, void *scratch)
{
    size_t j = 0;
    (void)scratch;
    if (nr == 4) {
        for (; j + 16 <= len; j += 16) {
            v8f acc[8];
            if (res != NULL) {
                recon_4x16(p, r, qtl, ld, j, acc);
                for (size_t t = 0; t < 4; t++)
                    for (size_t h = 0; h < 2; h++) {
                        size_t o = t * stride + j + 8 * h;
                        v8f v = ld8(ma + o);
                        if (mb != NULL)
                            v += ld8(mb + o);
                        st8(res + o, v - acc[2 * t + h]);
                    }
            }
            if (out != NULL) {
                recon_4x16(p, r, qts, ld, j, acc);
                for (size_t t = 0; t < 4; t++)
                    for (size_t h = 0; h < 2; h++) {
                        size_t o = t * stride + j + 8 * h;
                        st8(out + o, accumulate ? ld8(out + o) + acc[2 * t + h] : acc[2 * t + h]);
                    }
            }
        }
    }
    for (size_t t = 0; t < nr; t++) {
        const float *prow = p + t * r;
        const size_t base = t * stride;
        size_t jj = j;
        for (; jj + 8 <= len; jj += 8) {
            size_t o = base + jj;
            if (res != NULL) {
                v8f v = ld8(ma + o);
                if (mb != NULL)
                    v += ld8(mb + o);
                st8(res + o, v - recon8(prow, r, qtl, ld, jj));
            }
            if (out != NULL) {
                v8f v = recon8(prow, r, qts, ld, jj);
                st8(out + o, accumulate ? ld8(out + o) + v : v);
            }
        }
        for (; jj < len; jj++) {
            size_t o = base + jj;
            if (res != NULL) {
                float v = mb != NULL ? ma[o] + mb[o] : ma[o];
                res[o] = v - recon1(prow, r, qtl, ld, jj);
            }
            if (out != NULL) {
                float v = recon1(prow, r, qts, ld, jj);
                out[o] = accumulate ? out[o] + v : v;
            }
        }
    }
}

static const psgd_kern_t kern_avx2 = {row_dot_avx2, rows_axpy_avx2, rows_recon_avx2};
#endif

/* The kernels for HIPRESS_ISA (params->isa: 0 auto, 1 generic, 2 avx2);
 * AVX2 only where the CPU has it.  Both give the same bytes. */
static const psgd_kern_t *psgd_kernels(const hipress_comp_params_t *params)
{
#if defined(__x86_64__) && defined(__GNUC__)
    int isa = params != NULL ? params->isa : 0;
    if (isa != 1 && __builtin_cpu_supports("avx2"))
        return &kern_avx2;
#else
    (void)params;
#endif
    return &kern_generic;
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
void hp_psgd_start_q(float *qt, const float *warm, size_t r, size_t c, uint64_t seed, uint64_t call_no)
{
    const uint64_t key4[4] = {seed, 0, call_no, PSGD_RNG_TAG};
    const uint64_t key = hp_rng_key(key4);
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
static int pass_mq(const psgd_kern_t *K, const float *a, const float *b, float *mout,
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
                bad |= row_add(dst, a + off, b + off, seg);
                row = dst;
            } else {
                if (mout != NULL && mout != a)
                    memcpy(mout + off, a + off, seg * sizeof(float));
                row = a + off;
                bad |= row_check(row, seg);
            }
            K->dot(row, seg, qt + j0, c, r, p + i * r);
        }
    return bad;
}

/* qt = M^T P (r x c, transposed) for M = a + b (b may be NULL), streaming M
 * once, tile by tile, four rows at a time; every element of qt adds its
 * rows in row order.  rowbuf: 4 T floats, used when b is not NULL. */
static void pass_mtp(const psgd_kern_t *K, const float *a, const float *b, float *rowbuf,
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
                    row_add(rowbuf + t * T, a + off, b + off, seg);
                    rows[t] = rowbuf + t * T;
                } else {
                    rows[t] = a + off;
                }
            }
            K->axpy(rows, p + i * r, nr, seg, qt + j0, c, r);
        }
}

/* The reconstruction over the whole matrix, tile by tile (rows_recon for
 * the meaning of the arguments; out, ma, mb, res: n floats or NULL). */
static void pass_recon(const psgd_kern_t *K, const float *p, size_t n, size_t m, size_t c,
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
            K->recon(p + i * r, nr, r, HP_MIN(T, len - j0), c, qts ? qts + j0 : NULL,
                     out ? out + off : NULL, accumulate, qtl ? qtl + j0 : NULL,
                     ma ? ma + off : NULL, mb ? mb + off : NULL, res ? res + off : NULL, c,
                     scratch);
        }
}

/* ---------------------------------------------------------- ABI encode */

static size_t psgd_max_payload(size_t n, const hipress_comp_params_t *params)
{
    size_t m, c, r;
    hp_psgd_shape(n, param_rank(params), &m, &c, &r);
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
    const psgd_kern_t *K = psgd_kernels(a->params);
    float *p, *qt, *rowbuf;
    void *ws, *pk;
    double *work;
    int bad;

    hp_psgd_shape(n, param_rank(a->params), &m, &c, &r);
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
    ws = hp_aligned_alloc(PSGD_SCRATCH(r) + m * r * sizeof(double) + (m * r + r * c + 4 * c) * sizeof(float));
    if (ws == NULL)
        return HIPRESS_COMP_ENOMEM;
    pk = ws;
    work = (double *)((char *)ws + PSGD_SCRATCH(r));
    p = (float *)(work + m * r);
    qt = p + m * r;
    rowbuf = qt + r * c;

    hp_psgd_start_q(qt, NULL, r, c, a->rng_key[0], a->rng_key[2]);
    bad = pass_mq(K, a->in, a->residual, NULL, rowbuf, n, m, c, r, qt, p);
    if (!bad)
        bad = row_check(p, m * r);
    if (!bad) {
        hp_psgd_orthonormalise(p, m, r, work);
        pass_mtp(K, a->in, a->residual, rowbuf, n, m, c, r, p, qt);
        bad = row_check(qt, r * c);
    }
    if (bad) {
        free(ws);
        *nonfinite_p = 1;
        *len_p = 0;
        return HIPRESS_COMP_OK;
    }
    if (a->residual != NULL)    /* residual = (in + residual) - P Q^T */
        pass_recon(K, p, n, m, c, r, NULL, NULL, 0, qt, a->in, a->residual, a->residual, pk);
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
    mem = hp_aligned_alloc(PSGD_SCRATCH(r) + HP_MAX(nf, 1) * sizeof(float));
    if (mem == NULL)
        return HIPRESS_COMP_ENOMEM;
    f = (float *)((char *)mem + PSGD_SCRATCH(r));
    memcpy(f, in + PSGD_SUBHDR, nf * sizeof(float));
    if (row_check(f, nf)) {
        free(mem);
        return HIPRESS_COMP_EINVAL;
    }
    if (r == 0) {
        for (size_t i = 0; i < n; i++)
            out[i] = accumulate ? out[i] + f[i] : f[i];
    } else {
        pass_recon(psgd_kernels(params), f, n, m, c, r, f + m * r, out, accumulate, NULL, NULL,
                   NULL, NULL, mem);
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

/* ------------------------------------------------------ the collective */

/* Sum v[0..len) over ranks with the `none` ring: every rank ends with the
 * same bits (contract 1), which PMPI_Allreduce does not promise.  v is host
 * memory when host is set, else the call's own memory (the device path's
 * buffer, src/backend/hp_gpu_psgd.c).  A rank that has already failed (err) sends
 * error messages in its place. */
hp_status_t hp_psgd_ring_sum(hp_call_t *call, float *v, size_t len, int host, int corrupt, hp_status_t err)
{
    hp_call_t sub = *call;
    hp_status_t st;
    if (host)   /* v in host memory whatever the call's buffer is */
        sub.mem = NULL;
    sub.buf = v;
    sub.n = len;
    sub.kind = hp_kind_none;
    sub.rb = NULL;
    sub.resid = sub.mom = sub.state = NULL;
    sub.grain = 1;
    sub.corrupt = corrupt;
    sub.t_encode = sub.t_decode = 0;
    sub.nonfinite = 0;
    sub.err = err;
    st = hp_algo_ring_run(&sub);
    call->t_encode += sub.t_encode;
    call->t_decode += sub.t_decode;
    return st;
}

static void fill_nan(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = NAN;
}

/* A call that would not shrink: the plain ring.  A sum that holds NaN or Inf
 * (the same bits on every rank, so the test agrees by itself) becomes NaN as
 * a whole, as on the compressed path. */
static hp_status_t run_plain(hp_call_t *call)
{
    hp_status_t st;
    /* exact: what this rank owes is sent with it */
    hp_call_fold(call, 0, call->n);
    st = hp_psgd_ring_sum(call, call->buf, call->n, 0, call->corrupt, HP_OK);
    if (st == HP_OK && row_check(call->buf, call->n)) {
        fill_nan(call->buf, call->n);
        call->nonfinite++;
    }
    return st;
}

/* The residual (the call's, n floats) and the warm-start Q^T (r c floats)
 * of this buffer.  Either may be NULL (no error feedback, or over the
 * store's bound); getting Q never evicts this buffer's residual. */
static void get_state(hp_call_t *call, size_t rc, float **res_p, float **q_p, int *q_new_p)
{
    *res_p = call->resid;
    *q_p = NULL;
    *q_new_p = 1;
    if (call->rb == NULL)
        return;
    *q_new_p = call->rb->vec[HP_RES_AUX] == NULL || call->rb->len[HP_RES_AUX] != rc;
    *q_p = hp_residual_vec(call->res, call->rb, HP_RES_AUX, rc);
}

hp_status_t hp_powersgd_run(hp_call_t *call)
{
    const size_t n = call->n;
    const psgd_kern_t *K = psgd_kernels(call->params);
    size_t m, c, r, pn;
    float *res, *qwarm, *p, *qt, *qs;
    double *work;
    void *ws;
    int q_new, bad, failed;
    hp_status_t st;
    double t0;

    hp_psgd_shape(n, param_rank(call->params), &m, &c, &r);
    if (hp_psgd_skip(n, m, c, r))
        return run_plain(call);

    t0 = hp_now();
    get_state(call, r * c, &res, &qwarm, &q_new);
    /* P and one flag (ranks whose M holds NaN/Inf) travel together */
    pn = m * r + 1;
    ws = hp_aligned_alloc(PSGD_SCRATCH(r) + m * r * sizeof(double) + (pn + 2 * r * c) * sizeof(float));
    if (ws == NULL) {
        /* the other ranks are about to sum P: take part with error messages
         * (the ring never touches the buffer of a failed call), then agree */
        float dummy = 0.0f;
        HP_WARN("powersgd: cannot allocate the workspace for %zu elements", n);
        hp_psgd_ring_sum(call, &dummy, pn, 0, 0, HP_ERR_NOMEM);
        failed = 1;
        hp_tp_agree_flag(call->tp, &failed);
        return HP_ERR_NOMEM;
    }
    work = (double *)((char *)ws + PSGD_SCRATCH(r));
    p = (float *)(work + m * r);
    qt = p + pn;
    qs = qt + r * c;

    /* M = input + residual in place (buf becomes the result anyway; the
     * residual is written only once the call is known to be finite), P = M Q */
    hp_psgd_start_q(qt, q_new ? NULL : qwarm, r, c, call->seed, call->call_no);
    bad = pass_mq(K, call->buf, res, call->buf, NULL, n, m, c, r, qt, p);
    if (bad)
        memset(p, 0, m * r * sizeof(float));
    p[m * r] = bad ? 1.0f : 0.0f;
    call->t_encode += hp_now() - t0;

    st = hp_psgd_ring_sum(call, p, pn, 0, call->corrupt, HP_OK);
    /* every rank must take the same branch from here on */
    failed = st != HP_OK;
    if (hp_tp_agree_flag(call->tp, &failed) != HP_OK)
        failed = 1;
    if (failed) {
        free(ws);
        return st != HP_OK ? st : HP_ERR_PEER;
    }
    /* the summed P is the same everywhere, so this test is agreed */
    if (p[m * r] != 0.0f || row_check(p, m * r)) {
        free(ws);
        fill_nan(call->buf, n);
        call->nonfinite++;
        return HP_OK;
    }

    t0 = hp_now();
    hp_psgd_orthonormalise(p, m, r, work);
    pass_mtp(K, call->buf, NULL, NULL, n, m, c, r, p, qt);     /* Ql^T */
    memcpy(qs, qt, r * c * sizeof(float));
    call->t_encode += hp_now() - t0;

    st = hp_psgd_ring_sum(call, qs, r * c, 0, 0, HP_OK);
    if (st != HP_OK) {
        free(ws);
        return st;
    }
    if (row_check(qs, r * c)) {
        /* the sum overflowed: identical on every rank, like the P test */
        free(ws);
        fill_nan(call->buf, n);
        call->nonfinite++;
        return HP_OK;
    }

    /* result = P Q^T; residual = M - P Ql^T; next warm start = Q */
    t0 = hp_now();
    pass_recon(K, p, n, m, c, r, qs, call->buf, 0, res != NULL ? qt : NULL, call->buf, NULL, res,
               ws);
    if (qwarm != NULL)
        memcpy(qwarm, qs, r * c * sizeof(float));
    call->t_decode += hp_now() - t0;
    free(ws);
    return HP_OK;
}

const hp_comp_ext_t hp_compx_powersgd = {
    .qclass = HP_QCLASS_LOWRANK,
    .gpu = HP_GPU_FMT_POWERSGD,
    .max_stages = 0,   /* its own exchange, one stage (doc/accuracy.md) */
    .run = hp_powersgd_run,
};
