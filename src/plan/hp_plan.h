/*
 * The plan (DESIGN section 6): which algorithm, how many pipeline partitions,
 * and whether to compress at all.  hp_plan_cost / hp_plan_choose are pure
 * functions of agreed inputs, so every rank reaches the same plan.
 *
 * For a call of S bytes on N ranks each algorithm a has a wire volume W_a
 * (bytes the busiest rank puts on the wire, sparse densities growing with the
 * number of ranks aggregated), an encode volume and a decode volume, and a
 * step count.  With B the per-rank rate when all ranks send at once, E and D
 * the encode and decode rates and alpha the per-message latency:
 *   w = W_a / B,  c = enc_a / E + dec_a / D
 *   T(K) = max(w, c) + (w + c - max(w, c)) / K + K * steps_a * alpha
 * CPU accounting: E and D are measured while every rank of the machine
 * encodes at the same time, and B while every rank sends at the same time, so
 * oversubscribed cores show up as slower E/D/B rather than as a separate term;
 * the (w + c - max)/K term charges the part that does not overlap, which on
 * the CPU path (progress only inside MPI calls, shared cores) is what remains
 * once partitions are small.
 */
#ifndef HP_PLAN_H
#define HP_PLAN_H

#include "hp_algo.h"
#include "hp_backend.h"
#include "hp_comp.h"
#include "hp_config.h"
#include "hp_transport.h"

typedef struct {
    double bw;         /* bytes/s per rank, all ranks sending */
    double alpha;      /* seconds per message */
    double enc_rate;   /* raw bytes/s encoded */
    double dec_rate;   /* raw bytes/s decoded */
} hp_plan_inputs_t;

typedef struct {
    int    compress;   /* 0: plain PMPI_Allreduce */
    int    algo;       /* a row of the algorithm table (HP_ALGO_AUTO: a collective compressor) */
    size_t parts;      /* pipeline partitions per chunk/shard (K) */
    double t_model;    /* modelled seconds */
    int    stages;     /* lossy stages on an element's longest path (0 when plain) */
    int    hier;       /* 1: through the node hierarchy (N counts nodes) */
    int    cost;       /* what the stages cost the quality budget (hp_plan_stage_cost) */
    const char *sum;   /* the sum codec's name where an owner stage re-encodes in
                        * another codec than the worker's, else NULL */
    double wire;       /* modelled bytes the busiest rank puts on the wire (0 when plain) */
} hp_plan_t;

/*
 * Quality.  Every encode on an element's way to the result is a lossy stage:
 * allgather 1 (each rank encodes its own data once), ps 2 (the worker's
 * encode of a peer's shard, then the owner's encode of the sum), tree
 * ceil(log2 N) + 1 (a leaf, each internal node re-encoding its subtree, the
 * root), ring N (the chunk's first rank, N - 2 relays, the owner).  The
 * hierarchical mode adds none (the node reduction is exact); N is then the
 * number of nodes.  A collective compressor counts 1.
 */
int hp_plan_stages(int algo, int N);

/* What those stages cost the quality budget, in its unit: one lossy stage of
 * the worker's codec.  An owner stage in a sum codec that is not the
 * worker's costs hp_comp_sum_cost (0 for q4, q8, fp16, bf16, none: the
 * study of doc/accuracy.md, 'Sum codecs', at 4 to 16 ranks; past 16 ranks
 * the unit is carried by the simulation of doc/scale.md, not measured). */
int hp_plan_stage_cost(int algo, int N, const hp_codecs_t *c);

/* The default budget of a plugin compressor's class for
 * HIPRESS_MAX_STAGES=0: the most stages auto may choose (0 = no limit).
 * Built-ins carry their own (hp_comp_ext_t.max_stages). */
int hp_plan_default_budget(hp_qclass_t qclass);

/* The budget in effect: HIPRESS_MAX_STAGES when > 0, else the default of
 * `kind` (hp_comp_ext_t.max_stages; 0 = no limit). */
int hp_plan_budget(int kind, long long max_stages);

/* The elements the pipeline of algorithm `algo` partitions (its table
 * row's unit) in the model: a shard of ceil(n / N) or all n. */
