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
    int    algo;       /* HP_ALGO_RING ... */
    size_t parts;      /* pipeline partitions per chunk/shard (K) */
    double t_model;    /* modelled seconds */
} hp_plan_t;

/* Wire bytes of one message of len elements aggregating `contribs` ranks. */
size_t hp_plan_msg_bytes(int kind, size_t len, int contribs, const hipress_comp_params_t *p);

/* Modelled time of algorithm `algo` with K partitions; also the step count. */
double hp_plan_cost(const hp_plan_inputs_t *in, int kind, const hipress_comp_params_t *p,
                    size_t n, int N, int algo, size_t K);

/* Best (algo, K) for n floats on N ranks.  algo_fixed = HP_ALGO_AUTO lets
 * the model choose the algorithm, otherwise only K is chosen.  part_bytes > 0
 * fixes the partition size.  Returns the `rank`-th best algorithm (0 = best)
 * so callers can try runners-up; compress = 0 in the result when fewer
 * algorithms exist. */
hp_plan_t hp_plan_choose(const hp_plan_inputs_t *in, int kind, const hipress_comp_params_t *p,
                         size_t n, int N, int algo_fixed, size_t part_bytes, int rank);

/* "ring K=4" etc. */
const char *hp_plan_str(const hp_plan_t *plan, char *buf, size_t len);
const char *hp_algo_name(int algo);

#endif
