/*
 * A stand-in for the CUDA driver, built as tests/gpu/mock/.libs/libcuda.so.1
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
 * fail with CUDA_ERROR_NOT_INITIALIZED before cuInit.
 *
 * Streams are queues.  Every asynchronous operation (cuMemcpyAsync,
 * cuMemsetD8Async, cuLaunchHostFunc -- the emulated module's kernels come
 * this way, cuda/hp_kern_emu.h --, cuStreamWaitEvent) is an entry of its
 * stream's queue; an event records a position in a queue.  By default an
 * entry runs as soon as it is queued (the streams complete at once).  With
 * MOCK_CUDA_DEFERRED=1 it runs only when something needs it: the stream is
 * synchronised or queried complete, an event recorded after it is
 * synchronised or queried, a stream that waits on such an event runs, the
 * context is synchronised, or memory is freed (cuMemFree waits for the
 * device, as the driver's does).  So a host read before the wait sees the
 * old bytes, and so does work on a stream that runs first and reads what
 * another produces without an event between them.  MOCK_CUDA_DEFERRED=2
 * makes that order likely: a host wait for one stream runs every other
 * stream's queued work first, and the stand-in NCCL's run of one
 * (mock_cuda_stream_flush) the other streams' work that does not wait for
 * it.  A copy reads its host source when it runs,
 * as a copy from page-locked memory does.
 *
 * MOCK_CUDA_HANG=N: from the N-th wait on (1: all), nothing completes --
 * cuStreamQuery and cuEventQuery report CUDA_ERROR_NOT_READY for ever, and
 * cuStreamSynchronize, cuEventSynchronize and cuCtxSynchronize block for
 * ever (after a line on stderr), as a stuck kernel makes them.
 * MOCK_CUDA_HANG_RANK=r: only in the process whose OMPI_COMM_WORLD_RANK is r.
 *
 * Counters and helpers for the tests are exported as mock_cuda_*
 * (mock_cuda_count lists them): host synchronisations, host copies and
 * their bytes, what ran on the legacy or per-thread default stream, pinned
 * memory freed outside its context.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void (*CUhostFn)(void *);

enum {
    SUCCESS = 0, ERR_INVALID_VALUE = 1, ERR_NOT_INITIALIZED = 3, ERR_INVALID_DEVICE = 101,
    ERR_INVALID_CONTEXT = 201, ERR_INVALID_HANDLE = 400, ERR_NOT_READY = 600
};
enum { ATTR_CONTEXT = 1, ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, ATTR_DEVICE_ORDINAL = 9 };
enum { ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76 };
/* cuda.h's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD */
#define STREAM_LEGACY ((CUstream)0x1)
#define STREAM_PER_THREAD ((CUstream)0x2)

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
static unsigned long long n_query, n_d2h, n_h2d, n_d2h_bytes, n_h2d_bytes, n_init, n_retain, n_streams, n_events,
    n_async, n_alloc, n_syncs, n_legacy, n_per_thread, n_pending, n_hostfn, n_bad_free_host;
static __thread CUcontext ctx_stack[16];
static __thread int ctx_depth;

#define COUNT(v, by) __atomic_add_fetch(&(v), (by), __ATOMIC_RELAXED)

static int ndevices(void)
{
    const char *s = getenv("MOCK_CUDA_DEVICES");
    return s != NULL ? atoi(s) : 1;
}

static CUcontext ctx_of(int device)
{
    return (CUcontext)&the_context[device & 1];
}

static CUcontext current(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
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

/* ------------------------------------------------------------ settings */

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s != NULL && *s != '\0' ? atoi(s) : dflt;
}

/* MOCK_CUDA_DEFERRED: 0 at once, 1 only when needed, 2 the same but a
 * wait runs every other stream first */
static int deferred(void)
{
    static int d = -1;
    if (d < 0)
        d = env_int("MOCK_CUDA_DEFERRED", 0);
    return d;
}

/* 0: waits complete; else the wait (from 1) from which nothing does */
static int hang_from(void)
{
    static int h = -1;
    if (h < 0) {
        int r = env_int("MOCK_CUDA_HANG_RANK", -1);
        h = env_int("MOCK_CUDA_HANG", 0);
        if (h < 0 || (r >= 0 && env_int("OMPI_COMM_WORLD_RANK", -1) != r))
            h = 0;
    }
    return h;
}

static unsigned long long n_waits;   /* waits seen, for MOCK_CUDA_HANG */

/* Whether this wait is one that never ends. */
static int hangs(void)
{
    return hang_from() > 0 && COUNT(n_waits, 1) >= (unsigned long long)hang_from();
}

