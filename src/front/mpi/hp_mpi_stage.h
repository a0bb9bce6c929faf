/*
 * Device buffers in the MPI wrappers (src/front/mpi/hp_mpi_stage.c).  Used only
 * once hp_gpu_watch_fired() said device memory may exist in the process.
 */
#ifndef HP_MPI_STAGE_H
#define HP_MPI_STAGE_H

#include "hp_front_mpi.h"
#include "hp_gpu.h"

/* Classify MPI_Allreduce's buffers (MPI_IN_PLACE and NULL are host).
 * Returns 1 when either is device or managed memory. */
int hp_mpi_buffers_kind(const void *sendbuf, const void *recvbuf, hp_gpu_ptr_t kinds[2]);

/* PMPI_Allreduce for a call hipress does not compress: unchanged for host
 * buffers and for a CUDA-aware MPI, staged exactly through host memory
 * otherwise.  `kinds` as from hp_mpi_buffers_kind, or NULL to look. */
int hp_mpi_allreduce_pass(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm, const hp_gpu_ptr_t *kinds);

/* Whether the MPI takes device buffers (HIPRESS_GPU_MPI_AWARE, else
 * MPIX_Query_cuda_support() where the MPI has it, else no).  Cached. */
int hp_mpi_cuda_aware(void);

#endif
