/*
 * The NCCL front end's compressed ncclAllReduce (HIPRESS_NCCL=compress,
 * experimental): the same call set-up as the MPI front end
 * (hp_call_setup.h), the same plan (src/plan: HIPRESS_ALGO and
 * HIPRESS_PARTITION_BYTES fix it, else the cost model's measurement and
 * the exploration of the first calls of a size class choose, every input
 * and time agreed across ranks) and the same algorithms (ring, tree, ps with
 * the compressor's sum codec at the owner, allgather, and a collective
 * compressor's own run: powersgd), over the NCCL transport
 * (src/transport/hp_tp_nccl.c: ncclSend/ncclRecv in groups on the caller's
 * stream, each message of the capacity both sides agreed).  So a call gives
 * the MPI path's bits for the same plan, data, call number and residuals,
 * and the same bits on every rank; ncclAvg then divides by N.  A float16
 * or bfloat16 call is widened into a float32 copy of the communicator's
 * (src/front/hp_nccl_elem.c), reduced as a float32 call (residuals keyed by the user's buffer)
 * and its result narrowed back, rounded to nearest even.
 *
 * A steady-state call of a dense format (float32, float16 or bfloat16) is
 * stream-ordered (hp_nccl_async.h).
 * Every other call is host-synchronous, NOT asynchronous as NCCL's contract
 * asks: the device backend's messages are in host memory, so a call waits
 * for the caller's stream, encodes, and the transport copies each
 * batch of messages to device memory, runs its group on the caller's
 * stream, waits for it and copies the received messages back.  When the
 * call returns, the result is in recvbuff and nothing of hipress is left
 * on the stream; the caller's CPU thread was blocked for the whole
 * collective.  Every such host wait is bounded by the CUDA module's wait
 * bound (half of HIPRESS_TIMEOUT: the wait fails, naming what it waited
 * for, and so does the call) and registered with the no-progress watchdog
 * (HIPRESS_TIMEOUT ends the process naming it, as on the MPI path): the
 * call's view of NCCL, its waits and the transport's hooks are
 * src/front/hp_nccl_ctx.c.
 *
 * Non-blocking communicators: every enqueue of hipress' own that NCCL
 * answers with ncclInProgress is polled out with ncclCommGetAsyncError, at
 * most HIPRESS_TIMEOUT seconds (then the call fails naming what it waited
 * for and enqueues nothing more).
 *
 * A message the decoders reject, or a rank's local failure (which sends
 * error messages), fails the call on every rank alike: the result is NaN
 * everywhere, the call returns ncclSuccess (a host-synchronous one with a
 * warning).  An error NCCL itself returns is returned to the caller (the
 * result is then NaN on this rank).  Staging buffers' form:
 * hp_nccl_form.h; HIPRESS_VERIFY: hp_nccl_verify.h.  The interposition
 * itself is wrap/hp_nccl_wrap.c.
 */
#define _GNU_SOURCE
#include "hp_front_nccl.h"
#include "hp_nccl_elem.h"
#include "hp_nccl_async.h"
#include "hp_nccl_ctx.h"
#include "hp_nccl_form.h"
#include "hp_nccl_verify.h"
#include "hp_algo.h"
#include "hp_backend.h"
#include "hp_call_setup.h"
#include "hp_plan.h"
#include "hp_global.h"
#include "hp_gpu.h"
#include "hp_tp_nccl.h"
#include "hp_watchdog.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct hp_nccl_cstate {
    int                  mode;       /* 0 not agreed yet, 1 compress, -1 pass through */
    int                  rank, size;
    int                  kind;       /* the compressor */
    int                  sum_base;   /* its sum codec (HIPRESS_SUM_CODEC resolved) */
    int                  layout;
    int                  nonblocking;
    hipress_comp_params_t params;
    hp_residual_store_t *res;
    hp_planner_t         planner;    /* this communicator's plans (keyed by the transport too) */
    unsigned long long   ncalls;     /* compressed calls (the algorithms' call number) */
    hp_nccl_dbuf_t       msgs;       /* device memory of the messages (and the agreements) */
    hp_nccl_dbuf_t       wide;       /* float32 copy of a 16-bit call's data */
    hp_nccl_form_t       form;       /* HIPRESS_STAGING_FORM's codecs and verdicts */
    int                  warned;
    void                *owner;      /* its codec contexts' owner (the CUDA module's) */
};


