/*
 * An engine of host threads for the IPC stand-in's protocol tests
 * (tests/gpu/ipc/check_ipc.c): the whole protocol, rendezvous, chunks,
 * flags and descriptors, between real processes, without CUDA.
 *
 * A stream is a thread working through its queue in order, so a stream
 * that waits on a flag stops there, and only there, as a GPU stream does;
 * the host that enqueued never waits.  A block is a POSIX shared-memory
 * object (its name is the handle), so a peer process maps the same bytes;
 * a flag wait spins on an acquire load, a flag write is a release store.
 * "Device" buffers are ordinary memory of the process.  The legacy stream
 * (NULL) is one more such thread.
 *
 * For the tests: hpi_host_stream_new, _sync (bounded), _query, and
 * _set_capturing (the stream then says it is under graph capture).
 */
#define _GNU_SOURCE
#include "ipc_proto.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { OP_WAIT, OP_WRITE, OP_FILL, OP_COPY, OP_REDUCE, OP_EVWAIT };

typedef struct hstream hstream_t;

typedef struct op {
    int                 kind;
    void               *a;
    const void         *b;
    size_t              n;
    uint32_t            v;
    hpi_red_t           r;
    hstream_t          *on;     /* OP_EVWAIT: until `on` has done `at` operations */
    unsigned long long  at;
    struct op          *next;
} op_t;

struct hstream {
    pthread_mutex_t              mu;
    pthread_cond_t               cv;
    op_t                        *head, *tail;
    unsigned long long           enq;
    _Atomic unsigned long long   done;
    int                          capturing;
};

typedef struct {
    hstream_t          *s;
    unsigned long long  at;
} hevent_t;

static __thread char err[256];
static hstream_t *legacy;
static pthread_once_t legacy_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t blk_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void  *p;
    size_t n;
    char   name[64];
} blocks[256];

static int fail(const char *what)
{
    snprintf(err, sizeof(err), "%s: %s", what, strerror(errno));
    return -1;
}

static void pause_a_little(void)
{
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

static void run(op_t *o)
{
    switch (o->kind) {
    case OP_WAIT:
        while ((int32_t)(__atomic_load_n((uint32_t *)o->a, __ATOMIC_ACQUIRE) - o->v) < 0)
            pause_a_little();
        break;
    case OP_WRITE:
        __atomic_store_n((uint32_t *)o->a, o->v, __ATOMIC_RELEASE);
        break;
    case OP_FILL:
        memset(o->a, (int)o->v, o->n);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        break;
    case OP_COPY:
        memmove(o->a, o->b, o->n);
        break;
    case OP_REDUCE:
        for (uint64_t i = 0; i < o->r.count; i++)
            hpi_red_elem(&o->r, i);
        break;
    case OP_EVWAIT:
        while (atomic_load(&o->on->done) < o->at)
            pause_a_little();
        break;
    }
}

static void *worker(void *arg)
{
    hstream_t *s = arg;
    for (;;) {
        op_t *o;
        pthread_mutex_lock(&s->mu);
        while (s->head == NULL)
            pthread_cond_wait(&s->cv, &s->mu);
        o = s->head;
        pthread_mutex_unlock(&s->mu);
        run(o);
        pthread_mutex_lock(&s->mu);
        s->head = o->next;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        atomic_fetch_add(&s->done, 1);
        free(o);
    }
    return NULL;
}

void *hpi_host_stream_new(void)
{
    hstream_t *s = calloc(1, sizeof(*s));
    pthread_t th;
    if (s == NULL)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&th, NULL, worker, s) != 0) {
        free(s);
        return NULL;
    }
    pthread_detach(th);
    return s;
}

static void make_legacy(void)
{
    legacy = hpi_host_stream_new();
}

static hstream_t *S(void *stream)
{
    if (stream != NULL)
        return stream;
    pthread_once(&legacy_once, make_legacy);
    return legacy;
}

static int enqueue(void *stream, const op_t *tmpl)
{
    hstream_t *s = S(stream);
    op_t *o = malloc(sizeof(*o));
    if (s == NULL || o == NULL)
        return fail("no stream or memory");
    *o = *tmpl;
    o->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail != NULL)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->enq++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int hpi_host_stream_query(void *stream)
{
    hstream_t *s = S(stream);
    unsigned long long enq;
    pthread_mutex_lock(&s->mu);
    enq = s->enq;
    pthread_mutex_unlock(&s->mu);
    return atomic_load(&s->done) >= enq;
}

/* 0 once the stream is done, -1 after `seconds` */
int hpi_host_stream_sync(void *stream, double seconds)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!hpi_host_stream_query(stream)) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 > seconds)
            return -1;
        pause_a_little();
    }
    return 0;
}

void hpi_host_stream_set_capturing(void *stream, int on)
{
    S(stream)->capturing = on;
}

/* ------------------------------------------------------------- engine */

static int ctx_get(void **ctx_p, int *device_p)
{
    *ctx_p = (void *)1;
    *device_p = 0;
    return 0;
}

static int ctx_enter(void *ctx, void **saved_p)
{
    *saved_p = NULL;
    return 0;
}

static void ctx_leave(void *saved)
{
}

