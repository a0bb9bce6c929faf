/*
 * A stand-in for the CUDA driver, built as tests/mock/.libs/libcuda.so.1
 * (soname libcuda.so.1), so the GPU path's host side runs on machines
 * without a GPU.  It implements the driver functions hipress uses, with the
 * driver's values, and nothing else.
 *
 * "Device memory" (mock_cuda_malloc) is a mapping with no access rights:
 * any host read or write of it crashes, as a real device pointer does in a
 * non-CUDA-aware MPI.  Its contents live in a host shadow that the copy
 * functions use.  With MOCK_CUDA_HOST_ACCESSIBLE=1 in the environment the
 * mapping is ordinary memory (the shadow is the mapping itself): for runs
 * where device pointers are meant to reach MPI unchanged.
 *
 * Like the driver, the copies need a current context; the pointer queries
 * fail with CUDA_ERROR_NOT_INITIALIZED before cuInit.  Counters and helpers
 * for the tests are exported as mock_cuda_*.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;

enum {
    SUCCESS = 0, ERR_INVALID_VALUE = 1, ERR_NOT_INITIALIZED = 3, ERR_INVALID_DEVICE = 101,
    ERR_INVALID_CONTEXT = 201
};
enum { ATTR_CONTEXT = 1, ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, ATTR_DEVICE_ORDINAL = 9 };
enum { ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76 };

#define MAX_REGIONS 1024
static struct region {
    char  *base;
    size_t len;
    char  *shadow;
    int    device;
    int    managed;
} regions[MAX_REGIONS];

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static char the_context[2];   /* one context per device, by address */
static void *capturing[16];
static unsigned long long n_query, n_d2h, n_h2d, n_init, n_retain, n_streams, n_events, n_async, n_alloc;
static __thread CUcontext ctx_stack[16];
static __thread int ctx_depth;

static int ndevices(void)
{
    const char *s = getenv("MOCK_CUDA_DEVICES");
    return s != NULL ? atoi(s) : 1;
}

static CUcontext ctx_of(int device)
{
    return (CUcontext)&the_context[device & 1];
}

/* The region holding [p, p + n), or NULL. */
static struct region *find(uintptr_t p, size_t n)
{
    struct region *r = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_REGIONS; i++) {
        uintptr_t b = (uintptr_t)regions[i].base;
        if (regions[i].base != NULL && p >= b && p - b < regions[i].len && n <= regions[i].len - (p - b)) {
            r = &regions[i];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ------------------------------------------------------------ test API */

API void *mock_cuda_malloc_managed(size_t bytes, int device, int managed)
{
    int open = getenv("MOCK_CUDA_HOST_ACCESSIBLE") != NULL && atoi(getenv("MOCK_CUDA_HOST_ACCESSIBLE")) != 0;
    size_t len = bytes ? bytes : 1;
    char *base = mmap(NULL, len, open ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shadow = open ? base : calloc(1, len);
    if (base == MAP_FAILED || shadow == NULL)
        return NULL;
    pthread_mutex_lock(&lock);
    initialized = 1;   /* as cudaMalloc initialises the driver */
    for (int i = 0; i < MAX_REGIONS; i++)
        if (regions[i].base == NULL) {
            regions[i] = (struct region){base, len, shadow, device, managed};
            pthread_mutex_unlock(&lock);
            return base;
        }
    pthread_mutex_unlock(&lock);
    return NULL;
}

API void *mock_cuda_malloc(size_t bytes, int device)
{
    return mock_cuda_malloc_managed(bytes, device, 0);
}

API void mock_cuda_free(void *p)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_REGIONS; i++)
        if (regions[i].base == p) {
            if (regions[i].shadow != regions[i].base)
                free(regions[i].shadow);
            munmap(regions[i].base, regions[i].len);
            regions[i].base = NULL;
        }
    pthread_mutex_unlock(&lock);
}

/* Host-side access to device memory, for the tests' checks. */
API int mock_cuda_write(void *dev, const void *src, size_t n)
{
    struct region *r = find((uintptr_t)dev, n);
    if (r == NULL)
        return -1;
    memcpy(r->shadow + ((char *)dev - r->base), src, n);
    return 0;
}

API int mock_cuda_read(void *dst, const void *dev, size_t n)
{
    struct region *r = find((uintptr_t)dev, n);
    if (r == NULL)
        return -1;
    memcpy(dst, r->shadow + ((const char *)dev - r->base), n);
    return 0;
}

/* The host shadow of a device address (p itself for host memory): the
 * emulated CUDA module (cuda/hp_kern_emu.c) runs its kernels on it. */
API void *mock_cuda_shadow(const void *p)
{
    struct region *r = find((uintptr_t)p, 1);
    return r != NULL ? r->shadow + ((const char *)p - r->base) : (void *)(uintptr_t)p;
}

API void mock_cuda_set_capturing(void *stream, int on)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 16; i++)
        if (on ? capturing[i] == NULL : capturing[i] == stream) {
            capturing[i] = on ? stream : NULL;
            break;
        }
    pthread_mutex_unlock(&lock);
}

