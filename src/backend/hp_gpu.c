/*
 * Device-buffer detection and the CUDA module loader (see hp_gpu.h).  No
 * CUDA header and no CUDA library at build time: the driver's functions come
 * from the libcuda.so.1 the process already loaded, with dlsym.
 */
#define _GNU_SOURCE
#include "hp_gpu.h"
#include "hp_core.h"
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(HP_GPU_ERR_INVALID == HIPRESS_ERR_INVALID && HP_GPU_ERR_NOMEM == HIPRESS_ERR_NOMEM &&
               HP_GPU_ERR_UNSUPPORTED == HIPRESS_ERR_UNSUPPORTED && HP_GPU_ERR_DEVICE == HIPRESS_ERR_DEVICE,
               "hp_gpu.h status values must be the public ones");

/* ------------------------------------------------------------ the watch */

/* l_next of fire_node is never NULL: the fast path always looks further. */
static struct link_map fire_node = {.l_next = &fire_node};
static struct link_map quiet_node;   /* l_next NULL: never fires */

struct link_map *_Atomic hp_gpu_watch = &fire_node;

typedef int (*cu_ptr_attrs_fn)(unsigned int, int *, void **, unsigned long long);
typedef int (*cu_stream_capturing_fn)(void *, int *);
typedef int (*cu_ctx_get_fn)(void *);

static struct {
    pthread_mutex_t        lock;
    _Atomic int            loaded;        /* libcuda.so.1 found and its functions resolved */
    int                    off;           /* HIPRESS_GPU=off */
    int                    unpinnable;    /* logged once */
    cu_ptr_attrs_fn        ptr_attrs;
    cu_stream_capturing_fn stream_capturing;
    cu_ctx_get_fn          ctx_current, ctx_device;   /* cuCtxGetCurrent, cuCtxGetDevice */
    char                   module_path[HP_STR_MAX];   /* HIPRESS_CUDA_MODULE */
    double                 wait_bound;    /* the module's wait bound: HIPRESS_TIMEOUT / 2 */
    /* the module */
    int                    mod_tried;
    const hp_gpu_ops_t    *mod_ops;
    const hp_gpu_ops_v2_t *mod_ops2;     /* the same table with the device codec, or NULL */
    const hp_gpu_ops_v3_t *mod_ops3;     /* and with owners and stream-ordered memory, or NULL */
    char                   mod_why[1024];
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .wait_bound = 150.0};

struct tail_walk {
    struct link_map *head, *tail;
    char             name[PATH_MAX];
    int              too_long;
};

/* Runs under the loader's lock (dl_iterate_phdr holds it during callbacks),
 * so the list can be walked safely.  It must not call dlopen. */
static int tail_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct tail_walk *w = (struct tail_walk *)arg;
    struct link_map *l = w->head;
    (void)info; (void)size;
    while (l->l_next != NULL)
        l = l->l_next;
    w->tail = l;
    w->too_long = strlen(l->l_name) >= sizeof(w->name);
    if (!w->too_long)
        memcpy(w->name, l->l_name, strlen(l->l_name) + 1);
    return 1;
}

/* The last object of the main namespace, with one more reference on it so
 * it is never unloaded (its l_next is read without the loader's lock).  A
 * new object is always appended at the end of the list, so its l_next turns
 * non-NULL on the next load.  NULL when it cannot be pinned. */
static struct link_map *pin_tail(void)
{
    struct tail_walk w;
    struct link_map *lm = NULL;
    void *main_h = dlopen(NULL, RTLD_LAZY), *h;

    memset(&w, 0, sizeof(w));
    if (main_h == NULL || dlinfo(main_h, RTLD_DI_LINKMAP, &w.head) != 0 || w.head == NULL)
        return NULL;
    dl_iterate_phdr(tail_cb, &w);
    if (w.tail == NULL || w.too_long)
        return NULL;
    if (w.tail == w.head)
        return w.head;       /* the program itself is never unloaded */
    h = dlopen(w.name, RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL)
        return NULL;         /* unloaded meanwhile */
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm != w.tail) {
        dlclose(h);
        return NULL;
    }
    return lm;               /* h is kept: that reference is the pin */
}

/* Under g.lock.  Resolve the driver's query functions when libcuda.so.1 is
 * in the process; never loads it. */
