/* Error-feedback state: buffers in an open hash table on the address (all the
 * counts of one address share a chain) with a doubly linked LRU list, and a
 * bounded table of the addresses seen with the count each was first seen
 * with. */
#include "hp_residual.h"
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024
#define MAX_ADDRS 4096   /* addresses remembered (least recently seen forgotten) */

typedef struct hp_res_addr {
    uintptr_t           addr;
    size_t              count;     /* first count seen */
    int                 staging;
    struct hp_res_addr *hnext, *prev, *next;
} hp_res_addr_t;

struct hp_residual_store {
    size_t          max_bytes;
    hp_residual_info_t info;
    hp_res_buf_t   *buckets[NBUCKETS];
    hp_res_buf_t   *head, *tail;         /* LRU: head most recent */
    hp_res_addr_t  *abuckets[NBUCKETS];
    hp_res_addr_t  *ahead, *atail;
    size_t          naddrs;
};

static size_t bucket_of(uintptr_t addr)
{
    return (size_t)(hp_hash_bytes(HP_HASH_INIT, &addr, sizeof(addr)) % NBUCKETS);
}

const char *hp_res_drop_name(hp_res_drop_t r)
{
    static const char *names[] = {"evicted", "staging buffer", "opted out", "freed", "bucket laid out again"};
    return r < HP_RES_DROP_NREASONS ? names[r] : "?";
}

double hp_residual_l1(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i] < 0 ? -(double)x[i] : (double)x[i];
    return s;
}

/* ------------------------------------------------------------ lists */

#define LRU_UNLINK(head, tail, e) do { \
        if ((e)->prev) (e)->prev->next = (e)->next; else (head) = (e)->next; \
        if ((e)->next) (e)->next->prev = (e)->prev; else (tail) = (e)->prev; \
        (e)->prev = (e)->next = NULL; } while (0)
#define LRU_PUSH(head, tail, e) do { \
        (e)->prev = NULL; (e)->next = (head); \
        if (head) (head)->prev = (e); \
        (head) = (e); if (!(tail)) (tail) = (e); } while (0)

static size_t buf_bytes(const hp_res_buf_t *b)
{
    size_t n = 0;
    for (int k = 0; k < HP_RES_NSLOTS; k++)
        n += b->len[k] * sizeof(float);
    return n;
}

static void vec_free(const hp_res_buf_t *b, void *p)
{
    if (p != NULL && b->mem != NULL)
        b->mem->release(b->mem, p);
    else
        free(p);
}

/* Unlink and free b, counting it as dropped for `reason`. */
static void buf_drop(hp_residual_store_t *s, hp_res_buf_t *b, hp_res_drop_t reason)
{
    hp_res_buf_t **pp = &s->buckets[bucket_of(b->addr)];
    size_t bytes = buf_bytes(b);

    while (*pp != b)
        pp = &(*pp)->hnext;
    *pp = b->hnext;
    LRU_UNLINK(s->head, s->tail, b);
    s->info.buffers--;
    s->info.bytes -= bytes;
    s->info.drop_buffers[reason]++;
    s->info.drop_bytes[reason] += bytes;
    if (b->vec[HP_RES_R] != NULL) {
        double l1 = b->mem != NULL ? b->mem->l1(b->mem, b->vec[HP_RES_R], b->len[HP_RES_R])
                                   : hp_residual_l1(b->vec[HP_RES_R], b->len[HP_RES_R]);
        if (l1 == l1)   /* NaN: a device vector that could not be read */
            s->info.drop_l1[reason] += l1;
    }
    if (reason == HP_RES_DROP_EVICTED && b->calls <= 1)
        s->info.stranded++;
    for (int k = 0; k < HP_RES_NSLOTS; k++)
        vec_free(b, b->vec[k]);
    free(b);
}

/* ------------------------------------------------------------ store */

hp_residual_store_t *hp_residual_create(size_t max_bytes)
{
    hp_residual_store_t *s = calloc(1, sizeof(*s));
    if (s != NULL)
        s->max_bytes = max_bytes;
    return s;
}

int hp_residual_drop(hp_residual_store_t *s, uintptr_t addr, size_t count, hp_res_drop_t reason)
{
    hp_res_buf_t *b;
    if (s == NULL)
        return 0;
    for (b = s->buckets[bucket_of(addr)]; b != NULL; b = b->hnext)
        if (b->addr == addr && b->count == count) {
            buf_drop(s, b, reason);
            return 1;
        }
    return 0;
}

void hp_residual_drop_all(hp_residual_store_t *s, hp_res_drop_t reason)
{
    if (s == NULL)
        return;
    while (s->head != NULL)
        buf_drop(s, s->head, reason);
}

void hp_residual_destroy(hp_residual_store_t *s, hp_res_drop_t reason)
{
    if (s == NULL)
        return;
    hp_residual_drop_all(s, reason);
    while (s->ahead != NULL) {
        hp_res_addr_t *a = s->ahead;
        LRU_UNLINK(s->ahead, s->atail, a);
        free(a);
    }
    free(s);
}

size_t hp_residual_abandon(hp_residual_store_t *s)
{
    size_t kept = 0;
    if (s == NULL)
        return 0;
    for (hp_res_buf_t *b = s->head; b != NULL; b = b->next)
        if (b->mem != NULL) {
            kept += buf_bytes(b);
            memset(b->vec, 0, sizeof(b->vec));   /* (not released) */
        }
    hp_residual_destroy(s, HP_RES_DROP_FREED);
    return kept;
}

/* Evict least recently used buffers other than `keep` until `need` more
 * bytes fit; 0 when they cannot. */
