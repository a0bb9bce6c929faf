/*
 * check_comp_dense (check_comp_dense.c): the dense compressors' wire sizes
 * and error bounds -- fp16 and bf16 rounding and fp16's block scale,
 * onebit's scales, tbq's codes, partition independence, decode_many, error
 * feedback.
 */
#include "check_comp_dense.h"

static const size_t sizes[] = {1, 31, 32, 33, 4095, 4097, 1000007};

/* ------------------------------------------------------------ wire size */

START_TEST(test_wire_sizes)
{
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float *x = falloc(1000007), *r = falloc(1000007);
    uint8_t *out = malloc(8 * 1000007 + 64), *msg = malloc(8 * 1000007 + 64);
    for (size_t d = 0; d < 5; d++) {
        hp_comp_t *c = comp(dense_names[d]);
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t n = sizes[s];
            for (int var = 0; var < 4; var++) {
                size_t len, mlen;
                int nf;
                hipress_encode_args_t a;
                if (var > 0 && strcmp(c->name, "onebit") && strcmp(c->name, "terngrad") &&
                    strcmp(c->name, "tbq") && strcmp(c->name, "fp16"))
                    break;
                p.onebit_block = var == 1 ? 32 : var == 2 ? 65536 : 4096;
                p.fp16_block = var == 1 ? 32 : var == 2 ? 65536 : var == 3 ? 2048 : 0;
                p.tbq_block = var == 1 ? 32 : var == 2 ? 65536 : var == 3 ? 2048 : 4096;
                p.terngrad_bits = 1u << var;
                p.terngrad_block = var == 1 ? 32 : var == 2 ? 65536 : var == 3 ? 2048 : 0;
                fill_grad(x, n, n);
                memset(r, 0, 4 * n);
                len = enc(c, x, (c->flags & HIPRESS_COMP_EF) ? r : NULL, n, &p, out,
                          c->max_payload(n, &p), 1, NULL);
                REQUIRE_MSG(len == expected_payload(c->name, n, &p), "%s n=%zu: %zu", c->name, n, len);
                ck_assert_uint_eq(c->max_payload(n, &p), len);
                /* the framework adds exactly the header */
                memset(&a, 0, sizeof(a));
                a.in = x;
                a.n = n;
                a.params = &p;
                ck_assert_int_eq(hp_msg_encode(hp_comp_find(c->name), &a, msg,
                                               hp_msg_max_bytes(hp_comp_find(c->name), n, &p), &mlen, &nf), HP_OK);
                ck_assert_uint_eq(mlen, HP_MSG_HEADER + len);
                /* capacity one byte short */
                {
                    size_t l2;
                    hipress_encode_args_t b = a;
                    b.out = out;
                    b.out_cap = len - 1;
                    ck_assert_int_eq(c->encode(&b, &l2, &nf), HIPRESS_COMP_ENOSPC);
                }
            }
        }
    }
    free(x); free(r); free(out); free(msg);
}
END_TEST

/* ---------------------------------------------------------- error bounds */

/* The block exponent of an fp16 block as the rule defines it, computed
 * independently of hp_elem.h (frexpf gives m = f 2^X with f in [0.5, 1)). */
static int want_f16_exp(const float *x, size_t len)
{
    float m = 0.0f;
    int X;
    for (size_t i = 0; i < len; i++)
        m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    if (m == 0.0f)
        return 0;
    frexpf(m, &X);
    return 15 - (X - 1) < 126 ? 15 - (X - 1) : 126;
}

/* Per element, one fp16 encode and decode of x in a block of exponent e:
 * half an ulp of 11 bits where x 2^e is a normal half, else half the
 * subnormal step 2^-24 scaled back; plus half a float subnormal step where
 * the decoded value is a float subnormal. */
static double f16_bound(double ax, int e)
{
    return (ldexp(ax, e) >= 0x1p-14 ? 0x1p-11 * ax : ldexp(0x1p-25, -e)) + 0x1p-150;
}

