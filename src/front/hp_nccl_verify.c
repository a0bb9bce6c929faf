/*
 * HIPRESS_VERIFY on a compressed ncclAllReduce (hp_nccl_verify.h): a
 * debugging setting, so the call is host-synchronous and the exact sum
 * takes the simple road: a device copy of the input, the real
 * ncclAllReduce on it (NCCL's own sum: its order, not hipress'), a host
 * copy of the sum; after the call a host copy of the result, and the
 * report shared with the MPI front end (hp_verify.c).
 */
#include "hp_nccl_verify.h"
#include "hp_verify.h"
#include <stdlib.h>

/* The exact sum of n floats of device memory dev, in place, waited for. */
static int exact_sum(hp_nccl_ctx_t *t, float *dev, size_t n)
{
    const char *what = "HIPRESS_VERIFY's exact ncclAllReduce";
    if (t->err != ncclSuccess ||
        hp_nccl_settle(t, t->x->allreduce(dev, dev, n, ncclFloat32, ncclSum, t->comm, t->stream), what) != 0)
        return -1;
    return hp_nccl_stream_wait(t, what);
}

void hp_nccl_verify_begin(hp_nccl_verify_t *v, const hp_config_t *cfg, hp_mem_t *mem, const float *data,
                          size_t count, int avg, int ranks, hp_nccl_ctx_t *t)
{
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    const size_t bytes = count * sizeof(float);
    void *d = NULL;
    int ok;

    v->on = hp_cfg_i(cfg, HP_S_VERIFY) != 0;
    v->exact = NULL;
    if (!v->on)
        return;
    v->exact = malloc(bytes > 0 ? bytes : 1);
    if (v->exact == NULL || g->dev_alloc(&mem->where, bytes > 0 ? bytes : 1, &d) != HP_GPU_OK) {
        HP_WARN("nccl: HIPRESS_VERIFY: no memory for the exact sum of %zu floats: this rank cannot take part in "
                "its ncclAllReduce", count);
        free(v->exact);
        v->exact = NULL;
        return;
    }
    /* (the input's producers on the codec's streams, a widening or the
     * copy of sendbuff, are done before the copy is summed) */
    mem->ops->copy(mem, d, data, bytes);
    ok = mem->ops->sync(mem) == HP_OK;
    ok = exact_sum(t, d, count) == 0 && ok;
    ok = ok && g->base.memcpy_d2h(v->exact, d, bytes, &mem->where) == HP_GPU_OK;
    g->dev_free(&mem->where, d);
    if (!ok) {
        HP_WARN("nccl: HIPRESS_VERIFY: the exact ncclAllReduce of %zu floats failed: this call is not verified",
                count);
        free(v->exact);
        v->exact = NULL;
        return;
    }
    if (avg)
        for (size_t i = 0; i < count; i++)
            v->exact[i] = v->exact[i] / (float)ranks;
}

void hp_nccl_verify_end(hp_nccl_verify_t *v, hp_transport_t *tp, hp_mem_t *mem, const float *result, size_t count,
                        int report)
{
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    float *got = NULL;

    if (v->on && report) {
        got = malloc(count > 0 ? count * sizeof(float) : 1);
        if (got != NULL && g->base.memcpy_d2h(got, result, count * sizeof(float), &mem->where) != HP_GPU_OK) {
            free(got);
            got = NULL;
        }
        /* (every rank joins the identity agreement, whatever failed here) */
        hp_verify_report(tp, v->exact, got, count);
    }
    free(got);
    free(v->exact);
    v->exact = NULL;
}
