/*
 * Which calls are compressed, MPI_Allreduce and ncclAllReduce alike: a pure
 * function of one descriptor that each front end fills from its call's
 * arguments, so every rank decides the same from the same facts and the
 * rule is unit-testable without MPI or NCCL.
 */
#ifndef HP_ELIGIBLE_H
#define HP_ELIGIBLE_H

#include "hp_core.h"

typedef enum {
    HP_ELIG_YES = 0,
    HP_ELIG_DISABLED,      /* HIPRESS_ENABLE=0 or library not initialised */
    HP_ELIG_NULL_HANDLE,   /* MPI_COMM_NULL, MPI_DATATYPE_NULL, MPI_OP_NULL */
    HP_ELIG_OP,            /* not a sum (MPI_SUM; ncclSum or ncclAvg) */
    HP_ELIG_DATATYPE,      /* not MPI_FLOAT (NCCL: float32, float16, bfloat16) */
    HP_ELIG_COUNT,         /* count <= 0, or its bytes overflow */
    HP_ELIG_NULL_BUFFER,   /* NULL send/recv buffer */
    HP_ELIG_OVERLAP,       /* sendbuf and recvbuf overlap (not MPI_IN_PLACE) */
    HP_ELIG_INTERCOMM,
    HP_ELIG_SMALL_COMM,    /* communicator of one rank */
    HP_ELIG_OPTED_OUT,     /* hipress_compress=false, or HIPRESS_ENABLE=0 for this communicator */
    HP_ELIG_TOO_SMALL,     /* bytes < HIPRESS_MIN_BYTES */
    HP_ELIG_DEVICE,        /* device or managed memory: never the CPU path (hp_gpu.h) */
    HP_ELIG_PEER,          /* eligible here, not on another rank (the per-call agreement) */
    HP_ELIG_GROUP,         /* part of the user's ncclGroupStart/End */
    HP_ELIG_CAPTURE,       /* the stream is being captured into a CUDA graph, or unknown */
    HP_ELIG_NOPLAN,        /* no plan could be made (agreed: on every rank) */
    HP_ELIG_NREASONS
} hp_elig_t;

typedef struct {
    int         enabled;
    int         null_handle;
    int         op_is_sum;
    int         dtype_is_float;
    long long   count;
    size_t      elem_size;
    const void *sendbuf;      /* NULL allowed (then not eligible) */
    const void *recvbuf;
    int         in_place;     /* MPI_IN_PLACE, or NCCL's sendbuff == recvbuff */
    int         is_inter;
    int         comm_size;    /* 0: not known yet (NCCL: the first call's agreement says) */
    int         opted_out;
    int         device;       /* device buffers the GPU path cannot take (MPI) */
    int         in_user_group;   /* part of the user's NCCL group (hp_nccl_group_op) */
    int         capturing;    /* the stream is captured: 1, -1 unknown, 0 not */
    size_t      min_bytes;
} hp_call_desc_t;

hp_elig_t hp_eligible(const hp_call_desc_t *d);

/* The verdict on the criteria every rank of a correct program shares for a
 * call (everything but the buffers: NULL, overlapping, device memory).
 * When it is YES every rank takes part in the per-call agreement of what
 * only it can see, so no rank compresses while another passes through. */
hp_elig_t hp_eligible_shared(const hp_call_desc_t *d);

/* Short name of a reason ("datatype"), for the stats table.  Capture comes
 * last in hp_eligible, so a front end may query it (a driver call) only
 * once everything else says yes. */
const char *hp_elig_name(hp_elig_t r);

#endif
