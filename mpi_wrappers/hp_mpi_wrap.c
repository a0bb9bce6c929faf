/*
 * MPI interposition (PMPI).  Each wrapper forwards to libmpi's PMPI_* entry;
 * hipress exports no PMPI_* symbol of its own.  MPI_Allreduce's fast path
 * (anything but MPI_FLOAT + MPI_SUM) costs two compares and two atomic adds,
 * plus the load watch of the GPU path, which stays quiet in a process that
 * never loads CUDA; the rest goes to the MPI front end (hp_mpi_entry.h).
 * MPI_Bcast and MPI_Allgatherv are wrapped only for device buffers, which
 * the front end stages for an MPI that cannot take them.
 */
#include "hp_mpi_entry.h"
#include "hp_core.h"
#include <limits.h>

#define HP_WRAP HP_EXPORT

HP_WRAP int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        hp_mpi_entry_init(NULL);
    return rc;
}

HP_WRAP int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    /* never raise the level the application asked for */
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        hp_mpi_entry_init(provided);
    return rc;
}

HP_WRAP int MPI_Finalize(void)
{
    hp_mpi_entry_finalize();
    return PMPI_Finalize();
}

HP_WRAP int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm)
{
    if (HP_UNLIKELY(!hp_mpi_entry_on()))
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    hp_mpi_entry_count_call();
    if (datatype != MPI_FLOAT) {
        hp_mpi_entry_count_pass(HP_ELIG_DATATYPE);
        if (HP_UNLIKELY(hp_mpi_entry_device_seen()))
            return hp_mpi_entry_allreduce_pass(sendbuf, recvbuf, count, datatype, op, comm);
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
    if (op != MPI_SUM) {
        hp_mpi_entry_count_pass(HP_ELIG_OP);
        if (HP_UNLIKELY(hp_mpi_entry_device_seen()))
            return hp_mpi_entry_allreduce_pass(sendbuf, recvbuf, count, datatype, op, comm);
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
    return hp_mpi_entry_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

#ifdef HAVE_MPI_ALLREDUCE_C
/* MPI-4 large-count variant: counted and passed through (hipress compresses
 * the int-count entry point only). */
HP_WRAP int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                            MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    if (hp_mpi_entry_on() && datatype == MPI_FLOAT && op == MPI_SUM && count >= 0 && count <= INT_MAX)
        return MPI_Allreduce(sendbuf, recvbuf, (int)count, datatype, op, comm);
    return PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
}
#endif

HP_WRAP int MPI_Bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    if (HP_LIKELY(!hp_mpi_entry_device_seen()) || !hp_mpi_entry_on())
        return PMPI_Bcast(buf, count, datatype, root, comm);
    return hp_mpi_entry_bcast(buf, count, datatype, root, comm);
}

HP_WRAP int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    if (HP_LIKELY(!hp_mpi_entry_device_seen()) || !hp_mpi_entry_on())
        return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    return hp_mpi_entry_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}

/* Info keys "hipress_compress" (bool) and "hipress_<setting>" tune one
 * communicator (the front end reads them); every key goes to MPI first. */
HP_WRAP int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info)
{
    int rc = PMPI_Comm_set_info(comm, info);
    return rc != MPI_SUCCESS ? rc : hp_mpi_entry_set_info(comm, info);
}
