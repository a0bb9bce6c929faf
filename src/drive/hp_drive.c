/*
 * The one call driver (hp_front.h): every compressed or compressible call
 * of both front ends, MPI_Allreduce and ncclAllReduce, runs here on its
 * communicator's state (hp_comm.h), in this order:
 *
 *  1. agreement: the communicator's settings once (NCCL: at its first call;
 *     MPI: at MPI_Init), then, where the front end agrees every call
 *     (MPI), whether every rank can compress it, the count, the memory;
 *  2. the staging-form verdict: the compressor's codecs, or their
 *     residual-free form where some rank keeps no residual for the buffer;
 *  3. the plan (src/plan);
 *  4. plain (the user's own reduction, with what this rank still owes
 *     folded in) or compressed (hp_algo_run: flat or hierarchical);
 *  5. the failure agreement (on the host, or in stream order on the device);
 *  6. HIPRESS_VERIFY's check;
 *  7. the statistics and warnings.
 *
 * What differs between the front ends is behind hp_front_t.  No rank-local
 * fact changes the size of a message or the collectives a call runs unless
 * it was agreed first: a local failure is carried to the failure agreement,
 * and every rank runs every exchange.
 */
#include "hp_front.h"
#include "hp_global.h"
#include "hp_verify.h"
#include "hp_comp.h"
#include "hp_watchdog.h"
#include <stdlib.h>
#include <string.h>

/* Messages start with the front end's prefix (its table's). */
#define FRONT_FMT "%s"
#define FRONT_ARG(c) (c)->front->prefix

#define STAT_ADD(field, v) atomic_fetch_add_explicit(&hp_g.stats.field, (v), memory_order_relaxed)
#define STAT_ADD_P(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)

/* ------------------------------------------------------ the settings */

hp_status_t hp_drive_agree_settings(hp_comm_t *c, hp_transport_t *tp, int local_bad, const char *why)
{
    hp_settings_verdict_t v;
    const char *off = NULL;
    hp_status_t st;

    if (local_bad)
        HP_WARN(FRONT_FMT "this rank cannot compress on this communicator: %s", FRONT_ARG(c), why);
    HP_CHECK_GOTO(hp_settings_agree(tp, &c->cfg, local_bad, &v), st, out);
    if (v.mismatch >= 0)
        off = "the ranks' settings differ (every HIPRESS_* setting that MPI_Init checks must be equal)";
    else if (v.bad_rank >= 0)
        off = "a rank cannot compress (see its warning)";
    else if (v.size < 2)
        off = "the communicator has one rank";
    else if (c->kind == hp_kind_none)
        off = "the compressor is none";
    c->state = off != NULL ? HP_COMM_OFF : HP_COMM_ON;
    c->size = tp->size;
    c->rank = tp->rank;
    if (off != NULL && c->rank == 0)
        HP_WARN(FRONT_FMT "%s is passed through on this communicator: %s%s%s", FRONT_ARG(c), c->front->call, off,
                v.mismatch >= 0 ? "; first: " : "", v.mismatch >= 0 ? hp_settings[v.mismatch].name : "");
    else if (off == NULL && c->rank == 0)
        HP_INFO(FRONT_FMT "%s compressed on a communicator of %d ranks with %s (HIPRESS_ALGO=%s)", FRONT_ARG(c),
                c->front->call, c->size, hp_cfg_s(&c->cfg, HP_S_COMPRESSOR),
                hp_algo_name((int)hp_cfg_i(&c->cfg, HP_S_ALGO)));
out:
    return st;
}

/* ------------------------------------------------ the buffer's state */

/* Whether this rank keeps no residual for (recv, count) where its
 * compressor needs one (a staging buffer, HIPRESS_EF_LAYOUT=none): a local
 * fact, so it enters the call's agreement. */
