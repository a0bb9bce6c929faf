/*
 * check_core (check_core.c): the message header the framework writes --
 * good messages, the non-finite flag, exceptions, malformed input, lengths
 * and the bound on a message's bytes.
 */
#include "check_core.h"

/* ================================================================ messages */

/* Encode n values with compressor `name` into msg (cap bytes); returns the
 * message length. */
static size_t encode_msg(const char *name, const float *in, size_t n, void *msg, size_t cap, int *nonfinite)
{
    int kind = hp_comp_find(name);
    hipress_encode_args_t a;
    size_t len = 0;
    REQUIRE(kind >= 0, "compressor %s not registered", name);
    ck_assert_uint_ge(cap, hp_msg_max_bytes(kind, n, params()));
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.n = n;
    a.params = params();
    ck_assert_int_eq(hp_msg_encode(kind, &a, msg, cap, &len, nonfinite), HP_OK);
    return len;
}

#define MSG_N 37
#define GUARD 8

/* Decode into the middle of a guarded buffer; returns the status and checks
 * nothing outside out[0..n) was written. */
static hp_status_t guarded_decode(int kind, const void *msg, size_t len, size_t n, float *vals, int accumulate)
{
    float buf[MSG_N + 2 * GUARD + 4];
    ck_assert_uint_le(n, MSG_N + 4);
    for (size_t i = 0; i < HP_ARRAY_SIZE(buf); i++)
        buf[i] = -777.0f;
    if (accumulate)
        memcpy(buf + GUARD, vals, n * sizeof(float));
    hp_status_t st = hp_msg_decode(kind, msg, len, n, buf + GUARD, accumulate, params());
    for (size_t i = 0; i < GUARD; i++)
        REQUIRE(buf[i] == -777.0f && buf[GUARD + n + i] == -777.0f, "decode wrote outside its range");
    if (st == HP_OK && n <= MSG_N)
        memcpy(vals, buf + GUARD, n * sizeof(float));
    return st;
}

