/*
 * The exchange of a comm hook (hipress.h: hipress_hook_*): a client that
 * hands hipress one flat buffer at a time through a hook of its own, as
 * PyTorch DDP's register_comm_hook does (src/python/hipress/torch.py), runs
 * it through the MPI front end and the one driver like an MPI_Allreduce,
 * with what a hook knows and an MPI_Allreduce does not:
 *
 *  - the bucket's index and whether it is the last: agreed with the count
 *    at every call, so a rank whose buckets differ (another layout, a
 *    bucket more or less) fails the call on every rank instead of hanging;
 *  - a bucket is one layout at one address until the client lays it out
 *    again (DDP's rebuild after its first iteration): error feedback keyed
 *    by the bucket's memory is trusted (EF_LAYOUT=trust on the hook's own
 *    communicator), and a bucket found at a new address, with a new count
 *    or with another layout value (the client's word for which tensors it
 *    holds where) drops the residual of its old one, counted;
 *  - the mean: the sum divided by the ranks after the exchange, as DDP does.
 *
 * Calls run on the client's progress thread, one at a time: MPI must have
 * been initialised at MPI_THREAD_SERIALIZED or above.
 */
#include "hp_front_mpi.h"
#include "hp_global.h"
#include "hp_ops.h"
#include <stdlib.h>
#include <string.h>

struct hipress_hook {
    MPI_Comm  comm;   /* the hook's own communicator, over MPI_COMM_WORLD */
    hp_comm_t *c;
    int       rank, size;
    int       failed;     /* a call failed: every later call fails at once */
    size_t    nbuckets;   /* entries of bk */
    struct { uintptr_t addr; size_t count; unsigned long long layout; } *bk;   /* each bucket at its last call */
};

/* hipress' own initialisation where MPI was initialised before the library
 * was loaded (no MPI_Init wrapper ran): collective over MPI_COMM_WORLD. */
static int attach(void)
{
    int init = 0, fin = 0;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    if (!init || fin)
        return HIPRESS_ERR_STATE;
    if (hp_g.initialized)
        return HIPRESS_OK;
    PMPI_Query_thread(&hp_g.thread_level);
    return hp_init_after_mpi() == 0 ? HIPRESS_OK : HIPRESS_ERR_MPI;
}