static int needs_form(const hp_comm_t *c, const void *recv, size_t count)
{
    if (c->staging_form == HP_FORM_BIASED || !hp_comm_keeps_state(c->kind, c->sum_kind))
        return 0;
    return c->layout == HP_LAYOUT_NONE ||
           (c->layout == HP_LAYOUT_DETECT && hp_residual_is_staging(c->res, (uintptr_t)recv, count));
}

/* The buffer's error-feedback state bound to the call's memory, NULL when
 * there is none; a staging buffer found under STAGING_FORM=biased is
 * warned of once. */
static hp_res_buf_t *buffer_state(hp_comm_t *c, hp_dcall_t *d, int create)
{
    int staging = 0;
    hp_res_buf_t *rb = NULL;
    if (c->layout != HP_LAYOUT_NONE)
        rb = hp_residual_buffer(c->res, (uintptr_t)d->recv, d->count, create, (hp_layout_t)c->layout, &staging);
    if (rb != NULL && !hp_residual_bind(rb, hp_mem_residual(&d->mem)))
        rb = NULL;
    if (staging && c->staging_form == HP_FORM_BIASED && hp_comm_keeps_state(c->kind, c->sum_kind) &&
        !(c->warned & HP_WARNED_STAGING)) {
        c->warned |= HP_WARNED_STAGING;
        HP_WARN("the buffer at %p is reduced with more than one element count (now %zu): it is a staging "
                "buffer, such as a fusion buffer, whose layout changes between calls; under "
                "HIPRESS_STAGING_FORM=biased error feedback is off for it and its residuals were dropped "
                "(counted in HIPRESS_STATS). See doc/usage.md, 'Error feedback and buffer layouts'",
                d->recv, d->count);
    }
    return rb;
}

static float *held_residual(const hp_res_buf_t *rb, size_t count)
{
    return rb != NULL && rb->len[HP_RES_R] == count ? rb->vec[HP_RES_R] : NULL;
}

/* What this rank still holds for the buffer travels in its data, exactly
 * (a plain plan) or unbiasedly encoded (the residual-free form).  NaN or
 * Inf in the data: the residual waits. */
static void fold_held(hp_comm_t *c, hp_dcall_t *d)
{
    float *r = held_residual(buffer_state(c, d, 0), d->count);
    if (r != NULL && d->mem.ops->fold(&d->mem, d->data, r, d->count))
        STAT_ADD(res_folded, 1);
}

/* ------------------------------------------------------ the agreement */

/* The per-call agreement (fronts that agree every call): whether every
 * rank can compress it, the count, the buffers' memory, and whether some
 * rank keeps no residual for its buffer.  HP_OK and *ok_p (0: a peer
 * cannot: the call passes through everywhere); HP_ERR_INVALID when the
 * counts differ (an erroneous program). */
static hp_status_t agree_call(hp_comm_t *c, hp_dcall_t *d, int *ok_p)
{
    int64_t v[8] = {!d->local_ok, (int64_t)d->count, -(int64_t)d->count, d->mem_kind, -(int64_t)d->mem_kind,
                    needs_form(c, d->recv, d->count), d->key, -d->key};
    hp_status_t st;

    HP_CHECK_GOTO(hp_tp_agree(c->tp, HP_TP_INT64, v, 8, "the agreement on a call's eligibility"), st, out);
    /* the plans' key: the buffers' memory where every rank has the same
     * kind, host memory's plans where they differ (every rank plans alike) */
    d->mem_agreed = v[3] == -v[4] ? (int)v[3] : 0;
    d->form = v[5] != 0;
    if (v[1] != -v[2]) {
        if (c->rank == 0)
            HP_WARN(FRONT_FMT "%s was called with %lld to %lld elements on the ranks of one communicator: the counts "
                    "must be equal (an erroneous program)", FRONT_ARG(c), c->front->call_desc, -(long long)v[2],
                    (long long)v[1]);
        return HP_ERR_INVALID;
    }
    if (v[6] != -v[7]) {
        if (c->rank == 0) {
            char lo[64], hi[64];
            if (d->key_str != NULL) {
                d->key_str(-(long long)v[7], lo, sizeof(lo));
                d->key_str((long long)v[6], hi, sizeof(hi));
            } else {
                snprintf(lo, sizeof(lo), "%lld", -(long long)v[7]);
                snprintf(hi, sizeof(hi), "%lld", (long long)v[6]);
            }
            HP_WARN(FRONT_FMT "the ranks of one communicator reduce different %s in one call (%s on one rank, %s on "
                    "another): their layouts differ", FRONT_ARG(c), d->key_what != NULL ? d->key_what : "keys", lo,
                    hi);
        }
        return HP_ERR_INVALID;
    }
    *ok_p = v[0] == 0;
out:
    return st;
}

