/*
 * A stand-in for the CUDA driver, built as tests/gpu/mock/.libs/libcuda.so.1
 * (soname libcuda.so.1), so the GPU path's host side runs on machines
 * without a GPU.  It implements the driver functions hipress uses, with the
 * driver's values, and what the tests need to show a hang
 * (doc/dev/standins.md).  This file is the driver's devices, contexts,
 * allocations and synchronous copies; device memory itself (its host
 * shadows, CUDA IPC) is mock_cuda_mem.c, the functions on streams, events,
 * captures and the stream memory operations mock_cuda_stream.c, the
 * streams' queues and the device executor mock_cuda_exec.c, the wait-for
 * graph and its deadlock report mock_cuda_wfg.c.
 *
 * Like the driver, the copies need a current context; the pointer queries
 * fail with CUDA_ERROR_NOT_INITIALIZED before cuInit.  What synchronises:
 *   - the whole device (every stream of the context, what they wait for
 *     included): cuMemAlloc, cuMemFree of cuMemAlloc's memory,
 *     cuMemHostAlloc, cuMemFreeHost, cuCtxSynchronize, a kernel's first
 *     launch (lazy loading);
 *   - the host with one stream or event: cuStreamSynchronize,
 *     cuEventSynchronize, the synchronous copies (the legacy stream), and a
 *     cuStreamQuery or cuEventQuery that reports completion;
 *   - nothing: cuMemAllocAsync and cuMemFreeAsync (stream-ordered), and
 *     cuMemFree of cuMemAllocAsync's memory, which frees it at once: an
 *     entry still queued that uses it stops the process
 *     (mock_cuda_rules.c).
 * During a stream capture in global mode, a call that would synchronise
 * the device is refused and invalidates the capture, on any thread
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, counted "capture_broken").
 *
 * Knobs: MOCK_CUDA_DEFERRED and MOCK_CUDA_SEED (mock_cuda_exec.c);
 * MOCK_CUDA_HANG=N (with MOCK_CUDA_HANG_RANK=r: that rank only): from the
 * N-th wait on nothing completes (queries not ready for ever, synchronous
 * waits block for ever after a line on stderr); MOCK_CUDA_ALLOC_FAIL=N
 * (with MOCK_CUDA_FAIL_RANK=r): the N-th device allocation fails with
 * CUDA_ERROR_OUT_OF_MEMORY (mock_cuda_fail_alloc does the same from a test);
 * MOCK_CUDA_WAIT_FAIL=N (same rank knob): the N-th completed poll answers
 * CUDA_ERROR_LAUNCH_FAILED (mock_cuda_fail_wait); MOCK_CUDA_CAPTURE_FAIL=N:
 * the N-th cuStreamIsCapturing does (mock_cuda_fail_capture_query).
 */
#include "mock_cuda_int.h"
#include <stdlib.h>
#include <string.h>

enum { ATTR_CONTEXT = 1, ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, ATTR_DEVICE_ORDINAL = 9 };
enum { ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76 };

unsigned long long n_query, n_d2h, n_h2d, n_d2h_bytes, n_h2d_bytes, n_init, n_retain, n_streams, n_events, n_async,
    n_alloc, n_alloc_async, n_syncs, n_dev_syncs, n_legacy, n_per_thread, n_pending, n_hostfn, n_bad_free_host,
    n_kernel_loads, n_capture_broken, n_alloc_failed, n_wait_failed, n_capture_query_failed;

int mock_initialized;
static char the_context[2];   /* one context per device, by address */
static __thread CUcontext ctx_stack[16];
static __thread int ctx_depth;

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s != NULL && *s != '\0' ? atoi(s) : dflt;
}

static int ndevices(void)
{
    return env_int("MOCK_CUDA_DEVICES", 1);
}

CUcontext mock_ctx_of(int device)
{
    return (CUcontext)&the_context[device & 1];
}

int mock_ctx_device(CUcontext c)
{
    return c != NULL ? (int)((char *)c - the_context) : 0;
}

