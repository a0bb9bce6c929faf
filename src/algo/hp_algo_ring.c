/*
 * Compressed ring: reduce-scatter in N-1 steps (receive, decode, merge with the
 * local chunk, re-encode, send), then the owner of each chunk encodes the final
 * chunk once and that message is forwarded N-1 steps around the ring; every
 * rank, the owner included, decodes the same bytes.
 *
 * Each chunk is cut into P partitions that flow independently: partition p of
 * step s+1 is sent as soon as partition p of step s is merged, so encoding,
 * transfer and decoding of different partitions overlap.  Two buffer sets
 * (step parity) for receives and two for sends.
 */
#include "hp_algo.h"
#include <string.h>

static size_t mod(long long a, long long n)
{
    return (size_t)(((a % n) + n) % n);
}

hp_status_t hp_algo_ring_run(hp_call_t *call)
{
    hp_transport_t *tp = call->tp;
    const int N = tp->size, r = tp->rank;
    const int left = (r - 1 + N) % N, right = (r + 1) % N;
    const size_t G = call->grain ? call->grain : 1;
    const size_t maxchunk = hp_span_len(call->n, (size_t)N, 0, G);
    size_t P, cap;
    hp_slot_t *slots, *rs[2], *ss[2];
    const int steps = 2 * (N - 1);
    hp_status_t st = HP_OK;

    if (N < 2)
        return HP_ERR_INVALID;
    P = hp_call_parts(call, maxchunk);
    cap = hp_call_msg_cap(call, hp_span_len(maxchunk, P, 0, G));
    slots = hp_call_slots(call, 4 * P, &cap, 0, NULL);
    if (slots == NULL)
        return HP_ERR_NOMEM;
    for (int k = 0; k < 2; k++) {
        rs[k] = slots + (size_t)k * P;
        ss[k] = slots + (size_t)(2 + k) * P;
    }

    /* chunk and partition geometry */
#define CH_OFF(c) hp_span_off(call->n, (size_t)N, (c), G)
#define CH_LEN(c) hp_span_len(call->n, (size_t)N, (c), G)
#define PART_OFF(c, p) (CH_OFF(c) + hp_span_off(CH_LEN(c), P, (p), G))
#define PART_LEN(c, p) hp_span_len(CH_LEN(c), P, (p), G)

    /* step 0: post receives, encode and send our own chunk */
    for (size_t p = 0; p < P; p++)
        HP_CHECK_KEEP(hp_tp_irecv(tp, rs[0][p].buf, cap, left, &rs[0][p].req), st);
    for (size_t p = 0; p < P; p++) {
        size_t c = (size_t)r;
        hp_slot_t *sl = &ss[0][p];
        sl->len = hp_call_encode(call, PART_OFF(c, p), PART_LEN(c, p), 0, 1, sl->buf, cap);
        HP_CHECK_KEEP(hp_tp_isend(tp, sl->buf, sl->len, cap, right, &sl->req), st);
        hp_tp_progress(tp);
    }

    for (int s = 0; s < steps; s++) {
        const int cur = s & 1, nxt = (s + 1) & 1;
        const int last = (s == steps - 1);
        /* chunk received at step s */
        const size_t c = s < N - 1 ? mod((long long)r - s - 1, N) : mod((long long)r - (s - (N - 1)), N);
        for (size_t p = 0; p < P; p++) {
            hp_slot_t *in = &rs[cur][p], *out = &ss[nxt][p];
            size_t off = PART_OFF(c, p), len = PART_LEN(c, p), got = 0;

            if (s <= N - 2)
                hp_call_merge_begin(call, off, len);
            if (HP_CHECK_OK(hp_tp_wait(tp, &in->req), st))
                got = hp_call_msg_len(call, in->buf, cap);
            /* this slot's previous send (step s-1) must be done before reuse */
            if (!last)
                HP_CHECK_KEEP(hp_tp_wait(tp, &out->req), st);
            if (s < N - 2) {
                /* reduce-scatter: merge and re-encode for the next hop */
                hp_call_decode(call, in->buf, got, off, len, 1);
                out->len = hp_call_encode(call, off, len, s + 1, s + 2, out->buf, cap);
            } else if (s == N - 2) {
                /* chunk c is complete here: encode it once, decode our own message */
                hp_call_decode(call, in->buf, got, off, len, 1);
                out->len = hp_call_encode(call, off, len, s + 1, N, out->buf, cap);
                hp_call_decode(call, out->buf, out->len, off, len, 0);
            } else {
                /* allgather: decode the owner's message and forward the same bytes */
                hp_call_decode(call, in->buf, got, off, len, 0);
                if (!last) {
                    void *t = out->buf;
                    out->buf = in->buf;
                    in->buf = t;
                    out->len = got;
                }
            }
            if (!last) {
                /* a failed rank keeps the protocol going with error messages */
                if (call->err != HP_OK)
                    out->len = hp_call_msg_error(call, out->buf, len);
                HP_CHECK_KEEP(hp_tp_isend(tp, out->buf, out->len, cap, right, &out->req), st);
                if (s + 1 < steps)
                    HP_CHECK_KEEP(hp_tp_irecv(tp, rs[nxt][p].buf, cap, left, &rs[nxt][p].req), st);
            }
            hp_tp_progress(tp);
        }
    }
    HP_CHECK_KEEP(hp_slots_wait(call, ss[0], 2 * P), st);
#undef CH_OFF
#undef CH_LEN
#undef PART_OFF
#undef PART_LEN
    if (st == HP_OK)
        st = call->err;
    return st;
}