/* The staging verdict of a call without a per-call agreement: agreed per
 * element count, the one key of a buffer every rank shares (addresses
 * differ, counts are equal call by call), at the count's first call, and
 * kept.  Each such agreement re-agrees every kept count with what each rank
 * has learnt since (an address about to be reduced with a second count
 * counts: the call that makes a fusion buffer a staging buffer also turns
 * its first count's verdict).  The very first call needs none: no rank has
 * seen an address yet. */
static hp_status_t count_verdict(hp_comm_t *c, hp_dcall_t *d, hp_count_t *rec, int fresh)
{
    const uintptr_t addr = (uintptr_t)d->recv;
    hp_counts_t *t = &c->counts;
    int64_t v[HP_COUNTS];
    hp_status_t st;

    if (!fresh) {
        if (!rec->form && hp_residual_is_staging(c->res, addr, d->count)) {
            /* kept: this rank's buffer, a staging buffer now, runs without
             * its residual until the next agreement turns the verdict */
            rec->local = 1;
            if (!(c->warned & HP_WARNED_LATE)) {
                c->warned |= HP_WARNED_LATE;
                HP_WARN(FRONT_FMT "the buffer at %p (%zu elements) turned out to be a staging buffer after its "
                        "count's form was agreed: it runs without error feedback on this rank until a call of a "
                        "new element count agrees again (doc/usage.md, 'Error feedback and buffer layouts')",
                        FRONT_ARG(c), d->recv, d->count);
            }
        }
        d->form = rec->form;
        return HP_OK;
    }
    if (t->clock <= 1) {
        d->form = 0;
        return HP_OK;
    }
    for (int i = 0; i < t->n; i++) {
        const hp_count_t *k = &t->c[i];
        v[i] = k == rec ? hp_residual_is_staging(c->res, k->addr, k->count)
                        : k->local || hp_residual_is_staging(c->res, k->addr, k->count) ||
                              (k->addr == addr && k->count != d->count);
    }
    HP_CHECK_GOTO(hp_tp_agree(d->tp, HP_TP_INT64, v, (size_t)t->n, "the agreement on the staging buffers' form"),
                  st, out);
    for (int i = 0; i < t->n; i++) {
        t->c[i].form |= v[i] != 0;
        t->c[i].local = 0;
    }
    d->form = rec->form;
out:
    return st;
}

/* ------------------------------------------------------------- plans */

static void plan_comm(hp_comm_t *c, hp_dcall_t *d, const hp_codecs_t *cc, hp_plan_comm_t *pc)
{
    memset(pc, 0, sizeof(*pc));
    pc->cfg = &c->cfg;
    pc->kind = cc->kind;
    pc->sum_kind = cc->sum_kind;
    pc->params = cc->p;
    pc->form = d->form && c->staging_form == HP_FORM_UNBIASED;
    pc->rank = c->rank;
    pc->size = c->size;
    pc->hier_avail = c->hier.avail;
    pc->hier_2d = c->hier.is_2d;
    pc->node_size = c->hier.node_size;
    pc->nodes = c->hier.nodes;
    pc->mem_kind = d->mem_agreed;
    pc->all = d->tp;
    pc->algo[0] = d->tp;
    pc->algo[1] = c->hier.avail ? c->hier.tp_inter : NULL;
    pc->node = c->hier.tp_node;
    pc->mem = &d->mem;
}

