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
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hp_comp.h"
#include "hp_elem.h"
#include "hp_ops.h"
#include "hp_ops_sparse.h"

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x243F6A8885A308D3ULL;

static void rng_seed(uint64_t s)
{
    rng_state = s * 0x9E3779B97F4A7C15ULL + 1;
}

static double rng_unit(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

/* Roughly normal values of scale `sigma` (sum of four uniforms). */
static void fill_normal(float *x, size_t n, float sigma)
{
    for (size_t i = 0; i < n; i++)
        x[i] = sigma * (float)(rng_unit() + rng_unit() + rng_unit() + rng_unit() - 2.0);
}

static float *fvec(size_t n)
{
    float *x = (float *)calloc(n ? n : 1, sizeof(float));
    ck_assert_ptr_nonnull(x);
    return x;
}

static float *fdup(const float *x, size_t n)
{
    float *y = fvec(n);
    memcpy(y, x, n * sizeof(float));
    return y;
}

static hipress_comp_params_t params(int isa)
{
    hipress_comp_params_t p;
    hipress_comp_params_default(&p);
    p.isa = isa;
    return p;
}

static int kind_of(const char *name)
{
    int k = hp_comp_find(name);
    ck_assert_msg(k >= 0, "compressor %s is not registered", name);
    return k;
}

static uint32_t absbits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b & 0x7fffffffu;
}

