/*
 * The stand-in driver's functions on streams and events (see mock_cuda.c):
 * what queues work (asynchronous copies and sets, host functions -- the
 * emulated module's kernels, whose first launch synchronises the device --,
 * event waits, the stream memory operations), what waits for it, and
 * captures into graphs: a stream being captured records its work instead
 * of running it, and a call that would synchronise the device while a
 * capture forbids it is refused and invalidates the capture, as the driver
 * does.
 *
 * The stream memory operations work on 32-bit words of device memory,
 * this process's or opened from another (mock_cuda_mem.c): a write is a
 * release store in stream order; a wait holds its stream's later entries
 * until the word compares as asked, read with acquire, and never the host:
 * the device executor polls it (mock_cuda_exec.c), so a word another
 * process writes lets the stream go on by itself.
 */
#include "mock_cuda_int.h"
#include <stdlib.h>
#include <string.h>

static void *capturing[16];   /* mock_cuda_set_capturing's streams */
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;

/* --------------------------------------------------- streams and events */

API CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    mstream_t *m;
    (void)flags;
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    if ((m = mock_stream_new()) == NULL)
        return ERR_OUT_OF_MEMORY;
    COUNT(n_streams, 1);
    *s = m;
    return SUCCESS;
}

API CUresult cuStreamDestroy_v2(CUstream s)
{
    mstream_t *m;
    int ours = 0;
    if (s == NULL || s == STREAM_LEGACY || s == STREAM_PER_THREAD)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&qlock);
    for (m = all_streams; m != NULL && !ours; m = m->next_all)
        ours = (void *)m == s && m->handle == s && !m->doomed;
    pthread_mutex_unlock(&qlock);
    if (!ours)
        return ERR_INVALID_HANDLE;
    mock_stream_destroy((mstream_t *)s);
    __atomic_sub_fetch(&n_streams, 1, __ATOMIC_RELAXED);
    return SUCCESS;
}

/* A wait for the stream or event that captures forbid: one on the
 * capturing stream itself. */
static CUresult capture_wait_check(mstream_t *m, const char *what)
{
    if (m->cap_mode < 0)
        return SUCCESS;
    pthread_mutex_lock(&qlock);
    if (!m->cap_invalid)
        COUNT(n_capture_broken, 1);
    m->cap_invalid = 1;
    pthread_mutex_unlock(&qlock);
    fprintf(stderr, "mock_cuda: %s of a stream being captured: the capture is invalidated\n", what);
    return ERR_CAPTURE_UNSUPPORTED;
}

API CUresult cuStreamSynchronize(CUstream s)
{
    mstream_t *m = mock_stream_of(s);
    CUresult rc;
    if (mock_hangs())
        mock_block_for_ever("cuStreamSynchronize");
    if ((rc = capture_wait_check(m, "cuStreamSynchronize")) != SUCCESS)
        return rc;
    mock_wait_stream(m, m->queued, "cuStreamSynchronize");
    COUNT(n_syncs, 1);
    return SUCCESS;
}

API CUresult cuStreamQuery(CUstream s)
{
    mstream_t *m = mock_stream_of(s);
    CUresult rc;
    if (mock_hangs())
        return ERR_NOT_READY;
    if ((rc = capture_wait_check(m, "cuStreamQuery")) != SUCCESS)
        return rc;
    if (!mock_query(m, m->queued, "cuStreamQuery (polling)"))
        return ERR_NOT_READY;
    COUNT(n_syncs, 1);
    return mock_wait_fails() ? ERR_LAUNCH_FAILED : SUCCESS;
}

API CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
    (void)flags;
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    COUNT(n_events, 1);
    *e = calloc(1, sizeof(mevent_t));
    return *e != NULL ? SUCCESS : ERR_OUT_OF_MEMORY;
}

API CUresult cuEventRecord(CUevent e, CUstream s)
{
    mevent_t *ev = (mevent_t *)e;
    mstream_t *m = mock_stream_of(s);
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&qlock);
    ev->s = m->cap_mode >= 0 ? NULL : m;   /* (a captured record: complete outside the graph) */
    ev->seq = m->queued;
    pthread_mutex_unlock(&qlock);
    return SUCCESS;
}