static void block_for_ever(const char *what)
{
    fprintf(stderr, "mock_cuda: %s blocks for ever (MOCK_CUDA_HANG): an unbounded wait\n", what);
    fflush(stderr);
    for (;;)
        pause();
}

/* ------------------------------------------------------ streams, queues */

enum { OP_COPY, OP_MEMSET, OP_FN, OP_WAIT };

struct mstream;
typedef struct op {
    int             kind;
    void           *dst;
    const void     *src;
    size_t          n;
    unsigned char   v;
    CUhostFn        fn;
    void           *arg;
    struct mstream *ws;      /* OP_WAIT: run ws up to wseq first */
    unsigned long long wseq;
    struct op      *next;
} op_t;

typedef struct mstream {
    unsigned long long queued, done;   /* entries queued, entries run */
    op_t              *head, *tail;
    struct mstream    *next_all;
    int                is_default;
} mstream_t;

typedef struct mevent {
    mstream_t         *s;      /* NULL: never recorded (complete) */
    unsigned long long seq;
} mevent_t;

/* One lock for every queue, recursive: an entry that runs may make another
 * stream run (OP_WAIT), or queue work itself (a host function). */
static pthread_mutex_t qlock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static mstream_t legacy_s = {.is_default = 1}, per_thread_s = {.is_default = 1};
static mstream_t *all_streams;   /* created ones */

/* Handles this driver did not make (the tests' stand-in values such as
 * (cudaStream_t)0x77, a runtime's streams): a queue each, made at first use. */
#define MAX_EXTERNAL 64
static struct { CUstream h; mstream_t *s; } external[MAX_EXTERNAL];

/* The queue of a handle that is not a default stream (under qlock). */
static mstream_t *queue_of(CUstream s)
{
    int i;
    for (mstream_t *m = all_streams; m != NULL; m = m->next_all)
        if ((CUstream)m == s)
            return m;
    for (i = 0; i < MAX_EXTERNAL && external[i].h != NULL; i++)
        if (external[i].h == s)
            return external[i].s;
    if (i == MAX_EXTERNAL || (external[i].s = calloc(1, sizeof(mstream_t))) == NULL)
        abort();
    external[i].h = s;
    external[i].s->next_all = all_streams;   /* waited for by cuCtxSynchronize and frees */
    all_streams = external[i].s;
    return external[i].s;
}

/* The stream behind a handle, counting work on the default streams. */
static mstream_t *stream_of(CUstream s)
{
    mstream_t *m;
    if (s == NULL || s == STREAM_LEGACY) {
        COUNT(n_legacy, 1);
        return &legacy_s;
    }
    if (s == STREAM_PER_THREAD) {
        COUNT(n_per_thread, 1);
        return &per_thread_s;
    }
    pthread_mutex_lock(&qlock);
    m = queue_of(s);
    pthread_mutex_unlock(&qlock);
    return m;
}

/* The host shadow of a device address (p itself for host memory). */
static void *shadow_of(const void *p);

static void run_to(mstream_t *s, unsigned long long upto);

static void exec(op_t *o)
{
    switch (o->kind) {
    case OP_COPY:
        memmove(shadow_of(o->dst), shadow_of(o->src), o->n);
        break;
    case OP_MEMSET:
        memset(shadow_of(o->dst), o->v, o->n);
        break;
    case OP_FN:
        o->fn(o->arg);
        break;
    case OP_WAIT:
        run_to(o->ws, o->wseq);
        break;
    }
}

/* Run s's entries up to number `upto` (under qlock). */
static void run_to(mstream_t *s, unsigned long long upto)
{
    while (s->done < upto && s->head != NULL) {
        op_t *o = s->head;
        s->head = o->next;
        if (s->head == NULL)
            s->tail = NULL;
        exec(o);
        s->done++;
        __atomic_sub_fetch(&n_pending, 1, __ATOMIC_RELAXED);
        free(o);
    }
}

static void run_all(void)
{
    pthread_mutex_lock(&qlock);
    run_to(&legacy_s, legacy_s.queued);
    run_to(&per_thread_s, per_thread_s.queued);
    for (mstream_t *s = all_streams; s != NULL; s = s->next_all)
        run_to(s, s->queued);
    pthread_mutex_unlock(&qlock);
}

static CUresult enqueue(mstream_t *s, const op_t *o)
{
    op_t *e = malloc(sizeof(*e));
    if (e == NULL)
        return ERR_INVALID_VALUE;
    *e = *o;
    e->next = NULL;
    pthread_mutex_lock(&qlock);
    if (s->tail != NULL)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    s->queued++;
    COUNT(n_pending, 1);
    if (!deferred())
        run_to(s, s->queued);
    pthread_mutex_unlock(&qlock);
    return SUCCESS;
}

