/*
 * The IPC stand-in NCCL's communicators (ipc_proto.h): the rendezvous in
 * shared memory, the blocks of device memory, the descriptors that catch
 * mismatched calls, the monitor that reports what never matches, and the
 * communicators' ends.
 *
 * Settings, read when a communicator is created (the first rank's win):
 *   HP_IPC_CHUNK    bytes of a FIFO slot (default 1M, at least 4K)
 *   HP_IPC_SLOTS    slots per FIFO (default 4, 1 to 8)
 *   HP_IPC_TIMEOUT  seconds a rendezvous, a finalize or an unmatched
 *                   descriptor may take before it is an error (default 120)
 */
#define _GNU_SOURCE
#include "ipc_proto.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HPI_MAGIC 0x6870697063763031ULL   /* "hpipcv01" */
#define HPI_ID_MAGIC "hpipc01"
#define HPI_RING 256                       /* descriptors kept per pair and side */
#define HPI_SPLITS 4
#define HPI_MAX_SLOTS 8
#define HPI_FLAG_STRIDE 64
#define HPI_FLAGS_BYTES (2 * HPI_MAX_RANKS * HPI_MAX_SLOTS * HPI_FLAG_STRIDE)
#define HPI_EVENTS 8

typedef struct {
    _Atomic uint32_t seq;   /* the pair's operation number, 1-based; 0 while written */
    uint8_t  kind, dtype;
    int16_t  op;
    int32_t  root;
    uint32_t div;
    uint64_t count, bytes, call;
} hpi_desc_t;

typedef struct {
    _Atomic uint64_t posted;
    char             pad[56];
    hpi_desc_t       d[HPI_RING];
} hpi_side_t;

typedef struct {
    _Atomic int      state;      /* 1: joined, its block exported; 2: the peers' blocks mapped */
    _Atomic int      left;       /* destroyed the communicator */
    _Atomic int      aborted;
    _Atomic int      failed;     /* its sticky ncclResult_t */
    int              pid;
    int              device;
    uint64_t         block_addr; /* in its own process: same-process peers use it */
    hpi_handle_t     block;
    char             msg[512];
    struct {
        _Atomic uint64_t seq;
        int              color, key;
    } split[HPI_SPLITS];
} hpi_rank_t;

typedef struct {
    _Atomic uint64_t magic;      /* set by the creator once chunk and slots are in */
    _Atomic int      nranks;     /* claimed by the first rank to come */
    uint32_t         slots;
    uint64_t         chunk;
    hpi_rank_t       rank[HPI_MAX_RANKS];
    hpi_side_t       side[HPI_MAX_RANKS][HPI_MAX_RANKS][2];   /* [sender][receiver][0 sender, 1 receiver] */
} hpi_shm_t;

struct ncclComm {
    char               name[64];
    int                n, me, device, blocking, ready, opened;
    ncclResult_t       err;
    char               errmsg[512];
    pthread_mutex_t    mu;
    hpi_shm_t         *shm;
    void              *ctx;
    char              *peer[HPI_MAX_RANKS];   /* blocks; mine at [me] */
    size_t             block_bytes;
    uint32_t           slots;
    size_t             chunk;
    uint64_t           sent[HPI_MAX_RANKS], rcvd[HPI_MAX_RANKS];
    double             post_t[2][HPI_MAX_RANKS][HPI_RING];
    void              *side_stream;
    void              *ev[HPI_EVENTS], *ev_stream[HPI_EVENTS];
    int                nev;
    uint64_t           splits, shrinks;
    unsigned long long calls;
    double             t_join;
    struct ncclComm   *next;
};

static const hpi_engine_t *E;
static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm *list;
static int monitor_on;
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_err[1024];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static double env_num(const char *name, double dflt)
{
    const char *s = getenv(name);
    char *end;
    double v;
    if (s == NULL || *s == '\0')
        return dflt;
    v = strtod(s, &end);
    if (*end == 'K' || *end == 'k')
        v *= 1024;
    else if (*end == 'M' || *end == 'm')
        v *= 1048576;
    return v > 0 ? v : dflt;
}

static double timeout_s(void)
{
    return env_num("HP_IPC_TIMEOUT", 120);
}

/* --------------------------------------------------------------- errors */

const char *hpi_last_error(void)
{
    return last_err;
}