CUcontext mock_current(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

/* Failures on demand, each the k-th of its kind: from the environment
 * (MOCK_CUDA_ALLOC_FAIL, _WAIT_FAIL, _CAPTURE_FAIL, on MOCK_CUDA_FAIL_RANK's
 * rank only when it is set) or from a test, the k-th from now (k >= 1; a
 * large k: none). */
typedef struct {
    const char         *env, *what;
    long                at, done;
    int                 init;
    unsigned long long *count;
} inject_t;

static inject_t inj_alloc = {"MOCK_CUDA_ALLOC_FAIL", "device allocation %ld fails (injected)", -1, 0, 0,
                             &n_alloc_failed};
/* the end of a wait: a cuStreamQuery or cuEventQuery that would answer
 * complete answers CUDA_ERROR_LAUNCH_FAILED (the stream itself goes on) */
static inject_t inj_wait = {"MOCK_CUDA_WAIT_FAIL", "wait %ld fails (injected: CUDA_ERROR_LAUNCH_FAILED)", -1, 0, 0,
                            &n_wait_failed};
/* cuStreamIsCapturing answers CUDA_ERROR_LAUNCH_FAILED */
static inject_t inj_capture = {"MOCK_CUDA_CAPTURE_FAIL", "capture query %ld fails (injected: CUDA_ERROR_LAUNCH_FAILED)",
                               -1, 0, 0, &n_capture_query_failed};

/* Whether this one (of j's kind) fails. */
static int injected(inject_t *j)
{
    long k;
    if (!__atomic_load_n(&j->init, __ATOMIC_ACQUIRE)) {
        int r = env_int("MOCK_CUDA_FAIL_RANK", -1);
        if (r < 0 || r == mock_rank())
            __atomic_store_n(&j->at, (long)env_int(j->env, -1), __ATOMIC_RELAXED);
        __atomic_store_n(&j->init, 1, __ATOMIC_RELEASE);
    }
    k = __atomic_add_fetch(&j->done, 1, __ATOMIC_RELAXED);
    if (k != __atomic_load_n(&j->at, __ATOMIC_RELAXED))
        return 0;
    COUNT(*j->count, 1);
    fprintf(stderr, "mock_cuda: ");
    fprintf(stderr, j->what, k);
    fprintf(stderr, "\n");
    return 1;
}

static void arm(inject_t *j, int k)
{
    __atomic_store_n(&j->init, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&j->at, __atomic_load_n(&j->done, __ATOMIC_RELAXED) + k, __ATOMIC_RELAXED);
}

static int alloc_fails(void)
{
    return injected(&inj_alloc);
}

int mock_wait_fails(void)
{
    return injected(&inj_wait);
}

int mock_capture_query_fails(void)
{
    return injected(&inj_capture);
}

API void mock_cuda_fail_alloc(int k)
{
    arm(&inj_alloc, k);
}

API void mock_cuda_fail_wait(int k)
{
    arm(&inj_wait, k);
}

API void mock_cuda_fail_capture_query(int k)
{
    arm(&inj_capture, k);
}

/*
 * "query" (cuPointerGetAttributes), "init", "retain", "streams" and
 * "events" (alive), "ctx_depth", "alloc" (cuMemAlloc), "alloc_async"
 * (cuMemAllocAsync), "async" (asynchronous copies);
 * "syncs" (also "host_syncs"): host synchronisations with a stream or an
 *   event -- cuStreamSynchronize, cuEventSynchronize, the synchronous
 *   copies, and every cuStreamQuery or cuEventQuery that reports completion
 *   (the poll that ends a wait);
 * "dev_syncs": device-wide synchronisations (cuMemAlloc, cuMemFree,
 *   cuMemHostAlloc, cuMemFreeHost, cuCtxSynchronize, a first launch);
 * "kernel_loads": kernels' first launches (and preloads);
 * "d2h", "h2d", "d2h_bytes", "h2d_bytes": copies between device and host
 *   memory (synchronous or not) and their bytes;
 * "legacy", "per_thread": calls that queued work on, waited for or
 *   recorded on the legacy default stream (NULL, CU_STREAM_LEGACY; the
 *   synchronous copies too) or the per-thread one;
 * "pending": entries queued and not yet run;
 * "hostfn": cuLaunchHostFunc calls;
 * "bad_free_host": cuMemFreeHost with a context current other than the
 *   allocation's (refused with CUDA_ERROR_INVALID_CONTEXT);
 * "capture_broken": captures invalidated by a prohibited call;
 * "alloc_failed": allocations failed by MOCK_CUDA_ALLOC_FAIL;
 * "wait_failed": waits failed by MOCK_CUDA_WAIT_FAIL; "waits": the waits
 *   it counts (completed polls).
 */
API unsigned long long mock_cuda_count(const char *what)
{
    static const struct { const char *name; unsigned long long *v; } rows[] = {
        {"query", &n_query}, {"d2h", &n_d2h}, {"h2d", &n_h2d}, {"d2h_bytes", &n_d2h_bytes},
        {"h2d_bytes", &n_h2d_bytes}, {"init", &n_init}, {"retain", &n_retain}, {"streams", &n_streams},
        {"events", &n_events}, {"async", &n_async}, {"alloc", &n_alloc}, {"alloc_async", &n_alloc_async},
        {"syncs", &n_syncs}, {"host_syncs", &n_syncs}, {"dev_syncs", &n_dev_syncs}, {"legacy", &n_legacy},
        {"per_thread", &n_per_thread}, {"pending", &n_pending}, {"hostfn", &n_hostfn},
        {"bad_free_host", &n_bad_free_host}, {"kernel_loads", &n_kernel_loads},
        {"capture_broken", &n_capture_broken}, {"alloc_failed", &n_alloc_failed}, {"wait_failed", &n_wait_failed},
        {"capture_query_failed", &n_capture_query_failed},
    };
    if (strcmp(what, "ctx_depth") == 0)
        return (unsigned long long)ctx_depth;
    if (strcmp(what, "waits") == 0)
        return (unsigned long long)__atomic_load_n(&inj_wait.done, __ATOMIC_RELAXED);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (strcmp(what, rows[i].name) == 0)
            return __atomic_load_n(rows[i].v, __ATOMIC_RELAXED);
    return ~0ULL;
}

/* Make device `device`'s context current, as a CUDA program's thread has. */
API void mock_cuda_set_current(int device)
{
    ctx_depth = 1;
    ctx_stack[0] = device >= 0 ? mock_ctx_of(device) : NULL;
}

/* ---------------------------------------------------------- driver API */

API CUresult cuInit(unsigned int flags)
{
    (void)flags;
    COUNT(n_init, 1);
    mock_initialized = 1;
    return SUCCESS;
}

API CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return SUCCESS;
}

