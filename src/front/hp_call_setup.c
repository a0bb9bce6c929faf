/*
 * The set-up of one compressed call, shared by the front ends (the MPI
 * wrappers' hp_call.c and the NCCL compressed mode): the buffer's
 * error-feedback state, the call's compressor parameters, and the hp_call_t
 * the algorithms run on.  A front end differs only in where its transport,
 * memory and communicator state come from.
 */
#include "hp_call_setup.h"
#include "hp_comp.h"
#include <string.h>

void *hp_call_mem_scratch(void *ctx, size_t bytes)
{
    hp_mem_t *m = (hp_mem_t *)ctx;
    return m->ops->scratch(m, bytes);
}

hp_res_buf_t *hp_call_buffer_state(hp_residual_store_t *res, hp_mem_t *mem, void *recvbuf, size_t count,
                                   int create, int layout, int *staging_p)
{
    int staging = 0;
    hp_res_buf_t *rb = NULL;
    if (layout != HP_LAYOUT_NONE)
        rb = hp_residual_buffer(res, (uintptr_t)recvbuf, count, create, (hp_layout_t)layout, &staging);
    if (staging_p != NULL)
        *staging_p = staging;
    return rb != NULL && hp_residual_bind(rb, hp_mem_residual(mem)) ? rb : NULL;
}

float *hp_call_held_residual(const hp_res_buf_t *rb, size_t count)
{
    return rb != NULL && rb->len[HP_RES_R] == count ? rb->vec[HP_RES_R] : NULL;
}

void hp_call_params_for(int kind, const hipress_comp_params_t *params, const hp_res_buf_t *rb,
                        hipress_comp_params_t *out)
{
    const hp_comp_ext_t *ext = hp_comp_ext(kind);
    *out = *params;
    if (ext->call_params != NULL)
        ext->call_params(out, rb != NULL ? rb->calls : 0);
}

int hp_call_keeps_state(int kind, int sum_kind)
{
    return (hp_comp_get(kind)->flags & (HIPRESS_COMP_EF | HIPRESS_COMP_MOMENTUM)) != 0 ||
           (hp_comp_get(sum_kind)->flags & HIPRESS_COMP_EF) != 0;
}

/* dgc's momentum correction where this rank's own gradient enters: its
 * contribution to elements [base, base+len) of the buffer (of count
 * elements; buf points at element base) becomes u = m u + g, before any
 * encode, and every stage then applies plain error feedback to what it
 * encodes; u is masked where this rank's messages carried an element.  A
 * range holding NaN or Inf skips it for this call (u stays as it was).
 * Returns u at element base, or NULL. */
static float *apply_momentum(hp_residual_store_t *res, hp_mem_t *mem, hp_res_buf_t *rb, float m, float *buf,
                             size_t base, size_t len, size_t count)
{
    float *u;
    if (rb == NULL || !(m > 0.0f))
        return NULL;
    u = hp_residual_vec(res, rb, HP_RES_U, count);
    if (u == NULL)
        return NULL;
    u += base;
    return mem->ops->momentum(mem, u, buf, m, len) ? u : NULL;
}

void hp_call_prepare(hp_call_t *call, const hp_call_env_t *env, float *recvbuf, size_t count, size_t base,
                     size_t n)
{
    hp_comp_t *comp = hp_comp_get(env->kind);
    const hp_comp_ext_t *ext = hp_comp_ext(env->kind);
    hp_res_buf_t *rb = env->rb;

    call->tp = env->tp;
    call->mem = env->mem;
    call->buf = recvbuf + base;
    call->n = n;
    call->base = base;
    call->kind = env->kind;
    call->sum_kind = env->sum_kind;
    call->params = env->params;
    call->res = env->res;
    call->rb = rb;
    /* a residual where either codec keeps one: the worker's error, and the
     * owner's of the sums it re-encodes (terngrad has one for that alone) */
    call->resid = (rb != NULL && ((comp->flags | hp_comp_get(env->sum_kind)->flags) & HIPRESS_COMP_EF))
                      ? hp_residual_vec(env->res, rb, HP_RES_R, count) : hp_call_held_residual(rb, count);
    if (call->resid != NULL)
        call->resid += base;
    if (ext->momentum != NULL)
        call->mom = apply_momentum(env->res, env->mem, rb, ext->momentum(env->params), call->buf, base, n, count);
    else if (rb != NULL && (comp->flags & HIPRESS_COMP_MOMENTUM) &&
             (call->state = hp_residual_vec(env->res, rb, HP_RES_U, count)) != NULL)
        call->state += base;
    call->grain = hp_comp_grain2(env->kind, env->sum_kind, env->params);
    call->seed = env->seed;
    call->call_no = env->call_no;
    call->corrupt = env->corrupt;
    call->kill = env->kill;
}

void hp_call_form_codecs(const hp_config_t *cfg, int kind, int sum_kind, const hipress_comp_params_t *params,
                         hipress_comp_params_t *fparams, int *fkind, int *fsum_kind)
{
    /* HIPRESS_STAGING_CODEC: q2, q4, q8 in the order of its list.  An
     * owner's sum in the form is re-encoded without a residual too, so a
     * dense q sum codec coarser than the staging codec is raised to it
     * (terngrad's q2: its ps lost 3 to 8 points more than allgather on
     * MNIST-1D in a fusion buffer, doc/accuracy.md) */
    static const char *dense[] = {"q2", "q4", "q8"};
    int dq_i = (int)hp_cfg_i(cfg, HP_S_STAGING_CODEC), dq = hp_comp_find(dense[dq_i]);

    hp_comp_unbiased_params(params, fparams);
    *fkind = hp_comp_unbiased_kind(kind, fparams, dq);
    *fsum_kind = hp_comp_unbiased_kind(sum_kind, fparams, dq);
    for (int i = 0; i < dq_i; i++)
        if (*fsum_kind == hp_comp_find(dense[i]))
            *fsum_kind = dq;
}
