/*
 * Collective compressors (hp_comp_is_collective): the table of their runs,
 * one per backend (hp_collectives.def), the dispatch by the call's backend,
 * and the host-copies fallback for a backend a compressor has no run for.
 */
#include "hp_algo.h"
#include <stdlib.h>

/* runs[kind][backend id] */
static const hp_collective_run_t runs[HP_BUILTIN_COUNT][HP_BACKEND_COUNT] = {
#define HP_COLLECTIVE(name, cpu, dev) [HP_BUILTIN_##name] = {[HP_BACKEND_CPU] = cpu, [HP_BACKEND_DEVICE] = dev},
#include "hp_collectives.def"
#undef HP_COLLECTIVE
};

/* A copy between host memory and the call's; 0, or -1 when the backend
 * failed (its first error is then in m->err). */
static int xfer(hp_mem_t *m, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return 0;
    m->ops->copy(m, dst, src, bytes);
    return m->err != HP_OK ? -1 : 0;
}

/* `run` (a host run) on host copies of the buffer and of its error-feedback
 * vectors (in a store of this call), unchanged; the vectors go back to the
 * call's store after.  The same bytes as on host memory, slower. */
static hp_status_t run_on_host_copies(hp_call_t *call, hp_collective_run_t run)
{
    hp_mem_t *m = call->mem;
    const size_t n = call->n, fb = n * sizeof(float);
    hp_residual_store_t *tmp = NULL;
    hp_res_buf_t *rb = call->rb, *trb = NULL;
    hp_call_t sub = *call;
    float *h;
    hp_status_t st = HP_OK;

    sub.mem = NULL;
    sub.mom = sub.state = NULL;
    h = (float *)hp_aligned_alloc(fb + 64);
    if (h == NULL || (rb != NULL && (tmp = hp_residual_create((size_t)-1)) == NULL))
        st = HP_ERR_NOMEM;
    if (st == HP_OK && call->err == HP_OK && xfer(m, h, call->buf, fb))
        st = HP_ERR_DEVICE;
    if (st == HP_OK && rb != NULL) {
        trb = hp_residual_buffer(tmp, rb->addr, rb->count, 1, HP_LAYOUT_TRUST, NULL);
        for (int k = 0; k < HP_RES_NSLOTS && trb != NULL && st == HP_OK; k++) {
            float *v;
            if (rb->vec[k] == NULL)
                continue;
            v = hp_residual_vec(tmp, trb, k, rb->len[k]);
            if (v == NULL)
                st = HP_ERR_NOMEM;
            else if (xfer(m, v, rb->vec[k], rb->len[k] * sizeof(float)))
                st = HP_ERR_DEVICE;
        }
        if (trb == NULL)
            st = HP_ERR_NOMEM;
        else
            trb->calls = rb->calls;
    }
    if (st != HP_OK && sub.err == HP_OK)
        sub.err = st;   /* take part with error messages: no peer hangs */
    sub.buf = sub.err == HP_OK ? h : NULL;
    sub.res = tmp;
    sub.rb = trb;
    sub.resid = trb != NULL && call->resid != NULL ? trb->vec[HP_RES_R] : NULL;
    st = run(&sub);
    call->t_encode += sub.t_encode;
    call->t_decode += sub.t_decode;
    call->nonfinite += sub.nonfinite;
    if (st == HP_OK && sub.err == HP_OK) {
        if (xfer(m, call->buf, h, fb))
            st = HP_ERR_DEVICE;
        /* the vectors back to the call's store (a new length is a new vector) */
        for (int k = 0; k < HP_RES_NSLOTS && trb != NULL && st == HP_OK; k++) {
            float *v;
            if (trb->vec[k] == NULL)
                continue;
            v = hp_residual_vec(call->res, rb, k, trb->len[k]);
            if (v != NULL && xfer(m, v, trb->vec[k], trb->len[k] * sizeof(float)))
                st = HP_ERR_DEVICE;
        }
    }
    if (st == HP_OK)
        st = sub.err;
    hp_residual_destroy(tmp, HP_RES_DROP_FREED);
    free(h);
    return st;
}

hp_status_t hp_algo_collective(hp_call_t *call)
{
    const int id = call->mem != NULL ? call->mem->ops->id : HP_BACKEND_CPU;
    hp_collective_run_t own, host;
    if (call->kind < 0 || call->kind >= HP_BUILTIN_COUNT)
        return HP_ERR_UNSUPPORTED;
    own = runs[call->kind][id];
    host = runs[call->kind][HP_BACKEND_CPU];
    if (own != NULL)
        return own(call);
    return host != NULL ? run_on_host_copies(call, host) : HP_ERR_UNSUPPORTED;
}
