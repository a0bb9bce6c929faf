/*
 * hipress public API.
 *
 * Most users never include this header: preloading libhipress.so under mpirun
 * is enough.  The calls below let a program (or a test) inspect the library
 * and tune one communicator.  All of them may be called before MPI_Init
 * except where noted.
 */
#ifndef HIPRESS_H
#define HIPRESS_H

/* HIPRESS_NO_MPI, defined before this header: without <mpi.h> and the three
 * calls that take an MPI communicator, for a program without MPI that uses
 * libhipress_nccl.so (the NCCL-only library). */
#ifndef HIPRESS_NO_MPI
#include <mpi.h>
#endif
#include <stddef.h>
#include "hipress_compressor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HIPRESS_VERSION_MAJOR 0
#define HIPRESS_VERSION_MINOR 1
#define HIPRESS_VERSION_PATCH 0

/* Status codes: 0 success, negative errors.  An error status may carry
 * the failing library's own code (an MPI error code, an ncclResult_t, a
 * CUresult) in its high bits: hipress_status_class() gives the
 * HIPRESS_ERR_* value, hipress_status_cause() that code (0: none). */
typedef enum {
    HIPRESS_OK             = 0,
    HIPRESS_ERR_INVALID    = -1, /* bad argument or setting */
    HIPRESS_ERR_NOMEM      = -2,
    HIPRESS_ERR_MPI        = -3, /* an MPI call failed (cause: its error code) */
    HIPRESS_ERR_MESSAGE    = -4, /* a received message failed validation */
    HIPRESS_ERR_PEER       = -5, /* another rank failed inside the collective */
    HIPRESS_ERR_UNSUPPORTED= -6,
    HIPRESS_ERR_STATE      = -7, /* called at the wrong time */
    HIPRESS_ERR_DEVICE     = -8, /* a CUDA call failed (cause: its CUresult, when known) */
    HIPRESS_ERR_NCCL       = -9  /* an NCCL call failed (cause: its ncclResult_t) */
} hipress_status_t;

/* A short lowercase description of a status, its cause included. */
const char *hipress_status_string(int status);

/* The HIPRESS_ERR_* class of a status (HIPRESS_OK for success). */
int hipress_status_class(int status);

/* The failing library's code a status carries, 0 when none. */
int hipress_status_cause(int status);

/* "0.1.0". */
const char *hipress_version(void);

/* Which library this is: "libhipress" (libhipress.so: MPI_Allreduce and,
 * built with NCCL, ncclAllReduce; needs libmpi) or "libhipress_nccl"
 * (libhipress_nccl.so: ncclAllReduce only, needs no MPI: for torchrun). */
const char *hipress_library(void);

/* Number of registered compressors (built-ins and loaded plugins), and the
 * name of the i-th one (NULL when i is out of range). */
int hipress_compressor_count(void);
const char *hipress_compressor_name(int i);

/* The compressor of that name (built-in or plugin), or NULL.  Lets tools and
 * tests call encode/decode directly. */
const hipress_compressor_v1_t *hipress_compressor_find(const char *name);

/* Compressor parameters from the HIPRESS_* defaults (environment ignored). */
void hipress_comp_params_default(hipress_comp_params_t *params_p);

#ifndef HIPRESS_NO_MPI
/* Override one HIPRESS_* setting for communicator `comm` only, e.g.
 * hipress_comm_set(comm, "HIPRESS_COMPRESSOR", "fp16").  Every rank of comm
 * must make the same call before its next MPI_Allreduce on comm (the values
 * are part of what ranks agree on).  Needs MPI to be initialised.  The same
 * is reachable without this header through MPI_Comm_set_info with the keys
 * "hipress_compress" (true/false: opt the communicator out) and
 * "hipress_<setting in lower case>" (for example "hipress_compressor").
 * Returns HIPRESS_OK or HIPRESS_ERR_INVALID (unknown name, bad value). */
int hipress_comm_set(MPI_Comm comm, const char *name, const char *value);

/* The plan fixed for buffers of `bytes` (its power-of-two size class) on
 * comm: "plain", "ring K=4", ..., or "exploring" / "none" while there is none
 * yet.  Local; the same on every rank of comm. */
int hipress_comm_plan(MPI_Comm comm, size_t bytes, char *buf, size_t len);

/* This rank's error-feedback residual for the buffer (buf, count) on comm:
 * the gradient it still owes the sum for those elements, which its next
 * call on that buffer adds in.  Copies count floats into out (zeros when it
 * holds none: no call yet, a compressor without error feedback, a staging
 * buffer).  Local; for tests, checkpoints and diagnostics.  Returns
 * HIPRESS_OK or HIPRESS_ERR_INVALID (NULL pointer, MPI not initialised). */
int hipress_comm_residual(MPI_Comm comm, const void *buf, size_t count, float *out);
#endif

