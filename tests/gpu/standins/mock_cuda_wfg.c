/*
 * The stand-in driver's wait-for graph across processes, and its deadlock
 * report (doc/dev/standins.md).
 *
 * Every process that runs the device executor keeps a shared-memory segment
 * (/hpmock-wfg-PID) through which its peers ask it for a snapshot of what
 * it waits for: its threads (running, or waiting for a stream, or for the
 * whole device), its streams (idle or ready, or waiting at an event for
 * another stream, at a value wait for a word to be written, or at an NCCL
 * entry for peers that have not reached their side: the transfers' keys
 * and the peers' processes), the transfers its queued NCCL entries take
 * part in (key -> stream), and the processes it shares device memory with
 * through CUDA IPC (registered by the process that opens the memory, in
 * both segments).
 *
 * A host thread that has waited half a second gathers the snapshots of its
 * process and, following the transfers it waits for, of its peers, and
 * asks which nodes can still make progress: a thread or a stream can when
 * everything it waits for can; a process's "host" (which would enqueue a
 * transfer it has not enqueued yet) can when any of its NCCL threads can;
 * a stream at a value wait can when anything that could write the word
 * can: any other stream with work or any thread, of its process or of a
 * process it shares memory with, directly or through others (one that has
 * ended writes nothing).
 * When the thread cannot, and the same holds 0.3 s later with no progress
 * anywhere involved, the cycle is printed, one wait a line, and the process
 * ends (exit status 86).  A peer whose snapshot cannot be had (gone, busy
 * running a kernel) counts as able to progress: the report is never a
 * guess, and what it misses falls to the timeouts.
 */
#include "mock_cuda_int.h"
#include <stdatomic.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WG_T 64
#define WG_S 256
#define WG_K 8192
#define WG_W 8
#define WG_P 32
#define WG_D ((WG_S + WG_T) * 4)   /* the most waits of one node looked at */
#define MAGIC 0x68706d6f636b7767ULL   /* "hpmockwg" */
#define DEADLOCK_EXIT 86

enum { S_IDLE, S_READY, S_WAIT_STREAM, S_WAIT_PEER, S_WAIT_VALUE };

typedef struct {
    int32_t tid, state, target, nccl;
    char    what[48];
} wg_thr_t;

typedef struct {
    int32_t     state, wstream, nwait, pad;
    uint64_t    handle;
    mock_wkey_t wait[WG_W];
    char        what[112];
} wg_str_t;

typedef struct {
    uint64_t key;
    int32_t  stream, reached;
} wg_key_t;

typedef struct {
    uint64_t         magic;
    _Atomic uint64_t req, gen, seq;
    int32_t          pid, rank, nt, ns, nk, pad;
    _Atomic int32_t  peers[WG_P];   /* processes sharing device memory (written by them too) */
    uint64_t         progress;
    wg_thr_t         t[WG_T];
    wg_str_t         s[WG_S];
    wg_key_t         k[WG_K];
} wg_seg_t;

static wg_seg_t *own;
static int own_tried;
static pthread_mutex_t map_mu = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void seg_name(char *buf, size_t len, int pid)
{
    snprintf(buf, len, "/hpmock-wfg-%d", pid);
}

static void own_unlink(void)
{
    char name[64];
    seg_name(name, sizeof(name), (int)getpid());
    shm_unlink(name);
}