API CUresult cuEventSynchronize(CUevent e)
{
    mevent_t *ev = (mevent_t *)e;
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    if (mock_hangs())
        mock_block_for_ever("cuEventSynchronize");
    if (ev->s != NULL)
        mock_wait_stream(ev->s, ev->seq, "cuEventSynchronize");
    COUNT(n_syncs, 1);
    return SUCCESS;
}

API CUresult cuEventQuery(CUevent e)
{
    mevent_t *ev = (mevent_t *)e;
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    if (mock_hangs())
        return ERR_NOT_READY;
    if (ev->s != NULL && !mock_query(ev->s, ev->seq, "cuEventQuery (polling)"))
        return ERR_NOT_READY;
    COUNT(n_syncs, 1);
    return mock_wait_fails() ? ERR_LAUNCH_FAILED : SUCCESS;
}

API CUresult cuEventDestroy_v2(CUevent e)
{
    __atomic_sub_fetch(&n_events, 1, __ATOMIC_RELAXED);
    free(e);
    return SUCCESS;
}

API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    mevent_t *ev = (mevent_t *)e;
    mstream_t *m = mock_stream_of(s);
    op_t o = {.kind = OP_WAIT};
    unsigned long long seq = 0;
    CUresult rc;
    (void)flags;
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&qlock);
    o.ws = ev->s;
    o.wseq = ev->seq;
    pthread_mutex_unlock(&qlock);
    if (o.ws == NULL || o.ws == m)
        return SUCCESS;   /* never recorded, or in stream order anyway */
    if ((rc = mock_enqueue_at(m, &o, &seq)) == SUCCESS && m->cap_mode < 0)
        mock_order_wait(m, seq, o.ws, o.wseq);
    return rc;
}

/* ------------------------------------------------------------ captures */

API CUresult cuStreamBeginCapture_v2(CUstream s, int mode)
{
    mstream_t *m = mock_stream_of(s);
    CUresult rc = SUCCESS;
    pthread_mutex_lock(&qlock);
    if (m == &legacy_s || m->cap_mode >= 0) {
        rc = ERR_INVALID_VALUE;
    } else {
        m->cap_mode = mode;
        m->cap_invalid = 0;
        m->cap_ops = 0;
        m->cap_thread = pthread_self();
    }
    pthread_mutex_unlock(&qlock);
    return rc;
}

/* The graph is the number of entries recorded (the stand-in launches none). */
API CUresult cuStreamEndCapture(CUstream s, void **graph)
{
    mstream_t *m = mock_stream_of(s);
    CUresult rc;
    pthread_mutex_lock(&qlock);
    rc = m->cap_mode < 0 ? ERR_CAPTURE_UNMATCHED : m->cap_invalid ? ERR_CAPTURE_INVALIDATED : SUCCESS;
    if (graph != NULL)
        *graph = rc == SUCCESS ? malloc(sizeof(unsigned long long)) : NULL;
    if (graph != NULL && *graph != NULL)
        *(unsigned long long *)*graph = m->cap_ops;
    m->cap_mode = -1;
    pthread_mutex_unlock(&qlock);
    return rc;
}

API CUresult cuGraphDestroy(void *graph)
{
    free(graph);
    return SUCCESS;
}

API CUresult cuStreamIsCapturing(CUstream s, int *status)
{
    mstream_t *m;
    *status = 0;
    if (mock_capture_query_fails())
        return ERR_LAUNCH_FAILED;
    pthread_mutex_lock(&cap_lock);
    for (int i = 0; i < 16; i++)
        if (capturing[i] != NULL && capturing[i] == s)
            *status = 1;
    pthread_mutex_unlock(&cap_lock);
    if (*status || s == NULL || s == STREAM_LEGACY || s == STREAM_PER_THREAD)
        return SUCCESS;
    pthread_mutex_lock(&qlock);
    m = mock_queue_of(s);
    *status = m->cap_mode < 0 ? 0 : m->cap_invalid ? 2 : 1;
    pthread_mutex_unlock(&qlock);
    return SUCCESS;
}

/* A stream the tests say is being captured (cuStreamIsCapturing answers
 * so; nothing else changes). */
