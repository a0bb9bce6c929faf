/* PMPI transport on the private communicator. */
#include "hp_transport.h"
#include "hp_watchdog.h"
#include <limits.h>

#define HP_TAG 7001

void hp_tp_init(hp_transport_t *tp, MPI_Comm comm, const int *world_of)
{
    tp->comm = comm;
    tp->world_of = world_of;
    PMPI_Comm_rank(comm, &tp->rank);
    PMPI_Comm_size(comm, &tp->size);
    tp->t_wait = 0;
    tp->bytes_sent = 0;
}

hp_status_t hp_tp_isend(hp_transport_t *tp, const void *buf, size_t len, int peer, hp_req_t *req)
{
    if (len > INT_MAX)
        return HP_ERR_UNSUPPORTED;
    tp->bytes_sent += len;
    req->peer = peer;
    return PMPI_Isend(buf, (int)len, MPI_BYTE, peer, HP_TAG, tp->comm, &req->r) == MPI_SUCCESS
               ? HP_OK : HP_ERR_MPI;
}

hp_status_t hp_tp_irecv(hp_transport_t *tp, void *buf, size_t cap, int peer, hp_req_t *req)
{
    if (cap > INT_MAX)
        return HP_ERR_UNSUPPORTED;
    req->peer = peer;
    return PMPI_Irecv(buf, (int)cap, MPI_BYTE, peer, HP_TAG, tp->comm, &req->r) == MPI_SUCCESS
               ? HP_OK : HP_ERR_MPI;
}

hp_status_t hp_tp_wait(hp_transport_t *tp, hp_req_t *req, size_t *len_p)
{
    MPI_Status status;
    int count = 0, rc;
    double t0 = hp_now();
    hp_wd_wait_t w;

    hp_wd_enter(&w, "a compressed allreduce",
                req->peer >= 0 && tp->world_of != NULL ? tp->world_of[req->peer] : -1);
    rc = PMPI_Wait(&req->r, &status);
    hp_wd_leave(&w);
    tp->t_wait += hp_now() - t0;
    if (rc != MPI_SUCCESS)
        return HP_ERR_MPI;
    if (len_p != NULL) {
        if (PMPI_Get_count(&status, MPI_BYTE, &count) != MPI_SUCCESS || count == MPI_UNDEFINED)
            return HP_ERR_MPI;
        *len_p = (size_t)count;
    }
    return HP_OK;
}

void hp_tp_progress(hp_transport_t *tp)
{
    /* An Iprobe runs the progress engine without completing our requests
     * (completing a receive here would lose its length). */
    int flag;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, tp->comm, &flag, MPI_STATUS_IGNORE);
}

hp_status_t hp_tp_agree(hp_transport_t *tp, int *flag)
{
    int in = *flag, out = 0, rc;
    hp_wd_wait_t w;
    hp_wd_enter(&w, "the failure agreement of a compressed allreduce", -1);
    rc = PMPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, tp->comm);
    hp_wd_leave(&w);
    if (rc != MPI_SUCCESS)
        return HP_ERR_MPI;
    *flag = out;
    return HP_OK;
}
