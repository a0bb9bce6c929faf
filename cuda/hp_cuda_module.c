/*
 * libhipress_cuda.so, host side: the hp_gpu_ops_t table (src/hp_gpu.h).
 *
 * The driver API is reached through the libcuda.so.1 the process has (or,
 * for hipress_info, loads): no link-time dependency on it, so the module
 * loads on a machine without a driver and says so, instead of failing in
 * dlopen.  Every function that works on a device's memory enters the
 * allocation's context (or its device's primary context) and leaves the
 * caller's current context as it found it.  Kernels are in *.cu files of
 * this folder, compiled by nvcc.
 */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#define HP_GPU_OPS_ONLY
#include "hp_gpu.h"
#include "hp_cuda_kernels.h"
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* libhipress.so uses these values without cuda.h */
_Static_assert(CU_POINTER_ATTRIBUTE_CONTEXT == HP_CU_POINTER_ATTRIBUTE_CONTEXT &&
               CU_POINTER_ATTRIBUTE_MEMORY_TYPE == HP_CU_POINTER_ATTRIBUTE_MEMORY_TYPE &&
               CU_POINTER_ATTRIBUTE_IS_MANAGED == HP_CU_POINTER_ATTRIBUTE_IS_MANAGED &&
               CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == HP_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL &&
               CU_MEMORYTYPE_HOST == HP_CU_MEMORYTYPE_HOST && CU_MEMORYTYPE_DEVICE == HP_CU_MEMORYTYPE_DEVICE &&
               CU_MEMORYTYPE_UNIFIED == HP_CU_MEMORYTYPE_UNIFIED && CUDA_SUCCESS == HP_CU_SUCCESS &&
               CU_STREAM_CAPTURE_STATUS_NONE == HP_CU_STREAM_CAPTURE_STATUS_NONE,
               "hp_gpu.h's driver constants differ from cuda.h");

#define HP_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------- errors */

static __thread char last_err[256];

static const char *cuda_last_error(void)
{
    return last_err;
}

static int fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof(last_err), fmt, ap);
    va_end(ap);
    return status;
}

/* ------------------------------------------------------ driver functions */

static struct {
    pthread_mutex_t lock;
    int             ready;
    __typeof__(&cuInit)                        Init;
    __typeof__(&cuDriverGetVersion)            DriverGetVersion;
    __typeof__(&cuDeviceGetCount)              DeviceGetCount;
    __typeof__(&cuDeviceGet)                   DeviceGet;
    __typeof__(&cuDeviceGetName)               DeviceGetName;
    __typeof__(&cuDeviceGetAttribute)          DeviceGetAttribute;
    __typeof__(&cuDeviceTotalMem_v2)           DeviceTotalMem;
    __typeof__(&cuGetErrorName)                GetErrorName;
    __typeof__(&cuPointerGetAttributes)        PointerGetAttributes;
    __typeof__(&cuCtxGetCurrent)               CtxGetCurrent;
    __typeof__(&cuCtxPushCurrent_v2)           CtxPushCurrent;
    __typeof__(&cuCtxPopCurrent_v2)            CtxPopCurrent;
    __typeof__(&cuDevicePrimaryCtxRetain)      DevicePrimaryCtxRetain;
    __typeof__(&cuMemcpyDtoH_v2)               MemcpyDtoH;
    __typeof__(&cuMemcpyHtoD_v2)               MemcpyHtoD;
    __typeof__(&cuMemHostAlloc)                MemHostAlloc;
    __typeof__(&cuMemFreeHost)                 MemFreeHost;
    __typeof__(&cuStreamCreate)                StreamCreate;
    __typeof__(&cuStreamDestroy_v2)            StreamDestroy;
    __typeof__(&cuStreamSynchronize)           StreamSynchronize;
    __typeof__(&cuStreamIsCapturing)           StreamIsCapturing;
    __typeof__(&cuEventCreate)                 EventCreate;
    __typeof__(&cuEventRecord)                 EventRecord;
    __typeof__(&cuEventSynchronize)            EventSynchronize;
    __typeof__(&cuEventDestroy_v2)             EventDestroy;
    /* primary contexts this module retained, kept for the process's life */
    CUcontext       primary[HP_GPU_MAX_PROBED];
} drv = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* "CUDA_ERROR_INVALID_VALUE" */
static const char *cu_name(CUresult rc)
{
    const char *s = NULL;
    if (drv.GetErrorName == NULL || drv.GetErrorName(rc, &s) != CUDA_SUCCESS || s == NULL)
        return "unknown CUDA error";
    return s;
}

