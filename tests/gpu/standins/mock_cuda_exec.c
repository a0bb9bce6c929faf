/*
 * The stand-in driver's device (see mock_cuda.c): streams as queues, a
 * device executor that runs their entries, and the host's waits.
 *
 * An entry runs when it is ready (at the head of its stream; an event wait
 * once the other stream has run to the event; a value wait once its word
 * compares as asked, which the executor polls, as another process may
 * write it; an external entry -- an NCCL operation -- once its peers have
 * reached theirs) and, under MOCK_CUDA_DEFERRED, demanded.  Ready entries
 * of different streams run in a random order (MOCK_CUDA_SEED), from the
 * executor thread of the process and from the host threads that wait for
 * them, never when they are queued.
 *   MOCK_CUDA_DEFERRED=0  every ready entry runs;
 *                     =1  only what a wait needs: a host wait for a stream
 *                         or event, an event wait of a stream that is
 *                         needed, a device-wide synchronisation, a peer
 *                         that reached its side of an NCCL transfer, a
 *                         value wait of a stream that is needed (every
 *                         stream of the process: any may write the word),
 *                         so a host read before its wait sees the old
 *                         bytes;
 *                     =2  as 1, but any wait needs every stream, and the
 *                         streams a host thread waits for run last, an
 *                         NCCL transfer after every other ready entry (so
 *                         work that reads another stream's result without
 *                         an event reads the old bytes).
 * A host wait that lasts asks the wait-for graph (mock_cuda_wfg.c) whether
 * it is part of a deadlock.
 */
#include "mock_cuda_int.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
mstream_t legacy_s = {.id = 0, .cap_mode = -1}, per_thread_s = {.id = 1, .cap_mode = -1};
mstream_t *all_streams;
unsigned long long mock_progress;

static int next_id = 2;
static int exec_started, exec_stop;
static pthread_t exec_thread;
static uint64_t rng_state;

/* ------------------------------------------------------------ settings */

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s != NULL && *s != '\0' ? atoi(s) : dflt;
}

int mock_deferred(void)
{
    static int d = -1;
    if (d < 0)
        d = env_int("MOCK_CUDA_DEFERRED", 0);
    return d;
}