/* "query", "d2h", "h2d", "init", "retain", "streams", "events", "ctx_depth",
 * "async" (cuMemcpyAsync), "alloc" (cuMemAlloc) */
API unsigned long long mock_cuda_count(const char *what)
{
    if (strcmp(what, "query") == 0) return n_query;
    if (strcmp(what, "d2h") == 0) return n_d2h;
    if (strcmp(what, "h2d") == 0) return n_h2d;
    if (strcmp(what, "init") == 0) return n_init;
    if (strcmp(what, "retain") == 0) return n_retain;
    if (strcmp(what, "streams") == 0) return n_streams;
    if (strcmp(what, "events") == 0) return n_events;
    if (strcmp(what, "ctx_depth") == 0) return (unsigned long long)ctx_depth;
    if (strcmp(what, "async") == 0) return n_async;
    if (strcmp(what, "alloc") == 0) return n_alloc;
    return ~0ULL;
}

/* Make device `device`'s context current, as a CUDA program's thread has. */
API void mock_cuda_set_current(int device)
{
    ctx_depth = 1;
    ctx_stack[0] = device >= 0 ? ctx_of(device) : NULL;
}

/* ---------------------------------------------------------- driver API */

API CUresult cuInit(unsigned int flags)
{
    (void)flags;
    __atomic_add_fetch(&n_init, 1, __ATOMIC_RELAXED);
    initialized = 1;
    return SUCCESS;
}

API CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return SUCCESS;
}

API CUresult cuDeviceGetCount(int *n)
{
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    *n = ndevices();
    return SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!initialized)
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
    case ERR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return SUCCESS;
    case ERR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return SUCCESS;
    case ERR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return SUCCESS;
    default: *s = NULL; return ERR_INVALID_VALUE;
    }
}

API CUresult cuGetErrorString(CUresult rc, const char **s)
{
    return cuGetErrorName(rc, s);
}

API CUresult cuPointerGetAttributes(unsigned int n, int *attrs, void **data, CUdeviceptr ptr)
{
    struct region *r;
    __atomic_add_fetch(&n_query, 1, __ATOMIC_RELAXED);
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    r = find((uintptr_t)ptr, 0);
    for (unsigned int i = 0; i < n; i++)
        switch (attrs[i]) {
        case ATTR_CONTEXT: *(CUcontext *)data[i] = r ? ctx_of(r->device) : NULL; break;
        case ATTR_MEMORY_TYPE: *(unsigned int *)data[i] = r ? 2u : 0u; break;
        case ATTR_IS_MANAGED: *(unsigned int *)data[i] = r ? (unsigned int)r->managed : 0u; break;
        case ATTR_DEVICE_ORDINAL: *(int *)data[i] = r ? r->device : -2; break;
        default: return ERR_INVALID_VALUE;
        }
    return SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *c)
{
    *c = ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
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
    __atomic_add_fetch(&n_retain, 1, __ATOMIC_RELAXED);
    *c = ctx_of(d);
    return SUCCESS;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    (void)d;
    return SUCCESS;
}