#define CU_FAIL(call, rc) fail(HP_GPU_ERR_DEVICE, "%s: %s (%d)", call, cu_name(rc), (int)(rc))

static int cuda_init(int load_driver)
{
    void *h;
    const char *missing = NULL;
    int st = HP_GPU_OK;

    pthread_mutex_lock(&drv.lock);
    if (drv.ready)
        goto out;
    h = dlopen(HP_CUDA_DRIVER_LIB, RTLD_NOW | RTLD_LOCAL | (load_driver ? 0 : RTLD_NOLOAD));
    if (h == NULL) {
        st = load_driver ? fail(HP_GPU_ERR_UNSUPPORTED, "no CUDA driver: %s", dlerror())
                         : fail(HP_GPU_ERR_UNSUPPORTED, "%s is not loaded in this process", HP_CUDA_DRIVER_LIB);
        goto out;
    }
#define RESOLVE(field, name) \
    do { if (missing == NULL && (drv.field = (__typeof__(drv.field))dlsym(h, name)) == NULL) missing = name; } while (0)
    RESOLVE(Init, "cuInit");
    RESOLVE(DriverGetVersion, "cuDriverGetVersion");
    RESOLVE(DeviceGetCount, "cuDeviceGetCount");
    RESOLVE(DeviceGet, "cuDeviceGet");
    RESOLVE(DeviceGetName, "cuDeviceGetName");
    RESOLVE(DeviceGetAttribute, "cuDeviceGetAttribute");
    RESOLVE(DeviceTotalMem, "cuDeviceTotalMem_v2");
    RESOLVE(GetErrorName, "cuGetErrorName");
    RESOLVE(PointerGetAttributes, "cuPointerGetAttributes");
    RESOLVE(CtxGetCurrent, "cuCtxGetCurrent");
    RESOLVE(CtxPushCurrent, "cuCtxPushCurrent_v2");
    RESOLVE(CtxPopCurrent, "cuCtxPopCurrent_v2");
    RESOLVE(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    RESOLVE(MemcpyDtoH, "cuMemcpyDtoH_v2");
    RESOLVE(MemcpyHtoD, "cuMemcpyHtoD_v2");
    RESOLVE(MemHostAlloc, "cuMemHostAlloc");
    RESOLVE(MemFreeHost, "cuMemFreeHost");
    RESOLVE(StreamCreate, "cuStreamCreate");
    RESOLVE(StreamDestroy, "cuStreamDestroy_v2");
    RESOLVE(StreamSynchronize, "cuStreamSynchronize");
    RESOLVE(StreamIsCapturing, "cuStreamIsCapturing");
    RESOLVE(EventCreate, "cuEventCreate");
    RESOLVE(EventRecord, "cuEventRecord");
    RESOLVE(EventSynchronize, "cuEventSynchronize");
    RESOLVE(EventDestroy, "cuEventDestroy_v2");
#undef RESOLVE
    if (missing != NULL) {
        st = fail(HP_GPU_ERR_UNSUPPORTED, "%s has no %s (a driver older than CUDA 10?)", HP_CUDA_DRIVER_LIB, missing);
        goto out;
    }
    drv.ready = 1;
out:
    pthread_mutex_unlock(&drv.lock);
    return st;
}

#define NEED_DRIVER() \
    do { if (!drv.ready) return fail(HP_GPU_ERR_UNSUPPORTED, "the CUDA module is not initialised"); } while (0)

/* --------------------------------------------------------------- probe */

static int cuda_probe(hp_gpu_probe_t *p)
{
    CUresult rc;
    NEED_DRIVER();
    memset(p, 0, sizeof(*p));
    /* initialises the driver; creates no context */
    if ((rc = drv.Init(0)) != CUDA_SUCCESS)
        return CU_FAIL("cuInit", rc);
    if ((rc = drv.DriverGetVersion(&p->driver_version)) != CUDA_SUCCESS)
        return CU_FAIL("cuDriverGetVersion", rc);
    if ((rc = drv.DeviceGetCount(&p->ndevices)) != CUDA_SUCCESS)
        return CU_FAIL("cuDeviceGetCount", rc);
    for (int i = 0; i < p->ndevices && i < HP_GPU_MAX_PROBED; i++) {
        CUdevice d;
        size_t mem = 0;
        if ((rc = drv.DeviceGet(&d, i)) != CUDA_SUCCESS)
            return CU_FAIL("cuDeviceGet", rc);
        drv.DeviceGetName(p->dev[i].name, (int)sizeof(p->dev[i].name), d);
        drv.DeviceGetAttribute(&p->dev[i].cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
        drv.DeviceGetAttribute(&p->dev[i].cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
        if (drv.DeviceTotalMem(&mem, d) == CUDA_SUCCESS)
            p->dev[i].mem_bytes = mem;
    }
    return HP_GPU_OK;
}

static int cuda_ptr_query(const void *ptr, hp_gpu_ptr_t *out)
{
    CUpointer_attribute attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_CONTEXT};
    unsigned int memtype = 0, managed = 0;
    int ordinal = -1;
    CUcontext ctx = NULL;
    void *data[4] = {&memtype, &managed, &ordinal, &ctx};
    CUresult rc;

    NEED_DRIVER();
    out->kind = HP_MEM_HOST;
    out->device = -1;
    out->ctx = NULL;
    if (ptr == NULL)
        return HP_GPU_OK;
    rc = drv.PointerGetAttributes(4, attrs, data, (CUdeviceptr)(uintptr_t)ptr);
    if (rc == CUDA_ERROR_NOT_INITIALIZED)
        return HP_GPU_OK;    /* no cuInit yet: no device memory */
    if (rc != CUDA_SUCCESS)
        return CU_FAIL("cuPointerGetAttributes", rc);
    if (managed)
        out->kind = HP_MEM_MANAGED;
    else if (memtype == CU_MEMORYTYPE_DEVICE || memtype == CU_MEMORYTYPE_UNIFIED)
        out->kind = HP_MEM_DEVICE;
    else
        return HP_GPU_OK;
    out->device = ordinal;
    out->ctx = ctx;
    return HP_GPU_OK;
}

/* ------------------------------------------------------------ contexts */

typedef struct {
    int pushed;
} scope_t;

/* The primary context of `device`, retained once and kept. */
static int primary_ctx(int device, CUcontext *ctx_p)
{
    CUdevice d;
    CUresult rc;
    int st = HP_GPU_OK;

    if (device < 0 || device >= HP_GPU_MAX_PROBED)
        return fail(HP_GPU_ERR_INVALID, "device %d out of range", device);
    pthread_mutex_lock(&drv.lock);
    if (drv.primary[device] == NULL) {
        if ((rc = drv.DeviceGet(&d, device)) != CUDA_SUCCESS)
            st = CU_FAIL("cuDeviceGet", rc);
        else if ((rc = drv.DevicePrimaryCtxRetain(&drv.primary[device], d)) != CUDA_SUCCESS)
            st = CU_FAIL("cuDevicePrimaryCtxRetain", rc);
    }
    *ctx_p = drv.primary[device];
    pthread_mutex_unlock(&drv.lock);
    return st;
}

/* Make where's context current (pushed only when it is not already). */
static int scope_enter(const hp_gpu_ptr_t *where, scope_t *sc)
{
    CUcontext want = NULL, cur = NULL;
    CUresult rc;
    int st;

    sc->pushed = 0;
    if (where != NULL && where->ctx != NULL)
        want = (CUcontext)where->ctx;
    else if (where != NULL && where->device >= 0 && (st = primary_ctx(where->device, &want)) != HP_GPU_OK)
        return st;
    if (want == NULL)
        return HP_GPU_OK;    /* the caller's current context */
    if ((rc = drv.CtxGetCurrent(&cur)) != CUDA_SUCCESS)
        return CU_FAIL("cuCtxGetCurrent", rc);
    if (cur == want)
        return HP_GPU_OK;
    if ((rc = drv.CtxPushCurrent(want)) != CUDA_SUCCESS)
        return CU_FAIL("cuCtxPushCurrent", rc);
    sc->pushed = 1;
    return HP_GPU_OK;
}

static void scope_exit(const scope_t *sc)
{
    CUcontext popped;
    if (sc->pushed)
        drv.CtxPopCurrent(&popped);
}

/* Run `call` (a CUresult expression) inside where's context. */
#define IN_SCOPE(where, name, call) \
    do { \
        scope_t sc_; CUresult rc_; int st_; \
        NEED_DRIVER(); \
        if ((st_ = scope_enter((where), &sc_)) != HP_GPU_OK) return st_; \
        rc_ = (call); \
        scope_exit(&sc_); \
        return rc_ == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL(name, rc_); \
    } while (0)

/* --------------------------------------------------------------- copies */

static int cuda_memcpy_d2h(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where)
{
    IN_SCOPE(where, "cuMemcpyDtoH", drv.MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes));
}

static int cuda_memcpy_h2d(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where)
{
    IN_SCOPE(where, "cuMemcpyHtoD", drv.MemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes));
}