static const hp_gpu_ops_v2_t *codec(void)
{
    return hp_gpu_codec();
}

/* ---------------------------------------------------------- agreement */

/* The hash of every setting that must agree across ranks. */
static uint64_t agreed_hash(const hp_config_t *cfg)
{
    uint64_t h = 0;
    for (int id = 0; id < HP_S_COUNT; id++)
        if (hp_settings[id].agree)
            h = h * 0x100000001b3ULL ^ hp_config_hash(cfg, id);
    return h;
}

/* The first compressed call on the communicator: settings, codec and size
 * agreed over NCCL (max of [h, -h, !ok, N, -N], int64, on the caller's
 * stream).  Sets cs->mode to 1 or -1.  0, or -1 when NCCL failed (t->err). */
static int agree(hp_nccl_cstate_t *cs, const hp_config_t *cfg, hp_nccl_ctx_t *t, const hp_gpu_ptr_t *where)
{
    const hp_gpu_ops_v2_t *g = codec();
    const hp_nccl_xport_t *x = t->x;
    const hp_comp_t *c;
    hp_gpu_ptr_t kinds[2] = {*where, *where};
    long long v[5], out[5];
    int ok, kind;
    const char *why = NULL;

    cs->mode = -1;
    if (x->count == NULL || x->user_rank == NULL || x->count(t->comm, &cs->size) != ncclSuccess ||
        x->user_rank(t->comm, &cs->rank) != ncclSuccess) {
        HP_WARN("nccl: cannot read the communicator's size and rank: ncclAllReduce is not compressed on it");
        return 0;
    }
    /* without the module there is no device memory to agree in: this rank
     * passes through, and its peers' agreement waits for it (doc/gpu.md) */
    if (g == NULL || hp_nccl_dev_grow(&cs->msgs, where, sizeof(v), "compressed messages") != 0) {
        HP_WARN("nccl: HIPRESS_NCCL=compress needs the CUDA module's codec on every rank; this rank passes "
                "ncclAllReduce through (its peers must too, or the job hangs)");
        return 0;
    }
    kind = hp_comp_find(hp_cfg_s(cfg, HP_S_COMPRESSOR));
    ok = hp_gpu_compress_route(&hp_g.cfg, kinds, where, where);
    v[0] = (long long)(agreed_hash(cfg) >> 2);
    v[1] = -v[0];
    v[2] = !ok;
    v[3] = cs->size;
    v[4] = -(long long)cs->size;
    if (g->base.memcpy_h2d(cs->msgs.p, v, sizeof(v), &cs->msgs.where) != HP_GPU_OK) {
        t->err = ncclUnhandledCudaError;
        return -1;
    }
    if (hp_nccl_max(t, cs->msgs.p, 5, 0) != 0)
        return -1;
    if (hp_nccl_stream_wait(t, "the settings agreement of a compressed ncclAllReduce") != 0 ||
        g->base.memcpy_d2h(out, cs->msgs.p, sizeof(out), &cs->msgs.where) != HP_GPU_OK) {
        t->err = ncclUnhandledCudaError;
        return -1;
    }
    c = kind >= 0 ? hp_comp_get(kind) : NULL;
    if (out[0] != -out[1])
        why = "the ranks' settings differ (every HIPRESS_* setting that MPI_Init checks must be equal)";
    else if (out[2] != 0)
        why = "a rank cannot compress on its GPU (no CUDA module codec, or HIPRESS_GPU is not auto)";
    else if (out[3] != -out[4] || out[3] < 2)
        why = "the communicator has one rank";
    else if (c == NULL || kind == hp_kind_none)
        why = "the compressor is none";
    if (why != NULL) {
        if (cs->rank == 0)
            HP_WARN("nccl: ncclAllReduce is passed through on this communicator: %s", why);
        return 0;
    }
    cs->kind = kind;
    cs->layout = (int)hp_cfg_i(cfg, HP_S_EF_LAYOUT);
    hp_params_from_config(cfg, &cs->params);
    cs->sum_base = hp_comp_sum_kind(kind, (int)hp_cfg_i(cfg, HP_S_SUM_CODEC), &cs->params);
    hp_nccl_form_setup(&cs->form, cfg, kind, cs->sum_base, &cs->params);
    memset(&cs->planner, 0, sizeof(cs->planner));
    if (cs->res == NULL)
        cs->res = hp_residual_create((size_t)hp_cfg_i(cfg, HP_S_RESIDUAL_MAX_MB) << 20);
    else
        hp_residual_set_max(cs->res, (size_t)hp_cfg_i(cfg, HP_S_RESIDUAL_MAX_MB) << 20);
    if (cs->res == NULL) {
        t->err = ncclSystemError;   /* (only this rank: memory) */
        return -1;
    }
    cs->mode = 1;
    if (cs->rank == 0)
        HP_INFO("nccl: ncclAllReduce compressed on a%s communicator of %d ranks with %s (HIPRESS_ALGO=%s, "
                "HIPRESS_NCCL_ASYNC=%s)", cs->nonblocking ? " non-blocking" : "", cs->size,
                hp_cfg_s(cfg, HP_S_COMPRESSOR), hp_algo_name((int)hp_cfg_i(cfg, HP_S_ALGO)),
                hp_cfg_i(cfg, HP_S_NCCL_ASYNC) == HP_NCCL_ASYNC_AUTO ? "auto" : "off");
    return 0;
}

