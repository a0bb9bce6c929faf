/*
 * The stand-in NCCL's comparison of the ranks' calls (mock_nccl_int.h).
 * NCCL matches one communicator's operations across its ranks by their
 * order: every rank's k-th collective must be the same collective (count,
 * type, reduction, root), and the n-th send of rank a to rank b meets b's
 * n-th receive from a (the same count and type), with as many collectives
 * before it on both sides (NCCL runs them in that order on the device:
 * otherwise each waits for the other).  A rank whose calls differ leaves a
 * peer waiting for ever on a GPU, or moves bytes into the wrong buffer.
 * The stand-in compares each call when it is issued with what the peers
 * issued (mock_nccl_shm.c's records) and, at ncclCommDestroy or
 * ncclCommFinalize, the totals: the first difference stops the process
 * (MOCK_RULE_EXIT) with a line naming both ranks and both calls.
 */
#define _GNU_SOURCE
#include "mock_nccl_int.h"
#include "mock_cuda.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void differ(const mock_comm_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void differ(const mock_comm_t *c, const char *fmt, ...)
{
    char line[1024];
    int k = snprintf(line, sizeof(line), "mock_nccl rank %d (pid %d): the NCCL calls on communicator %04llx differ "
                     "between ranks: ", c->rank, (int)getpid(),
                     (unsigned long long)(mock_shm_uid(c->world) & 0xffff));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + k, sizeof(line) - (size_t)k - 2, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    fflush(stdout);
    if (write(2, line, strlen(line)) < 0)
        _exit(MOCK_RULE_EXIT);
    _exit(MOCK_RULE_EXIT);
}

static void describe(const mock_desc_t *d, char *buf, size_t len)
{
    int k = snprintf(buf, len, "%s of %llu x %s", mock_kind_name(d->kind), (unsigned long long)d->count,
                     mock_dt_name(d->dt));
    static const char *const ops[] = {"sum", "prod", "max", "min", "avg"};
    if (d->kind == MOCK_D_ALLREDUCE && d->op >= 0 && d->op < 5)
        snprintf(buf + k, len - (size_t)k, " (%s)", ops[d->op]);
    else if (d->kind == MOCK_D_ALLREDUCE)
        snprintf(buf + k, len - (size_t)k, " (reduction %d)", d->op);
    else if (d->kind == MOCK_D_BCAST || d->kind == MOCK_D_GATHER || d->kind == MOCK_D_SCATTER)
        snprintf(buf + k, len - (size_t)k, " (root %d)", d->root);
}

static int same_coll(const mock_desc_t *a, const mock_desc_t *b)
{
    return a->kind == b->kind && a->count == b->count && a->dt == b->dt && a->op == b->op && a->root == b->root;
}

/* What this rank issued so far: transfers to and from each rank. */
static uint64_t *counts(const mock_comm_t *c, uint64_t *cnt)
{
    for (int p = 0; p < c->size; p++) {
        cnt[p] = c->sseq[p];
        cnt[c->size + p] = c->rseq[p];
    }
    return cnt;
}

/* This rank's counts (mine, before its collective or end `what`) against
 * rank r's (theirs, before the same). */
static void same_counts(const mock_comm_t *c, int r, const uint64_t *mine, const uint64_t *theirs, const char *what)
{
    const int me = c->rank, n = c->size;
    if (mine[r] != theirs[n + me] || mine[n + r] != theirs[me])
        differ(c, "before %s, rank %d had issued %llu transfers to rank %d and %llu from it, rank %d %llu from "
               "rank %d and %llu to it (a send, a receive or a collective issued on one rank and not on the "
               "other)", what, me, (unsigned long long)mine[r], r, (unsigned long long)mine[n + r], r,
               (unsigned long long)theirs[n + me], me, (unsigned long long)theirs[me]);
}

/* A transfer rank r issued with this rank (the next one past this rank's
 * counts `mine`) before its own collective #k, which this rank now issues
 * without it: a send or receive one rank skipped. */
static void beyond(const mock_comm_t *c, int r, const uint64_t *mine, uint64_t k, const char *what)
{
    const int me = c->rank, n = c->size;
    for (int send = 0; send < 2; send++) {
        /* (r's receive of my next send; r's send of my next receive) */
        uint64_t next = (send ? mine[n + r] : mine[r]) + 1, colls = 0;
        mock_desc_t pd;
        if (mock_shm_issued(c->world, send ? r : me, send ? me : r, send, next, &pd, &colls) && colls < k)
            differ(c, "rank %d issued its %s #%llu %s rank %d before its collective #%llu, rank %d issues its "
                   "collective #%llu (%s) after %llu %s", r, mock_kind_name(pd.kind), (unsigned long long)next,
                   send ? "to" : "from", me, (unsigned long long)k, me, (unsigned long long)k, what,
                   (unsigned long long)(next - 1), send ? "receives from it" : "sends to it");
    }
}

