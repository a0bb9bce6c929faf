/*
 * Error-feedback state of one communicator, per buffer.
 *
 * A buffer is the (receive address, element count) of a compressed call.
 * Each buffer has one residual vector indexed by element: whatever the plan
 * does (partitioning, algorithm, exploration, hierarchy), every algorithm
 * makes each rank encode each element at most once per call, so one vector
 * holds all that this rank owes for the buffer, and it enters this rank's
 * next encode of that element (or its contribution, where it encodes
 * nothing).  Beside it: the momentum state of a compressor that has one
 * (dgc) and a compressor's own state (powersgd's warm start).
 *
 * Addresses are tracked too.  An address seen with two different counts is
 * a staging buffer (a fusion buffer whose layout changes from call to call):
 * its residuals are dropped and no residual is kept for it again, because a
 * residual applied to elements that now hold another tensor would be wrong.
 *
 * Everything dropped (evicted under the memory bound, a staging buffer, a
 * communicator opted out or freed) is counted: buffers, bytes and the L1
 * mass of the residual (the gradient it still owed).
 *
 * Not thread-safe: a communicator is used by one thread at a time (MPI's
 * rule for collectives on one communicator).
 */
#ifndef HP_RESIDUAL_H
#define HP_RESIDUAL_H

#include "hp_core.h"

typedef struct hp_residual_store hp_residual_store_t;

/* Vectors of one buffer. */
enum {
    HP_RES_R = 0,   /* residual, count floats */
    HP_RES_U,       /* momentum state (dgc), count floats */
    HP_RES_AUX,     /* a collective compressor's state (powersgd: warm-start Q) */
    HP_RES_NSLOTS
};

/* Why a buffer's state was dropped. */
typedef enum {
    HP_RES_DROP_EVICTED = 0,  /* least recently used, under HIPRESS_RESIDUAL_MAX_MB */
    HP_RES_DROP_LAYOUT,       /* its address turned out to be a staging buffer */
    HP_RES_DROP_OPTOUT,       /* the communicator was opted out (HIPRESS_ENABLE=0) */
    HP_RES_DROP_FREED,        /* the communicator was freed (or MPI_Finalize) */
    HP_RES_DROP_RELAID,       /* a comm hook's bucket was laid out again (DDP's rebuild) */
    HP_RES_DROP_NREASONS
} hp_res_drop_t;

/* Memory a buffer's vectors live in when it is not host memory (the
 * residual of a device buffer is device memory: src/backend/hp_gpu_backend.c):
 * allocation (zero-filled; NULL on failure), release, and the L1 mass of a
 * vector being dropped (NaN when it cannot be read). */
typedef struct hp_res_mem {
    void  *(*alloc)(const struct hp_res_mem *m, size_t bytes);
    void   (*release)(const struct hp_res_mem *m, void *p);
    double (*l1)(const struct hp_res_mem *m, const float *p, size_t n);
} hp_res_mem_t;

typedef struct hp_res_buf {
    uintptr_t          addr;
    size_t             count;
    float             *vec[HP_RES_NSLOTS];
    size_t             len[HP_RES_NSLOTS];   /* floats in vec[slot] */
    unsigned long long calls;                /* compressed calls that used it */
    const hp_res_mem_t *mem;                 /* where vec[] live; NULL: host memory */
    struct hp_res_buf *hnext, *prev, *next;  /* hash chain, LRU list (internal) */
} hp_res_buf_t;

typedef struct {
    size_t             buffers, bytes;         /* held now */
    size_t             created;                /* buffers created since creation */
    size_t             staging;                /* addresses found to be staging buffers */
    size_t             stranded;               /* evicted after one call: reallocated buffers */
    size_t             oversize;               /* vectors refused: one exceeds the bound */
    size_t             drop_buffers[HP_RES_DROP_NREASONS];
    size_t             drop_bytes[HP_RES_DROP_NREASONS];
    double             drop_l1[HP_RES_DROP_NREASONS];   /* sum of |residual| dropped */
} hp_residual_info_t;

hp_residual_store_t *hp_residual_create(size_t max_bytes);

/* Drops everything (counted with `reason`) and frees the store. */
void hp_residual_destroy(hp_residual_store_t *s, hp_res_drop_t reason);

/* Frees the store without releasing vectors of a memory other than the
 * host's (device memory, which a release would wait for: after an abort
 * the device may never finish); returns their bytes, kept. */
size_t hp_residual_abandon(hp_residual_store_t *s);

/* A new memory bound; evicts down to it. */
void hp_residual_set_max(hp_residual_store_t *s, size_t max_bytes);

/* Layout rules for hp_residual_buffer. */
typedef enum {
    HP_LAYOUT_DETECT = 0,  /* an address seen with two counts is a staging buffer */
    HP_LAYOUT_TRUST,       /* every (address, count) is one tensor layout */
    HP_LAYOUT_NONE         /* no residual for any buffer */
} hp_layout_t;

/*
 * The state of buffer (addr, count), most recently used from now on.
 * create: make it when missing.  Returns NULL when there is none (and
 * create is 0), when `layout` refuses a residual for this address, or when
 * memory is short.  *staging_p (may be NULL) is set to 1 when this call is
 * the one that found the address to be a staging buffer (the caller warns).
 */
hp_res_buf_t *hp_residual_buffer(hp_residual_store_t *s, uintptr_t addr, size_t count,
                                 int create, hp_layout_t layout, int *staging_p);

/* 1 when a call on (addr, count) under HP_LAYOUT_DETECT finds a staging
 * buffer: the address is one already, or was seen with another count.  A
 * query: it changes nothing (hp_residual_buffer marks the address). */
int hp_residual_is_staging(const hp_residual_store_t *s, uintptr_t addr, size_t count);

/* Vector `slot` of b, n floats, zero-filled when new (or when its length
 * changes).  NULL when n floats do not fit in the bound (no error feedback
 * for it: counted as oversize) or memory is short.  May evict other
 * buffers, never b. */
float *hp_residual_vec(hp_residual_store_t *s, hp_res_buf_t *b, int slot, size_t n);

/* Keep b's vectors in `mem` (NULL: host memory) from now on.  Returns 1
 * when they are there (b holds no vector elsewhere), else 0. */
int hp_residual_bind(hp_res_buf_t *b, const hp_res_mem_t *mem);

/* Drop the state of buffer (addr, count), if any, counted with `reason`;
 * 1 when there was one. */
int hp_residual_drop(hp_residual_store_t *s, uintptr_t addr, size_t count, hp_res_drop_t reason);

/* Drop every buffer, counted with `reason`. */
void hp_residual_drop_all(hp_residual_store_t *s, hp_res_drop_t reason);

void hp_residual_info(const hp_residual_store_t *s, hp_residual_info_t *info_p);

/* Sum of |x| in double (the dropped-mass measure). */
double hp_residual_l1(const float *x, size_t n);

const char *hp_res_drop_name(hp_res_drop_t r);

#endif