/* One encode of fp16 / bf16: every element within half an ulp of its
 * format (fp16: in the block's scale), values beyond binary16's range
 * included, and tiny ones in a block of large ones. */
START_TEST(test_fp16_bf16_rounding)
{
    const size_t n = 100003;
    for (int var = 0; var < 2; var++) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        float *x = falloc(n), *o = falloc(n);
        uint8_t *out = malloc(3 * n);
        if (var)
            p.fp16_block = 256;
        fill_grad(x, n, 5 + (uint64_t)var);
        for (size_t i = 0; i < n; i += 101)
            x[i] *= 1e5f; /* beyond binary16's range */
        for (size_t i = 50; i < n; i += 1009)
            x[i] *= 1e-30f; /* 2^-100 below their neighbours */
        for (size_t i = 7; i < n; i += 10007)
            x[i] = i % 2 ? FLT_MAX : -3e38f;
        for (int t = 0; t < 2; t++) {
            hp_comp_t *c = comp(t ? "bf16" : "fp16");
            size_t B = fp16_block(&p);
            size_t len = enc(c, x, NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
            ck_assert_uint_eq(len, expected_payload(c->name, n, &p));
            ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
            for (size_t i = 0; i < n; i++) {
                double ax = fabs((double)x[i]), err = fabs((double)o[i] - (double)x[i]);
                REQUIRE_MSG(isfinite(o[i]), "%s x=%g decoded to %g", c->name, x[i], o[i]);
                if (t) {
                    REQUIRE_MSG(err <= 0x1p-8 * ax, "bf16 x=%g got %g", x[i], o[i]);
                } else {
                    int e = (int8_t)out[2 * n + i / B];
                    ck_assert_int_eq(e, want_f16_exp(x + i / B * B, HP_MIN(B, n - i / B * B)));
                    REQUIRE_MSG(err <= f16_bound(ax, e), "fp16 x=%g (block 2^%d) got %g", x[i], e, o[i]);
                }
            }
        }
        free(x); free(o); free(out);
    }
}
END_TEST

/* The fp16 format: the exponent of each block by the rule (zero block,
 * clamps at both ends, saturation), the largest half of a block in the top
 * binade, exact round trips of values with 11 significant bits, signed
 * zeros, and a short last block. */
