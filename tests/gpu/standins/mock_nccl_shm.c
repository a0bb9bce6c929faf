/*
 * The stand-in NCCL's transport (see mock_nccl_shm.h).  ncclGetUniqueId
 * names a POSIX shared-memory segment; ncclCommInitRank maps it (the first
 * rank to come makes it), records its process id and waits for every rank
 * (bounded: MOCK_NCCL_TIMEOUT seconds, default 60, and at once when a
 * rank's process is gone); the last rank to join unlinks the name, so
 * nothing is left in /dev/shm after the rendezvous.
 *
 * The segment holds a header (the size, the ranks' process ids, whether a
 * rank aborted) and one channel per ordered pair (src, dst): a ring of
 * CH_BYTES with the bytes written (tail, by src) and read (head, by dst),
 * single producer and single consumer, and each side's record of the
 * transfers it reached and of those it issued (rings of RING numbers with
 * their descriptions).  After the channels, each rank's log of the
 * collectives it issued (a ring of LOG_RING, each with the transfers it
 * had issued to and from every rank before it) and its end
 * (mock_nccl_seq.c compares them).  A record is written by its rank alone
 * and read by the others, its number last (0 while it changes).
 *
 * Mutations for the tests (tests/gpu/nccl/run_nompi.sh), on what rank P sent with
 * ncclSend (the collectives, hipress' agreements among them, are left
 * whole): MOCK_NCCL_SHM_DROP=P zeroes it (every other rank receives zeros),
 * MOCK_NCCL_SHM_FLIP=P flips one bit in the middle of every message of more
 * than 64 bytes.
 */
#define _GNU_SOURCE
#include "mock_nccl_shm.h"
#include "hp_elem.h"
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CH_BYTES ((uint64_t)64 << 10)
#define RING 64
#define LOG_RING 64
#define MAX_RANKS 64
#define MAGIC 0x68706d6f636b3032ULL   /* "hpmock02" */

typedef struct {
    _Atomic uint64_t tail;            /* bytes written by src */
    char             pad0[56];
    _Atomic uint64_t head;            /* bytes read by dst */
    char             pad1[56];
    _Atomic uint64_t reach[2][RING];  /* [1] src's, [0] dst's: the transfer numbers reached */
    mock_desc_t      desc[2][RING];
    _Atomic uint64_t issue[2][RING];  /* ... the transfer numbers issued, */
    mock_desc_t      idesc[2][RING];
    uint64_t         icoll[2][RING];  /* ... and the collectives issued before each */
    char             data[CH_BYTES];
} chan_t;

/* A rank's record of its k-th collective (or, in the slot after the ring,
 * of its end: k the collectives issued), followed by the transfers it had
 * issued before it: 2 nranks uint64, to then from each rank. */
typedef struct {
    _Atomic uint64_t k;
    mock_desc_t      d;
} log_t;

typedef struct {
    _Atomic uint64_t magic;
    _Atomic int      nranks;
    _Atomic int      joined;
    _Atomic int      pid[MAX_RANKS];
    _Atomic int      aborted[MAX_RANKS];
    _Atomic char     conn[MAX_RANKS][MAX_RANKS];   /* [a][b]: a reached its first group with b */
    char             pad[64];
} hdr_t;

struct mock_shm {
    hdr_t   *h;
    size_t   bytes;
    int      rank, nranks;
    int      drop, flip;              /* MOCK_NCCL_SHM_DROP and _FLIP, -1 none */
    uint64_t uid;
    char     name[64];
};

#define CHAN(w, src, dst) \
    ((chan_t *)((char *)(w)->h + sizeof(hdr_t)) + (size_t)(src) * (size_t)(w)->nranks + (size_t)(dst))
#define LOG_BYTES(n) (sizeof(log_t) + 2 * (size_t)(n) * sizeof(uint64_t))
#define LOG(w, r, i) \
    ((log_t *)((char *)CHAN(w, (w)->nranks, 0) + ((size_t)(r) * (LOG_RING + 1) + (size_t)(i)) * LOG_BYTES((w)->nranks)))

