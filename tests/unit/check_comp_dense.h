/*
 * What the files of tests/unit/check_comp_dense share: the includes, checks
 * that cost nothing when they hold, the helpers of check_comp_dense.c
 * (inputs, parameters, encoding, the expected payload sizes), and the
 * functions that add each file's tests to a test case.
 */
#ifndef CHECK_COMP_DENSE_H
#define CHECK_COMP_DENSE_H

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_algo.h"
#include "hp_comp.h"
#include "hp_ops.h"

/* Check's ck_assert records every passing check through a pipe: these cost
 * nothing when they hold, for the per-element checks. */
#define REQUIRE(c) \
    do { if (!(c)) ck_abort_msg("%s:%d: check failed: %s", __FILE__, __LINE__, #c); } while (0)
#define REQUIRE_MSG(c, ...) \
    do { if (!(c)) ck_abort_msg(__VA_ARGS__); } while (0)

/* check_comp_dense.c: one random stream (fill_grad reseeds it). */
extern uint64_t rng_state;
uint64_t next_u64(void);
double next_normal(void);
/* gradient-like values: a smooth component plus noise of varying scale */
void fill_grad(float *x, size_t n, uint64_t seed);
/* n floats and 16 more (guards), never NULL */
float *falloc(size_t n);
/* the default parameters at ISA level isa */
hipress_comp_params_t params_isa(int isa);
/* the registered compressor `name` */
hp_comp_t *comp(const char *name);
/* Encode through the compressor; returns the payload length. */
size_t enc(hp_comp_t *c, const float *in, float *res, size_t n, const hipress_comp_params_t *p, void *out,
           size_t cap, uint64_t seed, int *nonfinite_p);
/* fp16's block (its default when p says 0) */
size_t fp16_block(const hipress_comp_params_t *p);
/* the payload bytes of a dense compressor's message of n elements */
size_t expected_payload(const char *name, size_t n, const hipress_comp_params_t *p);
/* the dense compressors */
extern const char *dense_names[5];

/* check_comp_dense_ops.c: the operator tables */
void dense_ops_tests(TCase *t);
/* check_comp_dense_bounds.c: wire sizes, error bounds, error feedback */
void dense_bounds_tests(TCase *t);
/* check_comp_dense_exact.c: terngrad, identical bytes on every ISA path,
 * NaN / Inf */
void dense_exact_tests(TCase *t);
/* check_comp_dense_malformed.c: the round trip through the message; the
 * rejection of malformed messages */
void dense_roundtrip_tests(TCase *t);
void dense_malformed_tests(TCase *t);

#endif