/* -------------------------------------------------------------- calls */

/* One call's plan, as the MPI path plans (src/front/hp_call.c plan_comm):
 * one flat communicator (the NCCL transport), device memory. */
static void plan_comm(hp_nccl_cstate_t *cs, const hp_nccl_codecs_t *cc, const hp_config_t *cfg, hp_transport_t *tp,
                      hp_mem_t *mem, hp_plan_comm_t *pc)
{
    memset(pc, 0, sizeof(*pc));
    pc->cfg = cfg;
    pc->kind = cc->kind;
    pc->sum_kind = cc->sum_kind;
    pc->params = cc->params;
    pc->form = cc->form;
    pc->rank = cs->rank;
    pc->size = cs->size;
    pc->hier_avail = 0;
    pc->node_size = pc->nodes = 1;
    pc->mem_kind = 1;   /* NCCL's buffers: device memory on every rank */
    pc->all = tp;
    pc->algo[0] = tp;
    pc->algo[1] = NULL;
    pc->node = NULL;
    pc->mem = mem;
}

/* Record an exploration call's time (agreed across ranks by the plan). */
static void report_plan(const hp_plan_comm_t *pc, hp_plan_slot_t *explore, double t0, size_t count)
{
    char line[96];
    hp_plan_report(pc, explore, hp_now() - t0, count, line, sizeof(line));
    if (line[0] != '\0')
        HP_INFO("nccl: plan for %zu bytes: %s", count * sizeof(float), line);
}

/* A call the plan sends plain: the user's reduction on the caller's stream,
 * with what this rank still owes for the buffer folded in (as the MPI
 * path's plain_call), waited for. */
