/*
 * Exact MPI operations on a compressed call's buffer (count floats): PMPI
 * directly on host memory, through a host copy (hp_mem_stage_in) on device
 * memory.  The MPI part of the backend layer, apart from hp_backend.h so
 * that the backends themselves need no <mpi.h> (the NCCL-only library,
 * libhipress_nccl.so, has no MPI: doc/dev/architecture.md, "Two libraries").
 */
#ifndef HP_BACKEND_MPI_H
#define HP_BACKEND_MPI_H

#include <mpi.h>
#include "hp_backend.h"

int hp_mem_pmpi_allreduce(hp_mem_t *m, const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm);
int hp_mem_pmpi_reduce_root0(hp_mem_t *m, void *buf, size_t count, int rank, MPI_Comm comm);
int hp_mem_pmpi_bcast_root0(hp_mem_t *m, void *buf, size_t count, MPI_Comm comm);

#endif
