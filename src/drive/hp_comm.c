/*
 * The one per-communicator state (hp_comm.h): its codecs derived from its
 * settings, its references and end, scratch and device memory, the
 * residual statistics and warnings, the per-element-count record, and the
 * registry the NCCL front end keeps its states in.
 */
#include "hp_comm.h"
#include "hp_global.h"
#include "hp_comp.h"
#include "hp_backend.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- codecs */

int hp_comm_keeps_state(int kind, int sum_kind)
{
    return (hp_comp_get(kind)->flags & (HIPRESS_COMP_EF | HIPRESS_COMP_MOMENTUM)) != 0 ||
           (hp_comp_get(sum_kind)->flags & HIPRESS_COMP_EF) != 0;
}

/* The codecs of the residual-free form (HIPRESS_STAGING_FORM=unbiased) of
 * c's compressor under HIPRESS_STAGING_CODEC.  An owner's sum in the form is
 * re-encoded without a residual too, so a dense q sum codec coarser than
 * the staging codec is raised to it (terngrad's q2: its ps lost 3 to 8
 * points more than allgather on MNIST-1D in a fusion buffer,
 * doc/accuracy.md). */
static void form_codecs(hp_comm_t *c)
{
    static const char *dense[] = {"q2", "q4", "q8"};
    int dq_i = (int)hp_cfg_i(&c->cfg, HP_S_STAGING_CODEC), dq = hp_comp_find(dense[dq_i]);

    hp_comp_unbiased_params(&c->params, &c->form_params);
    c->form_kind = hp_comp_unbiased_kind(c->kind, &c->form_params, dq);
    c->form_sum_kind = hp_comp_unbiased_kind(c->sum_kind, &c->form_params, dq);
    for (int i = 0; i < dq_i; i++)
        if (c->form_sum_kind == hp_comp_find(dense[i]))
            c->form_sum_kind = dq;
    /* the form an optimizer that may be Adam gets: the staging codec,
     * stochastic, at both stages (terngrad's own 2-bit code is unbiased but
     * too coarse for Adam's second moment) */
    if (c->optimizer_form)
        c->form_kind = c->form_sum_kind = dq;
}

void hp_comm_codecs(const hp_comm_t *c, int form, hp_codecs_t *cc)
{
    cc->kind = form ? c->form_kind : c->kind;
    cc->sum_kind = form ? c->form_sum_kind : c->sum_kind;
    cc->p = cc->sum_p = form ? &c->form_params : &c->params;
}

int hp_comm_optimizer_form(const hp_config_t *cfg, int kind)
{
    return hp_cfg_i(cfg, HP_S_OPTIMIZER) != HP_OPT_SGD && hp_comp_ext(kind)->sgd_only;
}

void hp_comm_notice_settings(void)
{
    static const char *dense[] = {"q2", "q4", "q8"};
    static _Atomic int said;
    int kind = hp_comp_find(hp_cfg_s(&hp_g.cfg, HP_S_COMPRESSOR));
    const char *name, *form;
    if (kind < 0 || !hp_comm_optimizer_form(&hp_g.cfg, kind) || !hp_cfg_i(&hp_g.cfg, HP_S_ENABLE) ||
        atomic_exchange(&said, 1))
        return;
    name = hp_comp_get(kind)->name;
    form = dense[hp_cfg_i(&hp_g.cfg, HP_S_STAGING_CODEC)];
    if (hp_cfg_i(&hp_g.cfg, HP_S_OPTIMIZER) == HP_OPT_AUTO)
        HP_WARN("%s keeps momentum SGD's accuracy, not Adam's, and HIPRESS_OPTIMIZER is not set: it runs %s with "
                "stochastic rounding instead, which holds under both. Set HIPRESS_OPTIMIZER=sgd for %s itself, or "
                "=adam (doc/accuracy.md, 'Adam')", name, form, name);
    else
        HP_INFO("%s under HIPRESS_OPTIMIZER=adam: %s with stochastic rounding instead", name, form);
}