/* An exploration call's time; a plan it fixes goes in the stats. */
static void report_plan(const hp_plan_comm_t *pc, hp_plan_slot_t *explore, double t0, size_t count)
{
    char line[96];
    hp_plan_report(pc, explore, hp_now() - t0, count, line, sizeof(line));
    if (line[0] == '\0')
        return;
    pthread_mutex_lock(&hp_g.stats.stats_lock);
    snprintf(hp_g.stats.plan_text[hp_plan_size_class(count * sizeof(float))], sizeof(hp_g.stats.plan_text[0]),
             "%s", line);
    pthread_mutex_unlock(&hp_g.stats.stats_lock);
    HP_INFO("plan for %zu bytes: %s", count * sizeof(float), line);
}

/* --------------------------------------------------------------- runs */

static void *scratch_cb(void *ctx, size_t bytes)
{
    hp_comm_t *c = ctx;
    /* test knob: this rank's message buffers cannot be had (an error
     * message still fits, so the protocol can complete) */
    if (hp_cfg_i(&c->cfg, HP_S_TEST_NOMEM) == c->rank && c->nomem_call != c->ncalls + 1) {
        c->nomem_call = c->ncalls + 1;   /* the first request of each call fails */
        return NULL;
    }
    return hp_comm_scratch(c, bytes);
}

static void *scratch2_cb(void *ctx, size_t bytes)
{
    return hp_comm_scratch2(ctx, bytes);
}

static void *mem_scratch_cb(void *ctx, size_t bytes)
{
    hp_mem_t *m = ctx;
    return m->ops->scratch(m, bytes);
}

/* The failure agreement: every rank learns whether any failed, on the
 * host, or in stream order with the outcome left on the device (then the
 * host never learns it: *known_p = 0). */
static hp_status_t agree_failure(hp_comm_t *c, hp_dcall_t *d, hp_status_t st, int *known_p)
{
    int64_t any = st != HP_OK;
    hp_req_t rq = HP_REQ_NULL;
    hp_status_t as;

    *known_p = !d->async;
    if (d->async) {
        HP_CHECK_KEEP(c->front->async_flag(c, d, st), st);
        as = hp_tp_iagree(d->tp, HP_TP_INT64, d->dflag, 1, "the failure agreement of a compressed allreduce", &rq);
    } else {
        as = hp_tp_iagree(d->tp, HP_TP_INT64, &any, 1, "the failure agreement of a compressed allreduce", &rq);
    }
    if (as == HP_OK)
        as = hp_tp_wait(d->tp, &rq);
    if (as != HP_OK)
        return st != HP_OK ? st : as;
    return st == HP_OK && any != 0 ? HP_ERR_PEER : st;
}