API CUresult cuDeviceGetCount(int *n)
{
    if (!mock_initialized)
        return ERR_NOT_INITIALIZED;
    *n = ndevices();
    return SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!mock_initialized)
        return ERR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= ndevices())
        return ERR_INVALID_DEVICE;
    *d = ordinal;
    return SUCCESS;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    (void)d;
    strncpy(name, "hipress mock device", (size_t)len);
    name[len - 1] = '\0';
    return SUCCESS;
}

API CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
    (void)d;
    *v = attr == ATTR_CC_MAJOR ? 9 : 0;
    return SUCCESS;
}

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    (void)d;
    *bytes = (size_t)1 << 30;
    return SUCCESS;
}

API CUresult cuGetErrorName(CUresult rc, const char **s)
{
    switch (rc) {
    case SUCCESS: *s = "CUDA_SUCCESS"; return SUCCESS;
    case ERR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return SUCCESS;
    case ERR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return SUCCESS;
    case ERR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return SUCCESS;
    case ERR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return SUCCESS;
    case ERR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return SUCCESS;
    case ERR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return SUCCESS;
    case ERR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; return SUCCESS;
    case ERR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; return SUCCESS;
    case ERR_CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return SUCCESS;
    case ERR_CAPTURE_INVALIDATED: *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; return SUCCESS;
    case ERR_CAPTURE_UNMATCHED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"; return SUCCESS;
    default: *s = NULL; return ERR_INVALID_VALUE;
    }
}

API CUresult cuGetErrorString(CUresult rc, const char **s)
{
    return cuGetErrorName(rc, s);
}

