/*
 * The NCCL front end's compressed ncclAllReduce (HIPRESS_NCCL=compress,
 * experimental): the same call set-up as the MPI front end
 * (hp_call_setup.h) and the same allgather algorithm (src/algo), over the
 * NCCL transport (src/transport/hp_tp_nccl.c: ncclSend/ncclRecv in groups on
 * the caller's stream, each message of the capacity both sides agreed).
 * Each rank encodes its data (plus the residual it holds for the buffer)
 * with the device codec once, every rank decodes the N messages in rank
 * order and adds them (the same bits on every rank; ncclAvg then divides
 * by N).  One lossy stage: within every compressor's quality budget.
 *
 * Host-synchronous, NOT asynchronous as NCCL's contract asks: the device
 * backend's messages are in host memory (it was written for MPI), so a call
 * waits for the caller's stream, encodes, and the transport copies each
 * batch of messages to device memory, runs its group on the caller's
 * stream, waits for it and copies the received messages back.  When the
 * call returns, the result is in recvbuff and nothing of hipress is left
 * on the stream; the caller's CPU thread was blocked for the whole
 * collective.  The plan (ring, ps; the stream-ordered transport) is the
 * NCCL issue's.
 *
 * A message the decoders reject, or a rank's local failure (which sends
 * error messages), fails the call on every rank alike (every rank decodes
 * the same messages): the result is NaN everywhere, the call returns
 * ncclSuccess, and a warning is printed.  The interposition itself is
 * mpi_wrappers/hp_nccl_wrap.c.
 */
#define _GNU_SOURCE
#include "hp_front_nccl.h"
#include "hp_algo.h"
#include "hp_backend.h"
#include "hp_call_setup.h"
#include "hp_state.h"
#include "hp_tp_nccl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct hp_nccl_cstate {
    int                  mode;       /* 0 not agreed yet, 1 compress, -1 pass through */
    int                  rank, size;
    int                  kind;
    int                  layout;
    hipress_comp_params_t params;
    hp_residual_store_t *res;
    unsigned long long   ncalls;
    hp_gpu_ptr_t         where;      /* device of dbuf */
    void                *dbuf;       /* device memory of the messages */
    size_t               dbytes;
    int                  warned;
};


static const hp_gpu_ops_v2_t *codec(void)
{
    return hp_gpu_codec();
}

/* Device memory of at least `bytes` in where's context (kept, grown). */
static int dbuf_grow(hp_nccl_cstate_t *cs, const hp_gpu_ptr_t *where, size_t bytes)
{
    const hp_gpu_ops_v2_t *g = codec();
    void *p = NULL;
    if (cs->dbuf != NULL && cs->dbytes >= bytes && cs->where.ctx == where->ctx && cs->where.device == where->device)
        return 0;
    if (g == NULL)
        return -1;
    if (cs->dbuf != NULL) {
        g->dev_free(&cs->where, cs->dbuf);
        cs->dbuf = NULL;
        cs->dbytes = 0;
    }
    bytes = (bytes + 65535) & ~(size_t)65535;
    if (g->dev_alloc(where, bytes, &p) != HP_GPU_OK) {
        HP_WARN("nccl: no device memory for %zu bytes of compressed messages: %s", bytes, g->base.last_error());
        return -1;
    }
    cs->dbuf = p;
    cs->dbytes = bytes;
    cs->where = *where;
    cs->where.kind = HP_MEM_DEVICE;
    return 0;
}

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
 * stream).  Sets cs->mode to 1 or -1.  Returns the NCCL result. */
