/*
 * The CUDA module's codec contexts (hp_cuda_mod.h): a context serves one
 * call at a time (two streams, events, the codec's device workspace kept
 * from call to call).  A context belongs to an owner (a communicator:
 * call_begin_owner), so calls of different communicators on different
 * streams never share streams the application did not order; a call begun
 * without an owner (the MPI path, host-synchronous) takes one from a pool
 * per CUDA context.
 *
 * Nothing here synchronises the device after the codec's probe of a
 * context: the probe loads every kernel (hp_kl_preload; lazy loading would
 * load them inside calls, with a context-wide synchronisation) and takes
 * the page-locked words the contexts read their flags into; the workspace
 * grows in stream order (cuMemAllocAsync, cuMemFreeAsync; a driver
 * without them allocates synchronously); an owner's release frees in stream
 * order and destroys streams without waiting, so it is safe while a call's
 * kernel is stuck (ncclCommAbort from a watchdog thread).
 */
#include "hp_cuda_mod.h"
#include "hp_klaunch.h"
#include "hp_kern.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct mod_owner {
    mod_cx_t *cxs;        /* its contexts */
    int       released;   /* let go: its contexts go as their calls end */
} mod_owner_t;

static struct {
    pthread_mutex_t lock;
    mod_cx_t       *all;   /* the contexts without an owner */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---------------------------------------------------- page-locked words */

/* The contexts' page-locked info words (64 bytes each) come from blocks
 * taken at a probe and are recycled, never freed: neither a context's
 * creation nor its end allocates or frees page-locked memory (either
 * synchronises the device). */
#define WORDS_PER_BLOCK 64
static struct {
    pthread_mutex_t lock;
    void           *free[4 * WORDS_PER_BLOCK];
    int             nfree;
} words = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A block more (in the current context); 0 or -1. */
static int words_grow(void)
{
    char *b = NULL;
    if (hp_cu.MemHostAlloc((void **)&b, 64 * WORDS_PER_BLOCK, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
        return -1;
    pthread_mutex_lock(&words.lock);
    for (int i = 0; i < WORDS_PER_BLOCK && words.nfree < (int)(sizeof(words.free) / sizeof(words.free[0])); i++)
        words.free[words.nfree++] = b + 64 * i;
    pthread_mutex_unlock(&words.lock);
    return 0;
}

/* ------------------------------------------------------ the codec's device */

static int d_alloc(void *self, size_t bytes, void **p_p)
{
    CUdeviceptr p = 0;
    (void)self;
    if (hp_cu.MemAlloc(&p, bytes ? bytes : 1) != CUDA_SUCCESS)
        return -1;
    *p_p = (void *)(uintptr_t)p;
    return 0;
}

static void d_release(void *self, void *p)
{
    (void)self;
    hp_cu.MemFree((CUdeviceptr)(uintptr_t)p);
}

static int d_alloc_q(void *self, size_t bytes, void **p_p, int stream)
{
    mod_cx_t *m = (mod_cx_t *)self;
    CUdeviceptr p = 0;
    if (hp_cu.MemAllocAsync(&p, bytes ? bytes : 1, m->s[stream]) != CUDA_SUCCESS)
        return -1;
    *p_p = (void *)(uintptr_t)p;
    return 0;
}

static void d_release_q(void *self, void *p, int stream)
{
    hp_cu.MemFreeAsync((CUdeviceptr)(uintptr_t)p, ((mod_cx_t *)self)->s[stream]);
}

/* the info words: one of the blocks' (a block more when none is left) */
static int d_halloc(void *self, size_t bytes, void **p_p)
{
    (void)self;
    if (bytes > 64)
        return hp_cu.MemHostAlloc(p_p, bytes, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS ? 0 : -1;
    pthread_mutex_lock(&words.lock);
    while (words.nfree == 0) {
        pthread_mutex_unlock(&words.lock);
        if (words_grow() != 0)
            return -1;
        pthread_mutex_lock(&words.lock);
    }
    *p_p = words.free[--words.nfree];
    pthread_mutex_unlock(&words.lock);
    memset(*p_p, 0, 64);
    return 0;
}

static void d_hrelease(void *self, void *p)
{
    (void)self;
    pthread_mutex_lock(&words.lock);
    if (words.nfree < (int)(sizeof(words.free) / sizeof(words.free[0])))
        words.free[words.nfree++] = p;
    pthread_mutex_unlock(&words.lock);
}

static int d_copy(void *self, void *dst, const void *src, size_t bytes, int stream)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return hp_cu.MemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, m->s[stream]) ==
                   CUDA_SUCCESS ? 0 : -1;
}

static int d_memset(void *self, void *p, int byte, size_t bytes, int stream)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return hp_cu.MemsetD8Async((CUdeviceptr)(uintptr_t)p, (unsigned char)byte, bytes, m->s[stream]) ==
                   CUDA_SUCCESS ? 0 : -1;
}

static int d_record(void *self, int event, int stream)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return hp_cu.EventRecord(m->ev[event], m->s[stream]) == CUDA_SUCCESS ? 0 : -1;
}