static void own_open(void)
{
    char name[64];
    int fd;
    void *p;
    own_tried = 1;
    mock_shm_sweep("hpmock-wfg-");
    seg_name(name, sizeof(name), (int)getpid());
    fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return;
    if (ftruncate(fd, sizeof(wg_seg_t)) != 0) {
        close(fd);
        shm_unlink(name);
        return;
    }
    p = mmap(NULL, sizeof(wg_seg_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        return;
    }
    own = p;
    own->pid = (int)getpid();
    own->rank = mock_rank();
    own->magic = MAGIC;
    atexit(own_unlink);
}

/* ------------------------------------------------------------ snapshots */

static int index_of(mstream_t *const *all, int n, const mstream_t *s)
{
    for (int i = 0; i < n; i++)
        if (all[i] == s)
            return i;
    return -1;
}

/* This process's snapshot into w (under qlock). */
static void build(wg_seg_t *w)
{
    mstream_t *all[WG_S];
    mthread_t *t[WG_T];
    int ns = 0, nk = 0, nt = mock_threads(t, WG_T);

    for (mstream_t *s = &legacy_s; s != NULL && ns < WG_S;
         s = s == &legacy_s ? &per_thread_s : s == &per_thread_s ? all_streams : s->next_all)
        all[ns++] = s;
    w->pid = (int)getpid();
    w->rank = mock_rank();
    w->progress = mock_progress;
    for (int i = 0; own != NULL && w != own && i < WG_P; i++)
        atomic_store(&w->peers[i], atomic_load(&own->peers[i]));
    for (int i = 0; i < ns; i++) {
        mstream_t *s = all[i];
        wg_str_t *o = &w->s[i];
        op_t *h = s->head;
        uint32_t now;
        memset(o, 0, sizeof(*o));
        o->handle = (uint64_t)(uintptr_t)s->handle;
        o->wstream = -1;
        if (h == NULL) {
            o->state = S_IDLE;
        } else if (h->kind == OP_WAIT && h->ws->done < h->wseq && !s->running) {
            o->state = S_WAIT_STREAM;
            o->wstream = index_of(all, ns, h->ws);
            snprintf(o->what, sizeof(o->what), "a wait for an event of stream %p", h->ws->handle);
            if (o->wstream < 0)
                o->state = S_READY;
        } else if (h->kind == OP_WAIT_VALUE && !s->running && !mock_value_holds(h, &now)) {
            static const char *const cmp[] = {">=", "==", "&", "nor"};
            o->state = S_WAIT_VALUE;
            snprintf(o->what, sizeof(o->what), "cuStreamWaitValue32 (the word at %p %s %#x; it holds %#x)", h->dst,
                     cmp[h->cmp & 3], h->value, now);
        } else if (h->kind == OP_EXT && h->reached && !s->running &&
                   (o->nwait = h->xo->waits(h->xarg, o->wait, WG_W)) > 0) {
            o->state = S_WAIT_PEER;
            h->xo->describe(h->xarg, o->what, sizeof(o->what));
        } else {
            o->state = S_READY;
            o->nwait = 0;
        }
        for (op_t *e = h; e != NULL; e = e->next) {
            uint64_t k[64];
            int n;
            if (e->kind != OP_EXT)
                continue;
            n = e->xo->keys(e->xarg, k, 64);
            for (int j = 0; j < n && nk < WG_K; j++)
                w->k[nk++] = (wg_key_t){k[j], i, e->reached};
        }
    }
    for (int i = 0; i < nt; i++) {
        wg_thr_t *o = &w->t[i];
        o->tid = t[i]->tid;
        o->state = t[i]->state;
        o->nccl = t[i]->nccl;
        o->target = t[i]->target != NULL ? index_of(all, ns, t[i]->target) : -1;
        snprintf(o->what, sizeof(o->what), "%s", t[i]->what);
        if ((o->state == TH_WAIT_STREAM || o->state == TH_POLL) && o->target < 0)
            o->state = TH_RUNNING;
    }
    w->nt = nt;
    w->ns = ns;
    w->nk = nk;
}

void mock_wfg_serve(void)
{
    uint64_t r;
    if (own == NULL) {
        if (!own_tried)
            own_open();
        if (own == NULL)
            return;
    }
    r = atomic_load(&own->req);
    if (r == atomic_load(&own->gen))
        return;
    atomic_fetch_add(&own->seq, 1);
    build(own);
    atomic_fetch_add(&own->seq, 1);
    atomic_store(&own->gen, r);
}

/* ------------------------------------------------------------ gathering */

#define MAX_PROCS 64
typedef struct {
    int       pid;
    int       ok;       /* a snapshot was had */
    wg_seg_t *snap;     /* a private copy */
} proc_t;

static struct { int pid; wg_seg_t *seg; } maps[MAX_PROCS];

static wg_seg_t *map_locked(int pid)
{
    char name[64];
    int fd, i;
    void *p;
    for (i = 0; i < MAX_PROCS && maps[i].pid != 0; i++)
        if (maps[i].pid == pid)
            return maps[i].seg;
    if (i == MAX_PROCS)
        return NULL;
    seg_name(name, sizeof(name), pid);
    if ((fd = shm_open(name, O_RDWR, 0)) < 0)
        return NULL;
    p = mmap(NULL, sizeof(wg_seg_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    if (((wg_seg_t *)p)->magic != MAGIC) {
        munmap(p, sizeof(wg_seg_t));
        return NULL;
    }
    maps[i].pid = pid;
    maps[i].seg = p;
    return p;
}

static wg_seg_t *map_of(int pid)
{
    wg_seg_t *w;
    pthread_mutex_lock(&map_mu);
    w = map_locked(pid);
    pthread_mutex_unlock(&map_mu);
    return w;
}

void mock_wfg_open(void)
{
    pthread_mutex_lock(&qlock);
    if (own == NULL && !own_tried)
        own_open();
    pthread_mutex_unlock(&qlock);
}

static void add_peer(wg_seg_t *w, int pid)
{
    for (int i = 0; i < WG_P; i++) {
        int32_t cur = 0;
        if (atomic_compare_exchange_strong(&w->peers[i], &cur, pid) || cur == pid)
            return;
    }
}

void mock_wfg_peer(int pid)
{
    wg_seg_t *w;
    mock_wfg_open();
    if (own != NULL)
        add_peer(own, pid);
    if ((w = map_of(pid)) != NULL)
        add_peer(w, (int)getpid());
}

/* A peer's snapshot, asked for and copied (0.2 s at most). */
static int fetch(int pid, wg_seg_t *out)
{
    wg_seg_t *w = map_of(pid);
    uint64_t want;
    double t0 = now();
    if (w == NULL)
        return -1;
    want = atomic_fetch_add(&w->req, 1) + 1;
    while (atomic_load(&w->gen) < want) {
        struct timespec ts = {0, 200000};
        if (now() - t0 > 0.2 || kill(pid, 0) != 0)
            return -1;
        nanosleep(&ts, NULL);
    }
    for (int tries = 0; tries < 100; tries++) {
        uint64_t s1 = atomic_load(&w->seq), s2;
        if (s1 & 1)
            continue;
        memcpy(out, w, sizeof(*out));
        s2 = atomic_load(&w->seq);
        if (s1 == s2)
            return 0;
    }
    return -1;
}

/* ---------------------------------------------------------------- graph */

enum { N_T, N_S, N_H };
typedef struct {
    int proc, type, idx;
} node_t;

typedef struct {
    proc_t  p[MAX_PROCS];
    int     np;
    char   *live[MAX_PROCS][3];   /* per process: threads, streams, host (1 cell) */
} graph_t;

static int proc_of(graph_t *g, int pid)
{
    for (int i = 0; i < g->np; i++)
        if (g->p[i].pid == pid)
            return i;
    if (g->np == MAX_PROCS)
        return -1;
    g->p[g->np].pid = pid;
    g->p[g->np].snap = calloc(1, sizeof(wg_seg_t));
    g->p[g->np].ok = g->p[g->np].snap != NULL &&
                     (pid == (int)getpid() ? 0 : fetch(pid, g->p[g->np].snap)) == 0;
    return g->np++;
}

/* Where the peer's side of transfer (key, pid) is: its stream (type N_S),
 * or its host (N_H) when it has not enqueued it; proc -1: unknown. */
static node_t resolve(graph_t *g, const mock_wkey_t *w, int *reached_p)
{
    node_t n = {-1, N_H, 0};
    int q = proc_of(g, w->pid);
    *reached_p = 0;
    if (q < 0 || !g->p[q].ok)
        return n;
    n.proc = q;
    for (int i = 0; i < g->p[q].snap->nk; i++)
        if (g->p[q].snap->k[i].key == w->key) {
            n.type = N_S;
            n.idx = g->p[q].snap->k[i].stream;
            *reached_p = g->p[q].snap->k[i].reached;
            return n;
        }
    return n;
}

static int is_live(graph_t *g, node_t n)
{
    if (n.proc < 0 || !g->p[n.proc].ok)
        return 1;
    return g->live[n.proc][n.type][n.type == N_H ? 0 : n.idx];
}

/* Whether n progresses when any of what it waits for does (a host, a value
 * wait), rather than all. */
static int needs_any(graph_t *g, node_t n)
{
    return n.type == N_H || (n.type == N_S && g->p[n.proc].snap->s[n.idx].state == S_WAIT_VALUE);
}

/* p and the processes it shares memory with, directly or through others,
 * into procs (their places in g; -1: one that g cannot hold). */
static int sharing(graph_t *g, int p, int *procs)
{
    int np = 0;
    procs[np++] = p;
    for (int j = 0; j < np; j++)
        for (int i = 0; g->p[procs[j]].ok && i < WG_P; i++) {
            int pid = atomic_load(&g->p[procs[j]].snap->peers[i]), q, seen = 0;
            if (pid == 0 || mock_pid_gone(pid))
                continue;
            if ((q = proc_of(g, pid)) < 0)
                return -1;
            for (int k = 0; k < np && !seen; k++)
                seen = procs[k] == q;
            if (!seen)
                procs[np++] = q;
        }
    return np;
}

/* What could write the word a stream of process p waits for: p's other
 * streams with work, its threads, and those of the processes it shares
 * memory with (a process without a snapshot: itself, as able to
 * progress); past max, a node that counts as able to. */
static int writers(graph_t *g, int p, int self, node_t *out, int max)
{
    const node_t unknown = {-1, N_H, 0};
    int k = 0, procs[MAX_PROCS], np = sharing(g, p, procs);
    if (np < 0) {
        out[0] = unknown;
        return 1;
    }
    for (int j = 0; j < np; j++) {
        const wg_seg_t *w = g->p[procs[j]].snap;
        if (k + w->ns + w->nt + 1 > max) {   /* more than we look at */
            out[k++] = unknown;
            break;
        }
        if (!g->p[procs[j]].ok) {
            out[k++] = (node_t){procs[j], N_H, 0};
            continue;
        }
        for (int i = 0; i < w->ns; i++)
            if (w->s[i].state != S_IDLE && !(procs[j] == p && i == self))
                out[k++] = (node_t){procs[j], N_S, i};
        for (int i = 0; i < w->nt; i++)
            out[k++] = (node_t){procs[j], N_T, i};
    }
    return k;
}

/* The nodes n waits for, into out (at most max); all of them (T, S) or
 * any of them (H, a value wait: needs_any) must progress for n to. */
static int deps(graph_t *g, node_t n, node_t *out, int max)
{
    const wg_seg_t *w = g->p[n.proc].snap;
    int k = 0;
    if (n.type == N_S && w->s[n.idx].state == S_WAIT_VALUE)
        return writers(g, n.proc, n.idx, out, max);
    if (n.type == N_T) {
        const wg_thr_t *t = &w->t[n.idx];
        if (t->state == TH_WAIT_DEVICE) {
            for (int i = 0; i < w->ns && k < max; i++)
                if (w->s[i].state != S_IDLE)
                    out[k++] = (node_t){n.proc, N_S, i};
        } else if (t->state != TH_RUNNING) {
            out[k++] = (node_t){n.proc, N_S, t->target};
        }
    } else if (n.type == N_S) {
        const wg_str_t *s = &w->s[n.idx];
        if (s->state == S_WAIT_STREAM)
            out[k++] = (node_t){n.proc, N_S, s->wstream};
        for (int i = 0; s->state == S_WAIT_PEER && i < s->nwait && k < max; i++) {
            int reached;
            node_t r = resolve(g, &s->wait[i], &reached);
            if (r.proc >= 0 && !reached)
                out[k++] = r;
        }
    } else {
        int any = 0;
        for (int i = 0; i < w->nt; i++)
            any |= w->t[i].nccl;
        for (int i = 0; i < w->nt && k < max; i++)
            if (w->t[i].nccl || !any)
                out[k++] = (node_t){n.proc, N_T, i};
    }
    return k;
}

/* Every process the waits reach, their snapshots fetched. */
static void gather(graph_t *g)
{
    int procs[MAX_PROCS];
    for (int p = 0; p < g->np; p++) {
        const wg_seg_t *w = g->p[p].snap;
        int value = 0;
        if (!g->p[p].ok)
            continue;
        for (int i = 0; i < w->ns; i++) {
            value |= w->s[i].state == S_WAIT_VALUE;
            for (int j = 0; w->s[i].state == S_WAIT_PEER && j < w->s[i].nwait; j++)
                proc_of(g, w->s[i].wait[j].pid);
        }
        if (value)
            sharing(g, p, procs);
    }
}

/* Which nodes can progress (the least fixpoint: what is running, or waits
 * only for nodes that can); 1 when `me` cannot. */
static int stuck(graph_t *g, node_t me)
{
    int changed = 1;
    node_t d[WG_D];
    gather(g);
    for (int p = 0; p < g->np; p++) {
        const wg_seg_t *w = g->p[p].snap;
        if (!g->p[p].ok)
            continue;
        g->live[p][N_T] = calloc(WG_T, 1);
        g->live[p][N_S] = calloc(WG_S, 1);
        g->live[p][N_H] = calloc(1, 1);
        for (int i = 0; i < w->nt; i++)
            g->live[p][N_T][i] = w->t[i].state == TH_RUNNING;
        for (int i = 0; i < w->ns; i++)
            g->live[p][N_S][i] = w->s[i].state == S_IDLE || w->s[i].state == S_READY;
    }
    while (changed) {
        changed = 0;
        for (int p = 0; p < g->np; p++) {
            const wg_seg_t *w = g->p[p].snap;
            if (!g->p[p].ok)
                continue;
            for (int type = N_T; type <= N_H; type++) {
                int n = type == N_T ? w->nt : type == N_S ? w->ns : 1;
                for (int i = 0; i < n; i++) {
                    node_t x = {p, type, i};
                    int k, all = 1, any = 0;
                    if (is_live(g, x))
                        continue;
                    k = deps(g, x, d, WG_D);
                    for (int j = 0; j < k; j++) {
                        int l = is_live(g, d[j]);
                        all &= l;
                        any |= l;
                    }
                    if (needs_any(g, x) ? any || (type == N_H && k == 0) : all) {
                        g->live[p][type][type == N_H ? 0 : i] = 1;
                        changed = 1;
                    }
                }
            }
        }
    }
    return !is_live(g, me);
}

static void graph_free(graph_t *g)
{
    for (int p = 0; p < g->np; p++) {
        free(g->p[p].snap);
        for (int t = 0; t < 3; t++)
            free(g->live[p][t]);
    }
    memset(g, 0, sizeof(*g));
}

/* ---------------------------------------------------------------- report */

static void say(graph_t *g, node_t n, FILE *o)
{
    const wg_seg_t *w = g->p[n.proc].snap;
    if (n.type == N_T) {
        const wg_thr_t *t = &w->t[n.idx];
        if (t->state == TH_WAIT_DEVICE)
            fprintf(o, "  rank %d thread %d waits in %s (a device-wide synchronisation) for every stream of its "
                    "device\n", w->rank, t->tid, t->what);
        else
            fprintf(o, "  rank %d thread %d waits in %s for stream %#llx\n", w->rank, t->tid, t->what,
                    (unsigned long long)w->s[t->target].handle);
    } else if (n.type == N_S) {
        const wg_str_t *s = &w->s[n.idx];
        if (s->state == S_WAIT_STREAM) {
            fprintf(o, "  rank %d stream %#llx waits at %s\n", w->rank, (unsigned long long)s->handle, s->what);
        } else if (s->state == S_WAIT_VALUE) {
            int procs[MAX_PROCS], np = sharing(g, n.proc, procs);
            fprintf(o, "  rank %d stream %#llx waits at %s, and nothing that could write it can progress (the "
                    "streams and threads of rank %d", w->rank, (unsigned long long)s->handle, s->what, w->rank);
            for (int j = 1; j < np; j++)
                fprintf(o, ", rank %d", g->p[procs[j]].ok ? g->p[procs[j]].snap->rank : -1);
            fprintf(o, "):\n");
        } else {
            fprintf(o, "  rank %d stream %#llx waits at %s for", w->rank, (unsigned long long)s->handle,
                    s->what);
            for (int i = 0; i < s->nwait; i++) {
                int q = proc_of(g, s->wait[i].pid);
                fprintf(o, "%s rank %d", i ? "," : "", q >= 0 && g->p[q].ok ? g->p[q].snap->rank : -1);
            }
            fprintf(o, " to reach the matching operation\n");
        }
    } else {
        fprintf(o, "  rank %d has not enqueued the matching operation, and every thread of it that enqueues "
                "NCCL operations waits:\n", w->rank);
    }
}

/* From me, one wait a line along waits that cannot progress, until one
 * comes back; written at once (the peers in the cycle may report too). */
static void report(graph_t *g, node_t me)
{
    node_t path[256], d[WG_D];
    int n = 0, at = -1;
    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    if (o == NULL)
        o = stderr;
    fprintf(o, "mock_cuda rank %d (pid %d): deadlock: a cycle of waits that nothing can break "
            "(MOCK_CUDA_DEFERRED=%d):\n", mock_rank(), (int)getpid(), mock_deferred());
    path[n++] = me;
    while (n < 256 && at < 0) {
        node_t x = path[n - 1], next = {-1, 0, 0};
        int k = deps(g, x, d, WG_D);
        for (int j = 0; j < k && next.proc < 0; j++)
            if (!is_live(g, d[j]))
                next = d[j];
        if (next.proc < 0)
            break;
        for (int i = 0; i < n && at < 0; i++)
            if (path[i].proc == next.proc && path[i].type == next.type && path[i].idx == next.idx)
                at = i;
        if (at < 0)
            path[n++] = next;
    }
    for (int i = 0; i < n; i++) {
        if (i == at)
            fprintf(o, "  -- the cycle:\n");
        say(g, path[i], o);
    }
    if (at >= 0) {
        fprintf(o, "  -- and back to: ");
        say(g, path[at], o);
    }
    fflush(stderr);
    if (o != stderr && fclose(o) == 0) {
        ssize_t w = write(STDERR_FILENO, buf, len);   /* (one write: its lines stay whole) */
        (void)w;
    }
    free(buf);
}

void mock_wfg_check(mthread_t *me)
{
    graph_t g;
    node_t n = {0, N_T, -1};
    uint64_t seen[MAX_PROCS];
    int seen_pid[MAX_PROCS], np = 0, verdict;

    memset(&g, 0, sizeof(g));
    for (int round = 0; round < 2; round++) {
        proc_of(&g, (int)getpid());
        if (!g.p[0].ok)
            return;
        pthread_mutex_lock(&qlock);
        build(g.p[0].snap);
        pthread_mutex_unlock(&qlock);
        for (int i = 0; i < g.p[0].snap->nt; i++)
            if (g.p[0].snap->t[i].tid == me->tid)
                n.idx = i;
        verdict = n.idx >= 0 && stuck(&g, n);
        if (!verdict) {
            graph_free(&g);
            return;
        }
        if (round == 0) {
            for (int p = 0; p < g.np; p++)
                if (g.p[p].ok) {
                    seen_pid[np] = g.p[p].pid;
                    seen[np++] = g.p[p].snap->progress;
                }
            graph_free(&g);
            usleep(300000);
            continue;
        }
        /* the same cycle 0.3 s later, with no progress anywhere in it */
        for (int p = 0; p < g.np; p++)
            for (int i = 0; i < np; i++)
                if (g.p[p].ok && seen_pid[i] == g.p[p].pid && g.p[p].snap->progress != seen[i]) {
                    graph_free(&g);
                    return;
                }
        report(&g, n);
        own_unlink();
        mock_ipc_unlink();
        _exit(DEADLOCK_EXIT);
    }
    graph_free(&g);
}