API void mock_cuda_set_capturing(void *stream, int on)
{
    pthread_mutex_lock(&cap_lock);
    for (int i = 0; i < 16; i++)
        if (on ? capturing[i] == NULL : capturing[i] == stream) {
            capturing[i] = on ? stream : NULL;
            break;
        }
    pthread_mutex_unlock(&cap_lock);
}

/* The stand-in NCCL's operations on streams (mock_cuda.h). */
API int mock_cuda_enqueue_ext(void *stream, const mock_ext_ops_t *ops, void *arg)
{
    op_t o = {.kind = OP_EXT, .xo = ops, .xarg = arg};
    mock_thread()->nccl = 1;
    return mock_enqueue(mock_stream_of(stream), &o);
}

API int mock_cuda_captured(void *stream, const char *what)
{
    mstream_t *s = mock_stream_of(stream);
    int cap;
    pthread_mutex_lock(&qlock);
    cap = s->cap_mode >= 0;
    if (cap)
        s->cap_ops++;
    pthread_mutex_unlock(&qlock);
    (void)what;
    return cap;
}

/* ------------------------------------------------------------ captures */

static __thread int thread_capture_mode;   /* cuThreadExchangeStreamCaptureMode; 0 global */

API CUresult cuThreadExchangeStreamCaptureMode(int *mode)
{
    int old = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = old;
    return SUCCESS;
}

CUresult mock_capture_check(const char *what)
{
    CUresult rc = SUCCESS;
    pthread_t me = pthread_self();
    if (thread_capture_mode == 2)
        return SUCCESS;   /* relaxed */
    pthread_mutex_lock(&qlock);
    FOR_STREAMS(s) {
        int own;
        if (s->cap_mode < 0)
            continue;
        own = pthread_equal(s->cap_thread, me);
        if ((own && s->cap_mode != 2) || (!own && s->cap_mode == 0 && thread_capture_mode == 0)) {
            if (!s->cap_invalid) {
                COUNT(n_capture_broken, 1);
                fprintf(stderr, "mock_cuda: %s during a %s capture of stream %p%s: prohibited, the capture is "
                        "invalidated\n", what, s->cap_mode == 0 ? "global-mode" : "thread-local",
                        s->handle, own ? " (its own thread)" : " (on another thread)");
            }
            s->cap_invalid = 1;
            rc = ERR_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&qlock);
    return rc;
}

/* ------------------------------------------------------- kernel loading */

#define MAX_KERNELS 1024
static struct { CUhostFn fn; void *first; } kernels[MAX_KERNELS];
static int nkernels, all_loaded;
static pthread_mutex_t klock = PTHREAD_MUTEX_INITIALIZER;

CUresult mock_kernel_launch(CUhostFn fn, void *arg)
{
    /* the emulated module's launches pass the kernel's body first; one
     * whose argument starts with device memory (the IPC stand-in's
     * reduction, its module loaded with its communicator) is one kernel
     * whatever its buffers */
    void *first = arg != NULL ? *(void **)arg : NULL;
    int known = 0;
    if (first != NULL && mock_is_device(first, 1))
        first = NULL;
    pthread_mutex_lock(&klock);
    known = all_loaded;
    for (int i = 0; i < nkernels && !known; i++)
        known = kernels[i].fn == fn && kernels[i].first == first;
    if (!known && nkernels < MAX_KERNELS) {
        kernels[nkernels].fn = fn;
        kernels[nkernels++].first = first;
    }
    pthread_mutex_unlock(&klock);
    if (known)
        return SUCCESS;
    COUNT(n_kernel_loads, 1);
    return mock_device_sync("the first launch of a kernel (lazy loading)");
}

/* Every kernel of the process is loaded now (the emulated module's
 * preload): one device-wide synchronisation, and no first launch later. */
API int mock_cuda_kernels_loaded(void)
{
    int was;
    pthread_mutex_lock(&klock);
    was = all_loaded;
    all_loaded = 1;
    pthread_mutex_unlock(&klock);
    if (was)
        return SUCCESS;
    COUNT(n_kernel_loads, 1);
    return mock_device_sync("the loading of every kernel");
}

/* ------------------------------------------------------------- queued work */

API CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    op_t o = {.kind = OP_MEMSET, .dst = (void *)(uintptr_t)p, .n = n, .v = v};
    if (!mock_is_device(o.dst, n))
        return ERR_INVALID_VALUE;
    return mock_enqueue(mock_stream_of(s), &o);
}