static uint32_t fbits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* v as the compressor sees it (same float operations). */
static void v_of(const float *g, const float *r, const float *u, float m, size_t n, float *v)
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
static void expect_topk_payload(const unsigned char *p, size_t len, const float *v, size_t n,
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

typedef struct {
    unsigned char *msg;
    size_t len, cap;
    int nonfinite;
    hp_status_t st;
} enc_t;

/* hp_msg_encode of compressor `kind` with optional residual / state. */
static enc_t encode_msg(int kind, const float *g, float *r, float *u, size_t n, size_t k,
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

/* --------------------------------------------------------------- tests */

static const size_t sizes[] = {1, 31, 32, 33, 4095, 4097, 1000007};
static const char *const sparse_names[] = {"graddrop", "dgc"};

/* Wire size within hp_msg_max_bytes and the payload within max_payload
 * (8k), exact top-k of v, decodable, for the sizes around the vector width
 * and the exact/sampled switch. */
START_TEST(wire_size_and_topk)
{
    const char *name = sparse_names[_i];
    int kind = kind_of(name);
    hp_comp_t *c = hp_comp_get(kind);
    hipress_comp_params_t p = params(0);

    for (size_t si = 0; si < HP_ARRAY_SIZE(sizes); si++) {
        size_t n = sizes[si], k = hp_sparse_k_blocks(n, &p);
        float *g = fvec(n), *r = fvec(n), *u = fvec(n), *v = fvec(n), *out = fvec(n);
        int dgc = strcmp(name, "dgc") == 0;
        enc_t e;

        rng_seed(n);
        fill_normal(g, n, 1.0f);
        fill_normal(r, n, 0.1f);
        fill_normal(u, n, 0.5f);
        v_of(g, r, dgc ? u : NULL, p.dgc_momentum, n, v);
        e = encode_msg(kind, g, r, dgc ? u : NULL, n, 0, &p, 42);
        ck_assert_int_eq(e.st, HP_OK);
        ck_assert_int_eq(e.nonfinite, 0);
        ck_assert_msg(e.len <= hp_msg_max_bytes(kind, n, &p), "%s n=%zu: %zu bytes > bound",
                      name, n, e.len);
        ck_assert_msg(e.len - HP_MSG_HEADER <= c->max_payload(n, &p), "%s n=%zu: payload > max_payload", name, n);
        ck_assert_msg(c->max_payload(n, &p) == 8 * k, "%s: max_payload(%zu) != 8k", name, n);
        ck_assert_uint_eq(e.msg[1], (unsigned)kind);
        /* random data has no zeros: exactly k elements are sent */
        ck_assert_uint_eq(e.len - HP_MSG_HEADER, 8 * k);
        expect_topk_payload(e.msg + HP_MSG_HEADER, e.len - HP_MSG_HEADER, v, n, 0, name, &p);
        ck_assert_int_eq(hp_msg_decode(kind, e.msg, e.len, n, out, 0, &p), HP_OK);
        {
            size_t nz = 0;
            for (size_t i = 0; i < n; i++)
                nz += out[i] != 0.0f;
            ck_assert_uint_eq(nz, k);
        }
        free(e.msg);
        free(g), free(r), free(u), free(v), free(out);
    }
}
END_TEST

/* A larger k (the framework's k2 for a re-encoded aggregate), k >= n, and a
 * payload buffer below 8k. */
START_TEST(explicit_k)
{
    const char *name = sparse_names[_i];
    hp_comp_t *c = hp_comp_get(kind_of(name));
    hipress_comp_params_t p = params(0);
    const size_t n = 200003;
    const size_t ks[] = {1, 7, 1000, 20000, 60000, n, n + 5};
    float *g = fvec(n), *v = fvec(n);
    unsigned char *out = (unsigned char *)malloc(8 * (n + 5));
    hipress_encode_args_t a;

    rng_seed(99);
    fill_normal(g, n, 2.0f);
    memcpy(v, g, n * sizeof(float)); /* no residual, no state: v = g */
    for (size_t t = 0; t < HP_ARRAY_SIZE(ks); t++) {
        size_t len = 1, kk = ks[t] < n ? ks[t] : n;
        int nf = -1;
        memset(&a, 0, sizeof(a));
        a.in = g;
        a.n = n;
        a.k = ks[t];
        a.params = &p;
        a.out = out;
        a.out_cap = 8 * kk;
        ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
        ck_assert_int_eq(nf, 0);
        expect_topk_payload(out, len, v, n, kk, name, &p);
        a.out_cap = 8 * kk - 1;
        ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_ENOSPC);
    }
    free(g), free(v), free(out);
}
END_TEST

/* Heavy ties (values from a small set, zeros among them): exactly the
 * reference selection, zeros never sent, fewer than k when v has fewer
 * non-zeros. */
START_TEST(ties_and_zeros)
{
    const char *name = sparse_names[_i];
    hp_comp_t *c = hp_comp_get(kind_of(name));
    const size_t ns[] = {100, 5000, 300000};
    const size_t ks[] = {1, 3, 50, 700, 4000};

    for (size_t ni = 0; ni < HP_ARRAY_SIZE(ns); ni++) {
        size_t n = ns[ni];
        float *g = fvec(n);
        unsigned char *out = (unsigned char *)malloc(8 * n);
        rng_seed(n + 1);
        for (size_t i = 0; i < n; i++) {
            double x = rng_unit();
            /* 60% zeros (+0 and -0), the rest from {+-1, +-2, +-4} */
            g[i] = x < 0.3 ? 0.0f : x < 0.6 ? -0.0f : (float)(1 << (int)(rng_unit() * 3)) * (x < 0.8 ? -1.0f : 1.0f);
        }
        for (size_t ki = 0; ki < HP_ARRAY_SIZE(ks); ki++) {
            for (int isa = 1; isa <= 2; isa++) {
                hipress_comp_params_t p = params(isa);
                hipress_encode_args_t a;
                size_t len = 0, k = ks[ki] < n ? ks[ki] : n;
                int nf = -1;
                memset(&a, 0, sizeof(a));
                a.in = g;
                a.n = n;
                a.k = k;
                a.params = &p;
                a.out = out;
                a.out_cap = 8 * n;
                ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
                expect_topk_payload(out, len, g, n, k, name, &p);
            }
        }
        /* all zeros: an empty payload that decodes to zeros */
        memset(g, 0, n * sizeof(float));
        {
            hipress_comp_params_t p = params(0);
            float *r = fvec(n), *d = fvec(n);
            enc_t e = encode_msg(kind_of(name), g, r, NULL, n, 0, &p, 1);
            ck_assert_int_eq(e.st, HP_OK);
            ck_assert_uint_eq(e.len, HP_MSG_HEADER);
            for (size_t i = 0; i < n; i++)
                d[i] = 5.0f;
            ck_assert_int_eq(hp_msg_decode(kind_of(name), e.msg, e.len, n, d, 0, &p), HP_OK);
            for (size_t i = 0; i < n; i++)
                ck_assert(d[i] == 0.0f);
            free(e.msg), free(r), free(d);
        }
        free(g), free(out);
    }
}
END_TEST

/* graddrop error feedback over T steps: per element, the decoded outputs
 * plus the final residual add up to the inputs (to float rounding), the sent
 * residual entries are zero and the unsent ones hold v. */
START_TEST(graddrop_error_feedback)
{
    const int kind = kind_of("graddrop");
    hipress_comp_params_t p = params(0);
    const size_t n = 50021;
    const int T = 12;
    float *g = fvec(n), *r = fvec(n), *v = fvec(n), *d = fvec(n);
    double *sum_in = (double *)calloc(n, sizeof(double));
    double *sum_out = (double *)calloc(n, sizeof(double));
    double *sum_abs = (double *)calloc(n, sizeof(double));

    p.sparse_ratio = 0.01;
    rng_seed(2024);
    for (int t = 0; t < T; t++) {
        enc_t e;
        fill_normal(g, n, 1.0f);
        v_of(g, r, NULL, 0.0f, n, v);
        e = encode_msg(kind, g, r, NULL, n, 0, &p, (uint64_t)t);
        ck_assert_int_eq(e.st, HP_OK);
        expect_topk_payload(e.msg + HP_MSG_HEADER, e.len - HP_MSG_HEADER, v, n, 0, "graddrop", &p);
        ck_assert_int_eq(hp_msg_decode(kind, e.msg, e.len, n, d, 0, &p), HP_OK);
        for (size_t i = 0; i < n; i++) {
            /* residual = v where unsent, 0 where sent; decoded = v where sent */
            if (d[i] != 0.0f)
                ck_assert(r[i] == 0.0f && fbits(d[i]) == fbits(v[i]));
            else
                ck_assert(fbits(r[i]) == fbits(v[i]));
            sum_in[i] += g[i];
            sum_out[i] += d[i];
            sum_abs[i] += fabs(g[i]) + fabs(v[i]);
        }
        free(e.msg);
    }
    for (size_t i = 0; i < n; i++) {
        double err = fabs(sum_out[i] + r[i] - sum_in[i]);
        ck_assert_msg(err <= 1e-6 * sum_abs[i] + 1e-30, "element %zu: outputs + residual off the inputs by %g",
                      i, err);
    }
    free(g), free(r), free(v), free(d), free(sum_in), free(sum_out), free(sum_abs);
}
END_TEST

/* dgc over T steps: u and v are masked at the sent indices, u holds the
 * momentum-corrected gradient elsewhere, and the sent values plus the final
 * v add up to the sum of the momentum-corrected u over the steps.  With
 * momentum 0 dgc sends the same bytes as graddrop. */
START_TEST(dgc_momentum_feedback)
{
    const int kind = kind_of("dgc"), gd = kind_of("graddrop");
    hipress_comp_params_t p = params(0);
    const size_t n = 40009;
    const int T = 10;
    const float m = 0.9f;   /* the correction for an optimizer without momentum */
    float *g = fvec(n), *u = fvec(n), *r = fvec(n), *uc = fvec(n), *v = fvec(n), *d = fvec(n);
    double *sum_u = (double *)calloc(n, sizeof(double));
    double *sum_out = (double *)calloc(n, sizeof(double));
    double *sum_abs = (double *)calloc(n, sizeof(double));

    /* off by default: most optimizers have momentum of their own */
    ck_assert(p.dgc_momentum == 0.0f);
    p.dgc_momentum = m;
    p.sparse_ratio = 0.005;
    rng_seed(77);
    for (int t = 0; t < T; t++) {
        enc_t e;
        fill_normal(g, n, 1.0f);
        for (size_t i = 0; i < n; i++)
            uc[i] = m * u[i] + g[i];
        v_of(g, r, u, m, n, v);
        e = encode_msg(kind, g, r, u, n, 0, &p, (uint64_t)t);
        ck_assert_int_eq(e.st, HP_OK);
        expect_topk_payload(e.msg + HP_MSG_HEADER, e.len - HP_MSG_HEADER, v, n, 0, "dgc", &p);
        ck_assert_int_eq(hp_msg_decode(kind, e.msg, e.len, n, d, 0, &p), HP_OK);
        for (size_t i = 0; i < n; i++) {
            if (d[i] != 0.0f) {
                ck_assert(r[i] == 0.0f && u[i] == 0.0f);
            } else {
                ck_assert(fbits(r[i]) == fbits(v[i]));
                ck_assert(fbits(u[i]) == fbits(uc[i]));
            }
            sum_u[i] += uc[i];
            sum_out[i] += d[i];
            sum_abs[i] += fabs(uc[i]) + fabs(v[i]);
        }
        free(e.msg);
    }
    for (size_t i = 0; i < n; i++) {
        double err = fabs(sum_out[i] + r[i] - sum_u[i]);
        ck_assert_msg(err <= 1e-6 * sum_abs[i] + 1e-30, "element %zu: sent + v off the corrected u by %g", i, err);
    }

    /* momentum 0: u' = g, v = r + g, the bytes of graddrop */
    {
        float *r1 = fvec(n), *r2, *u1 = fvec(n);
        enc_t a, b;
        fill_normal(g, n, 1.0f);
        fill_normal(r1, n, 0.3f);
        fill_normal(u1, n, 0.3f);
        r2 = fdup(r1, n);
        p.dgc_momentum = 0.0f;
        a = encode_msg(kind, g, r1, u1, n, 0, &p, 5);
        b = encode_msg(gd, g, r2, NULL, n, 0, &p, 5);
        ck_assert_uint_eq(a.len, b.len);
        ck_assert(memcmp(a.msg + 2, b.msg + 2, a.len - 2) == 0);
        ck_assert(memcmp(r1, r2, n * sizeof(float)) == 0);
        free(a.msg), free(b.msg), free(r1), free(r2), free(u1);
    }
    free(g), free(u), free(r), free(uc), free(v), free(d), free(sum_u), free(sum_out), free(sum_abs);
}
END_TEST

/* The same input gives the same bytes, residual and state: on every ISA
 * path, and under any RNG key (the sample only steers speed). */
START_TEST(isa_paths_and_keys_same_bytes)
{
    const char *name = sparse_names[_i];
    int kind = kind_of(name), dgc = strcmp(name, "dgc") == 0;
    const size_t ns[] = {1, 7, 33, 4097, 100003, 1000007};

    for (size_t ni = 0; ni < HP_ARRAY_SIZE(ns); ni++) {
        size_t n = ns[ni];
        float *g = fvec(n), *r0 = fvec(n), *u0 = fvec(n);
        enc_t ref;
        float *rr, *ur;
        hipress_comp_params_t p0 = params(1);

        rng_seed(n * 3);
        fill_normal(g, n, 1.0f);
        fill_normal(r0, n, 0.2f);
        fill_normal(u0, n, 0.2f);
        rr = fdup(r0, n);
        ur = fdup(u0, n);
        ref = encode_msg(kind, g, rr, dgc ? ur : NULL, n, 0, &p0, 1);
        ck_assert_int_eq(ref.st, HP_OK);
        for (int isa = 0; isa <= 2; isa++) {
            for (uint64_t seed = 1; seed <= 3; seed++) {
                hipress_comp_params_t p = params(isa);
                float *r = fdup(r0, n), *u = fdup(u0, n);
                enc_t e = encode_msg(kind, g, r, dgc ? u : NULL, n, 0, &p, seed);
                ck_assert_int_eq(e.st, HP_OK);
                ck_assert_msg(e.len == ref.len && memcmp(e.msg, ref.msg, e.len) == 0,
                              "%s n=%zu isa=%d seed=%llu: bytes differ from the generic path", name,
                              n, isa, (unsigned long long)seed);
                ck_assert_msg(memcmp(r, rr, n * sizeof(float)) == 0, "%s n=%zu isa=%d: residual differs", name, n, isa);
                ck_assert_msg(memcmp(u, ur, n * sizeof(float)) == 0, "%s n=%zu isa=%d: state differs", name, n, isa);
                free(e.msg), free(r), free(u);
            }
        }
        /* without residual (no error feedback) as well */
        {
            hipress_comp_params_t p1 = params(1), p2 = params(2);
            enc_t a = encode_msg(kind, g, NULL, NULL, n, 0, &p1, 9);
            enc_t b = encode_msg(kind, g, NULL, NULL, n, 0, &p2, 10);
            ck_assert(a.len == b.len && memcmp(a.msg, b.msg, a.len) == 0);
            expect_topk_payload(a.msg + HP_MSG_HEADER, a.len - HP_MSG_HEADER, g, n, 0, name, &p1);
            free(a.msg), free(b.msg);
        }
        free(ref.msg), free(g), free(r0), free(u0), free(rr), free(ur);
    }
}
END_TEST

/* NaN / Inf in the input: the header flag, a header-only message that
 * decodes to NaN, residual and state untouched.  A finite input whose v
 * overflows gives the same message and resets residual and state to zero. */
START_TEST(nonfinite_input)
{
    const char *name = sparse_names[_i];
    int kind = kind_of(name), dgc = strcmp(name, "dgc") == 0;
    hipress_comp_params_t p = params(0);
    const size_t ns[] = {5, 4097, 70001};
    const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};

    for (size_t ni = 0; ni < HP_ARRAY_SIZE(ns); ni++) {
        size_t n = ns[ni];
        for (size_t b = 0; b <= HP_ARRAY_SIZE(bad); b++) {
            for (int isa = 1; isa <= 2; isa++) {
                float *g = fvec(n), *r = fvec(n), *u = fvec(n), *r0, *u0, *d = fvec(n);
                size_t at = (n * (b + 1)) / 7;
                enc_t e;
                p.isa = isa;
                rng_seed(n + b);
                fill_normal(g, n, 1.0f);
                fill_normal(r, n, 1.0f);
                fill_normal(u, n, 1.0f);
                if (b < HP_ARRAY_SIZE(bad)) {
                    g[at] = bad[b];
                } else {
                    /* finite input whose v overflows */
                    g[at] = 3.0e38f;
                    r[at] = 3.0e38f;
                }
                r0 = fdup(r, n);
                u0 = fdup(u, n);
                e = encode_msg(kind, g, r, dgc ? u : NULL, n, 0, &p, 3);
                ck_assert_int_eq(e.st, HP_OK);
                ck_assert_int_eq(e.nonfinite, 1);
                ck_assert_uint_eq(e.len, HP_MSG_HEADER);
                ck_assert_uint_eq(e.msg[2], HP_MSG_NONFINITE);
                if (b < HP_ARRAY_SIZE(bad)) {
                    ck_assert_msg(memcmp(r, r0, n * sizeof(float)) == 0, "%s: residual changed on NaN/Inf", name);
                    ck_assert_msg(memcmp(u, u0, n * sizeof(float)) == 0, "%s: state changed on NaN/Inf", name);
                } else {
                    /* overflow: error feedback restarts from zero */
                    for (size_t i = 0; i < n; i++)
                        ck_assert(r[i] == 0.0f && (dgc ? u[i] == 0.0f : u[i] == u0[i]));
                }
                ck_assert_int_eq(hp_msg_decode(kind, e.msg, e.len, n, d, 1, &p), HP_OK);
                for (size_t i = 0; i < n; i++)
                    ck_assert(isnan(d[i]));
                free(e.msg), free(g), free(r), free(u), free(r0), free(u0), free(d);
            }
        }
    }
}
END_TEST