START_TEST(test_fp16_scale_rule)
{
    enum { B = 64, NB = 14, N = B * (NB - 1) + 5 };
    const float vals_exact[] = {40000.0f, 80000.0f, 120000.0f, 160000.0f, -2500.0f, 0.0f};
    for (int isa = 1; isa <= 2; isa++) {
        hipress_comp_params_t p = params_isa(isa);
        hp_comp_t *c = comp("fp16");
        float x[N], o[N];
        uint8_t out[2 * N + NB];
        size_t len;
        p.fp16_block = B;
        fill_grad(x, N, 99);
        for (size_t i = 0; i < B; i++)
            x[i] = i % 3 ? 0.0f : -0.0f;                         /* 0: zeros: e = 0 */
        x[B + 9] = 1.0f;                                         /* 1: max 1: e = 15 */
        for (size_t i = 0; i < 6; i++)
            x[2 * B + 3 * i] = vals_exact[i];                    /* 2: max 160000: e = -2 */
        x[3 * B + 1] = FLT_MAX;                                  /* 3: e = -112, saturates */
        x[3 * B + 2] = -FLT_MAX;
        x[3 * B + 3] = 0x1.ffep127f;                             /* rounds up to 2^16 scaled */
        x[3 * B + 4] = 0x1p100f;
        x[4 * B + 5] = 65535.99f;                                /* 4: e = 0, saturates */
        x[4 * B + 6] = 65519.0f;
        for (size_t i = 0; i < B; i++)
            x[5 * B + i] = (float)((double)i * 1e-41);           /* 5: subnormals: e = 126 */
        for (size_t i = 0; i < B; i++)
            x[6 * B + i] = x[6 * B + i] * 0x1p-120f;             /* 6: below 2^-111: e = 126 */
        x[6 * B] = 0x1p-112f;
        x[7 * B + 2] = 32768.0f;                                 /* 7: max 2^15: e = 0 */
        for (size_t i = 0; i < B; i++)
            x[8 * B + i] = i % 2 ? 1e-12f : -3e-13f;             /* 8: 2^-30 of the max */
        x[8 * B] = 1e-3f;
        memset(x + 9 * B, 0, B * sizeof(float));
        x[9 * B + 63] = 0x1p-149f;                               /* 9: one tiny value */
        /* 10, 11: gradient-like; 12: max 65504 * 2^-40 */
        memset(x + 12 * B, 0, B * sizeof(float));
        x[12 * B + 1] = 0x1.ffcp-25f;
        x[12 * B + 2] = 0x1p-40f;
        len = enc(c, x, NULL, N, &p, out, sizeof(out), 1, NULL);
        ck_assert_uint_eq(len, 2 * N + NB);
        ck_assert_int_eq(c->decode(out, len, N, o, 0, &p), HIPRESS_COMP_OK);
        for (size_t b = 0; b < NB; b++) {
            size_t lo = b * B, hi = HP_MIN((size_t)N, lo + B);
            int e = (int8_t)out[2 * N + b];
            unsigned mx = 0;
            ck_assert_int_eq(e, want_f16_exp(x + lo, hi - lo));
            for (size_t i = lo; i < hi; i++) {
                uint16_t h;
                float y = ldexpf(x[i], e);
                memcpy(&h, out + 2 * i, 2);
                mx = (h & 0x7fffu) > mx ? (h & 0x7fffu) : mx;
                REQUIRE(isfinite(o[i]) && (h & 0x7fffu) < 0x7c00u);
                REQUIRE_MSG(fabs((double)o[i] - x[i]) <= f16_bound(fabs((double)x[i]), e),
                            "block %zu x=%a got %a", b, x[i], o[i]);
                /* 11 significant bits in the normal range: exact */
                if (fabsf(y) >= 0x1p-14f && fabsf(y) <= 65504.0f && (hp_f2u(y) & 0x1fffu) == 0)
                    REQUIRE_MSG(hp_f2u(o[i]) == hp_f2u(x[i]), "block %zu: %a not exact: %a", b, x[i], o[i]);
            }
            /* the largest |v| lands in [2^15, 65504] unless the clamp applies */
            if (e < HP_F16_EMAX && want_f16_exp(x + lo, hi - lo) != 0)
                REQUIRE_MSG(mx >= 0x7800u && mx <= 0x7bffu, "block %zu: largest half %04x", b, mx);
        }
        ck_assert_int_eq((int8_t)out[2 * N + 0], 0);
        ck_assert_int_eq((int8_t)out[2 * N + 1], 15);
        ck_assert_int_eq((int8_t)out[2 * N + 2], -2);
        ck_assert_int_eq((int8_t)out[2 * N + 3], HP_F16_EMIN);
        ck_assert_int_eq((int8_t)out[2 * N + 4], 0);
        ck_assert_int_eq((int8_t)out[2 * N + 5], HP_F16_EMAX);
        ck_assert_int_eq((int8_t)out[2 * N + 6], HP_F16_EMAX);
        ck_assert_int_eq((int8_t)out[2 * N + 7], 0);
        ck_assert_int_eq((int8_t)out[2 * N + 12], 40);
        for (size_t i = 0; i < B; i++)    /* signed zeros */
            REQUIRE(hp_f2u(o[i]) == hp_f2u(x[i]));
        for (size_t i = 0; i < 6; i++)
            REQUIRE(o[2 * B + 3 * i] == vals_exact[i]);
        REQUIRE(o[3 * B + 1] == 0x1.ffcp127f && o[3 * B + 2] == -0x1.ffcp127f); /* 65504 2^112 */
        REQUIRE(o[3 * B + 3] == 0x1.ffcp127f && o[4 * B + 5] == 65504.0f && o[4 * B + 6] == 65504.0f);
        REQUIRE(o[7 * B + 2] == 32768.0f && o[9 * B + 63] == 0x1p-149f && o[12 * B + 2] == 0x1p-40f);
        REQUIRE(o[8 * B] == x[8 * B] || fabs(o[8 * B] - 1e-3) <= 0x1p-11 * 1e-3);
    }
}
END_TEST

