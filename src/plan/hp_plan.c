/* Cost model of the compressed collectives. */
#include "hp_plan.h"
#include "hp_algo.h"
#include <math.h>
#include <stdio.h>

#define HP_PLAN_MIN_PART_BYTES (32 * 1024)
#define HP_PLAN_MAX_PARTS 256
#define HP_PLAN_FINE_PART_BYTES (1024 * 1024)

/* Lossy stages of row `a` on N ranks, and in *sum how many are an owner's
 * encode in the sum codec (a collective compressor, a = NULL: 1 and 0). */
static int algo_stages(const hp_algo_desc_t *a, int N, int *sum)
{
    *sum = 0;
    if (N < 2)
        return 0;
    return a != NULL ? a->stages(N, sum) : 1;
}

/* What `stages` of which `sum` in the sum codec cost the budget. */
static int stages_cost(int stages, int sum, const hp_codecs_t *c)
{
    return stages - sum + sum * hp_comp_sum_cost(c->kind, c->sum_kind);
}

int hp_plan_stages(int algo, int N)
{
    int sum;
    return algo_stages(hp_algo_get(algo), N, &sum);
}

int hp_plan_stage_cost(int algo, int N, const hp_codecs_t *c)
{
    int sum, st = algo_stages(hp_algo_get(algo), N, &sum);
    return stages_cost(st, sum, c);
}

int hp_plan_default_budget(hp_qclass_t qclass)
{
    return hp_comp_default_budget(qclass);
}

int hp_plan_budget(int kind, long long max_stages)
{
    if (max_stages > 0)
        return (int)HP_MIN(max_stages, 65536);
    return hp_comp_ext(kind)->max_stages;
}

size_t hp_plan_msg_bytes(int kind, size_t len, int contribs, const hipress_comp_params_t *p)
{
    return hp_msg_wire_bytes(kind, len, contribs, p);
}

double hp_plan_cost(const hp_plan_inputs_t *in, const hp_codecs_t *c, size_t n, int N, int algo, size_t K)
{
    const hp_algo_desc_t *a = hp_algo_get(algo);
    hp_algo_volume_t v;
    double w, cc, mx;
    if (a == NULL)
        return INFINITY;
    a->volume(c, n, N, &v);
    w = v.wire / in->bw;
    cc = v.enc / in->enc_rate + v.dec / in->dec_rate;
    mx = w > cc ? w : cc;
    return mx + (w + cc - mx) / (double)K + (double)K * v.msgs * in->alpha;
}

hp_plan_t hp_plan_choose(const hp_plan_inputs_t *in, const hp_codecs_t *c, size_t n, int N, int algo_fixed,
                         size_t part_bytes, int budget, int rank)
{
    hp_plan_t best[HP_ALGO_COUNT];
    int nbest = 0;
    int first = algo_fixed == HP_ALGO_AUTO ? HP_ALGO_AUTO + 1 : algo_fixed;
    int last = algo_fixed == HP_ALGO_AUTO ? HP_ALGO_COUNT - 1 : algo_fixed;
    const size_t g = hp_comp_grain2(c->kind, c->sum_kind, c->p);

    for (int a = first; a <= last; a++) {
        /* the unit each algorithm partitions (a shard or all of it);
         * partitions are whole grains */
        size_t unit = hp_plan_unit(a, n, N);
        size_t grains = HP_MAX((unit + g - 1) / g, 1);
        const hp_algo_desc_t *desc = hp_algo_get(a);
        int sum_stages, stages;
        hp_plan_t pl;
        if (desc == NULL)
            break;
        stages = algo_stages(desc, N, &sum_stages);
        pl = (hp_plan_t){.compress = 1, .algo = a, .parts = 1, .stages = stages,
                         .cost = stages_cost(stages, sum_stages, c)};
        if (algo_fixed == HP_ALGO_AUTO && budget > 0 && pl.cost > budget && pl.stages > 1)
            continue;
        if (sum_stages > 0 && c->sum_kind != c->kind)
            pl.sum = hp_comp_get(c->sum_kind)->name;
        {
            hp_algo_volume_t v;
            desc->volume(c, n, N, &v);
            pl.wire = v.wire;
        }
        if (part_bytes > 0) {
            size_t pe = HP_MAX(part_bytes / 4, 1);
            pl.parts = (unit + pe - 1) / pe;
            pl.parts = HP_MAX(HP_MIN(pl.parts, grains), 1);
            pl.t_model = hp_plan_cost(in, c, n, N, a, pl.parts);
        } else {
            pl.t_model = INFINITY;
            for (size_t K = 1; K <= HP_PLAN_MAX_PARTS; K *= 2) {
                double t;
                if (K > 1 && (4 * unit / K < HP_PLAN_MIN_PART_BYTES || K > grains))
                    break;
                t = hp_plan_cost(in, c, n, N, a, K);
                if (t < pl.t_model) {
                    pl.t_model = t;
                    pl.parts = K;
                }
            }
        }
        /* insertion into best[] by modelled time */
        int i = nbest++;
        while (i > 0 && best[i - 1].t_model > pl.t_model) {
            best[i] = best[i - 1];
            i--;
        }
        best[i] = pl;
    }
    if (rank < nbest)
        return best[rank];
    return (hp_plan_t){.compress = 0, .algo = HP_ALGO_AUTO + 1, .parts = 1, .t_model = INFINITY};
}

hp_plan_t hp_plan_finer(const hp_plan_inputs_t *in, const hp_codecs_t *c, size_t n, int N, const hp_plan_t *p)
{
    size_t unit = hp_plan_unit(p->algo, n, N), g = hp_comp_grain2(c->kind, c->sum_kind, c->p);
    size_t grains = HP_MAX((unit + g - 1) / g, 1);
    size_t K = HP_MIN(HP_MIN((4 * unit + HP_PLAN_FINE_PART_BYTES - 1) / HP_PLAN_FINE_PART_BYTES,
                             (size_t)HP_PLAN_MAX_PARTS), grains);
    hp_plan_t f = *p;
    if (!p->compress || K < 2 * p->parts) {
        f.compress = 0;
        return f;
    }
    f.parts = K;
    f.t_model = hp_plan_cost(in, c, n, N, p->algo, K);
    return f;
}

size_t hp_plan_unit(int algo, size_t n, int N)
{
    /* the model's shard: ceil(n / N), not grain-aligned (the run's are) */
    const hp_algo_desc_t *a = hp_algo_get(algo);
    return a != NULL && a->unit == HP_UNIT_SHARD ? (n + (size_t)N - 1) / (size_t)N : n;
}

const char *hp_plan_str(const hp_plan_t *plan, char *buf, size_t len)
{
    if (!plan->compress)
        snprintf(buf, len, "plain");
    else if (plan->algo == HP_ALGO_AUTO)
        snprintf(buf, len, "collective, %d stage%s", plan->stages, plan->stages == 1 ? "" : "s");
    else
        snprintf(buf, len, "%s K=%zu, %d stage%s%s%s%s", hp_algo_name(plan->algo), plan->parts,
                 plan->stages, plan->stages == 1 ? "" : "s", plan->sum ? ", sum " : "", plan->sum ? plan->sum : "",
                 plan->hier ? ", hierarchical" : "");
    return buf;
}