static hp_status_t plain_call(hp_nccl_cstate_t *cs, hp_nccl_ctx_t *t, hp_mem_t *mem, const void *sendbuff,
                              void *recvbuff, void *key, size_t count, int avg)
{
    hp_res_buf_t *rb = hp_call_buffer_state(cs->res, mem, key, count, 0, cs->layout, NULL);
    float *r = hp_call_held_residual(rb, count);
    ncclRedOp_t op = ncclSum;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    if (avg)
        op = ncclAvg;
#else
    (void)avg;
#endif
    if (r != NULL) {
        if (sendbuff != recvbuff)
            mem->ops->copy(mem, recvbuff, sendbuff, count * sizeof(float));
        sendbuff = recvbuff;
        if (mem->ops->fold(mem, (float *)recvbuff, r, count))
            atomic_fetch_add_explicit(&hp_g.stats.res_folded, 1, memory_order_relaxed);
    }
    if (mem->ops->sync(mem) != HP_OK)
        return HP_ERR_DEVICE;
    if (hp_nccl_settle(t, t->x->allreduce(sendbuff, recvbuff, count, ncclFloat32, op, t->comm, t->stream),
                       "an ncclAllReduce the plan sent plain") != 0)
        return HP_ERR_MPI;
    return hp_nccl_stream_wait(t, "an ncclAllReduce the plan sent plain") == 0 ? HP_OK : HP_ERR_DEVICE;
}

#define INPUT_WAIT "a compressed ncclAllReduce's wait for its input"

/* One call, set up and planned as on the MPI path.  Returns 1 with *rc_p
 * when it was taken, 0 when it goes to NCCL unchanged (the plan could not
 * be made: on every rank alike, as the plan's failures are agreed). */
