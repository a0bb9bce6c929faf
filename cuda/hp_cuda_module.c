/*
 * libhipress_cuda.so, host side: the hp_gpu_ops_t table (src/backend/hp_gpu.h).
 *
 * The driver API is reached through the libcuda.so.1 the process has (or,
 * for hipress_info, loads): no link-time dependency on it, so the module
 * loads on a machine without a driver and says so, instead of failing in
 * dlopen.  Every function that works on a device's memory enters the
 * allocation's context (or its device's primary context) and leaves the
 * caller's current context as it found it.  Kernels are in *.cu files of
 * this folder, compiled by nvcc; the codec's formats in hp_codec*.c.
 *
 * Why one file of about 940 lines: it is the module's adapter of the driver
 * API, and every part of it -- the probe, the copies, streams and events,
 * the codec contexts and their entry points, the benchmark -- works through
 * the same file-static state: the driver's functions resolved here (drv),
 * the thread's last error (fail), the context scope (scope_enter) and the
 * pool of codec contexts.  Splitting it would put that state in a header
 * for every part; it has no per-format code (the formats are the codec's
 * rows) and does not grow with formats.  The natural cut when it grows: the
 * codec contexts with the benchmark, behind such a private header.
 */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#define HP_GPU_OPS_ONLY
#include "hp_gpu.h"
#include "hp_cuda_kernels.h"
#include "hp_codec.h"
#include "hp_klaunch.h"
#include "hp_kern.h"
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
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

/* What this thread's entry point is doing, for a wait that times out to
 * name ("the encode of 40003 elements (format 1)"); wait_failed: a wait
 * of this entry point failed and last_err says how (the entry point's own
 * message does not replace it). */
static __thread char cur_op[128];
static __thread int wait_failed;

static void op_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void op_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cur_op, sizeof(cur_op), fmt, ap);
    va_end(ap);
    wait_failed = 0;
}

/* An entry point's failure: its own reason, unless a wait said more. */
#define OP_FAIL(st, ...) (wait_failed ? (st) : fail((st), __VA_ARGS__))

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
    __typeof__(&cuMemcpyDtoHAsync_v2)          MemcpyDtoHAsync;
    __typeof__(&cuMemcpyHtoDAsync_v2)          MemcpyHtoDAsync;
    __typeof__(&cuMemHostAlloc)                MemHostAlloc;
    __typeof__(&cuMemFreeHost)                 MemFreeHost;
    __typeof__(&cuStreamCreate)                StreamCreate;
    __typeof__(&cuStreamDestroy_v2)            StreamDestroy;
    __typeof__(&cuStreamIsCapturing)           StreamIsCapturing;
    __typeof__(&cuEventCreate)                 EventCreate;
    __typeof__(&cuEventRecord)                 EventRecord;
    __typeof__(&cuEventDestroy_v2)             EventDestroy;
    /* the device codec (hp_gpu_ops_v2_t) */
    __typeof__(&cuMemAlloc_v2)                 MemAlloc;
    __typeof__(&cuMemFree_v2)                  MemFree;
    __typeof__(&cuMemsetD8Async)               MemsetD8Async;
    __typeof__(&cuMemcpyAsync)                 MemcpyAsync;
    __typeof__(&cuStreamWaitEvent)             StreamWaitEvent;
    /* the bounded waits */
    __typeof__(&cuStreamQuery)                 StreamQuery;
    __typeof__(&cuEventQuery)                  EventQuery;
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

/* --------------------------------------------------------------- waits */

/*
 * Every wait of the module is a poll of cuStreamQuery or cuEventQuery,
 * never cuStreamSynchronize or cuEventSynchronize: a stuck kernel or copy
 * must not hang the rank for ever.  The poll yields the processor a few
 * times (a healthy wait is short), then sleeps from 20 us, doubling to
 * 1 ms, and gives up after wait_bound_s seconds (set_wait_bound:
 * libhipress passes half of HIPRESS_TIMEOUT, so the rank that waits fails
 * and tells its peers before their watchdog ends the job) with a reason
 * naming what was waited for (cur_op) and on which stream or event.
 */
#define WAIT_BOUND_DEFAULT 150.0
static double wait_bound_s = WAIT_BOUND_DEFAULT;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *op_name(void)
{
    return cur_op[0] != '\0' ? cur_op : "the work queued";
}

