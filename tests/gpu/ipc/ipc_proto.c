/*
 * The IPC stand-in NCCL's communicators (ipc_proto.h): the rendezvous in
 * shared memory, the blocks of device memory, split and shrink, and the
 * communicators' ends (the checks are ipc_watch.c's).
 *
 * Settings, read when a communicator is created (the first rank's win):
 *   HP_IPC_CHUNK    bytes of a FIFO slot (default 1M, at least 4K)
 *   HP_IPC_SLOTS    slots per FIFO (default 4, 1 to 8)
 *   HP_IPC_TIMEOUT  seconds a rendezvous, a finalize or an unmatched
 *                   descriptor may take before it is an error (default 120)
 */
#define _GNU_SOURCE
#include "ipc_comm.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const hpi_engine_t *E;
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_err[1024];

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

int hpi_comm_rank(const hpi_comm_t *c) { return c->me; }
int hpi_comm_size(const hpi_comm_t *c) { return c->n; }
int hpi_comm_device(const hpi_comm_t *c) { return c->device; }
int hpi_comm_blocking(const hpi_comm_t *c) { return c->blocking; }
uint32_t hpi_slots(const hpi_comm_t *c) { return c->slots; }
size_t hpi_chunk(const hpi_comm_t *c) { return c->chunk; }
uint64_t *hpi_sent(hpi_comm_t *c, int p) { return &c->sent[p]; }
uint64_t *hpi_rcvd(hpi_comm_t *c, int p) { return &c->rcvd[p]; }
void *hpi_side_stream(hpi_comm_t *c) { return c->side_stream; }
void *hpi_send_stream(hpi_comm_t *c) { return c->send_stream; }
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
        if (hpi_now() - c->t_join < hpi_timeout())
            return ncclInProgress;
        for (int p = 0; p < c->n; p++)
            if (atomic_load(&c->shm->rank[p].state) < (joined < c->n ? 1 : 2))
                used += (size_t)snprintf(miss + used, used < sizeof(miss) ? sizeof(miss) - used : 0, " %d", p);
        shm_unlink(c->name);
        return hpi_comm_fail(c, ncclSystemError, "communicator %s: rank(s)%s of %d did not %s within %.0f s",
                             c->name, miss, c->n, joined < c->n ? "join" : "map the others' memory", hpi_timeout());
    }
    if (c->me == 0)
        shm_unlink(c->name);   /* everyone has it mapped */
    c->ready = 1;
    hpi_watch_add(c);
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
    c->t_join = hpi_now();
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
        size_t chunk = (size_t)hpi_env_num("HP_IPC_CHUNK", 1 << 20);
        int slots = (int)hpi_env_num("HP_IPC_SLOTS", 4);
        c->shm->chunk = chunk < 4096 ? 4096 : (chunk + 255) / 256 * 256;
        c->shm->slots = (uint32_t)(slots < 1 ? 1 : slots > HPI_MAX_SLOTS ? HPI_MAX_SLOTS : slots);
        atomic_store(&c->shm->magic, HPI_MAGIC);
    } else if (want != nranks) {
        return hpi_comm_fail(c, ncclInvalidUsage, "rank %d joins communicator %s as one of %d ranks; the first to "
                             "join said %d", rank, c->name, nranks, want);
    }
    while (atomic_load(&c->shm->magic) != HPI_MAGIC)
        if (hpi_now() - c->t_join > hpi_timeout())
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
        E->stream_new(&c->side_stream) != 0 || E->stream_new(&c->send_stream) != 0) {
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
        hpi_nap(0.001);
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
    double t0 = hpi_now();

    *new_p = NULL;
    r[c->me].split[slot].color = color;
    r[c->me].split[slot].key = key;
    atomic_store(&r[c->me].split[slot].seq, seq);
    for (int p = 0; p < c->n; p++)
        while (atomic_load(&r[p].split[slot].seq) != seq) {
            ncclResult_t rc = hpi_comm_status(c);
            if (rc != ncclSuccess)
                return rc;
            if (hpi_now() - t0 > hpi_timeout())
                return hpi_comm_fail(c, ncclRemoteError, "ncclCommSplit: rank %d did not call it within %.0f s", p,
                                     hpi_timeout());
            hpi_nap(0.0005);
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
    double t0 = hpi_now();
    void *saved = NULL;
    ncclResult_t rc = ncclSuccess;
    if (!c->ready)
        return ncclSuccess;
    E->ctx_enter(c->ctx, &saved);
    for (int i = 0; i < c->nev && rc == ncclSuccess; i++) {
        int q;
        while ((q = E->query(c->ev[i])) == 0) {
            if (hpi_now() - t0 > hpi_timeout()) {
                rc = hpi_comm_fail(c, ncclSystemError, "communicator %s: this rank's operations did not finish "
                                   "within %.0f s of ncclCommFinalize", c->name, hpi_timeout());
                break;
            }
            hpi_nap(0.0002);
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
    hpi_watch_remove(c);
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
        if (c->send_stream != NULL)
            E->stream_free(c->send_stream);
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
    hpi_watch_remove(c);
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
