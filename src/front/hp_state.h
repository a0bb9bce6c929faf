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
#include "hp_plan.h"
#include "hp_algo.h"
#include "hp_gpu.h"
#include "hp_nccl.h"
#include "hp_transport.h"

/* The MPI collectives whose device buffers are counted (and staged). */
enum { HP_COLL_ALLREDUCE, HP_COLL_BCAST, HP_COLL_ALLGATHERV, HP_COLL_COUNT };

/* Statistics, process-wide, updated with relaxed atomics. */
typedef struct {
    _Atomic unsigned long long calls;
    _Atomic unsigned long long compressed;
    _Atomic unsigned long long reason[HP_ELIG_NREASONS];
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
    _Atomic unsigned long long dev_compressed;  /* MPI_Allreduce on device buffers compressed on the GPU */
    /* ncclAllReduce: calls, then by reason (HP_NELIG_YES: eligible) */
    _Atomic unsigned long long nccl_calls;
    _Atomic unsigned long long nccl_reason[HP_NELIG_NREASONS];
    _Atomic unsigned long long nccl_comms_released;
    _Atomic unsigned long long nccl_compressed;   /* taken by HIPRESS_NCCL=compress */
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
    int             keyval;        /* communicator attribute */
    int             err_code;      /* hipress MPI error code */
    hp_config_t     cfg;           /* settings from the environment */
    char           *hosts;         /* world_size host names of HP_WD_HOST bytes */
    _Atomic int     cfg_loaded;    /* cfg holds validated settings (MPI_Init or the first NCCL call) */
    hp_stats_t      stats;
    pthread_mutex_t lock;          /* state creation */
} hp_global_t;

extern hp_global_t hp_g;

/* Per-communicator state, attached as an attribute. */
/* HIPRESS_STAGING_FORM's values, in the setting's order. */
enum { HP_FORM_UNBIASED = 0, HP_FORM_EXACT, HP_FORM_BIASED };

typedef struct hp_comm_state {
    MPI_Comm             priv;      /* private communicator, MPI_COMM_NULL until needed */
    int                  rank, size;
    int                  opted_out;
    hp_config_t          cfg;       /* hp_g.cfg plus hipress_comm_set overrides */
    int                  kind;      /* compressor of cfg */
    int                  sum_kind;  /* its sum codec (HIPRESS_SUM_CODEC resolved: hp_comp_sum_kind) */
    hipress_comp_params_t params;
    /* where no residual can be kept (HIPRESS_STAGING_FORM, doc/usage.md,
     * 'Error feedback and buffer layouts'): the setting, and the
     * residual-free form it runs under `unbiased` (hp_comp_unbiased_kind) */
    int                  staging_form;   /* HP_FORM_* */
    int                  form_kind, form_sum_kind;
    hipress_comp_params_t form_params;
    unsigned long long   ncalls;    /* compressed calls on this communicator */
    unsigned long long   nomem_call; /* HIPRESS_TEST_NOMEM: call whose allocation failed, + 1 */
    hp_residual_store_t *res;
    hp_residual_info_t   res_seen;  /* counters already added to hp_g.stats */
    int                  layout;    /* hp_layout_t from HIPRESS_EF_LAYOUT */
    int                  warned;    /* HP_WARNED_* bits: warnings given on this communicator */
    /* hierarchy (HIPRESS_HIERARCHICAL): the node communicator, and the
     * inter-node one: `cross` (the ranks of one node rank across the nodes,
     * when every node has the same size: each node's ranks reduce-scatter,
     * each compresses its shard with its peers of the other nodes, then
     * allgather) or `leaders` (node rank 0 of each node, MPI_COMM_NULL on
     * the others: reduce to the leader, compress, broadcast).  Whether a
     * call goes through them is the plan's choice (hp_plan_t.hier). */
    int                  hier_avail;   /* several nodes, and a node of several ranks */
    int                  hier_2d;      /* every node the same size: cross, not leaders */
    int                  node_rank, node_size, nodes;
    int                  hier_built;   /* made for the settings below */
    int                 *world_priv, *world_inter;   /* world rank of each rank of priv, of the inter comm */
    long long            hier_mode, hier_k;
    MPI_Comm             node, leaders, cross;
    /* the transports over priv, node and the inter-node communicator (cross
     * or leaders), built with them, for the algorithms and the driver's own
     * collectives; NULL where the communicator is MPI_COMM_NULL.  Each is
     * an MPI transport of tp_store, or in a test build the test transport
     * wrapped around it (hp_tp_select). */
    hp_transport_t      *tp_priv, *tp_node, *tp_inter;
    hp_transport_t       tp_store[3][2];
    /* plans and the cost model's inputs (src/plan/hp_plan.h) */
    hp_planner_t         planner;
    int                  call_mem_kind;   /* the agreed plan key of the call in progress
                                           * (hp_allreduce_agree; hp_plan_comm_t.mem_kind) */
    int                  call_form;       /* agreed for the call in progress: some rank keeps
                                           * no residual for its buffer (a staging buffer) */
    /* scratch, grown on demand (the algorithms', and a hierarchical call's shard) */
    void                *scratch, *scratch2;
    size_t               scratch_bytes, scratch2_bytes;
} hp_comm_state_t;