HP_EXPORT int hipress_hook_open(hipress_hook_t **hook_p)
{
    hipress_hook_t *h;
    int rc, st;

    if (hook_p == NULL)
        return HIPRESS_ERR_INVALID;
    if ((st = attach()) != HIPRESS_OK)
        return st;
    if (hp_g.thread_level < MPI_THREAD_SERIALIZED) {
        if (hp_g.world_rank == 0)
            HP_WARN("a comm hook runs its exchanges on a thread of its own: MPI must be initialised with "
                    "MPI_Init_thread at MPI_THREAD_SERIALIZED or above (this job has level %d)", hp_g.thread_level);
        return HIPRESS_ERR_STATE;
    }
    if ((h = calloc(1, sizeof(*h))) == NULL)
        return HIPRESS_ERR_NOMEM;
    /* a split, not a dup: no attribute copy callback of the user's runs */
    if ((rc = PMPI_Comm_split(MPI_COMM_WORLD, 0, hp_g.world_rank, &h->comm)) != MPI_SUCCESS) {
        free(h);
        return HP_ST_MPI(rc);
    }
    PMPI_Comm_set_errhandler(h->comm, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(h->comm, &h->rank);
    PMPI_Comm_size(h->comm, &h->size);
    if (h->size > 1 && hp_g.enabled) {
        char err[256];
        if ((h->c = hp_mpi_comm(h->comm, 1)) == NULL ||
            hp_comm_set(h->c, "HIPRESS_EF_LAYOUT", "trust", err, sizeof(err)) != HP_OK) {
            PMPI_Comm_free(&h->comm);
            free(h);
            return HIPRESS_ERR_NOMEM;
        }
    }
    *hook_p = h;
    return HIPRESS_OK;
}

HP_EXPORT int hipress_hook_size(const hipress_hook_t *hook, int *rank_p, int *size_p)
{
    if (hook == NULL || rank_p == NULL || size_p == NULL)
        return HIPRESS_ERR_INVALID;
    *rank_p = hook->rank;
    *size_p = hook->size;
    return HIPRESS_OK;
}

/* The bucket's buffer this call; a bucket laid out again (new address,
 * count or layout) lets its old residual go, counted. */
static int note_bucket(hipress_hook_t *h, int bucket, const void *buf, size_t count, unsigned long long layout)
{
    if ((size_t)bucket >= h->nbuckets) {
        size_t n = (size_t)bucket + 8;
        void *p = realloc(h->bk, n * sizeof(*h->bk));
        if (p == NULL)
            return HIPRESS_ERR_NOMEM;
        h->bk = p;
        memset(h->bk + h->nbuckets, 0, (n - h->nbuckets) * sizeof(*h->bk));
        h->nbuckets = n;
    }
    if (h->bk[bucket].count != 0 && h->c != NULL &&
        (h->bk[bucket].addr != (uintptr_t)buf || h->bk[bucket].count != count || h->bk[bucket].layout != layout)) {
        hp_residual_drop(h->c->res, h->bk[bucket].addr, h->bk[bucket].count, HP_RES_DROP_RELAID);
        hp_comm_sync_stats(h->c);
    }
    h->bk[bucket].addr = (uintptr_t)buf;
    h->bk[bucket].count = count;
    h->bk[bucket].layout = layout;
    return HIPRESS_OK;
}

/* A call's key: the bucket's index, and whether it is the last. */
static void bucket_str(long long key, char *buf, size_t len)
{
    snprintf(buf, len, "bucket %lld%s", key / 2, key % 2 ? " (the last)" : "");
}

HP_EXPORT int hipress_hook_allreduce(hipress_hook_t *hook, float *buf, size_t count, int bucket, int last,
                                     unsigned long long layout, int average)
{
    int st = HIPRESS_OK, rc = MPI_SUCCESS, done;
    hp_status_t hs = HP_OK;

    if (hook == NULL || bucket < 0 || (buf == NULL && count > 0) || count > (size_t)INT32_MAX)
        return HIPRESS_ERR_INVALID;
    if (hook->failed)
        return HIPRESS_ERR_PEER;
    if (count == 0)
        return HIPRESS_OK;
    if ((st = note_bucket(hook, bucket, buf, count, layout)) != HIPRESS_OK)
        return st;
    atomic_fetch_add_explicit(&hp_g.stats.calls[HP_FRONT_MPI], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hp_g.stats.hook_calls, 1, memory_order_relaxed);
    {
        hp_mpi_key_t key = {.key = (long long)bucket * 2 + (last != 0), .what = "buckets", .str = bucket_str};
        hp_mpi_call_t k = {.sendbuf = MPI_IN_PLACE, .recvbuf = buf, .count = (long long)count, .comm = hook->comm,
                           .c = hook->c, .size = hook->size, .enabled = hp_g.enabled && hook->c != NULL,
                           .key = &key};
        done = hp_mpi_allreduce_try(&k, &rc, &hs);
    }
    st = HP_ST_CLASS(hs);
    if (!done)
        rc = PMPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, hook->comm);
    if (rc != MPI_SUCCESS) {
        /* every rank failed this call alike; the client's later calls would
         * no longer match across ranks */
        hook->failed = 1;
        return st != HIPRESS_OK ? st : HIPRESS_ERR_MPI;
    }
    if (average)
        hp_ops_get(HP_ISA_AUTO)->div(buf, count, (float)hook->size);
    return HIPRESS_OK;
}

HP_EXPORT int hipress_hook_close(hipress_hook_t *hook)
{
    int fin = 0;
    if (hook == NULL)
        return HIPRESS_OK;
    PMPI_Finalized(&fin);
    if (!fin)
        PMPI_Comm_free(&hook->comm);
    free(hook->bk);
    free(hook);
    return HIPRESS_OK;
}
