/*
 * check_comp_dense (check_comp_dense.c): the rejection of malformed
 * messages (sizes, then contents) and the round trip of every dense
 * compressor through the framework's message.
 */
#include "check_comp_dense.h"

/* ------------------------------------------------------ malformed messages */

static int dec(hp_comp_t *c, const uint8_t *msg, size_t len, size_t n, const hipress_comp_params_t *p)
{
    float *o = falloc(n + 16);
    int rc;
    for (size_t i = 0; i < n + 16; i++)
        o[i] = 1.0f;
    rc = c->decode(msg, len, n, o, 1, p);
    for (size_t i = n; i < n + 16; i++)
        REQUIRE_MSG(o[i] == 1.0f, "%s wrote past out[n)", c->name);
    free(o);
    return rc;
}

START_TEST(test_reject_size)
{
    const size_t n = 4097;
    float *x = falloc(n);
    uint8_t *e = malloc(4 * n + 64);
    fill_grad(x, n, 51);
    for (size_t d = 0; d < 5; d++) {
        hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
        hp_comp_t *c = comp(dense_names[d]);
        size_t len = enc(c, x, NULL, n, &p, e, c->max_payload(n, &p), 1, NULL);
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        ck_assert_int_eq(dec(c, e, len - 1, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len + 1, n, &p), HIPRESS_COMP_EINVAL);
        /* (n + 1 may fit the padding of a packed format: n - 1 and n + 64 do not) */
        ck_assert_int_eq(dec(c, e, len, n - 1, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len, n + 64, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, 0, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len / 2, n, &p), HIPRESS_COMP_EINVAL);
    }
    free(x); free(e);
}
END_TEST

static void put_f(uint8_t *p, float f) { memcpy(p, &f, 4); }