API CUresult cuPointerGetAttributes(unsigned int n, int *attrs, void **data, CUdeviceptr ptr)
{
    int r, device = 0, managed = 0;
    COUNT(n_query, 1);
    if (!mock_initialized)
        return ERR_NOT_INITIALIZED;
    r = mock_region_info((const void *)(uintptr_t)ptr, &device, &managed);
    for (unsigned int i = 0; i < n; i++)
        switch (attrs[i]) {
        case ATTR_CONTEXT: *(CUcontext *)data[i] = r ? mock_ctx_of(device) : NULL; break;
        case ATTR_MEMORY_TYPE: *(unsigned int *)data[i] = r ? 2u : 0u; break;
        case ATTR_IS_MANAGED: *(unsigned int *)data[i] = r ? (unsigned int)managed : 0u; break;
        case ATTR_DEVICE_ORDINAL: *(int *)data[i] = r ? device : -2; break;
        default: return ERR_INVALID_VALUE;
        }
    return SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *c)
{
    *c = mock_current();
    return SUCCESS;
}

API CUresult cuCtxGetDevice(CUdevice *d)
{
    CUcontext c = mock_current();
    if (c == NULL)
        return ERR_INVALID_CONTEXT;
    *d = mock_ctx_device(c);
    return SUCCESS;
}

API CUresult cuCtxPushCurrent_v2(CUcontext c)
{
    if (ctx_depth == 16 || c == NULL)
        return ERR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return SUCCESS;
}

API CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
    if (ctx_depth == 0)
        return ERR_INVALID_CONTEXT;
    *c = ctx_stack[--ctx_depth];
    return SUCCESS;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    COUNT(n_retain, 1);
    *c = mock_ctx_of(d);
    return SUCCESS;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    (void)d;
    return SUCCESS;
}

API CUresult cuCtxSynchronize(void)
{
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    if (mock_hangs())
        mock_block_for_ever("cuCtxSynchronize");
    return mock_device_sync("cuCtxSynchronize");
}

/* Count a copy between host and device memory (either side may be either). */
void mock_count_copy(const void *dst, const void *src, size_t n)
{
    int d_dev = mock_is_device(dst, n), s_dev = mock_is_device(src, n);
    if (s_dev && !d_dev) {
        COUNT(n_d2h, 1);
        COUNT(n_d2h_bytes, n);
    } else if (d_dev && !s_dev) {
        COUNT(n_h2d, 1);
        COUNT(n_h2d_bytes, n);
    }
}

/* The synchronous copies: on the legacy stream, which they wait for. */
static CUresult sync_copy(void *dst, const void *src, size_t n, int to_device)
{
    op_t o = {.kind = OP_COPY, .dst = dst, .src = src, .n = n};
    mstream_t *s;
    CUresult rc;
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    if (!mock_is_device(to_device ? dst : src, n))
        return ERR_INVALID_VALUE;
    if ((rc = mock_capture_check(to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH")) != SUCCESS)
        return rc;
    mock_count_copy(dst, src, n);
    s = mock_stream_of(NULL);
    if ((rc = mock_enqueue(s, &o)) != SUCCESS)
        return rc;
    mock_wait_stream(s, s->queued, to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH");
    COUNT(n_syncs, 1);
    return SUCCESS;
}

API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return sync_copy(dst, (const void *)(uintptr_t)src, n, 0);
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return sync_copy((void *)(uintptr_t)dst, src, n, 1);
}

/* Page-locked host memory, with the context it was allocated in. */
#define MAX_PINNED 1024
static struct { void *p; CUcontext ctx; } pinned[MAX_PINNED];
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;

API CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags)
{
    CUcontext cur = mock_current();
    CUresult rc;
    (void)flags;
    if (cur == NULL)
        return ERR_INVALID_CONTEXT;
    if ((rc = mock_device_sync("cuMemHostAlloc")) != SUCCESS)
        return rc;
    *p = malloc(n ? n : 1);
    if (*p == NULL)
        return ERR_OUT_OF_MEMORY;
    pthread_mutex_lock(&pin_lock);
    for (int i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p == NULL) {
            pinned[i].p = *p;
            pinned[i].ctx = cur;
            break;
        }
    pthread_mutex_unlock(&pin_lock);
    return SUCCESS;
}

/* Freed in its context: the driver needs one current, and the allocation's
 * is the one that surely is alive. */
API CUresult cuMemFreeHost(void *p)
{
    CUcontext cur = mock_current();
    CUresult rc;
    pthread_mutex_lock(&pin_lock);
    for (int i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p == p && p != NULL) {
            if (pinned[i].ctx != cur) {
                pthread_mutex_unlock(&pin_lock);
                COUNT(n_bad_free_host, 1);
                fprintf(stderr, "mock_cuda: cuMemFreeHost(%p) with context %p current, allocated in %p\n", p, cur,
                        pinned[i].ctx);
                return ERR_INVALID_CONTEXT;
            }
            pinned[i].p = NULL;
            break;
        }
    pthread_mutex_unlock(&pin_lock);
    if ((rc = mock_device_sync("cuMemFreeHost")) != SUCCESS)
        return rc;
    free(p);
    return SUCCESS;
}

/* ------------------------------------------- the device codec's needs */

static CUresult dev_alloc(CUdeviceptr *p, size_t n)
{
    CUcontext cur = mock_current();
    void *m;
    if (cur == NULL)
        return ERR_INVALID_CONTEXT;
    if (alloc_fails())
        return ERR_OUT_OF_MEMORY;
    m = mock_region_new(n, mock_ctx_device(cur), 0);
    if (m == NULL)
        return ERR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)m;
    return SUCCESS;
}

/* A device-wide synchronisation first, as the driver's may be. */
API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    CUresult rc;
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    if ((rc = mock_device_sync("cuMemAlloc")) != SUCCESS)
        return rc;
    COUNT(n_alloc, 1);
    return dev_alloc(p, n);
}

