/*
 * The IPC stand-in NCCL's engine on CUDA's driver API (ipc_proto.h),
 * loaded with dlopen("libcuda.so.1"): no CUDA runtime of its own, so it
 * sits beside whatever runtime the application has (PyTorch's), works in
 * the application's current context, and loads on a machine without a
 * driver (the communicator's creation then fails with the reason).
 *
 *   blocks      cuMemAlloc + cuIpcGetMemHandle; a peer's, cuIpcOpenMemHandle
 *   flag waits  cuStreamWaitValue32 (GEQ) and cuStreamWriteValue32
 *   data        cuMemcpyAsync; reductions: the kernel of ipc_kern.cu, from
 *               the fatbin linked in (cuModuleLoadData once per context)
 *   ordering    cuEventRecord / cuStreamWaitEvent between a group's streams
 *
 * Under the stand-in driver (tests/gpu/standins/mock_cuda.c, which exports
 * mock_cuda_shadow) a reduction runs on the host instead, as a
 * cuLaunchHostFunc over the shadows of its buffers, the way the emulated
 * CUDA module runs its kernels; the same element code (ipc_elem.h) makes
 * the same bits.
 */
#define _GNU_SOURCE
#include "ipc_proto.h"
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const unsigned char hpi_fatbin[];

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*CtxGetDevice)(CUdevice *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*IpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
    CUresult (*IpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle, unsigned);
    CUresult (*IpcCloseMemHandle)(CUdeviceptr);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*StreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
    CUresult (*StreamWriteValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
    CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventQuery)(CUevent);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    CUresult (*LaunchHostFunc)(CUstream, CUhostFn, void *);
    void *(*shadow)(const void *);   /* the stand-in driver's */
} cu;

static const struct {
    const char *name;
    size_t      off;
    int         optional;
} syms[] = {
#define S(field, name, opt) {name, offsetof(__typeof__(cu), field), opt}
    S(Init, "cuInit", 0), S(GetErrorName, "cuGetErrorName", 0), S(GetErrorString, "cuGetErrorString", 0),
    S(CtxGetCurrent, "cuCtxGetCurrent", 0), S(CtxPushCurrent, "cuCtxPushCurrent_v2", 0),
    S(CtxPopCurrent, "cuCtxPopCurrent_v2", 0), S(CtxGetDevice, "cuCtxGetDevice", 1),
    S(DeviceGet, "cuDeviceGet", 0), S(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0),
    S(MemAlloc, "cuMemAlloc_v2", 0), S(MemFree, "cuMemFree_v2", 0), S(MemsetD8Async, "cuMemsetD8Async", 0),
    S(MemcpyAsync, "cuMemcpyAsync", 0), S(IpcGetMemHandle, "cuIpcGetMemHandle", 1),
    S(IpcOpenMemHandle, "cuIpcOpenMemHandle_v2", 1), S(IpcCloseMemHandle, "cuIpcCloseMemHandle", 1),
    S(StreamCreate, "cuStreamCreate", 0), S(StreamDestroy, "cuStreamDestroy_v2", 0),
    S(StreamSynchronize, "cuStreamSynchronize", 0), S(StreamIsCapturing, "cuStreamIsCapturing", 1),
    S(StreamWaitValue32, "cuStreamWaitValue32_v2", 1), S(StreamWriteValue32, "cuStreamWriteValue32_v2", 1),
    S(StreamWaitEvent, "cuStreamWaitEvent", 0), S(EventCreate, "cuEventCreate", 0),
    S(EventDestroy, "cuEventDestroy_v2", 0), S(EventRecord, "cuEventRecord", 0), S(EventQuery, "cuEventQuery", 0),
    S(ModuleLoadData, "cuModuleLoadData", 1), S(ModuleGetFunction, "cuModuleGetFunction", 1),
    S(LaunchKernel, "cuLaunchKernel", 1), S(LaunchHostFunc, "cuLaunchHostFunc", 1),
    S(shadow, "mock_cuda_shadow", 1),
#undef S
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[512];
static __thread char err[512];
static pthread_mutex_t mod_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUcontext  ctx;
    CUfunction fn;
} mods[16];
static int nmods;