START_TEST(test_reject_content)
{
    const size_t n = 1001; /* padding bits in every format */
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float x[1001];
    uint8_t e[4200], m[4200];
    size_t len;
    hp_comp_t *c;
    fill_grad(x, n, 61);
    x[10] = 0.05f;
    x[11] = -0.05f;

    /* fp16 / bf16: NaN and Inf halves (a finite input never gives Inf) */
    for (int t = 0; t < 2; t++) {
        const uint16_t badh[] = {t ? 0x7fc1 : 0x7e01, t ? 0xff80 : 0xfc00, t ? 0x7f80 : 0x7c00};
        c = comp(t ? "bf16" : "fp16");
        len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        for (size_t at = 0; at < n; at += 333) {
            for (int k = 0; k < 3; k++) {
                memcpy(m, e, len);
                memcpy(m + 2 * at, &badh[k], 2);
                ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
            }
        }
    }

    /* fp16: block exponents in range and by the rule (four blocks of 256,
     * the last one short) */
    c = comp("fp16");
    p.fp16_block = 256;
    len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
    ck_assert_uint_eq(len, 2 * n + 4);
    {
        uint8_t *ex = m + 2 * n;
        const int8_t bade[] = {-128, -113, 127};
        for (int k = 0; k < 3; k++) {
            memcpy(m, e, len);
            ex[1] = (uint8_t)bade[k];
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        memcpy(m, e, len);
        ex[3] = (uint8_t)(int8_t)HP_F16_EMIN; /* another valid scale: decodes */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        memcpy(m, e, len);
        for (size_t i = 512; i < 768; i++) {  /* block 2: largest half below 2^15 */
            uint16_t one = 0x3c00;
            memcpy(m + 2 * i, &one, 2);
        }
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        ex[2] = (uint8_t)HP_F16_EMAX;         /* allowed with the largest exponent */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        memset(m + 2 * 512, 0, 512);          /* block 2 all zero: e 0 or EMAX */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        ex[2] = 0;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        ex[2] = 5;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        memset(m + 2 * 768, 0x80, 2 * (n - 768)); /* the short block all -0... */
        for (size_t i = 768; i < n; i++)
            m[2 * i] = 0;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL); /* ...with its e */
        ex[3] = 0;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        p.fp16_block = 100; /* not a power of two */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
        p.fp16_block = 16;  /* below 32 */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
        p.fp16_block = 0;
    }

    /* onebit */
    c = comp("onebit");
    p.onebit_block = 256;
    len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
    {
        size_t nb = (n + 255) / 256, bits = 8 * nb;
        const float badv[] = {NAN, INFINITY, -INFINITY};
        for (int k = 0; k < 3; k++) {
            memcpy(m, e, len);
            put_f(m + 8, badv[k]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
            memcpy(m, e, len);
            put_f(m + 4, badv[k]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        memcpy(m, e, len);
        put_f(m, -0.1f); /* s+ < 0 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m + 4, 0.1f); /* s- > 0 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        m[bits + n / 8] |= (uint8_t)(1u << (n % 8)); /* first padding bit */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        m[len - 1] |= 0x80; /* last padding bit of the last word */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        memset(m + bits, 0, 32); /* block 0 all clear, but s+ != 0 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        memset(m + bits, 0xff, 32); /* block 0 all set, but s- != 0 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        p.onebit_block = 100; /* not a power of two */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
        p.onebit_block = 256;
    }

    /* tbq (scale 1: codes other than 1 in every block) */
    c = comp("tbq");
    p.tbq_scale = 1.0f;
    len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
    {
        const float badt[] = {NAN, INFINITY, -0.001f, -0.0f};
        for (int k = 0; k < 4; k++) {
            memcpy(m, e, len);
            put_f(m, badt[k]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        memcpy(m, e, len);
        m[4 + 100] |= 0x0c; /* code 3 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        m[len - 1] |= 0x40; /* padding */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m, 0.0f); /* tau 0 needs every code 1 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memset(m + 4, 0x55, len - 4);
        m[len - 1] = 0x01;
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
    }
    /* tbq with four blocks: each tau is checked, and a zero tau constrains
     * its own block only */
    p.tbq_block = 256;
    len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
    ck_assert_uint_eq(len, 16 + (n + 3) / 4);
    {
        memcpy(m, e, len);
        put_f(m + 8, NAN);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m + 12, -1.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m + 4, 0.0f);   /* block 1 (elements 256..511) must be all code 1 */
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memset(m + 16 + 64, 0x55, 64);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        p.tbq_block = 100;    /* not a power of two */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
    }
    p.tbq_block = 4096;

    /* terngrad */
    c = comp("terngrad");
    for (unsigned b = 1; b <= 8; b *= 2) {
        p.terngrad_bits = b;
        len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        const float badg[] = {-0.001f, 0.0f, -0.0f, NAN, INFINITY, 0x1.2p127f};
        for (int k = 0; k < 6; k++) {
            memcpy(m, e, len);
            put_f(m + 4, badg[k]);
            REQUIRE_MSG(dec(c, m, len, n, &p) == HIPRESS_COMP_EINVAL, "b=%u gap %g", b, badg[k]);
        }
        const float badm[] = {NAN, -INFINITY, 0x1p126f, -0x1p126f};
        for (int k = 0; k < 4; k++) {
            memcpy(m, e, len);
            put_f(m, badm[k]);
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
            ck_assert_int_eq(dec(c, m, 8, n, &p), HIPRESS_COMP_EINVAL);
        }
        if ((n * b) % 8) {
            memcpy(m, e, len);
            m[len - 1] |= 0x80;
            ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        }
        /* length: the pairs and the codes exactly */
        ck_assert_int_eq(dec(c, e, 8, n, &p), HIPRESS_COMP_EINVAL);
        ck_assert_int_eq(dec(c, e, len - 1, n, &p), HIPRESS_COMP_EINVAL);
        /* a min-only block (gap +0) has codes 0 */
        memcpy(m, e, len);
        put_f(m + 4, 0.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memset(m + 8, 0, len - 8);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_OK);
        put_f(m + 4, -0.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        /* with blocks of 256: a bad pair in the last block */
        p.terngrad_block = 256;
        len = enc(c, x, NULL, n, &p, e, sizeof(e), 1, NULL);
        ck_assert_uint_eq(len, 8 * 4 + (n * b + 7) / 8);
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_OK);
        memcpy(m, e, len);
        put_f(m + 24 + 4, -1.0f);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        memcpy(m, e, len);
        put_f(m + 24, NAN);
        ck_assert_int_eq(dec(c, m, len, n, &p), HIPRESS_COMP_EINVAL);
        p.terngrad_block = 100; /* not a power of two */
        ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
        p.terngrad_block = 0;
    }
    p.terngrad_bits = 3;
    ck_assert_int_eq(dec(c, e, len, n, &p), HIPRESS_COMP_EINVAL);
}
END_TEST

/* a message through the framework: header + payload, decoded by kind */
START_TEST(test_msg_roundtrip)
{
    const size_t n = 12345;
    hipress_comp_params_t p = params_isa(HP_ISA_AUTO);
    float *x = falloc(n), *o = falloc(n), *r = falloc(n);
    uint8_t *msg = malloc(4 * n + 64);
    fill_grad(x, n, 71);
    for (size_t d = 0; d < 5; d++) {
        int kind = hp_comp_find(dense_names[d]), nf = 1;
        hp_comp_t *c = hp_comp_get(kind);
        hipress_encode_args_t a;
        size_t len;
        double err = 0, norm = 0;
        memset(&a, 0, sizeof(a));
        memset(r, 0, 4 * n);
        a.in = x;
        a.residual = (c->flags & HIPRESS_COMP_EF) ? r : NULL;
        a.n = n;
        a.params = &p;
        ck_assert_int_eq(hp_msg_encode(kind, &a, msg, hp_msg_max_bytes(kind, n, &p), &len, &nf), HP_OK);
        ck_assert_int_eq(nf, 0);
        ck_assert_uint_eq(len, HP_MSG_HEADER + expected_payload(c->name, n, &p));
        ck_assert_int_eq(hp_msg_decode(kind, msg, len, n, o, 0, &p), HP_OK);
        for (size_t i = 0; i < n; i++) {
            err += ((double)o[i] - x[i]) * ((double)o[i] - x[i]);
            norm += (double)x[i] * x[i];
        }
        /* loose sanity of the relative error of one encode */
        REQUIRE_MSG(sqrt(err / norm) < (d < 2 ? 1e-2 : 1.0), "%s rel err %g", c->name, sqrt(err / norm));
        ck_assert_int_eq(hp_msg_decode(kind, msg, len - 1, n, o, 0, &p), HP_ERR_MESSAGE);
    }
    free(x); free(o); free(r); free(msg);
}
END_TEST

/* The last test of the "compressors" case. */
void dense_roundtrip_tests(TCase *t)
{
    tcase_add_test(t, test_msg_roundtrip);
}

/* The "malformed" case. */
void dense_malformed_tests(TCase *t)
{
    tcase_add_test(t, test_reject_size);
    tcase_add_test(t, test_reject_content);
}