hp_status_t hp_comm_refresh(hp_comm_t *c, char *err, size_t errlen)
{
    int kind = hp_comp_find(hp_cfg_s(&c->cfg, HP_S_COMPRESSOR));
    if (kind < 0) {
        snprintf(err, errlen, "unknown compressor '%s'", hp_cfg_s(&c->cfg, HP_S_COMPRESSOR));
        return HP_ERR_INVALID;
    }
    c->kind = kind;
    c->opted_out = !hp_cfg_i(&c->cfg, HP_S_ENABLE);
    c->layout = (int)hp_cfg_i(&c->cfg, HP_S_EF_LAYOUT);   /* detect|trust|none = hp_layout_t */
    memset(&c->planner, 0, sizeof(c->planner));
    hp_params_from_config(&c->cfg, &c->params);
    c->sum_kind = hp_comp_sum_kind(kind, (int)hp_cfg_i(&c->cfg, HP_S_SUM_CODEC), &c->params);
    c->staging_form = (int)hp_cfg_i(&c->cfg, HP_S_STAGING_FORM);
    /* an SGD-only compressor where the optimizer may be Adam: its
     * residual-free form on every buffer, whatever the layout rules say */
    c->optimizer_form = hp_comm_optimizer_form(&c->cfg, kind);
    if (c->optimizer_form) {
        c->layout = HP_LAYOUT_NONE;
        c->staging_form = HP_FORM_UNBIASED;
    }
    form_codecs(c);
    if (c->res != NULL) {
        /* a communicator opted out passes its calls through untouched:
         * what it owed cannot be sent any more (counted) */
        if (c->opted_out || c->layout == HP_LAYOUT_NONE)
            hp_residual_drop_all(c->res, HP_RES_DROP_OPTOUT);
        hp_residual_set_max(c->res, (size_t)hp_cfg_i(&c->cfg, HP_S_RESIDUAL_MAX_MB) << 20);
        hp_comm_sync_stats(c);
    }
    /* the hierarchy is rebuilt at the next call when its settings changed */
    if (hp_cfg_i(&c->cfg, HP_S_HIERARCHICAL) != c->hier.mode || hp_cfg_i(&c->cfg, HP_S_NODE_SIZE) != c->hier.k)
        c->hier.built = 0;
    return HP_OK;
}

hp_comm_t *hp_comm_new(const struct hp_front *front, void *handle, int rank, int size)
{
    hp_comm_t *c = calloc(1, sizeof(*c));
    char err[256];
    if (c == NULL)
        return NULL;
    atomic_init(&c->refs, 1);
    atomic_init(&c->closed, 0);
    c->front = front;
    c->handle = handle;
    c->rank = rank;
    c->size = size;
    c->cfg = hp_g.cfg;
    c->res = hp_residual_create((size_t)hp_cfg_i(&c->cfg, HP_S_RESIDUAL_MAX_MB) << 20);
    if (c->res == NULL || hp_comm_refresh(c, err, sizeof(err)) != HP_OK) {
        hp_residual_destroy(c->res, HP_RES_DROP_FREED);
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->enq, NULL);
    return c;
}

hp_status_t hp_comm_set(hp_comm_t *c, const char *name, const char *value, char *err, size_t errlen)
{
    hp_config_t saved = c->cfg;
    if (hp_config_set(&c->cfg, name, value, hp_comp_name_ok, err, errlen) != HP_OK ||
        hp_comm_refresh(c, err, errlen) != HP_OK) {
        char ignored[64];
        c->cfg = saved;
        hp_comm_refresh(c, ignored, sizeof(ignored));
        return HP_ERR_INVALID;
    }
    if (c->state == HP_COMM_ON || c->state == HP_COMM_OFF)
        c->state = c->state_set;
    return HP_OK;
}

/* ------------------------------------------------------------ lifetime */

/* Free a device buffer: in the stream order of the codec context of the
 * state's latest call where the buffer lives in its CUDA context (after
 * every queued use: a stream-ordered call's work is on that context's
 * streams, and each call is ordered after the one before), else
 * synchronously; never after an abort (kept and counted). */
static void dbuf_free(const hp_comm_t *c, hp_dbuf_t *b)
{
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    const hp_gpu_ops_v3_t *g3 = c->last_cx != NULL ? hp_gpu_module_v3() : NULL;
    if (b->p == NULL)
        return;
    if (c->aborted || g == NULL ||
        (g3 != NULL && b->where.ctx == c->last_where.ctx && g3->mem_free(c->last_cx, b->p) != HP_GPU_OK))
        atomic_fetch_add_explicit(&hp_g.stats.dev_kept_bytes, b->bytes, memory_order_relaxed);
    else if (g3 == NULL || b->where.ctx != c->last_where.ctx)
        g->dev_free(&b->where, b->p);
    b->p = NULL;
    b->bytes = b->agreed = 0;
}