static int run_call(hp_nccl_cstate_t *cs, const hp_config_t *cfg, hp_nccl_ctx_t *t, const void *sendbuff,
                    void *user_recv, size_t count, int elem, int avg, ncclResult_t *rc_p)
{
    hipress_comp_params_t cparams;
    hp_transport_t tp;
    hp_plan_comm_t pc;
    hp_plan_t plan = {.compress = 0};
    hp_plan_slot_t *explore = NULL;
    hp_call_t call;
    hp_mem_t mem;
    hp_nccl_codecs_t cc;
    hp_nccl_verify_t vf;
    hp_res_buf_t *rb;
    hp_status_t st, ms;
    int sum_kind, agreed_ok = 0, narrowed_bad = 0, async, joined, agreed = 0, verdict;
    double t0 = hp_now();
    /* the data the algorithms reduce (float32): the user's receive buffer,
     * or for a 16-bit call a float copy that is narrowed into it at the
     * end; the user's receive buffer is the residual's key either way */
    void *recvbuff = user_recv;

    *rc_p = ncclSuccess;
    /* the producer of sendbuff is on the caller's stream: a host wait, or,
     * for a call that may be stream-ordered, the codec's streams joined to
     * it (below) */
    async = hp_nccl_async_candidate(cfg, elem);
    if (!async && hp_nccl_stream_wait(t, INPUT_WAIT) != 0) {
        *rc_p = ncclUnhandledCudaError;
        return 1;
    }
    /* (the transport's device staging, cs->msgs, is in the context of the
     * buffers the agreement saw) */
    if (hp_tp_nccl_init(&tp, &t->env, cs->rank, cs->size) != HP_OK) {
        *rc_p = ncclSystemError;
        return 1;
    }
    hp_mem_begin_owned(&mem, user_recv, &cs->owner);
    /* (what reads the input first is the codec's: a 16-bit call's widen,
     * the copy of an out-of-place one; a join that fails is a host wait) */
    joined = async && mem.cx != NULL && codec()->stream_join(mem.cx, t->stream) == HP_GPU_OK;
    if (async && !joined && hp_nccl_stream_wait(t, INPUT_WAIT) != 0) {
        hp_mem_end(&mem);
        hp_tp_fini(&tp);
        *rc_p = ncclUnhandledCudaError;
        return 1;
    }
    async = joined;
    if (elem != HP_NCCL_ELEM_F32) {
        if (hp_nccl_widen(&cs->wide, &mem, sendbuff, count, elem, &recvbuff) != 0) {
            hp_mem_end(&mem);
            hp_tp_fini(&tp);
            *rc_p = ncclUnhandledCudaError;
            return 1;
        }
        sendbuff = recvbuff;
    }
    /* the codecs (a staging buffer's form), then the plan keyed by them */
    verdict = hp_nccl_form_call(&cs->form, cs->res, t, &tp, user_recv, count, cs->kind, cs->sum_base, &cs->params,
                                &cc);
    plan_comm(cs, &cc, cfg, &tp, &mem, &pc);
    st = verdict < 0 ? HP_ERR_MPI : verdict ? HP_OK : hp_plan_for(&cs->planner, &pc, count, &plan, &explore);
    if (st != HP_OK) {
        hp_mem_end(&mem);
        hp_tp_fini(&tp);
        if (t->err != ncclSuccess || verdict < 0) {
            *rc_p = t->err != ncclSuccess ? t->err : ncclUnhandledCudaError;
            return 1;
        }
        if (!(cs->warned & 2) && cs->rank == 0)
            HP_WARN("nccl: no plan for a compressed ncclAllReduce of %zu floats (%s): passed through", count,
                    hipress_status_string(st));
        cs->warned |= 2;
        return 0;
    }
    if (!plan.compress) {
        st = async && hp_nccl_stream_wait(t, INPUT_WAIT) != 0 ? HP_ERR_DEVICE : HP_OK;
        if (st == HP_OK)
            st = plain_call(cs, t, &mem, sendbuff, recvbuff, user_recv, count, avg);
        if (hp_nccl_narrow_end(&mem, recvbuff, user_recv, count, elem) != 0 && st == HP_OK)
            st = HP_ERR_DEVICE;
        atomic_fetch_add_explicit(verdict ? &hp_g.stats.form_exact : &hp_g.stats.plan_plain, 1, memory_order_relaxed);
        if (explore != NULL && st == HP_OK)
            report_plan(&pc, explore, t0, count);
        hp_tp_fini(&tp);
        *rc_p = t->err != ncclSuccess ? t->err : st == HP_OK ? ncclSuccess : ncclUnhandledCudaError;
        return 1;
    }
    /* the sum codec where the algorithm has an owner stage (ps), else the
     * worker's (as the MPI path) */
    sum_kind = plan.sum != NULL ? cc.sum_kind : cc.kind;
    rb = hp_nccl_form_buffer(&cs->form, cs->res, &mem, user_recv, count, &cc, sum_kind);
    hp_call_params_for(cc.kind, cc.params, rb, &cparams);
    /* stream-ordered: a steady-state call of a dense format (the same
     * choice on every rank: agreed settings and plan) */
    async = async && mem.cx != NULL && mem.err == HP_OK &&
            hp_nccl_async_plan(plan.algo, explore != NULL, cc.kind, sum_kind, &cparams);
    if (async) {
        t->cx = mem.cx;
        hp_tp_fini(&tp);
        if (hp_nccl_async_dbuf(t, 64) == NULL ||
            hp_tp_nccl_init_async(&tp, &t->aenv, cs->rank, cs->size) != HP_OK ||
            hp_mem_device_msgs(&mem, hp_nccl_async_msgs, t) != HP_OK) {
            /* (this rank cannot take part: no peer may wait for it) */
            HP_WARN("nccl: cannot start a stream-ordered compressed ncclAllReduce: %s", codec()->base.last_error());
            hp_mem_end(&mem);
            *rc_p = ncclUnhandledCudaError;
            return 1;
        }
    } else if (joined && hp_nccl_stream_wait(t, INPUT_WAIT) != 0) {
        hp_mem_end(&mem);
        hp_tp_fini(&tp);
        *rc_p = ncclUnhandledCudaError;
        return 1;
    }
    memset(&call, 0, sizeof(call));
    call.err = mem.err;
    if (call.err == HP_OK && sendbuff != recvbuff)
        mem.ops->copy(&mem, recvbuff, sendbuff, count * sizeof(float));
    hp_nccl_verify_begin(&vf, cfg, &mem, recvbuff, count, avg, cs->size, t);
    hp_nccl_form_fold(&cc, cs->res, cs->layout, &mem, user_recv, (float *)recvbuff, count);
    {
        hp_call_env_t env = {
            .tp = &tp, .mem = &mem, .kind = cc.kind, .sum_kind = sum_kind, .params = &cparams, .res = cs->res,
            .rb = rb, .seed = (uint64_t)hp_cfg_i(cfg, HP_S_SEED), .call_no = cs->ncalls,
            .corrupt = hp_cfg_i(cfg, HP_S_TEST_CORRUPT) == cs->rank,
        };
        hp_call_prepare(&call, &env, (float *)recvbuff, count, 0, count);
    }
    call.part_elems = hp_plan_part_elems(&plan, count, cs->size, call.grain);
    call.scratch = hp_call_mem_scratch;
    call.scratch_ctx = &mem;
    {
        const hp_algo_desc_t *a = hp_algo_get(plan.algo);
        atomic_fetch_add_explicit(&hp_g.stats.algo_calls[a != NULL ? plan.algo : HP_ALGO_AUTO], 1,
                                  memory_order_relaxed);
        st = a != NULL ? a->run(&call) : hp_algo_collective(&call);
    }
    if (async) {
        /* agreed, NaN and released on the device, no wait: what failed is
         * known there only (nothing more to do here) */
        if (st == HP_OK)
            st = call.err;
        if (t->err == ncclSuccess &&
            hp_nccl_async_end(&mem, &tp, cs->msgs.p, st, (float *)recvbuff, count, avg, user_recv, elem, t->stream,
                              &agreed) == HP_OK)
            goto counted;
        if (st == HP_OK)
            st = t->err != ncclSuccess ? HP_ERR_MPI : HP_ERR_DEVICE;
    }
    ms = mem.ops->sync(&mem);
    if (st == HP_OK)
        st = call.err != HP_OK ? call.err : ms;
    if (agreed) {
        /* (the device's agreement was made; what followed it failed here) */
    } else if (t->err == ncclSuccess) {
        /* the failure agreement: a rank that failed makes every rank's
         * result NaN, so the replicas stay identical (contract 1) */
        int64_t any = 0;
        hp_req_t arq = HP_REQ_NULL;
        if (hp_tp_agree_flag_start(&tp, st != HP_OK, &any, &arq) != HP_OK || hp_tp_wait(&tp, &arq) != HP_OK)
            any = 1;
        if (any && st == HP_OK)
            st = HP_ERR_PEER;
        agreed_ok = st == HP_OK;   /* the same on every rank */
    } else if (st == HP_OK) {
        st = HP_ERR_MPI;
    }
    if (st == HP_OK && avg)
        st = hp_nccl_divide(&mem, (float *)recvbuff, count, cs->size);
    if (st != HP_OK) {
        hp_nccl_fill_nan(&mem, (float *)recvbuff, count);
        mem.ops->sync(&mem);
        atomic_fetch_add_explicit(&hp_g.stats.errors, 1, memory_order_relaxed);
        HP_WARN("nccl: compressed ncclAllReduce of %zu floats failed: %s%s%s; the result is NaN", count,
                hipress_status_string(st), t->err != ncclSuccess ? ", NCCL's error " : "",
                t->err != ncclSuccess ? (t->x->error_string != NULL ? t->x->error_string(t->err) : "?") : "");
    }
    /* (a failed call's device error, a message the device rejected, is
     * already its NaN on every rank: only a narrow that could not be made,
     * or an error of the end's wait after a call that succeeded, is the
     * narrowing's) */
    hp_nccl_verify_end(&vf, &tp, &mem, recvbuff, count, agreed_ok);
    narrowed_bad = hp_nccl_narrow(&mem, recvbuff, user_recv, count, elem) != 0;
    narrowed_bad |= hp_mem_end(&mem) != HP_OK && st == HP_OK && elem != HP_NCCL_ELEM_F32;
counted:
    if (rb != NULL)
        rb->calls++;
    cs->ncalls++;
    /* (the exploration's time agreement runs where the failure agreement
     * said every rank succeeded: on every rank or none) */
    if (explore != NULL && agreed_ok)
        report_plan(&pc, explore, t0, count);
    atomic_fetch_add_explicit(&hp_g.stats.nccl_compressed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_raw, count * (elem == HP_NCCL_ELEM_F32 ? 4 : 2),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_wire, tp.bytes_sent, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.nonfinite, call.nonfinite, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.ns_total, (unsigned long long)((hp_now() - t0) * 1e9),
                              memory_order_relaxed);
    hp_tp_fini(&tp);
    *rc_p = t->err != ncclSuccess ? t->err : narrowed_bad ? ncclUnhandledCudaError : ncclSuccess;
    return 1;
}