/* MOCK_CUDA_DEFERRED=2: before a host wait for `s`, everything queued on
 * the other streams runs (a schedule a GPU may choose): work that reads
 * what s produces without an event between them runs before s did. */
static void others_first(const mstream_t *s)
{
    if (deferred() != 2)
        return;
    if (s != &legacy_s)
        run_to(&legacy_s, legacy_s.queued);
    if (s != &per_thread_s)
        run_to(&per_thread_s, per_thread_s.queued);
    for (mstream_t *o = all_streams; o != NULL; o = o->next_all)
        if (o != s)
            run_to(o, o->queued);
}

/* Run x's entries up to number `upto` as far as they go without what s has
 * queued and not yet run (an event wait on s beyond it, directly or through
 * another stream's waits): 1 when x got there, 0 when it stopped at such a
 * wait (under qlock). */
static int run_before(mstream_t *x, unsigned long long upto, const mstream_t *s, int depth)
{
    while (x->done < upto && x->head != NULL) {
        op_t *o = x->head;
        if (o->kind == OP_WAIT &&
            (o->ws == s ? o->wseq > s->done : depth >= 16 || !run_before(o->ws, o->wseq, s, depth + 1)))
            return 0;
        x->head = o->next;
        if (x->head == NULL)
            x->tail = NULL;
        exec(o);
        x->done++;
        __atomic_sub_fetch(&n_pending, 1, __ATOMIC_RELAXED);
        free(o);
    }
    return 1;
}

