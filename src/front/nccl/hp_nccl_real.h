/*
 * The real NCCL functions (src/front/nccl/hp_nccl_real.c), one table for the
 * wrappers (mpi_wrappers/hp_nccl_wrap.c) and the front end: the next object
 * that defines each (dlsym(RTLD_NEXT)), or, when the NCCL library was
 * loaded into a local scope (a Python extension's dependency), any loaded
 * object other than hipress that defines it, else its profiling name
 * (pnccl*); each resolved at its first use, failing loudly once.
 */
#ifndef HP_NCCL_REAL_H
#define HP_NCCL_REAL_H

#include <nccl.h>
#include <stdatomic.h>

typedef struct {
    const char    *name;
    void *_Atomic  fn;
    _Atomic int    failed;
} hp_real_t;

/* The real function of r; NULL after one error line when no NCCL in the
 * process defines it. */
void *hp_nccl_real_get(hp_real_t *r);

/* Every NCCL function hipress calls for real: those it wraps and those it
 * only calls (X(name)). */
#define HP_NCCL_REALS_BASE(X)                                                                      \
    X(ncclAllReduce) X(ncclGroupStart) X(ncclGroupEnd) X(ncclCommDestroy) X(ncclCommAbort)          \
    X(ncclCommFinalize) X(ncclCommSplit) X(ncclBroadcast) X(ncclBcast) X(ncclReduce) X(ncclAllGather) \
    X(ncclReduceScatter) X(ncclSend) X(ncclRecv) X(ncclCommCount) X(ncclCommUserRank)               \
    X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclCommInitRankConfig) X(ncclCommInitRank)
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#define HP_NCCL_REALS(X) HP_NCCL_REALS_BASE(X) X(ncclAlltoAll) X(ncclGather) X(ncclScatter)
#else
#define HP_NCCL_REALS(X) HP_NCCL_REALS_BASE(X)
#endif

#define HP_REAL_EXTERN(fn) extern hp_real_t hp_real_##fn;
HP_NCCL_REALS(HP_REAL_EXTERN)
#undef HP_REAL_EXTERN

/* The real `fn`, typed as nccl.h declares it. */
#define HP_REAL(fn) ((__typeof__(&fn))hp_nccl_real_get(&hp_real_##fn))

#endif
