/* The algorithms' shared helpers: encode/decode of one partition inside a
 * collective (error feedback, random keys, timing, the corruption test knob
 * and error messages), the buffer operations dispatched to the call's
 * backend (hp_backend.h; host memory when a call has none), message slots
 * and their waits. */
#include "hp_algo.h"
#include "hp_ops_sparse.h"
#include <signal.h>
#include <string.h>

/* A call without memory of its own (tests, powersgd's sums of host vectors)
 * is on the host. */
static hp_mem_t cpu_mem = {&hp_mem_cpu, NULL, {HP_MEM_HOST, -1, NULL}, HP_OK, NULL, NULL};

static hp_mem_t *mem_of(const hp_call_t *call)
{
    return call->mem != NULL ? call->mem : &cpu_mem;
}

/* ------------------------------------------------------------ dispatch */

void hp_call_fold(hp_call_t *call, size_t off, size_t len)
{
    hp_mem_t *m = mem_of(call);
    float *r = call->resid != NULL ? call->resid + off : NULL;
    if (r == NULL || len == 0)
        return;
    m->ops->fold(m, call->buf + off, r, len);
}

void hp_call_copy(hp_call_t *call, float *dst, const float *src, size_t n)
{
    hp_mem_t *m = mem_of(call);
    m->ops->copy(m, dst, src, n * sizeof(float));
}

void hp_call_add(hp_call_t *call, float *dst, const float *src, size_t n)
{
    hp_mem_t *m = mem_of(call);
    m->ops->add(m, dst, src, n);
}

size_t hp_call_work_bytes(const hp_call_t *call, size_t n)
{
    return mem_of(call)->ops->work_host_bytes(n);
}

float *hp_call_work(hp_call_t *call, void *host_extra, size_t n)
{
    hp_mem_t *m = mem_of(call);
    float *w;
    if (n == 0)
        return NULL;   /* nothing to hold (an empty shard) */
    w = m->ops->work(m, host_extra, n);
    if (w == NULL && call->err == HP_OK)
        call->err = HP_ERR_NOMEM;
    return w;
}

/* Encode with codec `kind` (the worker's or the sum codec). */
static size_t encode_as(hp_call_t *call, int kind, size_t off, size_t len, int hop, int contribs,
                        void *out, size_t cap)
{
    hp_mem_t *m = mem_of(call);
    hp_comp_t *c = hp_comp_get(kind);
    hipress_encode_args_t a;
    hipress_comp_params_t sp;
    size_t mlen = 0;
    int nonfinite = 0;
    hp_status_t st;
    double t0 = hp_now();

    if (call->err != HP_OK)
        return m->ops->msg_error(m, out, len);
    memset(&a, 0, sizeof(a));
    a.in = call->buf + off;
    a.n = len;
    a.params = call->params;
    a.rng_key[0] = call->seed;
    a.rng_key[1] = (uint64_t)call->tp->rank;
    a.rng_key[2] = call->call_no;
    a.rng_key[3] = (uint64_t)hop;
    a.rng_offset = call->base + off;   /* absolute: shards of one buffer draw apart */
    if (c->flags & HIPRESS_COMP_SPARSE) {
        /* an aggregate of `contribs` ranks keeps `contribs` times the density */
        sp = *call->params;
        sp.sparse_ratio = hp_sparse_density(contribs, call->params);
        a.params = &sp;
        if (8 * hp_sparse_k_blocks(len, &sp) >= 4 * len) {
            /* denser than half: plain floats are smaller than (index, value) */
            kind = hp_kind_none;
            c = hp_comp_get(kind);
            a.params = call->params;
        }
    }
    if (call->resid != NULL) {
        if (c->flags & HIPRESS_COMP_EF)
            a.residual = call->resid + off;
        else
            hp_call_fold(call, off, len);   /* what it owes travels with this message */
    }
    if (call->state != NULL && (c->flags & HIPRESS_COMP_MOMENTUM))
        a.state = call->state + off;
    {
        /* where a non-finite value would come from (hp_call_merge_begin) */
        hp_src_t src = contribs <= 1 ? HP_SRC_INPUT
                     : call->mg_state == 1 && call->mg_off == off && call->mg_len == len ? HP_SRC_SUM
                     : HP_SRC_BAD;
        size_t exc = 0;
        call->mg_state = 0;
        st = m->ops->encode(m, kind, &a, src, call->mom != NULL ? call->mom + off : NULL, out, cap, &mlen,
                            &nonfinite, &exc);
        call->excepts += exc;
        if (exc)
            HP_INFO("%zu values of a sum beyond float32's or the format's range sent exactly "
                    "(elements %zu..%zu)", exc, call->base + off, call->base + off + len - 1);
    }
    call->t_encode += hp_now() - t0;
    if (st != HP_OK) {
        call->err = st;
        return m->ops->msg_error(m, out, len);
    }
    call->nonfinite += (unsigned long long)nonfinite;
    if (call->corrupt) {
        /* test knob: a message whose header lies about its payload */
        m->ops->msg_corrupt(m, out);
        call->corrupt = 0;
    }
    return mlen;
}

