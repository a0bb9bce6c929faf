/*
 * Every registered decoder against malformed messages (contract 4, doc/dev/contracts.md):
 * truncated and oversized payloads, out-of-range, unsorted and duplicate
 * indices (sparse payloads), bad headers through hp_msg_decode, and random
 * garbage -- rejected with HIPRESS_COMP_EINVAL / HP_ERR_MESSAGE, and never a
 * write outside out[0..n): out sits between two guard regions that must keep
 * their pattern after every call.
 *
 * The loop runs over hp_comp_count(), so a compressor added to
 * hp_builtins.def is covered without touching this file.  Valid messages
 * come from each compressor's own encoder (through hp_msg_encode).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hp_comp.h"

#define GUARD 64                    /* floats on each side of out */
#define GUARD_BITS 0x7fa5a5a5u      /* a NaN pattern no decoder writes */

static const size_t sizes[] = {1, 7, 33, 1000, 4097};

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;

static uint64_t rng_u64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static float rng_float(void)
{
    return (float)((double)(rng_u64() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* out[0..n) between two guard regions. */
typedef struct {
    float *mem;
    float *out;
    size_t n;
} guarded_t;

static guarded_t guarded_new(size_t n)
{
    guarded_t g;
    g.n = n;
    g.mem = (float *)malloc((n + 2 * GUARD) * sizeof(float));
    ck_assert_ptr_nonnull(g.mem);
    g.out = g.mem + GUARD;
    for (size_t i = 0; i < n + 2 * GUARD; i++) {
        uint32_t b = GUARD_BITS;
        memcpy(&g.mem[i], &b, 4);
    }
    for (size_t i = 0; i < n; i++)
        g.out[i] = 0.25f;
    return g;
}

static void guarded_check(const guarded_t *g, const char *name, const char *what)
{
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t a, b;
        memcpy(&a, &g->mem[i], 4);
        memcpy(&b, &g->mem[GUARD + g->n + i], 4);
        ck_assert_msg(a == GUARD_BITS, "%s (%s, n=%zu): wrote %zu floats before out", name, what,
                      g->n, GUARD - i);
        ck_assert_msg(b == GUARD_BITS, "%s (%s, n=%zu): wrote out[%zu], past the end", name,
                      what, g->n, g->n + i);
    }
}

static hipress_comp_params_t params_default(void)
{
    hipress_comp_params_t p;
    hipress_comp_params_default(&p);
    return p;
}

/* A valid message of compressor `kind` for n random values (with residual
 * and state where the compressor wants them).  *len_p: total bytes; the
 * buffer has room for 64 more bytes so tests can grow it. */
static unsigned char *valid_msg(int kind, size_t n, size_t k, const hipress_comp_params_t *p,
                                size_t *len_p)
{
    hp_comp_t *c = hp_comp_get(kind);
    size_t cap = hp_msg_max_bytes(kind, n, p) + 64 + 8 * n;
    unsigned char *msg = (unsigned char *)calloc(cap, 1);
    float *in = (float *)malloc(n * sizeof(float));
    float *res = (float *)calloc(n, sizeof(float));
    float *state = (float *)calloc(n, sizeof(float));
    hipress_encode_args_t a;
    int nonfinite = -1;
    hp_status_t st;

    ck_assert(msg && in && res && state);
    for (size_t i = 0; i < n; i++)
        in[i] = rng_float();
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.residual = (c->flags & HIPRESS_COMP_EF) ? res : NULL;
    a.state = (c->flags & HIPRESS_COMP_MOMENTUM) ? state : NULL;
    a.n = n;
    a.k = k;
    a.params = p;
    a.rng_key[0] = 1;
    st = hp_msg_encode(kind, &a, msg, cap - 64 - 8 * n, len_p, &nonfinite);
    ck_assert_msg(st == HP_OK, "%s: encoding %zu values failed: %s", c->name, n,
                  hipress_status_string(st));
    ck_assert_int_eq(nonfinite, 0);
    ck_assert_uint_le(*len_p, hp_msg_max_bytes(kind, n, p));
    free(in), free(res), free(state);
    return msg;
}

static void set_payload_len(unsigned char *msg, size_t plen)
{
    uint32_t p32 = (uint32_t)plen;
    memcpy(msg + 8, &p32, 4);
}

/* The payload must be rejected by the decoder directly and, wrapped in a
 * consistent header, by hp_msg_decode; nothing outside out may change. */
static void expect_reject(int kind, const unsigned char *msg, size_t plen, size_t n,
                          const hipress_comp_params_t *p, const char *what)
{
    hp_comp_t *c = hp_comp_get(kind);
    unsigned char *copy = (unsigned char *)malloc(HP_MSG_HEADER + plen + 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, msg, HP_MSG_HEADER + plen);
    set_payload_len(copy, plen);
    for (int acc = 0; acc <= 1; acc++) {
        guarded_t g = guarded_new(n);
        /* an exact-size heap copy of the payload, so a read past its end
         * shows under ASan */
        unsigned char *pl = (unsigned char *)malloc(plen ? plen : 1);
        ck_assert_ptr_nonnull(pl);
        memcpy(pl, copy + HP_MSG_HEADER, plen);
        ck_assert_msg(c->decode(pl, plen, n, g.out, acc, p) == HIPRESS_COMP_EINVAL,
                      "%s accepted a %s payload (%zu bytes, n=%zu, accumulate=%d)", c->name, what,
                      plen, n, acc);
        guarded_check(&g, c->name, what);
        ck_assert_msg(hp_msg_decode(kind, copy, HP_MSG_HEADER + plen, n, g.out, acc, p) == HP_ERR_MESSAGE,
                      "hp_msg_decode accepted a %s %s message", what, c->name);
        guarded_check(&g, c->name, what);
        free(pl);
        free(g.mem);
    }
    free(copy);
}

static void expect_accept(int kind, const unsigned char *msg, size_t len, size_t n,
                          const hipress_comp_params_t *p, const char *what)
{
    hp_comp_t *c = hp_comp_get(kind);
    for (int acc = 0; acc <= 1; acc++) {
        guarded_t g = guarded_new(n);
        hp_status_t st = hp_msg_decode(kind, msg, len, n, g.out, acc, p);
        ck_assert_msg(st == HP_OK, "%s rejected its own %s message (n=%zu): %s", c->name, what,
                      n, hipress_status_string(st));
        guarded_check(&g, c->name, what);
        free(g.mem);
    }
}

/* The parameter variants a decoder may depend on. */
static size_t param_variants(hipress_comp_params_t *v, size_t cap)
{
    size_t m = 0;
    v[m++] = params_default();
    if (m < cap) {
        v[m] = params_default();
        v[m].onebit_block = 32;
        v[m].tbq_block = 32;
        v[m].fp16_block = 32;
        v[m].sparse_block = 64;
        v[m].terngrad_bits = 1;
        v[m].q_block = 32;
        v[m].q_rounding = 1;
        v[m].powersgd_rank = 1;
        v[m].isa = 1;
        v[m].sparse_ratio = 0.05;
        m++;
    }
    if (m < cap) {
        v[m] = params_default();
        v[m].onebit_block = 1024;
        v[m].tbq_block = 1024;
        v[m].fp16_block = 1024;
        v[m].terngrad_bits = 8;
        v[m].q_block = 4096;
        v[m].powersgd_rank = 16;
        v[m].isa = 2;
        v[m].tbq_threshold = 0.5f;
        m++;
    }
    return m;
}

/* --------------------------------------------------------------- tests */

START_TEST(registry_has_builtins)
{
    /* sanity: the loops below cover something */
    ck_assert_int_ge(hp_comp_count(), 2);
    ck_assert_int_ge(hp_comp_find("none"), 0);
    for (int k = 0; k < hp_comp_count(); k++) {
        hp_comp_t *c = hp_comp_get(k);
        ck_assert_ptr_nonnull(c->decode);
        ck_assert_int_eq(c->abi_version, HIPRESS_COMPRESSOR_ABI_VERSION);
    }
}
END_TEST

/* Truncated and oversized payloads, for every decoder, size and parameter
 * variant.  A dense payload has one valid length for (n, params), so any
 * other is rejected; a sparse one is valid at any multiple of 8 up to 8n, so
 * it is cut or grown off that grid, or past n pairs. */
START_TEST(truncated_and_oversized)
{
    const int kind = _i;
    hp_comp_t *c;
    hipress_comp_params_t pv[3];
    size_t npv;

    if (kind >= hp_comp_count())
        return; /* fewer compressors registered than the loop allows */
    c = hp_comp_get(kind);
    npv = param_variants(pv, 3);
    for (size_t v = 0; v < npv; v++) {
        const hipress_comp_params_t *p = &pv[v];
        for (size_t si = 0; si < HP_ARRAY_SIZE(sizes); si++) {
            size_t n = sizes[si], len, plen;
            unsigned char *msg = valid_msg(kind, n, 0, p, &len);
            plen = len - HP_MSG_HEADER;
            expect_accept(kind, msg, len, n, p, "valid");
            if (c->flags & HIPRESS_COMP_SPARSE) {
                if (plen >= 1)
                    expect_reject(kind, msg, plen - 1, n, p, "truncated");
                if (plen >= 4)
                    expect_reject(kind, msg, plen - 4, n, p, "truncated");
                expect_reject(kind, msg, plen + 1, n, p, "oversized");
                expect_reject(kind, msg, plen + 4, n, p, "oversized");
                {
                    /* n + 1 well-formed pairs */
                    unsigned char *big = (unsigned char *)calloc(HP_MSG_HEADER + 8 * (n + 1), 1);
                    memcpy(big, msg, HP_MSG_HEADER);
                    for (uint32_t j = 0; j <= n; j++) {
                        float one = 1.0f;
                        memcpy(big + HP_MSG_HEADER + 8 * j, &j, 4);
                        memcpy(big + HP_MSG_HEADER + 8 * j + 4, &one, 4);
                    }
                    expect_reject(kind, big, 8 * (n + 1), n, p, "more pairs than n");
                    free(big);
                }
            } else {
                const size_t cut[] = {1, 2, 4, 8};
                for (size_t j = 0; j < HP_ARRAY_SIZE(cut); j++) {
                    if (plen >= cut[j])
                        expect_reject(kind, msg, plen - cut[j], n, p, "truncated");
                    expect_reject(kind, msg, plen + cut[j], n, p, "oversized");
                }
                if (plen > 0)
                    expect_reject(kind, msg, 0, n, p, "empty");
            }
            free(msg);
        }
    }
}
END_TEST

/* Index errors in sparse payloads: index == n, far out of range, a
 * duplicate, a decreasing pair, a NaN value. */
START_TEST(sparse_index_errors)
{
    const int kind = _i;
    hp_comp_t *c;
    hipress_comp_params_t p = params_default();

    if (kind >= hp_comp_count())
        return;
    c = hp_comp_get(kind);
    if (!(c->flags & HIPRESS_COMP_SPARSE))
        return; /* payloads without indices (covered by the other tests) */
    for (size_t si = 1; si < HP_ARRAY_SIZE(sizes); si++) {
        size_t n = sizes[si], len, plen, pairs;
        /* ask for several pairs so order errors can be built */
        size_t k = n / 4 > 3 ? n / 4 : 3;
        unsigned char *msg = valid_msg(kind, n, k < n ? k : n, &p, &len);
        plen = len - HP_MSG_HEADER;
        ck_assert_msg(plen % 8 == 0, "%s: sparse payload of %zu bytes", c->name, plen);
        pairs = plen / 8;
        ck_assert_uint_ge(pairs, 2);
        for (int bad = 0; bad < 6; bad++) {
            unsigned char *m = (unsigned char *)malloc(len);
            unsigned char *pl = m + HP_MSG_HEADER;
            uint32_t i0, i1, x;
            float nanv = NAN;
            memcpy(m, msg, len);
            memcpy(&i0, pl, 4);
            memcpy(&i1, pl + 8, 4);
            switch (bad) {
            case 0: x = (uint32_t)n; memcpy(pl + 8 * (pairs - 1), &x, 4); break;
            case 1: x = 0xffffffffu; memcpy(pl + 8 * (pairs - 1), &x, 4); break;
            case 2: memcpy(pl + 8, &i0, 4); break;                  /* duplicate */
            case 3: memcpy(pl, &i1, 4); memcpy(pl + 8, &i0, 4); break; /* swapped */
            case 4: memcpy(pl + 4, &nanv, 4); break;
            case 5: x = 0x7f800000u; memcpy(pl + 8 * (pairs - 1) + 4, &x, 4); break;
            }
            {
                static const char *const what[] = {"index == n", "index 2^32-1", "duplicate index",
                                                   "unsorted", "NaN value", "Inf value"};
                expect_reject(kind, m, plen, n, &p, what[bad]);
            }
            free(m);
        }
        free(msg);
    }
}
END_TEST

/* hp_msg_decode rejects bad headers of every kind; accepts the dense
 * fallback and the NaN message; reports error messages as HP_ERR_PEER. */
START_TEST(bad_headers)
{
    const int kind = _i;
    hp_comp_t *c;
    hipress_comp_params_t p = params_default();
    const size_t n = 33;
    size_t len;
    unsigned char *msg, *m;

    if (kind >= hp_comp_count())
        return;
    c = hp_comp_get(kind);
    msg = valid_msg(kind, n, 0, &p, &len);
    m = (unsigned char *)malloc(len + 64);
    for (int bad = 0; bad < 13; bad++) {
        guarded_t g = guarded_new(n);
        size_t mlen = len;
        uint32_t x;
        hp_status_t want = HP_ERR_MESSAGE, st;
        memcpy(m, msg, len);
        switch (bad) {
        case 0: m[0] ^= 0xff; break;                          /* magic */
        case 1: m[3] = HP_MSG_VERSION + 1; break;             /* version */
        case 2: m[2] |= 0x80; break;                          /* unknown flag */
        case 3: x = (uint32_t)(len - HP_MSG_HEADER + 1); memcpy(m + 8, &x, 4); break;
        case 4: mlen = len - 1; break;                        /* shorter than it says */
        case 5: mlen = len + 3; memset(m + len, 0, 3); break; /* longer than it says */
        case 6: x = (uint32_t)n + 1; memcpy(m + 4, &x, 4); break; /* another n */
        case 7: m[1] = (unsigned char)((kind + 1) % hp_comp_count()); /* another kind */
            if (m[1] == (unsigned char)hp_kind_none || m[1] == (unsigned char)kind)
                m[1] = (unsigned char)hp_comp_count();        /* unregistered */
            break;
        case 8: m[1] = (unsigned char)hp_comp_count(); break; /* unregistered kind */
        case 9: mlen = HP_MSG_HEADER - 1; break;              /* short header */
        case 10: m[2] = HP_MSG_NONFINITE; break;              /* NaN flag with a payload */
        case 11: m[1] = HP_KIND_ERROR; want = HP_ERR_PEER; break;
        case 12: mlen = 0; break;
        }
        st = hp_msg_decode(kind, m, mlen, n, g.out, 1, &p);
        if (bad == 10 && len == HP_MSG_HEADER)
            want = HP_OK; /* an empty payload with the flag is the NaN message */
        ck_assert_msg(st == want, "%s: bad header %d gave %s, want %s", c->name, bad,
                      hipress_status_string(st), hipress_status_string(want));
        guarded_check(&g, c->name, "bad header");
        free(g.mem);
    }
    /* the dense fallback (`none` message) is accepted for any kind, the NaN
     * message decodes to NaN */
    {
        guarded_t g = guarded_new(n);
        size_t nlen;
        unsigned char *none = valid_msg(hp_kind_none, n, 0, &p, &nlen);
        unsigned char nanmsg[HP_MSG_HEADER];
        ck_assert_int_eq(hp_msg_decode(kind, none, nlen, n, g.out, 0, &p), HP_OK);
        memcpy(nanmsg, msg, HP_MSG_HEADER);
        nanmsg[2] = HP_MSG_NONFINITE;
        set_payload_len(nanmsg, 0);
        ck_assert_int_eq(hp_msg_decode(kind, nanmsg, HP_MSG_HEADER, n, g.out, 1, &p), HP_OK);
        for (size_t i = 0; i < n; i++)
            ck_assert(isnan(g.out[i]));
        guarded_check(&g, c->name, "fallback");
        free(none);
        free(g.mem);
    }
    ck_assert_int_eq(hp_msg_decode(kind, NULL, 0, n, NULL, 0, &p), HP_ERR_MESSAGE);
    free(m);
    free(msg);
}
END_TEST

/* Garbage: random bytes at and around the valid length, and single-byte
 * corruptions of valid payloads.  Any verdict is allowed (some random codes
 * are valid), but nothing outside out is written and nothing crashes (under
 * --enable-sanitizers, nothing outside the payload is read either). */
START_TEST(garbage_stays_inside)
{
    const int kind = _i;
    hp_comp_t *c;
    hipress_comp_params_t pv[3];
    size_t npv;

    if (kind >= hp_comp_count())
        return;
    c = hp_comp_get(kind);
    npv = param_variants(pv, 3);
    for (size_t v = 0; v < npv; v++) {
        const hipress_comp_params_t *p = &pv[v];
        for (size_t si = 0; si < HP_ARRAY_SIZE(sizes); si++) {
            size_t n = sizes[si], len, plen;
            unsigned char *msg = valid_msg(kind, n, 0, p, &len);
            plen = len - HP_MSG_HEADER;
            for (int t = 0; t < 200; t++) {
                size_t gl;
                unsigned char *pl;
                guarded_t g = guarded_new(n);
                if (t < 100) {
                    /* corrupt one byte of the valid payload */
                    gl = plen;
                    pl = (unsigned char *)malloc(gl ? gl : 1);
                    memcpy(pl, msg + HP_MSG_HEADER, gl);
                    if (gl > 0)
                        pl[rng_u64() % gl] ^= (unsigned char)(1u << (rng_u64() % 8));
                } else {
                    gl = plen + (size_t)(rng_u64() % 17) - (plen >= 8 ? 8 : plen);
                    pl = (unsigned char *)malloc(gl ? gl : 1);
                    for (size_t b = 0; b < gl; b++)
                        pl[b] = (unsigned char)rng_u64();
                }
                (void)c->decode(pl, gl, n, g.out, t & 1, p);
                guarded_check(&g, c->name, "garbage");
                free(pl);
                free(g.mem);
            }
            free(msg);
        }
    }
}
END_TEST

static Suite *decoders_suite(void)
{
    Suite *s = suite_create("decoders");
    TCase *tc = tcase_create("decoders");
    /* one loop index per registry slot; slots past hp_comp_count() return */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, registry_has_builtins);
    tcase_add_loop_test(tc, truncated_and_oversized, 0, HP_MAX_COMPRESSORS);
    tcase_add_loop_test(tc, sparse_index_errors, 0, HP_MAX_COMPRESSORS);
    tcase_add_loop_test(tc, bad_headers, 0, HP_MAX_COMPRESSORS);
    tcase_add_loop_test(tc, garbage_stays_inside, 0, HP_MAX_COMPRESSORS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(decoders_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