/* Small gradients (1e-5 to 1e-7: mostly binary16 subnormals unscaled) keep
 * 11 significant bits: the relative L2 error of one encode stays near that
 * of one rounding (2^-11 / sqrt(3) for uniform rounding errors). */
START_TEST(test_fp16_small_values)
{
    const size_t n = 65536 + 100;
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    hp_comp_t *c = comp("fp16");
    float *x = falloc(n), *o = falloc(n);
    uint8_t *out = malloc(3 * n);
    double num = 0, den = 0;
    size_t len;
    fill_grad(x, n, 31);
    for (size_t i = 0; i < n; i++)
        x[i] *= (float)(i < n / 2 ? 1e-3 : 1e-5); /* values about 1e-5 and 1e-7 */
    len = enc(c, x, NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
    ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < n; i++) {
        double e = (double)o[i] - x[i];
        REQUIRE_MSG(fabs(e) <= 0x1p-11 * fabs((double)x[i]), "x=%g got %g", x[i], o[i]);
        num += e * e;
        den += (double)x[i] * x[i];
    }
    REQUIRE_MSG(sqrt(num / den) < 0x1p-11, "relative L2 error %g", sqrt(num / den));
    free(x); free(o); free(out);
}
END_TEST

START_TEST(test_onebit_scales)
{
    const size_t n = 10007;
    for (int useres = 0; useres < 2; useres++) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        hp_comp_t *c = comp("onebit");
        float *x = falloc(n), *r = falloc(n), *v = falloc(n), *o = falloc(n);
        uint8_t *out;
        size_t len, B;
        p.onebit_block = 1024;
        B = p.onebit_block;
        out = malloc(c->max_payload(n, &p));
        fill_grad(x, n, 11);
        fill_grad(r, n, 12);
        for (size_t i = 0; i < n; i++)
            r[i] *= 0.1f;
        for (size_t i = 0; i < 2 * B; i++) /* block 1 all >= 0: empty clear class */
            x[B + i / 2] = fabsf(x[B + i / 2]) + 1.0f;
        for (size_t i = 0; i < n; i++)
            v[i] = useres ? x[i] + r[i] : x[i];
        len = enc(c, x, useres ? r : NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
        ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
        for (size_t b0 = 0; b0 < n; b0 += B) {
            size_t e = HP_MIN(n, b0 + B);
            double sp = 0, sn = 0;
            size_t np = 0, nn = 0;
            float sc[2];
            memcpy(sc, out + 8 * (b0 / B), 8);
            for (size_t i = b0; i < e; i++) {
                if (v[i] >= 0) {
                    sp += v[i];
                    np++;
                } else {
                    sn += v[i];
                    nn++;
                }
            }
            REQUIRE(np ? fabs(sc[0] - sp / (double)np) <= 1e-6 * fabs(sp / (double)np) : sc[0] == 0.0f);
            REQUIRE(nn ? fabs(sc[1] - sn / (double)nn) <= 1e-6 * fabs(sn / (double)nn) : sc[1] == 0.0f);
            for (size_t i = b0; i < e; i++) {
                float want = v[i] >= 0 ? sc[0] : sc[1];
                REQUIRE(hp_f2u(o[i]) == hp_f2u(want));
                /* the new residual is exactly v - decode */
                if (useres)
                    REQUIRE(hp_f2u(r[i]) == hp_f2u(v[i] - want));
            }
        }
        free(x); free(r); free(v); free(o); free(out);
    }
}
END_TEST