static int find_driver(void)
{
    void *h = dlopen(HP_CUDA_DRIVER_LIB, RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        return 0;
    g.ptr_attrs = (cu_ptr_attrs_fn)dlsym(h, "cuPointerGetAttributes");
    g.stream_capturing = (cu_stream_capturing_fn)dlsym(h, "cuStreamIsCapturing");
    g.ctx_current = (cu_ctx_get_fn)dlsym(h, "cuCtxGetCurrent");
    g.ctx_device = (cu_ctx_get_fn)dlsym(h, "cuCtxGetDevice");
    if (g.ptr_attrs == NULL) {
        HP_WARN("gpu: %s is loaded but has no cuPointerGetAttributes; device buffers cannot be detected",
                HP_CUDA_DRIVER_LIB);
        return 0;
    }
    return 1;
}

int hp_gpu_driver_loaded(void)
{
    struct link_map *pin;

    if (atomic_load_explicit(&g.loaded, memory_order_acquire))
        return 1;
    pthread_mutex_lock(&g.lock);
    if (g.off || atomic_load(&g.loaded)) {
        pthread_mutex_unlock(&g.lock);
        return atomic_load(&g.loaded);
    }
    /* pin first, then look: a libcuda loaded in between fires the new pin */
    pin = pin_tail();
    if (find_driver()) {
        atomic_store(&g.loaded, 1);
        atomic_store(&hp_gpu_watch, &fire_node);
        HP_INFO("gpu: %s is loaded in this process: the reductions' buffers are checked for device memory from now on",
                HP_CUDA_DRIVER_LIB);
    } else if (pin != NULL) {
        atomic_store(&hp_gpu_watch, pin);
    } else {
        /* cannot watch cheaply: look on every call (exact, slower) */
        atomic_store(&hp_gpu_watch, &fire_node);
        if (!g.unpinnable)
            HP_INFO("gpu: cannot watch library loads cheaply; looking for %s on every call", HP_CUDA_DRIVER_LIB);
        g.unpinnable = 1;
    }
    pthread_mutex_unlock(&g.lock);
    return atomic_load(&g.loaded);
}

void hp_gpu_ptr_query(const void *p, hp_gpu_ptr_t *ptr_p)
{
    int attrs[4] = {HP_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, HP_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    HP_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, HP_CU_POINTER_ATTRIBUTE_CONTEXT};
    unsigned int memtype = 0, managed = 0;
    int ordinal = -1;
    void *ctx = NULL;
    void *data[4] = {&memtype, &managed, &ordinal, &ctx};
    int rc;

    ptr_p->kind = HP_MEM_HOST;
    ptr_p->device = -1;
    ptr_p->ctx = NULL;
    if (p == NULL || !hp_gpu_driver_loaded())
        return;
    /* host memory and memory the driver does not know come back as success
     * with zeros; before cuInit it fails with CUDA_ERROR_NOT_INITIALIZED:
     * host either way */
    rc = g.ptr_attrs(4, attrs, data, (unsigned long long)(uintptr_t)p);
    if (rc != HP_CU_SUCCESS) {
        HP_TRACE("gpu: cuPointerGetAttributes(%p) returned %d: taken as host memory", p, rc);
        return;
    }
    if (managed)
        ptr_p->kind = HP_MEM_MANAGED;
    else if (memtype == HP_CU_MEMORYTYPE_DEVICE || memtype == HP_CU_MEMORYTYPE_UNIFIED)
        ptr_p->kind = HP_MEM_DEVICE;
    else
        return;
    ptr_p->device = ordinal;
    ptr_p->ctx = ctx;
}

int hp_gpu_current_where(hp_gpu_ptr_t *where_p)
{
    void *ctx = NULL;
    int device = -1;
    if (!hp_gpu_driver_loaded() || g.ctx_current == NULL || g.ctx_device == NULL ||
        g.ctx_current(&ctx) != HP_CU_SUCCESS || ctx == NULL || g.ctx_device(&device) != HP_CU_SUCCESS)
        return 0;
    where_p->kind = HP_MEM_DEVICE;
    where_p->device = device;
    where_p->ctx = ctx;
    return 1;
}

int hp_gpu_stream_capturing(void *stream)
{
    int status = HP_CU_STREAM_CAPTURE_STATUS_NONE;
    /* no driver in the process: nothing can capture */
    if (!hp_gpu_driver_loaded())
        return 0;
    if (g.stream_capturing == NULL)
        return -1;
    if (g.stream_capturing(stream, &status) != HP_CU_SUCCESS)
        return -2;
    return status != HP_CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ---------------------------------------------------------- the module */

void hp_gpu_configure(const hp_config_t *cfg)
{
    pthread_mutex_lock(&g.lock);
    /* HIPRESS_ENABLE=0 is a pure pass-through: nothing looked at either */
    g.off = hp_cfg_i(cfg, HP_S_GPU) == HP_GPU_SETTING_OFF || !hp_cfg_i(cfg, HP_S_ENABLE);
    snprintf(g.module_path, sizeof(g.module_path), "%s", hp_cfg_s(cfg, HP_S_CUDA_MODULE));
    /* a device wait gives up at half the watchdog's timeout: the rank that
     * waits fails its call (the failure agreement tells the others) before
     * its peers' watchdog, waiting for it in MPI, ends the job */
    g.wait_bound = hp_cfg_d(cfg, HP_S_TIMEOUT) / 2;
    if (g.mod_ops2 != NULL)
        g.mod_ops2->set_wait_bound(g.wait_bound);
    if (g.off)
        atomic_store(&hp_gpu_watch, &quiet_node);
    else if (atomic_load(&hp_gpu_watch) == &quiet_node)
        atomic_store(&hp_gpu_watch, &fire_node);
    pthread_mutex_unlock(&g.lock);
}

void hp_gpu_log_state(void)
{
#ifdef HP_HAVE_CUDA_MODULE
    const char *build = "built with the CUDA module (" HP_CUDA_ARCH_LIST "), loaded at the first device buffer";
#else
    const char *build = "built without the CUDA module: device buffers cannot be staged";
#endif
    if (hp_log_level < HP_LOG_INFO)
        return;
    if (g.off)
        HP_INFO("gpu: device buffers are not looked for (HIPRESS_GPU=off or HIPRESS_ENABLE=0)");
    else if (hp_gpu_driver_loaded())
        HP_INFO("gpu: %s is loaded: device buffers are detected; %s", HP_CUDA_DRIVER_LIB, build);
    else
        HP_INFO("gpu: %s is not loaded: CPU path (device buffers are looked for once it is); %s",
                HP_CUDA_DRIVER_LIB, build);
}

static int file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return 0;
    fclose(f);
    return 1;
}

const char *hp_gpu_module_path(char *buf, size_t len, char *searched, size_t searchedlen)
{
    char dir[PATH_MAX] = "", cand[4][PATH_MAX + 64];
    size_t ncand = 0, used = 0;
    Dl_info info;

    buf[0] = '\0';
    if (searched != NULL && searchedlen > 0)
        searched[0] = '\0';
    pthread_mutex_lock(&g.lock);
    if (g.module_path[0] != '\0')
        snprintf(cand[ncand++], sizeof(cand[0]), "%s", g.module_path);
    pthread_mutex_unlock(&g.lock);
    if (ncand == 0) {
        /* next to the object this code is in (libhipress.so, or a tool that
         * links the core): a relocated install, or the build tree */
        if (dladdr((void *)hp_gpu_module_path, &info) != 0 && info.dli_fname != NULL &&
            realpath(info.dli_fname, dir) != NULL) {
            char *slash;
            slash = strrchr(dir, '/');
            if (slash != NULL)
                *slash = '\0';
            else
                snprintf(dir, sizeof(dir), ".");
            snprintf(cand[ncand++], sizeof(cand[0]), "%s/hipress/%s", dir, HP_GPU_MODULE_NAME);
            snprintf(cand[ncand++], sizeof(cand[0]), "%s/%s", dir, HP_GPU_MODULE_NAME);
            snprintf(cand[ncand++], sizeof(cand[0]), "%s/.libs/%s", dir, HP_GPU_MODULE_NAME);
        }
#ifdef HP_PKGLIBDIR
        snprintf(cand[ncand++], sizeof(cand[0]), "%s/%s", HP_PKGLIBDIR, HP_GPU_MODULE_NAME);
#endif
    }
    for (size_t i = 0; i < ncand; i++) {
        if (searched != NULL && used < searchedlen)
            used += (size_t)snprintf(searched + used, searchedlen - used, "%s%s", i ? ", " : "", cand[i]);
        if (buf[0] == '\0' && file_exists(cand[i]))
            snprintf(buf, len, "%s", cand[i]);
    }
    return buf;
}

const hp_gpu_ops_t *hp_gpu_module(int load_driver, char *why, size_t whylen)
{
    const hp_gpu_ops_t *ops = NULL;
    char path[PATH_MAX], searched[4 * PATH_MAX];
    const hp_gpu_ops_t *(*get)(void);
    void *h;
    int rc;

    pthread_mutex_lock(&g.lock);
    if (g.mod_tried) {
        ops = g.mod_ops;
        if (why != NULL)
            snprintf(why, whylen, "%s", g.mod_why);
        pthread_mutex_unlock(&g.lock);
        return ops;
    }
    pthread_mutex_unlock(&g.lock);

#ifndef HP_HAVE_CUDA_MODULE
    (void)load_driver; (void)path; (void)searched; (void)get; (void)h; (void)rc;
    pthread_mutex_lock(&g.lock);
    snprintf(g.mod_why, sizeof(g.mod_why), "this build has no CUDA module (no CUDA toolkit found, or --without-cuda)");
    goto out_locked;
#else
    if (!load_driver && !hp_gpu_driver_loaded()) {
        /* not cached: the driver may be loaded later */
        if (why != NULL)
            snprintf(why, whylen, "%s is not loaded in this process", HP_CUDA_DRIVER_LIB);
        return NULL;
    }
    hp_gpu_module_path(path, sizeof(path), searched, sizeof(searched));
    pthread_mutex_lock(&g.lock);
    if (g.mod_tried)   /* another thread got here first */
        goto out_locked;
    if (path[0] == '\0') {
        snprintf(g.mod_why, sizeof(g.mod_why), "%s not found (looked for %.900s)", HP_GPU_MODULE_NAME, searched);
        goto out_locked;
    }
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(g.mod_why, sizeof(g.mod_why), "cannot load %.900s", dlerror());
        goto out_locked;
    }
    /* the newest table first (v3, whose first member is the codec's v2),
     * then the codec's; each by its symbol, version and size (a smaller
     * table is an older layout: refused) */
    {
        const hp_gpu_ops_v3_t *(*get3)(void) = (const hp_gpu_ops_v3_t *(*)(void))dlsym(h, HP_GPU_OPS_V3_SYMBOL);
        const hp_gpu_ops_v2_t *(*get2)(void) = (const hp_gpu_ops_v2_t *(*)(void))dlsym(h, HP_GPU_CODEC_SYMBOL);
        const hp_gpu_ops_v3_t *o3 = get3 != NULL ? get3() : NULL;
        const hp_gpu_ops_v2_t *o2 = get2 != NULL ? get2() : NULL;
        if (o3 != NULL && o3->v2.base.version == HP_GPU_OPS_V3_VERSION && o3->v2.base.size >= sizeof(hp_gpu_ops_v3_t)) {
            g.mod_ops3 = o3;
            g.mod_ops2 = &o3->v2;
        } else if (o2 != NULL && o2->base.version == HP_GPU_CODEC_VERSION &&
                   o2->base.size >= sizeof(hp_gpu_ops_v2_t)) {
            g.mod_ops2 = o2;
        }
    }
    /* the version-1 table serves the staging and the queries either way */
    get = (const hp_gpu_ops_t *(*)(void))dlsym(h, HP_GPU_OPS_SYMBOL);
    ops = get != NULL ? get() : NULL;
    if (ops == NULL || ops->version != HP_GPU_OPS_VERSION || ops->size < sizeof(hp_gpu_ops_t)) {
        g.mod_ops2 = NULL;
        g.mod_ops3 = NULL;
        snprintf(g.mod_why, sizeof(g.mod_why), "%.700s: no %s table of version %d", path, HP_GPU_OPS_SYMBOL,
                 HP_GPU_OPS_VERSION);
        ops = NULL;
        dlclose(h);
        goto out_locked;
    }
    rc = ops->init(load_driver);
    if (rc != HP_GPU_OK) {
        snprintf(g.mod_why, sizeof(g.mod_why), "%.700s: %.250s", path, ops->last_error());
        ops = NULL;     /* the module stays loaded: dlclose of a CUDA runtime is not safe */
        g.mod_ops2 = NULL;
        g.mod_ops3 = NULL;
        goto out_locked;
    }
    if (g.mod_ops2 != NULL)
        g.mod_ops2->set_wait_bound(g.wait_bound);
    snprintf(g.mod_why, sizeof(g.mod_why), "%.700s (%.200s%s)", path, ops->build,
             g.mod_ops3 != NULL ? "; device codec, codec contexts per communicator"
             : g.mod_ops2 != NULL ? "; device codec" : "; no device codec: device buffers are not compressed");
    g.mod_ops = ops;
#endif
out_locked:
    g.mod_tried = 1;
    ops = g.mod_ops;
    if (why != NULL)
        snprintf(why, whylen, "%s", g.mod_why);
    if (ops != NULL)
        HP_INFO("gpu: cuda module loaded: %s", g.mod_why);
    else
        HP_INFO("gpu: no cuda module: %s", g.mod_why);
    pthread_mutex_unlock(&g.lock);
    return ops;
}

