/* Cost model of the compressed collectives. */
#include "hp_plan.h"
#include <math.h>
#include <stdio.h>

#define HP_PLAN_MIN_PART_BYTES (32 * 1024)
#define HP_PLAN_MAX_PARTS 256

const char *hp_algo_name(int algo)
{
    static const char *names[] = {"auto", "ring", "tree", "ps", "allgather"};
    return algo >= 0 && algo < 5 ? names[algo] : "?";
}

size_t hp_plan_msg_bytes(int kind, size_t len, int contribs, const hipress_comp_params_t *p)
{
    hp_comp_t *c = hp_comp_get(kind);
    if (c != NULL && (c->flags & HIPRESS_COMP_SPARSE)) {
        size_t k2 = hp_sparse_k2(len, contribs, p);
        return HP_MSG_HEADER + HP_MIN(8 * k2, 4 * len);
    }
    return c != NULL ? HP_MSG_HEADER + c->max_payload(len, p) : HP_MSG_HEADER + 4 * len;
}

static int ceil_log2(int N)
{
    int l = 0;
    while ((1 << l) < N)
        l++;
    return l;
}

int hp_plan_stages(int algo, int N)
{
    if (N < 2)
        return 0;
    switch (algo) {
    case HP_ALGO_RING:      return N;
    case HP_ALGO_TREE:      return ceil_log2(N) + 1;
    case HP_ALGO_PS:        return 2;
    case HP_ALGO_ALLGATHER: return 1;
    default:                return 1;   /* a collective compressor */
    }
}

int hp_plan_default_budget(hp_qclass_t qclass)
{
    /* For a plugin, from its class (built-ins carry their own, measured:
     * hp_comp_ext_t.max_stages).  Re-encoding a rounded value costs almost
     * nothing; a quantised partial sum costs accuracy at every stage; the
     * sparse compressors showed no cost up to 2 stages. */
    static const int budget[HP_QCLASS_N] = {
        [HP_QCLASS_EXACT] = 0,
        [HP_QCLASS_ROUNDING] = 0,
        [HP_QCLASS_QUANT] = 1,
        [HP_QCLASS_SPARSE] = 2,
        [HP_QCLASS_LOWRANK] = 0,
    };
    return qclass < HP_QCLASS_N ? budget[qclass] : 1;
}

int hp_plan_budget(int kind, long long max_stages)
{
    if (max_stages > 0)
        return (int)HP_MIN(max_stages, 65536);
    return hp_comp_ext(kind)->max_stages;
}

/* Wire bytes, encoded and decoded raw bytes, and messages on the critical path. */
static void algo_volume(int kind, const hipress_comp_params_t *p, size_t n, int N, int algo,
                        double *wire, double *enc, double *dec, double *msgs)
{
    double S = 4.0 * (double)n;
    size_t chunk = (n + (size_t)N - 1) / (size_t)N;
    int L = ceil_log2(N);

    *wire = 0;
    switch (algo) {
    case HP_ALGO_RING:
        for (int s = 0; s < N - 1; s++)
            *wire += (double)hp_plan_msg_bytes(kind, chunk, s + 1, p);
        *wire += (double)(N - 1) * (double)hp_plan_msg_bytes(kind, chunk, N, p);
        *enc = S;
        *dec = S * (2.0 * N - 1) / N;
        *msgs = 2.0 * (N - 1);
        break;
    case HP_ALGO_PS:
        *wire = (double)(N - 1) * ((double)hp_plan_msg_bytes(kind, chunk, 1, p) +
                                   (double)hp_plan_msg_bytes(kind, chunk, N, p));
        *enc = S;
        *dec = S * (2.0 * N - 1) / N;
        *msgs = 2.0 * (N - 1);
        break;
    case HP_ALGO_TREE:
        /* the root receives from L children and sends to L children */
        *wire = (double)L * ((double)hp_plan_msg_bytes(kind, n, HP_MAX(N / 2, 1), p) +
                             (double)hp_plan_msg_bytes(kind, n, N, p));
        *enc = 2 * S;
        *dec = (L + 1) * S;
        *msgs = 2.0 * L;
        break;
    case HP_ALGO_ALLGATHER:
    default:
        *wire = (double)(N - 1) * (double)hp_plan_msg_bytes(kind, n, 1, p);
        *enc = S;
        *dec = N * S;
        *msgs = (double)(N - 1);
        break;
    }
}

double hp_plan_cost(const hp_plan_inputs_t *in, int kind, const hipress_comp_params_t *p,
                    size_t n, int N, int algo, size_t K)
{
    double wire, enc, dec, msgs, w, c, mx;
    algo_volume(kind, p, n, N, algo, &wire, &enc, &dec, &msgs);
    w = wire / in->bw;
    c = enc / in->enc_rate + dec / in->dec_rate;
    mx = w > c ? w : c;
    return mx + (w + c - mx) / (double)K + (double)K * msgs * in->alpha;
}

hp_plan_t hp_plan_choose(const hp_plan_inputs_t *in, int kind, const hipress_comp_params_t *p,
                         size_t n, int N, int algo_fixed, size_t part_bytes, int budget, int rank)
{
    hp_plan_t best[4];
    int nbest = 0;
    int first = algo_fixed == HP_ALGO_AUTO ? HP_ALGO_RING : algo_fixed;
    int last = algo_fixed == HP_ALGO_AUTO ? HP_ALGO_ALLGATHER : algo_fixed;
    const size_t g = hp_comp_grain(kind, p);

    for (int a = first; a <= last; a++) {
        /* the unit each algorithm partitions: a chunk (ring, ps) or all of
         * it; partitions are whole grains */
        size_t unit = (a == HP_ALGO_RING || a == HP_ALGO_PS) ? (n + (size_t)N - 1) / (size_t)N : n;
        size_t grains = HP_MAX((unit + g - 1) / g, 1);
        hp_plan_t pl = {1, a, 1, 0, hp_plan_stages(a, N), 0};
        if (algo_fixed == HP_ALGO_AUTO && budget > 0 && pl.stages > budget && a != HP_ALGO_ALLGATHER)
            continue;
        if (part_bytes > 0) {
            size_t pe = HP_MAX(part_bytes / 4, 1);
            pl.parts = (unit + pe - 1) / pe;
            pl.parts = HP_MAX(HP_MIN(pl.parts, grains), 1);
            pl.t_model = hp_plan_cost(in, kind, p, n, N, a, pl.parts);
        } else {
            pl.t_model = INFINITY;
            for (size_t K = 1; K <= HP_PLAN_MAX_PARTS; K *= 2) {
                double t;
                if (K > 1 && (4 * unit / K < HP_PLAN_MIN_PART_BYTES || K > grains))
                    break;
                t = hp_plan_cost(in, kind, p, n, N, a, K);
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
    return (hp_plan_t){0, HP_ALGO_RING, 1, INFINITY, 0, 0};
}

const char *hp_plan_str(const hp_plan_t *plan, char *buf, size_t len)
{
    if (!plan->compress)
        snprintf(buf, len, "plain");
    else if (plan->algo == HP_ALGO_AUTO)
        snprintf(buf, len, "collective, %d stage%s", plan->stages, plan->stages == 1 ? "" : "s");
    else
        snprintf(buf, len, "%s K=%zu, %d stage%s%s", hp_algo_name(plan->algo), plan->parts,
                 plan->stages, plan->stages == 1 ? "" : "s", plan->hier ? ", hierarchical" : "");
    return buf;
}