/* The fallback when fewer than k pass the first threshold: find (by search,
 * deterministically) an RNG key whose first sampled threshold lets fewer
 * than k elements through, and check the encoder still sends the exact
 * top-k with it. */
START_TEST(threshold_fallback)
{
    const int kind = kind_of("graddrop");
    hp_comp_t *c = hp_comp_get(kind);
    hipress_comp_params_t p = params(0);
    const size_t n = 20000, k = 40;
    float *g = fvec(n);
    unsigned char *out = (unsigned char *)malloc(8 * k);
    uint32_t *scratch = (uint32_t *)malloc(n * sizeof(uint32_t));
    hp_sparse_src_t src = {g, NULL, NULL, 0.0f};
    uint64_t found = 0;
    int hit = 0;

    rng_seed(11);
    fill_normal(g, n, 1.0f);
    for (uint64_t seed = 1; seed < 200000 && !hit; seed++) {
        uint64_t key4[4] = {seed, 0, 0, 0};
        size_t s, pass = 0;
        uint32_t thr = hp_sparse_threshold(&src, n, k, p.sample_ratio, hp_rng_key(key4), 0, 0,
                                           scratch, &s);
        ck_assert_uint_eq(s, HP_SPARSE_MIN_SAMPLE);
        for (size_t i = 0; i < n; i++)
            pass += absbits(g[i]) >= thr;
        if (pass < k) {
            hit = 1;
            found = seed;
        }
    }
    ck_assert_msg(hit, "no RNG key found whose sampled threshold passes fewer than k");
    {
        hipress_encode_args_t a;
        size_t len = 0;
        int nf = -1;
        memset(&a, 0, sizeof(a));
        a.in = g;
        a.n = n;
        a.params = &p;
        a.out = out;
        a.out_cap = 8 * k;
        a.k = k;
        a.rng_key[0] = found;
        ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
        expect_topk_payload(out, len, g, n, k, "graddrop (fallback)", &p);
    }
    /* deeper levels never raise the threshold */
    {
        uint64_t key4[4] = {found, 0, 0, 0};
        uint32_t prev = UINT32_MAX;
        size_t s;
        for (int level = 0; level < 8; level++) {
            uint32_t t = hp_sparse_threshold(&src, n, k, p.sample_ratio, hp_rng_key(key4), 0,
                                             level, scratch, &s);
            ck_assert_uint_le(t, prev);
            prev = t;
        }
        ck_assert_uint_eq(prev, 1);
    }
    free(g), free(out), free(scratch);
}
END_TEST