size_t hp_plan_unit(int algo, size_t n, int N);

/* Wire bytes of one message of len elements aggregating `contribs` ranks
 * (hp_msg_wire_bytes). */
size_t hp_plan_msg_bytes(int kind, size_t len, int contribs, const hipress_comp_params_t *p);

/* Modelled time of algorithm `algo` with K partitions, each phase priced
 * with its codec (c: the worker's and the sum codec). */
double hp_plan_cost(const hp_plan_inputs_t *in, const hp_codecs_t *c, size_t n, int N, int algo, size_t K);

/* Best (algo, K) for n floats on N ranks.  algo_fixed = HP_ALGO_AUTO lets
 * the model choose among the algorithms whose stages cost at most `budget`
 * (hp_plan_stage_cost; 0: any; allgather always qualifies), otherwise only K is chosen for algo_fixed,
 * whatever its stages.  part_bytes > 0 fixes the partition size.  K never
 * exceeds the grains of the partitioned unit.  Returns the `rank`-th best
 * algorithm (0 = best) so callers can try runners-up; compress = 0 in the
 * result when fewer algorithms exist. */
hp_plan_t hp_plan_choose(const hp_plan_inputs_t *in, const hp_codecs_t *c, size_t n, int N, int algo_fixed,
                         size_t part_bytes, int budget, int rank);

/* p with partitions of about 1 MiB, or compress = 0 where that is not at
 * least twice p's partitions.  The model's K weighs each partition by the
 * measured per-message latency, but a stream's partitions follow each other
 * without waiting for one another, and where the ranks' cores are shared
 * with the training (a DDP comm hook) finer partitions measured up to 10%
 * faster than the model's K: the exploration times both. */
hp_plan_t hp_plan_finer(const hp_plan_inputs_t *in, const hp_codecs_t *c, size_t n, int N, const hp_plan_t *p);

/* The compressed candidate an exploration fixes, given the medians of its
 * candidates' agreed times and `best`, the index of the lowest compressed
 * median (-1: none, returned as it is): among the compressed candidates
 * whose median is within HP_PLAN_MARGIN of best's, the fewest modelled wire
 * bytes (hp_plan_t.wire), then the lower median.  Pure: the same on every
 * rank. */
int hp_plan_tie_break(const hp_plan_t *cand, const double *med, int n, int best);

/* "ring K=4, 4 stages", "ps K=2, 2 stages, sum q4" etc. */
const char *hp_plan_str(const hp_plan_t *plan, char *buf, size_t len);

/* ---------------------------------------------------------- the planner */

/* Plan of one size class (bytes in [2^c, 2^(c+1))) of one memory kind on
 * one communicator: explored on its first calls (plain, unless the model
 * puts it HP_PLAN_PLAIN_SKIP times behind, then every algorithm the model
 * puts within HP_PLAN_PRUNE of its best, with the model's K and with
 * hp_plan_finer's, each timed over three calls in a row (the median
 * counts), times agreed across ranks), then fixed. */
#define HP_PLAN_CLASSES 48
#define HP_PLAN_CANDIDATES 8
#define HP_PLAN_PRUNE 3.0
#define HP_PLAN_REPS 3
#define HP_PLAN_PLAIN_SKIP 3.0   /* plain is not timed where the model puts it this many times
                                  * behind the best compressed candidate */
#define HP_PLAN_MARGIN 0.1   /* plain's slowest call must beat compression's fastest by 10%;
                              * compressed candidates whose medians are within 10% of the
                              * best's tie, and the fewest wire bytes among them wins */
#define HP_PLAN_MEM_KINDS 2  /* host, device: plans and inputs are keyed by the buffer's memory */
#define HP_PLAN_KEYS (2 * HP_PLAN_MEM_KINDS)   /* ... and by the form (hp_plan_comm_t.form) */
typedef struct {
    int       state;            /* 0 new, 1 exploring, 2 fixed */
    int       ncand, trial;
    double    plain_skip;       /* > 0: plain not timed, modelled this many times slower */
    hp_plan_t cand[HP_PLAN_CANDIDATES];
    double    t[HP_PLAN_CANDIDATES][HP_PLAN_REPS];   /* agreed call times */
    hp_plan_t chosen;
} hp_plan_slot_t;