#ifndef HIPRESS_NO_MPI
/* A comm hook's exchange: for a client that hands hipress one flat float32
 * buffer at a time through a hook of its own, such as PyTorch DDP's
 * register_comm_hook (the Python package hipress, hipress.torch.allreduce_hook,
 * runs these on a thread of its own; doc/recipes.md).  Needs MPI initialised
 * at MPI_THREAD_SERIALIZED or above, and the calls of one hook made one at
 * a time, in the same order on every rank. */
typedef struct hipress_hook hipress_hook_t;

/* Collective over MPI_COMM_WORLD: a hook with a communicator of its own.
 * Runs hipress' initialisation if MPI was initialised before the library
 * was loaded.  HIPRESS_ERR_STATE when MPI is not initialised (or already
 * finalised) or its thread level is below MPI_THREAD_SERIALIZED. */
int hipress_hook_open(hipress_hook_t **hook_p);

/* This process's rank and the number of ranks of the hook. */
int hipress_hook_size(const hipress_hook_t *hook, int *rank_p, int *size_p);

/* Sum the count floats of buf over the ranks, in place, compressed as an
 * eligible MPI_Allreduce is (HIPRESS_* settings, plans, stats), with error
 * feedback kept per bucket (bucket: the client's index of the buffer, from
 * 0; last: it is the last bucket of the step; layout: any value that
 * changes when the tensors the bucket holds, or their order, change);
 * average: divide the sum by the number of ranks.  The bucket's index,
 * whether it is the last and the count are agreed: a rank whose buckets
 * differ makes the call fail on every rank (HIPRESS_ERR_INVALID), never
 * hang.  A bucket found at another address, with another count or another
 * layout value (laid out again) drops the residual of its old layout,
 * counted in the stats.  After a failure every later call of the hook
 * fails at once (HIPRESS_ERR_PEER). */
int hipress_hook_allreduce(hipress_hook_t *hook, float *buf, size_t count, int bucket, int last,
                           unsigned long long layout, int average);

/* Free the hook (not collective; after MPI_Finalize it frees memory only). */
int hipress_hook_close(hipress_hook_t *hook);
#endif

/* Statistics of this process since MPI_Init (see doc/settings.md). */
typedef struct hipress_stats {
    unsigned long long calls;         /* MPI_Allreduce calls seen */
    unsigned long long compressed;    /* of which took a compressed path */
    unsigned long long passthrough;   /* of which went to PMPI_Allreduce */
    unsigned long long bytes_raw;     /* raw bytes of compressed calls */
    unsigned long long bytes_wire;    /* bytes this rank sent for them */
    unsigned long long nonfinite;     /* partitions sent as NaN */
    unsigned long long errors;        /* compressed calls that returned an error */
    double encode_s;                  /* seconds in encoders */
    double decode_s;                  /* seconds in decoders */
    double total_s;                   /* seconds in compressed calls */
} hipress_stats_t;

void hipress_stats_get(hipress_stats_t *stats_p);

/* ncclAllReduce interception (a build with NCCL; see doc/usage.md).  By
 * default every NCCL call goes to the real library unchanged; the counters
 * say what a compressed NCCL path would take (HIPRESS_NCCL=compress, an
 * experimental mode, compresses the eligible float32 calls outside groups:
 * doc/gpu.md).  calls - eligible - passthrough = calls inside a group that
 * has not ended yet. */
typedef struct hipress_nccl_stats {
    unsigned long long calls;          /* ncclAllReduce calls seen */
    unsigned long long eligible;       /* of which eligible */
    unsigned long long passthrough;    /* of which not, for any reason */
    unsigned long long in_group;       /* of those, part of the user's group */
    unsigned long long capturing;      /* of those, on a stream under graph capture */
    unsigned long long comms_tracked;  /* NCCL communicators with hipress state now */
    unsigned long long comms_released; /* state released by ncclCommDestroy/Abort/Finalize */
    int group_depth;                   /* the calling thread's ncclGroupStart depth */
    int intercepted;                   /* 1 when this build intercepts NCCL */
} hipress_nccl_stats_t;

void hipress_nccl_stats_get(hipress_nccl_stats_t *stats_p);

/* hipress_comm_set for an NCCL communicator (a ncclComm_t): for example
 * ("HIPRESS_ENABLE", "0") opts it out.  May be called before MPI_Init or
 * without MPI.  Its communicators from ncclCommSplit start from the job's
 * settings.  HIPRESS_ERR_UNSUPPORTED in a build without NCCL. */
int hipress_nccl_comm_set(void *nccl_comm, const char *name, const char *value);

/* hipress_comm_residual for an NCCL communicator under HIPRESS_NCCL=compress:
 * a host copy of the error-feedback residual this rank holds for the device
 * buffer (buf, count) (zeros when none).  HIPRESS_ERR_UNSUPPORTED in a build
 * without NCCL, HIPRESS_ERR_DEVICE when it cannot be read. */
int hipress_nccl_comm_residual(void *nccl_comm, const void *buf, size_t count, float *out);

#ifdef __cplusplus
}
#endif
#endif /* HIPRESS_H */
