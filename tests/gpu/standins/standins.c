/*
 * The stand-ins themselves (tests/gpu/standins/run_standins.sh): one process of a
 * job launched by tests/gpu/nccl/nompi_launch, with the stand-in NCCL moving
 * data through shared memory (MOCK_NCCL_SHM=1) and the stand-in driver
 * given by path.  No hipress here: what the model must show.
 *
 *   standins CASE MOCKDIR/libcuda.so.1
 *
 *   ok          sends, receives, ncclAllReduce, ncclAllGather and
 *               ncclBroadcast on two streams, stream-ordered allocation:
 *               the data arrive, no device-wide synchronisation;
 *   sendsend    every rank sends to the next and waits: a deadlock
 *               (reported by the driver, exit 86), never a completion;
 *   devsync     a send on one stream, cuMemAlloc, then the receive on
 *               another (on another communicator: NCCL would order them
 *               on one): cuMemAlloc waits for the send, whose receive the
 *               peer cannot post (it is in cuMemAlloc too): a deadlock;
 *   async       the same with cuMemAllocAsync: it completes;
 *   lazy        the same with a kernel's first launch: a deadlock;
 *   onecomm     the same with cuMemAllocAsync, the send and the receive on
 *               one communicator: NCCL orders them, a deadlock;
 *   preload     the kernels loaded first (mock_cuda_kernels_loaded): it
 *               completes;
 *   mismatch    rank 0 sends 100 floats, rank 1 receives 99: the second
 *               to issue its call stops (87), naming both sides;
 *   collmismatch  ncclAllReduce of 5 int64 on rank 0, of 4 elsewhere;
 *   order       (one rank, MOCK_CUDA_DEFERRED=1) entries of two streams
 *               run in an order the seed decides, each stream in order;
 *   capture     a global-mode capture on another thread: cuMemAllocAsync
 *               and other streams' work are fine, cuMemAlloc is refused
 *               and invalidates it; a thread-local one is not disturbed;
 *   abort       a receive whose send never comes, and ncclCommAbort from
 *               another thread: the stream completes, the error is
 *               reported;
 *   connect     rank 0's first group with rank 1 (a send) before a
 *               rendezvous outside NCCL that rank 1 passes first: the
 *               group's end waits to connect, and fails at the timeout
 *               naming the pair (NCCL connects a pair in the ncclGroupEnd
 *               of its first send or receive);
 *   freeuse, freelate, unordered  stream-ordered memory freed under a
 *               queued use, used after its free, used on a stream not
 *               ordered after its allocation: stopped (87), both named.
 * Prints "standins CASE: ok" (rank 0) or exits 1; the deadlock cases never
 * return from their wait.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, size, bad;
static const char *rdzv;

static void *(*dmalloc)(size_t, int);
static int (*dwrite)(void *, const void *, size_t);
static int (*dread)(void *, const void *, size_t);
static unsigned long long (*count)(const char *);
static void (*set_current)(int);
static int (*cu_sync)(void *);
static int (*cu_ctx_sync)(void);
static int (*cu_create)(void **, unsigned);
static int (*cu_alloc)(unsigned long long *, size_t);
static int (*cu_alloc_async)(unsigned long long *, size_t, void *);
static int (*cu_hostfn)(void *, void (*)(void *), void *);
static int (*cu_memset)(unsigned long long, unsigned char, size_t, void *);
static int (*cu_begin)(void *, int);
static int (*cu_end)(void *, void **);
static int (*kernels_loaded)(void);
static void (*seed)(unsigned long long);
static int (*cu_free)(unsigned long long);
static int (*cu_free_async)(unsigned long long, void *);
static int (*ev_create)(void **, unsigned);
static int (*ev_record)(void *, void *);
static int (*wait_ev)(void *, void *, unsigned);
static void *(*shadow)(const void *);

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "standins rank %d:%d: ", rank, __LINE__); \
                        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); bad = 1; } } while (0)

static void die(const char *what)
{
    fprintf(stderr, "standins rank %d: %s\n", rank, what);
    exit(1);
}

/* Every rank's `bytes` of `mine` into all (files in HP_RDZV). */
static void xchg(const void *mine, size_t bytes, void *all)
{
    static unsigned seq;
    char path[4096], tmp[4096];
    FILE *f;
    struct timespec ts = {0, 2000000};
    time_t t0 = time(NULL);
    seq++;
    snprintf(tmp, sizeof(tmp), "%s/.s%u.%d", rdzv, seq, rank);
    snprintf(path, sizeof(path), "%s/s%u.%d", rdzv, seq, rank);
    if ((f = fopen(tmp, "wb")) == NULL || fwrite(mine, 1, bytes, f) != bytes || fclose(f) != 0 ||
        rename(tmp, path) != 0)
        die("cannot write to HP_RDZV");
    for (int j = 0; j < size; j++) {
        snprintf(path, sizeof(path), "%s/s%u.%d", rdzv, seq, j);
        while ((f = fopen(path, "rb")) == NULL) {
            if (time(NULL) - t0 > 60)
                die("a rank wrote nothing to HP_RDZV");
            nanosleep(&ts, NULL);
        }
        if (fread((char *)all + (size_t)j * bytes, 1, bytes, f) != bytes)
            die("a short file in HP_RDZV");
        fclose(f);
    }
}