START_TEST(test_tbq_codes)
{
    const size_t n = 20011;
    for (int mode = 0; mode < 6; mode++) { /* scale, scale + residual, threshold; blocks 4096 / 1024 */
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        hp_comp_t *c = comp("tbq");
        float *x = falloc(n), *r = falloc(n), *v = falloc(n), *o = falloc(n);
        uint8_t *out, *codes;
        size_t len, cnt[3] = {0, 0, 0}, B, nb;
        p.tbq_scale = 1.5f;
        p.tbq_block = mode >= 3 ? 1024 : 4096;
        B = p.tbq_block;
        nb = (n + B - 1) / B;
        if (mode % 3 == 2)
            p.tbq_threshold = 0.004f;
        out = malloc(c->max_payload(n, &p));
        codes = out + 4 * nb;
        fill_grad(x, n, 21);
        fill_grad(r, n, 22);
        x[5] = 0.012f; /* around tau */
        x[6] = -0.012f;
        for (size_t i = 0; i < n; i++) {
            r[i] *= 0.2f;
            v[i] = mode % 3 == 1 ? x[i] + r[i] : x[i];
        }
        len = enc(c, x, mode % 3 == 1 ? r : NULL, n, &p, out, c->max_payload(n, &p), 1, NULL);
        ck_assert_uint_eq(len, 4 * nb + (n + 3) / 4);
        ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * B, hi = HP_MIN(n, lo + B);
            double asum = 0;
            float tau;
            memcpy(&tau, out + 4 * b, 4);
            for (size_t i = lo; i < hi; i++)
                asum += fabs(v[i]);
            if (mode % 3 == 2)
                REQUIRE(tau == 0.004f);
            else
                REQUIRE_MSG(fabs(tau - 1.5 * asum / (double)(hi - lo)) <= 1e-6 * tau, "block %zu tau %g", b, tau);
            for (size_t i = lo; i < hi; i++) {
                float vi = v[i];
                float want = vi >= tau ? tau : vi <= -tau ? -tau : 0.0f;
                unsigned code = (codes[i / 4] >> (2 * (i % 4))) & 3u;
                ck_assert_uint_eq(code, vi >= tau ? 2u : vi <= -tau ? 0u : 1u);
                REQUIRE(o[i] == want);
                cnt[code]++;
            }
        }
        REQUIRE(cnt[0] > 0 && cnt[1] > 0 && cnt[2] > 0);
        free(x); free(r); free(v); free(o); free(out);
    }
}
END_TEST

/* Quality does not depend on the partitioning: encoding a range in one
 * message or in any grain-aligned pieces (the spans the algorithms use)
 * decodes to the same bits and leaves the same residual, for every
 * compressor with blocks (onebit, tbq, graddrop, dgc, fp16). */
