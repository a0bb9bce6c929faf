/*
 * Process-wide state of the interposer, without MPI: the settings in
 * effect, the statistics and their table.  Shared by the MPI front end
 * (hp_state.h, which adds the per-communicator state) and the NCCL front
 * end, which is built without MPI into libhipress_nccl.so as well
 * (doc/dev/architecture.md, "Two libraries").
 */
#ifndef HP_GLOBAL_H
#define HP_GLOBAL_H

#include <pthread.h>
#include <stdatomic.h>
#include "hp_config.h"
#include "hp_eligible.h"
#include "hp_residual.h"
#include "hp_plan.h"
#include "hp_algo.h"

/* The MPI collectives whose device buffers are counted (and staged). */
enum { HP_COLL_ALLREDUCE, HP_COLL_BCAST, HP_COLL_ALLGATHERV, HP_COLL_COUNT };

/* The front ends, the statistics' rows (the driver's hp_front_t.id). */
enum { HP_FRONT_MPI, HP_FRONT_NCCL, HP_FRONT_COUNT };

/* Statistics, process-wide, updated with relaxed atomics; one path for
 * both front ends (the driver's). */
typedef struct {
    _Atomic unsigned long long calls[HP_FRONT_COUNT];
    _Atomic unsigned long long hook_calls;            /* of calls[MPI]: a comm hook's (hipress_hook_allreduce) */
    _Atomic unsigned long long compressed;            /* both front ends */
    _Atomic unsigned long long front_compressed[HP_FRONT_COUNT];
    _Atomic unsigned long long reason[HP_FRONT_COUNT][HP_ELIG_NREASONS];   /* [YES]: eligible */
    _Atomic unsigned long long bytes_raw;
    _Atomic unsigned long long bytes_wire;
    _Atomic unsigned long long nonfinite;
    _Atomic unsigned long long excepts;         /* values of overflowed sums sent exactly */
    _Atomic unsigned long long errors;
    _Atomic unsigned long long res_created;     /* buffers with error-feedback state */
    _Atomic unsigned long long res_staging;     /* addresses found to be staging buffers */
    _Atomic unsigned long long res_stranded;    /* evicted after one call */
    _Atomic unsigned long long res_oversize;    /* vectors over HIPRESS_RESIDUAL_MAX_MB */
    _Atomic unsigned long long res_drop_buffers[HP_RES_DROP_NREASONS];
    _Atomic unsigned long long res_drop_bytes[HP_RES_DROP_NREASONS];
    double res_drop_l1[HP_RES_DROP_NREASONS];   /* under stats_lock */
    _Atomic unsigned long long res_folded;      /* calls that folded a residual into plain data */
    _Atomic unsigned long long form_unbiased;   /* calls on staging buffers run in the residual-free form */
    _Atomic unsigned long long form_exact;      /* calls on staging buffers sent plain (STAGING_FORM=exact) */
    _Atomic unsigned long long verify_calls;
    _Atomic unsigned long long verify_mismatch;
    _Atomic unsigned long long ns_encode;
    _Atomic unsigned long long ns_decode;
    _Atomic unsigned long long ns_total;
    _Atomic unsigned long long ns_wait;     /* blocked waiting for transfers */
    _Atomic unsigned long long algo_calls[HP_ALGO_COUNT];   /* by algorithm table row; [0]: collective */
    _Atomic unsigned long long plan_plain;     /* eligible calls the plan sent plain */
    _Atomic unsigned long long hier_calls;
    /* GPU path: device buffers per MPI collective, and how they went */
    _Atomic unsigned long long dev_calls[HP_COLL_COUNT];
    _Atomic unsigned long long dev_staged[HP_COLL_COUNT];    /* through host memory */
    _Atomic unsigned long long dev_unstaged[HP_COLL_COUNT];  /* no CUDA module: to MPI unchanged */
    _Atomic unsigned long long dev_compressed;  /* calls on device buffers compressed on the GPU */
    _Atomic unsigned long long nccl_comms_released;
    _Atomic unsigned long long dev_kept_bytes;  /* device memory of aborted communicators, never freed */
    char plan_text[48][96];      /* last plan fixed per size class (under stats_lock) */
    double max_rel_err;          /* under stats_lock */
    pthread_mutex_t stats_lock;
} hp_stats_t;

typedef struct {
    int             initialized;   /* MPI_Init wrapper ran */
    int             enabled;       /* HIPRESS_ENABLE and init ok */
    int             finalized;
    int             thread_level;  /* level MPI granted */
    int             world_rank, world_size;
    int             err_code;      /* hipress MPI error code (MPI front end) */
    hp_config_t     cfg;           /* settings from the environment */
    char           *hosts;         /* world_size host names of HP_WD_HOST bytes */
    _Atomic int     cfg_loaded;    /* cfg holds validated settings (MPI_Init or the first NCCL call) */
    hp_stats_t      stats;
    pthread_mutex_t lock;          /* state creation */
} hp_global_t;

extern hp_global_t hp_g;

/* The one settings agreement (MPI_Init over MPI_COMM_WORLD; an NCCL
 * communicator's first call): every setting that must agree (hp_settings.def's
 * agree column), whether some rank cannot go on (local_bad: its settings
 * do not parse, or it cannot compress), and the size.  Collective over tp;
 * every rank gets the same verdict.  HP_OK, or the transport's error. */
#define HP_SETTINGS_AGREE_N (3 + 2 * HP_S_COUNT)   /* the int64 it agrees on */
typedef struct {
    int bad_rank;   /* the lowest rank with local_bad, -1: none */
    int mismatch;   /* a setting whose value differs across ranks (HP_S_*), -1: none */
    int size;       /* the ranks (-1 when they did not agree on it) */
} hp_settings_verdict_t;
struct hp_transport;
hp_status_t hp_settings_agree(struct hp_transport *tp, const hp_config_t *cfg, int local_bad,
                              hp_settings_verdict_t *v);

/* Compressor parameters from a config. */
void hp_params_from_config(const hp_config_t *cfg, hipress_comp_params_t *p);

/* Settings from the environment and plugins, loaded once per process by
 * whichever comes first (MPI_Init or the first NCCL call); HP_OK, or the
 * error with a one-line message in err. */
hp_status_t hp_settings_load(char *err, size_t errlen);

/* Settings for a process that has not called MPI_Init (a torchrun job's
 * first ncclAllReduce): loaded once, validated as at MPI_Init, without the
 * cross-rank agreement; a bad setting prints one line and exits.  A no-op
 * once loaded. */
void hp_settings_without_mpi(void);

/* HIPRESS_STATS's table on stderr: at MPI_Finalize on rank 0, or at exit
 * on the process of RANK 0 in a job without MPI. */
void hp_stats_print(void);

#endif
