/*
 * The MPI front end: the state of an MPI communicator (an attribute that
 * holds an hp_comm_t), MPI_Init's and MPI_Finalize's parts, and the one
 * classification of an MPI_Allreduce (the wrapper's and a comm hook's)
 * before the driver (src/drive/hp_drive.c).  The MPI front end's headers
 * include <mpi.h> (as the MPI transport's and backend's do); the NCCL-only
 * library has none of them.
 */
#ifndef HP_FRONT_MPI_H
#define HP_FRONT_MPI_H

#include <mpi.h>
#include "hp_comm.h"
#include "hp_front.h"

/* The MPI front end's table (src/front/mpi/hp_front_mpi.c). */
extern const hp_front_t hp_front_mpi;

/* The state of comm, created (without its private communicator) when
 * `create` and missing; NULL when absent or on failure.  The attribute
 * holds its reference: it is valid while comm is. */
hp_comm_t *hp_mpi_comm(MPI_Comm comm, int create);

/* The attribute that holds a communicator's state (MPI_KEYVAL_INVALID
 * before MPI_Init and after MPI_Finalize). */
int hp_mpi_keyval(void);

/* The private communicator, the hierarchy's and their transports
 * (collective over the user's communicator: the front end's ready). */
hp_status_t hp_mpi_comm_ready(hp_comm_t *c, hp_dcall_t *d);

/* MPI_Init's part: the settings, agreed over MPI_COMM_WORLD (a bad or
 * mismatched setting ends the job with one line); 0, or -1 when MPI
 * failed.  MPI_Finalize's: MPI_COMM_WORLD's state, the stats table. */
int hp_init_after_mpi(void);
void hp_finalize_before_mpi(void);

/* What a caller says a call is, agreed with its count (hp_dcall_t.key):
 * a comm hook's bucket. */
typedef struct {
    long long   key;
    const char *what;                                 /* "buckets" */
    void      (*str)(long long key, char *buf, size_t len);   /* NULL: a number */
} hp_mpi_key_t;

/* An MPI_Allreduce of MPI_FLOAT with MPI_SUM that every rank finds
 * eligible on the shared criteria (hp_eligible_shared), to the driver:
 * local_ok, this rank's own verdict on its buffers; mem_kind, their memory
 * (0 host, 1 device routed to the GPU); key, what the caller says the call
 * is (NULL for an MPI_Allreduce).  Returns 1 when the driver took it
 * (*rc_p: its MPI result, an error through comm's error handler; *st_p,
 * when not NULL: hipress' status), 0 when it goes to PMPI_Allreduce
 * unchanged (*reason_p: why, hp_elig_t). */
int hp_mpi_allreduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm, hp_comm_t *c, int local_ok,
                     int mem_kind, const hp_mpi_key_t *key, int *rc_p, hp_status_t *st_p, int *reason_p);

/* One MPI_Allreduce of MPI_FLOAT with MPI_SUM, as its caller has it: an
 * MPI_Allreduce (the wrapper's) or a comm hook's bucket. */
typedef struct {
    const void         *sendbuf;   /* MPI_IN_PLACE allowed */
    void               *recvbuf;
    long long           count;
    MPI_Comm            comm;
    hp_comm_t          *c;         /* comm's state when the caller holds it (a hook's), else NULL */
    int                 size;      /* comm's size when the caller knows comm is an intracommunicator
                                    * (a hook's own), else 0: MPI is asked */
    int                 enabled;
    int                 device;    /* this rank's buffers are device memory the GPU path cannot take */
    int                 gpu;       /* this rank's buffers are routed to the GPU (hp_gpu_compress_route) */
    const hp_mpi_key_t *key;       /* what the caller says the call is (NULL for an MPI_Allreduce) */
} hp_mpi_call_t;

/* The one classification of such a call: its eligibility (hp_eligible, on
 * one descriptor), and, where every rank may compress it (the criteria
 * they share, hp_eligible_shared), the driver (src/drive/hp_drive.c), which
 * agrees with the other ranks before it compresses.  comm's state is found
 * once (its attribute), made when the call may be compressed.  Returns 1
 * when the driver took the call (*rc_p: its MPI result, an error through
 * comm's error handler; *st_p, when not NULL: hipress' status), 0 when the
 * caller passes it to PMPI_Allreduce unchanged (counted, with its reason). */
int hp_mpi_allreduce_try(const hp_mpi_call_t *k, int *rc_p, hp_status_t *st_p);

#endif
