/*
 * The residual-free form of a compressed ncclAllReduce (hp_nccl_form.h).
 * On MPI every call's eligibility agreement carries "some rank keeps no
 * residual for this buffer" (src/front/hp_call.c, needs_form); a
 * stream-ordered NCCL call makes no host agreement, so here the verdict is
 * agreed per element count, the one key of a buffer every rank shares (the
 * ranks' addresses differ, their counts are equal call by call), at the
 * count's first call, and kept.  Each such agreement re-agrees every kept
 * count, with what each rank has learnt since (an address about to be
 * reduced with a second count counts: the call that makes a fusion buffer a
 * staging buffer also turns its first count's verdict).  The very first
 * call of a communicator needs none: no rank has seen an address yet.
 */
#include "hp_nccl_form.h"
#include "hp_call_setup.h"
#include "hp_comp.h"
#include "hp_global.h"
#include <string.h>

void hp_nccl_form_setup(hp_nccl_form_t *f, const hp_config_t *cfg, int kind, int sum_kind,
                        const hipress_comp_params_t *params)
{
    f->mode = (int)hp_cfg_i(cfg, HP_S_STAGING_FORM);
    f->layout = (int)hp_cfg_i(cfg, HP_S_EF_LAYOUT);
    f->need = f->mode != HP_NCCL_FORM_BIASED && hp_call_keeps_state(kind, sum_kind);
    /* (resolved as the MPI path resolves them) */
    hp_call_form_codecs(cfg, kind, sum_kind, params, &f->params, &f->kind, &f->sum_kind);
}

/* This rank's view of kept count c: it keeps no residual for it (a
 * staging buffer found or, with the call of (addr, count) about to be made,
 * about to be). */
static int local_view(const hp_nccl_form_count_t *c, const hp_residual_store_t *res, uintptr_t addr, size_t count)
{
    return c->local || hp_residual_is_staging(res, c->addr, c->count) || (c->addr == addr && c->count != count);
}

/* The slot of a new count: a free one, else the least recently used
 * (the same on every rank: the clock counts the same calls). */
static hp_nccl_form_count_t *new_slot(hp_nccl_form_t *f)
{
    hp_nccl_form_count_t *old = &f->c[0];
    if (f->n < HP_NCCL_FORM_COUNTS)
        return &f->c[f->n++];
    for (int i = 1; i < f->n; i++)
        if (f->c[i].used < old->used)
            old = &f->c[i];
    return old;
}

/* The agreement at a new count (slot c, already filled): every kept
 * count's view, the max over the ranks; a verdict once set stays. */
static int agree_counts(hp_nccl_form_t *f, hp_residual_store_t *res, hp_transport_t *tp,
                        const hp_nccl_form_count_t *c_new)
{
    int64_t v[HP_NCCL_FORM_COUNTS];
    for (int i = 0; i < f->n; i++) {
        const hp_nccl_form_count_t *c = &f->c[i];
        v[i] = c == c_new ? hp_residual_is_staging(res, c->addr, c->count)
                          : local_view(c, res, c_new->addr, c_new->count);
    }
    if (hp_tp_agree(tp, HP_TP_INT64, v, (size_t)f->n, "the agreement on the staging buffers' form") != HP_OK)
        return -1;
    for (int i = 0; i < f->n; i++) {
        f->c[i].form |= v[i] != 0;
        f->c[i].local = 0;
    }
    return 0;
}

/* A call's verdict: the compressor's codecs, the residual-free form, or
 * the call plain (HIPRESS_STAGING_FORM=exact). */
enum { CODECS, CODECS_FORM, CODECS_PLAIN };

static int verdict_of(const hp_nccl_form_t *f, int form)
{
    if (!form)
        return CODECS;
    return f->mode == HP_NCCL_FORM_EXACT ? CODECS_PLAIN : CODECS_FORM;
}

