/*
 * The per-thread tracking of the user's ncclGroupStart/ncclGroupEnd, which
 * decides whether an ncclAllReduce is part of the user's group (the
 * eligibility rule itself is hp_eligible.h's): pure functions, no NCCL
 * header, unit-tested in tests/gpu/host/check_gpu.c.  The wrappers that use them
 * are in mpi_wrappers/hp_nccl_wrap.c.
 *
 * Groups.  Inside ncclGroupStart/End NCCL fuses the calls and launches them
 * at ncclGroupEnd; hipress must not pull one call out of a group the user
 * built.  But PyTorch (up to about 2.1) wraps every single collective in its
 * own group, so "inside a group" alone would exclude all of PyTorch's
 * traffic.  The rule: a group is the user's group when it holds more than one
 * NCCL operation, or is nested inside another group.  Whether a call is
 * alone is known only at the outermost ncclGroupEnd, so the first operation
 * of a depth-1 group is "sole so far": it is decided at ncclGroupEnd (alone:
 * eligible) or when a second operation enters the group (then both belong to
 * the user's group).  hipress sees every NCCL operation a group can hold
 * (ncclAllReduce, ncclBroadcast, ncclBcast, ncclReduce, ncclAllGather,
 * ncclReduceScatter, ncclSend, ncclRecv and, from NCCL 2.28, ncclAlltoAll,
 * ncclGather, ncclScatter): it wraps them all.
 */
#ifndef HP_NCCL_GROUP_H
#define HP_NCCL_GROUP_H

#include <stddef.h>

/* ------------------------------------------------------------- groups */

/* One thread's view of the user's groups (NCCL's group state is per thread
 * too).  Zero-initialised means "no group". */
typedef struct {
    int depth;      /* the user's ncclGroupStart nesting */
    int ops;        /* operations seen since the outermost ncclGroupStart */
    int pending;    /* the first of them is sole so far and was otherwise eligible */
} hp_nccl_group_t;

typedef enum {
    HP_NCCL_NO_GROUP = 0,     /* outside any group */
    HP_NCCL_SOLE_SO_FAR,      /* first operation of a depth-1 group */
    HP_NCCL_IN_USER_GROUP     /* nested group, or not the group's first operation */
} hp_nccl_group_class_t;

void hp_nccl_group_start(hp_nccl_group_t *g);

/* An operation enters.  Returns its class.  When it makes a pending first
 * call part of the user's group, *demoted_p is set to 1 (and pending to 0):
 * the caller re-counts that call. */
hp_nccl_group_class_t hp_nccl_group_op(hp_nccl_group_t *g, int *demoted_p);

/* Mark the operation just classified HP_NCCL_SOLE_SO_FAR as eligible but for
 * the group: it is decided at the outermost ncclGroupEnd. */
void hp_nccl_group_set_pending(hp_nccl_group_t *g);

/* ncclGroupEnd.  Returns 1 when it closed the outermost group and that
 * group's pending call was alone in it (the call is eligible), else 0.  An
 * unbalanced end (depth 0) changes nothing: NCCL reports the error. */
int hp_nccl_group_end(hp_nccl_group_t *g);

#endif