START_TEST(test_partition_independent)
{
    static const char *names[] = {"onebit", "tbq", "graddrop", "dgc", "fp16", "fp16"};
    const size_t n = 3 * 65536 + 4096 * 5 + 77;
    float *x = falloc(n), *r1 = falloc(n), *r2 = falloc(n), *o1 = falloc(n), *o2 = falloc(n);
    for (size_t ci = 0; ci < 6; ci++) {
        int kind = hp_comp_find(names[ci]);
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        size_t g = hp_comp_grain(kind, &p), cap;
        unsigned char *msg;
        ck_assert_uint_gt(g, 1);
        p.tbq_block = 2048;
        p.onebit_block = 1024;
        p.sparse_ratio = 0.01;
        p.fp16_block = ci == 5 ? 512 : 0;
        g = hp_comp_grain(kind, &p);
        cap = hp_msg_max_bytes(kind, n, &p);
        msg = malloc(cap);
        for (size_t parts = 2; parts <= 7; parts += 5) {
            hipress_encode_args_t a;
            size_t len;
            int nf;
            fill_grad(x, n, 7 + parts);
            fill_grad(r1, n, 8 + parts);
            for (size_t i = 0; i < n; i++)
                r1[i] *= 0.3f;
            for (size_t i = 1000; i < n; i += 30011)
                x[i] = 40000.0f * (float)i; /* beyond binary16's range */
            memcpy(r2, r1, n * sizeof(float));
            memset(&a, 0, sizeof(a));
            a.in = x;
            a.n = n;
            a.residual = r1;
            a.params = &p;
            a.rng_key[0] = 5;
            ck_assert_int_eq(hp_msg_encode(kind, &a, msg, cap, &len, &nf), HP_OK);
            ck_assert_int_eq(hp_msg_decode(kind, msg, len, n, o1, 0, &p), HP_OK);
            for (size_t q = 0; q < parts; q++) {
                size_t off = hp_span_off(n, parts, q, g), pl = hp_span_len(n, parts, q, g);
                a.in = x + off;
                a.n = pl;
                a.residual = r2 + off;
                a.rng_offset = off;
                ck_assert_int_eq(hp_msg_encode(kind, &a, msg, cap, &len, &nf), HP_OK);
                ck_assert_int_eq(hp_msg_decode(kind, msg, len, pl, o2 + off, 0, &p), HP_OK);
            }
            REQUIRE_MSG(memcmp(o1, o2, n * sizeof(float)) == 0, "%s: %zu pieces decode differently", names[ci], parts);
            REQUIRE_MSG(memcmp(r1, r2, n * sizeof(float)) == 0, "%s: %zu pieces leave another residual", names[ci], parts);
        }
        free(msg);
    }
    free(x), free(r1), free(r2), free(o1), free(o2);
}
END_TEST

/* decode_many (several messages of one range, block by block) gives the
 * bits of decoding one after the other, overwriting or accumulating, on
 * every ISA path; a corrupted message is rejected. */
START_TEST(test_decode_many)
{
    static const char *names[] = {"onebit", "tbq"};
    static const size_t ns[] = {1, 33, 4097, 70001};
    for (size_t ci = 0; ci < 2; ci++)
        for (size_t ni = 0; ni < 4; ni++)
            for (int isa = 1; isa <= 2; isa++) {
                const size_t n = ns[ni];
                int kind = hp_comp_find(names[ci]);
                hp_comp_t *c = hp_comp_get(kind);
                const hp_comp_ext_t *x = hp_comp_ext(kind);
                hipress_comp_params_t p = params_isa(isa);
                float *g = falloc(n), *a = falloc(n), *b = falloc(n);
                const void *pl[5];
                size_t lens[5];
                uint8_t *msgs[5];
                ck_assert_ptr_nonnull(x->decode_many);
                p.onebit_block = 1024;
                p.tbq_block = 2048;
                for (int j = 0; j < 5; j++) {
                    fill_grad(g, n, 50 + (uint64_t)j);
                    msgs[j] = malloc(c->max_payload(n, &p));
                    lens[j] = enc(c, g, NULL, n, &p, msgs[j], c->max_payload(n, &p), 1, NULL);
                    pl[j] = msgs[j];
                }
                for (int acc = 0; acc <= 1; acc++) {
                    fill_grad(a, n, 99);
                    memcpy(b, a, n * sizeof(float));
                    for (int j = 0; j < 5; j++)
                        ck_assert_int_eq(c->decode(pl[j], lens[j], n, a, acc || j > 0, &p), HIPRESS_COMP_OK);
                    ck_assert_int_eq(x->decode_many(pl, lens, 5, n, b, acc, &p), HIPRESS_COMP_OK);
                    REQUIRE_MSG(memcmp(a, b, n * sizeof(float)) == 0, "%s n=%zu isa=%d acc=%d: other bits",
                                names[ci], n, isa, acc);
                }
                /* a bad length or a bad scale in the third message */
                lens[2]--;
                ck_assert_int_eq(x->decode_many(pl, lens, 5, n, b, 0, &p), HIPRESS_COMP_EINVAL);
                lens[2]++;
                {
                    float bad = NAN;
                    memcpy(msgs[2], &bad, 4);
                    ck_assert_int_eq(x->decode_many(pl, lens, 5, n, b, 0, &p), HIPRESS_COMP_EINVAL);
                }
                for (int j = 0; j < 5; j++)
                    free(msgs[j]);
                free(g), free(a), free(b);
            }
}
END_TEST

