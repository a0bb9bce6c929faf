/*
 * The NCCL front end's element adapter (hp_nccl_elem.h): 16-bit calls
 * widened into the communicator's float32 copy and narrowed back (the
 * module's conversion kernels, round to nearest even), ncclAvg's division
 * and a failed call's NaN.
 */
#include "hp_nccl_elem.h"
#include "hp_front.h"
#include "hp_ops.h"
#include <math.h>
#include <stdlib.h>

static const hp_gpu_ops_v2_t *codec(void)
{
    return hp_gpu_codec();
}

hp_status_t hp_nccl_widen(hp_comm_t *c, hp_nccl_ctx_t *t, hp_mem_t *mem, const void *src, size_t count, int elem,
                          float **data_p)
{
    const hp_gpu_ops_v2_t *g = codec();
    if (count * sizeof(float) > c->wide.agreed) {
        /* every rank grows at this call (the count is agreed), in the
         * call's stream order, and agrees: where any could not, every rank
         * passes the call on (HP_ERR_NOMEM) */
        int ok = mem->cx != NULL &&
                 hp_nccl_dbuf(t, &c->wide, &mem->where, count * sizeof(float), mem->cx, "a 16-bit call's float32 copy") ==
                     HP_OK, all = 0;
        hp_status_t st = hp_nccl_agree_ok(t, ok, &all);
        if (st != HP_OK)
            return st;
        if (!all)
            return HP_ERR_NOMEM;
        c->wide.agreed = c->wide.bytes;
    }
    *data_p = c->wide.p;
    if (g->convert(mem->cx, c->wide.p, src, count, elem == HP_ELEM_F16 ? HP_GPU_CVT_F16_F32 : HP_GPU_CVT_BF16_F32) !=
        HP_GPU_OK) {
        HP_WARN("nccl: widening a 16-bit ncclAllReduce of %zu elements failed: %s", count, g->base.last_error());
        if (mem->err == HP_OK)
            mem->err = HP_ERR_DEVICE;
    }
    return HP_OK;
}

hp_status_t hp_nccl_narrow(hp_mem_t *mem, const float *data, void *dst, size_t count, int elem)
{
    const hp_gpu_ops_v2_t *g = codec();
    if (elem == HP_ELEM_F32)
        return HP_OK;
    if (mem->cx == NULL || g->convert(mem->cx, dst, data, count,
                                      elem == HP_ELEM_F16 ? HP_GPU_CVT_F32_F16 : HP_GPU_CVT_F32_BF16) != HP_GPU_OK) {
        HP_WARN("nccl: narrowing a 16-bit ncclAllReduce's result of %zu elements failed: %s", count,
                g->base.last_error());
        return HP_ERR_DEVICE;
    }
    return HP_OK;
}

void hp_nccl_fill_nan(hp_mem_t *m, float *recv, size_t count)
{
    const hp_gpu_ops_v2_t *g = codec();
    float h[1024];
    if (m->cx != NULL && g->fill(m->cx, recv, NAN, count) == HP_GPU_OK)
        return;
    /* no codec context: through host memory, in pieces */
    for (size_t i = 0; i < 1024; i++)
        h[i] = NAN;
    for (size_t off = 0; off < count; off += 1024) {
        size_t len = count - off < 1024 ? count - off : 1024;
        if (g->base.memcpy_h2d(recv + off, h, len * sizeof(float), &m->where) != HP_GPU_OK)
            break;
    }
}

hp_status_t hp_nccl_divide(hp_mem_t *m, float *recv, size_t count, int N)
{
    const hp_gpu_ops_v2_t *g = codec();
    float *h;
    hp_status_t st = HP_OK;
    if (m->cx != NULL)
        return g->divide(m->cx, recv, count, (float)N) == HP_GPU_OK ? HP_OK : HP_ERR_DEVICE;
    if ((h = malloc(HP_MAX(count, 1) * sizeof(float))) == NULL)
        return HP_ERR_NOMEM;
    if (g->base.memcpy_d2h(h, recv, count * sizeof(float), &m->where) != HP_GPU_OK)
        st = HP_ERR_DEVICE;
    if (st == HP_OK)
        hp_ops_get(HP_ISA_AUTO)->div(h, count, (float)N);   /* the bits of the device's k_divide */
    if (st == HP_OK && g->base.memcpy_h2d(recv, h, count * sizeof(float), &m->where) != HP_GPU_OK)
        st = HP_ERR_DEVICE;
    free(h);
    return st;
}
