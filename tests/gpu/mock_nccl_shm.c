/*
 * The stand-in NCCL's transport without MPI (MOCK_NCCL_SHM=1; see
 * mock_nccl_shm.h).  ncclGetUniqueId names a POSIX shared-memory segment;
 * ncclCommInitRank maps it (the first rank to come makes it), records its
 * process id and waits for every rank; the last rank to join unlinks the
 * name, so nothing is left in /dev/shm after the rendezvous.
 *
 * The segment holds a header (the size, the ranks' process ids) and one
 * channel per ordered pair (src, dst): a ring of CH_BYTES with the bytes
 * written (tail, by src) and read (head, by dst), single producer and
 * single consumer.  A message is its length (8 bytes) then its bytes, so a
 * receive posted with another size is seen: the message is consumed (the
 * stream stays in step) and the group fails, ncclInvalidUsage when it was
 * shorter than the receive, ncclSystemError when longer (MPI's truncation),
 * as the MPI form answers.  A group's sends and receives progress
 * together, each peer's in posting order, until all are done.
 *
 * Bounded: a wait that sees no progress for MOCK_NCCL_TIMEOUT seconds
 * (default 60), or whose peer's process is gone, fails (ncclSystemError)
 * with a line naming the rank, the peer and what it waited for.
 *
 * Mutations for the tests (tests/gpu/run_nompi.sh), on what rank P sent with
 * ncclSend (mock_shm_drop; the collectives, hipress' agreements among
 * them, are left whole): MOCK_NCCL_SHM_DROP=P drops it (every other rank
 * receives zeros), MOCK_NCCL_SHM_FLIP=P flips one bit in the middle of
 * every message of more than 64 bytes.
 */
#define _GNU_SOURCE
#include "mock_nccl_shm.h"
#include "hp_elem.h"
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CH_BYTES ((uint64_t)256 << 10)
#define MAX_RANKS 64
#define MAGIC 0x68706d6f636b3031ULL   /* "hpmock01" */

typedef struct {
    _Atomic uint64_t tail;            /* bytes written by src */
    char             pad0[56];
    _Atomic uint64_t head;            /* bytes read by dst */
    char             pad1[56];
    char             data[CH_BYTES];
} chan_t;

typedef struct {
    _Atomic uint64_t magic;
    _Atomic int      nranks;
    _Atomic int      joined;
    _Atomic int      pid[MAX_RANKS];
    char             pad[64];
} hdr_t;

struct mock_shm {
    hdr_t  *h;
    size_t  bytes;
    int     rank, nranks;
    int     drop, flip;               /* MOCK_NCCL_SHM_DROP and _FLIP, -1 none */
    char    name[64];
};

#define CHAN(w, src, dst) \
    ((chan_t *)((char *)(w)->h + sizeof(hdr_t)) + (size_t)(src) * (size_t)(w)->nranks + (size_t)(dst))

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

