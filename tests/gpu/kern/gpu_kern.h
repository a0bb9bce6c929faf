/*
 * What the files of tests/gpu/kern/gpu_kern share: the program's state (the
 * device codec's table and context, the counts, the options), the kinds of
 * data, the format case and the functions each file gives the others.
 * gpu_kern.c holds the state, the device-memory helpers and main;
 * gpu_kern_fmt.c the formats' cases and the data they are filled with;
 * gpu_kern_ops.c the buffer operations and powersgd's steps.
 */
#ifndef HP_TESTS_GPU_KERN_H
#define HP_TESTS_GPU_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hp_comp.h"
#include "hp_gpu.h"

/* gpu_kern.c: the program's state */
extern const hp_gpu_ops_v2_t *g;
extern hp_gpu_ptr_t where;
extern void *cx;
extern int failures, cases, quick, small_only;
extern const char *only;
extern const size_t large[2];
extern unsigned long long (*mock_count)(const char *what);
extern void *cs;
extern void *cx2;

#define FAILF(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, "\n"); failures++; } while (0)

enum { D_GRAD, D_TIES, D_SIGNED_ZERO, D_WIDE, D_HUGE, D_NAN, D_INF, D_ZERO, D_DENORM, D_EDGE, D_N };
extern const char *dname[D_N];
/* D_DENORM and D_EDGE: fp16 and bf16 only (sweep) */

typedef struct {
    const char *name;
    int kind, fmt, resid, state, overflow;
    hipress_comp_params_t p;
} kc_t;

/* gpu_kern.c */
void *dev(const void *host, size_t bytes);
void back(void *host, const void *d, size_t bytes);
int same_bits(const float *a, const float *b, size_t n, size_t *at);
unsigned long long host_waits(void);
int selected(const char *name);

/* gpu_kern_fmt.c */
void fill(float *x, size_t n, int kind, uint64_t seed);
kc_t kc(const char *name, int fmt);
void sweep(kc_t t, const size_t *ns, size_t nn, int all);
void release_run(void);
void sparse_run(void);

/* gpu_kern_ops.c */
void buffer_ops(size_t n);
void divide_ops(size_t n);
void psgd_ops(size_t m, size_t c, size_t r, uint64_t seed);
void convert_ops(size_t n);

#endif