/* Wait for stream h (is_event 0) or event h; `on` names it. */
static int wait_for(int is_event, void *h, const char *on)
{
    double bound;
    double t0 = 0.0;
    long ns = 20000;
    __atomic_load(&wait_bound_s, &bound, __ATOMIC_RELAXED);
    for (unsigned long k = 0;; k++) {
        CUresult rc = is_event ? drv.EventQuery((CUevent)h) : drv.StreamQuery((CUstream)h);
        if (rc == CUDA_SUCCESS)
            return HP_GPU_OK;
        if (rc != CUDA_ERROR_NOT_READY) {
            wait_failed = 1;
            return fail(HP_GPU_ERR_DEVICE, "%s: %s (%d), waiting for %s on %s %p",
                        is_event ? "cuEventQuery" : "cuStreamQuery", cu_name(rc), (int)rc, op_name(), on, h);
        }
        if (k == 0) {
            t0 = now_s();
            continue;
        }
        if (bound > 0 && now_s() - t0 > bound) {
            wait_failed = 1;
            return fail(HP_GPU_ERR_DEVICE, "the device did not finish %s on %s %p within %g s (the bound of a "
                        "device wait, HIPRESS_TIMEOUT / 2): a kernel or copy is stuck", op_name(), on, h, bound);
        }
        if (k < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, ns};
            nanosleep(&ts, NULL);
            if (ns < 1000000)
                ns *= 2;
        }
    }
}

static int cuda_set_wait_bound(double seconds)
{
    if (!(seconds >= 0) || seconds > 1e9)
        return fail(HP_GPU_ERR_INVALID, "a wait bound of %g s", seconds);
    __atomic_store(&wait_bound_s, &seconds, __ATOMIC_RELAXED);
    return HP_GPU_OK;
}

/* --------------------------------------------------------------- copies */

/*
 * The module's copy stream of a context: non-blocking, made at the first
 * need and kept.  The staging copies, allocation's zero fill and the
 * probe run on it, never on the legacy default stream, so they wait for
 * nothing the application queued there (a CUDA-aware MPI's copies do the
 * same: the application has finished writing a buffer it hands to MPI).
 */
#define XFER_MAX 32
static struct {
    CUcontext ctx;
    CUstream  s;
} xfer[XFER_MAX];

/* Under a scope: the current context's copy stream. */
static int xfer_stream(CUstream *s_p)
{
    CUcontext cur = NULL;
    CUresult rc;
    int i, st = HP_GPU_OK;
    if ((rc = drv.CtxGetCurrent(&cur)) != CUDA_SUCCESS)
        return CU_FAIL("cuCtxGetCurrent", rc);
    if (cur == NULL)
        return fail(HP_GPU_ERR_DEVICE, "no CUDA context for %s", op_name());
    pthread_mutex_lock(&drv.lock);
    for (i = 0; i < XFER_MAX && xfer[i].ctx != NULL && xfer[i].ctx != cur; i++)
        ;
    if (i == XFER_MAX)
        st = fail(HP_GPU_ERR_UNSUPPORTED, "more than %d CUDA contexts", XFER_MAX);
    else if (xfer[i].ctx == NULL && (rc = drv.StreamCreate(&xfer[i].s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        st = CU_FAIL("cuStreamCreate", rc);
    else if (xfer[i].ctx == NULL)
        xfer[i].ctx = cur;
    if (st == HP_GPU_OK)
        *s_p = xfer[i].s;
    pthread_mutex_unlock(&drv.lock);
    return st;
}

/* A copy between host and device memory on the copy stream, waited for. */
static int xfer_copy(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where, int to_device)
{
    scope_t sc;
    CUstream s = NULL;
    CUresult rc;
    int st;
    NEED_DRIVER();
    if ((st = scope_enter(where, &sc)) != HP_GPU_OK)
        return st;
    op_set("a copy of %zu bytes %s", bytes, to_device ? "to the device" : "to host memory");
    if ((st = xfer_stream(&s)) == HP_GPU_OK) {
        rc = to_device ? drv.MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, s)
                       : drv.MemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, bytes, s);
        st = rc != CUDA_SUCCESS ? CU_FAIL(to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync", rc)
                                : wait_for(0, s, "the module's copy stream");
    }
    scope_exit(&sc);
    return st;
}

static int cuda_memcpy_d2h(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where)
{
    return xfer_copy(dst, src, bytes, where, 0);
}

static int cuda_memcpy_h2d(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where)
{
    return xfer_copy(dst, src, bytes, where, 1);
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

/* Bounded (wait_for), as every wait of the module. */
static int cuda_stream_sync(void *stream)
{
    NEED_DRIVER();
    op_set("the work queued");
    return wait_for(0, stream, "the stream");
}

static int cuda_stream_wait(void *stream, const char *what)
{
    NEED_DRIVER();
    op_set("%s", what != NULL ? what : "the work queued");
    return wait_for(0, stream, "the stream");
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
    NEED_DRIVER();
    op_set("the work before an event");
    return wait_for(1, event, "the event");
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
#ifdef HP_KL_TRANSLATE
    (void)device;
    snprintf(err, sizeof(err), "the emulated module runs no kernel");
    return fail(HP_GPU_ERR_UNSUPPORTED, "%s", err);
#else
    if (hp_cuda_selftest(device, err, sizeof(err)) != 0)
        return fail(HP_GPU_ERR_DEVICE, "%s", err);
    return HP_GPU_OK;
#endif
}

/* -------------------------------------------------------- the codec */

/* A format's name by its id (hp_gpu_fmt.def), for messages. */
static const char *const fmt_names[] = {
#define HP_GPU_FMT_ROW(id, NAME, name) [id] = #name,
#include "hp_gpu_fmt.def"
#undef HP_GPU_FMT_ROW
};

static const char *fmt_name(uint32_t id)
{
    return id < sizeof(fmt_names) / sizeof(fmt_names[0]) && fmt_names[id] != NULL ? fmt_names[id] : "?";
}

/* A codec context: one call at a time uses it (call_begin .. call_end);
 * kept in a pool per CUDA context, so streams, events and the device
 * workspace are made in the first calls and reused after. */
typedef struct mod_cx {
    hp_codec_t     codec;
    CUcontext      ctx;
    CUstream       s[2];
    CUevent        ev[HP_EV_N];
    int            busy;
    int            stuck;      /* a wait timed out: its streams are not waited for again, and it is
                                * never reused (a stuck kernel stays stuck) */
    struct mod_cx *next;
} mod_cx_t;

static struct {
    pthread_mutex_t lock;
    mod_cx_t       *all;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int d_alloc(void *self, size_t bytes, void **p_p)
{
    CUdeviceptr p = 0;
    (void)self;
    if (drv.MemAlloc(&p, bytes ? bytes : 1) != CUDA_SUCCESS)
        return -1;
    *p_p = (void *)(uintptr_t)p;
    return 0;
}

static void d_release(void *self, void *p)
{
    (void)self;
    drv.MemFree((CUdeviceptr)(uintptr_t)p);
}

static int d_halloc(void *self, size_t bytes, void **p_p)
{
    (void)self;
    return drv.MemHostAlloc(p_p, bytes ? bytes : 1, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS ? 0 : -1;
}

static void d_hrelease(void *self, void *p)
{
    (void)self;
    drv.MemFreeHost(p);
}

static int d_copy(void *self, void *dst, const void *src, size_t bytes, int stream)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return drv.MemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, m->s[stream]) ==
                   CUDA_SUCCESS ? 0 : -1;
}

static int d_memset(void *self, void *p, int byte, size_t bytes, int stream)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return drv.MemsetD8Async((CUdeviceptr)(uintptr_t)p, (unsigned char)byte, bytes, m->s[stream]) == CUDA_SUCCESS
               ? 0 : -1;
}

static int d_record(void *self, int event, int stream)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return drv.EventRecord(m->ev[event], m->s[stream]) == CUDA_SUCCESS ? 0 : -1;
}

static int d_wait(void *self, int stream, int event)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return drv.StreamWaitEvent(m->s[stream], m->ev[event], 0) == CUDA_SUCCESS ? 0 : -1;
}

