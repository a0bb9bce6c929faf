/*
 * What the files of tests/gpu/kern/check_kern share: the kinds of data, the
 * format case and the comparisons every test runs on the codec with host
 * memory for the device (check_kern.c), and the functions that put each
 * file's tests into the suite's one case, "encode", in their order.
 */
#ifndef HP_TESTS_CHECK_KERN_H
#define HP_TESTS_CHECK_KERN_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include "hp_comp.h"
#include "hp_codec.h"

#define REQUIRE_MSG(c, ...) \
    do { if (!(c)) ck_abort_msg(__VA_ARGS__); } while (0)

enum { D_GRAD, D_ZERO, D_CONST, D_TIES, D_SIGNED_ZERO, D_DENORM, D_HUGE, D_WIDE, D_NAN, D_INF, D_SPARSEISH, D_N,
       D_EDGE = D_N /* fp16/bf16 only (not in sweep) */ };

typedef struct {
    int      kind;
    int      fmt;
    hipress_comp_params_t p;
    int      resid;     /* error feedback residual present */
    int      state;     /* sparse: momentum state present */
    int      overflow;  /* the residual holds values near FLT_MAX */
    size_t   piece;     /* codec piece size */
} kcase_t;

/* check_kern.c: the data, the codec and the comparisons */
void fill(float *x, size_t n, int kind, uint64_t seed);
hp_gpu_enc_t enc_args(const kcase_t *t, size_t n);
hp_codec_t *codec(size_t piece);
void compare_encode(const kcase_t *t, size_t n, int dkind, uint64_t seed);
void compare_reject(const kcase_t *t, size_t n, uint64_t seed);
kcase_t tc(const char *name, int fmt);

/* each file's tests into the case, in the suite's order */
void kern_add_fmt_tests(TCase *t);   /* check_kern_fmt.c */
void kern_add_msg_tests(TCase *t);   /* check_kern_msg.c */

#endif
