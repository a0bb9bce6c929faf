/*
 * Unit tests of the sparse compressors (graddrop, dgc) and their operators.
 *
 * The selection is exact: an encoder sends exactly min(k, number of non-zero
 * v) elements, those of largest |v| with ties going to the lower index, so
 * the tests compare every payload with a reference top-k computed here by
 * sorting (a stronger check than "about k": the sample only makes encoding
 * fast, it never changes which elements are sent).  Values are compared bit
 * for bit with v = g + r (graddrop) or v = r + (m*u + g) (dgc), computed here
 * with the same float operations.
 *
 * This file holds the shared helpers and builds the suite; the tests are in
 * check_comp_sparse_select.c and check_comp_sparse_paths.c
 * (check_comp_sparse.h).
 */
#include "check_comp_sparse.h"

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x243F6A8885A308D3ULL;

void rng_seed(uint64_t s)
{
    rng_state = s * 0x9E3779B97F4A7C15ULL + 1;
}

double rng_unit(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

/* Roughly normal values of scale `sigma` (sum of four uniforms). */
void fill_normal(float *x, size_t n, float sigma)
{
    for (size_t i = 0; i < n; i++)
        x[i] = sigma * (float)(rng_unit() + rng_unit() + rng_unit() + rng_unit() - 2.0);
}

float *fvec(size_t n)
{
    float *x = (float *)calloc(n ? n : 1, sizeof(float));
    ck_assert_ptr_nonnull(x);
    return x;
}

float *fdup(const float *x, size_t n)
{
    float *y = fvec(n);
    memcpy(y, x, n * sizeof(float));
    return y;
}

hipress_comp_params_t params(int isa)
{
    hipress_comp_params_t p;
    hipress_comp_params_default(&p);
    p.isa = isa;
    return p;
}

int kind_of(const char *name)
{
    int k = hp_comp_find(name);
    ck_assert_msg(k >= 0, "compressor %s is not registered", name);
    return k;
}

uint32_t absbits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b & 0x7fffffffu;
}

uint32_t fbits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* v as the compressor sees it (same float operations). */
void v_of(const float *g, const float *r, const float *u, float m, size_t n, float *v)
{
    for (size_t i = 0; i < n; i++) {
        float x = u ? m * u[i] + g[i] : g[i];
        v[i] = r ? r[i] + x : x;
    }
}

static const float *sort_key;
static int cmp_topk(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint32_t x = absbits(sort_key[i]), y = absbits(sort_key[j]);
    if (x != y)
        return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Reference: the min(k, nnz) indices of largest |v| (ties: lower index), in
 * increasing order.  Returns the count; *ref_p is malloc'ed. */
static size_t ref_topk(const float *v, size_t n, size_t k, uint32_t **ref_p)
{
    uint32_t *all = (uint32_t *)malloc((n ? n : 1) * sizeof(uint32_t));
    size_t nnz = 0, m;
    ck_assert_ptr_nonnull(all);
    for (size_t i = 0; i < n; i++)
        if (absbits(v[i]) != 0)
            all[nnz++] = (uint32_t)i;
    sort_key = v;
    qsort(all, nnz, sizeof(uint32_t), cmp_topk);
    m = nnz < k ? nnz : k;
    qsort(all, m, sizeof(uint32_t), cmp_u32);
    *ref_p = all;
    return m;
}

/* Checks that payload p (len bytes) is exactly the reference top-k of v:
 * with k != 0 over the whole range, with k == 0 per block of
 * hp_sparse_grain(pp) elements, each keeping hp_sparse_k(block, 0, pp). */
void expect_topk_payload(const unsigned char *p, size_t len, const float *v, size_t n,
                         size_t k, const char *what, const hipress_comp_params_t *pp)
{
    const size_t g = k != 0 ? (n ? n : 1) : hp_sparse_grain(pp);
    size_t j = 0;
    for (size_t off = 0; off < n; off += g) {
        size_t bn = n - off < g ? n - off : g, bk = k != 0 ? k : hp_sparse_k(bn, 0, pp);
        uint32_t *ref;
        size_t m = ref_topk(v + off, bn, bk, &ref);
        ck_assert_msg(len >= 8 * (j + m), "%s: n=%zu k=%zu: payload %zu bytes, short of %zu pairs", what,
                      n, k, len, j + m);
        for (size_t q = 0; q < m; q++, j++) {
            uint32_t i, vb;
            memcpy(&i, p + 8 * j, 4);
            memcpy(&vb, p + 8 * j + 4, 4);
            ck_assert_msg(i == ref[q] + off, "%s: n=%zu k=%zu: pair %zu has index %u, want %zu", what, n,
                          k, j, i, ref[q] + off);
            ck_assert_msg(vb == fbits(v[i]), "%s: value of index %u is not v bit for bit", what, i);
        }
        free(ref);
    }
    ck_assert_msg(len == 8 * j, "%s: n=%zu k=%zu: payload %zu bytes, want %zu pairs", what, n, k, len, j);
}

/* hp_msg_encode of compressor `kind` with optional residual / state. */
enc_t encode_msg(int kind, const float *g, float *r, float *u, size_t n, size_t k,
                 const hipress_comp_params_t *p, uint64_t seed)
{
    hipress_encode_args_t a;
    enc_t e;
    memset(&a, 0, sizeof(a));
    a.in = g;
    a.residual = r;
    a.state = u;
    a.n = n;
    a.k = k;
    a.params = p;
    a.rng_key[0] = seed;
    a.rng_key[1] = 3;
    a.rng_key[2] = 7;
    a.rng_key[3] = 1;
    a.rng_offset = 12345;
    e.cap = hp_msg_max_bytes(kind, n, p);
    e.msg = (unsigned char *)malloc(e.cap);
    ck_assert_ptr_nonnull(e.msg);
    e.len = 0;
    e.nonfinite = -1;
    e.st = hp_msg_encode(kind, &a, e.msg, e.cap, &e.len, &e.nonfinite);
    return e;
}

const char *const sparse_names[] = {"graddrop", "dgc"};

static Suite *sparse_suite(void)
{
    Suite *s = suite_create("comp_sparse");
    TCase *tc = tcase_create("sparse");
    tcase_set_timeout(tc, 300);
    sparse_select_tests(tc);
    sparse_paths_tests(tc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sparse_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
