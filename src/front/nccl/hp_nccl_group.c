/*
 * The tracking of the user's NCCL groups: pure functions
 * (src/front/nccl/hp_nccl_group.h), unit-tested in tests/gpu/host/check_gpu.c.
 */
#include "hp_nccl_group.h"

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
