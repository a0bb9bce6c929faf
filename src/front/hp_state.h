/*
 * Per-communicator state of the MPI front end, its initialisation at
 * MPI_Init and its finalisation; the process-wide state is hp_global.h's.
 */
#ifndef HP_STATE_H
#define HP_STATE_H

#include <mpi.h>
#include "hp_global.h"
#include "hp_gpu.h"
#include "hp_transport.h"


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

/* Init/finalize hooks of the wrappers. */
int hp_init_after_mpi(void);     /* returns 0 or exits on a bad setting */
void hp_finalize_before_mpi(void);

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