/* A wait of a codec context; after one failed, the others fail at once
 * (the first one's reason stays in last_err). */
static int cx_wait(mod_cx_t *m, int is_event, void *h, const char *on)
{
    if (m->stuck) {
        if (!wait_failed)
            fail(HP_GPU_ERR_DEVICE, "%s: a wait of this codec context timed out before", op_name());
        wait_failed = 1;
        return -1;
    }
    if (wait_for(is_event, h, on) == HP_GPU_OK)
        return 0;
    m->stuck = 1;
    return -1;
}

static int d_sync(void *self, int stream)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return cx_wait(m, 0, m->s[stream],
                   stream == HP_STREAM_COPY ? "the codec's copy stream" : "the codec's compute stream");
}

static const char *const ev_names[HP_EV_N] = {
    [HP_EV_PIECE] = "the codec's piece event", [HP_EV_DEC0] = "the codec's payload event 0",
    [HP_EV_DEC1] = "the codec's payload event 1", [HP_EV_FREE0] = "the codec's staging event 0",
    [HP_EV_FREE1] = "the codec's staging event 1", [HP_EV_COMPUTE] = "the codec's compute event",
};

static int d_sync_event(void *self, int event)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return cx_wait(m, 1, m->ev[event], ev_names[event]);
}

static void *d_stream(void *self, int stream)
{
    return (void *)((mod_cx_t *)self)->s[stream];
}

static const hp_dev_ops_t dev_ops = {
    .alloc = d_alloc, .release = d_release, .halloc = d_halloc, .hrelease = d_hrelease,
    .copy = d_copy, .memset = d_memset, .record = d_record, .wait = d_wait,
    .sync = d_sync, .sync_event = d_sync_event, .stream = d_stream,
};

/* The context a codec context works in, as a `where`. */
static hp_gpu_ptr_t cx_where(const mod_cx_t *m)
{
    hp_gpu_ptr_t w = {HP_MEM_DEVICE, -1, (void *)m->ctx};
    return w;
}

/* Run `body` (statements setting int st_) inside m's context. */
#define IN_CX(m, body) \
    do { \
        scope_t sc_; hp_gpu_ptr_t w_ = cx_where(m); int st_; \
        NEED_DRIVER(); \
        if ((st_ = scope_enter(&w_, &sc_)) != HP_GPU_OK) return st_; \
        body; \
        scope_exit(&sc_); \
        return st_; \
    } while (0)

