/*
 * The MPI front end's entry (src/front/mpi/hp_mpi_entry.c): what the MPI_*
 * wrappers (mpi_wrappers/hp_mpi_wrap.c) hand it.  A wrapper passes what is
 * not a float sum straight to PMPI, after the few instructions below, and
 * gives this front end the rest: the classification of an MPI_Allreduce of
 * MPI_FLOAT with MPI_SUM and its run through the driver, the staging of
 * device buffers (hp_mpi_stage.h), MPI_Init's and MPI_Finalize's parts, and
 * a communicator's info keys.
 */
#ifndef HP_MPI_ENTRY_H
#define HP_MPI_ENTRY_H

#include <mpi.h>
#include "hp_global.h"
#include "hp_gpu.h"

/* Whether hipress is on (HIPRESS_ENABLE, and MPI_Init's part done). */
static inline int hp_mpi_entry_on(void)
{
    return hp_g.enabled;
}

/* An MPI_Allreduce caught; one passed through for reason r (hp_elig_t). */
static inline void hp_mpi_entry_count_call(void)
{
    atomic_fetch_add_explicit(&hp_g.stats.calls[HP_FRONT_MPI], 1, memory_order_relaxed);
}

static inline void hp_mpi_entry_count_pass(int r)
{
    atomic_fetch_add_explicit(&hp_g.stats.reason[HP_FRONT_MPI][r], 1, memory_order_relaxed);
}

/* Whether device memory may exist in the process (hp_gpu_watch_fired): a
 * few instructions, zero in a process that never loads CUDA. */
static inline int hp_mpi_entry_device_seen(void)
{
    return hp_gpu_watch_fired();
}

/* An MPI_Allreduce of MPI_FLOAT with MPI_SUM (counted as a call): its own
 * eligibility, then the driver, which agrees with the other ranks before
 * it compresses; what it does not take goes to PMPI_Allreduce (device
 * buffers staged where the MPI cannot take them).  MPI's result. */
int hp_mpi_entry_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                           MPI_Comm comm);

/* PMPI for a collective hipress does not compress, once device memory may
 * exist (hp_mpi_entry_device_seen): unchanged for host buffers and for a
 * CUDA-aware MPI, staged exactly through host memory otherwise. */
int hp_mpi_entry_allreduce_pass(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                MPI_Comm comm);
int hp_mpi_entry_bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int hp_mpi_entry_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                            const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm);

/* After a successful PMPI_Init (provided NULL: the level is asked of MPI)
 * or PMPI_Init_thread (*provided: the level MPI granted): the settings,
 * agreed over MPI_COMM_WORLD.  Before PMPI_Finalize: MPI_COMM_WORLD's
 * state released, the statistics printed. */
void hp_mpi_entry_init(const int *provided);
void hp_mpi_entry_finalize(void);

/* After a successful PMPI_Comm_set_info: the info keys "hipress_compress"
 * (bool) and "hipress_<setting>" tune comm; every other key went to MPI
 * unchanged.  MPI_SUCCESS, or MPI_ERR_INFO_VALUE through comm's error
 * handler when a value is refused. */
int hp_mpi_entry_set_info(MPI_Comm comm, MPI_Info info);

#endif
