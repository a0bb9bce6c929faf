/*
 * The device backend's memory that outlives a call (hp_backend.h): the
 * start of a call on device memory with a codec context of the caller's
 * owner (a communicator: hp_mem_begin_owned) or of a pool (hp_mem_begin),
 * the error-feedback vectors of device buffers (hp_mem_residual), and the
 * front end's own device memory grown in a call's stream order
 * (hp_gpu_dev_grow).  An owner's memory is allocated and freed in the
 * stream order of its codec contexts (the module's third table): no call
 * after a communicator's first ones synchronises the device for it, and
 * its release frees nothing synchronously.
 */
#include "hp_backend.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ a call */

/* The owners of the codec contexts begun for one (until its release). */
typedef struct owned {
    void         *cx, *owner;
    struct owned *next;
} owned_t;

static pthread_mutex_t owned_lock = PTHREAD_MUTEX_INITIALIZER;
static owned_t *owned;

static void owned_add(void *cx, void *owner)
{
    owned_t *o;
    pthread_mutex_lock(&owned_lock);
    for (o = owned; o != NULL && o->cx != cx; o = o->next)
        ;
    if (o == NULL && (o = (owned_t *)malloc(sizeof(*o))) != NULL) {
        o->cx = cx;
        o->next = owned;
        owned = o;
    }
    if (o != NULL)
        o->owner = owner;
    pthread_mutex_unlock(&owned_lock);
}

/* cx's owner, or NULL (a pool's context) */
static void *owner_of(void *cx)
{
    void *owner = NULL;
    pthread_mutex_lock(&owned_lock);
    for (owned_t *o = owned; o != NULL && owner == NULL; o = o->next)
        if (o->cx == cx)
            owner = o->owner;
    pthread_mutex_unlock(&owned_lock);
    return owner;
}

void hp_mem_begin_owned(hp_mem_t *m, const void *recvbuf, void **owner_p)
{
    const hp_gpu_ops_v2_t *g;
    const hp_gpu_ops_v3_t *g3;
    memset(m, 0, sizeof(*m));
    m->ops = &hp_mem_cpu;
    m->where.kind = HP_MEM_HOST;
    m->where.device = -1;
    if (HP_LIKELY(!hp_gpu_watch_fired()))
        return;
    hp_gpu_ptr_query(recvbuf, &m->where);
    if (m->where.kind == HP_MEM_HOST)
        return;
    m->ops = &hp_mem_dev;
    g = hp_gpu_codec();
    g3 = owner_p != NULL ? hp_gpu_module_v3() : NULL;
    if (g3 != NULL && *owner_p == NULL && g3->owner_create(owner_p) != HP_GPU_OK)
        *owner_p = NULL;
    if (g == NULL) {
        HP_WARN("gpu: a device buffer reached the compressed path without the cuda module's codec");
        m->err = HP_ERR_DEVICE;
    } else if ((g3 != NULL && *owner_p != NULL ? g3->call_begin_owner(*owner_p, &m->where, &m->cx)
                                              : g->call_begin(&m->where, &m->cx)) != HP_GPU_OK) {
        HP_WARN("gpu: cannot start a compressed call on device %d: %s", m->where.device, g->base.last_error());
        m->cx = NULL;
        m->err = HP_ERR_DEVICE;
    } else if (g3 != NULL && *owner_p != NULL) {
        owned_add(m->cx, *owner_p);
    }
}

void hp_mem_begin(hp_mem_t *m, const void *recvbuf)
{
    hp_mem_begin_owned(m, recvbuf, NULL);
}

/* ------------------------------------------------- residual vectors */

/* Device memory of one context for the residual store: a pool context's
 * (the MPI path's calls: synchronous allocation and free), kept for the
 * process's life (a handful: one per device context used); or an owner's
 * (a communicator's), allocated and freed in the stream order of the
 * owner's codec context of its latest call (its calls are one at a time),
 * kept until the owner's release. */
typedef struct res_dev {
    hp_res_mem_t    mem;   /* first: the store holds &mem */
    hp_gpu_ptr_t    where;
    void           *owner;
    void           *cx;    /* the owner's latest codec context */
    struct res_dev *next;
} res_dev_t;

static pthread_mutex_t res_lock = PTHREAD_MUTEX_INITIALIZER;
static res_dev_t *res_devs;

static void *res_alloc(const hp_res_mem_t *mm, size_t bytes)
{
    const res_dev_t *r = (const res_dev_t *)mm;
    const hp_gpu_ops_v3_t *g3 = r->owner != NULL ? hp_gpu_module_v3() : NULL;
    void *p = NULL;
    if (g3 != NULL ? g3->mem_alloc(r->cx, bytes, 1, &p) != HP_GPU_OK
                   : hp_gpu_codec() == NULL || hp_gpu_codec()->dev_alloc(&r->where, bytes, &p) != HP_GPU_OK) {
        HP_WARN("gpu: no device memory for an error-feedback vector of %zu bytes", bytes);
        return NULL;
    }
    return p;
}

