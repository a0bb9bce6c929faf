/*
 * powersgd's small steps on the device (the stream-ordered call,
 * src/algo/hp_algo_psgd_async.c): the start Q and the orthonormalisation,
 * per-thread functions shared by the CUDA kernels (cuda/kern/hp_kern_psgd.cu)
 * and their emulation (tests/gpu/emu/hp_kern_emu_psgd.c).  Each is the host
 * function of src/comp/hp_comp_powersgd.c step for step, in its order and
 * precision (double where it uses double; --fmad=false on the device, no
 * contraction on the host), so the device gives the host's bits.
 */
#ifndef HP_KERN_PSGD_H
#define HP_KERN_PSGD_H

#include "hp_kern.h"
#include <math.h>

/* hp_comp_powersgd.c's PSGD_DEP_TOL: a column whose part orthogonal to the
 * columns before it is at most this fraction of its norm becomes zero. */
#define HP_K_PSGD_DEP_TOL 1e-4

/* Row k of the start Q^T (c floats at q): hp_psgd_start_q's row -- the
 * warm row (warm: NULL for none) scaled to unit norm, or when it is zero,
 * non-finite or absent the counter RNG's row under key (elements k c + j),
 * scaled alike. */
HP_KD void hp_k_psgd_start_row(float *q, const float *warm, size_t k, size_t c, uint64_t key)
{
    double ss = 0.0;
    if (warm != NULL) {
        for (size_t j = 0; j < c; j++) {
            q[j] = warm[j];
            ss += (double)q[j] * (double)q[j];
        }
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

HP_KD double hp_k_psgd_dot_d(const double *a, const double *b, size_t m)
{
    double s = 0.0;
    for (size_t i = 0; i < m; i++)
        s += a[i] * b[i];
    return s;
}

/* hp_psgd_orthonormalise of the m x r row-major p, in place (work: m r
 * doubles): modified Gram-Schmidt in double, two projections per column,
 * dependent and zero columns exactly zero.  One thread. */
HP_KD void hp_k_psgd_orth(float *p, size_t m, size_t r, double *work)
{
    for (size_t k = 0; k < r; k++)
        for (size_t i = 0; i < m; i++)
            work[k * m + i] = (double)p[i * r + k];
    for (size_t k = 0; k < r; k++) {
        double *v = work + k * m;
        double n0 = sqrt(hp_k_psgd_dot_d(v, v, m)), nv = 0.0;
        if (n0 > 0.0) {
            for (int pass = 0; pass < 2; pass++)
                for (size_t j = 0; j < k; j++) {
                    const double *q = work + j * m;
                    double d = hp_k_psgd_dot_d(q, v, m);
                    for (size_t i = 0; i < m; i++)
                        v[i] -= d * q[i];
                }
            nv = sqrt(hp_k_psgd_dot_d(v, v, m));
        }
        if (n0 > 0.0 && nv > HP_K_PSGD_DEP_TOL * n0) {
            double s = 1.0 / nv;
            for (size_t i = 0; i < m; i++)
                v[i] *= s;
        } else {
            for (size_t i = 0; i < m; i++)
                v[i] = 0.0;
        }
    }
    for (size_t k = 0; k < r; k++)
        for (size_t i = 0; i < m; i++)
            p[i * r + k] = (float)work[k * m + i];
}

/* Whether any of the `bytes` bytes at flag is set (nan_if's test). */
HP_KD int hp_k_flag_set(const uint8_t *flag, uint32_t bytes)
{
    int set = 0;
    for (uint32_t i = 0; i < bytes; i++)
        set |= flag[i] != 0;
    return set;
}

#endif