static ncclComm_t new_comm(void)
{
    ncclUniqueId id, *all = malloc((size_t)size * sizeof(id));
    ncclComm_t c = NULL;
    memset(&id, 0, sizeof(id));
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        die("ncclGetUniqueId");
    xchg(&id, sizeof(id), all);
    if (ncclCommInitRank(&c, size, all[0], rank) != ncclSuccess)
        die("ncclCommInitRank");
    free(all);
    return c;
}

static void *stream(void)
{
    void *s = NULL;
    if (cu_create(&s, 1) != 0)
        die("cuStreamCreate");
    return s;
}

static float *dev_floats(size_t n, float base)
{
    float *h = malloc(n * sizeof(float));
    void *d = dmalloc(n * sizeof(float), 0);
    for (size_t i = 0; i < n; i++)
        h[i] = base + (float)i;
    dwrite(d, h, n * sizeof(float));
    free(h);
    return d;
}

/* d[i] == base + i for i < n */
static int holds(const void *d, size_t n, float base)
{
    float *h = malloc(n * sizeof(float));
    int ok = dread(h, d, n * sizeof(float)) == 0;
    for (size_t i = 0; i < n && ok; i++)
        ok = h[i] == base + (float)i;
    free(h);
    return ok;
}

/* c, its ring of neighbours connected: NCCL connects a pair at the
 * ncclGroupEnd of their first group with a send or receive between them,
 * which blocks until both have reached theirs. */
static ncclComm_t connected(ncclComm_t c)
{
    void *s = stream(), *sd = dev_floats(1, 0), *rd = dev_floats(1, 0);
    ncclGroupStart();
    ncclSend(sd, 1, ncclFloat32, (rank + 1) % size, c, s);
    ncclRecv(rd, 1, ncclFloat32, (rank + size - 1) % size, c, s);
    ncclGroupEnd();
    CHECK(cu_sync(s) == 0, "the connection's exchange");
    return c;
}

/* ---------------------------------------------------------------- cases */

static void case_ok(void)
{
    const size_t n = 100000;   /* more than a channel holds: both sides move together */
    ncclComm_t c = new_comm();
    void *a = stream(), *b = stream();
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    void *sb = dev_floats(n, (float)rank * 1000), *rb = dev_floats(n, -1), *g = dmalloc(size * 4 * sizeof(float), 0);
    float *ar = dev_floats(n, (float)rank), gin[4], gout[64];
    unsigned long long dev0 = count("dev_syncs"), p = 0;
    CHECK(cu_alloc_async(&p, 4096, b) == 0, "cuMemAllocAsync");
    ncclGroupStart();
    ncclSend(sb, n, ncclFloat32, next, c, a);
    ncclRecv(rb, n, ncclFloat32, prev, c, a);
    ncclGroupEnd();
    ncclAllReduce(ar, ar, n, ncclFloat32, ncclSum, c, b);
    for (int i = 0; i < 4; i++)
        gin[i] = (float)(rank * 10 + i);
    dwrite((char *)g + (size_t)rank * 16, gin, 16);
    ncclAllGather((char *)g + (size_t)rank * 16, g, 4, ncclFloat32, c, b);
    ncclBroadcast(sb, sb, n, ncclFloat32, 0, c, a);
    CHECK(cu_sync(a) == 0 && cu_sync(b) == 0, "the streams");
    CHECK(count("dev_syncs") == dev0, "%llu device-wide synchronisations", count("dev_syncs") - dev0);
    CHECK(holds(rb, n, (float)prev * 1000), "the receive from rank %d", prev);
    CHECK(holds(sb, n, 0), "the broadcast from rank 0");
    {
        float *h = malloc(n * sizeof(float));
        dread(h, ar, n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            if (h[i] != (float)(size * (size - 1) / 2) + (float)size * (float)i) {
                CHECK(0, "the sum at %zu: %g", i, h[i]);
                break;
            }
        free(h);
    }
    dread(gout, g, (size_t)size * 16);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 4; i++)
            CHECK(gout[4 * r + i] == (float)(r * 10 + i), "the gather of rank %d", r);
    ncclCommDestroy(c);
}