static int make_room(hp_residual_store_t *s, size_t need, const hp_res_buf_t *keep)
{
    if (need > s->max_bytes)
        return 0;
    while (s->info.bytes + need > s->max_bytes) {
        hp_res_buf_t *victim = s->tail;
        if (victim == keep)
            victim = victim->prev;
        if (victim == NULL)
            return 0;
        buf_drop(s, victim, HP_RES_DROP_EVICTED);
    }
    return 1;
}

void hp_residual_set_max(hp_residual_store_t *s, size_t max_bytes)
{
    if (s == NULL)
        return;
    s->max_bytes = max_bytes;
    while (s->info.bytes > s->max_bytes && s->tail != NULL)
        buf_drop(s, s->tail, HP_RES_DROP_EVICTED);
}

/* The address entry of addr, created with `count` when missing.  Returns 1
 * when the address is (now) a staging buffer; *found_p = 1 when this call
 * made it one. */
static int addr_check(hp_residual_store_t *s, uintptr_t addr, size_t count, int *found_p)
{
    size_t bk = bucket_of(addr);
    hp_res_addr_t *a;

    for (a = s->abuckets[bk]; a != NULL; a = a->hnext)
        if (a->addr == addr)
            break;
    if (a != NULL) {
        LRU_UNLINK(s->ahead, s->atail, a);
        LRU_PUSH(s->ahead, s->atail, a);
        if (!a->staging && a->count != count) {
            a->staging = 1;
            s->info.staging++;
            *found_p = 1;
        }
        return a->staging;
    }
    if (s->naddrs >= MAX_ADDRS) {
        /* forget the least recently seen address */
        hp_res_addr_t *old = s->atail, **pp = &s->abuckets[bucket_of(old->addr)];
        while (*pp != old)
            pp = &(*pp)->hnext;
        *pp = old->hnext;
        LRU_UNLINK(s->ahead, s->atail, old);
        free(old);
        s->naddrs--;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return 0;
    a->addr = addr;
    a->count = count;
    a->hnext = s->abuckets[bk];
    s->abuckets[bk] = a;
    LRU_PUSH(s->ahead, s->atail, a);
    s->naddrs++;
    return 0;
}

int hp_residual_is_staging(const hp_residual_store_t *s, uintptr_t addr, size_t count)
{
    const hp_res_addr_t *a;
    if (s == NULL)
        return 0;
    for (a = s->abuckets[bucket_of(addr)]; a != NULL; a = a->hnext)
        if (a->addr == addr)
            return a->staging || a->count != count;
    return 0;
}

hp_res_buf_t *hp_residual_buffer(hp_residual_store_t *s, uintptr_t addr, size_t count,
                                 int create, hp_layout_t layout, int *staging_p)
{
    size_t bk = bucket_of(addr);
    hp_res_buf_t *b;
    int found = 0;

    if (staging_p != NULL)
        *staging_p = 0;
    if (s == NULL || layout == HP_LAYOUT_NONE)
        return NULL;
    if (layout == HP_LAYOUT_DETECT && addr_check(s, addr, count, &found)) {
        if (found) {
            /* every residual at this address may hold another layout's
             * elements: drop them all */
            hp_res_buf_t *next;
            for (b = s->buckets[bk]; b != NULL; b = next) {
                next = b->hnext;
                if (b->addr == addr)
                    buf_drop(s, b, HP_RES_DROP_LAYOUT);
            }
            if (staging_p != NULL)
                *staging_p = 1;
        }
        return NULL;
    }
    for (b = s->buckets[bk]; b != NULL; b = b->hnext) {
        if (b->addr == addr && b->count == count) {
            LRU_UNLINK(s->head, s->tail, b);
            LRU_PUSH(s->head, s->tail, b);
            return b;
        }
    }
    if (!create)
        return NULL;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->addr = addr;
    b->count = count;
    b->hnext = s->buckets[bk];
    s->buckets[bk] = b;
    LRU_PUSH(s->head, s->tail, b);
    s->info.buffers++;
    s->info.created++;
    return b;
}

float *hp_residual_vec(hp_residual_store_t *s, hp_res_buf_t *b, int slot, size_t n)
{
    size_t need = n * sizeof(float), old = b->len[slot] * sizeof(float);
    float *v;

    if (b->vec[slot] != NULL && b->len[slot] == n)
        return b->vec[slot];
    /* a new length (a compressor's state sized by its settings): restart it */
    vec_free(b, b->vec[slot]);
    b->vec[slot] = NULL;
    b->len[slot] = 0;
    s->info.bytes -= old;
    if (n == 0)
        return NULL;
    if (!make_room(s, need, b)) {
        s->info.oversize++;
        return NULL;
    }
    if (b->mem != NULL) {
        v = b->mem->alloc(b->mem, need);   /* zero-filled */
        if (v == NULL)
            return NULL;
    } else {
        v = hp_aligned_alloc(need);
        if (v == NULL)
            return NULL;
        memset(v, 0, need);
    }
    b->vec[slot] = v;
    b->len[slot] = n;
    s->info.bytes += need;
    return v;
}

int hp_residual_bind(hp_res_buf_t *b, const hp_res_mem_t *mem)
{
    if (b->mem == mem)
        return 1;
    for (int k = 0; k < HP_RES_NSLOTS; k++)
        if (b->vec[k] != NULL)
            return 0;
    b->mem = mem;
    return 1;
}

void hp_residual_info(const hp_residual_store_t *s, hp_residual_info_t *info_p)
{
    if (s == NULL)
        memset(info_p, 0, sizeof(*info_p));
    else
        *info_p = s->info;
}