/* One compressed call from its codecs to its end. */
static hp_status_t run_compressed(hp_comm_t *c, hp_dcall_t *d, hp_plan_t *plan, const hp_codecs_t *cc,
                                  const hp_plan_comm_t *pc, hp_plan_slot_t *explore, hp_count_t *rec)
{
    const int form = pc->form;
    const int sum_kind = plan->sum != NULL ? cc->sum_kind : cc->kind;
    hipress_comp_params_t cparams = *cc->p;
    const hp_comp_ext_t *ext = hp_comp_ext(cc->kind);
    float *exact = NULL;
    hp_res_buf_t *rb = NULL;
    hp_call_t call;
    unsigned folded = 0;
    int known, hier = plan->hier && c->hier.avail && !hp_mem_is_device(&d->mem);
    hp_status_t st = HP_OK, agreed;

    if (d->send != NULL)
        d->mem.ops->copy(&d->mem, d->data, d->send, d->count * sizeof(float));
    if (hp_cfg_i(&c->cfg, HP_S_VERIFY)) {
        /* every rank runs the exact sum, or none: its memory agreed first */
        int64_t missing = (exact = malloc(HP_MAX(d->count, 1) * sizeof(float))) == NULL;
        if (hp_tp_agree(d->tp, HP_TP_INT64, &missing, 1, "HIPRESS_VERIFY's memory") != HP_OK || missing ||
            c->front->exact(c, d, exact) != HP_OK) {
            free(exact);
            exact = NULL;
        }
    }
    if (form) {
        /* no residual: what this rank still holds travels in its data */
        fold_held(c, d);
        STAT_ADD(form_unbiased, 1);
    } else {
        rb = buffer_state(c, d, hp_comm_keeps_state(cc->kind, sum_kind));
    }
    /* this call's parameters: dgc's warm-up counts the calls of the
     * element count, the same on every rank (a buffer's own count is not:
     * its residual may have been evicted on one rank) */
    if (ext->call_params != NULL)
        ext->call_params(&cparams, rec != NULL ? rec->calls : 0);
    {
        hp_call_env_t env = {
            .tp = d->tp, .mem = &d->mem, .kind = cc->kind, .sum_kind = sum_kind, .params = &cparams,
            .res = c->res, .rb = rb, .seed = (uint64_t)hp_cfg_i(&c->cfg, HP_S_SEED), .call_no = c->ncalls,
            .corrupt = hp_cfg_i(&c->cfg, HP_S_TEST_CORRUPT) == c->rank,
            .kill = hp_cfg_i(&c->cfg, HP_S_TEST_KILL_RANK) == hp_g.world_rank &&
                    (unsigned long long)hp_cfg_i(&c->cfg, HP_S_TEST_KILL_CALL) == c->ncalls,
            .scratch = d->mem.ops->scratch != NULL ? mem_scratch_cb : scratch_cb,
            .scratch2 = scratch2_cb,
            .scratch_ctx = d->mem.ops->scratch != NULL ? (void *)&d->mem : (void *)c,
        };
        const hp_algo_desc_t *a = hp_algo_get(plan->algo);
        if (hier && env.scratch_ctx != (void *)c)
            env.scratch_ctx = c;
        STAT_ADD(algo_calls[a != NULL ? plan->algo : HP_ALGO_AUTO], 1);
        if (hier)
            STAT_ADD(hier_calls, 1);
        HP_CHECK_KEEP(hp_algo_run(&call, &env, d->data, d->count, plan->algo, plan->parts, hier ? &c->hier : NULL,
                                  &folded), st);
    }
    if (st == HP_OK)
        st = call.err;
    if (folded)
        STAT_ADD(res_folded, folded);
    if (rb != NULL)
        rb->calls++;
    if (rec != NULL)
        rec->calls++;
    c->ncalls++;
    if (!d->async)
        HP_CHECK_KEEP(d->mem.ops->sync(&d->mem), st);
    st = agree_failure(c, d, st, &known);
    agreed = st;
    HP_CHECK_KEEP(c->front->finish(c, d, known ? st : HP_OK), st);
    if (hp_cfg_i(&c->cfg, HP_S_VERIFY) && known && agreed == HP_OK) {
        /* (verified calls are never stream-ordered: their outcome is known) */
        float *got = hp_mem_is_device(&d->mem) ? malloc(HP_MAX(d->count, 1) * sizeof(float)) : d->data;
        if (got != NULL && got != d->data)
            d->mem.ops->copy(&d->mem, got, d->data, d->count * sizeof(float));
        hp_verify_report(d->tp, exact, got, d->count);
        if (got != d->data)
            free(got);
    }
    free(exact);
    if (explore != NULL && st == HP_OK && known)
        report_plan(pc, explore, d->t0, d->count);
    STAT_ADD(compressed, 1);
    STAT_ADD(front_compressed[c->front->id], 1);
    if (hp_mem_is_device(&d->mem))
        STAT_ADD(dev_compressed, 1);
    STAT_ADD(bytes_raw, d->count * (d->elem == HP_ELEM_F32 ? 4 : 2));
    STAT_ADD(bytes_wire, call.wire);
    STAT_ADD(nonfinite, call.nonfinite);
    STAT_ADD(excepts, call.excepts);
    STAT_ADD(ns_encode, (unsigned long long)(call.t_encode * 1e9));
    STAT_ADD(ns_decode, (unsigned long long)(call.t_decode * 1e9));
    STAT_ADD(ns_wait, (unsigned long long)(call.t_wait * 1e9));
    return st;
}

