/*
 * What the files of tests/unit/check_comp_powersgd share: the includes, the
 * helpers of check_comp_powersgd.c (the compressor, parameters, test
 * matrices, encoding), and the function that adds the ABI tests to the
 * test case.
 */
#ifndef CHECK_COMP_POWERSGD_H
#define CHECK_COMP_POWERSGD_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_elem.h"
#include "hp_psgd.h"   /* the internal API of src/comp/hp_comp_powersgd.c */

#define SUBHDR 12

/* check_comp_powersgd.c: the registered powersgd (aborts when missing) */
hp_comp_t *psgd(void);
/* zeroed parameters of rank r */
hipress_comp_params_t params_rank(uint32_t r);
/* deterministic test data: uniform in [-1, 1) */
float urand(uint64_t key, uint64_t i);
/* A rank-`rank` matrix A B^T in the m x c layout of n floats (malloc'ed). */
float *lowrank(size_t n, size_t m, size_t c, size_t rank, uint64_t key);
double max_abs(const float *v, size_t n);
double max_diff(const float *a, const float *b, size_t n);
/* encode through the ABI; returns the compressor's return code */
int encode_rc(const float *in, float *res, size_t n, uint32_t rank, uint64_t seed, unsigned char *out, size_t cap,
              size_t *len_p, int *nonfinite_p);
/* the same, asserting success; returns the payload length */
size_t encode(const float *in, float *res, size_t n, uint32_t rank, uint64_t seed, unsigned char *out, size_t cap,
              int *nonfinite_p);

/* check_comp_powersgd_abi.c: the ABI encode/decode and the decoder's
 * validation */
void psgd_abi_tests(TCase *t);

#endif
