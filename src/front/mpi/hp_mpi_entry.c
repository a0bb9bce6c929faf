/*
 * The MPI front end's entry (hp_mpi_entry.h): an MPI_Allreduce of
 * MPI_FLOAT with MPI_SUM from its wrapper to the driver or to PMPI,
 * MPI_Init's and MPI_Finalize's parts, and a communicator's info keys.
 * The device staging of what is not compressed is hp_mpi_stage.c's.
 */
#include "hp_mpi_entry.h"
#include "hp_front_mpi.h"
#include "hp_mpi_stage.h"
#include <ctype.h>
#include <string.h>
#include <strings.h>

int hp_mpi_entry_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                           MPI_Comm comm)
{
    hp_mpi_call_t k = {.sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .comm = comm, .enabled = 1};
    hp_gpu_ptr_t kinds[2];
    int rc, any_device = 0;

    /* device memory must never reach the CPU path; it can exist only once
     * the watch has fired.  The GPU compresses what it can (the decision:
     * hp_gpu_compress_route, agreed by the driver with the other ranks'
     * like every rank-local fact); the rest is passed through, staged. */
    if (HP_UNLIKELY(hp_gpu_watch_fired())) {
        any_device = hp_mpi_buffers_kind(sendbuf, recvbuf, kinds);
        k.gpu = any_device && hp_gpu_compress_route(&hp_g.cfg, kinds, sendbuf, recvbuf);
        k.device = any_device && !k.gpu;
    }
    if (hp_mpi_allreduce_try(&k, &rc, NULL))
        return rc;
    if (HP_UNLIKELY(any_device))
        return hp_mpi_allreduce_pass(sendbuf, recvbuf, count, datatype, op, comm, kinds);
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int hp_mpi_entry_allreduce_pass(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                MPI_Comm comm)
{
    return hp_mpi_allreduce_pass(sendbuf, recvbuf, count, datatype, op, comm, NULL);
}

int hp_mpi_entry_bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    return hp_mpi_bcast_pass(buf, count, datatype, root, comm);
}

int hp_mpi_entry_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                            const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return hp_mpi_allgatherv_pass(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}

void hp_mpi_entry_init(const int *provided)
{
    /* never raise the level the application asked for: only read it */
    if (provided != NULL)
        hp_g.thread_level = *provided;
    else
        PMPI_Query_thread(&hp_g.thread_level);
    hp_init_after_mpi();
}

void hp_mpi_entry_finalize(void)
{
    hp_finalize_before_mpi();
}

int hp_mpi_entry_set_info(MPI_Comm comm, MPI_Info info)
{
    int nkeys = 0, bad = 0;

    if (!hp_g.initialized || comm == MPI_COMM_NULL || info == MPI_INFO_NULL)
        return MPI_SUCCESS;
    if (PMPI_Info_get_nkeys(info, &nkeys) != MPI_SUCCESS)
        return MPI_SUCCESS;
    for (int i = 0; i < nkeys; i++) {
        char key[MPI_MAX_INFO_KEY + 1], value[HP_STR_MAX], name[MPI_MAX_INFO_KEY + 16];
        int flag = 0;
        if (PMPI_Info_get_nthkey(info, i, key) != MPI_SUCCESS || strncasecmp(key, "hipress_", 8) != 0)
            continue;
        if (PMPI_Info_get(info, key, HP_STR_MAX - 1, value, &flag) != MPI_SUCCESS || !flag)
            continue;
        if (strcasecmp(key, "hipress_compress") == 0) {
            snprintf(name, sizeof(name), "HIPRESS_ENABLE");
        } else {
            size_t k;
            snprintf(name, sizeof(name), "HIPRESS_%s", key + 8);
            for (k = 8; name[k]; k++)
                name[k] = (char)toupper((unsigned char)name[k]);
        }
        if (hipress_comm_set(comm, name, value) != HIPRESS_OK)
            bad = 1;
    }
    if (bad) {
        PMPI_Comm_call_errhandler(comm, MPI_ERR_INFO_VALUE);
        return MPI_ERR_INFO_VALUE;
    }
    return MPI_SUCCESS;
}