/* One communicator's plans, keyed by the buffer's memory kind, the form
 * and the size class, and the cost model's inputs per memory kind, flat [0] and
 * hierarchical [1] (measured on the inter-node transport), with the rate
 * inside a node.  A front end's communicator owns one (the MPI and the NCCL
 * front ends each theirs: plans are keyed by the transport too).  Zeroed:
 * nothing measured, nothing planned. */
typedef struct hp_planner {
    int              have_inputs[HP_PLAN_KEYS][2], inputs_kind[HP_PLAN_KEYS][2];
    hp_plan_inputs_t inputs[HP_PLAN_KEYS][2];
    double           intra_bw;
    hp_plan_slot_t   plans[HP_PLAN_KEYS][HP_PLAN_CLASSES];
    int              warned_budget;
} hp_planner_t;

/* The communicator as the plan sees it, filled by the front end for a call. */
typedef struct hp_plan_comm {
    const hp_config_t           *cfg;
    int                          kind;        /* the compressor */
    int                          sum_kind;    /* its sum codec (hp_comp_sum_kind) */
    const hipress_comp_params_t *params;
    int                          rank, size;
    int                          hier_avail, hier_2d, node_size, nodes;
    int                          mem_kind;    /* the plans' key: the buffers' memory, agreed
                                               * (0 host, 1 device; 0 when the ranks differ) */
    int                          form;        /* 1: the call runs the residual-free form of
                                               * the compressor (kind and sum_kind are its):
                                               * a key of the plans apart from the form's 0 */
    hp_transport_t              *all;         /* every rank: the agreements */
    hp_transport_t              *algo[2];     /* the algorithm's ranks, flat and hierarchical
                                               * (NULL: this rank is not one) */
    hp_transport_t              *node;        /* inside the node */
    hp_mem_t                    *mem;         /* the call's memory: codecs are timed on it */
} hp_plan_comm_t;

/* The plans' key of pc's call: memory kind and form. */
static inline int hp_plan_key(const struct hp_plan_comm *pc)
{
    return pc->mem_kind + HP_PLAN_MEM_KINDS * (pc->form != 0);
}

/* Size class of a call of `bytes`. */
int hp_plan_size_class(size_t bytes);

/* Measure (once per memory kind, mode and compressor) and agree the model's
 * inputs of mode `hier` (src/plan/hp_plan_measure.c).  Collective over
 * pc->all. */
hp_status_t hp_plan_ensure_inputs(hp_planner_t *pl, const hp_plan_comm_t *pc, int hier);

/* The plan for a call of count floats on pc->mem; *explore_p receives the
 * slot being explored (time the call and pass it to hp_plan_report), or
 * NULL.  May measure (collective over pc->all). */
hp_status_t hp_plan_for(hp_planner_t *pl, const hp_plan_comm_t *pc, size_t count, hp_plan_t *plan_p,
                        hp_plan_slot_t **explore_p);

/* Record the time of an exploration call (agreed over pc->all with a max);
 * when the slot's exploration is complete, fix the plan and write the
 * report line ("ring K=4, 1 stage (median ...)") to line (else line[0] =
 * 0). */
void hp_plan_report(const hp_plan_comm_t *pc, hp_plan_slot_t *ps, double t, size_t count, char *line,
                    size_t len);

/* Elements per partition of `plan` over n elements on N ranks (grain g). */
size_t hp_plan_part_elems(const hp_plan_t *plan, size_t n, int N, size_t grain);

/* The ranks and elements the algorithm of mode `hier` runs on. */
int hp_plan_algo_size(const hp_plan_comm_t *pc, int hier);
size_t hp_plan_algo_count(const hp_plan_comm_t *pc, int hier, size_t count);

/* The fixed plan of `bytes` on host memory as text, "exploring" or "none". */
void hp_plan_text(const hp_planner_t *pl, size_t bytes, char *buf, size_t len);

#endif