int mock_shm_on(void)
{
    const char *v = getenv("MOCK_NCCL_SHM");
    return v != NULL && atoi(v) != 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double timeout_s(void)
{
    const char *v = getenv("MOCK_NCCL_TIMEOUT");
    return v != NULL && atof(v) > 0 ? atof(v) : 60.0;
}

/* Whether process pid is gone (0: not recorded yet). */
static int gone(int pid)
{
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

void mock_shm_unique_id(char *id, size_t len)
{
    static _Atomic unsigned seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, len);
    snprintf(id, len, "/hpmock-%d-%u-%lx", (int)getpid(), atomic_fetch_add(&seq, 1) + 1,
             (unsigned long)(ts.tv_nsec ^ ts.tv_sec));
}

static mock_shm_t *fail_join(mock_shm_t *w, const char *what)
{
    fprintf(stderr, "mock_nccl (shm) rank %d: ncclCommInitRank of %s: %s\n", w->rank, w->name, what);
    shm_unlink(w->name);
    if (w->h != NULL)
        munmap(w->h, w->bytes);
    free(w);
    return NULL;
}

mock_shm_t *mock_shm_join(const char *id, int nranks, int rank)
{
    mock_shm_t *w = calloc(1, sizeof(*w));
    const char *drop = getenv("MOCK_NCCL_SHM_DROP"), *flip = getenv("MOCK_NCCL_SHM_FLIP");
    struct stat st;
    int fd, want = 0, zero = 0;
    double t0 = now(), limit = timeout_s();
    unsigned spins = 0;
    char msg[160];

    if (w == NULL)
        return NULL;
    w->rank = rank;
    w->nranks = nranks;
    w->drop = drop != NULL && *drop != '\0' ? atoi(drop) : -1;
    w->flip = flip != NULL && *flip != '\0' ? atoi(flip) : -1;
    snprintf(w->name, sizeof(w->name), "%.*s", (int)sizeof(w->name) - 1, id);
    w->uid = 0xcbf29ce484222325ULL;
    for (const char *c = w->name; *c != '\0'; c++)
        w->uid = (w->uid ^ (unsigned char)*c) * 0x100000001b3ULL;
    if (w->name[0] != '/' || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
        return fail_join(w, "bad unique id, rank or size");
    w->bytes = sizeof(hdr_t) + (size_t)nranks * (size_t)nranks * sizeof(chan_t) +
               (size_t)nranks * (LOG_RING + 1) * LOG_BYTES(nranks);
    fd = shm_open(w->name, O_RDWR | O_CREAT, 0600);
    if (fd < 0)
        return fail_join(w, strerror(errno));
    if (fstat(fd, &st) != 0 || ((size_t)st.st_size < w->bytes && ftruncate(fd, (off_t)w->bytes) != 0)) {
        close(fd);
        return fail_join(w, "cannot size the segment");
    }
    w->h = mmap(NULL, w->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (w->h == MAP_FAILED) {
        w->h = NULL;
        return fail_join(w, strerror(errno));
    }
    /* the first rank sets the size, every other must give the same */
    if (!atomic_compare_exchange_strong(&w->h->nranks, &want, nranks) && want != nranks) {
        snprintf(msg, sizeof(msg), "rank %d says %d ranks, this one %d", rank, want, nranks);
        return fail_join(w, msg);
    }
    if (!atomic_compare_exchange_strong(&w->h->pid[rank], &zero, (int)getpid()))
        return fail_join(w, "this rank has joined already (another process has its rank)");
    if (atomic_fetch_add(&w->h->joined, 1) + 1 == nranks)
        shm_unlink(w->name);   /* everyone has it mapped */
    while (atomic_load(&w->h->joined) < nranks) {
        for (int r = 0; r < nranks; r++)
            if (gone(atomic_load(&w->h->pid[r]))) {
                snprintf(msg, sizeof(msg), "rank %d (pid %d) is gone", r, atomic_load(&w->h->pid[r]));
                return fail_join(w, msg);
            }
        if (now() - t0 > limit) {
            snprintf(msg, sizeof(msg), "%d of %d ranks joined in %.0f s (MOCK_NCCL_TIMEOUT)",
                     atomic_load(&w->h->joined), nranks, limit);
            return fail_join(w, msg);
        }
        if (++spins > 200) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    atomic_store(&w->h->magic, MAGIC);
    return w;
}

void mock_shm_leave(mock_shm_t *w)
{
    if (w == NULL)
        return;
    munmap(w->h, w->bytes);
    free(w);
}

int mock_shm_rank(const mock_shm_t *w)
{
    return w->rank;
}

int mock_shm_size(const mock_shm_t *w)
{
    return w->nranks;
}

int mock_shm_pid(const mock_shm_t *w, int rank)
{
    return atomic_load(&w->h->pid[rank]);
}

uint64_t mock_shm_uid(const mock_shm_t *w)
{
    return w->uid;
}

/* ------------------------------------------------------------ transfers */

void mock_shm_reach(mock_shm_t *w, int src, int dst, int send, uint64_t n, const mock_desc_t *d)
{
    chan_t *c = CHAN(w, src, dst);
    c->desc[send][n % RING] = *d;
    atomic_store_explicit(&c->reach[send][n % RING], n, memory_order_release);
}

int mock_shm_reached(mock_shm_t *w, int src, int dst, int send, uint64_t n, mock_desc_t *d_p)
{
    chan_t *c = CHAN(w, src, dst);
    if (atomic_load_explicit(&c->reach[send][n % RING], memory_order_acquire) != n)
        return 0;
    if (d_p != NULL)
        *d_p = c->desc[send][n % RING];
    return 1;
}

void mock_shm_issue(mock_shm_t *w, int src, int dst, int send, uint64_t n, const mock_desc_t *d, uint64_t colls)
{
    chan_t *c = CHAN(w, src, dst);
    atomic_store_explicit(&c->issue[send][n % RING], 0, memory_order_release);
    c->idesc[send][n % RING] = *d;
    c->icoll[send][n % RING] = colls;
    atomic_store_explicit(&c->issue[send][n % RING], n, memory_order_release);
}

int mock_shm_issued(mock_shm_t *w, int src, int dst, int send, uint64_t n, mock_desc_t *d_p, uint64_t *colls_p)
{
    chan_t *c = CHAN(w, src, dst);
    if (atomic_load_explicit(&c->issue[send][n % RING], memory_order_acquire) != n)
        return 0;
    *d_p = c->idesc[send][n % RING];
    *colls_p = c->icoll[send][n % RING];
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&c->issue[send][n % RING], memory_order_relaxed) == n;
}

/* Slot i of rank r's log (LOG_RING: its end). */
static void log_put(mock_shm_t *w, size_t i, uint64_t k, const mock_desc_t *d, const uint64_t *cnt)
{
    log_t *l = LOG(w, w->rank, i);
    atomic_store_explicit(&l->k, 0, memory_order_release);
    l->d = *d;
    memcpy(l + 1, cnt, 2 * (size_t)w->nranks * sizeof(uint64_t));
    atomic_store_explicit(&l->k, k, memory_order_release);
}

static int log_get(mock_shm_t *w, int r, size_t i, uint64_t k, mock_desc_t *d, uint64_t *cnt)
{
    log_t *l = LOG(w, r, i);
    uint64_t got = atomic_load_explicit(&l->k, memory_order_acquire);
    if (got == 0 || (k != 0 && got != k))
        return 0;
    *d = l->d;
    memcpy(cnt, l + 1, 2 * (size_t)w->nranks * sizeof(uint64_t));
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&l->k, memory_order_relaxed) == got ? (int)(got > 0) : 0;
}

void mock_shm_log_coll(mock_shm_t *w, uint64_t k, const mock_desc_t *d, const uint64_t *cnt)
{
    log_put(w, (size_t)(k % LOG_RING), k, d, cnt);
}

int mock_shm_coll_of(mock_shm_t *w, int r, uint64_t k, mock_desc_t *d_p, uint64_t *cnt)
{
    return log_get(w, r, (size_t)(k % LOG_RING), k, d_p, cnt);
}

void mock_shm_log_end(mock_shm_t *w, uint64_t colls, const uint64_t *cnt)
{
    mock_desc_t d = {0, -1, -1, -1, 0, 0, 0, (uint32_t)w->rank};
    /* (k = colls + 1: an end after no collective is still recorded) */
    log_put(w, LOG_RING, colls + 1, &d, cnt);
}

int mock_shm_end_of(mock_shm_t *w, int r, uint64_t *colls_p, uint64_t *cnt)
{
    mock_desc_t d;
    log_t *l = LOG(w, r, LOG_RING);
    uint64_t k = atomic_load_explicit(&l->k, memory_order_acquire);
    if (k == 0 || !log_get(w, r, LOG_RING, k, &d, cnt))
        return 0;
    *colls_p = k - 1;
    return 1;
}

size_t mock_shm_write(mock_shm_t *w, int dst, const void *p, size_t len)
{
    chan_t *c = CHAN(w, w->rank, dst);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
    size_t k = 0;
    while (k < len && tail - head < CH_BYTES) {
        size_t off = (size_t)(tail % CH_BYTES), n = len - k;
        n = n < CH_BYTES - (tail - head) ? n : (size_t)(CH_BYTES - (tail - head));
        n = n < CH_BYTES - off ? n : CH_BYTES - off;
        memcpy(c->data + off, (const char *)p + k, n);
        k += n;
        tail += n;
    }
    atomic_store_explicit(&c->tail, tail, memory_order_release);
    return k;
}

size_t mock_shm_read(mock_shm_t *w, int src, void *p, size_t len)
{
    chan_t *c = CHAN(w, src, w->rank);
    uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    size_t k = 0;
    while (k < len && head < tail) {
        size_t off = (size_t)(head % CH_BYTES), n = len - k;
        n = n < tail - head ? n : (size_t)(tail - head);
        n = n < CH_BYTES - off ? n : CH_BYTES - off;
        memcpy((char *)p + k, c->data + off, n);
        k += n;
        head += n;
    }
    atomic_store_explicit(&c->head, head, memory_order_release);
    return k;
}

void mock_shm_connect(mock_shm_t *w, int peer)
{
    atomic_store(&w->h->conn[w->rank][peer], 1);
}

int mock_shm_connected(const mock_shm_t *w, int peer)
{
    return atomic_load(&w->h->conn[peer][w->rank]) != 0;
}

void mock_shm_abort(mock_shm_t *w)
{
    atomic_store(&w->h->aborted[w->rank], 1);
}

int mock_shm_aborted(const mock_shm_t *w, int r)
{
    return atomic_load(&w->h->aborted[r]);
}

void mock_shm_mutate(const mock_shm_t *w, int from, void *buf, size_t bytes)
{
    if (from == w->rank)
        return;
    if (from == w->drop)
        memset(buf, 0, bytes);
    if (from == w->flip && bytes > 64)
        ((unsigned char *)buf)[bytes / 2] ^= 0x10;
}

/* ------------------------------------------------------- reductions */

size_t mock_shm_dt_bytes(int dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

#define RED(T)                                                                     \
    do {                                                                           \
        T *a = (T *)acc;                                                           \
        const T *b = (const T *)x;                                                 \
        for (size_t i = 0; i < count; i++)                                         \
            a[i] = op == ncclMax ? (a[i] > b[i] ? a[i] : b[i])                     \
                 : op == ncclMin ? (a[i] < b[i] ? a[i] : b[i])                     \
                 : op == ncclProd ? (T)(a[i] * b[i]) : (T)(a[i] + b[i]);           \
    } while (0)

/* a 16-bit float type: each step in float, rounded back (as NCCL's) */
#define RED16(TO, FROM)                                                            \
    do {                                                                           \
        uint16_t *a = (uint16_t *)acc;                                             \
        const uint16_t *b = (const uint16_t *)x;                                   \
        for (size_t i = 0; i < count; i++) {                                       \
            float u = FROM(a[i]), v = FROM(b[i]);                                  \
            a[i] = TO(op == ncclMax ? (u > v ? u : v) : op == ncclMin ? (u < v ? u : v)       \
                      : op == ncclProd ? u * v : u + v);                           \
        }                                                                          \
    } while (0)

int mock_shm_reduce(void *acc, const void *x, size_t count, int dt, int op)
{
    if (op == ncclAvg)
        op = ncclSum;
    if (op != ncclSum && op != ncclProd && op != ncclMax && op != ncclMin)
        return -1;
    switch (dt) {
    case ncclFloat16: RED16(hp_f32_to_f16, hp_f16_to_f32); return 0;
    case ncclBfloat16: RED16(hp_f32_to_bf16, hp_bf16_to_f32); return 0;
    case ncclInt32: RED(int32_t); return 0;
    case ncclUint32: RED(uint32_t); return 0;
    case ncclInt64: RED(int64_t); return 0;
    case ncclUint64: RED(uint64_t); return 0;
    case ncclFloat32: RED(float); return 0;
    case ncclFloat64: RED(double); return 0;
    default: return -1;
    }
}

void mock_shm_avg(void *r, size_t count, int dt, int n)
{
    for (size_t i = 0; i < count; i++) {
        if (dt == ncclFloat32)
            ((float *)r)[i] /= (float)n;
        else if (dt == ncclFloat64)
            ((double *)r)[i] /= (double)n;
        else if (dt == ncclFloat16)
            ((uint16_t *)r)[i] = hp_f32_to_f16(hp_f16_to_f32(((uint16_t *)r)[i]) / (float)n);
        else if (dt == ncclBfloat16)
            ((uint16_t *)r)[i] = hp_f32_to_bf16(hp_bf16_to_f32(((uint16_t *)r)[i]) / (float)n);
    }
}
