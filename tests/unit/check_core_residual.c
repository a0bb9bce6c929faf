/*
 * check_core (check_core.c): the residual store -- LRU eviction within its
 * byte bound, the layout rules for staging buffers, and a random sequence
 * against a plain model.
 */
#include "check_core.h"

/* ================================================================ residual */

/* The residual vector of buffer (addr, count), n floats; `want_new` says
 * whether it must be a fresh (zeroed) one. */
static float *rget(hp_residual_store_t *s, uintptr_t addr, size_t count, size_t n, int want_new)
{
    hp_res_buf_t *b = hp_residual_buffer(s, addr, count, 1, HP_LAYOUT_TRUST, NULL);
    int was_new;
    float *p;
    REQUIRE(b != NULL, "no buffer for %#lx", (unsigned long)addr);
    was_new = b->vec[HP_RES_R] == NULL;
    p = hp_residual_vec(s, b, HP_RES_R, n);
    REQUIRE(p != NULL, "residual for %#lx not given", (unsigned long)addr);
    REQUIRE(was_new == want_new, "%#lx: new %d, want %d", (unsigned long)addr, was_new, want_new);
    if (want_new)
        for (size_t i = 0; i < n; i++)
            REQUIRE(p[i] == 0.0f, "new residual not zero at %zu", i);
    return p;
}

static void expect_info(hp_residual_store_t *s, size_t buffers, size_t bytes, size_t created,
                        size_t evicted)
{
    hp_residual_info_t in;
    hp_residual_info(s, &in);
    REQUIRE(in.buffers == buffers && in.bytes == bytes && in.created == created &&
                in.drop_buffers[HP_RES_DROP_EVICTED] == evicted,
            "info buffers %zu bytes %zu created %zu evicted %zu, want %zu %zu %zu %zu", in.buffers,
            in.bytes, in.created, in.drop_buffers[HP_RES_DROP_EVICTED], buffers, bytes, created, evicted);
}

