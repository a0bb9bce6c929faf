/*
 * Device memory of the NCCL front end's own, and the element types of a
 * compressed ncclAllReduce (src/front/hp_nccl_elem.c).
 */
#ifndef HP_NCCL_ELEM_H
#define HP_NCCL_ELEM_H

#include "hp_backend.h"

/* The element types of a compressed call: float32, or float16 / bfloat16
 * widened into float32 for the algorithms and the result narrowed back. */
enum { HP_NCCL_ELEM_F32, HP_NCCL_ELEM_F16, HP_NCCL_ELEM_BF16 };

/* Device memory kept from call to call (p NULL: none yet). */
typedef struct {
    hp_gpu_ptr_t where;   /* its context */
    void        *p;
    size_t       bytes;
} hp_nccl_dbuf_t;

/* b holds at least `bytes` in where's context afterwards (kept, grown,
 * moved to another context); 0, or -1 with a warning naming `what`. */
int hp_nccl_dev_grow(hp_nccl_dbuf_t *b, const hp_gpu_ptr_t *where, size_t bytes, const char *what);

/* A 16-bit call's data src widened into float32 (*data_p: wide's memory,
 * in the context of the call's buffer), in the call's stream order (the
 * codec's: its producer on the caller's stream must be waited for, or the
 * codec's streams joined to that stream, before).  -1
 * when there is no memory for the copy (this rank cannot take part, as for
 * the messages' memory); a failed conversion is the call's local failure
 * (mem->err: every rank's result is NaN). */
int hp_nccl_widen(hp_nccl_dbuf_t *wide, hp_mem_t *mem, const void *src, size_t count, int elem, void **data_p);

/* The float32 result data narrowed into the user's 16-bit buffer dst
 * (elem other than HP_NCCL_ELEM_F32, else nothing; round to nearest even:
 * a sum beyond the format's range is +-Inf, as NCCL's own 16-bit sum
 * gives), enqueued in the call's stream order, no wait.  0, or -1 when the
 * conversion could not be enqueued (with a warning). */
int hp_nccl_narrow(hp_mem_t *mem, const void *data, void *dst, size_t count, int elem);

/* hp_nccl_narrow, then the call's device work waited for (hp_mem_end): a
 * host-synchronous call's end.  0, or -1 when the conversion or the wait
 * failed (with a warning): the call then returns a CUDA error on this
 * rank, as a failed copy does. */
int hp_nccl_narrow_end(hp_mem_t *mem, const void *data, void *dst, size_t count, int elem);

#endif