/* Every rank's element goes through its chunk's first rank, N - 2 relays
 * and the owner: N encodes. */
int hp_algo_ring_stages(int N, int *sum_stages)
{
    *sum_stages = 0;   /* relays pass partial sums on in the worker's codec */
    return N < 2 ? 0 : N;
}

/* N - 1 hops of the reduce-scatter, each message aggregating one more
 * rank's data (partial sums re-encoded with the worker's codec), then N - 1
 * forwards of the owner's message. */
void hp_algo_ring_volume(const hp_codecs_t *c, size_t n, int N, hp_algo_volume_t *v)
{
    double S = 4.0 * (double)n;
    size_t chunk = (n + (size_t)N - 1) / (size_t)N;
    v->wire = (double)hp_msg_wire_bytes(c->kind, chunk, 1, c->p);
    for (int s = 1; s < N - 1; s++)
        v->wire += (double)hp_msg_wire_bytes(c->kind, chunk, s + 1, c->p);
    v->wire += (double)(N - 1) * (double)hp_msg_wire_bytes(c->kind, chunk, N, c->p);
    v->enc = S;
    v->dec = S * (2.0 * N - 1) / N;
    v->msgs = 2.0 * (N - 1);
}

/* The exact ring sum a collective compressor's runs exchange factors with
 * (hp_algo.h): the ring above on a sub-call of the `none` codec. */
hp_status_t hp_call_ring_sum(hp_call_t *call, float *v, size_t len, int host, int corrupt, hp_status_t err)
{
    hp_call_t sub = *call;
    hp_status_t st;
    if (host)   /* v in host memory whatever the call's buffer is */
        sub.mem = NULL;
    sub.buf = v;
    sub.n = len;
    sub.kind = sub.sum_kind = hp_kind_none;
    sub.rb = NULL;
    sub.resid = sub.mom = sub.state = NULL;
    sub.grain = 1;
    sub.corrupt = corrupt;
    sub.t_encode = sub.t_decode = 0;
    sub.nonfinite = 0;
    sub.err = err;
    st = hp_algo_ring_run(&sub);
    call->t_encode += sub.t_encode;
    call->t_decode += sub.t_decode;
    return st;
}

hp_status_t hp_call_ring_sum_agreed(hp_call_t *call, float *v, size_t len, int host, int corrupt,
                                    hp_status_t err)
{
    hp_status_t st = hp_call_ring_sum(call, v, len, host, corrupt, err);
    int failed = st != HP_OK;
    if (hp_tp_agree_flag(call->tp, &failed) != HP_OK)
        failed = 1;
    return st != HP_OK ? st : failed ? HP_ERR_PEER : HP_OK;
}
