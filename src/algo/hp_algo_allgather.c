/*
 * Allgather: every rank encodes its data once and every rank decodes all N
 * messages (its own included) in rank order.  No re-encode, so the error is
 * one rounding per rank; N times the memory of one encoding.  For very sparse
 * or tiny encodings and few ranks.
 *
 * The messages travel around the ring: at step k each rank receives rank
 * r-k's message from its left and forwards the same bytes to its right, so
 * every link carries one stream each way, as the ring's do (sending to every
 * peer at once reached two thirds of a rate-limited link, doc/algorithms.md).
 * The bytes and messages a rank sends are those of sending to every peer:
 * N - 1 messages of one encoding.  On a transport that issues each phase as
 * one group (HP_TP_PHASED) a forward would cost a phase per step, so there
 * each rank sends its message to every peer at once: one phase.
 */
#include "hp_algo.h"

hp_status_t hp_algo_allgather_run(hp_call_t *call)
{
    hp_transport_t *tp = call->tp;
    const size_t N = (size_t)tp->size, r = (size_t)tp->rank;
    const int left = (int)((r + N - 1) % N), right = (int)((r + 1) % N);
    const int phased = (tp->ops->flags & HP_TP_PHASED) != 0;
    const size_t P = hp_call_parts(call, call->n);
    const size_t G = call->grain ? call->grain : 1;
    /* every message is one rank's own data: the bound of one contribution */
    size_t cap = hp_msg_cap(call->kind, hp_span_len(call->n, P, 0, G), 1, call->params);
    hp_slot_t *slots, *msg, *sreq;
    hp_status_t st = HP_OK;

    if (N < 2)
        return HP_ERR_INVALID;
    /* msg[j][p]: rank j's message (mine at j = r); sreq[j][p]: its send to
     * the right, or (phased) sreq[c][p]: mine to rank c */
    slots = hp_call_slots(call, 2 * N * P, &cap, 0, NULL);
    if (slots == NULL)
        return HP_ERR_NOMEM;
    msg = slots;
    sreq = slots + N * P;

#define PART_OFF(p) hp_span_off(call->n, P, (p), G)
#define PART_LEN(p) hp_span_len(call->n, P, (p), G)
    /* Step k brings rank r-k's message from the left, in the order the left
     * neighbour sends them: its own, then what it forwards (phased: from
     * rank r-k itself). */
    for (size_t k = 1; k < N; k++) {
        size_t j = (r + N - k) % N;
        for (size_t p = 0; p < P; p++)
            HP_CHECK_KEEP(hp_tp_irecv(tp, msg[j * P + p].buf, cap, phased ? (int)j : left, &msg[j * P + p].req),
                          st);
    }
    for (size_t p = 0; p < P; p++) {
        hp_slot_t *mine = &msg[r * P + p];
        mine->len = hp_call_encode(call, PART_OFF(p), PART_LEN(p), 0, 1, mine->buf, cap);
        for (size_t k = 1; k < (phased ? N : 2); k++) {
            size_t c = phased ? (r + k) % N : r;
            HP_CHECK_KEEP(hp_tp_isend(tp, mine->buf, mine->len, cap, phased ? (int)c : right, &sreq[c * P + p].req),
                          st);
        }
        hp_tp_progress(tp);
    }
    for (size_t k = 1; k < N; k++) {
        size_t j = (r + N - k) % N;
        for (size_t p = 0; p < P; p++) {
            hp_slot_t *in = &msg[j * P + p];
            in->len = HP_CHECK_OK(hp_tp_wait(tp, &in->req), st) ? hp_call_msg_len(call, in->buf, cap) : 0;
            if (k < N - 1 && !phased) {
                /* the same bytes on to the right; a failed rank keeps the
                 * protocol going with error messages */
                if (call->err != HP_OK)
                    in->len = hp_call_msg_error(call, in->buf, PART_LEN(p));
                HP_CHECK_KEEP(hp_tp_isend(tp, in->buf, in->len, cap, right, &sreq[j * P + p].req), st);
            } else if (k == N - 1) {
                /* partition p has all N messages: decode them in rank order */
                void *bufs[HP_DECODE_MANY_MAX];
                size_t lens[HP_DECODE_MANY_MAX];
                for (size_t i = 0; i < N; i++) {
                    hp_slot_t *m = &msg[i * P + p];
                    if (N <= HP_DECODE_MANY_MAX) {
                        bufs[i] = m->buf;
                        lens[i] = m->len;
                    } else {
                        hp_call_decode(call, m->buf, m->len, PART_OFF(p), PART_LEN(p), i != 0);
                    }
                }
                /* all N at once: block by block in cache */
                if (N <= HP_DECODE_MANY_MAX)
                    hp_call_decode_many(call, bufs, lens, (int)N, PART_OFF(p), PART_LEN(p), 0);
            }
            hp_tp_progress(tp);
        }
    }
    HP_CHECK_KEEP(hp_slots_wait(call, sreq, N * P), st);
#undef PART_OFF
#undef PART_LEN
    return st != HP_OK ? st : call->err;
}

/* Each rank encodes its own data once. */
int hp_algo_allgather_stages(int N, int *sum_stages)
{
    *sum_stages = 0;
    return N < 2 ? 0 : 1;
}

/* N - 1 copies of this rank's message (no sum is ever re-encoded). */
void hp_algo_allgather_volume(const hp_codecs_t *c, size_t n, int N, hp_algo_volume_t *v)
{
    double S = 4.0 * (double)n;
    v->wire = (double)(N - 1) * (double)hp_msg_wire_bytes(c->kind, n, 1, c->p);
    v->enc = S;
    v->dec = N * S;
    v->msgs = (double)(N - 1);
}