int hp_nccl_comp_allreduce(hp_nccl_cstate_t **cs_p, const hp_config_t *cfg, const hp_nccl_xport_t *x,
                           const void *sendbuff, void *recvbuff, size_t count, int elem, int avg,
                           int nonblocking, ncclComm_t comm, cudaStream_t stream, ncclResult_t *rc_p)
{
    hp_nccl_cstate_t *cs = *cs_p;
    hp_gpu_ptr_t where;
    hp_nccl_ctx_t t;

    *rc_p = ncclSuccess;
    if (cs != NULL && cs->mode < 0)
        return 0;
    /* NCCL's buffers are device memory on every rank: a host buffer (a
     * program's error, or a stand-in NCCL) goes to NCCL as it came */
    hp_gpu_ptr_query(recvbuff, &where);
    if (where.kind == HP_MEM_HOST)
        return 0;
    if (cs == NULL) {
        if ((cs = calloc(1, sizeof(*cs))) == NULL)
            return 0;
        *cs_p = cs;
    }
    cs->nonblocking = nonblocking;
    /* every host wait below is watched, as on the MPI path */
    hp_wd_start(hp_cfg_d(&hp_g.cfg, HP_S_TIMEOUT));
    hp_nccl_ctx_init(&t, x, comm, stream, hp_cfg_d(cfg, HP_S_TIMEOUT), &cs->msgs);
    if (cs->mode == 0) {
        if (agree(cs, cfg, &t, &where) != 0) {
            *rc_p = t.err != ncclSuccess ? t.err : ncclInternalError;
            return 1;
        }
        if (cs->mode < 0)
            return 0;
    }
    return run_call(cs, cfg, &t, sendbuff, recvbuff, count, elem, avg, rc_p);
}