/* A plain plan: the user's own reduction, with what this rank still owes
 * for the buffer in its data. */
static hp_status_t run_plain(hp_comm_t *c, hp_dcall_t *d, const hp_plan_comm_t *pc, hp_plan_slot_t *explore)
{
    const void *send = d->send;
    hp_status_t st = HP_OK;
    if (held_residual(buffer_state(c, d, 0), d->count) != NULL) {
        if (send != NULL)
            d->mem.ops->copy(&d->mem, d->data, send, d->count * sizeof(float));
        send = NULL;
        fold_held(c, d);
    }
    HP_CHECK_KEEP(d->mem.ops->sync(&d->mem), st);
    if (st == HP_OK)
        st = c->front->plain(c, d, send);
    HP_CHECK_KEEP(c->front->finish(c, d, st), st);
    if (explore != NULL && st == HP_OK)
        report_plan(pc, explore, d->t0, d->count);
    return st;
}

/* ------------------------------------------------------------ driver */

hp_drive_res_t hp_drive(hp_comm_t *c, hp_dcall_t *d, hp_status_t *st_p, int *reason_p)
{
    hp_plan_t plan = {.compress = 0};
    hp_plan_slot_t *explore = NULL;
    hp_plan_comm_t pc;
    hp_codecs_t cc;
    hp_count_t *rec = NULL;
    hp_wd_wait_t wdw;
    int ok = 1, fresh = 0, begun = 0;
    hp_status_t st;

    *st_p = HP_OK;
    *reason_p = HP_ELIG_YES;
    d->t0 = hp_now();
    d->mem_agreed = d->mem_kind;
    hp_wd_start(hp_cfg_d(&hp_g.cfg, HP_S_TIMEOUT));
    /* the first call of a communicator or size class sets up and measures
     * with collectives: watched too */
    hp_wd_enter(&wdw, "the set-up of a compressed allreduce", -1);
    HP_CHECK_GOTO(c->front->ready(c, d), st, fail);
    if (c->front->flags & HP_FRONT_AGREE_CALLS) {
        HP_CHECK_GOTO(agree_call(c, d, &ok), st, fail);
        if (!ok) {
            hp_wd_leave(&wdw);
            *reason_p = HP_ELIG_PEER;
            return HP_DRIVE_PASS;
        }
    }
    HP_CHECK_GOTO(c->front->begin(c, d), st, fail);
    begun = 1;
    if (c->state == HP_COMM_NEW)
        HP_CHECK_GOTO(hp_drive_agree_settings(c, d->tp, !d->local_ok,
                                              "no codec for its device buffers (the CUDA module, HIPRESS_GPU=auto)"),
                      st, fail);
    if (c->state != HP_COMM_ON) {
        hp_wd_leave(&wdw);
        c->front->end(c, d);
        *reason_p = HP_ELIG_PEER;
        return HP_DRIVE_PASS;
    }
    st = c->front->widen(c, d);
    if (HP_ST_CLASS(st) == HP_ERR_NOMEM) {
        /* (agreed: every rank passes it on) */
        hp_wd_leave(&wdw);
        c->front->end(c, d);
        *reason_p = HP_ELIG_NOPLAN;
        return HP_DRIVE_PASS;
    }
    HP_CHECK_GOTO(st, st, fail);
    /* the staging verdict, then the plan keyed by the codecs it gives */
    rec = hp_counts_find(&c->counts, d->count, (uintptr_t)d->recv, &fresh);
    if (!(c->front->flags & HP_FRONT_AGREE_CALLS) && (c->staging_form == HP_FORM_BIASED ||
                                                       !hp_comm_keeps_state(c->kind, c->sum_kind) ||
                                                       c->layout == HP_LAYOUT_TRUST))
        d->form = 0;
    else if (!(c->front->flags & HP_FRONT_AGREE_CALLS) && c->layout == HP_LAYOUT_NONE)
        d->form = 1;
    else if (!(c->front->flags & HP_FRONT_AGREE_CALLS))
        HP_CHECK_GOTO(count_verdict(c, d, rec, fresh), st, fail);
    hp_comm_codecs(c, d->form, &cc);
    plan_comm(c, d, &cc, &pc);
    if (d->form && c->staging_form == HP_FORM_EXACT)
        st = HP_OK;
    else
        st = hp_plan_for(&c->planner, &pc, d->count, &plan, &explore);
    hp_wd_leave(&wdw);
    if (st != HP_OK) {
        /* the plan's failures are agreed (on every rank alike): the call
         * goes on unchanged, unless the transport itself failed */
        if (!(c->warned & HP_WARNED_NOPLAN) && c->rank == 0)
            HP_WARN(FRONT_FMT "no plan for a compressed %s of %zu floats (%s): passed through", FRONT_ARG(c),
                    c->front->call, d->count, hipress_status_string(st));
        c->warned |= HP_WARNED_NOPLAN;
        if (HP_ST_CLASS(st) == HP_ERR_MPI || HP_ST_CLASS(st) == HP_ERR_NCCL)
            goto fail_begun;
        c->front->end(c, d);
        *reason_p = HP_ELIG_NOPLAN;
        return HP_DRIVE_PASS;
    }
    if (!plan.compress) {
        STAT_ADD_P(d->form && c->staging_form == HP_FORM_EXACT ? &hp_g.stats.form_exact : &hp_g.stats.plan_plain, 1);
        st = run_plain(c, d, &pc, explore);
    } else {
        st = c->front->prepare != NULL
                 ? c->front->prepare(c, d, &plan, explore != NULL, &cc, plan.sum != NULL ? cc.sum_kind : cc.kind)
                 : HP_OK;
        if (HP_ST_CLASS(st) == HP_ERR_NOMEM) {
            /* (agreed: every rank sends this call plain) */
            STAT_ADD(plan_plain, 1);
            st = run_plain(c, d, &pc, NULL);
        } else if (st == HP_OK) {
            st = run_compressed(c, d, &plan, &cc, &pc, explore, rec);
        }
    }
    HP_CHECK_KEEP(c->front->end(c, d), st);
    hp_comm_warn_residuals(c);
    hp_comm_sync_stats(c);
    STAT_ADD(ns_total, (unsigned long long)((hp_now() - d->t0) * 1e9));
    *st_p = st;
    if (st != HP_OK) {
        STAT_ADD(errors, 1);
        HP_WARN(FRONT_FMT "compressed %s of %zu floats failed: %s%s", FRONT_ARG(c), c->front->call, d->count,
                hipress_status_string(st), c->front->on_failure);
    }
    return HP_DRIVE_DONE;

fail:
    hp_wd_leave(&wdw);
fail_begun:
    if (begun)
        c->front->end(c, d);
    STAT_ADD(errors, 1);
    HP_WARN(FRONT_FMT "compressed %s of %zu floats failed: %s", FRONT_ARG(c), c->front->call, d->count,
            hipress_status_string(st));
    *st_p = st;
    return HP_DRIVE_DONE;
}