static int cx_create(CUcontext ctx, mod_cx_t **m_p)
{
    mod_cx_t *m = calloc(1, sizeof(*m));
    CUresult rc = CUDA_SUCCESS;
    int st = HP_GPU_OK, i;
    if (m == NULL)
        return fail(HP_GPU_ERR_NOMEM, "out of host memory");
    m->ctx = ctx;
    for (i = 0; i < 2 && rc == CUDA_SUCCESS; i++)
        rc = drv.StreamCreate(&m->s[i], CU_STREAM_NON_BLOCKING);
    for (i = 0; i < HP_EV_N && rc == CUDA_SUCCESS; i++)
        rc = drv.EventCreate(&m->ev[i], CU_EVENT_DISABLE_TIMING);
    if (rc != CUDA_SUCCESS)
        st = CU_FAIL("cuStreamCreate/cuEventCreate", rc);
    else if ((st = hp_codec_init(&m->codec, &dev_ops, m)) != HP_GPU_OK)
        st = OP_FAIL(st, "cannot allocate the codec's workspace");
    if (st != HP_GPU_OK) {
        for (i = 0; i < 2; i++)
            if (m->s[i] != NULL)
                drv.StreamDestroy(m->s[i]);
        for (i = 0; i < HP_EV_N; i++)
            if (m->ev[i] != NULL)
                drv.EventDestroy(m->ev[i]);
        free(m);
        return st;
    }
    *m_p = m;
    return HP_GPU_OK;
}

/* A tiny kernel on the module's copy stream writes a word that is read
 * back (no legacy stream, a bounded wait). */
static int cuda_codec_probe(const hp_gpu_ptr_t *where)
{
    scope_t sc;
    CUstream s = NULL;
    CUdeviceptr d = 0;
    uint32_t h = 0;
    int st, ok = 0;
    NEED_DRIVER();
    if ((st = scope_enter(where, &sc)) != HP_GPU_OK)
        return st;
    op_set("the codec's probe kernel on device %d", where->device);
    if ((st = xfer_stream(&s)) == HP_GPU_OK && drv.MemAlloc(&d, sizeof(h)) == CUDA_SUCCESS) {
        ok = drv.MemsetD8Async(d, 0, sizeof(h), s) == CUDA_SUCCESS &&
             hp_kl_probe(s, (uint32_t *)(uintptr_t)d) == 0 &&
             drv.MemcpyDtoHAsync(&h, d, sizeof(h), s) == CUDA_SUCCESS &&
             (st = wait_for(0, s, "the module's copy stream")) == HP_GPU_OK && h == HP_KL_PROBE_WORD;
        drv.MemFree(d);
    }
    scope_exit(&sc);
    if (wait_failed)
        return st;
    return ok ? HP_GPU_OK : fail(HP_GPU_ERR_DEVICE, "the codec's kernels do not run on device %d (no usable "
                                 "device, or no code for its architecture in this build)", where->device);
}

static int cuda_call_begin(const hp_gpu_ptr_t *where, void **cx_p)
{
    scope_t sc;
    CUcontext cur = NULL;
    mod_cx_t *m;
    int st;

    NEED_DRIVER();
    if ((st = scope_enter(where, &sc)) != HP_GPU_OK)
        return st;
    op_set("the set-up of a codec context on device %d", where->device);
    if (drv.CtxGetCurrent(&cur) != CUDA_SUCCESS || cur == NULL) {
        scope_exit(&sc);
        return fail(HP_GPU_ERR_DEVICE, "no CUDA context for the buffer");
    }
    pthread_mutex_lock(&pool.lock);
    for (m = pool.all; m != NULL; m = m->next)
        if (!m->busy && m->ctx == cur)
            break;
    if (m != NULL)
        m->busy = 1;
    pthread_mutex_unlock(&pool.lock);
    if (m == NULL) {
        if ((st = cx_create(cur, &m)) != HP_GPU_OK) {
            scope_exit(&sc);
            return st;
        }
        m->busy = 1;
        pthread_mutex_lock(&pool.lock);
        m->next = pool.all;
        pool.all = m;
        pthread_mutex_unlock(&pool.lock);
    }
    scope_exit(&sc);
    *cx_p = m;
    return HP_GPU_OK;
}

static int cuda_sync(void *cx, int *bad_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("the device work of a compressed call");
    IN_CX(m, st_ = hp_codec_sync(&m->codec, bad_p);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "a codec copy or kernel failed"));
}

static int cuda_call_end(void *cx, int *bad_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    int st = cuda_sync(cx, bad_p);
    pthread_mutex_lock(&pool.lock);
    m->busy = m->stuck;   /* a stuck context is not reused */
    pthread_mutex_unlock(&pool.lock);
    return st;
}

/* A stream-ordered call's end: no wait; the context goes back to the pool
 * with its sticky flag's clear queued behind the call's work, so the next
 * call on it (its streams are in order) starts clean. */