static int d_wait(void *self, int stream, int event)
{
    mod_cx_t *m = (mod_cx_t *)self;
    return hp_cu.StreamWaitEvent(m->s[stream], m->ev[event], 0) == CUDA_SUCCESS ? 0 : -1;
}

/* A wait of a codec context; after one failed, the others fail at once
 * (the first one's reason stays the last error). */
static int cx_wait(mod_cx_t *m, int is_event, void *h, const char *on)
{
    if (m->stuck) {
        if (!hp_cu_wait_failed)
            hp_cu_fail(HP_GPU_ERR_DEVICE, "%s: a wait of this codec context timed out before", hp_cu_op_name());
        hp_cu_wait_failed = 1;
        return -1;
    }
    if (hp_cu_wait(is_event, h, on) == HP_GPU_OK)
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
    return cx_wait(m, 1, m->ev[event], ev_names[event] != NULL ? ev_names[event] : "a codec event");
}

static void *d_stream(void *self, int stream)
{
    return (void *)((mod_cx_t *)self)->s[stream];
}

/* with a driver that has stream-ordered memory, and without */
static const hp_dev_ops_t dev_ops_q = {
    .alloc = d_alloc, .release = d_release, .halloc = d_halloc, .hrelease = d_hrelease,
    .copy = d_copy, .memset = d_memset, .record = d_record, .wait = d_wait,
    .sync = d_sync, .sync_event = d_sync_event, .stream = d_stream, .alloc_q = d_alloc_q, .release_q = d_release_q,
};
static const hp_dev_ops_t dev_ops_sync = {
    .alloc = d_alloc, .release = d_release, .halloc = d_halloc, .hrelease = d_hrelease,
    .copy = d_copy, .memset = d_memset, .record = d_record, .wait = d_wait,
    .sync = d_sync, .sync_event = d_sync_event, .stream = d_stream,
};

hp_gpu_ptr_t hp_cu_cx_where(const mod_cx_t *m)
{
    hp_gpu_ptr_t w = {HP_MEM_DEVICE, -1, (void *)m->ctx};
    return w;
}

/* ------------------------------------------------------------- contexts */

/* Its streams and events, each destroyed (the driver frees a stream once
 * its work ran: no wait). */
static void cx_parts_free(mod_cx_t *m)
{
    for (int i = 0; i < 2; i++)
        if (m->s[i] != NULL)
            hp_cu.StreamDestroy(m->s[i]);
    for (int i = 0; i < HP_EV_N; i++)
        if (m->ev[i] != NULL)
            hp_cu.EventDestroy(m->ev[i]);
}