size_t hp_call_encode(hp_call_t *call, size_t off, size_t len, int hop, int contribs,
                      void *out, size_t cap)
{
    return encode_as(call, call->kind, off, len, hop, contribs, out, cap);
}

size_t hp_call_encode_sum(hp_call_t *call, size_t off, size_t len, int hop, int contribs,
                          void *out, size_t cap)
{
    return encode_as(call, call->sum_kind, off, len, hop, contribs, out, cap);
}

void hp_call_merge_begin(hp_call_t *call, size_t off, size_t len)
{
    hp_mem_t *m = mem_of(call);
    call->mg_off = off;
    call->mg_len = len;
    /* unknown (-1) counts as non-finite: the sum's NaN/Inf then makes the
     * partition NaN, as before exceptions existed */
    call->mg_state = m->ops->nonfinite(m, call->buf + off, len) != 0 ? 2 : 1;
}

void hp_call_decode(hp_call_t *call, const void *msg, size_t msg_len, size_t off, size_t len,
                    int accumulate)
{
    hp_call_decode_to(call, msg, msg_len, call->buf + off, len, accumulate);
}

/* Decode a message of codec `kind` (or the dense fallback). */
static void decode_as(hp_call_t *call, int kind, const void *msg, size_t msg_len, float *dst, size_t len,
                      int accumulate)
{
    hp_mem_t *m = mem_of(call);
    hp_status_t st;
    double t0 = hp_now();

    if (HP_UNLIKELY(call->kill))
        raise(SIGKILL);   /* test knob: this rank has sent messages and dies before the rest */
    if (call->err != HP_OK)
        return;
    if (call->mg_state == 1 && m->ops->msg_nonfinite(m, msg, msg_len))
        call->mg_state = 2;   /* the merge in progress received a non-finite message */
    st = m->ops->decode(m, kind, msg, msg_len, len, dst, accumulate, call->params);
    call->t_decode += hp_now() - t0;
    if (st != HP_OK) {
        if (HP_ST_CLASS(st) != HP_ERR_PEER)
            HP_WARN("rejected a compressed message of %zu bytes for %zu elements: %s", msg_len,
                    len, hipress_status_string(st));
        call->err = st;
    }
}

void hp_call_decode_to(hp_call_t *call, const void *msg, size_t msg_len, float *dst, size_t len,
                       int accumulate)
{
    decode_as(call, call->kind, msg, msg_len, dst, len, accumulate);
}

void hp_call_decode_sum(hp_call_t *call, const void *msg, size_t msg_len, size_t off, size_t len,
                        int accumulate)
{
    decode_as(call, call->sum_kind, msg, msg_len, call->buf + off, len, accumulate);
}

void hp_call_decode_many(hp_call_t *call, void *const *msgs, const size_t *lens, int count, size_t off,
                         size_t len, int accumulate)
{
    const hp_comp_ext_t *x = hp_comp_ext(call->kind);
    const void *pl[HP_DECODE_MANY_MAX];
    size_t pls[HP_DECODE_MANY_MAX];
    /* fused on host memory only: a device buffer decodes each message on
     * the GPU (the same bits) */
    int fused = x->decode_many != NULL && count <= HP_DECODE_MANY_MAX && len > 0 && !hp_mem_is_device(mem_of(call));
    double t0;
    int rc;

    if (HP_UNLIKELY(call->kill))
        raise(SIGKILL);   /* test knob, as in hp_call_decode_to */
    if (call->err != HP_OK)
        return;
    for (int j = 0; j < count && fused; j++) {
        hp_msg_header_t h;
        /* an error message, a non-finite or dense-fallback one: the
         * general path below handles them */
        if (hp_msg_header(msgs[j], lens[j], &h) != HP_OK || h.kind != call->kind || h.flags != 0 ||
            (size_t)h.n != len)
            fused = 0;
        pl[j] = (const unsigned char *)msgs[j] + HP_MSG_HEADER;
        pls[j] = lens[j] - HP_MSG_HEADER;
    }
    if (!fused) {
        for (int j = 0; j < count; j++)
            hp_call_decode(call, msgs[j], lens[j], off, len, accumulate || j > 0);
        return;
    }
    t0 = hp_now();
    rc = x->decode_many(pl, pls, count, len, call->buf + off, accumulate, call->params);
    call->t_decode += hp_now() - t0;
    if (rc != HIPRESS_COMP_OK) {
        HP_WARN("rejected one of %d compressed messages for %zu elements", count, len);
        call->err = HP_ERR_MESSAGE;
    }
}

