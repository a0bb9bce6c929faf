/*
 * The delay transport, for tests only (a row of hp_transports.def under
 * HP_TEST_TABLES; HP_TEST_TRANSPORT=delay): it wraps another transport and
 * keeps nothing of it but what hp_transport.h promises.
 *
 *  * Sends and receives are held back, and posted to the inner transport
 *    later -- a few at a random progress call, the rest when the caller
 *    waits or agrees -- in a shuffled order across peers and across sends
 *    and receives, keeping only MPI's matching rule: sends to one peer in
 *    the order posted, receives from one peer in the order posted.
 *  * A send's buffer is read when it is posted, not when it is handed over,
 *    and a receive's buffer is filled with garbage until its data arrive:
 *    a caller that touches either before its wait sees the difference.
 *  * A wait sometimes sleeps a little first, so ranks drift apart.
 *
 * So an algorithm that depends on timing, on an order the transport does
 * not promise or on a buffer the transport owns breaks here.  The order is
 * seeded (HP_TEST_DELAY_SEED, default 1, mixed with the rank and the
 * transport's number in this process): a failure can be replayed.  At exit
 * the process prints on stderr how many operations it held back and how
 * many it posted out of their issue order, so that a test can tell the
 * transport was used.  HP_TEST_DELAY_BREAK=1 breaks the matching rule on
 * purpose (two sends to one peer swapped) to show that the tests notice.
 */
#include "hp_transport.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { DL_SEND, DL_RECV };

typedef struct dl_op {
    struct dl_op *prev, *next;  /* the live list: posted or not, not yet waited for */
    int           kind, peer, flags, posted;
    const void   *sbuf;
    void         *rbuf;
    size_t        len, cap;
    hp_status_t   post_st;      /* what posting it to the inner transport returned */
    hp_req_t      inner;
} dl_op_t;

typedef struct {
    hp_transport_t *inner;
    uint64_t        rng;
    int             brk;        /* HP_TEST_DELAY_BREAK */
    dl_op_t         live;       /* list head, in issue order */
    size_t          nlive, npending;
    unsigned char  *seen;       /* 2 * size: a held send / receive of that peer met */
    dl_op_t       **cand;       /* room for the candidates of one pick */
    size_t          ncand_cap;
} dl_t;

static _Atomic unsigned long long dl_held, dl_reordered, dl_broken, dl_instances;

_Static_assert(sizeof(dl_op_t *) <= sizeof(((hp_req_t *)0)->impl), "hp_req_t.impl too small");
_Static_assert(sizeof(dl_t *) <= sizeof(((hp_transport_t *)0)->impl), "hp_transport_t.impl too small");

static dl_t *dl_of(hp_transport_t *tp)
{
    return (dl_t *)tp->impl.ptr[0];
}