/* The decoder: accumulate adds, overwrite zero-fills; every malformed
 * payload is rejected with out left exactly as it was. */
START_TEST(decode_validation)
{
    const char *name = sparse_names[_i];
    hp_comp_t *c = hp_comp_get(kind_of(name));
    hipress_comp_params_t p = params(0);
    const size_t n = 10;
    float out[10], keep[10];
    unsigned char buf[8 * 12];

#define PAIR(j, i, v) do { uint32_t i_ = (i); float v_ = (v); memcpy(buf + 8 * (j), &i_, 4); memcpy(buf + 8 * (j) + 4, &v_, 4); } while (0)
    PAIR(0, 1, 1.5f);
    PAIR(1, 4, -2.0f);
    PAIR(2, 9, 3.0f);
    for (size_t i = 0; i < n; i++)
        out[i] = (float)i;
    ck_assert_int_eq(c->decode(buf, 24, n, out, 1, &p), HIPRESS_COMP_OK);
    ck_assert(out[0] == 0.0f && out[1] == 2.5f && out[4] == 2.0f && out[9] == 12.0f && out[5] == 5.0f);
    ck_assert_int_eq(c->decode(buf, 24, n, out, 0, &p), HIPRESS_COMP_OK);
    ck_assert(out[0] == 0.0f && out[1] == 1.5f && out[4] == -2.0f && out[9] == 3.0f && out[5] == 0.0f);
    ck_assert_int_eq(c->decode(buf, 0, n, out, 0, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert(out[i] == 0.0f);

    for (int bad = 0; bad < 9; bad++) {
        size_t len = 24;
        PAIR(0, 1, 1.5f);
        PAIR(1, 4, -2.0f);
        PAIR(2, 9, 3.0f);
        switch (bad) {
        case 0: len = 23; break;                    /* truncated */
        case 1: len = 20; break;
        case 2: PAIR(2, 10, 3.0f); break;           /* index == n */
        case 3: PAIR(2, 0xffffffffu, 3.0f); break;  /* far out of range */
        case 4: PAIR(1, 1, 3.0f); break;            /* duplicate */
        case 5: PAIR(1, 0, 3.0f); break;            /* unsorted */
        case 6: PAIR(1, 4, NAN); break;             /* non-finite value */
        case 7: PAIR(1, 4, -INFINITY); break;
        case 8:                                     /* more pairs than n */
            for (uint32_t j = 0; j < 11; j++)
                PAIR(j, j, 1.0f);
            len = 88;
            break;
        }
        for (int acc = 0; acc <= 1; acc++) {
            for (size_t i = 0; i < n; i++)
                out[i] = keep[i] = (float)(i * 3);
            ck_assert_msg(c->decode(buf, len, n, out, acc, &p) == HIPRESS_COMP_EINVAL,
                          "%s accepted malformed payload %d", name, bad);
            ck_assert_msg(memcmp(out, keep, sizeof(out)) == 0, "%s wrote out on malformed payload %d", name, bad);
        }
    }
#undef PAIR
}
END_TEST

/* Operators directly: the filter stops at its capacity and resumes, finds
 * exactly the elements at or above the threshold and flags NaN / Inf
 * wherever they are (vector body or tail); top-k keeps index order. */
START_TEST(operators)
{
    const size_t n = 1000;
    float *g = fvec(n), *r = fvec(n);
    uint32_t idx[1000], all[1000], scratch[2000];
    hp_sparse_src_t src = {g, r, NULL, 0.0f};

    rng_seed(5);
    fill_normal(g, n, 1.0f);
    fill_normal(r, n, 1.0f);
    for (int isa = 1; isa <= 2; isa++) {
        size_t pos = 0, m = 0, total = 0;
        uint32_t thr = fbits(1.0f);
        int bad = 0;
        /* capacities of 1..70 entries force stops inside and between blocks */
        for (size_t cap = 1; pos < n; cap = cap % 70 + 1) {
            size_t got = hp_sparse_filter(&src, n, thr, &pos, idx + m, cap, &bad, isa);
            ck_assert_uint_le(got, cap);
            m += got;
        }
        for (size_t i = 0; i < n; i++) {
            float v = r[i] + g[i];
            if (absbits(v) >= thr)
                all[total++] = (uint32_t)i;
        }
        ck_assert_int_eq(bad, 0);
        ck_assert_uint_eq(m, total);
        ck_assert(memcmp(idx, all, m * sizeof(uint32_t)) == 0);
        {
            size_t kept = hp_sparse_topk(&src, idx, m, 17, scratch);
            ck_assert_uint_eq(kept, 17);
            for (size_t j = 1; j < kept; j++)
                ck_assert_uint_lt(idx[j - 1], idx[j]);
        }
        /* the fused pass: same indices, and the state updated in place */
        {
            float *g2 = fvec(n), *r2 = fdup(r, n), *u2 = fvec(n), *want_u = fvec(n), *want_r = fvec(n);
            hp_sparse_src_t s2 = {g2, r2, u2, 0.75f};
            uint32_t got[1000];
            size_t p2 = 0, m2 = 0;
            int bad2 = 0;
            fill_normal(g2, n, 1.0f);
            fill_normal(u2, n, 1.0f);
            for (size_t i = 0; i < n; i++) {
                want_u[i] = 0.75f * u2[i] + g2[i];
                want_r[i] = r2[i] + want_u[i];
            }
            for (size_t cap = 3; p2 < n; cap = cap % 70 + 1)
                m2 += hp_sparse_filter_commit(&s2, r2, u2, n, thr, &p2, got + m2, cap, &bad2, isa);
            ck_assert_int_eq(bad2, 0);
            ck_assert(memcmp(u2, want_u, n * sizeof(float)) == 0);
            ck_assert(memcmp(r2, want_r, n * sizeof(float)) == 0);
            total = 0;
            for (size_t i = 0; i < n; i++)
                if (absbits(want_r[i]) >= thr)
                    all[total++] = (uint32_t)i;
            ck_assert_uint_eq(m2, total);
            ck_assert(memcmp(got, all, m2 * sizeof(uint32_t)) == 0);
            /* not in place: refused */
            p2 = 0;
            ck_assert_uint_eq(hp_sparse_filter_commit(&s2, want_r, u2, n, thr, &p2, got, n, &bad2, isa), 0);
            ck_assert_uint_eq(p2, 0);
            free(g2), free(r2), free(u2), free(want_u), free(want_r);
        }
        /* the finite check, with one NaN or Inf anywhere */
        ck_assert_int_eq(hp_ops_get(isa)->nonfinite(g, n), 0);
        for (size_t at = 0; at < n; at += 13) {
            float keep = g[at];
            g[at] = at % 2 ? -INFINITY : NAN;
            ck_assert_msg(hp_ops_get(isa)->nonfinite(g, n) == 1, "isa %d: nonfinite missed %zu", isa, at);
            g[at] = keep;
        }
        /* one Inf at every position, found by a single filter call */
        for (size_t at = 0; at < n; at += 37) {
            float keep = g[at];
            size_t p0 = 0;
            g[at] = at % 2 ? INFINITY : NAN;
            bad = 0;
            hp_sparse_filter(&src, n, thr, &p0, idx, n, &bad, isa);
            ck_assert_msg(bad == 1, "isa %d missed a non-finite v at %zu", isa, at);
            g[at] = keep;
        }
    }
    free(g), free(r);
}
END_TEST

static Suite *sparse_suite(void)
{
    Suite *s = suite_create("comp_sparse");
    TCase *tc = tcase_create("sparse");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, wire_size_and_topk, 0, 2);
    tcase_add_loop_test(tc, explicit_k, 0, 2);
    tcase_add_loop_test(tc, ties_and_zeros, 0, 2);
    tcase_add_test(tc, graddrop_error_feedback);
    tcase_add_test(tc, dgc_momentum_feedback);
    tcase_add_loop_test(tc, isa_paths_and_keys_same_bytes, 0, 2);
    tcase_add_loop_test(tc, nonfinite_input, 0, 2);
    tcase_add_test(tc, threshold_fallback);
    tcase_add_loop_test(tc, decode_validation, 0, 2);
    tcase_add_test(tc, operators);
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