START_TEST(msg_good)
{
    float in[MSG_N], out[MSG_N];
    unsigned char msg[HP_MSG_HEADER + 4 * MSG_N + 64];
    hp_msg_header_t h;
    int nf = -1;
    const int none = hp_comp_find("none"), fp16 = hp_comp_find("fp16");

    ck_assert_int_ge(none, 0);
    ck_assert_int_ge(fp16, 0);
    ck_assert_int_eq(none, hp_kind_none);
    for (int i = 0; i < MSG_N; i++)
        in[i] = (float)(i * 3 - 50) * 0.25f;   /* exact in fp16 too */

    size_t len = encode_msg("none", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_uint_eq(len, HP_MSG_HEADER + 4 * MSG_N);
    ck_assert_int_eq(nf, 0);
    ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
    ck_assert_uint_eq(h.magic, HP_MSG_MAGIC);
    ck_assert_uint_eq(h.version, HP_MSG_VERSION);
    ck_assert_uint_eq(h.kind, (unsigned)none);
    ck_assert_uint_eq(h.flags, 0);
    ck_assert_uint_eq(h.n, MSG_N);
    ck_assert_uint_eq(h.payload, 4 * MSG_N);
    ck_assert_int_eq(guarded_decode(none, msg, len, MSG_N, out, 0), HP_OK);
    ck_assert_mem_eq(out, in, sizeof(in));
    /* accumulate adds */
    ck_assert_int_eq(guarded_decode(none, msg, len, MSG_N, out, 1), HP_OK);
    for (int i = 0; i < MSG_N; i++)
        ck_assert(out[i] == 2 * in[i]);
    /* a `none` message is accepted where another kind is expected: the dense
     * fallback of sparse compressors */
    ck_assert_int_eq(guarded_decode(fp16, msg, len, MSG_N, out, 0), HP_OK);
    ck_assert_mem_eq(out, in, sizeof(in));

    len = encode_msg("fp16", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_uint_eq(len, HP_MSG_HEADER + 2 * MSG_N + 1); /* halves, one block exponent */
    ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
    ck_assert_uint_eq(h.kind, (unsigned)fp16);
    ck_assert_uint_eq(h.payload, 2 * MSG_N + 1);
    ck_assert_int_eq(guarded_decode(fp16, msg, len, MSG_N, out, 0), HP_OK);
    ck_assert_mem_eq(out, in, sizeof(in));
    /* but an fp16 message is not accepted where `none` is expected */
    ck_assert_int_eq(guarded_decode(none, msg, len, MSG_N, out, 0), HP_ERR_MESSAGE);

    /* zero elements: a header alone */
    len = encode_msg("fp16", in, 0, msg, sizeof(msg), &nf);
    ck_assert_uint_eq(len, HP_MSG_HEADER);
    ck_assert_int_eq(guarded_decode(fp16, msg, len, 0, out, 0), HP_OK);
}
END_TEST

START_TEST(msg_nonfinite)
{
    float in[MSG_N], out[MSG_N];
    unsigned char msg[HP_MSG_HEADER + 4 * MSG_N];
    hp_msg_header_t h;
    int nf = -1;
    const int none = hp_comp_find("none"), fp16 = hp_comp_find("fp16");

    for (int i = 0; i < MSG_N; i++)
        in[i] = (float)i;
    in[5] = NAN;
    /* fp16: header only, flagged, decodes to NaN everywhere */
    size_t len = encode_msg("fp16", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_int_eq(nf, 1);
    ck_assert_uint_eq(len, HP_MSG_HEADER);
    ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
    ck_assert_uint_eq(h.flags, HP_MSG_NONFINITE);
    ck_assert_int_eq(guarded_decode(fp16, msg, len, MSG_N, out, 0), HP_OK);
    for (int i = 0; i < MSG_N; i++)
        ck_assert(isnan(out[i]));
    /* a non-finite message claiming a payload is malformed */
    unsigned char bad[HP_MSG_HEADER + 4];
    memcpy(bad, msg, HP_MSG_HEADER);
    uint32_t p4 = 4;
    memcpy(bad + 8, &p4, 4);
    memset(bad + HP_MSG_HEADER, 0, 4);
    ck_assert_int_eq(guarded_decode(fp16, bad, sizeof(bad), MSG_N, out, 0), HP_ERR_MESSAGE);
    /* Inf counts as non-finite too */
    in[5] = -INFINITY;
    encode_msg("fp16", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_int_eq(nf, 1);
    /* `none` carries NaN as a value: only that element is NaN */
    in[5] = NAN;
    len = encode_msg("none", in, MSG_N, msg, sizeof(msg), &nf);
    ck_assert_int_eq(nf, 0);
    ck_assert_int_eq(guarded_decode(none, msg, len, MSG_N, out, 0), HP_OK);
    for (int i = 0; i < MSG_N; i++)
        ck_assert(i == 5 ? isnan(out[i]) : out[i] == (float)i);
    /* an error message makes the decoder report the peer's failure */
    len = hp_msg_error(msg, MSG_N);
    ck_assert_uint_eq(len, HP_MSG_HEADER);
    ck_assert_int_eq(guarded_decode(fp16, msg, len, MSG_N, out, 0), HP_ERR_PEER);
}
END_TEST

/* Exceptions: a partial sum of finite values that overflowed (or a value no
 * format carries) travels verbatim, the rest compressed; the source decides
 * whether NaN/Inf is the input's own (a non-finite message) or an overflow. */
START_TEST(msg_except)
{
    const char *names[] = {"fp16", "bf16", "onebit", "tbq", "terngrad", "graddrop", "dgc"};
    enum { N = 300 };
    const float specials[] = {INFINITY, -INFINITY, NAN, 0x1.8p127f, -0x1p126f};
    const uint32_t at[] = {0, 17, 150, 151, 299};
    for (size_t ci = 0; ci < HP_ARRAY_SIZE(names); ci++) {
        const int kind = hp_comp_find(names[ci]);
        const size_t cap = hp_msg_max_bytes(kind, N, params()) + HP_MSG_EXCEPT_BYTES;
        unsigned char *msg = malloc(cap), *bad = malloc(cap);
        float in[N], keep[N], res[N], out[N], acc[N];
        hipress_encode_args_t a;
        size_t len, k;
        int nf;
        hp_msg_header_t h;
        uint32_t u;

        for (int i = 0; i < N; i++)
            in[i] = (float)((i * 37) % 101 - 50) * 0.01f;
        for (size_t j = 0; j < HP_ARRAY_SIZE(at); j++)
            in[at[j]] = specials[j];
        memcpy(keep, in, sizeof(in));
        memset(res, 0, sizeof(res));
        memset(&a, 0, sizeof(a));
        a.in = in;
        a.n = N;
        a.params = params();
        a.residual = (hp_comp_get(kind)->flags & HIPRESS_COMP_EF) ? res : NULL;

        /* a sum: the five travel as exceptions, the input is left as it was */
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_SUM, &len, &nf, &k), HP_OK);
        REQUIRE(nf == 0 && k == 5, "%s: nf %d k %zu", names[ci], nf, k);
        ck_assert_mem_eq(in, keep, sizeof(in));
        ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
        ck_assert_uint_eq(h.flags, HP_MSG_EXCEPT);
        ck_assert_int_eq(hp_msg_decode(kind, msg, len, N, out, 0, params()), HP_OK);
        for (int i = 0; i < N; i++) {
            int sp = -1;
            for (size_t j = 0; j < HP_ARRAY_SIZE(at); j++)
                sp = at[j] == (uint32_t)i ? (int)j : sp;
            if (sp >= 0)
                REQUIRE(memcmp(&out[i], &specials[sp], 4) == 0, "%s: element %d", names[ci], i);
            else
                REQUIRE(isfinite(out[i]) && fabsf(out[i]) < 10.0f, "%s: element %d is %g", names[ci], i, out[i]);
        }
        /* accumulate: prev + the exception's value, exactly */
        for (int i = 0; i < N; i++)
            acc[i] = 1.5f;
        ck_assert_int_eq(hp_msg_decode(kind, msg, len, N, acc, 1, params()), HP_OK);
        ck_assert(acc[0] == INFINITY && acc[17] == -INFINITY && isnan(acc[150]));
        ck_assert(acc[151] == 1.5f + 0x1.8p127f && acc[299] == 1.5f - 0x1p126f);

        /* the decoder's checks */
        memcpy(bad, msg, len);
        u = 0;
        memcpy(bad + HP_MSG_HEADER, &u, 4);                  /* k = 0 */
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        u = HP_MSG_MAX_EXCEPT + 1;
        memcpy(bad + HP_MSG_HEADER, &u, 4);                  /* too many */
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        memcpy(bad, msg, len);
        u = 17;
        memcpy(bad + HP_MSG_HEADER + 4, &u, 4);              /* 17, 17: not increasing */
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        memcpy(bad, msg, len);
        u = N;
        memcpy(bad + HP_MSG_HEADER + 4 + 8 * 4, &u, 4);      /* index n */
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        memcpy(bad, msg, len);
        {
            float small = 1.0f;
            memcpy(bad + HP_MSG_HEADER + 8, &small, 4);      /* a value the format carries */
        }
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        memcpy(bad, msg, len);
        bad[2] = HP_MSG_EXCEPT | HP_MSG_NONFINITE;
        ck_assert_int_eq(hp_msg_decode(kind, bad, len, N, out, 0, params()), HP_ERR_MESSAGE);
        ck_assert_int_eq(hp_msg_decode(kind, msg, len - 1, N, out, 0, params()), HP_ERR_MESSAGE);

        /* the input's own Inf/NaN, or a known non-finite source: the partition is NaN */
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_INPUT, &len, &nf, &k), HP_OK);
        REQUIRE(nf == 1 && k == 0 && len == HP_MSG_HEADER, "%s: input", names[ci]);
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_BAD, &len, &nf, &k), HP_OK);
        REQUIRE(nf == 1 && k == 0, "%s: bad", names[ci]);
        /* without room for the list: non-finite (a dense format's
         * hp_msg_max_bytes has none; a sparse one's holds its dense fallback) */
        if (!(hp_comp_get(kind)->flags & HIPRESS_COMP_SPARSE)) {
            ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, hp_msg_max_bytes(kind, N, params()),
                                             HP_SRC_SUM, &len, &nf, &k), HP_OK);
            REQUIRE(nf == 1 && k == 0, "%s: no room", names[ci]);
        }
        /* more than HP_MSG_MAX_EXCEPT: non-finite */
        for (int i = 0; i < HP_MSG_MAX_EXCEPT + 1; i++)
            in[2 * i] = INFINITY;
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_SUM, &len, &nf, &k), HP_OK);
        REQUIRE(nf == 1 && k == 0, "%s: many", names[ci]);
        /* a finite input: an ordinary message whatever the source */
        for (int i = 0; i < N; i++)
            in[i] = (float)(i % 7) - 3.0f;
        ck_assert_int_eq(hp_msg_encode_x(kind, &a, msg, cap, HP_SRC_SUM, &len, &nf, &k), HP_OK);
        ck_assert_int_eq(hp_msg_header(msg, len, &h), HP_OK);
        REQUIRE(nf == 0 && k == 0 && h.flags == 0, "%s: finite", names[ci]);
        free(msg);
        free(bad);
    }
}
END_TEST