static ncclResult_t agree(hp_nccl_cstate_t *cs, const hp_config_t *cfg, const hp_nccl_xport_t *x,
                          const hp_gpu_ptr_t *where, ncclComm_t comm, cudaStream_t stream)
{
    const hp_gpu_ops_v2_t *g = codec();
    const hp_comp_t *c;
    hp_gpu_ptr_t kinds[2] = {*where, *where};
    long long v[5], out[5];
    int ok, kind;
    ncclResult_t rc;
    const char *why = NULL;

    cs->mode = -1;
    if (x->count == NULL || x->user_rank == NULL || x->count(comm, &cs->size) != ncclSuccess ||
        x->user_rank(comm, &cs->rank) != ncclSuccess) {
        HP_WARN("nccl: cannot read the communicator's size and rank: ncclAllReduce is not compressed on it");
        return ncclSuccess;
    }
    /* without the module there is no device memory to agree in: this rank
     * passes through, and its peers' agreement waits for it (doc/gpu.md) */
    if (g == NULL || dbuf_grow(cs, where, sizeof(v)) != 0) {
        HP_WARN("nccl: HIPRESS_NCCL=compress needs the CUDA module's codec on every rank; this rank passes "
                "ncclAllReduce through (its peers must too, or the job hangs)");
        return ncclSuccess;
    }
    kind = hp_comp_find(hp_cfg_s(cfg, HP_S_COMPRESSOR));
    ok = hp_gpu_compress_route(&hp_g.cfg, kinds, where, where);
    v[0] = (long long)(agreed_hash(cfg) >> 2);
    v[1] = -v[0];
    v[2] = !ok;
    v[3] = cs->size;
    v[4] = -(long long)cs->size;
    if (g->base.memcpy_h2d(cs->dbuf, v, sizeof(v), &cs->where) != HP_GPU_OK)
        return ncclUnhandledCudaError;
    rc = x->allreduce(cs->dbuf, cs->dbuf, 5, ncclInt64, ncclMax, comm, stream);
    if (rc != ncclSuccess)
        return rc;
    if (g->base.stream_sync(stream) != HP_GPU_OK || g->base.memcpy_d2h(out, cs->dbuf, sizeof(out), &cs->where) != HP_GPU_OK)
        return ncclUnhandledCudaError;
    c = kind >= 0 ? hp_comp_get(kind) : NULL;
    if (out[0] != -out[1])
        why = "the ranks' settings differ (every HIPRESS_* setting that MPI_Init checks must be equal)";
    else if (out[2] != 0)
        why = "a rank cannot compress on its GPU (no CUDA module codec, or HIPRESS_GPU is not auto)";
    else if (out[3] != -out[4] || out[3] < 2)
        why = "the communicator has one rank";
    else if (c == NULL || kind == hp_kind_none || (c->flags & HIPRESS_COMP_COLLECTIVE))
        why = "the compressor has no allgather form (none, powersgd)";
    if (why != NULL) {
        if (cs->rank == 0)
            HP_WARN("nccl: ncclAllReduce is passed through on this communicator: %s", why);
        return ncclSuccess;
    }
    cs->kind = kind;
    cs->layout = (int)hp_cfg_i(cfg, HP_S_EF_LAYOUT);
    hp_params_from_config(cfg, &cs->params);
    if (cs->res == NULL)
        cs->res = hp_residual_create((size_t)hp_cfg_i(cfg, HP_S_RESIDUAL_MAX_MB) << 20);
    else
        hp_residual_set_max(cs->res, (size_t)hp_cfg_i(cfg, HP_S_RESIDUAL_MAX_MB) << 20);
    if (cs->res == NULL)
        return ncclSystemError;   /* (only this rank: memory) */
    cs->mode = 1;
    if (cs->rank == 0)
        HP_INFO("nccl: ncclAllReduce compressed on a communicator of %d ranks with %s (allgather, "
                "host-synchronous)", cs->size, hp_cfg_s(cfg, HP_S_COMPRESSOR));
    return ncclSuccess;
}

/* NaN in recvbuff[0..count): the call failed on every rank. */
static void fill_nan(hp_mem_t *m, float *recv, size_t count)
{
    const hp_gpu_ops_v2_t *g = codec();
    if (m->cx != NULL && g->fill(m->cx, recv, NAN, count) == HP_GPU_OK)
        return;
    /* no codec context: through host memory, in pieces */
    {
        float h[1024];
        for (size_t i = 0; i < 1024; i++)
            h[i] = NAN;
        for (size_t off = 0; off < count; off += 1024) {
            size_t len = count - off < 1024 ? count - off : 1024;
            if (g->base.memcpy_h2d(recv + off, h, len * sizeof(float), &m->where) != HP_GPU_OK)
                break;
        }
    }
}

