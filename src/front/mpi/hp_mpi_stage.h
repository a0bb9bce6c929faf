/*
 * Device buffers in MPI collectives (src/front/mpi/hp_mpi_stage.c): their
 * kind, and an exact staging through host memory for an MPI that cannot
 * take them.  Used only once hp_gpu_watch_fired() said device memory may
 * exist in the process.
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

/* MPI_Bcast and MPI_Allgatherv with device buffers, as
 * hp_mpi_allreduce_pass: PMPI unchanged, or staged exactly. */
int hp_mpi_bcast_pass(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int hp_mpi_allgatherv_pass(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm);

/* Whether the MPI takes device buffers (HIPRESS_GPU_MPI_AWARE, else
 * MPIX_Query_cuda_support() where the MPI has it, else no).  Cached. */
int hp_mpi_cuda_aware(void);

#endif
