/*
 * The NCCL front end's element adapter (src/front/nccl/hp_nccl_elem.c): a
 * float16 or bfloat16 call is reduced as float32 (the algorithms' type) in
 * a copy of the communicator's, widened from the input and narrowed back
 * into the user's buffer, rounded to nearest even; ncclAvg's division and
 * a failed call's NaN, on the device.
 */
#ifndef HP_NCCL_ELEM_H
#define HP_NCCL_ELEM_H

#include "hp_backend.h"
#include "hp_comm.h"
#include "hp_nccl_ctx.h"

/* The float32 data of a 16-bit call of count elements of `elem`
 * (HP_ELEM_F16/BF16) from src: c->wide grown (by agreement, in the call's
 * stream order: HP_ERR_NOMEM on every rank alike when a rank could not)
 * and the conversion queued on the call's codec; *data_p. */
hp_status_t hp_nccl_widen(hp_comm_t *c, hp_nccl_ctx_t *t, hp_mem_t *mem, const void *src, size_t count, int elem,
                          float **data_p);

/* The float32 result data narrowed into dst (a 16-bit call); nothing for
 * float32. */
hp_status_t hp_nccl_narrow(hp_mem_t *mem, const float *data, void *dst, size_t count, int elem);

/* recv[0..count) = NaN (a failed call, on every rank alike). */
void hp_nccl_fill_nan(hp_mem_t *m, float *recv, size_t count);

/* recv /= N (ncclAvg), on the device where the call has a codec context. */
hp_status_t hp_nccl_divide(hp_mem_t *m, float *recv, size_t count, int N);

#endif