static int block_map(const char *name, int create, size_t bytes, void **ptr_p)
{
    int fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0600);
    struct stat st;
    void *p;
    if (fd < 0)
        return fail(name);
    if (create && ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        return fail("ftruncate");
    }
    if (fstat(fd, &st) != 0) {
        close(fd);
        return fail("fstat");
    }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return fail("mmap");
    pthread_mutex_lock(&blk_mu);
    for (int i = 0; i < 256; i++)
        if (blocks[i].p == NULL) {
            blocks[i].p = p;
            blocks[i].n = (size_t)st.st_size;
            snprintf(blocks[i].name, sizeof(blocks[i].name), "%s", create ? name : "");
            break;
        }
    pthread_mutex_unlock(&blk_mu);
    *ptr_p = p;
    return 0;
}

static void unlink_all(void);
static void atexit_unlink(void)
{
    atexit(unlink_all);
}

/* a block outlives its process only as long as the process: shared
 * memory would stay, device memory does not */
static void unlink_all(void)
{
    for (int i = 0; i < 256; i++)
        if (blocks[i].p != NULL && blocks[i].name[0] != '\0')
            shm_unlink(blocks[i].name);
}

static int block_alloc(size_t bytes, void **ptr_p, hpi_handle_t *h_p)
{
    static _Atomic int counter;
    static pthread_once_t at = PTHREAD_ONCE_INIT;
    pthread_once(&at, (void (*)(void))atexit_unlink);
    memset(h_p, 0, sizeof(*h_p));
    snprintf((char *)h_p->b, sizeof(h_p->b), "/hpipc-m-%d-%d", (int)getpid(), atomic_fetch_add(&counter, 1));
    return block_map((const char *)h_p->b, 1, bytes, ptr_p);
}

static int block_open(const hpi_handle_t *h, void **ptr_p)
{
    return block_map((const char *)h->b, 0, 0, ptr_p);
}

static void block_unmap(void *ptr, int owner)
{
    pthread_mutex_lock(&blk_mu);
    for (int i = 0; i < 256; i++)
        if (blocks[i].p == ptr) {
            munmap(ptr, blocks[i].n);
            if (owner && blocks[i].name[0] != '\0')
                shm_unlink(blocks[i].name);
            blocks[i].p = NULL;
            break;
        }
    pthread_mutex_unlock(&blk_mu);
}

static void block_close(void *ptr)
{
    block_unmap(ptr, 0);
}

static void block_free(void *ptr)
{
    block_unmap(ptr, 1);
}

static int stream_new(void **s_p)
{
    return (*s_p = hpi_host_stream_new()) != NULL ? 0 : fail("a stream thread");
}

static void stream_free(void *s)
{
    (void)s;   /* its thread stays, idle */
}

static int capturing(void *stream)
{
    return S(stream)->capturing;
}

static int wait_geq(void *stream, void *flag, uint32_t value)
{
    op_t o = {.kind = OP_WAIT, .a = flag, .v = value};
    return enqueue(stream, &o);
}

static int write_flag(void *stream, void *flag, uint32_t value)
{
    op_t o = {.kind = OP_WRITE, .a = flag, .v = value};
    return enqueue(stream, &o);
}

static int fill(void *stream, void *ptr, unsigned char byte, size_t bytes)
{
    op_t o = {.kind = OP_FILL, .a = ptr, .v = byte, .n = bytes};
    return enqueue(stream, &o);
}

static int copy(void *stream, void *dst, const void *src, size_t bytes)
{
    op_t o = {.kind = OP_COPY, .a = dst, .b = src, .n = bytes};
    return enqueue(stream, &o);
}

static int reduce(void *stream, const hpi_red_t *r)
{
    op_t o = {.kind = OP_REDUCE, .r = *r};
    return enqueue(stream, &o);
}

static int event_new(void **ev_p)
{
    return (*ev_p = calloc(1, sizeof(hevent_t))) != NULL ? 0 : fail("an event");
}

static void event_free(void *ev)
{
    free(ev);
}

static int record(void *ev, void *stream)
{
    hevent_t *e = ev;
    hstream_t *s = S(stream);
    pthread_mutex_lock(&s->mu);
    e->s = s;
    e->at = s->enq;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int wait_event(void *stream, void *ev)
{
    hevent_t *e = ev;
    op_t o = {.kind = OP_EVWAIT, .on = e->s, .at = e->at};
    if (e->s == NULL)
        return 0;
    return enqueue(stream, &o);
}

static int query(void *ev)
{
    hevent_t *e = ev;
    return e->s == NULL || atomic_load(&e->s->done) >= e->at;
}

static int mem_alloc(size_t bytes, void **ptr_p)
{
    return (*ptr_p = calloc(1, bytes ? bytes : 1)) != NULL ? 0 : fail("calloc");
}

static void mem_free(void *ptr)
{
    free(ptr);
}

static const char *last_error(void)
{
    return err;
}

static const hpi_engine_t engine = {
    "host", ctx_get, ctx_enter, ctx_leave, block_alloc, block_open, block_close, block_free, stream_new,
    stream_free, capturing, wait_geq, write_flag, fill, copy, reduce, event_new, event_free, record, wait_event,
    query, mem_alloc, mem_free, last_error,
};

const hpi_engine_t *hpi_engine(void)
{
    return &engine;
}