const hp_gpu_ops_v2_t *hp_gpu_module_v2(void)
{
    const hp_gpu_ops_v2_t *o2;
    if (hp_gpu_module(0, NULL, 0) == NULL)
        return NULL;
    pthread_mutex_lock(&g.lock);
    o2 = g.mod_ops2;
    pthread_mutex_unlock(&g.lock);
    return o2;
}

const hp_gpu_ops_v3_t *hp_gpu_module_v3(void)
{
    const hp_gpu_ops_v3_t *o3;
    if (hp_gpu_module(0, NULL, 0) == NULL)
        return NULL;
    pthread_mutex_lock(&g.lock);
    o3 = g.mod_ops3;
    pthread_mutex_unlock(&g.lock);
    return o3;
}

/* ------------------------------------------------------ pure decisions */

hp_gpu_route_t hp_gpu_route(int any_device, int mpi_cuda_aware, int can_stage)
{
    if (!any_device)
        return HP_GPU_ROUTE_HOST;
    if (mpi_cuda_aware)
        return HP_GPU_ROUTE_PASS;
    return can_stage ? HP_GPU_ROUTE_STAGE : HP_GPU_ROUTE_UNSTAGED;
}

int hp_type_span(long long count, long long extent, long long true_lb, long long true_extent,
                 long long *lo_p, long long *hi_p)
{
    long long last, lo, hi;

    *lo_p = *hi_p = 0;
    if (count <= 0)
        return 0;
    if (true_extent < 0 || __builtin_mul_overflow(count - 1, extent, &last))
        return -1;
    /* elements start at i * extent, i in [0, count); a negative extent runs
     * backwards */
    if (__builtin_add_overflow(true_lb, last < 0 ? last : 0, &lo) ||
        __builtin_add_overflow(true_lb, true_extent, &hi) ||
        __builtin_add_overflow(hi, last > 0 ? last : 0, &hi))
        return -1;
    *lo_p = lo;
    *hi_p = hi;
    return 0;
}

int hp_allgatherv_span(int n, const int *counts, const int *displs, long long extent,
                       long long true_lb, long long true_extent, long long type_size,
                       long long *lo_p, long long *hi_p, int *covered_p)
{
    long long lo = 0, hi = 0, next = 0;
    int any = 0, tiled = 1;
    int contiguous = type_size == extent && true_extent == extent && true_lb == 0;

    for (int i = 0; i < n; i++) {
        long long base, blo, bhi;
        if (counts[i] < 0)
            return -1;
        if (counts[i] == 0)
            continue;
        if (__builtin_mul_overflow((long long)displs[i], extent, &base) ||
            hp_type_span(counts[i], extent, true_lb, true_extent, &blo, &bhi) != 0 ||
            __builtin_add_overflow(blo, base, &blo) || __builtin_add_overflow(bhi, base, &bhi))
            return -1;
        /* blocks in rank order, each starting where the previous ended */
        if (any && blo != next)
            tiled = 0;
        next = bhi;
        lo = any ? HP_MIN(lo, blo) : blo;
        hi = any ? HP_MAX(hi, bhi) : bhi;
        any = 1;
    }
    *lo_p = lo;
    *hi_p = hi;
    *covered_p = any && contiguous && tiled;
    return 0;
}