void hp_nccl_comp_reset(hp_nccl_cstate_t *cs)
{
    if (cs != NULL)
        cs->mode = 0;
}

int hp_nccl_comp_residual(hp_nccl_cstate_t *cs, const void *buf, size_t count, float *out)
{
    hp_res_buf_t *rb;
    if (cs == NULL || cs->res == NULL) {
        memset(out, 0, count * sizeof(float));
        return 0;
    }
    rb = hp_residual_buffer(cs->res, (uintptr_t)buf, count, 0, HP_LAYOUT_TRUST, NULL);
    if (rb == NULL || rb->len[HP_RES_R] != count || rb->vec[HP_RES_R] == NULL) {
        memset(out, 0, count * sizeof(float));
        return 0;
    }
    return hp_mem_residual_read(rb, rb->vec[HP_RES_R], out, count);
}

void hp_nccl_comp_free(hp_nccl_cstate_t *cs)
{
    const hp_gpu_ops_v2_t *g = codec();
    if (cs == NULL)
        return;
    if (cs->res != NULL)
        hp_residual_destroy(cs->res, HP_RES_DROP_FREED);
    hp_mem_owner_release(&cs->owner);
    if (cs->msgs.p != NULL && g != NULL)
        g->dev_free(&cs->msgs.where, cs->msgs.p);
    if (cs->wide.p != NULL && g != NULL)
        g->dev_free(&cs->wide.where, cs->wide.p);
    free(cs);
}