static void case_sendsend(void)
{
    ncclComm_t c = new_comm();
    void *a = stream(), *d = dev_floats(1000, 0);
    ncclSend(d, 1000, ncclFloat32, (rank + 1) % size, c, a);
    cu_sync(a);
    die("sendsend: the sends completed without their receives");
}

/* A send on one stream, then `how` synchronises (or not), then the
 * receive on another stream.  Two communicators, even ranks sending on the
 * first and odd ranks on the second: NCCL orders one communicator's
 * operations whatever their streams, so on one the receive would wait for
 * the send, which waits for the peer's receive. */
static void case_between(const char *how)
{
    ncclComm_t c1 = connected(new_comm()), c2 = strcmp(how, "onecomm") == 0 ? c1 : connected(new_comm()),
               c = rank % 2 ? c2 : c1, c2r = rank % 2 ? c1 : c2;
    void *a = stream(), *b = stream();
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    void *sd = dev_floats(1000, (float)rank), *rd = dev_floats(1000, -1);
    unsigned long long p = 0, dev0;
    ncclSend(sd, 1000, ncclFloat32, peer, c, a);
    dev0 = count("dev_syncs");
    if (strcmp(how, "devsync") == 0)
        cu_alloc(&p, 4096);
    else if (strcmp(how, "async") == 0)
        CHECK(cu_alloc_async(&p, 4096, b) == 0, "cuMemAllocAsync");
    else if (strcmp(how, "lazy") == 0 || strcmp(how, "preload") == 0)
        cu_hostfn(b, (void (*)(void *))free, NULL);   /* a kernel never launched before */
    ncclRecv(rd, 1000, ncclFloat32, from, c2r, b);
    CHECK(cu_sync(a) == 0 && cu_sync(b) == 0, "the streams");
    CHECK(count("dev_syncs") == dev0, "%s: %llu device-wide synchronisations", how, count("dev_syncs") - dev0);
    CHECK(holds(rd, 1000, (float)from), "%s: the receive", how);
}

/* A kernel that reads the first byte of the device memory its argument
 * names (an argument in host memory, as the emulated module's are). */
static void touch(void *arg)
{
    volatile unsigned char *h = shadow(*(void **)arg);
    (void)h[0];
}

/* The stand-in driver's rules on stream-ordered memory (one rank, deferred:
 * nothing runs unless a wait needs it): "freeuse" frees it with cuMemFree
 * under a queued set of it; "freelate" runs a kernel on it after its
 * cuMemFreeAsync; "unordered" uses it on a stream ordered after its
 * allocation by an event (fine), then on one that is not.  Each stops the
 * process (87) naming both sides. */
static void case_memrule(const char *how)
{
    void *a = stream(), *b = stream(), *ev = NULL;
    static void *arg;
    unsigned long long p = 0;
    kernels_loaded();   /* (a first launch would synchronise the device) */
    CHECK(cu_alloc_async(&p, 4096, a) == 0, "cuMemAllocAsync");
    arg = (void *)(uintptr_t)p;
    if (strcmp(how, "freeuse") == 0) {
        cu_memset(p, 0, 4096, a);
        cu_free(p);
    } else if (strcmp(how, "freelate") == 0) {
        cu_free_async(p, a);
        cu_sync(a);
        cu_hostfn(a, touch, &arg);
        cu_sync(a);
    } else {
        CHECK(ev_create(&ev, 0) == 0 && ev_record(ev, a) == 0 && wait_ev(b, ev, 0) == 0, "the event");
        cu_hostfn(b, touch, &arg);
        cu_hostfn(stream(), touch, &arg);
        cu_ctx_sync();
    }
    die("the stand-in driver let a use of stream-ordered memory outside its order pass");
}