size_t hp_call_msg_len(hp_call_t *call, const void *msg, size_t cap)
{
    hp_mem_t *m = mem_of(call);
    return m->ops->msg_len(m, msg, cap);
}

size_t hp_call_msg_error(hp_call_t *call, void *out, size_t len)
{
    hp_mem_t *m = mem_of(call);
    return m->ops->msg_error(m, out, len);
}

/* No memory for a call's messages: said once here, and the call fails on
 * every rank (its slots shrink to one error message each). */
static void slots_short(hp_call_t *call, size_t count, size_t cap)
{
    HP_WARN("out of memory for %zu message buffers of %zu bytes: this call fails on every rank", count, cap);
    if (call->err == HP_OK)
        call->err = HP_ERR_NOMEM;
}

/* The slot structs at mem (head bytes), the extra bytes after them (ex),
 * the messages at msgs, cap bytes each. */
static hp_slot_t *slots_lay(unsigned char *mem, size_t head, size_t ex, unsigned char *msgs, size_t count,
                            size_t cap, size_t *cap_p, void **extra_p)
{
    hp_slot_t *slots = (hp_slot_t *)mem;
    for (size_t i = 0; i < count; i++) {
        slots[i].buf = msgs + i * cap;
        slots[i].len = 0;
        slots[i].req = HP_REQ_NULL;
    }
    if (extra_p != NULL)
        *extra_p = ex ? mem + head : NULL;
    *cap_p = cap;
    return slots;
}

/* Slots whose messages are not in the host scratch (device messages): the
 * slot structs and the extra bytes from the scratch, the messages from the
 * backend. */
static hp_slot_t *slots_apart(hp_call_t *call, hp_mem_t *m, size_t count, size_t *cap_p, size_t extra_bytes,
                              void **extra_p)
{
    size_t head = (count * sizeof(hp_slot_t) + 63) & ~(size_t)63;
    size_t ex = (extra_bytes + 63) & ~(size_t)63;
    size_t cap = (*cap_p + 63) & ~(size_t)63;
    unsigned char *mem = call->scratch(call->scratch_ctx, head + ex);
    unsigned char *msgs = mem != NULL ? m->ops->msg_mem(m, count * cap) : NULL;

    if (msgs == NULL) {
        slots_short(call, count, cap);
        ex = 0;
        cap = 64;    /* an error message */
        if (mem == NULL)
            mem = call->scratch(call->scratch_ctx, head);
        msgs = mem != NULL ? m->ops->msg_mem(m, count * cap) : NULL;
        if (msgs == NULL)
            return NULL;
    }
    return slots_lay(mem, head, ex, msgs, count, cap, cap_p, extra_p);
}

hp_slot_t *hp_call_slots(hp_call_t *call, size_t count, size_t *cap_p, size_t extra_bytes,
                         void **extra_p)
{
    size_t head = (count * sizeof(hp_slot_t) + 63) & ~(size_t)63;
    size_t ex = (extra_bytes + 63) & ~(size_t)63;
    size_t cap = (*cap_p + 63) & ~(size_t)63;
    unsigned char *mem;

    if (mem_of(call)->ops->msg_mem != NULL)
        return slots_apart(call, mem_of(call), count, cap_p, extra_bytes, extra_p);
    mem = call->scratch(call->scratch_ctx, head + ex + count * cap);
    if (mem == NULL) {
        slots_short(call, count, cap);
        ex = 0;
        cap = 64;    /* an error message */
        mem = call->scratch(call->scratch_ctx, head + count * cap);
        if (mem == NULL)
            return NULL;
    }
    return slots_lay(mem, head, ex, mem + head + ex, count, cap, cap_p, extra_p);
}

hp_status_t hp_slots_wait(hp_call_t *call, hp_slot_t *slots, size_t count)
{
    hp_status_t st = HP_OK;
    for (size_t i = 0; i < count; i++)
        HP_CHECK_KEEP(hp_tp_wait(call->tp, &slots[i].req), st);
    return st;
}
