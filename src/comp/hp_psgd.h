/*
 * powersgd's internals, shared by its files and private to them: the math
 * of src/comp/hp_comp_powersgd.c (shapes, the start Q, orthonormalisation,
 * the host passes over the matrix), used by its two runs in the algorithm
 * layer -- src/algo/hp_algo_psgd.c on host memory, src/algo/hp_algo_psgd_dev.c
 * on a device buffer -- and by tests/unit/check_comp_powersgd.c.  Comp layer:
 * nothing here knows a call, a transport or a backend.
 */
#ifndef HP_PSGD_H
#define HP_PSGD_H

#include "hp_comp.h"
#include "hp_ops.h"

#define HP_PSGD_DEFAULT_RANK 4

/* The rank asked for: HIPRESS_POWERSGD_RANK, HP_PSGD_DEFAULT_RANK when unset. */
uint32_t hp_psgd_rank(const hipress_comp_params_t *p);

/* The m x c matrix of n floats and the rank r used (hp_comp_powersgd.c). */
void hp_psgd_shape(size_t n, uint32_t rank, size_t *m_p, size_t *c_p, size_t *r_p);
/* 1 when the factors are no smaller than the data (the call goes plain). */
int hp_psgd_skip(size_t n, size_t m, size_t c, size_t r);
/* Bytes of one rank's message for n floats. */
size_t hp_psgd_wire_bytes(size_t n, uint32_t rank);

/* Orthonormalise the r columns of the m x r matrix p in place (work: m r
 * doubles); a pure function of p's bits.  Returns the nonzero columns. */
size_t hp_psgd_orthonormalise(float *p, size_t m, size_t r, double *work);
/* The start Q^T (r x c) of a call from a warm start (or NULL), the same on
 * every rank for the same warm start. */
void hp_psgd_start_q(float *qt, const float *warm, size_t r, size_t c, uint64_t seed, uint64_t call_no);
/* The RNG key of that start Q (the same on every rank: no rank in it): what
 * the device's start Q (hp_gpu_ops_v2_t.psgd_start_q) draws under. */
uint64_t hp_psgd_q_key(uint64_t seed, uint64_t call_no);
/* Columns per tile of the passes (the device passes use the same tiles). */
size_t hp_psgd_tile_cols(size_t r, size_t c);

/* The operator table of the host passes for HIPRESS_ISA (params->isa). */
const hp_ops_t *hp_psgd_kernels(const hipress_comp_params_t *params);

/* The host passes over M = a + b (b may be NULL), n floats as m x c.
 * pass_mq: p = M Q (qt: Q^T), M stored into mout when not NULL (mout may be
 * a), else rowbuf (tile-cols floats) holds a row of it; nonzero when M holds
 * NaN or Inf.  pass_mtp: qt = M^T P (rowbuf: 4 tile-cols floats, used when
 * b is not NULL).  pass_recon: out = P Qs^T (or out += when accumulate) and
 * res = (ma + mb) - P Ql^T, any of them NULL to skip; scratch:
 * HP_PSGD_SCRATCH(r) bytes, 16-byte aligned. */
int hp_psgd_pass_mq(const hp_ops_t *K, const float *a, const float *b, float *mout, float *rowbuf,
                    size_t n, size_t m, size_t c, size_t r, const float *qt, float *p);
void hp_psgd_pass_mtp(const hp_ops_t *K, const float *a, const float *b, float *rowbuf, size_t n,
                      size_t m, size_t c, size_t r, const float *p, float *qt);
void hp_psgd_pass_recon(const hp_ops_t *K, const float *p, size_t n, size_t m, size_t c, size_t r,
                        const float *qts, float *out, int accumulate, const float *qtl,
                        const float *ma, const float *mb, float *res, void *scratch);
#define HP_PSGD_SCRATCH(r) HP_OPS_LR_SCRATCH(r)

#endif
