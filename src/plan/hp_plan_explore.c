/*
 * Choosing a call's plan: fixed by the settings, or explored.  The model
 * (src/plan/hp_plan.c) prunes the algorithm table's rows and sets K; the
 * first calls of a size class then time the candidates (plain included when
 * allowed), the times agreed across ranks, and the plan is fixed.  Keyed by
 * the buffer's memory kind: a device buffer is planned with the device
 * codec's rates.
 */
#include "hp_plan.h"
#include <math.h>
#include <stdatomic.h>
#include <string.h>

int hp_plan_size_class(size_t bytes)
{
    int c = 0;
    while (c + 1 < HP_PLAN_CLASSES && ((size_t)1 << (c + 1)) <= bytes)
        c++;
    return c;
}

int hp_plan_algo_size(const hp_plan_comm_t *pc, int hier)
{
    return hier ? pc->nodes : pc->size;
}

size_t hp_plan_algo_count(const hp_plan_comm_t *pc, int hier, size_t count)
{
    /* 2D: the node's shard; the whole buffer otherwise */
    return hier && pc->hier_2d ? (count + (size_t)pc->node_size - 1) / (size_t)pc->node_size : count;
}

size_t hp_plan_part_elems(const hp_plan_t *plan, size_t n, int N, size_t grain)
{
    size_t unit = hp_algo_unit_elems(plan->algo, n, N, grain);
    size_t K = HP_MAX(plan->parts, 1);
    return HP_MAX((unit + K - 1) / K, 1);
}

/* Modelled seconds of the exact exchanges inside a node in mode `hier`:
 * reduce-scatter and allgather (2D), or reduce and broadcast (leaders). */
static double intra_time(const hp_planner_t *pl, const hp_plan_comm_t *pc, int hier, size_t count)
{
    double S = 4.0 * (double)count, k = (double)pc->node_size;
    if (!hier || pl->intra_bw <= 0)
        return 0;
    return (pc->hier_2d ? 2.0 * (k - 1) / k * S : 2.0 * S) / pl->intra_bw;
}

/* The quality budget of the communicator's compressor (0: no limit). */
static int comm_budget(const hp_plan_comm_t *pc)
{
    return hp_plan_budget(pc->kind, hp_cfg_i(pc->cfg, HP_S_MAX_STAGES));
}

/* A fixed algorithm beyond the quality budget still runs: say so once. */
static void warn_budget(hp_planner_t *pl, const hp_plan_comm_t *pc, const hp_plan_t *plan)
{
    static atomic_int warned;   /* once per process: every communicator would say the same */
    int budget = comm_budget(pc);
    if (plan->compress && budget > 0 && plan->cost > budget && !pl->warned_budget) {
        pl->warned_budget = 1;
        if (pc->rank == 0 && atomic_exchange(&warned, 1) == 0)
            HP_WARN("HIPRESS_ALGO=%s puts each element through %d lossy stages with %s%s%s, costing %d "
                    "of a quality budget of %d (HIPRESS_MAX_STAGES; doc/accuracy.md): it runs, but accuracy "
                    "may suffer", hp_algo_name(plan->algo), plan->stages, hp_comp_get(pc->kind)->name,
                    plan->sum ? ", the owners' sums in " : "", plan->sum ? plan->sum : "", plan->cost, budget);
    }
}

/* The hierarchical modes a call may use under the settings: bit 0 flat,
 * bit 1 hierarchical. */
static int plan_modes(const hp_plan_comm_t *pc)
{
    long long h = hp_cfg_i(pc->cfg, HP_S_HIERARCHICAL);
    if (!pc->hier_avail || h == HP_HIER_OFF || hp_comp_is_collective(pc->kind) || pc->mem_kind != 0)
        return 1;   /* (a collective compressor runs its own exchanges, flat; the node
                     * exchanges work on host memory) */
    return h == HP_HIER_ON ? 2 : 3;
}

/* The communicator's codecs. */
static hp_codecs_t comm_codecs(const hp_plan_comm_t *pc)
{
    return (hp_codecs_t){pc->kind, pc->sum_kind, pc->params, pc->params};
}

/* Modelled seconds of a plain allreduce of count floats on N ranks: a
 * ring's bytes at the measured rate and its 2(N-1) steps. */
