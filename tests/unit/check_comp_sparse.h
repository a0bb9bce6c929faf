/*
 * What the files of tests/unit/check_comp_sparse share: the includes, the
 * helpers of check_comp_sparse.c (inputs, parameters, the reference top-k,
 * encoding), and the functions that add each file's tests to the test case.
 */
#ifndef CHECK_COMP_SPARSE_H
#define CHECK_COMP_SPARSE_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hp_comp.h"
#include "hp_elem.h"
#include "hp_ops.h"
#include "hp_ops_sparse.h"

/* check_comp_sparse.c: graddrop and dgc */
extern const char *const sparse_names[2];
/* one random stream, reseeded by rng_seed */
void rng_seed(uint64_t s);
double rng_unit(void);
/* Roughly normal values of scale `sigma` (sum of four uniforms). */
void fill_normal(float *x, size_t n, float sigma);
/* n zeroed floats (a copy of x), never NULL */
float *fvec(size_t n);
float *fdup(const float *x, size_t n);
/* the default parameters at ISA level isa */
hipress_comp_params_t params(int isa);
/* the kind of the registered compressor `name` */
int kind_of(const char *name);
/* the bits of |f|, of f */
uint32_t absbits(float f);
uint32_t fbits(float f);
/* v as the compressor sees it (same float operations). */
void v_of(const float *g, const float *r, const float *u, float m, size_t n, float *v);
/* Checks that payload p (len bytes) is exactly the reference top-k of v
 * (its comment in check_comp_sparse.c). */
void expect_topk_payload(const unsigned char *p, size_t len, const float *v, size_t n, size_t k,
                         const char *what, const hipress_comp_params_t *pp);

typedef struct {
    unsigned char *msg;
    size_t len, cap;
    int nonfinite;
    hp_status_t st;
} enc_t;

/* hp_msg_encode of compressor `kind` with optional residual / state. */
enc_t encode_msg(int kind, const float *g, float *r, float *u, size_t n, size_t k, const hipress_comp_params_t *p,
                 uint64_t seed);

/* check_comp_sparse_select.c: sizes, k, ties, error feedback, momentum */
void sparse_select_tests(TCase *tc);
/* check_comp_sparse_paths.c: ISA paths and keys, NaN / Inf, the threshold's
 * fallback, the decoder's validation, the operators */
void sparse_paths_tests(TCase *tc);

#endif