/* recvbuff /= N through a host copy (ncclAvg). */
static hp_status_t divide(hp_mem_t *m, float *recv, size_t count, int N)
{
    const hp_gpu_ops_v2_t *g = codec();
    float *h = malloc(count * sizeof(float));
    hp_status_t st = HP_OK;
    if (h == NULL)
        return HP_ERR_NOMEM;
    if (g->base.memcpy_d2h(h, recv, count * sizeof(float), &m->where) != HP_GPU_OK)
        st = HP_ERR_DEVICE;
    for (size_t i = 0; st == HP_OK && i < count; i++)
        h[i] = h[i] / (float)N;
    if (st == HP_OK && g->base.memcpy_h2d(recv, h, count * sizeof(float), &m->where) != HP_GPU_OK)
        st = HP_ERR_DEVICE;
    free(h);
    return st;
}

/* The NCCL transport's view of one call: the caller's communicator and
 * stream, NCCL's real point-to-point calls, the device copies. */
typedef struct {
    hp_nccl_cstate_t      *cs;
    const hp_nccl_xport_t *x;
    ncclComm_t             comm;
    cudaStream_t           stream;
} tp_ctx_t;

static int tp_group_start(void *c)
{
    return ((tp_ctx_t *)c)->x->group_start() == ncclSuccess ? 0 : -1;
}

static int tp_group_end(void *c)
{
    return ((tp_ctx_t *)c)->x->group_end() == ncclSuccess ? 0 : -1;
}

static int tp_send(void *c, const void *dev, size_t bytes, int peer)
{
    tp_ctx_t *t = c;
    return t->x->send(dev, bytes, ncclUint8, peer, t->comm, t->stream) == ncclSuccess ? 0 : -1;
}

static int tp_recv(void *c, void *dev, size_t bytes, int peer)
{
    tp_ctx_t *t = c;
    return t->x->recv(dev, bytes, ncclUint8, peer, t->comm, t->stream) == ncclSuccess ? 0 : -1;
}

static int tp_max(void *c, void *dev, size_t n, int is_double)
{
    tp_ctx_t *t = c;
    return t->x->allreduce(dev, dev, n, is_double ? ncclFloat64 : ncclInt64, ncclMax, t->comm, t->stream) ==
                   ncclSuccess ? 0 : -1;
}

static int tp_sync(void *c)
{
    return codec()->base.stream_sync(((tp_ctx_t *)c)->stream) == HP_GPU_OK ? 0 : -1;
}

static int tp_h2d(void *c, void *dev, const void *host, size_t bytes)
{
    return codec()->base.memcpy_h2d(dev, host, bytes, &((tp_ctx_t *)c)->cs->where) == HP_GPU_OK ? 0 : -1;
}

static int tp_d2h(void *c, void *host, const void *dev, size_t bytes)
{
    return codec()->base.memcpy_d2h(host, dev, bytes, &((tp_ctx_t *)c)->cs->where) == HP_GPU_OK ? 0 : -1;
}

static void *tp_staging(void *c, size_t bytes)
{
    tp_ctx_t *t = c;
    return dbuf_grow(t->cs, &t->cs->where, bytes) == 0 ? t->cs->dbuf : NULL;
}