static ncclResult_t verror(ncclResult_t rc, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&err_mu);
    vsnprintf(last_err, sizeof(last_err), fmt, ap);
    pthread_mutex_unlock(&err_mu);
    return rc;
}

ncclResult_t hpi_error(ncclResult_t rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(rc, fmt, ap);
    va_end(ap);
    return rc;
}

ncclResult_t hpi_comm_fail(hpi_comm_t *c, ncclResult_t rc, const char *fmt, ...)
{
    va_list ap;
    char msg[512];
    int first;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->mu);
    first = c->err == ncclSuccess;
    if (first) {
        c->err = rc;
        snprintf(c->errmsg, sizeof(c->errmsg), "%s", msg);
        if (c->shm != NULL) {
            snprintf(c->shm->rank[c->me].msg, sizeof(c->shm->rank[c->me].msg), "%s", msg);
            atomic_store(&c->shm->rank[c->me].failed, (int)rc);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (first)
        fprintf(stderr, "ipc-nccl: rank %d: %s\n", c->me, msg);
    return hpi_error(rc, "%s", first ? msg : c->errmsg);
}

/* ----------------------------------------------------------- small parts */

size_t hpi_dtype_size(int dtype)
{
    switch (dtype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *hpi_dtype_name(int dtype)
{
    static const char *n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                              "float64", "bfloat16", "float8e4m3", "float8e5m2"};
    return dtype >= 0 && dtype < (int)(sizeof(n) / sizeof(n[0])) ? n[dtype] : "an unknown type";
}

const char *hpi_kind_name(int kind)
{
    static const char *n[] = {"?", "ncclSend", "ncclRecv", "ncclAllReduce", "ncclBroadcast", "ncclReduce",
                              "ncclAllGather", "ncclReduceScatter"};
    return kind > 0 && kind < (int)(sizeof(n) / sizeof(n[0])) ? n[kind] : "an operation";
}

static const char *op_name(int op, uint32_t div)
{
    static const char *n[] = {"sum", "prod", "max", "min"};
    if (div > 1)
        return "avg";
    return op >= 0 && op < 4 ? n[op] : "premulsum";
}

int hpi_comm_rank(const hpi_comm_t *c) { return c->me; }
int hpi_comm_size(const hpi_comm_t *c) { return c->n; }
int hpi_comm_device(const hpi_comm_t *c) { return c->device; }
int hpi_comm_blocking(const hpi_comm_t *c) { return c->blocking; }
uint32_t hpi_slots(const hpi_comm_t *c) { return c->slots; }
size_t hpi_chunk(const hpi_comm_t *c) { return c->chunk; }
uint64_t *hpi_sent(hpi_comm_t *c, int p) { return &c->sent[p]; }
uint64_t *hpi_rcvd(hpi_comm_t *c, int p) { return &c->rcvd[p]; }
void *hpi_side_stream(hpi_comm_t *c) { return c->side_stream; }
unsigned long long hpi_comm_next_call(hpi_comm_t *c) { return ++c->calls; }

void *hpi_ready_flag(hpi_comm_t *c, int owner, int src, int slot)
{
    return c->peer[owner] + (size_t)(src * HPI_MAX_SLOTS + slot) * HPI_FLAG_STRIDE;
}

void *hpi_consumed_flag(hpi_comm_t *c, int owner, int dst, int slot)
{
    return c->peer[owner] + (size_t)((HPI_MAX_RANKS + dst) * HPI_MAX_SLOTS + slot) * HPI_FLAG_STRIDE;
}

void *hpi_fifo_slot(hpi_comm_t *c, int owner, int src, int slot)
{
    int idx = src < owner ? src : src - 1;
    return c->peer[owner] + HPI_FLAGS_BYTES + ((size_t)idx * c->slots + (size_t)slot) * c->chunk;
}

void *hpi_scratch(hpi_comm_t *c)
{
    return c->peer[c->me] + HPI_FLAGS_BYTES + (size_t)(c->n - 1) * c->slots * c->chunk;
}

/* --------------------------------------------------------- rendezvous */

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static void name_id(ncclUniqueId *id, uint64_t h)
{
    memset(id, 0, sizeof(*id));
    snprintf(id->internal, sizeof(id->internal), "%s/hpipc-%016llx", HPI_ID_MAGIC, (unsigned long long)h);
}

void hpi_unique_id(ncclUniqueId *id)
{
    static _Atomic unsigned long long counter;
    struct timespec ts;
    uint64_t h = 0xcbf29ce484222325ULL, seed[4];
    clock_gettime(CLOCK_REALTIME, &ts);
    seed[0] = (uint64_t)getpid();
    seed[1] = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    seed[2] = atomic_fetch_add(&counter, 1);
    seed[3] = (uint64_t)(uintptr_t)&counter;
    name_id(id, fnv(seed, sizeof(seed), h));
}

static const char *id_name(const ncclUniqueId *id)
{
    size_t m = strlen(HPI_ID_MAGIC);
    if (memcmp(id->internal, HPI_ID_MAGIC, m) != 0 || id->internal[m] != '/' || memchr(id->internal, 0, 64) == NULL)
        return NULL;
    return id->internal + m;
}

static void list_add(hpi_comm_t *c);
static void list_remove(hpi_comm_t *c);

static ncclResult_t open_peers(hpi_comm_t *c)
{
    for (int p = 0; p < c->n; p++) {
        hpi_rank_t *r = &c->shm->rank[p];
        if (p == c->me)
            continue;
        if (r->pid == getpid()) {
            c->peer[p] = (char *)(uintptr_t)r->block_addr;
        } else if (E->block_open(&r->block, (void **)&c->peer[p]) != 0) {
            return hpi_comm_fail(c, ncclUnhandledCudaError, "cannot map the block of rank %d (process %d): %s", p,
                                 r->pid, E->last_error());
        }
    }
    return ncclSuccess;
}

/* The rendezvous in two rounds: every rank joins (its block exported),
 * then every rank maps the others' and says so; a rank returns only after
 * the second round, so no rank leaves (or exits) while a peer still maps
 * its block. */
ncclResult_t hpi_comm_progress(hpi_comm_t *c)
{
    int joined = 0, mapped = 0;
    ncclResult_t rc;
    if (c->ready)
        return ncclSuccess;
    if (c->err != ncclSuccess)
        return c->err;
    for (int p = 0; p < c->n; p++) {
        int st = atomic_load(&c->shm->rank[p].state);
        joined += st >= 1;
        mapped += st >= 2;
    }
    if (joined == c->n && !c->opened) {
        if ((rc = open_peers(c)) != ncclSuccess)
            return rc;
        c->opened = 1;
        atomic_store(&c->shm->rank[c->me].state, 2);
        mapped++;
    }
    if (mapped < c->n) {
        char miss[64] = "";
        size_t used = 0;
        if (now_s() - c->t_join < timeout_s())
            return ncclInProgress;
        for (int p = 0; p < c->n; p++)
            if (atomic_load(&c->shm->rank[p].state) < (joined < c->n ? 1 : 2))
                used += (size_t)snprintf(miss + used, used < sizeof(miss) ? sizeof(miss) - used : 0, " %d", p);
        shm_unlink(c->name);
        return hpi_comm_fail(c, ncclSystemError, "communicator %s: rank(s)%s of %d did not %s within %.0f s",
                             c->name, miss, c->n, joined < c->n ? "join" : "map the others' memory", timeout_s());
    }
    if (c->me == 0)
        shm_unlink(c->name);   /* everyone has it mapped */
    c->ready = 1;
    list_add(c);
    return ncclSuccess;
}

ncclResult_t hpi_comm_create(const ncclUniqueId *id, int nranks, int rank, int blocking, hpi_comm_t **comm_p)
{
    const char *name = id_name(id);
    hpi_comm_t *c;
    hpi_rank_t *me;
    int fd, want = 0;
    ncclResult_t rc;
    void *saved = NULL;

    if (E == NULL)
        E = hpi_engine();
    if (name == NULL)
        return hpi_error(ncclInvalidArgument, "the ncclUniqueId was not made by this NCCL (the IPC stand-in)");
    if (nranks < 1 || nranks > HPI_MAX_RANKS || rank < 0 || rank >= nranks)
        return hpi_error(ncclInvalidArgument, "rank %d of %d: the IPC stand-in takes 1 to %d ranks", rank, nranks,
                         HPI_MAX_RANKS);
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return hpi_error(ncclSystemError, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->n = nranks;
    c->me = rank;
    c->blocking = blocking;
    c->t_join = now_s();
    *comm_p = c;
    fd = shm_open(c->name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(hpi_shm_t)) != 0) {
        rc = hpi_comm_fail(c, ncclSystemError, "shm_open/ftruncate %s: %s", c->name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    c->shm = mmap(NULL, sizeof(hpi_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->shm == MAP_FAILED) {
        c->shm = NULL;
        return hpi_comm_fail(c, ncclSystemError, "mmap %s: %s", c->name, strerror(errno));
    }
    if (atomic_compare_exchange_strong(&c->shm->nranks, &want, nranks)) {
        size_t chunk = (size_t)env_num("HP_IPC_CHUNK", 1 << 20);
        int slots = (int)env_num("HP_IPC_SLOTS", 4);
        c->shm->chunk = chunk < 4096 ? 4096 : (chunk + 255) / 256 * 256;
        c->shm->slots = (uint32_t)(slots < 1 ? 1 : slots > HPI_MAX_SLOTS ? HPI_MAX_SLOTS : slots);
        atomic_store(&c->shm->magic, HPI_MAGIC);
    } else if (want != nranks) {
        return hpi_comm_fail(c, ncclInvalidUsage, "rank %d joins communicator %s as one of %d ranks; the first to "
                             "join said %d", rank, c->name, nranks, want);
    }
    while (atomic_load(&c->shm->magic) != HPI_MAGIC)
        if (now_s() - c->t_join > timeout_s())
            return hpi_comm_fail(c, ncclSystemError, "communicator %s: the first rank never set it up", c->name);
    c->chunk = (size_t)c->shm->chunk;
    c->slots = c->shm->slots;
    me = &c->shm->rank[rank];
    if (atomic_load(&me->state) != 0)
        return hpi_comm_fail(c, ncclInvalidUsage, "rank %d joined communicator %s twice", rank, c->name);
    if (E->ctx_get(&c->ctx, &c->device) != 0)
        return hpi_comm_fail(c, ncclUnhandledCudaError, "no CUDA context: %s", E->last_error());
    E->ctx_enter(c->ctx, &saved);
    c->block_bytes = HPI_FLAGS_BYTES + (size_t)nranks * c->slots * c->chunk;
    if (E->block_alloc(c->block_bytes, (void **)&c->peer[rank], &me->block) != 0 ||
        E->stream_new(&c->side_stream) != 0) {
        rc = hpi_comm_fail(c, ncclUnhandledCudaError, "cannot allocate %zu bytes of device memory: %s",
                           c->block_bytes, E->last_error());
        E->ctx_leave(saved);
        return rc;
    }
    E->ctx_leave(saved);
    me->pid = getpid();
    me->device = c->device;
    me->block_addr = (uint64_t)(uintptr_t)c->peer[rank];
    atomic_store(&me->state, 1);
    if (!blocking)
        return hpi_comm_progress(c) == ncclSuccess ? ncclSuccess : c->err != ncclSuccess ? c->err : ncclInProgress;
    while ((rc = hpi_comm_progress(c)) == ncclInProgress)
        nap(0.001);
    return rc;
}

ncclResult_t hpi_comm_status(hpi_comm_t *c)
{
    ncclResult_t rc;
    if (!c->ready && c->err == ncclSuccess)
        return hpi_comm_progress(c);
    pthread_mutex_lock(&c->mu);
    rc = c->err;
    pthread_mutex_unlock(&c->mu);
    if (rc != ncclSuccess)
        hpi_error(rc, "%s", c->errmsg);
    return rc;
}

/* ------------------------------------------------------- descriptors */

static void describe(char *buf, size_t len, const hpi_desc_t *d, int poster, int side, int pa, int pb)
{
    int peer = side == 0 ? pb : pa, red = d->kind == HPI_K_ALLREDUCE || d->kind == HPI_K_REDSCAT ||
                                          d->kind == HPI_K_REDUCE;
    char root[24] = "";
    if (d->kind == HPI_K_BCAST || d->kind == HPI_K_REDUCE)
        snprintf(root, sizeof(root), ", root %d", d->root);
    if (d->kind == HPI_K_SEND || d->kind == HPI_K_RECV)
        snprintf(buf, len, "rank %d's %s #%llu (%llu x %s, %llu bytes, %s rank %d)", poster, hpi_kind_name(d->kind),
                 (unsigned long long)d->call, (unsigned long long)d->count, hpi_dtype_name(d->dtype),
                 (unsigned long long)d->bytes, d->kind == HPI_K_SEND ? "to" : "from", peer);
    else
        snprintf(buf, len, "rank %d's %s #%llu (%llu x %s%s%s%s)", poster, hpi_kind_name(d->kind),
                 (unsigned long long)d->call, (unsigned long long)d->count, hpi_dtype_name(d->dtype),
                 red ? ", " : "", red ? op_name(d->op, d->div) : "", root);
}

static int matches(const hpi_desc_t *a, const hpi_desc_t *b)
{
    int ap = a->kind == HPI_K_SEND || a->kind == HPI_K_RECV, bp = b->kind == HPI_K_SEND || b->kind == HPI_K_RECV;
    if (ap || bp)
        return ap && bp && a->kind != b->kind && a->bytes == b->bytes;
    return a->kind == b->kind && a->count == b->count && a->dtype == b->dtype && a->root == b->root &&
           (a->kind == HPI_K_BCAST || a->kind == HPI_K_ALLGATHER || (a->op == b->op && a->div == b->div));
}

ncclResult_t hpi_post(hpi_comm_t *c, int side, int p, const hpi_task_t *t, uint64_t bytes)
{
    int pa = side == 0 ? c->me : p, pb = side == 0 ? p : c->me;
    hpi_side_t *mine = &c->shm->side[pa][pb][side], *other = &c->shm->side[pa][pb][1 - side];
    uint64_t k = atomic_load(&mine->posted), o;
    hpi_desc_t *d = &mine->d[k % HPI_RING], theirs;
    uint32_t s1, s2;

    atomic_store(&d->seq, 0);
    d->kind = (uint8_t)t->kind;
    d->dtype = (uint8_t)t->dtype;
    d->op = (int16_t)(t->premul ? 99 : t->op);
    d->root = t->kind == HPI_K_SEND || t->kind == HPI_K_RECV ? 0 : t->root;
    d->div = (uint32_t)t->div;
    d->count = t->count;
    d->bytes = bytes;
    d->call = t->call;
    atomic_store(&d->seq, (uint32_t)(k + 1));
    c->post_t[side][p][k % HPI_RING] = now_s();
    atomic_store(&mine->posted, k + 1);
    o = atomic_load(&other->posted);
    if (o <= k)
        return ncclSuccess;   /* the peer compares when it posts */
    s1 = atomic_load(&other->d[k % HPI_RING].seq);
    memcpy((char *)&theirs + sizeof(theirs.seq), (char *)&other->d[k % HPI_RING] + sizeof(theirs.seq),
           sizeof(theirs) - sizeof(theirs.seq));
    atomic_thread_fence(memory_order_acquire);
    s2 = atomic_load(&other->d[k % HPI_RING].seq);
    if (s1 != (uint32_t)(k + 1) || s2 != s1)
        return ncclSuccess;   /* overwritten: the peer is far ahead */
    if (!matches(d, &theirs)) {
        char a[160], b[160];
        describe(a, sizeof(a), d, c->me, side, pa, pb);
        describe(b, sizeof(b), &theirs, p, 1 - side, pa, pb);
        return hpi_comm_fail(c, ncclInvalidUsage, "%s does not match %s (operation %llu between them)", a, b,
                             (unsigned long long)(k + 1));
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------ monitor */

/* a process that exited, reaped or not (a zombie is gone too) */
static int gone(int pid)
{
    char path[64], buf[256], *p;
    FILE *f;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    p = fgets(buf, sizeof(buf), f) != NULL ? strrchr(buf, ')') : NULL;
    fclose(f);
    return p != NULL && p[1] == ' ' && p[2] == 'Z';
}

static void check_comm(hpi_comm_t *c)
{
    double t = now_s(), limit = timeout_s();
    if (!c->ready || c->err != ncclSuccess)
        return;
    for (int p = 0; p < c->n; p++) {
        hpi_rank_t *r = &c->shm->rank[p];
        if (p == c->me || atomic_load(&r->left))
            continue;
        if (atomic_load(&r->failed) != ncclSuccess) {
            hpi_comm_fail(c, ncclRemoteError, "rank %d failed: %s", p, r->msg);
            return;
        }
        if (atomic_load(&r->aborted)) {
            hpi_comm_fail(c, ncclRemoteError, "rank %d aborted communicator %s", p, c->name);
            return;
        }
        if (r->pid != getpid() && gone(r->pid)) {
            hpi_comm_fail(c, ncclRemoteError, "rank %d (process %d) is gone without destroying communicator %s",
                          p, r->pid, c->name);
            return;
        }
        for (int side = 0; side < 2; side++) {
            int pa = side == 0 ? c->me : p, pb = side == 0 ? p : c->me;
            uint64_t mine = atomic_load(&c->shm->side[pa][pb][side].posted);
            uint64_t theirs = atomic_load(&c->shm->side[pa][pb][1 - side].posted);
            if (theirs < mine && t - c->post_t[side][p][theirs % HPI_RING] > limit) {
                char a[160];
                describe(a, sizeof(a), &c->shm->side[pa][pb][side].d[theirs % HPI_RING], c->me, side, pa, pb);
                hpi_comm_fail(c, ncclRemoteError, "%s has had no matching call on rank %d for %.0f s (rank %d has "
                              "posted %llu operations between them, this rank %llu)", a, p, limit, p,
                              (unsigned long long)theirs, (unsigned long long)mine);
                return;
            }
        }
    }
}

static void *monitor(void *arg)
{
    (void)arg;
    for (;;) {
        nap(0.1);
        pthread_mutex_lock(&list_mu);
        for (hpi_comm_t *c = list; c != NULL; c = c->next)
            check_comm(c);
        pthread_mutex_unlock(&list_mu);
    }
    return NULL;
}

static void list_add(hpi_comm_t *c)
{
    pthread_t th;
    sigset_t all, old;
    pthread_mutex_lock(&list_mu);
    c->next = list;
    list = c;
    if (!monitor_on) {
        /* the thread takes no signal the application expects */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (pthread_create(&th, NULL, monitor, NULL) == 0) {
            pthread_detach(th);
            monitor_on = 1;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_mutex_unlock(&list_mu);
}

static void list_remove(hpi_comm_t *c)
{
    pthread_mutex_lock(&list_mu);
    for (hpi_comm_t **pp = &list; *pp != NULL; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    pthread_mutex_unlock(&list_mu);
}

/* ------------------------------------------------------ split, shrink */

static ncclResult_t derive(hpi_comm_t *c, const char *what, uint64_t seq, int color, int n, int me,
                           hpi_comm_t **new_p)
{
    ncclUniqueId id;
    uint64_t h = fnv(c->name, strlen(c->name), 0xcbf29ce484222325ULL);
    h = fnv(what, strlen(what), h);
    h = fnv(&seq, sizeof(seq), h);
    h = fnv(&color, sizeof(color), h);
    name_id(&id, h);
    return hpi_comm_create(&id, n, me, c->blocking, new_p);
}

ncclResult_t hpi_comm_split(hpi_comm_t *c, int color, int key, hpi_comm_t **new_p)
{
    uint64_t seq = ++c->splits;
    int slot = (int)(seq % HPI_SPLITS), n = 0, me = 0;
    hpi_rank_t *r = c->shm->rank;
    double t0 = now_s();

    *new_p = NULL;
    r[c->me].split[slot].color = color;
    r[c->me].split[slot].key = key;
    atomic_store(&r[c->me].split[slot].seq, seq);
    for (int p = 0; p < c->n; p++)
        while (atomic_load(&r[p].split[slot].seq) != seq) {
            ncclResult_t rc = hpi_comm_status(c);
            if (rc != ncclSuccess)
                return rc;
            if (now_s() - t0 > timeout_s())
                return hpi_comm_fail(c, ncclRemoteError, "ncclCommSplit: rank %d did not call it within %.0f s", p,
                                     timeout_s());
            nap(0.0005);
        }
    if (color < 0)
        return ncclSuccess;
    for (int p = 0; p < c->n; p++) {
        int kp = r[p].split[slot].key;
        if (r[p].split[slot].color != color)
            continue;
        n++;
        if (kp < key || (kp == key && p < c->me))
            me++;
    }
    return derive(c, "split", seq, color, n, me, new_p);
}

ncclResult_t hpi_comm_shrink(hpi_comm_t *c, const int *excluded, int nex, hpi_comm_t **new_p)
{
    int n = 0, me = -1;
    *new_p = NULL;
    for (int p = 0; p < c->n; p++) {
        int out = 0;
        for (int i = 0; i < nex; i++)
            out |= excluded[i] == p;
        if (out && p == c->me)
            return hpi_error(ncclInvalidArgument, "ncclCommShrink: this rank (%d) is in the excluded list", p);
        if (!out) {
            if (p == c->me)
                me = n;
            n++;
        }
    }
    return derive(c, "shrink", ++c->shrinks, 0, n, me, new_p);
}

/* ------------------------------------------------------------ the end */

ncclResult_t hpi_comm_mark(hpi_comm_t *c, void *stream)
{
    int i;
    for (i = 0; i < c->nev && c->ev_stream[i] != stream; i++)
        ;
    if (i == c->nev) {
        if (c->nev == HPI_EVENTS)
            i = (int)(c->calls % HPI_EVENTS);   /* many streams: the oldest may be forgotten */
        else if (E->event_new(&c->ev[c->nev]) != 0)
            return hpi_comm_fail(c, ncclUnhandledCudaError, "cannot create an event: %s", E->last_error());
        else
            c->nev++;
        c->ev_stream[i] = stream;
    }
    if (E->record(c->ev[i], stream) != 0)
        return hpi_comm_fail(c, ncclUnhandledCudaError, "cannot record an event: %s", E->last_error());
    return ncclSuccess;
}

ncclResult_t hpi_comm_finalize(hpi_comm_t *c)
{
    double t0 = now_s();
    void *saved = NULL;
    ncclResult_t rc = ncclSuccess;
    if (!c->ready)
        return ncclSuccess;
    E->ctx_enter(c->ctx, &saved);
    for (int i = 0; i < c->nev && rc == ncclSuccess; i++) {
        int q;
        while ((q = E->query(c->ev[i])) == 0) {
            if (now_s() - t0 > timeout_s()) {
                rc = hpi_comm_fail(c, ncclSystemError, "communicator %s: this rank's operations did not finish "
                                   "within %.0f s of ncclCommFinalize", c->name, timeout_s());
                break;
            }
            nap(0.0002);
        }
        if (q < 0)
            rc = hpi_comm_fail(c, ncclUnhandledCudaError, "an operation failed on the device: %s", E->last_error());
    }
    E->ctx_leave(saved);
    return rc;
}

ncclResult_t hpi_comm_destroy(hpi_comm_t *c)
{
    ncclResult_t rc = hpi_comm_finalize(c);
    void *saved = NULL;
    list_remove(c);
    if (c->shm != NULL) {
        atomic_store(&c->shm->rank[c->me].left, 1);
        if (!c->ready)
            shm_unlink(c->name);
    }
    E->ctx_enter(c->ctx, &saved);
    if (rc == ncclSuccess) {   /* else the device may still use them: kept */
        for (int p = 0; p < c->n; p++)
            if (p != c->me && c->peer[p] != NULL && c->shm->rank[p].pid != getpid())
                E->block_close(c->peer[p]);
        if (c->peer[c->me] != NULL)
            E->block_free(c->peer[c->me]);
        for (int i = 0; i < c->nev; i++)
            E->event_free(c->ev[i]);
        if (c->side_stream != NULL)
            E->stream_free(c->side_stream);
    }
    E->ctx_leave(saved);
    if (c->shm != NULL)
        munmap(c->shm, sizeof(hpi_shm_t));
    pthread_mutex_destroy(&c->mu);
    free(c);
    return rc;
}

ncclResult_t hpi_comm_abort(hpi_comm_t *c)
{
    void *saved = NULL;
    list_remove(c);
    if (c->shm != NULL) {
        atomic_store(&c->shm->rank[c->me].aborted, 1);
        if (!c->ready)
            shm_unlink(c->name);
    }
    /* this rank's waits all pass (its flags far ahead), so its streams
     * drain; its memory and its mappings of the peers' stay */
    if (c->peer[c->me] != NULL && c->side_stream != NULL) {
        E->ctx_enter(c->ctx, &saved);
        E->fill(c->side_stream, c->peer[c->me], 0x3f, HPI_FLAGS_BYTES);
        E->ctx_leave(saved);
    }
    if (c->shm != NULL)
        munmap(c->shm, sizeof(hpi_shm_t));
    free(c);
    return ncclSuccess;
}

void *hpi_comm_ctx(hpi_comm_t *c)
{
    return c->ctx;
}