static void sync_stream(mstream_t *s)
{
    pthread_mutex_lock(&qlock);
    others_first(s);
    run_to(s, s->queued);
    pthread_mutex_unlock(&qlock);
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

/* As cudaFree: waits for the device first. */
API void mock_cuda_free(void *p)
{
    run_all();
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

/* Host-side access to device memory, for the tests' checks: what a copy
 * on the legacy stream would see of work on non-blocking streams, that
 * is, only what has run (nothing is run for it). */
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

static void *shadow_of(const void *p)
{
    return mock_cuda_shadow(p);
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

/*
 * "query" (cuPointerGetAttributes), "init", "retain", "streams" and
 * "events" (alive), "ctx_depth", "alloc" (cuMemAlloc), "async"
 * (cuMemcpyAsync);
 * "syncs": host synchronisations -- cuStreamSynchronize,
 *   cuEventSynchronize, cuCtxSynchronize, and every cuStreamQuery or
 *   cuEventQuery that reports completion (the poll that ends a wait);
 * "d2h", "h2d", "d2h_bytes", "h2d_bytes": copies between device and host
 *   memory (synchronous or not) and their bytes;
 * "legacy", "per_thread": calls that queued work on, waited for or
 *   recorded on the legacy default stream (NULL, CU_STREAM_LEGACY; the
 *   synchronous copies too) or the per-thread one;
 * "pending": entries queued and not yet run (MOCK_CUDA_DEFERRED);
 * "hostfn": cuLaunchHostFunc calls;
 * "bad_free_host": cuMemFreeHost with a context current other than the
 *   allocation's (refused with CUDA_ERROR_INVALID_CONTEXT).
 */
API unsigned long long mock_cuda_count(const char *what)
{
    static const struct { const char *name; unsigned long long *v; } rows[] = {
        {"query", &n_query}, {"d2h", &n_d2h}, {"h2d", &n_h2d}, {"d2h_bytes", &n_d2h_bytes},
        {"h2d_bytes", &n_h2d_bytes}, {"init", &n_init}, {"retain", &n_retain}, {"streams", &n_streams},
        {"events", &n_events}, {"async", &n_async}, {"alloc", &n_alloc}, {"syncs", &n_syncs},
        {"legacy", &n_legacy}, {"per_thread", &n_per_thread}, {"pending", &n_pending}, {"hostfn", &n_hostfn},
        {"bad_free_host", &n_bad_free_host},
    };
    if (strcmp(what, "ctx_depth") == 0)
        return (unsigned long long)ctx_depth;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (strcmp(what, rows[i].name) == 0)
            return __atomic_load_n(rows[i].v, __ATOMIC_RELAXED);
    return ~0ULL;
}

/* Run what is queued on `stream` now, as a GPU may at any time (for the
 * stand-in NCCL: its collectives read their buffers at once, so the work
 * queued before them on their stream must have run; not a host
 * synchronisation, not counted).  Under MOCK_CUDA_DEFERRED=2 the other
 * streams' queued work that is not ordered after what `stream` has queued
 * (no event wait on it) runs first, as a GPU may schedule it: work that
 * reads what `stream` produces without such a wait reads the old bytes. */
API void mock_cuda_stream_flush(void *stream)
{
    mstream_t *m;
    pthread_mutex_lock(&qlock);
    m = stream == NULL || stream == STREAM_LEGACY ? &legacy_s
        : stream == STREAM_PER_THREAD ? &per_thread_s : queue_of(stream);
    if (deferred() == 2)
        for (mstream_t *o = all_streams; o != NULL; o = o->next_all)
            if (o != m)
                run_before(o, o->queued, m, 0);
    run_to(m, m->queued);
    pthread_mutex_unlock(&qlock);
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
    COUNT(n_init, 1);
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
    case ERR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return SUCCESS;
    case ERR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; return SUCCESS;
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
    COUNT(n_query, 1);
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
    *c = current();
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
    *c = ctx_of(d);
    return SUCCESS;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    (void)d;
    return SUCCESS;
}

API CUresult cuCtxSynchronize(void)
{
    if (current() == NULL)
        return ERR_INVALID_CONTEXT;
    if (hangs())
        block_for_ever("cuCtxSynchronize");
    run_all();
    COUNT(n_syncs, 1);
    return SUCCESS;
}

/* Count a copy between host and device memory (either side may be either). */
static void count_copy(const void *dst, const void *src, size_t n)
{
    int d_dev = find((uintptr_t)dst, n) != NULL, s_dev = find((uintptr_t)src, n) != NULL;
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
    struct region *r = find(to_device ? (uintptr_t)dst : (uintptr_t)src, n);
    op_t o = {.kind = OP_COPY, .dst = dst, .src = src, .n = n};
    CUresult rc;
    if (current() == NULL)
        return ERR_INVALID_CONTEXT;
    if (r == NULL)
        return ERR_INVALID_VALUE;
    count_copy(dst, src, n);
    if ((rc = enqueue(stream_of(NULL), &o)) != SUCCESS)
        return rc;
    sync_stream(&legacy_s);
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

API CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags)
{
    CUcontext cur = current();
    (void)flags;
    if (cur == NULL)
        return ERR_INVALID_CONTEXT;
    *p = malloc(n ? n : 1);
    if (*p == NULL)
        return ERR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p == NULL) {
            pinned[i].p = *p;
            pinned[i].ctx = cur;
            break;
        }
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}

/* Freed in its context: the driver needs one current, and the allocation's
 * is the one that surely is alive. */
API CUresult cuMemFreeHost(void *p)
{
    CUcontext cur = current();
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p == p && p != NULL) {
            if (pinned[i].ctx != cur) {
                pthread_mutex_unlock(&lock);
                COUNT(n_bad_free_host, 1);
                fprintf(stderr, "mock_cuda: cuMemFreeHost(%p) with context %p current, allocated in %p\n", p, cur,
                        pinned[i].ctx);
                return ERR_INVALID_CONTEXT;
            }
            pinned[i].p = NULL;
            break;
        }
    pthread_mutex_unlock(&lock);
    free(p);
    return SUCCESS;
}

API CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    mstream_t *m;
    (void)flags;
    if (ctx_depth == 0)
        return ERR_INVALID_CONTEXT;
    if ((m = calloc(1, sizeof(*m))) == NULL)
        return ERR_INVALID_VALUE;
    COUNT(n_streams, 1);
    pthread_mutex_lock(&qlock);
    m->next_all = all_streams;
    all_streams = m;
    pthread_mutex_unlock(&qlock);
    *s = m;
    return SUCCESS;
}

/* As the driver: queued work completes, then the stream goes. */
API CUresult cuStreamDestroy_v2(CUstream s)
{
    mstream_t *m = (mstream_t *)s, **pp;
    if (s == NULL || s == STREAM_LEGACY || s == STREAM_PER_THREAD)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&qlock);
    for (pp = &all_streams; *pp != NULL && *pp != m; pp = &(*pp)->next_all)
        ;
    if (*pp == NULL) {   /* not one of ours */
        pthread_mutex_unlock(&qlock);
        return ERR_INVALID_HANDLE;
    }
    run_to(m, m->queued);
    *pp = m->next_all;
    pthread_mutex_unlock(&qlock);
    __atomic_sub_fetch(&n_streams, 1, __ATOMIC_RELAXED);
    free(m);
    return SUCCESS;
}

API CUresult cuStreamSynchronize(CUstream s)
{
    mstream_t *m = stream_of(s);
    if (hangs())
        block_for_ever("cuStreamSynchronize");
    sync_stream(m);
    COUNT(n_syncs, 1);
    return SUCCESS;
}

