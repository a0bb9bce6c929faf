/*
 * What the files of tests/unit/check_comp_qbits share: the includes, checks
 * that cost nothing when they hold, the codecs' names and bits, the helpers
 * of check_comp_qbits.c, and the functions that add each file's tests to
 * the test case.
 */
#ifndef CHECK_COMP_QBITS_H
#define CHECK_COMP_QBITS_H

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_ops.h"
#include "hp_global.h"

#define REQUIRE(c) \
    do { if (!(c)) ck_abort_msg("%s:%d: check failed: %s", __FILE__, __LINE__, #c); } while (0)
#define REQUIRE_MSG(c, ...) \
    do { if (!(c)) ck_abort_msg(__VA_ARGS__); } while (0)

/* check_comp_qbits.c: q2, q4, q8 and their bits */
extern const char *const qnames[3];
extern const unsigned qb[3];
/* one random stream (fill_grad reseeds it) */
extern uint64_t rng_state;
uint64_t next_u64(void);
double next_unit(void);
/* gradient-like values */
void fill_grad(float *x, size_t n, uint64_t seed);
/* gradient-like data with awkward stretches: constant blocks, values near
 * the range limit, tiny ranges, subnormals, signed zeros */
void fill_awkward(float *x, size_t n, uint64_t seed);
/* n floats and 16 more (guards), never NULL */
float *falloc(size_t n);
/* the default parameters with this ISA level, block and rounding */
hipress_comp_params_t params(int isa, uint32_t B, uint32_t rounding);
/* the registered compressor `name` */
hp_comp_t *comp(const char *name);
/* the q block (its default when p says 0) */
size_t blk(const hipress_comp_params_t *p);
/* Encode through the compressor; returns the payload length. */
size_t enc(hp_comp_t *c, const float *in, float *res, size_t n, const hipress_comp_params_t *p, void *out,
           uint64_t seed, uint64_t offset, int *nonfinite_p);
/* One encode of b-bit codes checked against the definition (its comment in
 * check_comp_qbits.c). */
void check_block_rule(unsigned b, const float *x, const float *r0, const float *r1, size_t n,
                      const hipress_comp_params_t *p, const uint8_t *pl, const float *o);

/* check_comp_qbits_ops.c: the operators, the wire sizes */
void qbits_ops_tests(TCase *t);
/* check_comp_qbits_codec.c: exact round trips, error bounds, unbiasedness;
 * error feedback, partitions, ISA paths, NaN / Inf, malformed messages,
 * settings */
void qbits_bounds_tests(TCase *t);
void qbits_codec_tests(TCase *t);
/* check_comp_qbits_rng.c: the stochastic form's generator */
void qbits_rng_tests(TCase *t);

#endif