static void nap(unsigned *spins)
{
    if (++*spins > 200) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
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
    if (w->name[0] != '/' || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
        return fail_join(w, "bad unique id, rank or size");
    w->bytes = sizeof(hdr_t) + (size_t)nranks * (size_t)nranks * sizeof(chan_t);
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
        nap(&spins);
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

void mock_shm_drop(const mock_shm_t *w, const mock_shm_op_t *ops, int n)
{
    for (int i = 0; i < n; i++) {
        if (ops[i].send || ops[i].peer == w->rank)
            continue;
        if (ops[i].peer == w->drop)
            memset(ops[i].buf, 0, ops[i].bytes);
        if (ops[i].peer == w->flip && ops[i].bytes > 64)
            ((unsigned char *)ops[i].buf)[ops[i].bytes / 2] ^= 0x10;
    }
}

/* ------------------------------------------------------------ a group */

typedef struct {
    uint64_t hdr;       /* the length sent or received */
    size_t   done;      /* bytes moved, the 8 of the length first */
    size_t   total;     /* 8 + the message's length (a receive: known after the length) */
} prog_t;

/* Move what the channel allows for op o; 1 when something moved. */
static int step(mock_shm_t *w, const mock_shm_op_t *o, prog_t *p)
{
    chan_t *c = o->send ? CHAN(w, w->rank, o->peer) : CHAN(w, o->peer, w->rank);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
    uint64_t room = o->send ? CH_BYTES - (tail - head) : tail - head;
    uint64_t pos = o->send ? tail : head;
    size_t k = 0;

    while (room > 0 && p->done < p->total) {
        size_t n = p->total - p->done, off = (size_t)(pos % CH_BYTES);
        if (p->done < 8)
            n = 8 - p->done;
        n = n < room ? n : (size_t)room;
        n = n < CH_BYTES - off ? n : CH_BYTES - off;
        if (p->done < 8) {
            char *hb = (char *)&p->hdr + p->done;
            if (o->send)
                memcpy(c->data + off, hb, n);
            else
                memcpy(hb, c->data + off, n);
        } else {
            size_t at = p->done - 8;
            if (o->send)
                memcpy(c->data + off, (const char *)o->buf + at, n);
            else if (at < o->bytes)
                memcpy((char *)o->buf + at, c->data + off, n < o->bytes - at ? n : o->bytes - at);
        }
        p->done += n;
        pos += n;
        room -= n;
        k += n;
        if (!o->send && p->done == 8)
            p->total = 8 + (size_t)p->hdr;   /* the length has come */
    }
    if (k > 0)
        atomic_store_explicit(o->send ? &c->tail : &c->head, pos, memory_order_release);
    return k > 0;
}

int mock_shm_run(mock_shm_t *w, const mock_shm_op_t *ops, int n)
{
    prog_t *p = calloc((size_t)(n > 0 ? n : 1), sizeof(prog_t));
    char *busy = calloc(2 * (size_t)w->nranks, 1);   /* per direction and peer: an earlier op unfinished */
    double last = now(), limit = timeout_s();
    int left = n, rc = MOCK_SHM_OK;
    unsigned spins = 0;

    if (p == NULL || busy == NULL) {
        free(p);
        free(busy);
        return MOCK_SHM_SYSTEM;
    }
    for (int i = 0; i < n; i++) {
        if (ops[i].peer < 0 || ops[i].peer >= w->nranks) {
            fprintf(stderr, "mock_nccl (shm) rank %d: a %s with peer %d of %d ranks\n", w->rank,
                    ops[i].send ? "send" : "receive", ops[i].peer, w->nranks);
            free(p);
            free(busy);
            return MOCK_SHM_ARG;
        }
        p[i].hdr = ops[i].bytes;
        p[i].total = ops[i].send ? 8 + ops[i].bytes : 8;
    }
    while (left > 0) {
        int moved = 0;
        memset(busy, 0, 2 * (size_t)w->nranks);
        for (int i = 0; i < n; i++) {
            const mock_shm_op_t *o = &ops[i];
            char *b = &busy[2 * o->peer + o->send];
            if (p[i].done == p[i].total && p[i].done >= 8)
                continue;
            if (*b)
                continue;   /* the peer's earlier message in this direction first */
            moved |= step(w, o, &p[i]);
            if (p[i].done == p[i].total && p[i].done >= 8) {
                left--;
                if (!o->send && p[i].hdr != o->bytes) {
                    fprintf(stderr, "mock_nccl (shm) rank %d: a receive of %zu bytes from rank %d got a message "
                            "of %llu bytes (the counts of a send and its receive must match)\n", w->rank, o->bytes,
                            o->peer, (unsigned long long)p[i].hdr);
                    rc = p[i].hdr < o->bytes ? MOCK_SHM_USAGE : MOCK_SHM_SYSTEM;
                }
            } else {
                *b = 1;
            }
        }
        if (moved) {
            last = now();
            spins = 0;
            continue;
        }
        for (int i = 0; i < n && left > 0; i++) {
            const mock_shm_op_t *o = &ops[i];
            int pid = atomic_load(&w->h->pid[o->peer]);
            int dead = gone(pid);
            if (p[i].done == p[i].total && p[i].done >= 8)
                continue;
            if (dead || now() - last > limit) {
                fprintf(stderr, "mock_nccl (shm) rank %d: a %s of %zu bytes %s rank %d is stuck at %zu bytes: %s\n",
                        w->rank, o->send ? "send" : "receive", o->bytes, o->send ? "to" : "from", o->peer,
                        p[i].done > 8 ? p[i].done - 8 : 0,
                        dead ? "the peer's process is gone" : "no progress within MOCK_NCCL_TIMEOUT");
                if (dead)
                    fprintf(stderr, "mock_nccl (shm) rank %d: rank %d (pid %d) has exited\n", w->rank, o->peer, pid);
                else
                    fprintf(stderr, "mock_nccl (shm) rank %d: waited %.0f s (MOCK_NCCL_TIMEOUT=%g)\n", w->rank,
                            now() - last, limit);
                free(p);
                free(busy);
                return MOCK_SHM_SYSTEM;
            }
            break;   /* (the first unfinished op's peer is enough) */
        }
        nap(&spins);
    }
    free(p);
    free(busy);
    return rc;
}

/* ------------------------------------------------------- collectives */

static size_t dt_bytes(int dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

/* acc op= x, elementwise: 0, or -1 for a type or op the stand-in does not
 * reduce */
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

static int reduce(void *acc, const void *x, size_t count, int dt, int op)
{
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

int mock_shm_allreduce(mock_shm_t *w, const void *s, void *r, size_t count, int dt, int op)
{
    int N = w->nranks, k = 0, rc;
    size_t bytes = count * dt_bytes(dt);
    char *all;
    mock_shm_op_t *ops;
    int avg = op == ncclAvg;

    int fl = dt == ncclFloat16 || dt == ncclBfloat16 || dt == ncclFloat32 || dt == ncclFloat64;

    if ((op != ncclSum && op != ncclProd && op != ncclMax && op != ncclMin && !avg) || (avg && !fl) ||
        (!fl && dt != ncclInt32 && dt != ncclUint32 && dt != ncclInt64 && dt != ncclUint64)) {
        fprintf(stderr, "mock_nccl (shm) rank %d: ncclAllReduce of datatype %d with op %d is not emulated\n",
                w->rank, dt, op);
        return MOCK_SHM_ARG;
    }
    all = malloc((size_t)N * bytes + 1);
    ops = malloc(2 * (size_t)N * sizeof(*ops));
    if (all == NULL || ops == NULL) {
        free(all);
        free(ops);
        return MOCK_SHM_SYSTEM;
    }
    memcpy(all + (size_t)w->rank * bytes, s, bytes);
    for (int p = 0; p < N; p++)
        if (p != w->rank) {
            ops[k++] = (mock_shm_op_t){1, (void *)(uintptr_t)s, bytes, p};
            ops[k++] = (mock_shm_op_t){0, all + (size_t)p * bytes, bytes, p};
        }
    rc = mock_shm_run(w, ops, k);
    if (rc == MOCK_SHM_OK) {
        /* rank order: the same bits everywhere */
        memcpy(r, all, bytes);
        for (int p = 1; p < N; p++)
            reduce(r, all + (size_t)p * bytes, count, dt, avg ? ncclSum : op);
        if (avg && dt == ncclFloat32)
            for (size_t i = 0; i < count; i++)
                ((float *)r)[i] /= (float)N;
        if (avg && dt == ncclFloat64)
            for (size_t i = 0; i < count; i++)
                ((double *)r)[i] /= (double)N;
        if (avg && dt == ncclFloat16)
            for (size_t i = 0; i < count; i++)
                ((uint16_t *)r)[i] = hp_f32_to_f16(hp_f16_to_f32(((uint16_t *)r)[i]) / (float)N);
        if (avg && dt == ncclBfloat16)
            for (size_t i = 0; i < count; i++)
                ((uint16_t *)r)[i] = hp_f32_to_bf16(hp_bf16_to_f32(((uint16_t *)r)[i]) / (float)N);
    }
    free(all);
    free(ops);
    return rc;
}

int mock_shm_allgather(mock_shm_t *w, const void *s, void *r, size_t bytes)
{
    int N = w->nranks, k = 0, rc;
    mock_shm_op_t *ops = malloc(2 * (size_t)N * sizeof(*ops));
    if (ops == NULL)
        return MOCK_SHM_SYSTEM;
    for (int p = 0; p < N; p++)
        if (p != w->rank) {
            ops[k++] = (mock_shm_op_t){1, (void *)(uintptr_t)s, bytes, p};
            ops[k++] = (mock_shm_op_t){0, (char *)r + (size_t)p * bytes, bytes, p};
        }
    rc = mock_shm_run(w, ops, k);
    /* (after the sends: s may be r's own slot) */
    if (rc == MOCK_SHM_OK)
        memmove((char *)r + (size_t)w->rank * bytes, s, bytes);
    free(ops);
    return rc;
}

int mock_shm_bcast(mock_shm_t *w, const void *s, void *r, size_t bytes, int root)
{
    int N = w->nranks, k = 0, rc;
    mock_shm_op_t *ops;
    if (root < 0 || root >= N)
        return MOCK_SHM_ARG;
    if ((ops = malloc((size_t)N * sizeof(*ops))) == NULL)
        return MOCK_SHM_SYSTEM;
    if (w->rank == root) {
        for (int p = 0; p < N; p++)
            if (p != root)
                ops[k++] = (mock_shm_op_t){1, (void *)(uintptr_t)s, bytes, p};
    } else {
        ops[k++] = (mock_shm_op_t){0, r, bytes, root};
    }
    rc = mock_shm_run(w, ops, k);
    if (rc == MOCK_SHM_OK && w->rank == root && s != r)
        memmove(r, s, bytes);
    free(ops);
    return rc;
}