static void comm_free(hp_comm_t *c)
{
    for (int i = 2; i >= 0; i--) {
        hp_tp_fini(&c->tp_store[i][1]);
        hp_tp_fini(&c->tp_store[i][0]);
    }
    if (c->res != NULL) {
        if (c->aborted) {
            atomic_fetch_add_explicit(&hp_g.stats.dev_kept_bytes, hp_residual_abandon(c->res), memory_order_relaxed);
        } else {
            hp_residual_drop_all(c->res, HP_RES_DROP_FREED);
            hp_comm_sync_stats(c);
            hp_residual_destroy(c->res, HP_RES_DROP_FREED);
        }
    }
    /* (in its codec context's stream order: before the owner lets it go) */
    dbuf_free(c, &c->msgs);
    dbuf_free(c, &c->wide);
    hp_mem_owner_release(&c->owner);
    free(c->scratch);
    free(c->scratch2);
    pthread_mutex_destroy(&c->enq);
    free(c);
}

void hp_comm_put(hp_comm_t *c)
{
    if (c != NULL && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        comm_free(c);
}

int hp_comm_close(hp_comm_t *c, double bound)
{
    struct timespec ts;
    atomic_store_explicit(&c->closed, 1, memory_order_release);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)bound;
    ts.tv_nsec += (long)((bound - (double)(time_t)bound) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    if (pthread_mutex_timedlock(&c->enq, &ts) != 0)
        return -1;
    pthread_mutex_unlock(&c->enq);
    return 0;
}

void hp_comm_end(hp_comm_t *c, int aborted)
{
    c->state = HP_COMM_ENDED;
    if (aborted)
        c->aborted = 1;
    hp_comm_put(c);
}

/* ------------------------------------------------------------- memory */

/* At least `bytes` in *mem (grown, contents not kept), NULL on failure. */
static void *grow(void **mem, size_t *have, size_t bytes)
{
    if (bytes > *have) {
        free(*mem);
        *mem = hp_aligned_alloc(bytes);
        *have = *mem ? bytes : 0;
    }
    return *mem;
}

void *hp_comm_scratch(hp_comm_t *c, size_t bytes)
{
    return grow(&c->scratch, &c->scratch_bytes, bytes);
}

void *hp_comm_scratch2(hp_comm_t *c, size_t bytes)
{
    return grow(&c->scratch2, &c->scratch2_bytes, bytes);
}

hp_status_t hp_comm_dbuf(hp_comm_t *c, hp_dbuf_t *b, const hp_gpu_ptr_t *where, size_t bytes, void *cx,
                         const char *what)
{
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    const hp_gpu_ops_v3_t *g3 = cx != NULL ? hp_gpu_module_v3() : NULL;
    void *p = NULL;
    int rc;
    if (b->p != NULL && b->bytes >= bytes && b->where.ctx == where->ctx && b->where.device == where->device)
        return HP_OK;
    if (g == NULL)
        return HP_ERR_UNSUPPORTED;
    bytes = (bytes + 65535) & ~(size_t)65535;
    rc = g3 != NULL ? g3->mem_alloc(cx, bytes, 0, &p) : g->dev_alloc(where, bytes, &p);
    if (rc != HP_GPU_OK) {
        HP_WARN("no device memory for %zu bytes of %s: %s", bytes, what, g->base.last_error());
        return HP_ERR_NOMEM;
    }
    if (b->p != NULL) {
        /* (a codec context frees only in its own CUDA context) */
        if (g3 != NULL && b->where.ctx == where->ctx)
            g3->mem_free(cx, b->p);
        else
            dbuf_free(c, b);
    }
    b->p = p;
    b->bytes = bytes;
    b->agreed = 0;
    b->where = *where;
    b->where.kind = HP_MEM_DEVICE;
    return HP_OK;
}

/* ------------------------------------------------------------- stats */

void hp_comm_sync_stats(hp_comm_t *c)
{
    hp_residual_info_t ri, *seen = &c->res_seen;
    hp_stats_t *st = &hp_g.stats;
    if (c->res == NULL)
        return;
    hp_residual_info(c->res, &ri);
#define HP_ADD(field, value) atomic_fetch_add_explicit(&st->field, (value), memory_order_relaxed)
    HP_ADD(res_created, ri.created - seen->created);
    HP_ADD(res_staging, ri.staging - seen->staging);
    HP_ADD(res_stranded, ri.stranded - seen->stranded);
    HP_ADD(res_oversize, ri.oversize - seen->oversize);
    for (int k = 0; k < HP_RES_DROP_NREASONS; k++) {
        HP_ADD(res_drop_buffers[k], ri.drop_buffers[k] - seen->drop_buffers[k]);
        HP_ADD(res_drop_bytes[k], ri.drop_bytes[k] - seen->drop_bytes[k]);
    }
#undef HP_ADD
    pthread_mutex_lock(&st->stats_lock);
    for (int k = 0; k < HP_RES_DROP_NREASONS; k++)
        st->res_drop_l1[k] += ri.drop_l1[k] - seen->drop_l1[k];
    pthread_mutex_unlock(&st->stats_lock);
    *seen = ri;
}

void hp_comm_warn_residuals(hp_comm_t *c)
{
    hp_residual_info_t ri;
    hp_residual_info(c->res, &ri);
    if (ri.stranded > c->res_seen.stranded && !(c->warned & HP_WARNED_STRAND)) {
        c->warned |= HP_WARNED_STRAND;
        HP_WARN("residuals of buffers that were reduced once and never again were evicted: the "
                "program reduces gradients in new buffers each step, so error feedback cannot "
                "follow them (see doc/usage.md, 'Error feedback and buffer layouts')");
    }
    if (ri.oversize > c->res_seen.oversize && !(c->warned & HP_WARNED_OVERSIZE)) {
        c->warned |= HP_WARNED_OVERSIZE;
        HP_WARN("a buffer's error-feedback state does not fit in HIPRESS_RESIDUAL_MAX_MB=%lld: it "
                "runs without error feedback", hp_cfg_i(&c->cfg, HP_S_RESIDUAL_MAX_MB));
    }
}

/* ------------------------------------------------- the element counts */

hp_count_t *hp_counts_find(hp_counts_t *t, size_t count, uintptr_t addr, int *fresh_p)
{
    const unsigned long long now = ++t->clock;
    hp_count_t *c = NULL, *old = &t->c[0];

    *fresh_p = 0;
    for (int i = 0; i < t->n; i++)
        if (t->c[i].count == count) {
            c = &t->c[i];
            c->used = now;
            c->addr = addr;
            return c;
        }
    /* a free slot, else the least recently used (the same on every rank:
     * the clock counts the same calls) */
    if (t->n < HP_COUNTS) {
        c = &t->c[t->n++];
    } else {
        for (int i = 1; i < t->n; i++)
            if (t->c[i].used < old->used)
                old = &t->c[i];
        c = old;
    }
    *c = (hp_count_t){.count = count, .addr = addr, .used = now};
    *fresh_p = 1;
    return c;
}

/* ------------------------------------------------------- the registry */

static size_t bucket_of(const void *handle)
{
    uint64_t x = (uint64_t)(uintptr_t)handle;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)(x % HP_REG_BUCKETS);
}