/* State of comm, created (without a private communicator) when `create` and
 * missing.  NULL when absent or on failure. */
hp_comm_state_t *hp_comm_state(MPI_Comm comm, int create);

/* Make the private communicator, the hierarchy's and their transports
 * (collective over comm). */
hp_status_t hp_comm_state_ready(hp_comm_state_t *cs, MPI_Comm comm);

/* Re-derive kind and params after cfg changed. */
hp_status_t hp_comm_state_refresh(hp_comm_state_t *cs, char *err, size_t errlen);

/* Scratch of at least `bytes`, 64-byte aligned, owned by cs (two areas:
 * the algorithms' messages, and a hierarchical call's shard). */
void *hp_comm_scratch(hp_comm_state_t *cs, size_t bytes);
void *hp_comm_scratch2(hp_comm_state_t *cs, size_t bytes);

/* Compressor parameters from a config. */
void hp_params_from_config(const hp_config_t *cfg, hipress_comp_params_t *p);

/* Init/finalize hooks of the wrappers. */
int hp_init_after_mpi(void);     /* returns 0 or exits on a bad setting */
/* Settings for a process that has not called MPI_Init (a torchrun job's
 * first ncclAllReduce): loaded once, validated as at MPI_Init, without the
 * cross-rank agreement; a bad setting prints one line and exits.  A no-op
 * once loaded. */
void hp_settings_without_mpi(void);
void hp_finalize_before_mpi(void);
void hp_stats_print(void);

/* Add this communicator's new residual counters to the stats. */
void hp_comm_state_sync_stats(hp_comm_state_t *cs);

#define HP_WARNED_STAGING 0x2   /* a staging buffer */
#define HP_WARNED_STRAND  0x4   /* residuals of buffers that are never reduced again */
#define HP_WARNED_OVERSIZE 0x8  /* a buffer too large for HIPRESS_RESIDUAL_MAX_MB */

/* Forget plans and measurements (settings changed). */
void hp_comm_state_reset_plans(hp_comm_state_t *cs);

/* The per-call agreement of a call every rank finds eligible on the shared
 * criteria (hp_eligible_shared): whether every rank can compress it (its
 * buffers: local_ok), whether all ranks give the same count, the plans' key
 * (the buffers' memory) and whether any rank keeps no residual for its
 * receive buffer recvbuf (a staging buffer: cs->call_form).  Returns
 * 1 (compress), 0 (some rank cannot: pass through) or -1 (the counts
 * differ: an error was raised through comm's error handler; *rc_p holds the
 * code to return). */
int hp_allreduce_agree(MPI_Comm comm, hp_comm_state_t *cs, const void *recvbuf, size_t count, int local_ok,
                       int mem_kind, int *rc_p);

/* The compressed allreduce of MPI_FLOAT / MPI_SUM on an eligible call
 * (src/front/hp_call.c): plan, hierarchy, algorithm, failure agreement. */
int hp_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm,
                            hp_comm_state_t *cs);

#endif