API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    op_t o = {.kind = OP_COPY, .dst = (void *)(uintptr_t)dst, .src = (const void *)(uintptr_t)src, .n = n};
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    COUNT(n_async, 1);
    mock_count_copy(o.dst, o.src, n);
    return mock_enqueue(mock_stream_of(s), &o);
}

/* The directed asynchronous copies check their device side, as the
 * synchronous ones do.  A copy reads its host source when it runs, as a
 * copy from page-locked memory does. */
static CUresult async_copy(void *dst, const void *src, size_t n, CUstream s, int to_device)
{
    op_t o = {.kind = OP_COPY, .dst = dst, .src = src, .n = n};
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    if (!mock_is_device(to_device ? dst : src, n))
        return ERR_INVALID_VALUE;
    COUNT(n_async, 1);
    mock_count_copy(dst, src, n);
    return mock_enqueue(mock_stream_of(s), &o);
}

API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return async_copy(dst, (const void *)(uintptr_t)src, n, s, 0);
}

API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    return async_copy((void *)(uintptr_t)dst, src, n, s, 1);
}

/* The host function runs in stream order: the emulated module's kernels,
 * whose first launch synchronises the device (mock_kernel_launch). */
API CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg)
{
    op_t o = {.kind = OP_FN, .fn = fn, .arg = arg};
    mstream_t *m;
    CUresult rc;
    if (fn == NULL)
        return ERR_INVALID_VALUE;
    COUNT(n_hostfn, 1);
    m = mock_stream_of(s);
    if (m->cap_mode < 0 && (rc = mock_kernel_launch(fn, arg)) != SUCCESS)
        return rc;
    return mock_enqueue(m, &o);
}

/* ----------------------------------------------- stream memory operations */

/* cuda.h's CU_STREAM_WAIT_VALUE_* and CU_STREAM_WRITE_VALUE_* */
enum { WAIT_GEQ = 0, WAIT_EQ = 1, WAIT_AND = 2, WAIT_NOR = 3, WAIT_FLUSH = 1 << 30 };
enum { WRITE_NO_MEMORY_BARRIER = 1 };

int mock_value_holds(const op_t *o, uint32_t *now_p)
{
    /* (memory freed under the wait reads as a copy from it does: a crash) */
    uint32_t v = __atomic_load_n((const uint32_t *)mock_shadow(o->dst), __ATOMIC_ACQUIRE);
    if (now_p != NULL)
        *now_p = v;
    switch (o->cmp) {
    case WAIT_GEQ: return (int32_t)(v - o->value) >= 0;   /* wrap-safe, as the driver compares */
    case WAIT_EQ: return v == o->value;
    case WAIT_AND: return (v & o->value) != 0;
    default: return ~(v | o->value) != 0;
    }
}

/* A word the stream memory operations take: 4-byte aligned device memory. */
static int value_word(CUdeviceptr addr)
{
    return addr % 4 == 0 && mock_is_device((const void *)(uintptr_t)addr, 4);
}

API CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, uint32_t value, unsigned int flags)
{
    op_t o = {.kind = OP_WAIT_VALUE, .dst = (void *)(uintptr_t)addr, .value = value, .cmp = flags & 3u};
    if ((flags & ~(3u | WAIT_FLUSH)) != 0 || !value_word(addr))
        return ERR_INVALID_VALUE;
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    return mock_enqueue(mock_stream_of(s), &o);
}

API CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, uint32_t value, unsigned int flags)
{
    op_t o = {.kind = OP_WRITE_VALUE, .dst = (void *)(uintptr_t)addr, .value = value};
    if ((flags & ~(unsigned)WRITE_NO_MEMORY_BARRIER) != 0 || !value_word(addr))
        return ERR_INVALID_VALUE;
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    return mock_enqueue(mock_stream_of(s), &o);
}
