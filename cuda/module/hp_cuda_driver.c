/*
 * The CUDA module's reach into the driver (hp_cuda_mod.h): the driver API
 * through the libcuda.so.1 the process has (or, for hipress_info, loads),
 * with no link-time dependency on it, so the module loads on a machine
 * without a driver and says so instead of failing in dlopen; the thread's
 * last error; the probe of the devices and the query of a pointer, which
 * create no context.
 */
#include "hp_cuda_mod.h"
#include <dlfcn.h>
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

hp_cu_drv_t hp_cu = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ------------------------------------------------------------- errors */

static __thread char last_err[256];
static __thread char cur_op[128];
__thread int hp_cu_wait_failed;

const char *hpcu_last_error(void)
{
    return last_err;
}

int hp_cu_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof(last_err), fmt, ap);
    va_end(ap);
    return status;
}

void hp_cu_op_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cur_op, sizeof(cur_op), fmt, ap);
    va_end(ap);
    hp_cu_wait_failed = 0;
}

const char *hp_cu_op_name(void)
{
    return cur_op[0] != '\0' ? cur_op : "the work queued";
}

const char *hp_cu_name(CUresult rc)
{
    const char *s = NULL;
    if (hp_cu.GetErrorName == NULL || hp_cu.GetErrorName(rc, &s) != CUDA_SUCCESS || s == NULL)
        return "unknown CUDA error";
    return s;
}

/* ------------------------------------------------------ driver functions */

int hpcu_init(int load_driver)
{
    void *h;
    const char *missing = NULL;
    int st = HP_GPU_OK;

    pthread_mutex_lock(&hp_cu.lock);
    if (hp_cu.ready)
        goto out;
    h = dlopen(HP_CUDA_DRIVER_LIB, RTLD_NOW | RTLD_LOCAL | (load_driver ? 0 : RTLD_NOLOAD));
    if (h == NULL) {
        st = load_driver ? hp_cu_fail(HP_GPU_ERR_UNSUPPORTED, "no CUDA driver: %s", dlerror())
                         : hp_cu_fail(HP_GPU_ERR_UNSUPPORTED, "%s is not loaded in this process", HP_CUDA_DRIVER_LIB);
        goto out;
    }
#define RESOLVE(field, name) \
    do { if (missing == NULL && (hp_cu.field = (__typeof__(hp_cu.field))dlsym(h, name)) == NULL) missing = name; } \
    while (0)
#define OPTIONAL(field, name) (hp_cu.field = (__typeof__(hp_cu.field))dlsym(h, name))
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
    RESOLVE(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    RESOLVE(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    RESOLVE(MemHostAlloc, "cuMemHostAlloc");
    RESOLVE(MemFreeHost, "cuMemFreeHost");
    RESOLVE(StreamCreate, "cuStreamCreate");
    RESOLVE(StreamDestroy, "cuStreamDestroy_v2");
    RESOLVE(StreamIsCapturing, "cuStreamIsCapturing");
    RESOLVE(EventCreate, "cuEventCreate");
    RESOLVE(EventRecord, "cuEventRecord");
    RESOLVE(EventDestroy, "cuEventDestroy_v2");
    RESOLVE(MemAlloc, "cuMemAlloc_v2");
    RESOLVE(MemFree, "cuMemFree_v2");
    RESOLVE(MemsetD8Async, "cuMemsetD8Async");
    RESOLVE(MemcpyAsync, "cuMemcpyAsync");
    RESOLVE(StreamWaitEvent, "cuStreamWaitEvent");
    RESOLVE(StreamQuery, "cuStreamQuery");
    RESOLVE(EventQuery, "cuEventQuery");
    OPTIONAL(MemAllocAsync, "cuMemAllocAsync");
    OPTIONAL(MemFreeAsync, "cuMemFreeAsync");
#undef RESOLVE
#undef OPTIONAL
    if (missing != NULL) {
        st = hp_cu_fail(HP_GPU_ERR_UNSUPPORTED, "%s has no %s (a driver older than CUDA 10?)", HP_CUDA_DRIVER_LIB,
                        missing);
        goto out;
    }
    if (hp_cu.MemAllocAsync == NULL || hp_cu.MemFreeAsync == NULL) {
        hp_cu.MemAllocAsync = NULL;   /* both or neither */
        hp_cu.MemFreeAsync = NULL;
    }
    hp_cu.ready = 1;
out:
    pthread_mutex_unlock(&hp_cu.lock);
    return st;
}

/* --------------------------------------------------------------- probe */

int hpcu_probe(hp_gpu_probe_t *p)
{
    CUresult rc;
    NEED_DRIVER();
    memset(p, 0, sizeof(*p));
    /* initialises the driver; creates no context */
    if ((rc = hp_cu.Init(0)) != CUDA_SUCCESS)
        return CU_FAIL("cuInit", rc);
    if ((rc = hp_cu.DriverGetVersion(&p->driver_version)) != CUDA_SUCCESS)
        return CU_FAIL("cuDriverGetVersion", rc);
    if ((rc = hp_cu.DeviceGetCount(&p->ndevices)) != CUDA_SUCCESS)
        return CU_FAIL("cuDeviceGetCount", rc);
    for (int i = 0; i < p->ndevices && i < HP_GPU_MAX_PROBED; i++) {
        CUdevice d;
        size_t mem = 0;
        if ((rc = hp_cu.DeviceGet(&d, i)) != CUDA_SUCCESS)
            return CU_FAIL("cuDeviceGet", rc);
        hp_cu.DeviceGetName(p->dev[i].name, (int)sizeof(p->dev[i].name), d);
        hp_cu.DeviceGetAttribute(&p->dev[i].cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
        hp_cu.DeviceGetAttribute(&p->dev[i].cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
        if (hp_cu.DeviceTotalMem(&mem, d) == CUDA_SUCCESS)
            p->dev[i].mem_bytes = mem;
    }
    return HP_GPU_OK;
}

int hpcu_ptr_query(const void *ptr, hp_gpu_ptr_t *out)
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
    rc = hp_cu.PointerGetAttributes(4, attrs, data, (CUdeviceptr)(uintptr_t)ptr);
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
