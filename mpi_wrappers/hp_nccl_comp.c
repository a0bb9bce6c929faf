/*
 * The experimental compressed ncclAllReduce (HIPRESS_NCCL=compress).
 *
 * One algorithm, allgather: each rank encodes its send buffer (plus the
 * residual it holds for the buffer) with the device codec into a message of
 * fixed capacity (the compressor's bound for the count), the messages are
 * exchanged with one ncclAllGather on the caller's stream, and every rank
 * decodes the N messages in rank order and adds them (the same bits on every
 * rank; ncclAvg then divides by N).  One lossy stage: within every
 * compressor's quality budget.
 *
 * Host-synchronous, NOT asynchronous as NCCL's contract asks: the device
 * codec hands its messages to host memory (it was written for MPI), so a
 * call waits for the caller's stream, encodes, copies the message to device
 * memory, enqueues the ncclAllGather on the caller's stream, waits for it,
 * copies the messages back and decodes.  When the call returns, the result
 * is in recvbuff and nothing of hipress is left on the stream; the caller's
 * CPU thread was blocked for the whole collective (PyTorch's overlap of
 * communication with the backward pass is lost).
 *
 * Slot layout of the exchanged messages: an 8-byte length, then the message
 * (header and payload), padded to `slot` bytes (a multiple of 16).  A length
 * beyond the capacity, or a message the decoders reject, fails the call on
 * every rank alike (every rank decodes the same bytes): the result is NaN
 * everywhere, the call returns ncclSuccess, and a warning is printed.
 */
#define _GNU_SOURCE
#include "hp_nccl_comp.h"
#include "hp_algo.h"
#include "hp_backend.h"
#include "hp_ops_sparse.h"
#include "hp_state.h"
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

#define SLOT_LEN_BYTES 8

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

/* The largest message of this rank's encode of n elements (contribs 1):
 * a sparse compressor's message goes dense only when its density says so
 * (hp_call_encode), never because of the data, so its bound is the sparse
 * one unless then. */
