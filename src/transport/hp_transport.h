/*
 * The small transport interface the CaSync algorithms are written against.
 * PMPI point-to-point on the private communicator today; NCCL send/recv
 * later.  Messages between one pair of ranks are matched in posting order.
 */
#ifndef HP_TRANSPORT_H
#define HP_TRANSPORT_H

#include <mpi.h>
#include "hp_core.h"

typedef struct { MPI_Request r; int peer; } hp_req_t;
#define HP_REQ_NULL ((hp_req_t){MPI_REQUEST_NULL, -1})

typedef struct hp_transport {
    int      rank, size;
    MPI_Comm comm;
    const int *world_of;        /* world rank of each rank of comm (NULL: unknown) */
    double   t_wait;            /* seconds spent blocked in wait */
    size_t   bytes_sent;
} hp_transport_t;

/* world_of may be NULL; it names the peer a stuck wait waits for
 * (HIPRESS_TIMEOUT, src/core/hp_watchdog.h). */
void hp_tp_init(hp_transport_t *tp, MPI_Comm comm, const int *world_of);
hp_status_t hp_tp_isend(hp_transport_t *tp, const void *buf, size_t len, int peer, hp_req_t *req);
hp_status_t hp_tp_irecv(hp_transport_t *tp, void *buf, size_t cap, int peer, hp_req_t *req);
/* Wait for a request; for a receive *len_p gets the bytes received. */
hp_status_t hp_tp_wait(hp_transport_t *tp, hp_req_t *req, size_t *len_p);
/* Let pending transfers progress (Open MPI's TCP moves data only inside MPI calls). */
void hp_tp_progress(hp_transport_t *tp);
/* Logical OR of flag over all ranks (the failure protocol's agreement). */
hp_status_t hp_tp_agree(hp_transport_t *tp, int *flag);

#endif
