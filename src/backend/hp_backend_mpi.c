/*
 * Exact MPI operations on a call's buffer (hp_backend_mpi.h).  On device
 * memory an error still calls MPI, on zeros, so no peer waits forever.
 */
#include "hp_backend_mpi.h"
#include <stdlib.h>

int hp_mem_pmpi_allreduce(hp_mem_t *m, const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm)
{
    float *h;
    int rc;
    if (!hp_mem_is_device(m))
        return PMPI_Allreduce(sendbuf, recvbuf, (int)count, MPI_FLOAT, MPI_SUM, comm);
    h = hp_mem_stage_in(m, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, count);
    if (h == NULL) {
        h = (float *)calloc(count ? count : 1, sizeof(float));
        rc = PMPI_Allreduce(MPI_IN_PLACE, h, (int)count, MPI_FLOAT, MPI_SUM, comm);
        free(h);
        return rc == MPI_SUCCESS ? MPI_ERR_OTHER : rc;
    }
    rc = PMPI_Allreduce(MPI_IN_PLACE, h, (int)count, MPI_FLOAT, MPI_SUM, comm);
    if (rc == MPI_SUCCESS && hp_mem_stage_out(m, recvbuf, h, count))
        rc = MPI_ERR_OTHER;
    return rc;
}

int hp_mem_pmpi_reduce_root0(hp_mem_t *m, void *buf, size_t count, int rank, MPI_Comm comm)
{
    float *h;
    int rc;
    if (!hp_mem_is_device(m))
        return PMPI_Reduce(rank == 0 ? MPI_IN_PLACE : buf, rank == 0 ? buf : NULL, (int)count, MPI_FLOAT,
                           MPI_SUM, 0, comm);
    h = hp_mem_stage_in(m, buf, count);
    if (h == NULL) {
        h = (float *)calloc(count ? count : 1, sizeof(float));
        rc = PMPI_Reduce(rank == 0 ? MPI_IN_PLACE : h, rank == 0 ? h : NULL, (int)count, MPI_FLOAT, MPI_SUM, 0, comm);
        free(h);
        return rc == MPI_SUCCESS ? MPI_ERR_OTHER : rc;
    }
    rc = PMPI_Reduce(rank == 0 ? MPI_IN_PLACE : h, rank == 0 ? h : NULL, (int)count, MPI_FLOAT, MPI_SUM, 0, comm);
    if (rc == MPI_SUCCESS && rank == 0 && hp_mem_stage_out(m, buf, h, count))
        rc = MPI_ERR_OTHER;
    return rc;
}

int hp_mem_pmpi_bcast_root0(hp_mem_t *m, void *buf, size_t count, MPI_Comm comm)
{
    float *h;
    int rc, rank = 0;
    if (!hp_mem_is_device(m))
        return PMPI_Bcast(buf, (int)count, MPI_FLOAT, 0, comm);
    PMPI_Comm_rank(comm, &rank);
    h = hp_mem_stage_in(m, rank == 0 ? buf : NULL, count);
    if (h == NULL) {
        h = (float *)calloc(count ? count : 1, sizeof(float));
        rc = PMPI_Bcast(h, (int)count, MPI_FLOAT, 0, comm);
        free(h);
        return rc == MPI_SUCCESS ? MPI_ERR_OTHER : rc;
    }
    rc = PMPI_Bcast(h, (int)count, MPI_FLOAT, 0, comm);
    if (rc == MPI_SUCCESS && rank != 0 && hp_mem_stage_out(m, buf, h, count))
        rc = MPI_ERR_OTHER;
    return rc;
}