static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        snprintf(load_err, sizeof(load_err), "no CUDA driver: %s", dlerror());
        return;
    }
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *f = dlsym(h, syms[i].name);
        if (f == NULL && !syms[i].optional) {
            snprintf(load_err, sizeof(load_err), "the CUDA driver has no %s", syms[i].name);
            return;
        }
        memcpy((char *)&cu + syms[i].off, &f, sizeof(f));
    }
    if (cu.Init(0) != CUDA_SUCCESS)
        snprintf(load_err, sizeof(load_err), "cuInit failed: no usable GPU");
}

static int fail(const char *what, CUresult rc)
{
    const char *name = NULL, *text = NULL;
    if (cu.GetErrorName != NULL)
        cu.GetErrorName(rc, &name);
    if (cu.GetErrorString != NULL)
        cu.GetErrorString(rc, &text);
    snprintf(err, sizeof(err), "%s: %s (%s)", what, name != NULL ? name : "error", text != NULL ? text : "?");
    return -1;
}

static int missing(const char *name)
{
    snprintf(err, sizeof(err), "this CUDA driver has no %s", name);
    return -1;
}

#define CK(call, what)                        \
    do {                                      \
        CUresult rc_ = (call);                \
        if (rc_ != CUDA_SUCCESS)              \
            return fail((what), rc_);         \
    } while (0)

static int ready(void)
{
    pthread_once(&once, load);
    if (load_err[0] != '\0') {
        snprintf(err, sizeof(err), "%s", load_err);
        return -1;
    }
    return 0;
}

static CUfunction kernel_of(CUcontext ctx)
{
    CUfunction f = NULL;
    pthread_mutex_lock(&mod_mu);
    for (int i = 0; i < nmods; i++)
        if (mods[i].ctx == ctx)
            f = mods[i].fn;
    pthread_mutex_unlock(&mod_mu);
    return f;
}

/* the reduction kernel in the current context, loaded once */
static int load_kernel(CUcontext ctx)
{
    CUmodule m;
    CUfunction f;
    if (cu.shadow != NULL || kernel_of(ctx) != NULL)
        return 0;
    if (cu.ModuleLoadData == NULL || cu.ModuleGetFunction == NULL || cu.LaunchKernel == NULL)
        return missing("cuModuleLoadData/cuLaunchKernel");
    CK(cu.ModuleLoadData(&m, hpi_fatbin), "cuModuleLoadData (the stand-in's reduction kernels)");
    CK(cu.ModuleGetFunction(&f, m, "hpi_reduce_kernel"), "cuModuleGetFunction(hpi_reduce_kernel)");
    pthread_mutex_lock(&mod_mu);
    if (nmods < 16) {
        mods[nmods].ctx = ctx;
        mods[nmods++].fn = f;
    }
    pthread_mutex_unlock(&mod_mu);
    return 0;
}

static int ctx_get(void **ctx_p, int *device_p)
{
    CUcontext c = NULL;
    CUdevice d = 0;
    if (ready() != 0)
        return -1;
    CK(cu.CtxGetCurrent(&c), "cuCtxGetCurrent");
    if (c == NULL) {   /* as the runtime would: device 0's primary context */
        CK(cu.DeviceGet(&d, 0), "cuDeviceGet(0)");
        CK(cu.PrimaryCtxRetain(&c, d), "cuDevicePrimaryCtxRetain");
        CK(cu.CtxPushCurrent(c), "cuCtxPushCurrent");
    }
    if (cu.CtxGetDevice != NULL)
        CK(cu.CtxGetDevice(&d), "cuCtxGetDevice");
    *ctx_p = c;
    *device_p = (int)d;
    return load_kernel(c);
}