static void case_mismatch(int coll)
{
    ncclComm_t c = new_comm();
    void *a = stream(), *d = dev_floats(100, 0);
    ncclResult_t st = ncclSuccess;
    if (coll)
        ncclAllReduce(d, d, rank == 0 ? 5 : 4, ncclInt64, ncclMax, c, a);
    else if (rank == 0)
        ncclSend(d, 100, ncclFloat32, 1, c, a);
    else if (rank == 1)
        ncclRecv(d, 99, ncclFloat32, 0, c, a);
    CHECK(cu_sync(a) == 0, "the stream");
    CHECK(ncclCommGetAsyncError(c, &st) == ncclSuccess && (rank > 1 && !coll ? st == ncclSuccess
                                                           : st == ncclInvalidUsage),
          "the communicator's error is %d", (int)st);
}

static char order_log[64];
static int order_n;
static void log_a(void *u) { (void)u; order_log[order_n++] = 'A'; }
static void log_b(void *u) { (void)u; order_log[order_n++] = 'B'; }

static void case_order(void)
{
    void *a = stream(), *b = stream();
    int first[2] = {0, 0};
    kernels_loaded();   /* (no first launches in the way) */
    for (unsigned long long s = 1; s <= 16; s++) {
        seed(s);
        order_n = 0;
        for (int i = 0; i < 4; i++) {
            cu_hostfn(a, log_a, NULL);
            cu_hostfn(b, log_b, NULL);
        }
        cu_ctx_sync();
        order_log[order_n] = '\0';
        CHECK(order_n == 8, "seed %llu: %d entries ran", s, order_n);
        first[order_log[0] == 'B']++;
        if (rank == 0 && s <= 4)
            printf("# seed %llu: %s\n", s, order_log);
    }
    CHECK(first[0] > 0 && first[1] > 0, "16 seeds, the first entry always from stream %c", first[0] ? 'A' : 'B');
}

typedef struct {
    void           *s;
    int             mode, rc_end;
    pthread_mutex_t m;
    pthread_cond_t  cv;
    int             step;
} cap_t;

static void cap_wait(cap_t *c, int step)
{
    pthread_mutex_lock(&c->m);
    while (c->step < step)
        pthread_cond_wait(&c->cv, &c->m);
    pthread_mutex_unlock(&c->m);
}

static void cap_go(cap_t *c, int step)
{
    pthread_mutex_lock(&c->m);
    c->step = step;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->m);
}

static void *capturer(void *v)
{
    cap_t *c = v;
    void *graph = NULL;
    set_current(0);
    CHECK(cu_begin(c->s, c->mode) == 0, "cuStreamBeginCapture");
    cu_memset((unsigned long long)(uintptr_t)dmalloc(64, 0), 0, 64, c->s);
    cap_go(c, 1);
    cap_wait(c, 2);
    c->rc_end = cu_end(c->s, &graph);
    return NULL;
}

