/*
 * Binomial tree rooted at rank 0.  Reduction: every rank adds its children's
 * decoded messages to its own data in a fixed order (lowest bit first),
 * encodes the merged subtree once and sends it to its parent; the root encodes
 * the final value once and decodes its own message.  Broadcast: the root's
 * message is forwarded down the same tree and everyone decodes those bytes.
 * 2 ceil(log2 N) steps: for small buffers and many ranks.  (Recursive
 * doubling is not used: it would leave ranks with different bits.)
 */
#include "hp_algo.h"

hp_status_t hp_algo_tree_run(hp_call_t *call)
{
    hp_transport_t *tp = call->tp;
    const int N = tp->size, r = tp->rank;
    const int phased = (tp->ops->flags & HP_TP_PHASED) != 0;
    const size_t P = hp_call_parts(call, call->n);
    const size_t G = call->grain ? call->grain : 1;
    size_t cap = hp_call_msg_cap(call, hp_span_len(call->n, P, 0, G));
    int children[32], nchild = 0, parent = -1, subtree = 1;
    hp_slot_t *slots, *rc, *up, *down;
    hp_status_t st = HP_OK;

    if (N < 2)
        return HP_ERR_INVALID;
    for (int mask = 1; mask < N; mask <<= 1) {
        if (r & mask) {
            parent = r - mask;
            break;
        }
        if (r + mask < N) {
            children[nchild++] = r + mask;
            subtree += HP_MIN(mask, N - (r + mask));
        }
    }
    /* rc[c][p]: from child c; up[p]: to parent; down[p]: the final message */
    slots = hp_call_slots(call, ((size_t)nchild + 2) * P, &cap, 0, NULL);
    if (slots == NULL)
        return HP_ERR_NOMEM;
    rc = slots;
    up = rc + (size_t)nchild * P;
    down = up + P;

#define PART_OFF(p) hp_span_off(call->n, P, (p), G)
#define PART_LEN(p) hp_span_len(call->n, P, (p), G)
    for (int c = 0; c < nchild; c++)
        for (size_t p = 0; p < P; p++)
            HP_CHECK_KEEP(hp_tp_irecv(tp, rc[c * P + p].buf, cap, children[c], &rc[c * P + p].req), st);
    /* the root's message from the parent (on a phased transport once this
     * rank's reduction is posted: HP_TP_PHASED) */
    for (size_t p = 0; !phased && parent >= 0 && p < P; p++)
        HP_CHECK_KEEP(hp_tp_irecv(tp, down[p].buf, cap, parent, &down[p].req), st);

    /* reduction */
    for (size_t p = 0; p < P; p++) {
        size_t off = PART_OFF(p), len = PART_LEN(p);
        if (nchild > 0)
            hp_call_merge_begin(call, off, len);
        for (int c = 0; c < nchild; c++) {
            size_t got = 0;
            hp_slot_t *in = &rc[c * P + p];
            if (HP_CHECK_OK(hp_tp_wait(tp, &in->req), st))
                got = hp_call_msg_len(call, in->buf, cap);
            hp_call_decode(call, in->buf, got, off, len, 1);
        }
        if (parent >= 0) {
            up[p].len = hp_call_encode(call, off, len, 0, subtree, up[p].buf, cap);
            HP_CHECK_KEEP(hp_tp_isend(tp, up[p].buf, up[p].len, cap, parent, &up[p].req), st);
        } else {
            down[p].len = hp_call_encode(call, off, len, 1, N, down[p].buf, cap);
            hp_call_decode(call, down[p].buf, down[p].len, off, len, 0);
            if (call->err != HP_OK)
                down[p].len = hp_call_msg_error(call, down[p].buf, len);
            /* the receive slots of the children are free now: reuse their
             * requests for the broadcast sends */
            for (int c = nchild - 1; c >= 0; c--)
                HP_CHECK_KEEP(hp_tp_isend(tp, down[p].buf, down[p].len, cap, children[c], &rc[c * P + p].req), st);
        }
        hp_tp_progress(tp);
    }
    for (size_t p = 0; phased && parent >= 0 && p < P; p++)
        HP_CHECK_KEEP(hp_tp_irecv(tp, down[p].buf, cap, parent, &down[p].req), st);
    /* broadcast: decode the root's message and forward the same bytes */
    if (parent >= 0) {
        for (size_t p = 0; p < P; p++) {
            size_t got = 0;
            if (HP_CHECK_OK(hp_tp_wait(tp, &down[p].req), st))
                got = hp_call_msg_len(call, down[p].buf, cap);
            down[p].len = got;
            hp_call_decode(call, down[p].buf, got, PART_OFF(p), PART_LEN(p), 0);
            if (call->err != HP_OK)
                down[p].len = hp_call_msg_error(call, down[p].buf, PART_LEN(p));
            for (int c = nchild - 1; c >= 0; c--)
                HP_CHECK_KEEP(hp_tp_isend(tp, down[p].buf, down[p].len, cap, children[c], &rc[c * P + p].req), st);
        }
    }
    HP_CHECK_KEEP(hp_slots_wait(call, slots, ((size_t)nchild + 1) * P), st);
#undef PART_OFF
#undef PART_LEN
    return st != HP_OK ? st : call->err;
}

/* A leaf, each internal node re-encoding its subtree, the root. */
int hp_algo_tree_stages(int N, int *sum_stages)
{
    *sum_stages = 0;   /* every re-encode in the worker's codec */
    return N < 2 ? 0 : hp_ceil_log2(N) + 1;
}

/* The root receives from ceil(log2 N) children and sends to as many. */
void hp_algo_tree_volume(const hp_codecs_t *c, size_t n, int N, hp_algo_volume_t *v)
{
    double S = 4.0 * (double)n;
    int L = hp_ceil_log2(N);
    v->wire = (double)L * ((double)hp_msg_wire_bytes(c->kind, n, HP_MAX(N / 2, 1), c->p) +
                           (double)hp_msg_wire_bytes(c->kind, n, N, c->p));
    v->enc = 2 * S;
    v->dec = (L + 1) * S;
    v->msgs = 2.0 * L;
}