static ncclResult_t run_call(hp_nccl_cstate_t *cs, const hp_config_t *cfg, const hp_nccl_xport_t *x,
                             const void *sendbuff, void *recvbuff, size_t count, int avg, ncclComm_t comm,
                             cudaStream_t stream)
{
    const hp_gpu_ops_v2_t *g = codec();
    tp_ctx_t ctx = {cs, x, comm, stream};
    const hp_tp_nccl_env_t tenv = {&ctx, tp_group_start, tp_group_end, tp_send, tp_recv, tp_max,
                                   tp_sync, tp_h2d, tp_d2h, tp_staging};
    hipress_comp_params_t cparams;
    hp_transport_t tp;
    hp_call_t call;
    hp_mem_t mem;
    hp_res_buf_t *rb;
    hp_status_t st, ms;
    int staging = 0;
    double t0 = hp_now();

    /* the producer of sendbuff is on the caller's stream */
    if (g->base.stream_sync(stream) != HP_GPU_OK)
        return ncclUnhandledCudaError;
    /* (the transport's device staging, cs->dbuf, is in the context of the
     * buffers the agreement saw) */
    if (hp_tp_nccl_init(&tp, &tenv, cs->rank, cs->size) != HP_OK)
        return ncclSystemError;
    hp_mem_begin(&mem, recvbuff);
    rb = hp_call_buffer_state(cs->res, &mem, recvbuff, count, hp_call_keeps_state(cs->kind, cs->kind), cs->layout, &staging);
    if (staging && !(cs->warned & 1)) {
        cs->warned |= 1;
        HP_WARN("nccl: the buffer at %p is reduced with more than one element count: error feedback is off "
                "for it (doc/usage.md, 'Error feedback and buffer layouts')", recvbuff);
    }
    hp_call_params_for(cs->kind, &cs->params, rb, &cparams);
    memset(&call, 0, sizeof(call));
    call.err = mem.err;
    if (call.err == HP_OK && sendbuff != recvbuff)
        mem.ops->copy(&mem, recvbuff, sendbuff, count * sizeof(float));
    {
        hp_call_env_t env = {
            .tp = &tp, .mem = &mem, .kind = cs->kind, .sum_kind = cs->kind /* allgather: no owner stage */, .params = &cparams, .res = cs->res, .rb = rb,
            .seed = (uint64_t)hp_cfg_i(cfg, HP_S_SEED), .call_no = cs->ncalls,
            .corrupt = hp_cfg_i(cfg, HP_S_TEST_CORRUPT) == cs->rank,
        };
        hp_call_prepare(&call, &env, (float *)recvbuff, count, 0, count);
    }
    call.scratch = hp_call_mem_scratch;
    call.scratch_ctx = &mem;
    /* one message per rank for the whole buffer (no partitions: every
     * message is one NCCL transfer of its capacity) */
    call.part_elems = 0;
    st = hp_algo_get(HP_ALGO_ALLGATHER)->run(&call);
    ms = mem.ops->sync(&mem);
    if (st == HP_OK)
        st = call.err != HP_OK ? call.err : ms;
    if (st == HP_OK && avg)
        st = divide(&mem, (float *)recvbuff, count, cs->size);
    if (st != HP_OK) {
        fill_nan(&mem, (float *)recvbuff, count);
        mem.ops->sync(&mem);
        atomic_fetch_add_explicit(&hp_g.stats.errors, 1, memory_order_relaxed);
        HP_WARN("nccl: compressed ncclAllReduce of %zu floats failed: %s; the result is NaN", count,
                hipress_status_string(st));
    }
    hp_mem_end(&mem);
    if (rb != NULL)
        rb->calls++;
    cs->ncalls++;
    atomic_fetch_add_explicit(&hp_g.stats.nccl_compressed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_raw, count * sizeof(float), memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.bytes_wire, tp.bytes_sent, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.nonfinite, call.nonfinite, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.ns_total, (unsigned long long)((hp_now() - t0) * 1e9),
                              memory_order_relaxed);
    hp_tp_fini(&tp);
    return ncclSuccess;
}

int hp_nccl_comp_allreduce(hp_nccl_cstate_t **cs_p, const hp_config_t *cfg, const hp_nccl_xport_t *x,
                           const void *sendbuff, void *recvbuff, size_t count, int avg, ncclComm_t comm,
                           cudaStream_t stream, ncclResult_t *rc_p)
{
    hp_nccl_cstate_t *cs = *cs_p;
    hp_gpu_ptr_t where;

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
    if (cs->mode == 0) {
        *rc_p = agree(cs, cfg, x, &where, comm, stream);
        if (*rc_p != ncclSuccess)
            return 1;
        if (cs->mode < 0)
            return 0;
    }
    *rc_p = run_call(cs, cfg, x, sendbuff, recvbuff, count, avg, comm, stream);
    return 1;
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
    if (cs->dbuf != NULL && g != NULL)
        g->dev_free(&cs->where, cs->dbuf);
    free(cs);
}