static void case_capture(void)
{
    for (int mode = 0; mode < 2; mode++) {
        cap_t c = {stream(), mode, -1, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        void *other = stream();
        unsigned long long p = 0, q = 0;
        pthread_t t;
        int rc;
        unsigned long long broken = count("capture_broken");
        pthread_create(&t, NULL, capturer, &c);
        cap_wait(&c, 1);
        CHECK(cu_alloc_async(&p, 256, other) == 0 && cu_sync(other) == 0,
              "mode %d: stream-ordered allocation during a capture", mode);
        rc = cu_alloc(&q, 256);
        cap_go(&c, 2);
        pthread_join(t, NULL);
        if (mode == 0) {
            CHECK(rc == 900 && c.rc_end == 901 && count("capture_broken") == broken + 1,
                  "global mode: cuMemAlloc %d (want 900), cuStreamEndCapture %d (want 901)", rc, c.rc_end);
        } else {
            CHECK(rc == 0 && c.rc_end == 0 && count("capture_broken") == broken,
                  "thread-local mode: cuMemAlloc %d, cuStreamEndCapture %d (want 0, 0)", rc, c.rc_end);
        }
    }
}

static ncclComm_t abort_comm;
static void *aborter(void *u)
{
    struct timespec ts = {0, 200000000};
    (void)u;
    nanosleep(&ts, NULL);
    ncclCommAbort(abort_comm);
    return NULL;
}

/* Rank 0's first group with rank 1 is a send; rank 1 makes its own only
 * after rank 0 has passed that group (a rendezvous outside NCCL): rank 0's
 * ncclGroupEnd waits to connect and, at MOCK_NCCL_TIMEOUT, fails naming
 * the pair. */
static void case_connect(void)
{
    ncclComm_t c = new_comm();
    void *a = stream(), *d = dev_floats(100, 0);
    int x = 0, *all = malloc((size_t)size * sizeof(int));
    ncclResult_t rc = ncclSuccess;
    if (rank == 0) {
        ncclGroupStart();
        ncclSend(d, 100, ncclFloat32, 1, c, a);
        rc = ncclGroupEnd();
    }
    xchg(&x, sizeof(x), all);
    if (rank == 1)
        ncclRecv(d, 100, ncclFloat32, 0, c, a);
    CHECK(rank != 0 || rc == ncclSystemError, "the group's end answered %d, want ncclSystemError", (int)rc);
    free(all);
}

static void case_abort(void)
{
    ncclComm_t c = connected(new_comm());
    void *a = stream(), *d = dev_floats(100, 0);
    pthread_t t;
    abort_comm = c;
    if (rank == 0) {
        ncclRecv(d, 100, ncclFloat32, 1, c, a);
        pthread_create(&t, NULL, aborter, NULL);
        CHECK(cu_sync(a) == 0, "the stream after the abort");
        pthread_join(t, NULL);
    }
    {
        int x = 0, *all = malloc((size_t)size * sizeof(int));
        xchg(&x, sizeof(x), all);   /* (rank 1 stays until rank 0 is done) */
        free(all);
    }
}

int main(int argc, char **argv)
{
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    void *cu;
    if (argc < 3 || r == NULL || w == NULL || (rdzv = getenv("HP_RDZV")) == NULL) {
        fprintf(stderr, "usage: nompi_launch NP T standins CASE MOCKDIR/libcuda.so.1\n");
        return 2;
    }
    rank = atoi(r);
    size = atoi(w);
    if ((cu = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) == NULL)
        die(dlerror());
#define SYM(v, name) if ((*(void **)&(v) = dlsym(cu, name)) == NULL) die("no " name)
    SYM(dmalloc, "mock_cuda_malloc");
    SYM(dwrite, "mock_cuda_write");
    SYM(dread, "mock_cuda_read");
    SYM(count, "mock_cuda_count");
    SYM(set_current, "mock_cuda_set_current");
    SYM(cu_sync, "cuStreamSynchronize");
    SYM(cu_ctx_sync, "cuCtxSynchronize");
    SYM(cu_create, "cuStreamCreate");
    SYM(cu_alloc, "cuMemAlloc_v2");
    SYM(cu_alloc_async, "cuMemAllocAsync");
    SYM(cu_hostfn, "cuLaunchHostFunc");
    SYM(cu_memset, "cuMemsetD8Async");
    SYM(cu_begin, "cuStreamBeginCapture_v2");
    SYM(cu_end, "cuStreamEndCapture");
    SYM(kernels_loaded, "mock_cuda_kernels_loaded");
    SYM(seed, "mock_cuda_seed");
    SYM(cu_free, "cuMemFree_v2");
    SYM(cu_free_async, "cuMemFreeAsync");
    SYM(ev_create, "cuEventCreate");
    SYM(ev_record, "cuEventRecord");
    SYM(wait_ev, "cuStreamWaitEvent");
    SYM(shadow, "mock_cuda_shadow");
    set_current(0);
    if (strcmp(argv[1], "ok") == 0)
        case_ok();
    else if (strcmp(argv[1], "sendsend") == 0)
        case_sendsend();
    else if (strcmp(argv[1], "preload") == 0 && kernels_loaded() == 0)
        case_between("preload");
    else if (strcmp(argv[1], "devsync") == 0 || strcmp(argv[1], "async") == 0 || strcmp(argv[1], "lazy") == 0 ||
             strcmp(argv[1], "onecomm") == 0)
        case_between(argv[1]);
    else if (strcmp(argv[1], "freeuse") == 0 || strcmp(argv[1], "freelate") == 0 || strcmp(argv[1], "unordered") == 0)
        case_memrule(argv[1]);
    else if (strcmp(argv[1], "mismatch") == 0 || strcmp(argv[1], "collmismatch") == 0)
        case_mismatch(argv[1][0] == 'c');
    else if (strcmp(argv[1], "order") == 0)
        case_order();
    else if (strcmp(argv[1], "capture") == 0)
        case_capture();
    else if (strcmp(argv[1], "abort") == 0)
        case_abort();
    else if (strcmp(argv[1], "connect") == 0)
        case_connect();
    else
        die("unknown case");
    if (rank == 0 && !bad)
        printf("standins %s: ok\n", argv[1]);
    return bad;
}