static size_t msg_cap(int kind, size_t n, const hipress_comp_params_t *p)
{
    const hp_comp_t *c = hp_comp_get(kind);
    if (c->flags & HIPRESS_COMP_SPARSE) {
        hipress_comp_params_t sp = *p;
        sp.sparse_ratio = hp_sparse_density(1, p);
        if (8 * hp_sparse_k_blocks(n, &sp) < 4 * n)
            return HP_MSG_HEADER + c->max_payload(n, &sp) + HP_MSG_EXCEPT_BYTES;
    }
    return hp_msg_max_bytes(kind, n, p) + HP_MSG_EXCEPT_BYTES;
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

static ncclResult_t run_call(hp_nccl_cstate_t *cs, const hp_config_t *cfg, const hp_nccl_xport_t *x,
                             const void *sendbuff, void *recvbuff, size_t count, int avg, ncclComm_t comm,
                             cudaStream_t stream)
{
    const hp_gpu_ops_v2_t *g = codec();
    const size_t N = (size_t)cs->size;
    const hp_comp_t *comp = hp_comp_get(cs->kind);
    const hp_comp_ext_t *ext = hp_comp_ext(cs->kind);
    hipress_comp_params_t cparams = cs->params;
    hp_transport_t tp;
    hp_call_t call;
    hp_mem_t mem;
    hp_res_buf_t *rb = NULL;
    unsigned char *hmine, *hall, errmsg[SLOT_LEN_BYTES + 64];
    unsigned char *dmine, *dall;
    size_t cap, slot;
    uint64_t len64;
    hp_status_t st = HP_OK, ms;
    ncclResult_t rc;
    int keeps_state, staging = 0;
    double t0 = hp_now();

    /* the producer of sendbuff is on the caller's stream */
    if (g->base.stream_sync(stream) != HP_GPU_OK)
        return ncclUnhandledCudaError;
    hp_mem_begin(&mem, recvbuff);
    keeps_state = (comp->flags & (HIPRESS_COMP_EF | HIPRESS_COMP_MOMENTUM)) != 0;
    if (cs->layout != HP_LAYOUT_NONE) {
        rb = hp_residual_buffer(cs->res, (uintptr_t)recvbuff, count, keeps_state, (hp_layout_t)cs->layout, &staging);
        if (rb != NULL && !hp_residual_bind(rb, hp_mem_residual(&mem)))
            rb = NULL;
        if (staging && !(cs->warned & 1)) {
            cs->warned |= 1;
            HP_WARN("nccl: the buffer at %p is reduced with more than one element count: error feedback is off "
                    "for it (doc/usage.md, 'Error feedback and buffer layouts')", recvbuff);
        }
    }
    if (ext->call_params != NULL)
        ext->call_params(&cparams, rb != NULL ? rb->calls : 0);
    cap = msg_cap(cs->kind, count, &cparams);
    slot = (SLOT_LEN_BYTES + cap + 15) & ~(size_t)15;
    /* without device memory for the messages this rank cannot take part:
     * its peers then wait in the ncclAllGather (as for NCCL's own
     * out-of-memory errors) */
    if (dbuf_grow(cs, &mem.where, (N + 1) * slot) != 0) {
        hp_mem_end(&mem);
        return ncclSystemError;
    }
    dmine = (unsigned char *)cs->dbuf;
    dall = dmine + slot;
    hmine = mem.err == HP_OK ? (unsigned char *)mem.ops->scratch(&mem, (N + 1) * slot) : NULL;
    hall = hmine != NULL ? hmine + slot : NULL;

    memset(&tp, 0, sizeof(tp));
    tp.rank = cs->rank;
    tp.size = cs->size;
    memset(&call, 0, sizeof(call));
    call.err = mem.err != HP_OK ? mem.err : hmine == NULL ? HP_ERR_NOMEM : HP_OK;
    call.tp = &tp;
    call.mem = &mem;
    call.buf = (float *)recvbuff;
    call.n = count;
    call.kind = cs->kind;
    call.params = &cparams;
    call.res = cs->res;
    call.rb = rb;
    call.resid = (rb != NULL && (comp->flags & HIPRESS_COMP_EF)) ? hp_residual_vec(cs->res, rb, HP_RES_R, count)
                 : rb != NULL && rb->len[HP_RES_R] == count ? rb->vec[HP_RES_R] : NULL;
    call.grain = hp_comp_grain(cs->kind, &cparams);
    call.seed = (uint64_t)hp_cfg_i(cfg, HP_S_SEED);
    call.call_no = cs->ncalls;
    call.corrupt = hp_cfg_i(cfg, HP_S_TEST_CORRUPT) == cs->rank;
    if (call.err == HP_OK && sendbuff != recvbuff)
        mem.ops->copy(&mem, recvbuff, sendbuff, count * sizeof(float));
    if (call.err == HP_OK && rb != NULL) {
        float m = ext->momentum != NULL ? ext->momentum(&cparams) : 0.0f;
        if (m > 0.0f) {
            float *u = hp_residual_vec(cs->res, rb, HP_RES_U, count);
            if (u != NULL && mem.ops->momentum(&mem, u, (float *)recvbuff, m, count))
                call.mom = u;
        } else if (comp->flags & HIPRESS_COMP_MOMENTUM) {
            call.state = hp_residual_vec(cs->res, rb, HP_RES_U, count);
        }
    }

    /* encode this rank's message (an error message after a local failure:
     * its peers then fail the call too) */
    if (hmine != NULL) {
        len64 = hp_call_encode(&call, 0, count, 0, 1, hmine + SLOT_LEN_BYTES, cap);
        memcpy(hmine, &len64, SLOT_LEN_BYTES);
    } else {
        hmine = errmsg;
        len64 = hp_msg_error(errmsg + SLOT_LEN_BYTES, count);
        memcpy(errmsg, &len64, SLOT_LEN_BYTES);
    }
    ms = mem.ops->sync(&mem);
    if (ms != HP_OK && hmine != errmsg) {
        /* the encode's device work failed: the peers must fail too */
        if (call.err == HP_OK)
            call.err = ms;
        len64 = hp_msg_error(hmine + SLOT_LEN_BYTES, count);
        memcpy(hmine, &len64, SLOT_LEN_BYTES);
    }
    if (g->base.memcpy_h2d(dmine, hmine, SLOT_LEN_BYTES + (size_t)len64, &cs->where) != HP_GPU_OK) {
        hp_mem_end(&mem);
        return ncclUnhandledCudaError;
    }
    /* the exchange, on the caller's stream */
    rc = x->allgather(dmine, dall, slot, ncclUint8, comm, stream);
    if (rc != ncclSuccess) {
        hp_mem_end(&mem);
        return rc;
    }
    if (g->base.stream_sync(stream) != HP_GPU_OK) {
        hp_mem_end(&mem);
        return ncclUnhandledCudaError;
    }
    if (hall != NULL && call.err == HP_OK) {
        void *bufs[HP_DECODE_MANY_MAX];
        size_t lens[HP_DECODE_MANY_MAX];
        if (g->base.memcpy_d2h(hall, dall, N * slot, &cs->where) != HP_GPU_OK)
            call.err = HP_ERR_DEVICE;
        for (size_t j = 0; j < N && call.err == HP_OK; j++) {
            unsigned char *in = hall + j * slot;
            size_t len;
            memcpy(&len64, in, SLOT_LEN_BYTES);
            len = len64 <= cap ? (size_t)len64 : 0;   /* 0: rejected by the decoder */
            if (N <= HP_DECODE_MANY_MAX) {
                bufs[j] = in + SLOT_LEN_BYTES;
                lens[j] = len;
            } else {
                hp_call_decode(&call, in + SLOT_LEN_BYTES, len, 0, count, j != 0);
            }
        }
        if (N <= HP_DECODE_MANY_MAX && call.err == HP_OK)
            hp_call_decode_many(&call, bufs, lens, (int)N, 0, count, 0);
    }
    ms = mem.ops->sync(&mem);
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
    atomic_fetch_add_explicit(&hp_g.stats.bytes_wire, (unsigned long long)(N - 1) * slot, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.nonfinite, call.nonfinite, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.ns_total, (unsigned long long)((hp_now() - t0) * 1e9),
                              memory_order_relaxed);
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