static double plain_time(const hp_plan_inputs_t *in, size_t count, int N)
{
    double S = 4.0 * (double)count;
    if (in->bw <= 0 || N < 2)
        return 0;
    return 2.0 * (N - 1) / N * S / in->bw + 2.0 * (N - 1) * in->alpha;
}

/* Insert p into the candidates by modelled time (plain, t_model 0, first). */
static void add_candidate(hp_plan_slot_t *ps, hp_plan_t p)
{
    int i;
    if (ps->ncand >= HP_PLAN_CANDIDATES) {
        if (p.t_model >= ps->cand[ps->ncand - 1].t_model)
            return;
        ps->ncand--;
    }
    i = ps->ncand++;
    while (i > 0 && ps->cand[i - 1].compress && ps->cand[i - 1].t_model > p.t_model) {
        ps->cand[i] = ps->cand[i - 1];
        i--;
    }
    ps->cand[i] = p;
}

/* The candidates of a new slot: plain (T0 is measured, not modelled); a
 * collective compressor; else per hierarchical mode the algorithms within
 * the quality budget (or the fixed one), in the model's order while within
 * HP_PLAN_PRUNE of its best: the model prunes and sets K, the measurement
 * decides. */
static hp_status_t candidates(hp_planner_t *pl, const hp_plan_comm_t *pc, hp_plan_slot_t *ps, size_t count)
{
    int algo = (int)hp_cfg_i(pc->cfg, HP_S_ALGO);
    size_t part_bytes = (size_t)hp_cfg_i(pc->cfg, HP_S_PARTITION_BYTES);
    int allow_plain = (int)hp_cfg_i(pc->cfg, HP_S_ALLOW_PLAIN);
    int budget = comm_budget(pc), modes = plan_modes(pc), nall = 0;
    const int mk = hp_plan_key(pc);
    double best = INFINITY;
    hp_plan_t all[4 * HP_ALGO_COUNT];   /* per mode, each algorithm and its finer partitions */
    hp_codecs_t cc = comm_codecs(pc);
    hp_status_t st;

    ps->ncand = 0;
    ps->plain_skip = 0;
    if (hp_comp_is_collective(pc->kind)) {
        if (allow_plain && algo == HP_ALGO_AUTO)
            add_candidate(ps, (hp_plan_t){.compress = 0, .algo = HP_ALGO_AUTO + 1, .parts = 1});
        add_candidate(ps, (hp_plan_t){.compress = 1, .algo = HP_ALGO_AUTO, .parts = 1, .stages = 1, .cost = 1});
        return HP_OK;
    }
    for (int h = 0; h < 2; h++) {
        if (!(modes & (1 << h)))
            continue;
        if ((st = hp_plan_ensure_inputs(pl, pc, h)) != HP_OK)
            return st;
        for (int k = 0; k < HP_ALGO_COUNT - 1; k++) {
            hp_plan_t p = hp_plan_choose(&pl->inputs[mk][h], &cc, hp_plan_algo_count(pc, h, count),
                                         hp_plan_algo_size(pc, h), algo, part_bytes,
                                         algo == HP_ALGO_AUTO ? budget : 0, k);
            if (!p.compress)
                break;
            p.hier = h;
            p.t_model += intra_time(pl, pc, h, count);
            best = HP_MIN(best, p.t_model);
            all[nall++] = p;
            if (part_bytes == 0) {
                hp_plan_t f = hp_plan_finer(&pl->inputs[mk][h], &cc, hp_plan_algo_count(pc, h, count),
                                            hp_plan_algo_size(pc, h), &p);
                if (f.compress) {
                    f.t_model += intra_time(pl, pc, h, count);
                    all[nall++] = f;
                }
            }
        }
    }
    for (int i = 0; i < nall; i++)
        if (all[i].t_model <= HP_PLAN_PRUNE * best)
            add_candidate(ps, all[i]);
    if (allow_plain && algo == HP_ALGO_AUTO) {
        /* Plain is timed unless the model puts it far behind: on a slow
         * network its three trials would cost more than everything else
         * the exploration does (a 25 MiB allreduce at 250 Mbit/s takes
         * seconds), and where compression wins by HP_PLAN_PLAIN_SKIP or
         * more a measurement cannot turn the verdict. */
        double t0 = (modes & 1) && nall > 0 ? plain_time(&pl->inputs[mk][0], count, pc->size) : 0;
        if (t0 > HP_PLAN_PLAIN_SKIP * best)
            ps->plain_skip = t0 / best;
        else
            add_candidate(ps, (hp_plan_t){.compress = 0, .algo = HP_ALGO_AUTO + 1, .parts = 1});
    }
    return HP_OK;
}

