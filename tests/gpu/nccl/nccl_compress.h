/*
 * What the parts of tests/gpu/nccl/nccl_compress share: the stand-in driver's and
 * hipress' functions found at run time, the ranks, the data, the checks and
 * the cases each part runs (nccl_compress.c: the basic cases and main;
 * nccl_compress_bits.c: the MPI path's bits, host-synchronous and
 * stream-ordered; nccl_compress_form.c: staging buffers, HIPRESS_VERIFY, the
 * bounded poll, HIPRESS_ALGO=auto, splits).
 */
#ifndef HP_TESTS_NCCL_COMPRESS_H
#define HP_TESTS_NCCL_COMPRESS_H

#define _GNU_SOURCE
#include <hipress.h>
#include <mpi.h>
#include <nccl.h>
#include "hp_config.h"
#include "hp_global.h"
#include <stdint.h>
#include <stdio.h>

extern void *(*dmalloc)(size_t, int);
extern int (*raw_write)(void *, const void *, size_t);
extern int (*raw_read)(void *, const void *, size_t);
/* (async mode) the stand-in driver's counters and a wait for a stream */
extern unsigned long long (*mock_count)(const char *);
extern int (*stream_sync)(void *);
extern int (*htod_async)(unsigned long long, const void *, size_t, void *);
extern void (*set_current)(int);
extern void (*set_capturing)(void *, int);
extern int (*comm_set)(void *, const char *, const char *);
extern int (*comm_residual)(void *, const void *, size_t, float *);
extern int (*mpi_comm_set)(MPI_Comm, const char *, const char *);
extern int (*mpi_comm_residual)(MPI_Comm, const void *, size_t, float *);
extern void (*nccl_stats)(hipress_nccl_stats_t *);

extern int rank, size, bad, compressed;

#define STREAM ((cudaStream_t)0x5150)
#define N_ELEM ((size_t)300000)   /* 1.2 MB: above the default HIPRESS_MIN_BYTES, not a whole block */

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "nccl_compress rank %d:%d: ", rank, __LINE__); \
                        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); bad = 1; } } while (0)

/* The test's host access to device memory, as a program's synchronous
 * copies: after the work queued on the stream (the stand-in's operations
 * and hipress' stream-ordered calls run on its device executor). */
int dwrite(void *d, const void *h, size_t n);
int dread(void *h, const void *d, size_t n);

/* The settings of one case, applied alike to an MPI communicator
 * (hipress_comm_set) and an NCCL one (hipress_nccl_comm_set). */
typedef struct {
    const char *kv[28];
} kv_t;

uint32_t bits(float f);
float exact_val(int r, int t, size_t i);
float grad_val(int r, int t, size_t i);
ncclComm_t comm_with(const char *compressor);
int same_everywhere(const float *h, size_t n);
int calls_since(int from, const char *fn);
int reserves_since(int from);
void allreduce(const char *label, const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op,
               ncclComm_t comm, int want_compressed, int want_agree);
void *dev(size_t n);
kv_t case_kv(const char *comp, const char *algo);
MPI_Comm mpi_comm(const kv_t *k);
void nccl_apply(ncclComm_t c, const kv_t *k);
ncclResult_t poll_out(ncclComm_t c, ncclResult_t rc);
int groups_since(int from, ncclComm_t comm, const char *label);
int algo_groups(const char *algo);
void same_residuals(MPI_Comm mc, const void *h, ncclComm_t nc, const void *d, size_t n, float *rh, float *rd,
                    const char *label);
void kv_set(kv_t *k, const char *key, const char *val);
unsigned long long host_work(void);
void stream_write(void *d, const void *h, size_t bytes);
uint16_t narrow16(float v, int f16);
void case_exact(void);
void case_lossy(const char *comp, int ef);
void case_pass(void);
void case_corrupt(void);
void case_default(void);
void case_half(void);
void case_mpi_bits(void);
void case_async(void);
void case_form(void);
void case_verify(void);
void case_timeout(void);
void case_auto(void);
void case_split(void);
void form_bits(const char *comp, const char *algo, const char *form, int one, int steady);

#endif