/* (memory opened from another process is closed, not freed).  Memory of
 * cuMemAllocAsync is freed at once, with no synchronisation: an entry still
 * queued that uses it would use it after its free (the allocator may hand
 * it out again at once). */
API CUresult cuMemFree_v2(CUdeviceptr p)
{
    void *base = NULL;
    size_t len = 0;
    mstream_t *as = NULL;
    char from[96], use[256], by[160];
    CUresult rc;
    if (mock_region_async_of((void *)(uintptr_t)p, &base, &len, &as)) {
        if (base != (void *)(uintptr_t)p)
            return ERR_INVALID_VALUE;
        mock_caller(__builtin_return_address(0), from, sizeof(from));
        if (mock_pending_use(base, len, use, sizeof(use)))
            mock_rule_broken("cuMemFree(%p)%s frees stream-ordered memory (cuMemAllocAsync on stream %d) at once, "
                             "while %s: a use after its free (CUDA Driver API, Stream Ordered Memory Allocator: every "
                             "access between the allocation and the free in stream order; free it with "
                             "cuMemFreeAsync on the stream that last used it)", base, from, as->id, use);
        snprintf(by, sizeof(by), "cuMemFree(%p)%s, with no synchronisation", base, from);
        mock_region_free(base, by);
        return SUCCESS;
    }
    if ((rc = mock_device_sync("cuMemFree")) != SUCCESS)
        return rc;
    return mock_region_free((void *)(uintptr_t)p, "cuMemFree") == 0 ? SUCCESS : ERR_INVALID_VALUE;
}

/* Stream-ordered: no synchronisation; the memory is the stream's from its
 * entry on, and freed when the stream reaches the free. */
API CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
    op_t o = {.kind = OP_MARK};
    mstream_t *m = mock_stream_of(s);
    unsigned long long seq = 0;
    CUresult rc = dev_alloc(p, n);
    if (rc != SUCCESS)
        return rc;
    COUNT(n_alloc_async, 1);
    if ((rc = mock_enqueue_at(m, &o, &seq)) == SUCCESS)
        mock_region_async((void *)(uintptr_t)*p, m, seq);
    return rc;
}

API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    op_t o = {.kind = OP_FREE, .dst = (void *)(uintptr_t)p};
    if (!mock_is_device(o.dst, 1))
        return ERR_INVALID_VALUE;
    return mock_enqueue(mock_stream_of(s), &o);
}

/* The pools of stream-ordered memory: one per device, whose attributes the
 * stand-in accepts and ignores. */
API CUresult cuDeviceGetDefaultMemPool(void **pool, CUdevice d)
{
    *pool = (void *)mock_ctx_of(d);
    return SUCCESS;
}

API CUresult cuMemPoolSetAttribute(void *pool, int attr, void *value)
{
    (void)pool; (void)attr; (void)value;
    return SUCCESS;
}