/* Under a scope of ctx. */
static int cx_create(CUcontext ctx, mod_cx_t **m_p)
{
    mod_cx_t *m = calloc(1, sizeof(*m));
    CUresult rc = CUDA_SUCCESS;
    int st = HP_GPU_OK, i;
    if (m == NULL)
        return hp_cu_fail(HP_GPU_ERR_NOMEM, "out of host memory");
    m->ctx = ctx;
    for (i = 0; i < 2 && rc == CUDA_SUCCESS; i++)
        rc = hp_cu.StreamCreate(&m->s[i], CU_STREAM_NON_BLOCKING);
    for (i = 0; i < HP_EV_N && rc == CUDA_SUCCESS; i++)
        rc = hp_cu.EventCreate(&m->ev[i], CU_EVENT_DISABLE_TIMING);
    if (rc != CUDA_SUCCESS)
        st = CU_FAIL("cuStreamCreate/cuEventCreate", rc);
    else if ((st = hp_codec_init(&m->codec, hp_cu.MemAllocAsync != NULL ? &dev_ops_q : &dev_ops_sync, m)) !=
             HP_GPU_OK)
        st = OP_FAIL(st, "cannot allocate the codec's workspace");
    if (st != HP_GPU_OK) {
        cx_parts_free(m);
        free(m);
        return st;
    }
    *m_p = m;
    return HP_GPU_OK;
}

/* Gone, with nothing waited for (an owner's context after its release). */
static void cx_destroy(mod_cx_t *m)
{
    hp_cu_scope_t sc;
    hp_gpu_ptr_t w = hp_cu_cx_where(m);
    if (hp_cu_scope_enter(&w, &sc) == HP_GPU_OK) {
        hp_codec_fini_q(&m->codec);
        cx_parts_free(m);
        hp_cu_scope_exit(&sc);
    }
    free(m);
}

/* A tiny kernel on the module's copy stream writes a word that is read
 * back (no legacy stream, a bounded wait), its memory had and freed in
 * that stream's order where the driver can (no synchronisation of the
 * device); then every kernel is loaded and the page-locked words are
 * taken, so that no call synchronises the device for either.  The NCCL
 * front end probes at a communicator's creation (hp_gpu_codec_setup), the
 * MPI path at its first device call. */
int hpcu_codec_probe(const hp_gpu_ptr_t *where)
{
    hp_cu_scope_t sc;
    CUstream s = NULL;
    CUdeviceptr d = 0;
    uint32_t h = 0;
    int st, ok = 0, unloaded = 0;
    NEED_DRIVER();
    if ((st = hp_cu_scope_enter(where, &sc)) != HP_GPU_OK)
        return st;
    hp_cu_op_set("the codec's probe kernel on device %d", where->device);
    if ((st = hp_cu_xfer_stream(&s)) == HP_GPU_OK &&
        (hp_cu.MemAllocAsync != NULL ? hp_cu.MemAllocAsync(&d, sizeof(h), s) : hp_cu.MemAlloc(&d, sizeof(h))) ==
            CUDA_SUCCESS) {
        ok = hp_cu.MemsetD8Async(d, 0, sizeof(h), s) == CUDA_SUCCESS &&
             hp_kl_probe(s, (uint32_t *)(uintptr_t)d) == 0 &&
             hp_cu.MemcpyDtoHAsync(&h, d, sizeof(h), s) == CUDA_SUCCESS &&
             (st = hp_cu_wait(0, s, "the module's copy stream")) == HP_GPU_OK && h == HP_KL_PROBE_WORD;
        /* (after the wait, or after what it waited for: a stuck stream's
         * memory is freed when it gets there) */
        if (hp_cu.MemFreeAsync != NULL)
            hp_cu.MemFreeAsync(d, s);
        else
            hp_cu.MemFree(d);
    }
    if (ok && hp_kl_preload() < 0) {
        ok = 0;
        unloaded = 1;
    }
#ifdef HP_KL_TRANSLATE
    /* the emulated kernels load with the stand-in driver's "first launch" */
    if (ok) {
        void *lib = dlopen(HP_CUDA_DRIVER_LIB, RTLD_NOW | RTLD_NOLOAD);
        int (*loaded)(void) = lib != NULL ? (int (*)(void))dlsym(lib, "mock_cuda_kernels_loaded") : NULL;
        if (loaded != NULL)
            loaded();
        if (lib != NULL)
            dlclose(lib);
    }
#endif
    pthread_mutex_lock(&words.lock);
    if (ok && words.nfree == 0) {
        pthread_mutex_unlock(&words.lock);
        words_grow();
    } else {
        pthread_mutex_unlock(&words.lock);
    }
    hp_cu_scope_exit(&sc);
    if (hp_cu_wait_failed)
        return st;
    if (unloaded)
        return hp_cu_fail(HP_GPU_ERR_DEVICE, "the codec's kernels cannot be loaded on device %d", where->device);
    return ok ? HP_GPU_OK : hp_cu_fail(HP_GPU_ERR_DEVICE, "the codec's kernels do not run on device %d (no usable "
                                       "device, or no code for its architecture in this build)", where->device);
}

