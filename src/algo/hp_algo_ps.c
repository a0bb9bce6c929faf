/*
 * Two-phase (CaSync's co-located parameter server).  Rank j owns shard j.
 * Phase 1: every rank encodes the N-1 shards its peers own and sends each to
 * its owner (its own shard stays exact).  Phase 2: the owner sums, in rank
 * order, the N-1 decoded shards and its own exact shard, encodes the sum once,
 * decodes its own message and sends it to every peer.  Phase 3: everyone
 * decodes the owners' messages.  One re-encode only, so sparse compressors
 * keep their density and lossy ones round twice at most.  The owner's
 * encode is in the call's sum codec (HIPRESS_SUM_CODEC: q4 for onebit, a
 * codec made for many-valued sums), with the owner's residual; each phase's
 * messages are posted with that phase's capacity.
 * Shards are cut into partitions that flow independently.
 */
#include "hp_algo.h"
#include <string.h>

hp_status_t hp_algo_ps_run(hp_call_t *call)
{
    hp_transport_t *tp = call->tp;
    const size_t N = (size_t)tp->size, r = (size_t)tp->rank;
    const int phased = (tp->ops->flags & HP_TP_PHASED) != 0;
    const size_t G = call->grain ? call->grain : 1;
    const size_t maxshard = hp_span_len(call->n, N, 0, G);
    const size_t P = hp_call_parts(call, maxshard);
    const size_t maxpart = hp_span_len(maxshard, P, 0, G);
    /* one slot size, each phase posted with its own codec's capacity */
    size_t cap1 = hp_call_msg_cap(call, maxpart), cap2 = hp_call_sum_cap(call, maxpart);
    size_t cap = HP_MAX(cap1, cap2);
    hp_slot_t *slots, *s1, *r1, *s2, *r3;
    float *acc;
    void *extra;
    hp_status_t st = HP_OK;

    if (N < 2)
        return HP_ERR_INVALID;
    /* s1[c][p]: to owner c; r1[j][p]: from j, my shard; s2[p]: my sum;
     * r3[j][p]: owner j's sum; acc: the sum, in the buffer's memory */
    slots = hp_call_slots(call, (3 * N + 1) * P, &cap, hp_call_work_bytes(call, maxpart), &extra);
    if (slots == NULL)
        return HP_ERR_NOMEM;
    acc = call->err == HP_OK ? hp_call_work(call, extra, maxpart) : NULL;
    if (cap < HP_MAX(cap1, cap2))
        cap1 = cap2 = cap;   /* shrunk to error messages (out of memory): every phase alike */
    s1 = slots;
    r1 = s1 + N * P;
    r3 = r1 + N * P;
    s2 = r3 + N * P;

#define SH_OFF(c) hp_span_off(call->n, N, (c), G)
#define SH_LEN(c) hp_span_len(call->n, N, (c), G)
#define PART_OFF(c, p) (SH_OFF(c) + hp_span_off(SH_LEN(c), P, (p), G))
#define PART_LEN(c, p) hp_span_len(SH_LEN(c), P, (p), G)

    /* receives in the order each peer sends: phase 1 parts, then phase 3
     * parts (on a phased transport, phase 3's once phase 2 has posted its
     * sends: HP_TP_PHASED) */
    for (size_t k = 1; k < N; k++) {
        size_t j = (r + N - k) % N;
        for (size_t p = 0; p < P; p++)
            HP_CHECK_KEEP(hp_tp_irecv(tp, r1[j * P + p].buf, cap1, (int)j, &r1[j * P + p].req), st);
        for (size_t p = 0; !phased && p < P; p++)
            HP_CHECK_KEEP(hp_tp_irecv(tp, r3[j * P + p].buf, cap2, (int)j, &r3[j * P + p].req), st);
    }
    /* phase 1: staggered destinations so no owner is hit by everyone at once */
    for (size_t p = 0; p < P; p++) {
        for (size_t k = 1; k < N; k++) {
            size_t c = (r + k) % N;
            hp_slot_t *sl = &s1[c * P + p];
            sl->len = hp_call_encode(call, PART_OFF(c, p), PART_LEN(c, p), 0, 1, sl->buf, cap1);
            HP_CHECK_KEEP(hp_tp_isend(tp, sl->buf, sl->len, cap1, (int)c, &sl->req), st);
            hp_tp_progress(tp);
        }
    }
    /* phase 2: sum my shard in rank order, encode once, decode my own message */
    for (size_t p = 0; p < P; p++) {
        size_t off = PART_OFF(r, p), len = PART_LEN(r, p);
        float *own = call->buf + off;
        hp_call_merge_begin(call, off, len);
        for (size_t j = 0; j < N; j++) {
            if (j == r) {
                if (acc == NULL)
                    continue;   /* out of memory: only keep the protocol going */
                if (j == 0)
                    hp_call_copy(call, acc, own, len);
                else
                    hp_call_add(call, acc, own, len);
            } else {
                size_t got = 0;
                hp_slot_t *in = &r1[j * P + p];
                if (HP_CHECK_OK(hp_tp_wait(tp, &in->req), st))
                    got = hp_call_msg_len(call, in->buf, cap1);
                hp_call_decode_to(call, in->buf, got, acc, len, j != 0);
            }
        }
        if (acc != NULL)
            hp_call_copy(call, own, acc, len);
        s2[p].len = hp_call_encode_sum(call, off, len, 1, (int)N, s2[p].buf, cap2);
        hp_call_decode_sum(call, s2[p].buf, s2[p].len, off, len, 0);
        if (call->err != HP_OK)
            s2[p].len = hp_call_msg_error(call, s2[p].buf, len);
        /* one message, N-1 sends of the same bytes */
        for (size_t k = 1; k < N; k++) {
            size_t c = (r + k) % N;
            hp_req_t *rq = &s1[c * P + p].req;   /* reuse: wait the phase-1 send first */
            HP_CHECK_KEEP(hp_tp_wait(tp, rq), st);
            HP_CHECK_KEEP(hp_tp_isend(tp, s2[p].buf, s2[p].len, cap2, (int)c, rq), st);
        }
        hp_tp_progress(tp);
    }
    for (size_t k = 1; phased && k < N; k++) {
        size_t j = (r + N - k) % N;
        for (size_t p = 0; p < P; p++)
            HP_CHECK_KEEP(hp_tp_irecv(tp, r3[j * P + p].buf, cap2, (int)j, &r3[j * P + p].req), st);
    }
    /* phase 3: decode the owners' messages */
    for (size_t p = 0; p < P; p++) {
        for (size_t k = 1; k < N; k++) {
            size_t j = (r + N - k) % N, got = 0;
            hp_slot_t *in = &r3[j * P + p];
            if (HP_CHECK_OK(hp_tp_wait(tp, &in->req), st))
                got = hp_call_msg_len(call, in->buf, cap2);
            hp_call_decode_sum(call, in->buf, got, PART_OFF(j, p), PART_LEN(j, p), 0);
        }
    }
    HP_CHECK_KEEP(hp_slots_wait(call, s1, N * P), st);
#undef SH_OFF
#undef SH_LEN
#undef PART_OFF
#undef PART_LEN
    return st != HP_OK ? st : call->err;
}

/* The worker's encode of a peer's shard, then the owner's of the sum (in
 * the sum codec). */
int hp_algo_ps_stages(int N, int *sum_stages)
{
    *sum_stages = N < 2 ? 0 : 1;
    return N < 2 ? 0 : 2;
}

/* N - 1 shards out with the worker's codec, N - 1 aggregates back with the
 * sum codec. */
void hp_algo_ps_volume(const hp_codecs_t *c, size_t n, int N, hp_algo_volume_t *v)
{
    double S = 4.0 * (double)n;
    size_t chunk = (n + (size_t)N - 1) / (size_t)N;
    v->wire = (double)(N - 1) * ((double)hp_msg_wire_bytes(c->kind, chunk, 1, c->p) +
                                 (double)hp_msg_wire_bytes(c->sum_kind, chunk, N, c->sum_p));
    v->enc = S;
    v->dec = S * (2.0 * N - 1) / N;
    v->msgs = 2.0 * (N - 1);
}
