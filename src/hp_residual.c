/* Residual store: open hash table + doubly linked LRU list. */
#include "hp_residual.h"
#include <stdlib.h>
#include <string.h>

typedef struct hp_res_entry {
    hp_residual_key_t    key;
    size_t               n;
    float               *data;
    struct hp_res_entry *hnext;        /* hash chain */
    struct hp_res_entry *prev, *next;  /* LRU: head most recent */
} hp_res_entry_t;

struct hp_residual_store {
    size_t           max_bytes, bytes, keys, created, evicted;
    size_t           nbuckets;
    hp_res_entry_t **buckets;
    hp_res_entry_t  *head, *tail;
};

static size_t key_hash(const hp_residual_key_t *k, size_t nb)
{
    uint64_t h = hp_hash_bytes(HP_HASH_INIT, &k->addr, sizeof(k->addr));
    h = hp_hash_bytes(h, &k->count, sizeof(k->count));
    h = hp_hash_bytes(h, &k->offset, sizeof(k->offset));
    h = hp_hash_bytes(h, &k->slot, sizeof(k->slot));
    return (size_t)(h % nb);
}

static int key_eq(const hp_residual_key_t *a, const hp_residual_key_t *b)
{
    return a->addr == b->addr && a->count == b->count && a->offset == b->offset && a->slot == b->slot;
}

hp_residual_store_t *hp_residual_create(size_t max_bytes)
{
    hp_residual_store_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->max_bytes = max_bytes;
    s->nbuckets = 1024;
    s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
    if (s->buckets == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

static void lru_unlink(hp_residual_store_t *s, hp_res_entry_t *e)
{
    if (e->prev) e->prev->next = e->next; else s->head = e->next;
    if (e->next) e->next->prev = e->prev; else s->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(hp_residual_store_t *s, hp_res_entry_t *e)
{
    e->prev = NULL;
    e->next = s->head;
    if (s->head) s->head->prev = e;
    s->head = e;
    if (!s->tail) s->tail = e;
}

static void entry_remove(hp_residual_store_t *s, hp_res_entry_t *e)
{
    hp_res_entry_t **pp = &s->buckets[key_hash(&e->key, s->nbuckets)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(s, e);
    s->bytes -= e->n * sizeof(float);
    s->keys--;
    free(e->data);
    free(e);
}

void hp_residual_destroy(hp_residual_store_t *s)
{
    if (s == NULL)
        return;
    while (s->head)
        entry_remove(s, s->head);
    free(s->buckets);
    free(s);
}

float *hp_residual_get(hp_residual_store_t *s, const hp_residual_key_t *key, size_t n,
                       int *is_new_p)
{
    size_t b = key_hash(key, s->nbuckets), need = n * sizeof(float);
    hp_res_entry_t *e;

    for (e = s->buckets[b]; e != NULL; e = e->hnext) {
        if (key_eq(&e->key, key) && e->n == n) {
            lru_unlink(s, e);
            lru_push_front(s, e);
            if (is_new_p) *is_new_p = 0;
            return e->data;
        }
    }
    if (need > s->max_bytes)
        return NULL;
    while (s->bytes + need > s->max_bytes && s->tail != NULL) {
        entry_remove(s, s->tail);
        s->evicted++;
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->data = hp_aligned_alloc(need);
    if (e->data == NULL) {
        free(e);
        return NULL;
    }
    memset(e->data, 0, need);
    e->key = *key;
    e->n = n;
    e->hnext = s->buckets[b];
    s->buckets[b] = e;
    lru_push_front(s, e);
    s->bytes += need;
    s->keys++;
    s->created++;
    if (is_new_p) *is_new_p = 1;
    return e->data;
}

void hp_residual_info(const hp_residual_store_t *s, hp_residual_info_t *info_p)
{
    info_p->keys = s ? s->keys : 0;
    info_p->bytes = s ? s->bytes : 0;
    info_p->created = s ? s->created : 0;
    info_p->evicted = s ? s->evicted : 0;
}
