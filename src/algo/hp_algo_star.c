/*
 * Star, a test algorithm (its row in hp_algos.def exists only under
 * HP_TEST_TABLES, in the test library of tests/mpi/tables.mk): rank 0 owns the
 * whole buffer.  Every other rank encodes its data and sends it to rank 0;
 * rank 0 sums, in rank order, its own exact data and the N-1 decoded
 * messages, encodes the sum once, decodes its own message and sends it to
 * every peer, who decode it.  Two lossy stages, like ps with one owner, the
 * second in the sum codec (hp_call_encode_sum).
 * It is written against the algorithm table, the transport table and the
 * call's helpers only, and runs the suite's algorithm cases
 * (tests/mpi/run_tables.sh): what it needs that the tables do not give would
 * show there.  Its root's wire bytes grow with N: not for real use.
 */
#include "hp_algo.h"

hp_status_t hp_algo_star_run(hp_call_t *call)
{
    hp_transport_t *tp = call->tp;
    const size_t N = (size_t)tp->size, r = (size_t)tp->rank;
    const size_t G = call->grain ? call->grain : 1;
    const size_t P = hp_call_parts(call, call->n);
    const size_t maxpart = hp_span_len(call->n, P, 0, G);
    size_t cap1 = hp_call_msg_cap(call, maxpart), cap2 = hp_call_sum_cap(call, maxpart);
    size_t cap = HP_MAX(cap1, cap2);
    /* root: (N-1)P receives, P sums, (N-1)P send requests; others: P each way */
    const size_t nslots = r == 0 ? (2 * N - 1) * P : 2 * P;
    hp_slot_t *slots;
    float *acc = NULL;
    void *extra = NULL;
    hp_status_t st = HP_OK;

    if (N < 2)
        return HP_ERR_INVALID;
    slots = hp_call_slots(call, nslots, &cap, r == 0 ? hp_call_work_bytes(call, maxpart) : 0, &extra);
    if (slots == NULL)
        return HP_ERR_NOMEM;
    if (cap < HP_MAX(cap1, cap2))
        cap1 = cap2 = cap;   /* shrunk to error messages (out of memory) */

#define PART_OFF(p) hp_span_off(call->n, P, (p), G)
#define PART_LEN(p) hp_span_len(call->n, P, (p), G)
    if (r != 0) {
        hp_slot_t *out = slots, *in = slots + P;
        for (size_t p = 0; p < P; p++)
            HP_CHECK_KEEP(hp_tp_irecv(tp, in[p].buf, cap2, 0, &in[p].req), st);
        for (size_t p = 0; p < P; p++) {
            out[p].len = hp_call_encode(call, PART_OFF(p), PART_LEN(p), 0, 1, out[p].buf, cap1);
            HP_CHECK_KEEP(hp_tp_isend(tp, out[p].buf, out[p].len, cap1, 0, &out[p].req), st);
            hp_tp_progress(tp);
        }
        for (size_t p = 0; p < P; p++) {
            size_t got = 0;
            if (HP_CHECK_OK(hp_tp_wait(tp, &in[p].req), st))
                got = hp_call_msg_len(call, in[p].buf, cap2);
            hp_call_decode_sum(call, in[p].buf, got, PART_OFF(p), PART_LEN(p), 0);
        }
        HP_CHECK_KEEP(hp_slots_wait(call, out, P), st);
    } else {
        /* rin[j-1][p]: rank j's message; sum[p]: the sum's message; sreq[j-1][p] */
        hp_slot_t *rin = slots, *sum = slots + (N - 1) * P, *sreq = sum + P;
        acc = call->err == HP_OK ? hp_call_work(call, extra, maxpart) : NULL;
        for (size_t j = 1; j < N; j++)
            for (size_t p = 0; p < P; p++)
                HP_CHECK_KEEP(hp_tp_irecv(tp, rin[(j - 1) * P + p].buf, cap1, (int)j, &rin[(j - 1) * P + p].req), st);
        for (size_t p = 0; p < P; p++) {
            size_t off = PART_OFF(p), len = PART_LEN(p);
            float *own = call->buf + off;
            hp_call_merge_begin(call, off, len);
            if (acc != NULL)
                hp_call_copy(call, acc, own, len);
            for (size_t j = 1; j < N; j++) {
                hp_slot_t *in = &rin[(j - 1) * P + p];
                size_t got = 0;
                if (HP_CHECK_OK(hp_tp_wait(tp, &in->req), st))
                    got = hp_call_msg_len(call, in->buf, cap1);
                if (acc != NULL)
                    hp_call_decode_to(call, in->buf, got, acc, len, 1);
            }
            if (acc != NULL)
                hp_call_copy(call, own, acc, len);
            sum[p].len = hp_call_encode_sum(call, off, len, 1, (int)N, sum[p].buf, cap2);
            hp_call_decode_sum(call, sum[p].buf, sum[p].len, off, len, 0);
            if (call->err != HP_OK)
                sum[p].len = hp_call_msg_error(call, sum[p].buf, len);
            for (size_t j = 1; j < N; j++)
                HP_CHECK_KEEP(hp_tp_isend(tp, sum[p].buf, sum[p].len, cap2, (int)j, &sreq[(j - 1) * P + p].req), st);
            hp_tp_progress(tp);
        }
        HP_CHECK_KEEP(hp_slots_wait(call, sreq, (N - 1) * P), st);
    }
#undef PART_OFF
#undef PART_LEN
    return st != HP_OK ? st : call->err;
}

/* A worker's encode, then the root's of the sum (in the sum codec). */
int hp_algo_star_stages(int N, int *sum_stages)
{
    *sum_stages = N < 2 ? 0 : 1;
    return N < 2 ? 0 : 2;
}

/* The root, the busiest rank: N - 1 copies of the sum's message out, N - 1
 * messages in. */
void hp_algo_star_volume(const hp_codecs_t *c, size_t n, int N, hp_algo_volume_t *v)
{
    double S = 4.0 * (double)n;
    v->wire = (double)(N - 1) * (double)hp_msg_wire_bytes(c->sum_kind, n, N, c->sum_p);   /* the sum's */
    v->enc = S;
    v->dec = (double)N * S;
    v->msgs = 2.0 * (N - 1);
}
