/*
 * Process-wide and per-communicator state of the interposer.
 */
#ifndef HP_STATE_H
#define HP_STATE_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include "hp_config.h"
#include "hp_eligible.h"
#include "hp_residual.h"

/* Statistics, process-wide, updated with relaxed atomics. */
typedef struct {
    _Atomic unsigned long long calls;
    _Atomic unsigned long long compressed;
    _Atomic unsigned long long reason[HP_ELIG_NREASONS];
    _Atomic unsigned long long bytes_raw;
    _Atomic unsigned long long bytes_wire;
    _Atomic unsigned long long nonfinite;
    _Atomic unsigned long long errors;
    _Atomic unsigned long long res_created;
    _Atomic unsigned long long res_evicted;
    _Atomic unsigned long long verify_calls;
    _Atomic unsigned long long verify_mismatch;
    _Atomic unsigned long long ns_encode;
    _Atomic unsigned long long ns_decode;
    _Atomic unsigned long long ns_total;
    _Atomic unsigned long long algo_calls[8];
    double max_rel_err;          /* under stats_lock */
    pthread_mutex_t stats_lock;
} hp_stats_t;

typedef struct {
    int             initialized;   /* MPI_Init wrapper ran */
    int             enabled;       /* HIPRESS_ENABLE and init ok */
    int             finalized;
    int             thread_level;  /* level MPI granted */
    int             world_rank, world_size;
    int             keyval;        /* communicator attribute */
    int             err_code;      /* hipress MPI error code */
    hp_config_t     cfg;           /* settings from the environment */
    hp_stats_t      stats;
    pthread_mutex_t lock;          /* state creation */
} hp_global_t;

extern hp_global_t hp_g;

/* Per-communicator state, attached as an attribute. */
typedef struct hp_comm_state {
    MPI_Comm             priv;      /* private communicator, MPI_COMM_NULL until needed */
    int                  rank, size;
    int                  opted_out;
    hp_config_t          cfg;       /* hp_g.cfg plus hipress_comm_set overrides */
    int                  kind;      /* compressor of cfg */
    hipress_comp_params_t params;
    unsigned long long   ncalls;    /* compressed calls on this communicator */
    hp_residual_store_t *res;
    /* scratch, grown on demand */
    void                *scratch;
    size_t               scratch_bytes;
} hp_comm_state_t;

/* State of comm, created (without a private communicator) when `create` and
 * missing.  NULL when absent or on failure. */
hp_comm_state_t *hp_comm_state(MPI_Comm comm, int create);

/* Make the private communicator (collective over comm). */
hp_status_t hp_comm_state_ready(hp_comm_state_t *cs, MPI_Comm comm);

/* Re-derive kind and params after cfg changed. */
hp_status_t hp_comm_state_refresh(hp_comm_state_t *cs, char *err, size_t errlen);

/* Scratch of at least `bytes`, 64-byte aligned, owned by cs. */
void *hp_comm_scratch(hp_comm_state_t *cs, size_t bytes);

/* Compressor parameters from a config. */
void hp_params_from_config(const hp_config_t *cfg, hipress_comp_params_t *p);

/* Init/finalize hooks of the wrappers. */
int hp_init_after_mpi(void);     /* returns 0 or exits on a bad setting */
void hp_finalize_before_mpi(void);
void hp_stats_print(void);

/* The compressed allreduce of MPI_FLOAT / MPI_SUM on an eligible call. */
int hp_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm,
                            hp_comm_state_t *cs);

#endif