static uint64_t dl_rand(dl_t *d)
{
    /* splitmix64 */
    uint64_t z = (d->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void dl_post(dl_t *d, dl_op_t *op)
{
    /* posted while an operation issued before it is still held: out of order */
    for (dl_op_t *o = d->live.next; o != op; o = o->next)
        if (!o->posted) {
            atomic_fetch_add_explicit(&dl_reordered, 1, memory_order_relaxed);
            break;
        }
    if (op->kind == DL_SEND)
        op->post_st = hp_tp_isend(d->inner, op->sbuf, op->len, op->cap, op->peer, &op->inner);
    else if (op->flags & HP_TP_MSG)
        op->post_st = hp_tp_irecv(d->inner, op->rbuf, op->cap, op->peer, &op->inner);
    else
        op->post_st = hp_tp_irecv_bytes(d->inner, op->rbuf, op->cap, op->peer, &op->inner);
    op->posted = 1;
    d->npending--;
}

/* Post one held operation, chosen at random among those the matching rule
 * allows now (the first held one of its peer and direction).  With
 * HP_TEST_DELAY_BREAK, a send held behind exactly one earlier send to its
 * peer goes first. */
static void dl_post_one(dl_t *d)
{
    size_t nc = 0;
    memset(d->seen, 0, 2 * (size_t)d->inner->size);
    for (dl_op_t *o = d->live.next; o != &d->live; o = o->next) {
        unsigned char *s;
        if (o->posted)
            continue;
        s = &d->seen[2 * (size_t)o->peer + (size_t)o->kind];
        if (*s == 0) {
            d->cand[nc++] = o;
        } else if (d->brk && o->kind == DL_SEND && *s == 1) {
            atomic_fetch_add_explicit(&dl_broken, 1, memory_order_relaxed);
            dl_post(d, o);
            return;
        }
        if (*s < 2)
            (*s)++;
    }
    if (nc > 0)
        dl_post(d, d->cand[dl_rand(d) % nc]);
}

static void dl_flush(dl_t *d)
{
    while (d->npending > 0)
        dl_post_one(d);
}

static dl_op_t *dl_hold(dl_t *d, int kind, int peer, hp_req_t *req)
{
    dl_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return NULL;
    if (d->nlive + 1 > d->ncand_cap) {
        size_t nc = d->ncand_cap ? 2 * d->ncand_cap : 64;
        dl_op_t **c = realloc(d->cand, nc * sizeof(*c));
        if (c == NULL) {
            free(op);
            return NULL;
        }
        d->cand = c;
        d->ncand_cap = nc;
    }
    op->kind = kind;
    op->peer = peer;
    op->inner = HP_REQ_NULL;
    op->prev = d->live.prev;
    op->next = &d->live;
    d->live.prev->next = op;
    d->live.prev = op;
    d->nlive++;
    d->npending++;
    req->impl.ptr[0] = op;
    atomic_fetch_add_explicit(&dl_held, 1, memory_order_relaxed);
    return op;
}

static void dl_unlink(dl_t *d, dl_op_t *op)
{
    op->prev->next = op->next;
    op->next->prev = op->prev;
    d->nlive--;
    if (!op->posted)
        d->npending--;
    free(op);
}

static hp_status_t dl_isend(hp_transport_t *tp, const void *buf, size_t len, size_t cap, int peer, hp_req_t *req)
{
    dl_t *d = dl_of(tp);
    dl_op_t *op;
    if (peer < 0 || peer >= tp->size || (op = dl_hold(d, DL_SEND, peer, req)) == NULL)
        return HP_ERR_INVALID;
    op->sbuf = buf;
    op->len = len;
    op->cap = cap;
    tp->bytes_sent += len;
    return HP_OK;
}

static hp_status_t dl_irecv(hp_transport_t *tp, void *buf, size_t cap, int peer, int flags, hp_req_t *req)
{
    dl_t *d = dl_of(tp);
    dl_op_t *op;
    if (peer < 0 || peer >= tp->size || (op = dl_hold(d, DL_RECV, peer, req)) == NULL)
        return HP_ERR_INVALID;
    op->rbuf = buf;
    op->cap = cap;
    op->flags = flags;
    /* the buffer is the transport's until the wait: garbage, not old data */
    memset(buf, 0xa5, cap);
    return HP_OK;
}

static hp_status_t dl_wait(hp_transport_t *tp, hp_req_t *req)
{
    dl_t *d = dl_of(tp);
    dl_op_t *op = (dl_op_t *)req->impl.ptr[0];
    hp_status_t st;
    double t0 = hp_now();

    /* everything held goes now: a rank about to block must not sit on a
     * send its peer needs (the peer may be waiting for it) */
    dl_flush(d);
    if ((dl_rand(d) & 7) == 0)
        usleep((useconds_t)(dl_rand(d) % 200));
    st = op->post_st != HP_OK ? op->post_st : hp_tp_wait(d->inner, &op->inner);
    dl_unlink(d, op);
    tp->t_wait += hp_now() - t0;
    return st;
}

static void dl_progress(hp_transport_t *tp)
{
    dl_t *d = dl_of(tp);
    uint64_t r = dl_rand(d);
    /* half the time nothing; else one to three held operations */
    if (r & 1)
        for (uint64_t k = 1 + (r >> 1) % 3; k > 0 && d->npending > 0; k--)
            dl_post_one(d);
    hp_tp_progress(d->inner);
}

static hp_status_t dl_agree(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n, const char *what)
{
    dl_t *d = dl_of(tp);
    dl_flush(d);     /* as for a wait: a blocking collective follows */
    return hp_tp_agree(d->inner, type, values, n, what);
}

static hp_status_t dl_iagree(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n, const char *what,
                            hp_req_t *req)
{
    /* held-back operations go first, then the inner transport's agreement,
     * completed at once after a random delay: its wait is then a no-op */
    dl_t *d = dl_of(tp);
    hp_req_t in = HP_REQ_NULL;
    hp_status_t st;
    dl_flush(d);
    st = hp_tp_iagree(d->inner, type, values, n, what, &in);
    if ((dl_rand(d) & 3) == 0)
        usleep((useconds_t)(dl_rand(d) % 200));
    if (st == HP_OK)
        st = hp_tp_wait(d->inner, &in);
    req->active = 0;
    return st;
}

static hp_status_t dl_group_begin(hp_transport_t *tp)
{
    return hp_tp_group_begin(dl_of(tp)->inner);
}

static hp_status_t dl_group_end(hp_transport_t *tp)
{
    return hp_tp_group_end(dl_of(tp)->inner);
}

static void dl_fini(hp_transport_t *tp)
{
    dl_t *d = dl_of(tp);
    if (d == NULL)
        return;
    while (d->live.next != &d->live) {
        dl_op_t *op = d->live.next;
        if (op->posted)
            hp_tp_wait(d->inner, &op->inner);
        dl_unlink(d, op);
    }
    free(d->seen);
    free(d->cand);
    free(d);
    tp->impl.ptr[0] = NULL;
}

static void dl_report(void)
{
    unsigned long long held = atomic_load(&dl_held);
    if (held == 0)
        return;
    fprintf(stderr, "hp_tp_delay: %llu transports, %llu sends and receives held back, %llu posted out of "
            "their issue order, %llu against the matching rule\n", (unsigned long long)atomic_load(&dl_instances),
            held, (unsigned long long)atomic_load(&dl_reordered), (unsigned long long)atomic_load(&dl_broken));
}

const hp_tp_ops_t hp_tp_delay_ops = {
    .name = "delay",
    .isend = dl_isend,
    .irecv = dl_irecv,
    .wait = dl_wait,
    .progress = dl_progress,
    .agree = dl_agree,
    .iagree = dl_iagree,
    .group_begin = dl_group_begin,
    .group_end = dl_group_end,
    .fini = dl_fini,
};

hp_status_t hp_tp_delay_wrap(hp_transport_t *tp, hp_transport_t *inner);
hp_status_t hp_tp_delay_wrap(hp_transport_t *tp, hp_transport_t *inner)
{
    static _Atomic int reported;
    const char *seed = getenv("HP_TEST_DELAY_SEED"), *brk = getenv("HP_TEST_DELAY_BREAK");
    unsigned long long no = atomic_fetch_add(&dl_instances, 1);
    dl_t *d = calloc(1, sizeof(*d));

    if (d == NULL || (d->seen = calloc(2, (size_t)(inner->size > 0 ? inner->size : 1))) == NULL) {
        free(d);
        return HP_ERR_NOMEM;
    }
    d->inner = inner;
    d->rng = (seed != NULL ? strtoull(seed, NULL, 0) : 1) * 0x100000001b3ULL ^ ((uint64_t)inner->rank << 32) ^ no;
    d->brk = brk != NULL && strcmp(brk, "1") == 0;
    d->live.next = d->live.prev = &d->live;
    memset(tp, 0, sizeof(*tp));
    tp->ops = &hp_tp_delay_ops;
    tp->rank = inner->rank;
    tp->size = inner->size;
    tp->impl.ptr[0] = d;
    if (atomic_exchange(&reported, 1) == 0)
        atexit(dl_report);
    return HP_OK;
}