static int ctx_enter(void *ctx, void **saved_p)
{
    CUcontext cur = NULL;
    *saved_p = NULL;
    if (ready() != 0)
        return -1;
    CK(cu.CtxGetCurrent(&cur), "cuCtxGetCurrent");
    if (cur != (CUcontext)ctx) {
        CK(cu.CtxPushCurrent((CUcontext)ctx), "cuCtxPushCurrent");
        *saved_p = ctx;
    }
    return 0;
}

static void ctx_leave(void *saved)
{
    CUcontext c;
    if (saved != NULL)
        cu.CtxPopCurrent(&c);
}

static int block_alloc(size_t bytes, void **ptr_p, hpi_handle_t *h_p)
{
    CUdeviceptr p;
    CUstream s;
    CUipcMemHandle h;
    CK(cu.MemAlloc(&p, bytes), "cuMemAlloc");
    memset(h_p, 0, sizeof(*h_p));
    if (cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cu.MemsetD8Async(p, 0, bytes, s) != CUDA_SUCCESS || cu.StreamSynchronize(s) != CUDA_SUCCESS) {
        cu.MemFree(p);
        return fail("zeroing the communicator's device memory", CUDA_ERROR_UNKNOWN);
    }
    cu.StreamDestroy(s);
    if (cu.IpcGetMemHandle != NULL) {   /* (without it, only ranks of one process meet) */
        CUresult rc = cu.IpcGetMemHandle(&h, p);
        if (rc != CUDA_SUCCESS) {
            cu.MemFree(p);
            return fail("cuIpcGetMemHandle", rc);
        }
        memcpy(h_p->b, &h, sizeof(h) < sizeof(h_p->b) ? sizeof(h) : sizeof(h_p->b));
    }
    *ptr_p = (void *)(uintptr_t)p;
    return 0;
}