START_TEST(residual_lru)
{
    const size_t n = 100;
    hp_residual_store_t *s = hp_residual_create(3 * n * sizeof(float));
    const uintptr_t A = 0x1000, B = 0x2000, C = 0x3000, D = 0x4000;
    hp_residual_info_t in;
    float *a, *b, *c;

    ck_assert_ptr_nonnull(s);
    expect_info(s, 0, 0, 0, 0);
    a = rget(s, A, n, n, 1);
    b = rget(s, B, n, n, 1);
    c = rget(s, C, n, n, 1);
    a[0] = 1; b[0] = -2; b[1] = 0.5f; c[0] = 3;
    a[n - 1] = 11;
    expect_info(s, 3, 3 * n * 4, 3, 0);
    /* a hit returns the same vector, contents kept, and makes A most recent */
    ck_assert_ptr_eq(rget(s, A, n, n, 0), a);
    ck_assert(a[0] == 1 && a[n - 1] == 11);
    /* D needs room: the least recently used (B) goes, not A, and the
     * gradient it owed is counted */
    rget(s, D, n, n, 1);
    expect_info(s, 3, 3 * n * 4, 4, 1);
    hp_residual_info(s, &in);
    ck_assert(in.drop_l1[HP_RES_DROP_EVICTED] == 2.5);
    ck_assert_uint_eq(in.drop_bytes[HP_RES_DROP_EVICTED], n * 4);
    ck_assert_uint_eq(in.stranded, 1);   /* B was used in no counted call */
    ck_assert(rget(s, A, n, n, 0)[0] == 1);
    ck_assert(rget(s, C, n, n, 0)[0] == 3);
    /* B comes back new (zeroed) and evicts D, now the oldest */
    rget(s, B, n, n, 1);
    expect_info(s, 3, 3 * n * 4, 5, 2);
    /* larger than the whole bound: refused, nothing evicted, counted */
    {
        hp_res_buf_t *e = hp_residual_buffer(s, 0x9000, 3 * n + 1, 1, HP_LAYOUT_TRUST, NULL);
        ck_assert_ptr_nonnull(e);
        ck_assert_ptr_null(hp_residual_vec(s, e, HP_RES_R, 3 * n + 1));
        hp_residual_info(s, &in);
        ck_assert_uint_eq(in.oversize, 1);
        ck_assert_uint_eq(in.drop_buffers[HP_RES_DROP_EVICTED], 2);
    }
    /* two vectors of one buffer count together; a new length restarts one */
    {
        hp_res_buf_t *e = hp_residual_buffer(s, A, n, 0, HP_LAYOUT_TRUST, NULL);
        float *u;
        ck_assert_ptr_nonnull(e);
        u = hp_residual_vec(s, e, HP_RES_U, n);   /* evicts the oldest other buffer */
        ck_assert_ptr_nonnull(u);
        ck_assert_ptr_eq(hp_residual_vec(s, e, HP_RES_R, n), a);
        u[3] = 5;
        u = hp_residual_vec(s, e, HP_RES_U, n / 2);
        ck_assert(u != NULL && u[3] == 0);
    }
    /* a smaller bound evicts down to it; dropping all counts the reason */
    hp_residual_set_max(s, n * sizeof(float));
    hp_residual_info(s, &in);
    ck_assert(in.bytes <= n * sizeof(float));
    hp_residual_drop_all(s, HP_RES_DROP_OPTOUT);
    hp_residual_info(s, &in);
    ck_assert_uint_eq(in.buffers, 0);
    ck_assert_uint_eq(in.bytes, 0);
    hp_residual_destroy(s, HP_RES_DROP_FREED);

    /* a bound of zero stores nothing; a NULL store reports zeros */
    s = hp_residual_create(0);
    {
        hp_res_buf_t *e = hp_residual_buffer(s, A, 1, 1, HP_LAYOUT_TRUST, NULL);
        ck_assert_ptr_null(hp_residual_vec(s, e, HP_RES_R, 1));
    }
    hp_residual_destroy(s, HP_RES_DROP_FREED);
    hp_residual_info_t z;
    memset(&z, 0xff, sizeof(z));
    hp_residual_info(NULL, &z);
    ck_assert(z.buffers == 0 && z.bytes == 0 && z.created == 0);
    hp_residual_destroy(NULL, HP_RES_DROP_FREED);
}
END_TEST

/* Layout rules: an address seen with two counts is a staging buffer. */
START_TEST(residual_layout)
{
    hp_residual_store_t *s = hp_residual_create(1 << 20);
    hp_residual_info_t in;
    hp_res_buf_t *b;
    int staging = -1;
    float *r;

    /* detect: one count per address keeps its state */
    b = hp_residual_buffer(s, 0x10, 8, 1, HP_LAYOUT_DETECT, &staging);
    ck_assert(b != NULL && staging == 0);
    r = hp_residual_vec(s, b, HP_RES_R, 8);
    r[0] = -4;
    r[7] = 1;
    ck_assert_ptr_eq(hp_residual_buffer(s, 0x10, 8, 1, HP_LAYOUT_DETECT, &staging), b);
    /* another address is another buffer */
    ck_assert_ptr_nonnull(hp_residual_buffer(s, 0x20, 8, 1, HP_LAYOUT_DETECT, &staging));
    /* the same address with another count: a staging buffer, found once;
     * what was held there is dropped and counted */
    ck_assert_ptr_null(hp_residual_buffer(s, 0x10, 9, 1, HP_LAYOUT_DETECT, &staging));
    ck_assert_int_eq(staging, 1);
    hp_residual_info(s, &in);
    ck_assert_uint_eq(in.staging, 1);
    ck_assert_uint_eq(in.drop_buffers[HP_RES_DROP_LAYOUT], 1);
    ck_assert(in.drop_l1[HP_RES_DROP_LAYOUT] == 5.0);
    /* never again a residual at that address, whatever the count */
    ck_assert_ptr_null(hp_residual_buffer(s, 0x10, 8, 1, HP_LAYOUT_DETECT, &staging));
    ck_assert_int_eq(staging, 0);
    ck_assert_ptr_null(hp_residual_buffer(s, 0x10, 9, 1, HP_LAYOUT_DETECT, &staging));
    hp_residual_info(s, &in);
    ck_assert_uint_eq(in.staging, 1);
    ck_assert_uint_eq(in.buffers, 1);
    /* trust: the client vouches for each (address, count) */
    ck_assert_ptr_nonnull(hp_residual_buffer(s, 0x30, 8, 1, HP_LAYOUT_TRUST, NULL));
    ck_assert_ptr_nonnull(hp_residual_buffer(s, 0x30, 9, 1, HP_LAYOUT_TRUST, NULL));
    /* none: no state at all */
    ck_assert_ptr_null(hp_residual_buffer(s, 0x40, 8, 1, HP_LAYOUT_NONE, NULL));
    hp_residual_destroy(s, HP_RES_DROP_FREED);
}
END_TEST