static CUresult copy(void *dst, const void *src, size_t n, int to_device)
{
    CUcontext cur = ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
    struct region *r = find(to_device ? (uintptr_t)dst : (uintptr_t)src, n);
    if (cur == NULL)
        return ERR_INVALID_CONTEXT;
    if (r == NULL)
        return ERR_INVALID_VALUE;
    if (to_device)
        memcpy(r->shadow + ((char *)dst - r->base), src, n);
    else
        memcpy(dst, r->shadow + ((const char *)src - r->base), n);
    return SUCCESS;
}

API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    __atomic_add_fetch(&n_d2h, 1, __ATOMIC_RELAXED);
    return copy(dst, (const void *)(uintptr_t)src, n, 0);
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    __atomic_add_fetch(&n_h2d, 1, __ATOMIC_RELAXED);
    return copy((void *)(uintptr_t)dst, src, n, 1);
}

API CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    *p = malloc(n ? n : 1);
    return *p != NULL ? SUCCESS : ERR_INVALID_VALUE;
}

API CUresult cuMemFreeHost(void *p)
{
    free(p);
    return SUCCESS;
}

API CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    (void)flags;
    if (ctx_depth == 0)
        return ERR_INVALID_CONTEXT;
    __atomic_add_fetch(&n_streams, 1, __ATOMIC_RELAXED);
    *s = malloc(1);
    return SUCCESS;
}

API CUresult cuStreamDestroy_v2(CUstream s)
{
    __atomic_sub_fetch(&n_streams, 1, __ATOMIC_RELAXED);
    free(s);
    return SUCCESS;
}

API CUresult cuStreamSynchronize(CUstream s)
{
    (void)s;
    return SUCCESS;
}

API CUresult cuStreamIsCapturing(CUstream s, int *status)
{
    *status = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 16; i++)
        if (capturing[i] != NULL && capturing[i] == s)
            *status = 1;
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}

API CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
    (void)flags;
    if (ctx_depth == 0)
        return ERR_INVALID_CONTEXT;
    __atomic_add_fetch(&n_events, 1, __ATOMIC_RELAXED);
    *e = malloc(1);
    return SUCCESS;
}

API CUresult cuEventRecord(CUevent e, CUstream s)
{
    (void)e; (void)s;
    return SUCCESS;
}

API CUresult cuEventSynchronize(CUevent e)
{
    (void)e;
    return SUCCESS;
}

API CUresult cuEventDestroy_v2(CUevent e)
{
    __atomic_sub_fetch(&n_events, 1, __ATOMIC_RELAXED);
    free(e);
    return SUCCESS;
}

/* ------------------------------------------- the device codec's needs */

/* Streams complete at once: asynchronous work is done when it is queued. */

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    CUcontext cur = ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
    void *m;
    if (cur == NULL)
        return ERR_INVALID_CONTEXT;
    m = mock_cuda_malloc(n, (int)((char *)cur - the_context));
    if (m == NULL)
        return ERR_INVALID_VALUE;
    __atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED);
    *p = (CUdeviceptr)(uintptr_t)m;
    return SUCCESS;
}

API CUresult cuMemFree_v2(CUdeviceptr p)
{
    mock_cuda_free((void *)(uintptr_t)p);
    return SUCCESS;
}

API CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    struct region *r = find((uintptr_t)p, n);
    (void)s;
    if (r == NULL)
        return ERR_INVALID_VALUE;
    memset(r->shadow + ((char *)(uintptr_t)p - r->base), v, n);
    return SUCCESS;
}

API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    CUcontext cur = ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
    (void)s;
    if (cur == NULL)
        return ERR_INVALID_CONTEXT;
    __atomic_add_fetch(&n_async, 1, __ATOMIC_RELAXED);
    memmove(mock_cuda_shadow((void *)(uintptr_t)dst), mock_cuda_shadow((const void *)(uintptr_t)src), n);
    return SUCCESS;
}

API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    (void)s; (void)e; (void)flags;
    return SUCCESS;
}
