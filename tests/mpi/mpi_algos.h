/*
 * What the files of tests/mpi/mpi_algos share: the includes, the rank and
 * counters, the EXPECT check, the helpers of mpi_algos.c (inputs,
 * configured communicators, one checked call, the algorithms to run), and
 * the cases each file runs (mpi_algos.c's main runs those named on its
 * command line).
 */
#ifndef MPI_ALGOS_H
#define MPI_ALGOS_H

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipress.h"

/* mpi_algos.c: this process's rank and size in MPI_COMM_WORLD, the checks
 * passed and failed */
extern int rank, nranks, passed, failed;

#define EXPECT(cond, ...) \
    do { if (cond) passed++; else { failed++; fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
         fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* 1 when every rank holds the same bytes. */
int identical(const void *buf, size_t bytes, MPI_Comm comm);
/* Input of rank r: integer-valued (exact sums) or gradient-like. */
float input(int r, size_t i, int integer);
/* A dup of base set to compress with comp, algo and partition size part
 * (HIPRESS_MIN_BYTES 0). */
MPI_Comm configured(MPI_Comm base, const char *comp, const char *algo, const char *part);
/* One allreduce on comm c, checked. */
void check_call(MPI_Comm c, const char *comp, const char *label, size_t n, int in_place);
/* The fixed algorithms (nfixed of them, the test build's extra rows
 * included), then auto: nalgos names. */
#define MAX_ALGOS 16
extern const char *algos[MAX_ALGOS + 1];
extern size_t nfixed, nalgos;

/* mpi_algos_cases.c */
void test_matrix(void);
void test_comms(void);
void test_plan(void);
void test_fail(void);
void test_hier(void);
void test_range(void);
void test_memory(int calls);
/* mpi_algos_volume.c */
void test_sum(void);
void test_volume(void);
void test_staging(void);
void test_unbiased(int calls);

#endif
