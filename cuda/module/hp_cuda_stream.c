/*
 * The CUDA module's copies, streams, events and device memory outside the
 * codec contexts (hp_cuda_mod.h), and the self-test kernel.
 *
 * The module's copy stream of a context: non-blocking, made at the first
 * need and kept.  The staging copies, allocation's zero fill and the
 * probe run on it, never on the legacy default stream, so they wait for
 * nothing the application queued there (a CUDA-aware MPI's copies do the
 * same: the application has finished writing a buffer it hands to MPI).
 */
#include "hp_cuda_mod.h"
#include "hp_cuda_kernels.h"
#include <stdio.h>
#include <stdlib.h>

/* --------------------------------------------------------------- copies */

#define XFER_MAX 32
static struct {
    CUcontext ctx;
    CUstream  s;
} xfer[XFER_MAX];

int hp_cu_xfer_stream(CUstream *s_p)
{
    CUcontext cur = NULL;
    CUresult rc;
    int i, st = HP_GPU_OK;
    if ((rc = hp_cu.CtxGetCurrent(&cur)) != CUDA_SUCCESS)
        return CU_FAIL("cuCtxGetCurrent", rc);
    if (cur == NULL)
        return hp_cu_fail(HP_GPU_ERR_DEVICE, "no CUDA context for %s", hp_cu_op_name());
    pthread_mutex_lock(&hp_cu.lock);
    for (i = 0; i < XFER_MAX && xfer[i].ctx != NULL && xfer[i].ctx != cur; i++)
        ;
    if (i == XFER_MAX)
        st = hp_cu_fail(HP_GPU_ERR_UNSUPPORTED, "more than %d CUDA contexts", XFER_MAX);
    else if (xfer[i].ctx == NULL && (rc = hp_cu.StreamCreate(&xfer[i].s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        st = CU_FAIL("cuStreamCreate", rc);
    else if (xfer[i].ctx == NULL)
        xfer[i].ctx = cur;
    if (st == HP_GPU_OK)
        *s_p = xfer[i].s;
    pthread_mutex_unlock(&hp_cu.lock);
    return st;
}

/* A copy between host and device memory on the copy stream, waited for. */
static int xfer_copy(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where, int to_device)
{
    hp_cu_scope_t sc;
    CUstream s = NULL;
    CUresult rc;
    int st;
    NEED_DRIVER();
    if ((st = hp_cu_scope_enter(where, &sc)) != HP_GPU_OK)
        return st;
    hp_cu_op_set("a copy of %zu bytes %s", bytes, to_device ? "to the device" : "to host memory");
    if ((st = hp_cu_xfer_stream(&s)) == HP_GPU_OK) {
        rc = to_device ? hp_cu.MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, s)
                       : hp_cu.MemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, bytes, s);
        st = rc != CUDA_SUCCESS ? CU_FAIL(to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync", rc)
                                : hp_cu_wait(0, s, "the module's copy stream");
    }
    hp_cu_scope_exit(&sc);
    return st;
}

int hpcu_memcpy_d2h(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where)
{
    return xfer_copy(dst, src, bytes, where, 0);
}

int hpcu_memcpy_h2d(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where)
{
    return xfer_copy(dst, src, bytes, where, 1);
}

int hpcu_host_alloc(size_t bytes, const hp_gpu_ptr_t *where, void **p_p)
{
    IN_SCOPE(where, "cuMemHostAlloc", hp_cu.MemHostAlloc(p_p, bytes, CU_MEMHOSTALLOC_PORTABLE));
}

int hpcu_host_free(void *p, const hp_gpu_ptr_t *where)
{
    IN_SCOPE(where, "cuMemFreeHost", hp_cu.MemFreeHost(p));
}

/* ------------------------------------------------------ streams, events */

int hpcu_stream_create(const hp_gpu_ptr_t *where, void **stream_p)
{
    IN_SCOPE(where, "cuStreamCreate", hp_cu.StreamCreate((CUstream *)stream_p, CU_STREAM_NON_BLOCKING));
}

int hpcu_stream_destroy(void *stream, const hp_gpu_ptr_t *where)
{
    IN_SCOPE(where, "cuStreamDestroy", hp_cu.StreamDestroy((CUstream)stream));
}

/* Bounded (hp_cu_wait), as every wait of the module. */
int hpcu_stream_sync(void *stream)
{
    NEED_DRIVER();
    hp_cu_op_set("the work queued");
    return hp_cu_wait(0, stream, "the stream");
}

int hpcu_stream_wait(void *stream, const char *what)
{
    NEED_DRIVER();
    hp_cu_op_set("%s", what != NULL ? what : "the work queued");
    return hp_cu_wait(0, stream, "the stream");
}

int hpcu_stream_capturing(void *stream, int *capturing_p)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc;
    NEED_DRIVER();
    rc = hp_cu.StreamIsCapturing((CUstream)stream, &status);
    if (rc != CUDA_SUCCESS)
        return CU_FAIL("cuStreamIsCapturing", rc);
    *capturing_p = status != CU_STREAM_CAPTURE_STATUS_NONE;
    return HP_GPU_OK;
}

int hpcu_event_create(const hp_gpu_ptr_t *where, void **event_p)
{
    IN_SCOPE(where, "cuEventCreate", hp_cu.EventCreate((CUevent *)event_p, CU_EVENT_DISABLE_TIMING));
}

int hpcu_event_record(void *event, void *stream)
{
    CUresult rc;
    NEED_DRIVER();
    rc = hp_cu.EventRecord((CUevent)event, (CUstream)stream);
    return rc == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL("cuEventRecord", rc);
}

int hpcu_event_sync(void *event)
{
    NEED_DRIVER();
    hp_cu_op_set("the work before an event");
    return hp_cu_wait(1, event, "the event");
}

int hpcu_event_destroy(void *event, const hp_gpu_ptr_t *where)
{
    IN_SCOPE(where, "cuEventDestroy", hp_cu.EventDestroy((CUevent)event));
}

/* ------------------------------------------------------------ selftest */

int hpcu_selftest(int device)
{
    char err[200] = "";
    NEED_DRIVER();
#ifdef HP_KL_TRANSLATE
    (void)device;
    snprintf(err, sizeof(err), "the emulated module runs no kernel");
    return hp_cu_fail(HP_GPU_ERR_UNSUPPORTED, "%s", err);
#else
    if (hp_cuda_selftest(device, err, sizeof(err)) != 0)
        return hp_cu_fail(HP_GPU_ERR_DEVICE, "%s", err);
    return HP_GPU_OK;
#endif
}

/* ------------------------------------------- device memory outside calls */

int hpcu_dev_alloc(const hp_gpu_ptr_t *where, size_t bytes, void **p_p)
{
    hp_cu_scope_t sc;
    CUstream s = NULL;
    CUdeviceptr p = 0;
    CUresult rc;
    int st;
    NEED_DRIVER();
    if ((st = hp_cu_scope_enter(where, &sc)) != HP_GPU_OK)
        return st;
    hp_cu_op_set("the zero fill of %zu bytes of new device memory", bytes);
    /* zero-filled on the module's copy stream, not the legacy one */
    if ((rc = hp_cu.MemAlloc(&p, bytes ? bytes : 1)) != CUDA_SUCCESS)
        st = CU_FAIL("cuMemAlloc", rc);
    else if ((st = hp_cu_xfer_stream(&s)) == HP_GPU_OK && (rc = hp_cu.MemsetD8Async(p, 0, bytes, s)) != CUDA_SUCCESS)
        st = CU_FAIL("cuMemsetD8Async", rc);
    else if (st == HP_GPU_OK)
        st = hp_cu_wait(0, s, "the module's copy stream");
    if (st != HP_GPU_OK && p != 0)
        hp_cu.MemFree(p);
    hp_cu_scope_exit(&sc);
    if (st == HP_GPU_OK)
        *p_p = (void *)(uintptr_t)p;
    return st;
}

int hpcu_dev_free(const hp_gpu_ptr_t *where, void *p)
{
    IN_SCOPE(where, "cuMemFree", hp_cu.MemFree((CUdeviceptr)(uintptr_t)p));
}

int hpcu_dev_l1(const hp_gpu_ptr_t *where, const float *p, size_t n, double *l1_p)
{
    float *h = malloc(n * sizeof(float) + 1);
    double s = 0.0;
    int st;
    if (h == NULL)
        return hp_cu_fail(HP_GPU_ERR_NOMEM, "out of host memory");
    st = hpcu_memcpy_d2h(h, p, n * sizeof(float), where);
    for (size_t i = 0; i < n && st == HP_GPU_OK; i++)
        s += h[i] < 0 ? -(double)h[i] : (double)h[i];
    free(h);
    *l1_p = s;
    return st;
}
