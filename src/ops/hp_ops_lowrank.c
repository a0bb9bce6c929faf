/*
 * Low-rank products of the CPU operator layer (hp_ops.h: lr_dot, lr_axpy,
 * lr_recon), for powersgd's passes over its m x c matrix M
 * (src/comp/hp_comp_powersgd.c: the layout, the tiles and what each pass
 * computes).  Two tables' worth: a generic path on 16-byte GCC vectors and
 * an AVX2 path on 32-byte ones, chosen by HIPRESS_ISA (hp_ops_get), giving
 * the same bits on every rank and ISA: no contraction, and one summation
 * order per product (hp_ops.h).  No BLAS: they run in the caller's thread
 * and never change a BLAS thread count the application relies on.
 */
#include "hp_ops.h"
#include <string.h>

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

/* Every float these kernels store is a sum of products, which can
 * overflow (Inf - Inf): stored canonical (hp_canon, hp_elem.h), as the
 * CUDA kernels store theirs. */
typedef int v4i __attribute__((vector_size(16)));
#define NAN_I ((int)HP_NAN_BITS)

static inline void st4(float *p, v4f v)
{
    const v4i nan = v != v;
    v = (v4f)(((v4i)v & ~nan) | (nan & (v4i){NAN_I, NAN_I, NAN_I, NAN_I}));
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

/* --------------------------------------------------- generic kernels */

/* p[k] += sum_j row[j] qt[k ld + j], k < r (one row of a tile of M Q). */
void hp_ops_lr_dot_generic(const float *row, size_t len, const float *qt, size_t ld, size_t r, float *p)
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
        p[k] = hp_canon(p[k] + (hsum8(a0l, a0h) + t0));
        p[k + 1] = hp_canon(p[k + 1] + (hsum8(a1l, a1h) + t1));
        p[k + 2] = hp_canon(p[k + 2] + (hsum8(a2l, a2h) + t2));
        p[k + 3] = hp_canon(p[k + 3] + (hsum8(a3l, a3h) + t3));
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
        p[k] = hp_canon(p[k] + (hsum8(a0l, a0h) + t0));
    }
}

/* qt[k ld + j] += sum over the nr (<= 4) rows, in row order, of
 * p[i r + k] rows[i][j] (rows of M times rows of P: M^T P, streamed by row;
 * four rows per pass over qt keep its traffic low). */
void hp_ops_lr_axpy_generic(const float *const *rows, const float *p, size_t nr, size_t len,
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
                q[j] = hp_canon(a);
            }
        } else {
            for (size_t i = 0; i < nr; i++) {
                const float *x = rows[i];
                const float ci = p[i * r + k];
                const v4f bi = bc4(ci);
                for (j = 0; j + 4 <= len; j += 4)
                    st4(q + j, ld4(q + j) + ld4(x + j) * bi);
                for (; j < len; j++)
                    q[j] = hp_canon(q[j] + (x[j] * ci));
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
 * ma may be out (it is read first).  scratch: 4 r vectors
 * (HP_OPS_LR_SCRATCH). */
void hp_ops_lr_recon_generic(const float *p, size_t nr, size_t r, size_t len, size_t ld,
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
                res[o] = hp_canon(v - recon1(prow, r, qtl, ld, jj));
            }
            if (out != NULL) {
                float v = recon1(prow, r, qts, ld, jj);
                out[o] = hp_canon(accumulate ? out[o] + v : v);
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

#if defined(__x86_64__)
#define LR_AVX2 __attribute__((target("avx2")))

typedef float v8f __attribute__((vector_size(32)));

LR_AVX2 static inline v8f ld8(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof(v));
    return v;
}

LR_AVX2 static inline v8f bc8(float x)
{
    return (v8f){x, x, x, x, x, x, x, x};
}

typedef int v8i __attribute__((vector_size(32)));

/* (canonical, as st4) */
LR_AVX2 static inline void st8(float *p, v8f v)
{
    const v8i nan = v != v;
    v = (v8f)(((v8i)v & ~nan) | (nan & (v8i){NAN_I, NAN_I, NAN_I, NAN_I, NAN_I, NAN_I, NAN_I, NAN_I}));
    memcpy(p, &v, sizeof(v));
}
#define hsum8v(v) (((v)[0] + (v)[1]) + ((v)[2] + (v)[3])) + (((v)[4] + (v)[5]) + ((v)[6] + (v)[7]))

/* lr_dot, eight outputs per pass over the row */
LR_AVX2 void hp_ops_lr_dot_avx2(const float *row, size_t len, const float *qt, size_t ld,
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
        p[k] = hp_canon(p[k] + (hsum8v(a0) + t[0]));
        p[k + 1] = hp_canon(p[k + 1] + (hsum8v(a1) + t[1]));
        p[k + 2] = hp_canon(p[k + 2] + (hsum8v(a2) + t[2]));
        p[k + 3] = hp_canon(p[k + 3] + (hsum8v(a3) + t[3]));
        p[k + 4] = hp_canon(p[k + 4] + (hsum8v(a4) + t[4]));
        p[k + 5] = hp_canon(p[k + 5] + (hsum8v(a5) + t[5]));
        p[k + 6] = hp_canon(p[k + 6] + (hsum8v(a6) + t[6]));
        p[k + 7] = hp_canon(p[k + 7] + (hsum8v(a7) + t[7]));
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
        p[k] = hp_canon(p[k] + (hsum8v(a0) + t0));
    }
}

/* lr_axpy: every element of qt adds its rows in row order */
LR_AVX2 void hp_ops_lr_axpy_avx2(const float *const *rows, const float *p, size_t nr,
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
                q[j] = hp_canon(a);
            }
        } else {
            for (size_t i = 0; i < nr; i++) {
                const float *x = rows[i];
                const float ci = p[i * r + k];
                const v8f bi = bc8(ci);
                for (j = 0; j + 8 <= len; j += 8)
                    st8(q + j, ld8(q + j) + ld8(x + j) * bi);
                for (; j < len; j++)
                    q[j] = hp_canon(q[j] + (x[j] * ci));
            }
        }
    }
}

/* eight columns of one row of a reconstruction */
LR_AVX2 static inline v8f recon8(const float *p, size_t r, const float *qt, size_t ld, size_t j)
{
    v8f v = bc8(p[0]) * ld8(qt + j);
    for (size_t k = 1; k < r; k++)
        v += bc8(p[k]) * ld8(qt + k * ld + j);
    return v;
}

/* sixteen columns of four rows: acc[2 t + h] = row t, columns j + 8 h .. */
LR_AVX2 static inline void recon_4x16(const float *p, size_t r, const float *qt, size_t ld,
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

/* lr_recon (same arguments and results) */
LR_AVX2 void hp_ops_lr_recon_avx2(const float *p, size_t nr, size_t r, size_t len, size_t ld,
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
                res[o] = hp_canon(v - recon1(prow, r, qtl, ld, jj));
            }
            if (out != NULL) {
                float v = recon1(prow, r, qts, ld, jj);
                out[o] = hp_canon(accumulate ? out[o] + v : v);
            }
        }
    }
}
#endif