static int cuda_call_release(void *cx)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    int st;
    op_set("the end of a stream-ordered call");
    {
        scope_t sc_;
        hp_gpu_ptr_t w_ = cx_where(m);
        NEED_DRIVER();
        if ((st = scope_enter(&w_, &sc_)) != HP_GPU_OK)
            return st;
        st = hp_codec_release(&m->codec);
        scope_exit(&sc_);
    }
    if (st != HP_GPU_OK)
        st = OP_FAIL(st, "cannot queue the clear of the sticky flag");
    pthread_mutex_lock(&pool.lock);
    m->busy = m->stuck || st != HP_GPU_OK;   /* a context that failed here is not reused */
    pthread_mutex_unlock(&pool.lock);
    return st;
}

static int cuda_encode(void *cx, const hp_gpu_enc_t *e, void *out, size_t cap, size_t *plen_p, int *nonfinite_p,
                       int *bad_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("the encode of %zu elements (%s)", e->n, fmt_name(e->fmt.id));
    IN_CX(m, st_ = hp_codec_encode(&m->codec, e, out, cap, plen_p, nonfinite_p);
             *bad_p = m->codec.bad;
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "encode of %zu elements (%s) failed", e->n, fmt_name(e->fmt.id)));
}

static int cuda_decode(void *cx, const hp_gpu_dec_t *d, const void *payload, size_t plen, float *dst)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("the decode of %zu elements (%s)", d->n, fmt_name(d->fmt.id));
    IN_CX(m, st_ = hp_codec_decode(&m->codec, d, payload, plen, dst);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "decode of %zu elements (%s) failed", d->n, fmt_name(d->fmt.id)));
}

static int cuda_encode_msg(void *cx, const hp_gpu_enc_t *e, uint32_t kind, void *dmsg, size_t cap)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("the device-message encode of %zu elements (%s)", e->n, fmt_name(e->fmt.id));
    IN_CX(m, st_ = hp_codec_encode_msg(&m->codec, e, kind, dmsg, cap);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "device-message encode of %zu elements (%s) failed", e->n,
                                           fmt_name(e->fmt.id)));
}

static int cuda_decode_msg(void *cx, const hp_gpu_dec_t *d, uint32_t kind, const void *dmsg, size_t cap, float *dst)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("the device-message decode of %zu elements (%s)", d->n, fmt_name(d->fmt.id));
    IN_CX(m, st_ = hp_codec_decode_msg(&m->codec, d, kind, dmsg, cap, dst);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "device-message decode of %zu elements (%s) failed", d->n,
                                           fmt_name(d->fmt.id)));
}

static int cuda_bad_word(void *cx, uint32_t **word_p)
{
    *word_p = hp_codec_bad_word(&((mod_cx_t *)cx)->codec);
    return HP_GPU_OK;
}

static int cuda_nan_if(void *cx, float *dst, size_t n, const void *flag, uint32_t bytes)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("a failure flag's NaN over %zu elements", n);
    IN_CX(m, st_ = hp_codec_nan_if(&m->codec, dst, n, flag, bytes);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "the NaN kernel over %zu elements failed", n));
}

static int cuda_divide(void *cx, float *dst, size_t n, float d)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("ncclAvg's divide of %zu elements", n);
    IN_CX(m, st_ = hp_codec_divide(&m->codec, dst, n, d);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "the divide kernel over %zu elements failed", n));
}

static int cuda_momentum_q(void *cx, float *u, float *buf, float mo, size_t n)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("dgc's momentum over %zu elements, in stream order", n);
    IN_CX(m, st_ = hp_codec_momentum_q(&m->codec, u, buf, mo, n);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "the momentum kernels over %zu elements failed", n));
}

static int cuda_stream_join(void *cx, void *stream)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    CUresult rc;
    IN_CX(m, rc = drv.EventRecord(m->ev[HP_EV_JOIN], (CUstream)stream);
             if (rc == CUDA_SUCCESS) rc = drv.StreamWaitEvent(m->s[HP_STREAM_COMPUTE], m->ev[HP_EV_JOIN], 0);
             if (rc == CUDA_SUCCESS) rc = drv.StreamWaitEvent(m->s[HP_STREAM_COPY], m->ev[HP_EV_JOIN], 0);
             st_ = rc == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL("cuEventRecord/cuStreamWaitEvent (join)", rc));
}

static int cuda_stream_release(void *cx, void *stream)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    CUresult rc;
    IN_CX(m, rc = drv.EventRecord(m->ev[HP_EV_REL0], m->s[HP_STREAM_COMPUTE]);
             if (rc == CUDA_SUCCESS) rc = drv.StreamWaitEvent((CUstream)stream, m->ev[HP_EV_REL0], 0);
             if (rc == CUDA_SUCCESS) rc = drv.EventRecord(m->ev[HP_EV_REL1], m->s[HP_STREAM_COPY]);
             if (rc == CUDA_SUCCESS) rc = drv.StreamWaitEvent((CUstream)stream, m->ev[HP_EV_REL1], 0);
             st_ = rc == CUDA_SUCCESS ? HP_GPU_OK : CU_FAIL("cuEventRecord/cuStreamWaitEvent (release)", rc));
}