hp_status_t hp_plan_for(hp_planner_t *pl, const hp_plan_comm_t *pc, size_t count, hp_plan_t *plan_p,
                        hp_plan_slot_t **explore_p)
{
    int algo = (int)hp_cfg_i(pc->cfg, HP_S_ALGO);
    size_t part_bytes = (size_t)hp_cfg_i(pc->cfg, HP_S_PARTITION_BYTES);
    int allow_plain = (int)hp_cfg_i(pc->cfg, HP_S_ALLOW_PLAIN);
    int modes = plan_modes(pc);
    const int mk = hp_plan_key(pc);
    hp_plan_slot_t *ps = &pl->plans[mk][hp_plan_size_class(count * sizeof(float))];
    hp_status_t st;

    *explore_p = NULL;
    if (ps->state == 2) {
        *plan_p = ps->chosen;
        return HP_OK;
    }
    if (hp_comp_is_collective(pc->kind) && (algo != HP_ALGO_AUTO || !allow_plain)) {
        /* a collective compressor runs its own exchanges whatever HIPRESS_ALGO says */
        ps->chosen = (hp_plan_t){.compress = 1, .algo = HP_ALGO_AUTO, .parts = 1,
                                 .stages = hp_plan_stages(HP_ALGO_AUTO, pc->size), .cost = 1};
        ps->state = 2;
        *plan_p = ps->chosen;
        return HP_OK;
    }
    if (algo != HP_ALGO_AUTO && part_bytes > 0 && modes != 3) {
        /* fixed entirely by the settings: nothing to measure */
        int h = modes == 2;
        hp_codecs_t cc = comm_codecs(pc);
        ps->chosen = hp_plan_choose(&pl->inputs[mk][h], &cc, hp_plan_algo_count(pc, h, count),
                                    hp_plan_algo_size(pc, h), algo, part_bytes, 0, 0);
        ps->chosen.hier = h;
        ps->state = 2;
        *plan_p = ps->chosen;
        warn_budget(pl, pc, plan_p);
        return HP_OK;
    }
    if (ps->state == 0) {
        if ((st = candidates(pl, pc, ps, count)) != HP_OK)
            return st;
        ps->trial = 0;
        ps->state = 1;
    }
    if (ps->ncand == 1) {
        /* nothing to compare */
        ps->chosen = ps->cand[0];
        ps->state = 2;
        *plan_p = ps->chosen;
        warn_budget(pl, pc, plan_p);
        return HP_OK;
    }
    *plan_p = ps->cand[ps->trial / HP_PLAN_REPS];
    *explore_p = ps;
    return HP_OK;
}

int hp_plan_tie_break(const hp_plan_t *cand, const double *med, int n, int best)
{
    int pick = best;
    if (best < 0)
        return best;
    for (int k = 0; k < n; k++)
        if (cand[k].compress && med[k] <= (1.0 + HP_PLAN_MARGIN) * med[best] &&
            (cand[k].wire < cand[pick].wire || (cand[k].wire == cand[pick].wire && med[k] < med[pick])))
            pick = k;
    return pick;
}

_Static_assert(HP_PLAN_REPS == 3, "median3 takes three trials");
static double median3(const double *v)
{
    double a = v[0], b = v[1], c = v[2];
    if (a > b) { double t = a; a = b; b = t; }
    if (b > c) b = c;
    return a > b ? a : b;
}

