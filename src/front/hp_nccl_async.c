/*
 * Device-side endings of the NCCL front end's compressed ncclAllReduce
 * (hp_nccl_async.h).  A stream-ordered call (HIPRESS_NCCL_ASYNC=auto, a
 * steady-state float32, float16 or bfloat16 call of a format with device
 * messages -- the dense ones, graddrop, dgc -- with ring, ps, allgather or
 * tree) ends
 * without the host knowing its outcome: the failure agreement's value is
 * built on the device from this rank's local failure (known on the host)
 * and the codec's sticky flag (a message rejected on the device), reduced
 * with ncclMax in stream order, and turned into NaN on the device.
 */
#include "hp_nccl_async.h"
#include "hp_nccl_elem.h"
#include "hp_algo.h"
#include <math.h>
#include <stdlib.h>

static const hp_gpu_ops_v2_t *codec(void)
{
    return hp_gpu_codec();
}

void hp_nccl_fill_nan(hp_mem_t *m, float *recv, size_t count)
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

hp_status_t hp_nccl_divide(hp_mem_t *m, float *recv, size_t count, int N)
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

int hp_nccl_async_candidate(const hp_config_t *cfg, int elem)
{
    /* (a 16-bit call is widened after the codec's streams joined the
     * caller's, and narrowed before they are released to it; a verified
     * call, HIPRESS_VERIFY, compares on the host) */
    return hp_cfg_i(cfg, HP_S_NCCL_ASYNC) == HP_NCCL_ASYNC_AUTO && !hp_cfg_i(cfg, HP_S_VERIFY) &&
           (elem == HP_NCCL_ELEM_F32 || elem == HP_NCCL_ELEM_F16 || elem == HP_NCCL_ELEM_BF16);
}

int hp_nccl_async_plan(int algo, int explore, int kind, int sum_kind, const hipress_comp_params_t *p)
{
    if (explore)
        return 0;
    /* a built-in collective compressor (powersgd): its device run is
     * stream-ordered on device messages, its sums the `none` ring */
    if (hp_comp_is_collective(kind))
        return algo == HP_ALGO_AUTO && kind < HP_BUILTIN_COUNT && hp_mem_device_msgs_format(hp_kind_none, p);
    if (algo != HP_ALGO_RING && algo != HP_ALGO_PS && algo != HP_ALGO_ALLGATHER && algo != HP_ALGO_TREE)
        return 0;
    return hp_mem_device_msgs_format(kind, p) && (sum_kind == kind || hp_mem_device_msgs_format(sum_kind, p));
}

hp_status_t hp_nccl_async_end(hp_mem_t *m, hp_transport_t *tp, void *dflag, hp_status_t st, float *recv,
                              size_t count, int avg, void *user, int elem, void *stream, int *agreed_p)
{
    const hp_gpu_ops_v2_t *g = codec();
    uint32_t *word = NULL;
    hp_req_t rq = HP_REQ_NULL;
    int bad = 0;

    *agreed_p = 0;
    if (m->cx == NULL)
        return HP_ERR_DEVICE;
    /* one non-negative int64: the local failure in its high half (1.0f's
     * bits), the sticky flag in its low half (little-endian) */
    bad |= g->fill(m->cx, (float *)dflag, st != HP_OK ? 1.0f : 0.0f, 2) != HP_GPU_OK;
    bad |= g->bad_word(m->cx, &word) != HP_GPU_OK || g->copy(m->cx, dflag, word, 4) != HP_GPU_OK;
    if (bad)
        return HP_ERR_DEVICE;
    /* (the same ncclAllReduce of one int64 as the host-synchronous
     * agreement: the ranks' NCCL calls match whichever form each took) */
    *agreed_p = 1;
    if (hp_tp_iagree(tp, HP_TP_INT64, dflag, 1, "the failure agreement of a compressed allreduce", &rq) != HP_OK ||
        hp_tp_wait(tp, &rq) != HP_OK)
        return HP_ERR_MPI;
    /* (ncclAvg: the host's float division, then NaN where any rank failed;
     * a 16-bit call's result narrowed into the user's buffer before the
     * caller's stream is made to wait for the codec) */
    if ((avg && g->divide(m->cx, recv, count, (float)tp->size) != HP_GPU_OK) ||
        g->nan_if(m->cx, recv, count, dflag, 8) != HP_GPU_OK || hp_nccl_narrow(m, recv, user, count, elem) != 0 ||
        g->stream_release(m->cx, stream) != HP_GPU_OK || g->call_release(m->cx) != HP_GPU_OK)
        return HP_ERR_DEVICE;
    m->cx = NULL;
    return HP_OK;
}
