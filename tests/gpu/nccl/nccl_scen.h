/*
 * What the programs of the NCCL scenarios share (tests/gpu/nccl/nccl_scen.c):
 * the stand-in driver's and hipress' functions found at run time, device
 * buffers written and read through the stand-in's shadows, gradient-like
 * data, communicators with the scenarios' fixed settings, and the checks
 * (the same bits on every rank, no error on a communicator).  Programs:
 * tests/gpu/nccl/nccl_scenarios.c, tests/gpu/nccl/nccl_rules.c.
 */
#ifndef HP_TESTS_NCCL_SCEN_H
#define HP_TESTS_NCCL_SCEN_H

#include <hipress.h>
#include <mpi.h>
#include <nccl.h>
#include <stddef.h>

extern int rank, size, bad;
extern void *(*dmalloc)(size_t, int);
extern int (*raw_write)(void *, const void *, size_t);
extern int (*raw_read)(void *, const void *, size_t);
extern unsigned long long (*count)(const char *);
extern int (*cu_sync)(void *);
extern int (*cu_ctx_sync)(void);
extern int (*cu_begin)(void *, int);
extern int (*cu_end)(void *, void **);
extern void (*set_current)(int);
extern void (*fail_alloc)(int);
extern int (*comm_set)(void *, const char *, const char *);
extern int (*mpi_comm_set)(MPI_Comm, const char *, const char *);
extern void (*stats_get)(hipress_stats_t *);

#define SA ((cudaStream_t)0x5150)
#define SB ((cudaStream_t)0x6160)
#define SC ((cudaStream_t)0x7170)

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "%s rank %d:%d: ", scen_prog, rank, __LINE__); \
                        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); bad = 1; } } while (0)
extern const char *scen_prog;

/* MPI_Init, the stand-in driver (argv[2]) loaded and its functions and
 * hipress' found, device 0 current; the program's name for messages.
 * Exits on failure. */
void scen_init(int *argc, char ***argv, const char *prog);
/* Rank 0 prints "PROG CASE: ok" when no rank failed a check; MPI_Finalize;
 * the exit status (0, or 1 when a check failed). */
int scen_end(const char *name);

/* Wait for SA and SB (the scenarios' streams). */
void syncall(void);
/* Host copies to and from device memory, after syncall. */
void dwrite(void *d, const void *h, size_t n);
void dread(void *h, const void *d, size_t n);
/* n floats of device memory (stand-in), or the job aborts. */
void *dev(size_t n);
/* Gradient-like values of rank r, step t. */
float grad_val(int r, int t, size_t i);
void fill(float *h, size_t n, int t, int salt);
/* What hipress made the stand-in driver do: host and device-wide waits
 * and host copies. */
unsigned long long work(void);
/* A communicator of every rank with the scenarios' settings (onebit, ring,
 * 64K partitions, no hierarchy, at least 1K, never plain); its MPI twin. */
ncclComm_t new_comm(void);
MPI_Comm new_mpi_comm(void);
/* Those settings on c (made otherwise: ncclCommInitRank); c. */
ncclComm_t comm_settings(ncclComm_t c);
/* Whether h's bits are the same on every rank. */
int same_everywhere(const float *h, size_t n);
/* d (n floats on the device) holds want's bits, and the same everywhere. */
void same_bits(const void *d, const float *want, size_t n, const char *label);
/* NCCL saw nothing wrong on c (a count mismatch of the stand-in: an error
 * on a GPU, or a hang). */
void nccl_ok(ncclComm_t c, const char *label);
/* One compressed call on (c, s) of d, its host and device work in *w_p. */
ncclResult_t call(ncclComm_t c, cudaStream_t s, void *d, size_t n, unsigned long long *w_p);

#endif
