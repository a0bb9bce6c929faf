/*
 * What the files of tests/mpi/mpi_suite share: the includes, the process's
 * rank and counters, the EXPECT check, the helpers of mpi_suite.c, and the
 * cases each file runs (mpi_suite.c's main runs them in order).
 */
#ifndef MPI_SUITE_H
#define MPI_SUITE_H

#include <complex.h>
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include "hipress.h"

/* mpi_suite.c: this process's rank and size in MPI_COMM_WORLD, the checks
 * made and failed, and HIPRESS_MIN_BYTES of the environment */
extern int wrank, wsize;
extern atomic_long nchecks, nfailed;
extern long min_bytes;

/* A failed check: say where and why (at most 30 lines per rank). */
#define EXPECT(cond, ...) \
    do { atomic_fetch_add(&nchecks, 1); \
         if (!(cond)) { \
             if (atomic_fetch_add(&nfailed, 1) < 30) { \
                 fprintf(stderr, "rank %d: FAIL %s:%d: ", wrank, __FILE__, __LINE__); \
                 fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } } while (0)

/* hipress_comm_set of the preloaded library, and the same, checked */
extern int (*api_comm_set)(MPI_Comm, const char *, const char *);
void comm_set(MPI_Comm c, const char *name, const char *value);
/* hipress_stats_get's counters (the preloaded library's) */
hipress_stats_t stats(void);
/* SplitMix64 of (a, b, c): the inputs of every rank, reproducible anywhere. */
uint64_t mix3(uint64_t a, uint64_t b, uint64_t c);
/* 1 when every rank of comm holds the same bytes */
int identical(const void *buf, size_t bytes, MPI_Comm comm);
/* malloc that aborts the job when out of memory */
void *xmalloc(size_t n);

#define GUARD 64   /* bytes after each buffer that nobody may write */
#define LARGE ((1 << 20) + 3)

/* mpi_suite_matrix.c: the datatype table (once, before the matrix), the
 * pass-through matrix */
void types_init(void);
void test_matrix(void);
/* mpi_suite_ring.c: the compressed ring; two threads on two communicators */
void test_ring(void);
void test_threads(int provided);
/* mpi_suite.c: erroneous arguments; opted-out communicators */
void test_errors(void);
void test_optout(void);

#endif