static int cuda_host_alloc(size_t bytes, const hp_gpu_ptr_t *where, void **p_p)
{
    IN_SCOPE(where, "cuMemHostAlloc", drv.MemHostAlloc(p_p, bytes, CU_MEMHOSTALLOC_PORTABLE));
}

static int cuda_host_free(void *p, const hp_gpu_ptr_t *where)
{
    IN_SCOPE(where, "cuMemFreeHost", drv.MemFreeHost(p));
}

/* ------------------------------------------------------ streams, events */

static int cuda_stream_create(const hp_gpu_ptr_t *where, void **stream_p)
{
    IN_SCOPE(where, "cuStreamCreate", drv.StreamCreate((CUstream *)stream_p, CU_STREAM_NON_BLOCKING));
}

static int cuda_stream_destroy(void *stream, const hp_gpu_ptr_t *where)
{
    IN_SCOPE(where, "cuStreamDestroy", drv.StreamDestroy((CUstream)stream));
}

static int cuda_stream_sync(void *stream)
{
    CUresult rc;
    NEED_DRIVER();
    rc = drv.StreamSynchronize((CUstream)stream);
    return rc == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL("cuStreamSynchronize", rc);
}

static int cuda_stream_capturing(void *stream, int *capturing_p)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc;
    NEED_DRIVER();
    rc = drv.StreamIsCapturing((CUstream)stream, &status);
    if (rc != CUDA_SUCCESS)
        return CU_FAIL("cuStreamIsCapturing", rc);
    *capturing_p = status != CU_STREAM_CAPTURE_STATUS_NONE;
    return HP_GPU_OK;
}

