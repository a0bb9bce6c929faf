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

#include "hp_comp.h"
#include "hp_config.h"

typedef struct {
    double bw;         /* bytes/s per rank, all ranks sending */
    double alpha;      /* seconds per message */
    double enc_rate;   /* raw bytes/s encoded */
    double dec_rate;   /* raw bytes/s decoded */
} hp_plan_inputs_t;

typedef struct {
    int    compress;   /* 0: plain PMPI_Allreduce */
    int    algo;       /* HP_ALGO_RING ... (HP_ALGO_AUTO: a collective compressor) */
    size_t parts;      /* pipeline partitions per chunk/shard (K) */
    double t_model;    /* modelled seconds */
    int    stages;     /* lossy stages on an element's longest path (0 when plain) */
    int    hier;       /* 1: through the node hierarchy (N counts nodes) */
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

/* The default budget of a plugin compressor's class for
 * HIPRESS_MAX_STAGES=0: the most stages auto may choose (0 = no limit).
 * Built-ins carry their own (hp_comp_ext_t.max_stages). */
int hp_plan_default_budget(hp_qclass_t qclass);

/* The budget in effect: HIPRESS_MAX_STAGES when > 0, else the default of
 * `kind` (hp_comp_ext_t.max_stages; 0 = no limit). */
int hp_plan_budget(int kind, long long max_stages);

/* Wire bytes of one message of len elements aggregating `contribs` ranks. */
size_t hp_plan_msg_bytes(int kind, size_t len, int contribs, const hipress_comp_params_t *p);

/* Modelled time of algorithm `algo` with K partitions; also the step count. */
double hp_plan_cost(const hp_plan_inputs_t *in, int kind, const hipress_comp_params_t *p,
                    size_t n, int N, int algo, size_t K);

/* Best (algo, K) for n floats on N ranks.  algo_fixed = HP_ALGO_AUTO lets
 * the model choose among the algorithms of at most `budget` stages (0: any;
 * allgather always qualifies), otherwise only K is chosen for algo_fixed,
 * whatever its stages.  part_bytes > 0 fixes the partition size.  K never
 * exceeds the grains of the partitioned unit.  Returns the `rank`-th best
 * algorithm (0 = best) so callers can try runners-up; compress = 0 in the
 * result when fewer algorithms exist. */
hp_plan_t hp_plan_choose(const hp_plan_inputs_t *in, int kind, const hipress_comp_params_t *p,
                         size_t n, int N, int algo_fixed, size_t part_bytes, int budget, int rank);

/* "ring K=4, 4 stages" etc. */
const char *hp_plan_str(const hp_plan_t *plan, char *buf, size_t len);
const char *hp_algo_name(int algo);

#endif