static void res_release(const hp_res_mem_t *mm, void *p)
{
    const res_dev_t *r = (const res_dev_t *)mm;
    const hp_gpu_ops_v3_t *g3 = r->owner != NULL ? hp_gpu_module_v3() : NULL;
    if (g3 != NULL)
        g3->mem_free(r->cx, p);
    else if (hp_gpu_codec() != NULL)
        hp_gpu_codec()->dev_free(&r->where, p);
}

/* (an owner's vector is not read back: that would wait for its streams) */
static double res_l1(const hp_res_mem_t *mm, const float *p, size_t n)
{
    const res_dev_t *r = (const res_dev_t *)mm;
    double l1 = 0.0;
    if (r->owner != NULL || hp_gpu_codec() == NULL || hp_gpu_codec()->dev_l1(&r->where, p, n, &l1) != HP_GPU_OK)
        return NAN;
    return l1;
}

const hp_res_mem_t *hp_mem_residual(const hp_mem_t *m)
{
    res_dev_t *r;
    void *owner;
    if (!hp_mem_is_device(m))
        return NULL;
    owner = m->cx != NULL ? owner_of(m->cx) : NULL;
    pthread_mutex_lock(&res_lock);
    for (r = res_devs; r != NULL; r = r->next)
        if (r->where.ctx == m->where.ctx && r->where.device == m->where.device && r->owner == owner)
            break;
    if (r == NULL && (r = (res_dev_t *)calloc(1, sizeof(*r))) != NULL) {
        r->mem.alloc = res_alloc;
        r->mem.release = res_release;
        r->mem.l1 = res_l1;
        r->where = m->where;
        r->where.kind = HP_MEM_DEVICE;
        r->owner = owner;
        r->next = res_devs;
        res_devs = r;
    }
    if (r != NULL && owner != NULL)
        r->cx = m->cx;
    pthread_mutex_unlock(&res_lock);
    return r != NULL ? &r->mem : NULL;
}

void hp_mem_owner_release(void **owner_p)
{
    const hp_gpu_ops_v3_t *g3 = hp_gpu_module_v3();
    res_dev_t **pp, *r;
    if (*owner_p == NULL)
        return;
    pthread_mutex_lock(&res_lock);
    for (pp = &res_devs; (r = *pp) != NULL;) {
        if (r->owner == *owner_p) {
            *pp = r->next;
            free(r);
        } else {
            pp = &r->next;
        }
    }
    pthread_mutex_unlock(&res_lock);
    pthread_mutex_lock(&owned_lock);
    for (owned_t **op = &owned, *o; (o = *op) != NULL;) {
        if (o->owner == *owner_p) {
            *op = o->next;
            free(o);
        } else {
            op = &o->next;
        }
    }
    pthread_mutex_unlock(&owned_lock);
    if (g3 != NULL)
        g3->owner_release(*owner_p);
    *owner_p = NULL;
}

int hp_gpu_dev_grow(void *cx, const hp_gpu_ptr_t *where, size_t bytes, void **p_p, size_t *bytes_p,
                    hp_gpu_ptr_t *where_p, const char *what)
{
    const hp_gpu_ops_v2_t *g = hp_gpu_codec();
    const hp_gpu_ops_v3_t *g3 = cx != NULL ? hp_gpu_module_v3() : NULL;
    void *p = NULL;
    if (*p_p != NULL && *bytes_p >= bytes && where_p->ctx == where->ctx && where_p->device == where->device)
        return 0;
    if (g == NULL)
        return -1;
    /* (a codec context frees only in its own CUDA context) */
    if (g3 != NULL && *p_p != NULL && where_p->ctx != where->ctx)
        g3 = NULL;
    if (*p_p != NULL) {
        if (g3 != NULL)
            g3->mem_free(cx, *p_p);
        else
            g->dev_free(where_p, *p_p);
        *p_p = NULL;
        *bytes_p = 0;
    }
    bytes = (bytes + 65535) & ~(size_t)65535;
    if ((g3 != NULL ? g3->mem_alloc(cx, bytes, 1, &p) : g->dev_alloc(where, bytes, &p)) != HP_GPU_OK) {
        HP_WARN("nccl: no device memory for %zu bytes of %s: %s", bytes, what, g->base.last_error());
        return -1;
    }
    *p_p = p;
    *bytes_p = bytes;
    *where_p = *where;
    where_p->kind = HP_MEM_DEVICE;
    return 0;
}

int hp_mem_residual_read(const hp_res_buf_t *b, const float *r, float *out, size_t count)
{
    const res_dev_t *d = (const res_dev_t *)b->mem;
    const hp_gpu_ops_v2_t *g;
    if (b->mem == NULL) {
        memcpy(out, r, count * sizeof(float));
        return 0;
    }
    g = hp_gpu_codec();
    return g != NULL && g->base.memcpy_d2h(out, r, count * sizeof(float), &d->where) == HP_GPU_OK ? 0 : -1;
}