/* A context of the owner (NULL: of the pool) in where's context, busy. */
static int begin(mod_owner_t *o, const hp_gpu_ptr_t *where, void **cx_p)
{
    hp_cu_scope_t sc;
    CUcontext cur = NULL;
    mod_cx_t *m, **list = o != NULL ? &o->cxs : &pool.all;
    int st;

    NEED_DRIVER();
    if ((st = hp_cu_scope_enter(where, &sc)) != HP_GPU_OK)
        return st;
    hp_cu_op_set("the set-up of a codec context on device %d", where->device);
    if (hp_cu.CtxGetCurrent(&cur) != CUDA_SUCCESS || cur == NULL) {
        hp_cu_scope_exit(&sc);
        return hp_cu_fail(HP_GPU_ERR_DEVICE, "no CUDA context for the buffer");
    }
    pthread_mutex_lock(&pool.lock);
    for (m = *list; m != NULL; m = m->next)
        if (!m->busy && !m->retired && m->ctx == cur)
            break;
    if (m != NULL)
        m->busy = 1;
    pthread_mutex_unlock(&pool.lock);
    if (m == NULL) {
        if ((st = cx_create(cur, &m)) != HP_GPU_OK) {
            hp_cu_scope_exit(&sc);
            return st;
        }
        m->busy = 1;
        m->owner = o;
        pthread_mutex_lock(&pool.lock);
        m->next = *list;
        *list = m;
        pthread_mutex_unlock(&pool.lock);
    }
    hp_cu_scope_exit(&sc);
    *cx_p = m;
    return HP_GPU_OK;
}

int hpcu_call_begin(const hp_gpu_ptr_t *where, void **cx_p)
{
    return begin(NULL, where, cx_p);
}

int hpcu_call_begin_owner(void *owner, const hp_gpu_ptr_t *where, void **cx_p)
{
    if (owner == NULL || ((mod_owner_t *)owner)->released)
        return hp_cu_fail(HP_GPU_ERR_INVALID, "a codec context of an owner that was released");
    return begin((mod_owner_t *)owner, where, cx_p);
}

/* Under pool.lock: the owner's contexts that are idle go (no wait), and
 * the owner with the last; 1 when the owner went. */
static int owner_reap(mod_owner_t *o, mod_cx_t **gone)
{
    mod_cx_t **pp = &o->cxs;
    while (*pp != NULL) {
        mod_cx_t *m = *pp;
        if (m->busy) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        m->next = *gone;
        *gone = m;
    }
    return o->cxs == NULL;
}

/* What owner_reap took, freed outside the pool's lock: the contexts on
 * `gone`, and the owner o when owner_gone. */
static void reaped_free(mod_cx_t *gone, mod_owner_t *o, int owner_gone)
{
    while (gone != NULL) {
        mod_cx_t *next = gone->next;
        cx_destroy(gone);
        gone = next;
    }
    if (owner_gone)
        free(o);
}

/* The end of a call on m: back to its list (a stuck one is never reused),
 * or gone when its owner was released. */
static void cx_put(mod_cx_t *m, int reusable)
{
    mod_owner_t *o = m->owner;
    mod_cx_t *gone = NULL;
    int owner_gone = 0;
    pthread_mutex_lock(&pool.lock);
    m->busy = 0;
    m->retired |= !reusable;
    if (o != NULL && o->released)
        owner_gone = owner_reap(o, &gone);
    pthread_mutex_unlock(&pool.lock);
    reaped_free(gone, o, owner_gone);
}

int hpcu_sync(void *cx, int *bad_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("the device work of a compressed call");
    IN_CX(m, st_ = hp_codec_sync(&m->codec, bad_p);
             if (st_ != HP_GPU_OK) OP_FAIL(st_, "a codec copy or kernel failed"));
}