API CUresult cuStreamQuery(CUstream s)
{
    mstream_t *m = stream_of(s);
    if (hangs())
        return ERR_NOT_READY;
    sync_stream(m);
    COUNT(n_syncs, 1);
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
    COUNT(n_events, 1);
    *e = calloc(1, sizeof(mevent_t));
    return *e != NULL ? SUCCESS : ERR_INVALID_VALUE;
}

API CUresult cuEventRecord(CUevent e, CUstream s)
{
    mevent_t *ev = (mevent_t *)e;
    mstream_t *m = stream_of(s);
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&qlock);
    ev->s = m;
    ev->seq = m->queued;
    pthread_mutex_unlock(&qlock);
    return SUCCESS;
}

static void run_event(mevent_t *ev)
{
    pthread_mutex_lock(&qlock);
    if (ev->s != NULL)
        others_first(ev->s);
    if (ev->s != NULL)
        run_to(ev->s, ev->seq);
    pthread_mutex_unlock(&qlock);
}

API CUresult cuEventSynchronize(CUevent e)
{
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    if (hangs())
        block_for_ever("cuEventSynchronize");
    run_event((mevent_t *)e);
    COUNT(n_syncs, 1);
    return SUCCESS;
}

API CUresult cuEventQuery(CUevent e)
{
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    if (hangs())
        return ERR_NOT_READY;
    run_event((mevent_t *)e);
    COUNT(n_syncs, 1);
    return SUCCESS;
}

API CUresult cuEventDestroy_v2(CUevent e)
{
    __atomic_sub_fetch(&n_events, 1, __ATOMIC_RELAXED);
    free(e);
    return SUCCESS;
}

/* ------------------------------------------- the device codec's needs */

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    CUcontext cur = current();
    void *m;
    if (cur == NULL)
        return ERR_INVALID_CONTEXT;
    m = mock_cuda_malloc(n, (int)((char *)cur - the_context));
    if (m == NULL)
        return ERR_INVALID_VALUE;
    COUNT(n_alloc, 1);
    *p = (CUdeviceptr)(uintptr_t)m;
    return SUCCESS;
}

/* Waits for the device first, as the driver's does. */
API CUresult cuMemFree_v2(CUdeviceptr p)
{
    mock_cuda_free((void *)(uintptr_t)p);
    return SUCCESS;
}

API CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    op_t o = {.kind = OP_MEMSET, .dst = (void *)(uintptr_t)p, .n = n, .v = v};
    if (find((uintptr_t)p, n) == NULL)
        return ERR_INVALID_VALUE;
    return enqueue(stream_of(s), &o);
}

API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    op_t o = {.kind = OP_COPY, .dst = (void *)(uintptr_t)dst, .src = (const void *)(uintptr_t)src, .n = n};
    if (current() == NULL)
        return ERR_INVALID_CONTEXT;
    COUNT(n_async, 1);
    count_copy(o.dst, o.src, n);
    return enqueue(stream_of(s), &o);
}

/* The directed asynchronous copies check their device side, as the
 * synchronous ones do. */
static CUresult async_copy(void *dst, const void *src, size_t n, CUstream s, int to_device)
{
    op_t o = {.kind = OP_COPY, .dst = dst, .src = src, .n = n};
    if (current() == NULL)
        return ERR_INVALID_CONTEXT;
    if (find(to_device ? (uintptr_t)dst : (uintptr_t)src, n) == NULL)
        return ERR_INVALID_VALUE;
    COUNT(n_async, 1);
    count_copy(dst, src, n);
    return enqueue(stream_of(s), &o);
}

API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return async_copy(dst, (const void *)(uintptr_t)src, n, s, 0);
}

API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    return async_copy((void *)(uintptr_t)dst, src, n, s, 1);
}

API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    mevent_t *ev = (mevent_t *)e;
    mstream_t *m = stream_of(s);
    op_t o = {.kind = OP_WAIT};
    (void)flags;
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&qlock);
    o.ws = ev->s;
    o.wseq = ev->seq;
    pthread_mutex_unlock(&qlock);
    if (o.ws == NULL || o.ws == m)
        return SUCCESS;   /* never recorded, or in stream order anyway */
    return enqueue(m, &o);
}

/* The host function runs in stream order (the emulated module's kernels). */
API CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg)
{
    op_t o = {.kind = OP_FN, .fn = fn, .arg = arg};
    if (fn == NULL)
        return ERR_INVALID_VALUE;
    COUNT(n_hostfn, 1);
    return enqueue(stream_of(s), &o);
}
