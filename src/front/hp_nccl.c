/*
 * Which ncclAllReduce calls hipress may take over, and the tracking of the
 * user's NCCL groups: pure functions (src/front/hp_nccl.h), unit-tested in
 * tests/gpu/check_gpu.c.
 */
#include "hp_nccl.h"

hp_nccl_elig_t hp_nccl_eligible(const hp_nccl_desc_t *d)
{
    size_t bytes;
    const char *s, *r;

    if (!d->enabled)
        return HP_NELIG_DISABLED;
    if (d->null_handle || d->sendbuf == NULL || d->recvbuf == NULL)
        return HP_NELIG_NULL;
    if (!d->dtype_ok)
        return HP_NELIG_DATATYPE;
    if (!d->op_ok)
        return HP_NELIG_OP;
    if (d->count == 0)
        return HP_NELIG_COUNT;
    if (__builtin_mul_overflow(d->count, d->elem_size, &bytes))
        return HP_NELIG_COUNT;
    /* in place (equal pointers) is fine; any other overlap is erroneous and
     * left to NCCL */
    s = (const char *)d->sendbuf;
    r = (const char *)d->recvbuf;
    if (s != r && s < r + bytes && r < s + bytes)
        return HP_NELIG_OVERLAP;
    if (d->opted_out)
        return HP_NELIG_OPTED_OUT;
    if (bytes < d->min_bytes)
        return HP_NELIG_TOO_SMALL;
    if (d->in_user_group)
        return HP_NELIG_GROUP;
    if (d->capturing != 0)
        return HP_NELIG_CAPTURE;
    return HP_NELIG_YES;
}

const char *hp_nccl_elig_name(hp_nccl_elig_t r)
{
    static const char *names[HP_NELIG_NREASONS] = {
        "eligible", "disabled", "null handle", "datatype", "op", "count",
        "overlap", "opted out", "small", "group", "graph capture"};
    return (r >= 0 && r < HP_NELIG_NREASONS) ? names[r] : "?";
}

void hp_nccl_group_start(hp_nccl_group_t *g)
{
    if (g->depth == 0) {
        g->ops = 0;
        g->pending = 0;
    }
    g->depth++;
}

hp_nccl_group_class_t hp_nccl_group_op(hp_nccl_group_t *g, int *demoted_p)
{
    *demoted_p = 0;
    if (g->depth == 0)
        return HP_NCCL_NO_GROUP;
    g->ops++;
    if (g->depth == 1 && g->ops == 1)
        return HP_NCCL_SOLE_SO_FAR;
    if (g->pending) {
        g->pending = 0;
        *demoted_p = 1;
    }
    return HP_NCCL_IN_USER_GROUP;
}

void hp_nccl_group_set_pending(hp_nccl_group_t *g)
{
    if (g->depth == 1 && g->ops == 1)
        g->pending = 1;
}

int hp_nccl_group_end(hp_nccl_group_t *g)
{
    int sole;
    if (g->depth == 0)
        return 0;
    if (--g->depth > 0)
        return 0;
    sole = g->pending && g->ops == 1;
    g->ops = 0;
    g->pending = 0;
    return sole;
}
