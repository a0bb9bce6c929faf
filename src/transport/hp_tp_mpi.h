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
 * (HIPRESS_TIMEOUT, src/core/hp_watchdog.h); it must outlive tp.  Nothing
 * to release (hp_tp_fini is a no-op for it). */
hp_status_t hp_tp_mpi_init(hp_transport_t *tp, MPI_Comm comm, const int *world_of);

#endif