START_TEST(msg_malformed)
{
    float in[MSG_N], out[MSG_N];
    unsigned char good[HP_MSG_HEADER + 4 * MSG_N], m[sizeof(good) + 8];
    hp_msg_header_t h;
    int nf;
    const int fp16 = hp_comp_find("fp16");

    for (int i = 0; i < MSG_N; i++)
        in[i] = (float)i;
    size_t len = encode_msg("fp16", in, MSG_N, good, sizeof(good), &nf);

    /* truncated: every shorter length is rejected, header or payload */
    for (size_t l = 0; l < len; l++) {
        REQUIRE(guarded_decode(fp16, good, l, MSG_N, out, 0) == HP_ERR_MESSAGE, "length %zu accepted", l);
        if (l < HP_MSG_HEADER)
            ck_assert_int_eq(hp_msg_header(good, l, &h), HP_ERR_MESSAGE);
    }
    ck_assert_int_eq(hp_msg_header(NULL, len, &h), HP_ERR_MESSAGE);
    /* trailing bytes the header does not account for */
    memcpy(m, good, len);
    ck_assert_int_eq(guarded_decode(fp16, m, len + 2, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* bad magic */
    memcpy(m, good, len);
    m[0] ^= 0xff;
    ck_assert_int_eq(hp_msg_header(m, len, &h), HP_ERR_MESSAGE);
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* wrong version */
    memcpy(m, good, len);
    m[3] = HP_MSG_VERSION + 1;
    ck_assert_int_eq(hp_msg_header(m, len, &h), HP_ERR_MESSAGE);
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* unknown flag bits */
    memcpy(m, good, len);
    m[2] = 0x80;
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* wrong n: the receiver expects another element count */
    ck_assert_int_eq(guarded_decode(fp16, good, len, MSG_N - 1, out, 0), HP_ERR_MESSAGE);
    ck_assert_int_eq(guarded_decode(fp16, good, len, MSG_N + 1, out, 0), HP_ERR_MESSAGE);
    /* a header whose n lies, consistent length otherwise */
    memcpy(m, good, len);
    uint32_t n2 = MSG_N + 1;
    memcpy(m + 4, &n2, 4);
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* payload length field disagrees with the bytes received */
    memcpy(m, good, len);
    uint32_t pl = 2 * MSG_N + 3;
    memcpy(m + 8, &pl, 4);
    ck_assert_int_eq(hp_msg_header(m, len, &h), HP_ERR_MESSAGE);
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* header and length agree but the payload is too short for n: the
     * compressor's own check */
    memcpy(m, good, len - 2);
    pl = 2 * MSG_N - 1;
    memcpy(m + 8, &pl, 4);
    ck_assert_int_eq(hp_msg_header(m, len - 2, &h), HP_OK);
    ck_assert_int_eq(guarded_decode(fp16, m, len - 2, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* an unregistered kind, or another registered kind */
    memcpy(m, good, len);
    m[1] = 200;
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* the test knob's corruption (byte 8 flipped) is caught */
    memcpy(m, good, len);
    m[8] ^= 0x5a;
    ck_assert_int_eq(guarded_decode(fp16, m, len, MSG_N, out, 0), HP_ERR_MESSAGE);
    /* a `none` message of the wrong payload size */
    unsigned char nm[HP_MSG_HEADER + 4 * MSG_N];
    len = encode_msg("none", in, MSG_N, nm, sizeof(nm), &nf);
    pl = 4 * MSG_N - 4;
    memcpy(nm + 8, &pl, 4);
    ck_assert_int_eq(guarded_decode(fp16, nm, len - 4, MSG_N, out, 0), HP_ERR_MESSAGE);
}
END_TEST

/* A message's length read from its header (hp_msg_len), and the check of a
 * transport that knows how many bytes arrived (hp_msg_arrived). */
START_TEST(msg_len)
{
    float in[MSG_N], out[MSG_N];
    unsigned char good[HP_MSG_HEADER + 4 * MSG_N], m[sizeof(good) + 64];
    int nf;
    const int fp16 = hp_comp_find("fp16");

    for (int i = 0; i < MSG_N; i++)
        in[i] = (float)i;
    size_t len = encode_msg("fp16", in, MSG_N, good, sizeof(good), &nf);
    /* in a buffer of any capacity that holds it */
    memset(m, 0x5a, sizeof(m));
    memcpy(m, good, len);
    ck_assert_uint_eq(hp_msg_len(m, len), len);
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), len);
    /* claims more than the capacity, too short for a header, not a message */
    ck_assert_uint_eq(hp_msg_len(m, len - 1), 0);
    ck_assert_uint_eq(hp_msg_len(m, HP_MSG_HEADER - 1), 0);
    ck_assert_uint_eq(hp_msg_len(NULL, sizeof(m)), 0);
    m[3] ^= 0xff;
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    /* error, non-finite and empty messages: a header alone */
    ck_assert_uint_eq(hp_msg_len(m, hp_msg_error(m, MSG_N)), HP_MSG_HEADER);
    in[3] = NAN;
    ck_assert_uint_eq(hp_msg_len(m, encode_msg("fp16", in, MSG_N, m, sizeof(m), &nf)), HP_MSG_HEADER);
    ck_assert_int_eq(nf, 1);
    ck_assert_uint_eq(hp_msg_len(m, encode_msg("fp16", in, 0, m, sizeof(m), &nf)), HP_MSG_HEADER);

    /* exactly the message arrived: left alone */
    memcpy(m, good, len);
    hp_msg_arrived(m, len, sizeof(m));
    ck_assert_int_eq(memcmp(m, good, len), 0);
    /* fewer bytes than the header claims (what is after them is from
     * before): invalid, rejected without reading them */
    hp_msg_arrived(m, len - 2, sizeof(m));
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    ck_assert_int_eq(guarded_decode(fp16, m, hp_msg_len(m, sizeof(m)), MSG_N, out, 0), HP_ERR_MESSAGE);
    /* more bytes than it claims, nothing at all, more than the capacity */
    memcpy(m, good, len);
    hp_msg_arrived(m, len + 4, sizeof(m));
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    memcpy(m, good, len);
    hp_msg_arrived(m, 0, sizeof(m));
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    memcpy(m, good, len);
    hp_msg_arrived(m, len, len - 1);
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
    /* the test knob's corruption (HIPRESS_TEST_CORRUPT: byte 8 flipped),
     * all of it arrived: invalid */
    memcpy(m, good, len);
    m[8] ^= 0x5a;
    hp_msg_arrived(m, len, sizeof(m));
    ck_assert_uint_eq(hp_msg_len(m, sizeof(m)), 0);
}
END_TEST

START_TEST(msg_max_bytes)
{
    for (int k = 0; k < hp_comp_count(); k++)
        for (size_t n = 0; n < 5000; n += 37)
            ck_assert_uint_ge(hp_msg_max_bytes(k, n, params()), HP_MSG_HEADER);
    ck_assert_uint_eq(hp_msg_max_bytes(hp_comp_find("none"), 1000, params()), HP_MSG_HEADER + 4000);
    ck_assert_uint_eq(hp_msg_max_bytes(hp_comp_find("fp16"), 1000, params()), HP_MSG_HEADER + 2000 + 1);
    /* an output buffer below the bound is refused, not overrun */
    float in[4] = {1, 2, 3, 4};
    unsigned char out[HP_MSG_HEADER + 7];
    hipress_encode_args_t a;
    size_t len;
    int nf;
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.n = 4;
    a.params = params();
    hp_log_level = HP_LOG_NONE;   /* the refusals below are expected: no warning */
    ck_assert_int_ne(hp_msg_encode(hp_comp_find("fp16"), &a, out, sizeof(out), &len, &nf), HP_OK);
    ck_assert_int_ne(hp_msg_encode(hp_comp_find("none"), &a, out, sizeof(out), &len, &nf), HP_OK);
    ck_assert_int_ne(hp_msg_encode(-1, &a, out, sizeof(out), &len, &nf), HP_OK);
    hp_log_level = HP_LOG_WARN;
}
END_TEST

/* The "message" case. */
void core_msg_tests(TCase *tc)
{
    tcase_add_test(tc, msg_good);
    tcase_add_test(tc, msg_nonfinite);
    tcase_add_test(tc, msg_except);
    tcase_add_test(tc, msg_malformed);
    tcase_add_test(tc, msg_len);
    tcase_add_test(tc, msg_max_bytes);
}