static int block_open(const hpi_handle_t *hh, void **ptr_p)
{
    CUipcMemHandle h;
    CUdeviceptr p;
    if (cu.IpcOpenMemHandle == NULL)
        return missing("cuIpcOpenMemHandle_v2 (CUDA IPC): ranks of different processes cannot meet");
    memcpy(&h, hh->b, sizeof(h));
    CK(cu.IpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle");
    *ptr_p = (void *)(uintptr_t)p;
    return 0;
}

static void block_close(void *ptr)
{
    if (cu.IpcCloseMemHandle != NULL)
        cu.IpcCloseMemHandle((CUdeviceptr)(uintptr_t)ptr);
}

static void block_free(void *ptr)
{
    cu.MemFree((CUdeviceptr)(uintptr_t)ptr);
}

static int stream_new(void **s_p)
{
    CK(cu.StreamCreate((CUstream *)s_p, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return 0;
}

static void stream_free(void *s)
{
    cu.StreamDestroy((CUstream)s);
}

static int capturing(void *stream)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu.StreamIsCapturing == NULL)
        return 0;
    if (cu.StreamIsCapturing((CUstream)stream, &st) != CUDA_SUCCESS)
        return fail("cuStreamIsCapturing", CUDA_ERROR_UNKNOWN);
    return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int wait_geq(void *stream, void *flag, uint32_t value)
{
    if (cu.StreamWaitValue32 == NULL)
        return missing("cuStreamWaitValue32_v2");
    CK(cu.StreamWaitValue32((CUstream)stream, (CUdeviceptr)(uintptr_t)flag, value, CU_STREAM_WAIT_VALUE_GEQ),
       "cuStreamWaitValue32");
    return 0;
}

static int write_flag(void *stream, void *flag, uint32_t value)
{
    if (cu.StreamWriteValue32 == NULL)
        return missing("cuStreamWriteValue32_v2");
    CK(cu.StreamWriteValue32((CUstream)stream, (CUdeviceptr)(uintptr_t)flag, value, CU_STREAM_WRITE_VALUE_DEFAULT),
       "cuStreamWriteValue32");
    return 0;
}

static int fill(void *stream, void *ptr, unsigned char byte, size_t bytes)
{
    CK(cu.MemsetD8Async((CUdeviceptr)(uintptr_t)ptr, byte, bytes, (CUstream)stream), "cuMemsetD8Async");
    return 0;
}

static int copy(void *stream, void *dst, const void *src, size_t bytes)
{
    CK(cu.MemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, (CUstream)stream),
       "cuMemcpyAsync");
    return 0;
}

/* the stand-in driver: the reduction on the shadows, in stream order */
static void host_reduce(void *arg)
{
    hpi_red_t *r = arg;
    r->dst = cu.shadow(r->dst);
    for (int i = 0; i < r->nsrc; i++)
        r->src[i] = cu.shadow(r->src[i]);
    if (r->scale_p != NULL)
        r->scale_p = cu.shadow(r->scale_p);
    for (uint64_t i = 0; i < r->count; i++)
        hpi_red_elem(r, i);
    free(r);
}

static int reduce(void *stream, const hpi_red_t *r)
{
    CUcontext ctx = NULL;
    CUfunction f;
    hpi_red_t a = *r;
    void *params[] = {&a};
    uint64_t blocks = (r->count + 255) / 256;
    if (cu.shadow != NULL) {
        hpi_red_t *h = malloc(sizeof(*h));
        if (h == NULL)
            return missing("memory for a host reduction");
        *h = *r;
        if (cu.LaunchHostFunc == NULL)
            return missing("cuLaunchHostFunc");
        CK(cu.LaunchHostFunc((CUstream)stream, host_reduce, h), "cuLaunchHostFunc");
        return 0;
    }
    CK(cu.CtxGetCurrent(&ctx), "cuCtxGetCurrent");
    if ((f = kernel_of(ctx)) == NULL && (load_kernel(ctx) != 0 || (f = kernel_of(ctx)) == NULL))
        return -1;
    CK(cu.LaunchKernel(f, (unsigned)(blocks < 4096 ? blocks : 4096), 1, 1, 256, 1, 1, 0, (CUstream)stream, params,
                       NULL),
       "cuLaunchKernel(hpi_reduce_kernel)");
    return 0;
}

static int event_new(void **ev_p)
{
    CK(cu.EventCreate((CUevent *)ev_p, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    return 0;
}

static void event_free(void *ev)
{
    cu.EventDestroy((CUevent)ev);
}

static int record(void *ev, void *stream)
{
    CK(cu.EventRecord((CUevent)ev, (CUstream)stream), "cuEventRecord");
    return 0;
}

static int wait_event(void *stream, void *ev)
{
    CK(cu.StreamWaitEvent((CUstream)stream, (CUevent)ev, 0), "cuStreamWaitEvent");
    return 0;
}

static int query(void *ev)
{
    CUresult rc = cu.EventQuery((CUevent)ev);
    if (rc == CUDA_SUCCESS)
        return 1;
    if (rc == CUDA_ERROR_NOT_READY)
        return 0;
    return fail("cuEventQuery", rc);
}

static int mem_alloc(size_t bytes, void **ptr_p)
{
    CUdeviceptr p;
    if (ready() != 0)
        return -1;
    CK(cu.MemAlloc(&p, bytes), "cuMemAlloc");
    *ptr_p = (void *)(uintptr_t)p;
    return 0;
}

static void mem_free(void *ptr)
{
    cu.MemFree((CUdeviceptr)(uintptr_t)ptr);
}

static const char *last_error(void)
{
    return err;
}

static const hpi_engine_t engine = {
    "cuda", ctx_get, ctx_enter, ctx_leave, block_alloc, block_open, block_close, block_free, stream_new,
    stream_free, capturing, wait_geq, write_flag, fill, copy, reduce, event_new, event_free, record, wait_event,
    query, mem_alloc, mem_free, last_error,
};

const hpi_engine_t *hpi_engine(void)
{
    return &engine;
}