static int cuda_fill(void *cx, float *dst, float v, size_t n)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("a fill of %zu elements", n);
    IN_CX(m, st_ = hp_codec_fill(&m->codec, dst, v, n));
}

static int cuda_fold(void *cx, float *buf, float *r, size_t n)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("a residual's fold into %zu elements", n);
    IN_CX(m, st_ = hp_codec_fold(&m->codec, buf, r, n));
}

static int cuda_add(void *cx, float *dst, const float *src, size_t n)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("a sum of %zu elements", n);
    IN_CX(m, st_ = hp_codec_add(&m->codec, dst, src, n));
}

/* (the module's directions are the kernels') */
_Static_assert((int)HP_GPU_CVT_F16_F32 == (int)HP_KL_CVT_F16_F32 && (int)HP_GPU_CVT_BF16_F32 == (int)HP_KL_CVT_BF16_F32 &&
                   (int)HP_GPU_CVT_F32_F16 == (int)HP_KL_CVT_F32_F16 && (int)HP_GPU_CVT_F32_BF16 == (int)HP_KL_CVT_F32_BF16,
               "convert directions");

static int cuda_convert(void *cx, void *dst, const void *src, size_t n, int how)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    if (how < HP_GPU_CVT_F16_F32 || how > HP_GPU_CVT_F32_BF16)
        return HP_GPU_ERR_INVALID;
    op_set("a conversion of %zu elements", n);
    IN_CX(m, st_ = hp_codec_convert(&m->codec, dst, src, n, how));
}

static int cuda_copy(void *cx, void *dst, const void *src, size_t bytes)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_gpu_ptr_t a, b;
    int host = 1;
    if (cuda_ptr_query(dst, &a) == HP_GPU_OK && cuda_ptr_query(src, &b) == HP_GPU_OK)
        host = a.kind == HP_MEM_HOST || b.kind == HP_MEM_HOST;
    op_set("a copy of %zu bytes", bytes);
    IN_CX(m, st_ = hp_codec_copy(&m->codec, dst, src, bytes, host);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "a copy of %zu bytes failed", bytes));
}

static int cuda_momentum(void *cx, float *u, float *buf, float mo, size_t n, int *applied_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("dgc's momentum over %zu elements", n);
    IN_CX(m, st_ = hp_codec_momentum(&m->codec, u, buf, mo, n, applied_p));
}

static int cuda_nonfinite(void *cx, const float *x, size_t n, int *nonfinite_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("the NaN and Inf scan of %zu elements", n);
    IN_CX(m, st_ = hp_codec_nonfinite(&m->codec, x, n, nonfinite_p));
}

static int cuda_psgd_mq(void *cx, const float *M, size_t n, size_t mr, size_t c, size_t r, size_t T, const float *qt,
                        float *p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_mq(m->s[HP_STREAM_COMPUTE], M, n, mr, c, r, T, qt, p) == 0 ? HP_GPU_OK
                   : fail(HP_GPU_ERR_DEVICE, "powersgd's M Q kernel failed"));
}

static int cuda_psgd_mtp(void *cx, const float *M, size_t n, size_t mr, size_t c, size_t r, const float *p, float *qt)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_mtp(m->s[HP_STREAM_COMPUTE], M, n, mr, c, r, p, qt) == 0 ? HP_GPU_OK
                   : fail(HP_GPU_ERR_DEVICE, "powersgd's M^T P kernel failed"));
}

static int cuda_psgd_recon(void *cx, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                           const float *qs, const float *ql)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    IN_CX(m, st_ = hp_kl_psgd_recon(m->s[HP_STREAM_COMPUTE], buf, res, n, c, r, p, qs, ql) == 0 ? HP_GPU_OK
                   : fail(HP_GPU_ERR_DEVICE, "powersgd's reconstruction kernel failed"));
}

static int cuda_work(void *cx, size_t bytes, void **p_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    op_set("the growth of the call's device scratch to %zu bytes", bytes);
    IN_CX(m, st_ = hp_codec_work(&m->codec, bytes, p_p);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "cannot allocate %zu bytes of device memory", bytes));
}

static int cuda_dev_alloc(const hp_gpu_ptr_t *where, size_t bytes, void **p_p)
{
    scope_t sc;
    CUstream s = NULL;
    CUdeviceptr p = 0;
    CUresult rc;
    int st;
    NEED_DRIVER();
    if ((st = scope_enter(where, &sc)) != HP_GPU_OK)
        return st;
    op_set("the zero fill of %zu bytes of new device memory", bytes);
    /* zero-filled on the module's copy stream, not the legacy one */
    if ((rc = drv.MemAlloc(&p, bytes ? bytes : 1)) != CUDA_SUCCESS)
        st = CU_FAIL("cuMemAlloc", rc);
    else if ((st = xfer_stream(&s)) == HP_GPU_OK && (rc = drv.MemsetD8Async(p, 0, bytes, s)) != CUDA_SUCCESS)
        st = CU_FAIL("cuMemsetD8Async", rc);
    else if (st == HP_GPU_OK)
        st = wait_for(0, s, "the module's copy stream");
    if (st != HP_GPU_OK && p != 0)
        drv.MemFree(p);
    scope_exit(&sc);
    if (st == HP_GPU_OK)
        *p_p = (void *)(uintptr_t)p;
    return st;
}