int mock_rank(void)
{
    int r = env_int("OMPI_COMM_WORLD_RANK", -1);
    return r >= 0 ? r : env_int("RANK", -1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* xorshift64*, seeded by MOCK_CUDA_SEED and the rank */
static uint64_t rnd(void)
{
    if (rng_state == 0)
        rng_state = 0x9E3779B97F4A7C15ULL * (uint64_t)(env_int("MOCK_CUDA_SEED", 1) + 1) ^
                    (uint64_t)(mock_rank() + 2) * 0xD1B54A32D192ED03ULL;
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* The order of the next picks from seed (the tests' check of the order). */
API void mock_cuda_seed(unsigned long long seed)
{
    pthread_mutex_lock(&qlock);
    rng_state = 0x9E3779B97F4A7C15ULL * (seed + 1) ^ 0xD1B54A32D192ED03ULL;
    pthread_mutex_unlock(&qlock);
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

static unsigned long long n_waits;

int mock_hangs(void)
{
    return hang_from() > 0 && COUNT(n_waits, 1) >= (unsigned long long)hang_from();
}

void mock_block_for_ever(const char *what)
{
    fprintf(stderr, "mock_cuda: %s blocks for ever (MOCK_CUDA_HANG): an unbounded wait\n", what);
    fflush(stderr);
    for (;;)
        pause();
}

/* ------------------------------------------------------------- threads */

#define MAX_THREADS 64
static mthread_t threads[MAX_THREADS];
static int thread_used[MAX_THREADS];
static __thread mthread_t *self_t;
static pthread_key_t thread_key;
static pthread_once_t thread_once = PTHREAD_ONCE_INIT;

static void thread_gone(void *v)
{
    pthread_mutex_lock(&qlock);
    thread_used[(mthread_t *)v - threads] = 0;
    pthread_mutex_unlock(&qlock);
}

static void thread_init(void)
{
    pthread_key_create(&thread_key, thread_gone);
}

mthread_t *mock_thread(void)
{
    static mthread_t spare;   /* (more threads than slots: not in the graph) */
    if (self_t != NULL)
        return self_t;
    pthread_once(&thread_once, thread_init);
    pthread_mutex_lock(&qlock);
    for (int i = 0; i < MAX_THREADS && self_t == NULL; i++)
        if (!thread_used[i]) {
            thread_used[i] = 1;
            memset(&threads[i], 0, sizeof(threads[i]));
            threads[i].tid = (int)syscall(SYS_gettid);
            self_t = &threads[i];
            pthread_setspecific(thread_key, self_t);
        }
    pthread_mutex_unlock(&qlock);
    return self_t != NULL ? self_t : &spare;
}

int mock_threads(mthread_t **out, int max)
{
    int n = 0;
    for (int i = 0; i < MAX_THREADS && n < max; i++)
        if (thread_used[i])
            out[n++] = &threads[i];
    return n;
}

/* ------------------------------------------------------------- streams */

#define MAX_EXTERNAL 64
static struct { CUstream h; mstream_t *s; } external[MAX_EXTERNAL];

mstream_t *mock_queue_of(CUstream s)
{
    int i;
    if (s == NULL || s == STREAM_LEGACY)
        return &legacy_s;
    if (s == STREAM_PER_THREAD)
        return &per_thread_s;
    for (mstream_t *m = all_streams; m != NULL; m = m->next_all)
        if (m->handle == s)
            return m;
    for (i = 0; i < MAX_EXTERNAL && external[i].h != NULL; i++)
        if (external[i].h == s)
            return external[i].s;
    /* a handle this driver did not make (a test's (cudaStream_t)0x5150, a
     * runtime's stream): a queue of the current context, made at first use */
    if (i == MAX_EXTERNAL || (external[i].s = calloc(1, sizeof(mstream_t))) == NULL)
        abort();
    external[i].h = s;
    external[i].s->handle = s;
    external[i].s->id = next_id++;
    external[i].s->ctx = mock_current();
    external[i].s->cap_mode = -1;
    external[i].s->next_all = all_streams;
    all_streams = external[i].s;
    return external[i].s;
}

mstream_t *mock_stream_of(CUstream s)
{
    mstream_t *m;
    if (s == NULL || s == STREAM_LEGACY)
        COUNT(n_legacy, 1);
    else if (s == STREAM_PER_THREAD)
        COUNT(n_per_thread, 1);
    pthread_mutex_lock(&qlock);
    m = mock_queue_of(s);
    pthread_mutex_unlock(&qlock);
    return m;
}

/* A new stream of the current context (cuStreamCreate). */
mstream_t *mock_stream_new(void)
{
    mstream_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->cap_mode = -1;
    m->ctx = mock_current();
    m->handle = m;
    pthread_mutex_lock(&qlock);
    m->id = next_id++;
    m->next_all = all_streams;
    all_streams = m;
    pthread_mutex_unlock(&qlock);
    return m;
}

/* As the driver: the stream goes once its queued work has run (no wait).
 * Its record stays (an event recorded on it may still be waited for). */
void mock_stream_destroy(mstream_t *m)
{
    pthread_mutex_lock(&qlock);
    m->doomed = 1;
    m->want = m->queued;
    pthread_cond_broadcast(&qcond);
    pthread_mutex_unlock(&qlock);
}

/* The streams a device-wide synchronisation of context c waits for. */
static int in_scope(const mstream_t *s, CUcontext c)
{
    return s->ctx == NULL || c == NULL || s->ctx == c;
}


/* ------------------------------------------------------------- entries */

static void exec_op(const mstream_t *s, op_t *o)
{
    char by[96];
    mock_run_set(s, o);
    switch (o->kind) {
    case OP_COPY:
        memmove(mock_shadow(o->dst), mock_shadow(o->src), o->n);
        break;
    case OP_MEMSET:
        memset(mock_shadow(o->dst), o->v, o->n);
        break;
    case OP_FN:
        o->fn(o->arg);
        break;
    case OP_FREE:
        snprintf(by, sizeof(by), "cuMemFreeAsync(%p), stream %d's entry #%llu", o->dst, s->id, o->seq);
        mock_region_free(o->dst, by);
        break;
    case OP_WRITE_VALUE:
        __atomic_store_n((uint32_t *)mock_shadow(o->dst), o->value, __ATOMIC_RELEASE);
        break;
    default:
        break;
    }
    mock_run_set(NULL, NULL);
}

/* s's head has run or completed (under qlock). */
static void pop(mstream_t *s)
{
    op_t *o = s->head;
    s->head = o->next;
    if (s->head == NULL)
        s->tail = NULL;
    s->done++;
    mock_progress++;
    __atomic_sub_fetch(&n_pending, 1, __ATOMIC_RELAXED);
    if (o->kind == OP_EXT && o->xo->release != NULL)
        o->xo->release(o->xarg);
    free(o);
    pthread_cond_broadcast(&qcond);
}

static void *executor(void *unused);

static void exec_start(void)
{
    if (!exec_started) {
        exec_started = 1;
        if (pthread_create(&exec_thread, NULL, executor, NULL) != 0) {
            fprintf(stderr, "mock_cuda: cannot start the device executor\n");
            abort();
        }
    }
}

CUresult mock_enqueue(mstream_t *s, const op_t *o)
{
    return mock_enqueue_at(s, o, NULL);
}

CUresult mock_enqueue_at(mstream_t *s, const op_t *o, unsigned long long *seq_p)
{
    op_t *e = malloc(sizeof(*e));
    mthread_t *me = mock_thread();
    if (e == NULL)
        return ERR_OUT_OF_MEMORY;
    /* a thread that polled and went on is not waiting any more */
    me->state = TH_RUNNING;
    me->target = NULL;
    *e = *o;
    e->next = NULL;
    pthread_mutex_lock(&qlock);
    if (s->cap_mode >= 0) {
        /* recorded into the capture's graph, not run */
        int bad = s->cap_invalid;
        s->cap_ops++;
        pthread_mutex_unlock(&qlock);
        if (e->kind == OP_EXT && e->xo->release != NULL)
            e->xo->release(e->xarg);
        free(e);
        return bad ? ERR_CAPTURE_INVALIDATED : SUCCESS;
    }
    if (s->tail != NULL)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    e->seq = ++s->queued;
    if (seq_p != NULL)
        *seq_p = e->seq;
    COUNT(n_pending, 1);
    exec_start();
    pthread_cond_broadcast(&qcond);
    pthread_mutex_unlock(&qlock);
    return SUCCESS;
}

/* ----------------------------------------------------------- the device */

static int demanded(const mstream_t *s)
{
    return mock_deferred() == 0 || s->done < s->want;
}

static void want(mstream_t *s, unsigned long long upto)
{
    if (mock_deferred() == 2) {
        FOR_STREAMS(o)
            o->want = o->queued;
    }
    if (s->want < upto)
        s->want = upto;
}

/* Whether a host thread waits for s (MOCK_CUDA_DEFERRED=2 runs those last). */
static int waited_for(const mstream_t *s)
{
    mthread_t *t[MAX_THREADS];
    int n = mock_threads(t, MAX_THREADS);
    for (int i = 0; i < n; i++)
        if ((t[i]->state == TH_WAIT_STREAM || t[i]->state == TH_POLL) && t[i]->target == s)
            return 1;
    return 0;
}

/* One step of the device (under qlock, which it may drop while an entry
 * runs): an entry run, or the external entries at the heads moved.  1 when
 * anything happened. */
static int step(void)
{
    mstream_t *cand[256], *ext[256];
    int nc = 0, ne = 0, moved = 0, mode = mock_deferred();

    FOR_STREAMS(s) {
        op_t *h = s->head;
        if (h == NULL || s->running)
            continue;
        if (h->kind == OP_EXT) {
            if (!h->reached) {
                if (!demanded(s) && !h->xo->wanted(h->xarg))
                    continue;
                h->reached = 1;
                mock_run_set(s, h);
                h->xo->reach(h->xarg);
                mock_run_set(NULL, NULL);
                moved = 1;
            }
            if (ne < 256)
                ext[ne++] = s;
            continue;
        }
        if (!demanded(s))
            continue;
        if (h->kind == OP_WAIT_VALUE && !mock_value_holds(h, NULL)) {
            /* whoever writes the word is needed: any stream of the process */
            if (mode != 0) {
                FOR_STREAMS(w)
                    if (w->want < w->queued) {
                        w->want = w->queued;
                        moved = 1;
                    }
            }
            continue;
        }
        if (h->kind == OP_WAIT && h->ws->done < h->wseq) {
            if (mode != 0 && h->ws->want < h->wseq) {
                h->ws->want = h->wseq;   /* what s needs is needed */
                moved = 1;
            }
            continue;
        }
        if (nc < 256)
            cand[nc++] = s;
    }
    if (nc > 0) {
        mstream_t *s;
        int k = nc, first = 0;
        if (mode == 2) {
            /* the streams nobody waits for first */
            for (int i = 0; i < nc; i++)
                if (!waited_for(cand[i])) {
                    mstream_t *t = cand[first];
                    cand[first++] = cand[i];
                    cand[i] = t;
                }
            if (first > 0)
                k = first;
        }
        s = cand[rnd() % (uint64_t)k];
        s->running = 1;
        pthread_mutex_unlock(&qlock);
        exec_op(s, s->head);
        pthread_mutex_lock(&qlock);
        s->running = 0;
        pop(s);
        if (mode == 2)
            return 1;
        moved = 1;
    }
    /* the external entries: their transfers progress beside the kernels
     * (under 2 only when nothing else is ready) */
    for (int i = ne; i > 1; i--) {
        int j = (int)(rnd() % (uint64_t)i);
        mstream_t *t = ext[i - 1];
        ext[i - 1] = ext[j];
        ext[j] = t;
    }
    for (int i = 0; i < ne; i++) {
        mstream_t *s = ext[i];
        int r;
        if (s->head == NULL || s->running || s->head->kind != OP_EXT || !s->head->reached)
            continue;
        mock_run_set(s, s->head);
        r = s->head->xo->progress(s->head->xarg);
        mock_run_set(NULL, NULL);
        if (r == 1)
            pop(s);
        if (r != 0) {
            mock_progress++;
            moved = 1;
        }
    }
    return moved;
}

/* MOCK_CUDA_DEFERRED: a queued external entry whose peer reached its side
 * is a demand for its stream. */
static int scan_wanted(void)
{
    int moved = 0;
    if (mock_deferred() == 0)
        return 0;
    FOR_STREAMS(s)
        for (op_t *o = s->head; o != NULL; o = o->next)
            if (o->kind == OP_EXT && !o->reached && o->seq > s->want && o->xo->wanted(o->xarg)) {
                s->want = o->seq;
                moved = 1;
            }
    return moved;
}

/* Whether an external entry is moving or a stream waits for a value (the
 * executor polls: the peers, or whoever writes the word, do not wake it). */
static int polling(void)
{
    FOR_STREAMS(s)
        if (s->head != NULL && ((s->head->kind == OP_EXT && s->head->reached) || s->head->kind == OP_WAIT_VALUE))
            return 1;
    return 0;
}

void mock_quiesce(int on)
{
    int busy = 1;
    if (!on) {
        pthread_mutex_unlock(&qlock);
        return;
    }
    pthread_mutex_lock(&qlock);
    while (busy) {
        busy = 0;
        FOR_STREAMS(s)
            busy |= s->running;
        if (busy)
            pthread_cond_wait(&qcond, &qlock);
    }
}

static void timed_wait(double seconds)
{
    struct timespec ts;
    long ns;
    clock_gettime(CLOCK_REALTIME, &ts);
    ns = ts.tv_nsec + (long)(seconds * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&qcond, &qlock, &ts);
}

static void *executor(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&qlock);
    while (!exec_stop) {
        if (step())
            continue;
        mock_wfg_serve();
        if (scan_wanted())
            continue;
        timed_wait(polling() ? 0.0005 : 0.01);
    }
    pthread_mutex_unlock(&qlock);
    return NULL;
}

/* The process ends: the executor stops after the entry it runs. */
__attribute__((destructor)) static void exec_end(void)
{
    pthread_mutex_lock(&qlock);
    exec_stop = 1;
    pthread_cond_broadcast(&qcond);
    pthread_mutex_unlock(&qlock);
    if (exec_started && !pthread_equal(pthread_self(), exec_thread))
        pthread_join(exec_thread, NULL);
}

/* ------------------------------------------------------------ host waits */

/* Wait under qlock until done(arg) holds, running what is ready; the
 * thread is `state` on `target` for the wait-for graph. */
static void wait_loop(int state, mstream_t *target, const char *what, int (*done)(void *), void *arg)
{
    mthread_t *me = mock_thread();
    double last = 0.0;
    me->state = state;
    me->target = target;
    me->since = now();
    snprintf(me->what, sizeof(me->what), "%s", what);
    while (!done(arg)) {
        if (step())
            continue;
        mock_wfg_serve();
        if (scan_wanted())
            continue;
        timed_wait(0.002);
        if (now() - me->since > 0.5 && now() - last > 1.0) {
            last = now();
            pthread_mutex_unlock(&qlock);
            mock_wfg_check(me);
            pthread_mutex_lock(&qlock);
        }
    }
    me->state = TH_RUNNING;
    me->target = NULL;
}

typedef struct { mstream_t *s; unsigned long long upto; } upto_t;

static int stream_at(void *v)
{
    const upto_t *u = v;
    return u->s->done >= u->upto;
}

void mock_wait_stream(mstream_t *s, unsigned long long upto, const char *what)
{
    upto_t u = {s, upto};
    mock_thread();
    pthread_mutex_lock(&qlock);
    want(s, upto);
    pthread_cond_broadcast(&qcond);
    wait_loop(TH_WAIT_STREAM, s, what, stream_at, &u);
    pthread_mutex_unlock(&qlock);
    mock_order_seen(s, upto);
}

int mock_query(mstream_t *s, unsigned long long upto, const char *what)
{
    mthread_t *me = mock_thread();
    int ok;
    pthread_mutex_lock(&qlock);
    want(s, upto);
    /* what is ready runs now, as it may on a device between two polls */
    while (s->done < upto && step())
        ;
    ok = s->done >= upto;
    if (ok) {
        me->state = TH_RUNNING;
        me->target = NULL;
    } else if (me->state != TH_POLL || me->target != s) {
        me->state = TH_POLL;
        me->target = s;
        me->since = now();
        snprintf(me->what, sizeof(me->what), "%s", what);
    }
    pthread_mutex_unlock(&qlock);
    if (ok)
        mock_order_seen(s, upto);
    if (!ok && now() - me->since > 0.5) {
        static __thread double last;
        if (now() - last > 1.0) {
            last = now();
            mock_wfg_check(me);
        }
    }
    return ok;
}

typedef struct { int n; mstream_t **s; unsigned long long *upto; } all_t;

static int all_at(void *v)
{
    const all_t *a = v;
    for (int i = 0; i < a->n; i++)
        if (a->s[i]->done < a->upto[i])
            return 0;
    return 1;
}

CUresult mock_device_sync(const char *what)
{
    CUresult rc = mock_capture_check(what);
    CUcontext c = mock_current();
    all_t a = {0, NULL, NULL};
    int n = 0;
    if (rc != SUCCESS)
        return rc;
    COUNT(n_dev_syncs, 1);
    mock_thread();
    pthread_mutex_lock(&qlock);
    FOR_STREAMS(s)
        n++;
    a.s = malloc((size_t)n * sizeof(*a.s));
    a.upto = malloc((size_t)n * sizeof(*a.upto));
    if (a.s == NULL || a.upto == NULL)
        abort();
    FOR_STREAMS(s)
        if (in_scope(s, c) && s->done < s->queued) {
            a.s[a.n] = s;
            a.upto[a.n++] = s->queued;
            if (s->want < s->queued)
                s->want = s->queued;
        }
    pthread_cond_broadcast(&qcond);
    wait_loop(TH_WAIT_DEVICE, NULL, what, all_at, &a);
    pthread_mutex_unlock(&qlock);
    mock_order_seen(NULL, 0);
    free(a.s);
    free(a.upto);
    return SUCCESS;
}
