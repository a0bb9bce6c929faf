/*
 * The MPI transport: how to build one (src/transport/hp_tp_mpi.c).  Apart
 * so that hp_transport.h, which the algorithms include, needs no <mpi.h>.
 */
#ifndef HP_TP_MPI_H
#define HP_TP_MPI_H

#include <mpi.h>
#include "hp_transport.h"

/* The MPI transport over comm, a communicator hipress owns (its private
 * communicator, or one of the hierarchy's).  world_of (may be NULL) gives
 * the world rank of each rank of comm, so that a stuck wait names its peer
 * (HIPRESS_TIMEOUT, src/core/hp_watchdog.h).  owned: comm (PMPI_Comm_free)
 * and world_of (free) are the transport's, released by hp_tp_fini; else
 * they must outlive it. */
hp_status_t hp_tp_mpi_init(hp_transport_t *tp, MPI_Comm comm, const int *world_of, int owned);

/* How long a wait of the MPI transport polls before it sleeps between
 * polls (HIPRESS_SPIN_US), process-wide; negative: it never sleeps. */
void hp_tp_mpi_set_spin(double seconds);

/* The communicator of an MPI transport. */
MPI_Comm hp_tp_mpi_comm(const hp_transport_t *tp);

#endif