START_TEST(test_tbq_zero_input)
{
    const size_t n = 1001;
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    hp_comp_t *c = comp("tbq");
    float x[1001], r[1001], o[1001], tau;
    uint8_t out[300];
    size_t len;
    memset(x, 0, sizeof(x));
    memset(r, 0, sizeof(r));
    x[3] = -0.0f;
    len = enc(c, x, r, n, &p, out, sizeof(out), 1, NULL);
    memcpy(&tau, out, 4);
    REQUIRE(hp_f2u(tau) == 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq((out[4 + i / 4] >> (2 * (i % 4))) & 3u, 1u);
    ck_assert_uint_eq(out[4 + n / 4] >> 2, 0); /* padding */
    ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
    for (size_t i = 0; i < n; i++)
        REQUIRE(o[i] == 0.0f && r[i] == 0.0f);
}
END_TEST

/* over T steps: sum of decoded + final residual == sum of inputs */
START_TEST(test_error_feedback)
{
    const size_t n = 9001;
    const int T = 30;
    for (int which = 0; which < 3; which++) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        hp_comp_t *c = comp(which == 0 ? "onebit" : "tbq");
        float *g = falloc(n), *r = falloc(n), *o = falloc(n);
        double *sg = calloc(n, 8), *sd = calloc(n, 8), *tol = calloc(n, 8);
        uint8_t *out;
        double maxabs = 0;
        if (which == 2)
            p.tbq_threshold = 0.01f;
        p.onebit_block = 512;
        out = malloc(c->max_payload(n, &p));
        memset(r, 0, 4 * n);
        for (int t = 0; t < T; t++) {
            size_t len;
            fill_grad(g, n, 1000 + (uint64_t)t);
            for (size_t i = 0; i < n; i++) {
                /* rounding of v = g + r and of r' = v - d, each half an ulp */
                tol[i] += 0x1p-24 * (fabs(g[i]) + 3.0 * fabs(r[i]));
                sg[i] += g[i];
            }
            len = enc(c, g, r, n, &p, out, c->max_payload(n, &p), 1, NULL);
            ck_assert_int_eq(c->decode(out, len, n, o, 0, &p), HIPRESS_COMP_OK);
            for (size_t i = 0; i < n; i++) {
                sd[i] += o[i];
                tol[i] += 0x1p-24 * (fabs(o[i]) + fabs(r[i]));
            }
        }
        for (size_t i = 0; i < n; i++) {
            double err = fabs(sd[i] + r[i] - sg[i]);
            maxabs = fmax(maxabs, fabs(r[i]));
            REQUIRE_MSG(err <= tol[i], "%s step sum off by %g (tol %g) at %zu", c->name, err, tol[i], i);
        }
        /* the residual stays bounded (error feedback converges) */
        REQUIRE_MSG(maxabs < 1.0, "%s residual grew to %g", c->name, maxabs);
        free(g); free(r); free(o); free(sg); free(sd); free(tol); free(out);
    }
}
END_TEST

/* The first tests of the "compressors" case. */
void dense_bounds_tests(TCase *t)
{
    tcase_add_test(t, test_wire_sizes);
    tcase_add_test(t, test_fp16_bf16_rounding);
    tcase_add_test(t, test_fp16_scale_rule);
    tcase_add_test(t, test_fp16_small_values);
    tcase_add_test(t, test_onebit_scales);
    tcase_add_test(t, test_tbq_codes);
    tcase_add_test(t, test_partition_independent);
    tcase_add_test(t, test_decode_many);
    tcase_add_test(t, test_tbq_zero_input);
    tcase_add_test(t, test_error_feedback);
}
