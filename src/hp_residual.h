/*
 * Error-feedback residual store of one communicator: residual vectors keyed by
 * (recvbuf address, count, element offset of the partition), bounded in bytes
 * with least-recently-used eviction.  Not thread-safe: a communicator is used
 * by one thread at a time (MPI's rule for collectives on one communicator).
 */
#ifndef HP_RESIDUAL_H
#define HP_RESIDUAL_H

#include "hp_core.h"

typedef struct hp_residual_store hp_residual_store_t;

typedef struct {
    uintptr_t addr;
    size_t    count;
    size_t    offset;
    uint32_t  slot;       /* 0 = residual, 1 = second state vector (dgc u) */
} hp_residual_key_t;

hp_residual_store_t *hp_residual_create(size_t max_bytes);
void hp_residual_destroy(hp_residual_store_t *s);

/* The vector of n floats for key, zero-filled when new (then *is_new_p = 1).
 * Returns NULL when n floats exceed the bound (no error feedback for it). */
float *hp_residual_get(hp_residual_store_t *s, const hp_residual_key_t *key, size_t n,
                       int *is_new_p);

typedef struct {
    size_t keys, bytes, created, evicted;
} hp_residual_info_t;
void hp_residual_info(const hp_residual_store_t *s, hp_residual_info_t *info_p);

#endif
