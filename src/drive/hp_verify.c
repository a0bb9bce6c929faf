/*
 * HIPRESS_VERIFY's report of one compressed call (hp_verify.h), the part
 * the front ends share: the error, the cross-rank identity through the
 * transport's agreement, the statistics and the INFO line.  How the exact
 * sum is made is each front end's (hp_front_t.exact: src/front/mpi's
 * PMPI_Allreduce of a copy; src/front/nccl's real ncclAllReduce of a
 * device copy).
 */
#include "hp_verify.h"
#include "hp_global.h"
#include <math.h>

double hp_verify_rel_err(const float *exact, const float *got, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)exact[i];
        num += d * d;
        den += (double)exact[i] * (double)exact[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int hp_verify_report(hp_transport_t *tp, const float *exact, const float *got, size_t n)
{
    double rel = exact != NULL && got != NULL ? hp_verify_rel_err(exact, got, n) : NAN;
    int64_t h[2];
    int same;

    /* identical everywhere when max(h) = ~max(~h) = min(h) (the transport's
     * agreement; ~ reverses the order of signed integers too); a rank
     * without its result joins it all the same, and it fails */
    h[0] = got != NULL ? (int64_t)hp_hash_bytes(HP_HASH_INIT, got, n * sizeof(float)) : 0;
    h[1] = ~h[0];
    same = hp_tp_agree(tp, HP_TP_INT64, h, 2, "the verification's identity check") == HP_OK && h[0] == ~h[1] &&
           got != NULL;
    atomic_fetch_add_explicit(&hp_g.stats.verify_calls, 1, memory_order_relaxed);
    if (!same)
        atomic_fetch_add_explicit(&hp_g.stats.verify_mismatch, 1, memory_order_relaxed);
    pthread_mutex_lock(&hp_g.stats.stats_lock);
    if (exact != NULL && got != NULL && !(rel <= hp_g.stats.max_rel_err))
        hp_g.stats.max_rel_err = rel;
    pthread_mutex_unlock(&hp_g.stats.stats_lock);
    if (exact == NULL || got == NULL)
        HP_INFO("verify: %zu elements, no %s on this rank, identical on all ranks: %s", n,
                exact == NULL ? "exact sum" : "copy of the result", same ? "yes" : "NO");
    else
        HP_INFO("verify: %zu elements, relative error %.9g, identical on all ranks: %s", n, rel, same ? "yes" : "NO");
    return same;
}
