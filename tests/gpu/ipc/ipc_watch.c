/*
 * The IPC stand-in's checks (ipc_proto.h): the descriptors every operation
 * posts per pair of ranks, compared by the second side to post, and the
 * monitor thread that reports a descriptor unmatched for HP_IPC_TIMEOUT
 * seconds and a peer gone, aborted or failed, so that a broken job says
 * why through ncclCommGetAsyncError instead of hanging silently.
 */
#define _GNU_SOURCE
#include "ipc_comm.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm *list;
static int monitor_on;

static const char *op_name(int op, uint32_t div)
{
    static const char *n[] = {"sum", "prod", "max", "min"};
    if (div > 1)
        return "avg";
    return op >= 0 && op < 4 ? n[op] : "premulsum";
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
    c->post_t[side][p][k % HPI_RING] = hpi_now();
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
    double t = hpi_now(), limit = hpi_timeout();
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
        hpi_nap(0.1);
        pthread_mutex_lock(&list_mu);
        for (hpi_comm_t *c = list; c != NULL; c = c->next)
            check_comm(c);
        pthread_mutex_unlock(&list_mu);
    }
    return NULL;
}

void hpi_watch_add(hpi_comm_t *c)
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

void hpi_watch_remove(hpi_comm_t *c)
{
    pthread_mutex_lock(&list_mu);
    for (hpi_comm_t **pp = &list; *pp != NULL; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    pthread_mutex_unlock(&list_mu);
}