static int cuda_dev_free(const hp_gpu_ptr_t *where, void *p)
{
    IN_SCOPE(where, "cuMemFree", drv.MemFree((CUdeviceptr)(uintptr_t)p));
}

static int cuda_dev_l1(const hp_gpu_ptr_t *where, const float *p, size_t n, double *l1_p)
{
    float *h = malloc(n * sizeof(float) + 1);
    double s = 0.0;
    int st;
    if (h == NULL)
        return fail(HP_GPU_ERR_NOMEM, "out of host memory");
    st = cuda_memcpy_d2h(h, p, n * sizeof(float), where);
    for (size_t i = 0; i < n && st == HP_GPU_OK; i++)
        s += h[i] < 0 ? -(double)h[i] : (double)h[i];
    free(h);
    *l1_p = s;
    return st;
}

/* ------------------------------------------------------------ bench */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Gradient-like floats (a smooth part and counter-hash noise). */
static void bench_fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h = hp_mix64(0x243F6A8885A308D3ULL + i);
        double u = 0;
        for (int k = 0; k < 4; k++)
            u += (double)((h >> (16 * k)) & 0xffff) / 65536.0 - 0.5;
        x[i] = (float)(1e-3 * (double)((i >> 18) % 7 + 1) * (sin((double)i * 0.00037) + 0.8 * u));
    }
}

#define BENCH_MAXREPS 64

static int cuda_bench(int device, size_t bytes, int reps, const hp_gpu_enc_t *fmts, int nfmts,
                      void (*row)(void *arg, int fmt_index, const char *op, double gbps, double copy_gbps,
                                  size_t payload),
                      void *arg)
{
    const size_t n = bytes / sizeof(float);
    hp_gpu_ptr_t where = {HP_MEM_DEVICE, device, NULL};
    void *cxv = NULL;
    mod_cx_t *m;
    float *h = NULL, *in = NULL, *res = NULL, *state = NULL, *out = NULL;
    int st;

    NEED_DRIVER();
    if (reps < 1 || reps > BENCH_MAXREPS)
        reps = 7;
    /* a tool's process: the driver may not be initialised yet (creates no
     * context; the library itself never calls it) */
    if (drv.Init(0) != CUDA_SUCCESS)
        return fail(HP_GPU_ERR_UNSUPPORTED, "cuInit failed: no usable driver");
    if ((st = cuda_call_begin(&where, &cxv)) != HP_GPU_OK)
        return st;
    m = (mod_cx_t *)cxv;
    if ((h = malloc(bytes)) == NULL) {
        st = fail(HP_GPU_ERR_NOMEM, "out of host memory");
        goto out;
    }
    bench_fill(h, n);
    if ((st = cuda_dev_alloc(&where, bytes, (void **)&in)) != HP_GPU_OK ||
        (st = cuda_dev_alloc(&where, bytes, (void **)&res)) != HP_GPU_OK ||
        (st = cuda_dev_alloc(&where, bytes, (void **)&state)) != HP_GPU_OK ||
        (st = cuda_dev_alloc(&where, bytes, (void **)&out)) != HP_GPU_OK ||
        (st = cuda_memcpy_h2d(in, h, bytes, &where)) != HP_GPU_OK)
        goto out;
    m->codec.devonly = 1;
    for (int f = 0; f < nfmts && st == HP_GPU_OK; f++) {
        hp_gpu_enc_t e = fmts[f];
        hp_gpu_dec_t d = {e.fmt, 0, n};
        double te[BENCH_MAXREPS], td[BENCH_MAXREPS], tc[BENCH_MAXREPS];
        size_t plen = 0;
        int nf = 0, bad = 0;
        e.n = n;
        e.in = in;
        e.residual = e.residual != NULL ? res : NULL;   /* a non-NULL template asks for one */
        e.state = e.state != NULL ? state : NULL;
        for (int r = -1; r < reps && st == HP_GPU_OK; r++) {
            double t0, t1, t2, t3;
            scope_t sc;
            hp_gpu_ptr_t w = cx_where(m);
            if ((st = scope_enter(&w, &sc)) != HP_GPU_OK)
                break;
            hp_codec_sync(&m->codec, &bad);
            t0 = now_s();
            if (d_copy(m, out, in, bytes, HP_STREAM_COMPUTE) != 0 || d_sync(m, HP_STREAM_COMPUTE) != 0)
                st = fail(HP_GPU_ERR_DEVICE, "device-to-device copy failed");
            t1 = now_s();
            if (st == HP_GPU_OK)
                st = hp_codec_encode(&m->codec, &e, NULL, e.fmt.payload, &plen, &nf);
            t2 = now_s();
            if (st == HP_GPU_OK && !nf)
                st = hp_codec_decode(&m->codec, &d, m->codec.ws[HP_WS_MSG], plen, out);
            if (st == HP_GPU_OK)
                st = hp_codec_sync(&m->codec, &bad);
            t3 = now_s();
            scope_exit(&sc);
            if (st == HP_GPU_OK && (nf || bad))
                st = fail(HP_GPU_ERR_DEVICE, "benchmark message of format %u %s", e.fmt.id,
                          nf ? "came out non-finite" : "was rejected");
            if (r >= 0) {
                tc[r] = t1 - t0;
                te[r] = t2 - t1;
                td[r] = t3 - t2;
            }
        }
        if (st != HP_GPU_OK)
            break;
        {
            double mc = (double)bytes / median(tc, reps) / 1e9;
            row(arg, f, "encode", (double)bytes / median(te, reps) / 1e9, mc, plen);
            row(arg, f, "decode", (double)bytes / median(td, reps) / 1e9, mc, plen);
        }
    }
out:
    m->codec.devonly = 0;
    if (in != NULL) cuda_dev_free(&where, in);
    if (res != NULL) cuda_dev_free(&where, res);
    if (state != NULL) cuda_dev_free(&where, state);
    if (out != NULL) cuda_dev_free(&where, out);
    free(h);
    {
        int bad = 0, st2 = cuda_call_end(cxv, &bad);
        if (st == HP_GPU_OK)
            st = st2;
    }
    return st;
}