hp_comm_t *hp_registry_get(hp_registry_t *r, const void *handle)
{
    hp_comm_t *c;
    if (atomic_load_explicit(&r->count, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&r->lock);
    for (c = r->bucket[bucket_of(handle)]; c != NULL; c = c->next)
        if (c->handle == handle)
            break;
    if (c != NULL && c->state != HP_COMM_ENDED)
        hp_comm_get(c);
    else
        c = NULL;
    pthread_mutex_unlock(&r->lock);
    return c;
}

/* Unlink the state of `handle` (under the lock); NULL when none. */
static hp_comm_t *unlink_handle(hp_registry_t *r, const void *handle)
{
    for (hp_comm_t **pp = &r->bucket[bucket_of(handle)]; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->handle == handle) {
            hp_comm_t *c = *pp;
            *pp = c->next;
            atomic_fetch_sub(&r->count, 1);
            return c;
        }
    return NULL;
}

void hp_registry_add(hp_registry_t *r, hp_comm_t *c)
{
    size_t b = bucket_of(c->handle);
    hp_comm_t *old;
    pthread_mutex_lock(&r->lock);
    old = unlink_handle(r, c->handle);
    c->next = r->bucket[b];
    r->bucket[b] = c;
    atomic_fetch_add(&r->count, 1);
    pthread_mutex_unlock(&r->lock);
    if (old != NULL)
        hp_comm_end(old, 0);
}

hp_comm_t *hp_registry_detach(hp_registry_t *r, const void *handle)
{
    hp_comm_t *c;
    if (atomic_load_explicit(&r->count, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&r->lock);
    c = unlink_handle(r, handle);
    if (c != NULL)
        c->state = HP_COMM_ENDED;
    pthread_mutex_unlock(&r->lock);
    return c;
}
