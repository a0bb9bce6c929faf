/*
 * What the two files of tests/gpu/simt/simt_kern share: the counters, the data
 * and the device codec on host memory (simt_kern.c), and the buffer
 * operations and powersgd's steps (simt_ops.c).
 */
#ifndef HP_TESTS_SIMT_KERN_H
#define HP_TESTS_SIMT_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hp_codec.h"

extern int simt_failures, simt_cases;
#define FAILF(...)                                  \
    do {                                            \
        if (simt_failures++ < 20) {                 \
            fprintf(stderr, "FAIL: " __VA_ARGS__);  \
            fprintf(stderr, "\n");                  \
        }                                           \
    } while (0)

enum { D_GRAD, D_TIES, D_SIGNED_ZERO, D_WIDE, D_HUGE, D_NAN, D_INF, D_ZERO, D_CONST, D_SPARSEISH, D_EDGE, D_BIG,
       D_N };
extern const char *const simt_dname[D_N];

/* x[0..n) of a kind of data (D_*), from seed */
void simt_fill(float *x, size_t n, int kind, uint64_t seed);
/* 1 when a and b hold the same bits, else 0 with the first difference */
int simt_same(const float *a, const float *b, size_t n, size_t *at);
/* NaNs of several payloads (simt_nan_bits) and +-Inf at a few places of x */
enum { SIMT_NAN_KINDS = 5 };
extern const uint32_t simt_nan_bits[SIMT_NAN_KINDS];
void simt_nonfinite(float *x, size_t n, uint64_t seed);
/* 1 when every NaN of x is hp_elem.h's (HP_NAN_BITS), else 0 with the first
 * other */
int simt_canonical(const float *x, size_t n, size_t *at);
/* the device codec, on host memory */
hp_codec_t *simt_codec(void);

/* simt_ops.c: the buffer operations at n, powersgd's steps on an m x c
 * matrix of rank r, and a momentum-masked message of format name */
void simt_ops(size_t n, uint64_t seed);
void simt_psgd(size_t m, size_t c, size_t r, uint64_t seed);
void simt_masked(const char *name, int fmt, size_t n, uint64_t seed);
/* the module's self-test kernel (cuda/module/hp_cuda_kernels.cu) over n elements */
void simt_selftest(size_t n);

#endif