void hp_plan_report(const hp_plan_comm_t *pc, hp_plan_slot_t *ps, double t, size_t count, char *line,
                    size_t len)
{
    double tmax = t, med[HP_PLAN_CANDIDATES];
    int i = ps->trial / HP_PLAN_REPS;
    int best = -1, plain = -1, comp, fastest;
    double lo_best = 0, hi_plain = 0;
    char a[48];

    line[0] = '\0';
    if (hp_tp_agree(pc->all, HP_TP_DOUBLE, &tmax, 1, "the plan's agreement on a call's time") != HP_OK)
        tmax = t;   /* (the next call's agreement fails alike) */
    ps->t[i][ps->trial % HP_PLAN_REPS] = tmax;
    if (++ps->trial < ps->ncand * HP_PLAN_REPS)
        return;
    /* Among compressed candidates the lowest median of each one's calls
     * wins (robust to a first call that sets up connections and to a lucky
     * one alike), and among those within HP_PLAN_MARGIN of it the one that
     * puts the fewest bytes on the wire: where the timings cannot tell two
     * algorithms apart (two shared cores, or a wire that is not the
     * bottleneck) the one that loads the network least is the better
     * choice for the job and for its neighbours, and the same choice from
     * run to run.  Plain wins over it only when it dominates: its slowest
     * call faster, by HP_PLAN_MARGIN, than the compressed candidate's
     * fastest.  Near a tie, or on a machine whose timings swing more than
     * the difference, the job stays compressed: the same job must not be
     * compressed in one run and not in the next by chance. */
    for (int k = 0; k < ps->ncand; k++) {
        med[k] = median3(ps->t[k]);
        if (hp_log_level >= HP_LOG_INFO) {
            /* every candidate's calls, for HIPRESS_DEBUG=2: why this plan */
            hp_plan_str(&ps->cand[k], a, sizeof(a));
            HP_INFO("plan candidate for %zu bytes: %s took %.0f, %.0f, %.0f us (median %.0f)",
                    count * sizeof(float), a, ps->t[k][0] * 1e6, ps->t[k][1] * 1e6, ps->t[k][2] * 1e6,
                    med[k] * 1e6);
        }
        if (!ps->cand[k].compress)
            plain = k;
        else if (best < 0 || med[k] < med[best])
            best = k;
    }
    fastest = best;
    best = hp_plan_tie_break(ps->cand, med, ps->ncand, best);
    comp = best;
    if (best >= 0 && plain >= 0) {
        lo_best = HP_MIN(HP_MIN(ps->t[best][0], ps->t[best][1]), ps->t[best][2]);
        hi_plain = HP_MAX(HP_MAX(ps->t[plain][0], ps->t[plain][1]), ps->t[plain][2]);
    }
    if (best < 0 || (plain >= 0 && hi_plain < (1.0 - HP_PLAN_MARGIN) * lo_best))
        best = plain;
    ps->chosen = ps->cand[best];
    ps->state = 2;
    hp_plan_str(&ps->chosen, a, sizeof(a));
    if (plain >= 0 && comp >= 0)
        snprintf(line, len, "%s (median %.0f us compressed, %.0f us plain)", a, med[comp] * 1e6,
                 med[plain] * 1e6);
    else if (ps->plain_skip > 0)
        snprintf(line, len, "%s (%.0f us; plain not timed: modelled %.0fx slower)", a, med[best] * 1e6,
                 ps->plain_skip);
    else
        snprintf(line, len, "%s (%.0f us; plain not allowed)", a, med[best] * 1e6);
    HP_INFO("plan for %zu bytes: %s", count * sizeof(float), line);
    if (comp != fastest && comp >= 0) {
        /* the tie-break chose: name what it set aside */
        char f[48];
        hp_plan_str(&ps->cand[fastest], f, sizeof(f));
        HP_INFO("plan for %zu bytes: %s's median %.0f us is within %.0f%%; %s puts %.0f fewer bytes on the wire",
                count * sizeof(float), f, med[fastest] * 1e6, HP_PLAN_MARGIN * 100, a,
                ps->cand[fastest].wire - ps->chosen.wire);
    }
}

void hp_plan_text(const hp_planner_t *pl, size_t bytes, char *buf, size_t len)
{
    /* host memory's plan, else the device's (the API names no memory), of
     * the compressor's own form before the residual-free one's */
    int c = hp_plan_size_class(bytes);
    const hp_plan_slot_t *ps = &pl->plans[0][c];
    for (int k = 1; k < HP_PLAN_KEYS && ps->state == 0; k++)
        ps = &pl->plans[k][c];
    if (ps->state == 2)
        hp_plan_str(&ps->chosen, buf, len);
    else
        snprintf(buf, len, ps->state == 1 ? "exploring" : "none");
}
