/*
 * HIPRESS_VERIFY's report, shared by the MPI and the NCCL front ends
 * (src/drive/hp_verify.c): a compressed call's result against the exact
 * allreduce each front end computed on a copy of the input, and whether
 * every rank holds the same bits.  Everything here is host memory and the
 * transport's agreement, so the NCCL-only library uses it without MPI.
 */
#ifndef HP_VERIFY_H
#define HP_VERIFY_H

#include "hp_transport.h"
#include <stddef.h>

/* The relative error of got against exact (n floats): the 2-norm of
 * got - exact over the 2-norm of exact, in double, in element order (the
 * 2-norm of got - exact when exact is all zero). */
double hp_verify_rel_err(const float *exact, const float *got, size_t n);

/* One verified call: the relative error of got against exact, the
 * identity of got's bits across the ranks of tp (a hash through the
 * transport's agreement, a collective of every rank of tp), the stats
 * (verify_calls, verify_mismatch, max_rel_err) and an INFO line.  exact
 * or got may be NULL (this rank could not make it): the rank still joins
 * the agreement, whose answer is then "not identical", and no error is
 * counted.  1 when every rank holds the same bits, 0 when not or when the
 * agreement failed. */
int hp_verify_report(hp_transport_t *tp, const float *exact, const float *got, size_t n);

#endif