static int cuda_event_create(const hp_gpu_ptr_t *where, void **event_p)
{
    IN_SCOPE(where, "cuEventCreate", drv.EventCreate((CUevent *)event_p, CU_EVENT_DISABLE_TIMING));
}

static int cuda_event_record(void *event, void *stream)
{
    CUresult rc;
    NEED_DRIVER();
    rc = drv.EventRecord((CUevent)event, (CUstream)stream);
    return rc == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL("cuEventRecord", rc);
}

static int cuda_event_sync(void *event)
{
    CUresult rc;
    NEED_DRIVER();
    rc = drv.EventSynchronize((CUevent)event);
    return rc == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL("cuEventSynchronize", rc);
}

static int cuda_event_destroy(void *event, const hp_gpu_ptr_t *where)
{
    IN_SCOPE(where, "cuEventDestroy", drv.EventDestroy((CUevent)event));
}

/* ------------------------------------------------------------ selftest */

static int cuda_selftest(int device)
{
    char err[200] = "";
    NEED_DRIVER();
    if (hp_cuda_selftest(device, err, sizeof(err)) != 0)
        return fail(HP_GPU_ERR_DEVICE, "%s", err);
    return HP_GPU_OK;
}

/* ---------------------------------------------------------------- table */

#ifndef HP_CUDA_VERSION
#define HP_CUDA_VERSION "?"
#endif
#ifndef HP_CUDA_ARCH_LIST
#define HP_CUDA_ARCH_LIST "?"
#endif

static const hp_gpu_ops_t ops = {
    .version = HP_GPU_OPS_VERSION,
    .size = sizeof(hp_gpu_ops_t),
    .build = "CUDA " HP_CUDA_VERSION ", " HP_CUDA_ARCH_LIST,
    .init = cuda_init,
    .probe = cuda_probe,
    .ptr_query = cuda_ptr_query,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memcpy_h2d = cuda_memcpy_h2d,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .stream_capturing = cuda_stream_capturing,
    .event_create = cuda_event_create,
    .event_record = cuda_event_record,
    .event_sync = cuda_event_sync,
    .event_destroy = cuda_event_destroy,
    .selftest = cuda_selftest,
    .last_error = cuda_last_error,
};

HP_EXPORT const hp_gpu_ops_t *hipress_gpu_ops_v1(void)
{
    return &ops;
}