/* A random sequence of gets against a plain reference model of an LRU
 * cache bounded in bytes: same hits, same evictions, same counters, and
 * the stored contents survive. */
#define REF_MAX 64
typedef struct { int key; size_t n; } ref_entry_t;

START_TEST(residual_random_vs_model)
{
    const size_t max_bytes = 4000;
    hp_residual_store_t *s = hp_residual_create(max_bytes);
    ref_entry_t ref[REF_MAX];          /* ref[0] most recent */
    size_t nref = 0, bytes = 0, created = 0, evicted = 0;
    uint64_t rng = 88172645463325252ULL;

    for (int it = 0; it < 20000; it++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        int key = (int)(rng % 40);
        size_t n = 10 + (size_t)key * 7;   /* each key always has the same length */
        /* keys that share a hash chain (same address bits modulo the
         * table) and distinct addresses, each with one count */
        uintptr_t addr = 0x100000 + (uintptr_t)key * 0x1000;
        hp_res_buf_t *b = hp_residual_buffer(s, addr, n, 1, HP_LAYOUT_DETECT, NULL);
        int is_new;
        float *p;
        size_t pos = nref;

        REQUIRE(b != NULL, "it %d key %d: no buffer", it, key);
        is_new = b->vec[HP_RES_R] == NULL;
        p = hp_residual_vec(s, b, HP_RES_R, n);
        for (size_t i = 0; i < nref; i++)
            if (ref[i].key == key)
                pos = i;
        if (pos < nref) {
            REQUIRE(p != NULL && is_new == 0, "it %d key %d: expected a hit", it, key);
            REQUIRE(p[0] == (float)key && p[n - 1] == (float)-key, "it %d key %d: contents lost", it, key);
            ref_entry_t e = ref[pos];
            memmove(ref + 1, ref, pos * sizeof(ref[0]));
            ref[0] = e;
        } else {
            while (bytes + 4 * n > max_bytes && nref > 0) {
                bytes -= 4 * ref[--nref].n;
                evicted++;
            }
            REQUIRE(p != NULL && is_new == 1, "it %d key %d: expected a new vector", it, key);
            memmove(ref + 1, ref, nref * sizeof(ref[0]));
            ref[0].key = key;
            ref[0].n = n;
            nref++;
            bytes += 4 * n;
            created++;
            p[0] = (float)key;
            p[n - 1] = (float)-key;
        }
        expect_info(s, nref, bytes, created, evicted);
        ck_assert(bytes <= max_bytes);
    }
    REQUIRE(evicted > 1000, "the sequence should evict often (evicted %zu)", evicted);
    hp_residual_destroy(s, HP_RES_DROP_FREED);
}
END_TEST

/* The last tests of the "residual" case. */
void core_residual_tests(TCase *tc)
{
    tcase_add_test(tc, residual_lru);
    tcase_add_test(tc, residual_layout);
    tcase_add_test(tc, residual_random_vs_model);
}