void mock_seq_coll(mock_comm_t *c, const mock_desc_t *d)
{
    uint64_t *mine, *theirs, k, ended;
    mock_desc_t pd;
    char a[128], b[128], what[176];
    if (c->world == NULL)
        return;
    mine = calloc(4 * (size_t)c->size, sizeof(uint64_t));
    if (mine == NULL)
        return;
    theirs = mine + 2 * c->size;
    k = ++c->ncoll;
    mock_shm_log_coll(c->world, k, d, counts(c, mine));
    describe(d, a, sizeof(a));
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank)
            continue;
        if (mock_shm_coll_of(c->world, r, k, &pd, theirs)) {
            describe(&pd, b, sizeof(b));
            if (!same_coll(d, &pd))
                differ(c, "rank %d's collective #%llu is %s, rank %d's is %s", c->rank, (unsigned long long)k, a,
                       r, b);
            snprintf(what, sizeof(what), "their collective #%llu (%s)", (unsigned long long)k, a);
            same_counts(c, r, mine, theirs, what);
        } else if (mock_shm_end_of(c->world, r, &ended, theirs) && ended < k) {
            differ(c, "rank %d issues collective #%llu (%s), rank %d ended the communicator after %llu", c->rank,
                   (unsigned long long)k, a, r, (unsigned long long)ended);
        }
        beyond(c, r, mine, k, a);
    }
    free(mine);
}

void mock_seq_p2p(mock_comm_t *c, int send, int peer, uint64_t n, const mock_desc_t *d)
{
    const int src = send ? c->rank : peer, dst = send ? peer : c->rank;
    uint64_t colls = 0, ended;
    mock_desc_t pd;
    if (c->world == NULL)
        return;
    mock_shm_issue(c->world, src, dst, send, n, d, c->ncoll);
    if (mock_shm_issued(c->world, src, dst, !send, n, &pd, &colls)) {
        if (pd.count != d->count || pd.dt != d->dt || colls != c->ncoll)
            differ(c, "rank %d's %s #%llu %s rank %d (%llu x %s, after its collective #%llu) meets rank %d's %s "
                   "#%llu %s rank %d (%llu x %s, after its collective #%llu)", c->rank, mock_kind_name(d->kind),
                   (unsigned long long)n, send ? "to" : "from", peer, (unsigned long long)d->count,
                   mock_dt_name(d->dt), (unsigned long long)c->ncoll, peer, mock_kind_name(pd.kind),
                   (unsigned long long)n, send ? "from" : "to", c->rank, (unsigned long long)pd.count,
                   mock_dt_name(pd.dt), (unsigned long long)colls);
    } else {
        /* the peer went on to its next collective, or ended, without it */
        uint64_t *theirs = calloc(2 * (size_t)c->size, sizeof(uint64_t)), k = c->ncoll + 1;
        if (theirs != NULL && mock_shm_coll_of(c->world, peer, k, &pd, theirs) &&
            (send ? theirs[c->size + c->rank] : theirs[c->rank]) < n)
            differ(c, "rank %d issues its %s #%llu %s rank %d before its collective #%llu, rank %d issued its "
                   "collective #%llu after %llu", c->rank, mock_kind_name(d->kind), (unsigned long long)n,
                   send ? "to" : "from", peer, (unsigned long long)k, peer, (unsigned long long)k,
                   (unsigned long long)(send ? theirs[c->size + c->rank] : theirs[c->rank]));
        if (theirs != NULL && mock_shm_end_of(c->world, peer, &ended, theirs) &&
            (send ? theirs[c->size + c->rank] : theirs[c->rank]) < n)
            differ(c, "rank %d issues its %s #%llu %s rank %d, which ended the communicator after %llu", c->rank,
                   mock_kind_name(d->kind), (unsigned long long)n, send ? "to" : "from", peer,
                   (unsigned long long)(send ? theirs[c->size + c->rank] : theirs[c->rank]));
        free(theirs);
    }
}

void mock_seq_end(mock_comm_t *c, const char *fn)
{
    uint64_t *mine, *theirs, ended;
    char what[96];
    if (c == NULL || c->world == NULL || c->seq_ended || c->aborted)
        return;
    c->seq_ended = 1;
    if ((mine = calloc(4 * (size_t)c->size, sizeof(uint64_t))) == NULL)
        return;
    theirs = mine + 2 * c->size;
    mock_shm_log_end(c->world, c->ncoll, counts(c, mine));
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank || !mock_shm_end_of(c->world, r, &ended, theirs))
            continue;
        if (ended != c->ncoll)
            differ(c, "rank %d ends the communicator (%s) after %llu collectives, rank %d ended it after %llu",
                   c->rank, fn, (unsigned long long)c->ncoll, r, (unsigned long long)ended);
        snprintf(what, sizeof(what), "the communicator's end (%s)", fn);
        same_counts(c, r, mine, theirs, what);
    }
    free(mine);
}