int hpcu_call_end(void *cx, int *bad_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    int st = hpcu_sync(cx, bad_p);
    cx_put(m, !m->stuck);
    return st;
}

/* A stream-ordered call's end: no wait; the context goes back with its
 * sticky flag's clear queued behind the call's work, so the next call on
 * it (its streams are in order) starts clean. */
int hpcu_call_release(void *cx)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_scope_t sc;
    hp_gpu_ptr_t w = hp_cu_cx_where(m);
    int st;
    hp_cu_op_set("the end of a stream-ordered call");
    NEED_DRIVER();
    if ((st = hp_cu_scope_enter(&w, &sc)) != HP_GPU_OK)
        return st;
    st = hp_codec_release(&m->codec);
    hp_cu_scope_exit(&sc);
    if (st != HP_GPU_OK)
        st = OP_FAIL(st, "cannot queue the clear of the sticky flag");
    cx_put(m, !m->stuck && st == HP_GPU_OK);   /* a context that failed here is not reused */
    return st;
}

/* --------------------------------------------------------------- owners */

int hpcu_owner_create(void **owner_p)
{
    mod_owner_t *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return hp_cu_fail(HP_GPU_ERR_NOMEM, "out of host memory");
    *owner_p = o;
    return HP_GPU_OK;
}

int hpcu_owner_release(void *owner)
{
    mod_owner_t *o = (mod_owner_t *)owner;
    mod_cx_t *gone = NULL;
    int owner_gone;
    if (o == NULL)
        return HP_GPU_OK;
    NEED_DRIVER();
    pthread_mutex_lock(&pool.lock);
    o->released = 1;
    owner_gone = owner_reap(o, &gone);
    pthread_mutex_unlock(&pool.lock);
    reaped_free(gone, o, owner_gone);
    return HP_GPU_OK;
}

/* ------------------------------------------ memory in a context's order */

int hpcu_mem_alloc(void *cx, size_t bytes, int zero, void **p_p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("an allocation of %zu bytes of device memory in stream order", bytes);
    IN_CX(m, {
        void *p = NULL;
        const hp_dev_ops_t *dv = m->codec.dev;
        int rc = dv->alloc_q != NULL ? dv->alloc_q(m, bytes, &p, HP_STREAM_COMPUTE) : dv->alloc(m, bytes, &p);
        st_ = HP_GPU_OK;
        if (rc != 0)
            st_ = hp_cu_fail(HP_GPU_ERR_NOMEM, "no device memory for %zu bytes", bytes);
        else if ((zero && d_memset(m, p, 0, bytes, HP_STREAM_COMPUTE) != 0) ||
                 d_record(m, HP_EV_WS, HP_STREAM_COMPUTE) != 0 || d_wait(m, HP_STREAM_COPY, HP_EV_WS) != 0)
            st_ = hp_cu_fail(HP_GPU_ERR_DEVICE, "cannot order the new memory on the codec's streams");
        if (st_ == HP_GPU_OK)
            *p_p = p;
        else if (p != NULL)
            dv->alloc_q != NULL ? dv->release_q(m, p, HP_STREAM_COMPUTE) : dv->release(m, p);
    });
}

int hpcu_mem_free(void *cx, void *p)
{
    mod_cx_t *m = (mod_cx_t *)cx;
    hp_cu_op_set("a free of device memory in stream order");
    IN_CX(m, {
        const hp_dev_ops_t *dv = m->codec.dev;
        st_ = HP_GPU_OK;
        if (d_record(m, HP_EV_WS, HP_STREAM_COPY) != 0 || d_wait(m, HP_STREAM_COMPUTE, HP_EV_WS) != 0)
            st_ = hp_cu_fail(HP_GPU_ERR_DEVICE, "cannot order a free on the codec's streams");
        else if (dv->release_q != NULL)
            dv->release_q(m, p, HP_STREAM_COMPUTE);
        else if (d_sync(m, HP_STREAM_COMPUTE) == 0)
            dv->release(m, p);
        else
            st_ = OP_FAIL(HP_GPU_ERR_DEVICE, "the codec's streams are stuck: the memory is not freed");
    });
}