static int verdict(hp_nccl_form_t *f, hp_residual_store_t *res, hp_nccl_ctx_t *t, hp_transport_t *tp,
                   const void *recvbuf, size_t count)
{
    const uintptr_t addr = (uintptr_t)recvbuf;
    const unsigned long long now = ++f->clock;
    hp_nccl_form_count_t *c = NULL;

    if (!f->need || f->layout == HP_LAYOUT_TRUST)
        return CODECS;
    if (f->layout == HP_LAYOUT_NONE)
        return verdict_of(f, 1);
    for (int i = 0; i < f->n && c == NULL; i++)
        if (f->c[i].count == count)
            c = &f->c[i];
    if (c == NULL) {
        c = new_slot(f);
        *c = (hp_nccl_form_count_t){.count = count, .addr = addr, .used = now};
        /* (the first call ever: no rank has an address in its residuals) */
        if (now > 1 && (hp_nccl_stream_wait(t, "the staging buffers' agreement's wait for its stream") != 0 ||
                        agree_counts(f, res, tp, c) != 0))
            return -1;
        return verdict_of(f, c->form);
    }
    c->used = now;
    c->addr = addr;
    if (!c->form && hp_residual_is_staging(res, addr, count)) {
        /* kept by the verdict: this rank's buffer, a staging buffer now,
         * runs the compressor without its residual until the next
         * agreement turns the count's verdict */
        c->local = 1;
        if (!(f->warned & 1)) {
            f->warned |= 1;
            HP_WARN("nccl: the buffer at %p (%zu elements) turned out to be a staging buffer after its count's "
                    "form was agreed: it runs without error feedback on this rank until a call of a new element "
                    "count agrees again (doc/gpu.md, 'Staging buffers on NCCL')", recvbuf, count);
        }
    }
    return verdict_of(f, c->form);
}

int hp_nccl_form_call(hp_nccl_form_t *f, hp_residual_store_t *res, hp_nccl_ctx_t *t, hp_transport_t *tp,
                      const void *recvbuf, size_t count, int kind, int sum_kind, const hipress_comp_params_t *params,
                      hp_nccl_codecs_t *out)
{
    int v = verdict(f, res, t, tp, recvbuf, count);
    out->form = v == CODECS_FORM;
    out->kind = out->form ? f->kind : kind;
    out->sum_kind = out->form ? f->sum_kind : sum_kind;
    out->params = out->form ? &f->params : params;
    return v < 0 ? -1 : v == CODECS_PLAIN;
}

hp_res_buf_t *hp_nccl_form_buffer(hp_nccl_form_t *f, hp_residual_store_t *res, hp_mem_t *mem, void *key,
                                  size_t count, const hp_nccl_codecs_t *cc, int sum_kind)
{
    const int keeps = hp_call_keeps_state(cc->kind, sum_kind);
    int staging = 0;
    hp_res_buf_t *rb = cc->form ? NULL : hp_call_buffer_state(res, mem, key, count, keeps, f->layout, &staging);
    if (staging && f->mode == HP_NCCL_FORM_BIASED && keeps && !(f->warned & 2)) {
        f->warned |= 2;
        HP_WARN("nccl: the buffer at %p is reduced with more than one element count: under "
                "HIPRESS_STAGING_FORM=biased error feedback is off for it (doc/usage.md, 'Error feedback and buffer "
                "layouts')", key);
    }
    return rb;
}

void hp_nccl_form_fold(const hp_nccl_codecs_t *cc, hp_residual_store_t *res, int layout, hp_mem_t *mem, void *key,
                       float *data, size_t count)
{
    hp_res_buf_t *rb;
    float *r;
    if (!cc->form)
        return;
    rb = hp_call_buffer_state(res, mem, key, count, 0, layout, NULL);
    r = hp_call_held_residual(rb, count);
    if (r != NULL && mem->ops->fold(mem, data, r, count))
        atomic_fetch_add_explicit(&hp_g.stats.res_folded, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.form_unbiased, 1, memory_order_relaxed);
}