/* ---------------------------------------------------------------- table */

#ifndef HP_CUDA_VERSION
#define HP_CUDA_VERSION "?"
#endif
#ifndef HP_CUDA_ARCH_LIST
#define HP_CUDA_ARCH_LIST "?"
#endif

/* The v1 table's members, the same in v1 and as v2's base. */
#define HP_CUDA_OPS_V1(ver, sz)                                                   \
    .version = (ver), .size = (sz),                                               \
    .build = "CUDA " HP_CUDA_VERSION ", " HP_CUDA_ARCH_LIST,                      \
    .init = cuda_init, .probe = cuda_probe, .ptr_query = cuda_ptr_query,          \
    .memcpy_d2h = cuda_memcpy_d2h, .memcpy_h2d = cuda_memcpy_h2d,                 \
    .host_alloc = cuda_host_alloc, .host_free = cuda_host_free,                   \
    .stream_create = cuda_stream_create, .stream_destroy = cuda_stream_destroy,   \
    .stream_sync = cuda_stream_sync, .stream_capturing = cuda_stream_capturing,   \
    .event_create = cuda_event_create, .event_record = cuda_event_record,         \
    .event_sync = cuda_event_sync, .event_destroy = cuda_event_destroy,           \
    .selftest = cuda_selftest, .last_error = cuda_last_error

static const hp_gpu_ops_t ops = {HP_CUDA_OPS_V1(HP_GPU_OPS_VERSION, sizeof(hp_gpu_ops_t))};

HP_EXPORT const hp_gpu_ops_t *hipress_gpu_ops_v1(void)
{
    return &ops;
}

static const hp_gpu_ops_v2_t ops2 = {
    .base = {HP_CUDA_OPS_V1(HP_GPU_CODEC_VERSION, sizeof(hp_gpu_ops_v2_t))},
    .codec_probe = cuda_codec_probe,
    .call_begin = cuda_call_begin,
    .call_end = cuda_call_end,
    .encode = cuda_encode,
    .decode = cuda_decode,
    .fill = cuda_fill,
    .fold = cuda_fold,
    .add = cuda_add,
    .copy = cuda_copy,
    .momentum = cuda_momentum,
    .work = cuda_work,
    .sync = cuda_sync,
    .dev_alloc = cuda_dev_alloc,
    .dev_free = cuda_dev_free,
    .dev_l1 = cuda_dev_l1,
    .nonfinite = cuda_nonfinite,
    .psgd_mq = cuda_psgd_mq,
    .psgd_mtp = cuda_psgd_mtp,
    .psgd_recon = cuda_psgd_recon,
    .bench = cuda_bench,
    .set_wait_bound = cuda_set_wait_bound,
    .stream_wait = cuda_stream_wait,
    .convert = cuda_convert,
    .encode_msg = cuda_encode_msg,
    .decode_msg = cuda_decode_msg,
    .bad_word = cuda_bad_word,
    .nan_if = cuda_nan_if,
    .stream_join = cuda_stream_join,
    .stream_release = cuda_stream_release,
    .call_release = cuda_call_release,
    .divide = cuda_divide,
    .momentum_q = cuda_momentum_q,
};

/* The table with the device codec as well (HP_GPU_CODEC_SYMBOL:
 * libhipress looks for it first). */
HP_EXPORT const hp_gpu_ops_v2_t *hipress_gpu_ops_v3(void)
{
    return &ops2;
}
