/*
 * The NCCL front end's device memory of its own (hp_nccl_dbuf_t: the
 * messages' staging, a 16-bit call's float32 copy) and the element types of
 * a compressed ncclAllReduce: a float16 or bfloat16 call is widened into
 * float32, reduced as a float32 call, and its result narrowed back.
 */
#include "hp_nccl_elem.h"

static const hp_gpu_ops_v2_t *codec(void)
{
    return hp_gpu_codec();
}

int hp_nccl_dev_grow(hp_nccl_dbuf_t *b, const hp_gpu_ptr_t *where, size_t bytes, const char *what)
{
    const hp_gpu_ops_v2_t *g = codec();
    void *p = NULL;
    if (b->p != NULL && b->bytes >= bytes && b->where.ctx == where->ctx && b->where.device == where->device)
        return 0;
    if (g == NULL)
        return -1;
    if (b->p != NULL) {
        g->dev_free(&b->where, b->p);
        b->p = NULL;
        b->bytes = 0;
    }
    bytes = (bytes + 65535) & ~(size_t)65535;
    if (g->dev_alloc(where, bytes, &p) != HP_GPU_OK) {
        HP_WARN("nccl: no device memory for %zu bytes of %s: %s", bytes, what, g->base.last_error());
        return -1;
    }
    b->p = p;
    b->bytes = bytes;
    b->where = *where;
    b->where.kind = HP_MEM_DEVICE;
    return 0;
}

int hp_nccl_widen(hp_nccl_dbuf_t *wide, hp_mem_t *mem, const void *src, size_t count, int elem, void **data_p)
{
    const hp_gpu_ops_v2_t *g = codec();
    /* (grown in the call's stream order: no wait, no synchronisation of the device) */
    if (mem->cx == NULL || hp_gpu_dev_grow(mem->cx, &mem->where, count * sizeof(float), &wide->p, &wide->bytes,
                                           &wide->where, "a 16-bit call's float32 copy") != 0)
        return -1;
    *data_p = wide->p;
    if (g->convert(mem->cx, wide->p, src, count,
                   elem == HP_NCCL_ELEM_F16 ? HP_GPU_CVT_F16_F32 : HP_GPU_CVT_BF16_F32) != HP_GPU_OK) {
        HP_WARN("nccl: widening a 16-bit ncclAllReduce of %zu elements failed: %s", count, g->base.last_error());
        if (mem->err == HP_OK)
            mem->err = HP_ERR_DEVICE;
    }
    return 0;
}

int hp_nccl_narrow(hp_mem_t *mem, const void *data, void *dst, size_t count, int elem)
{
    const hp_gpu_ops_v2_t *g = codec();
    if (elem == HP_NCCL_ELEM_F32)
        return 0;
    if (mem->cx == NULL || g->convert(mem->cx, dst, data, count,
                                      elem == HP_NCCL_ELEM_F16 ? HP_GPU_CVT_F32_F16 : HP_GPU_CVT_F32_BF16) !=
                               HP_GPU_OK) {
        HP_WARN("nccl: narrowing a 16-bit ncclAllReduce's result of %zu elements failed: %s", count,
                g->base.last_error());
        return -1;
    }
    return 0;
}

int hp_nccl_narrow_end(hp_mem_t *mem, const void *data, void *dst, size_t count, int elem)
{
    int bad = hp_nccl_narrow(mem, data, dst, count, elem) != 0;
    return hp_mem_end(mem) != HP_OK || bad ? -1 : 0;
}
