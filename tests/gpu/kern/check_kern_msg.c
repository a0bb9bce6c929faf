/*
 * tests/gpu/kern/check_kern's device messages: malformed messages rejected
 * exactly when the CPU decoder rejects them (check_kern.c's
 * compare_reject, every format), every field of a message's header in
 * device memory, the dense fallback, exceptions and error messages, and the
 * failure flag turned into NaN (nan_if) with the sticky word where the
 * module says it is.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_codec.h"
#include "hp_kern_msg.h"
#include "check_kern.h"

START_TEST(test_reject)
{
    static const char *names[] = {"none", "onebit", "tbq", "terngrad", "graddrop", "fp16", "bf16", "q2", "q4", "q8"};
    static const int fmts[] = {HP_GPU_FMT_NONE, HP_GPU_FMT_ONEBIT, HP_GPU_FMT_TBQ, HP_GPU_FMT_TERNGRAD,
                               HP_GPU_FMT_SPARSE, HP_GPU_FMT_FP16, HP_GPU_FMT_BF16, HP_GPU_FMT_Q, HP_GPU_FMT_Q,
                               HP_GPU_FMT_Q};
    static const size_t ns[] = {1, 33, 4097, 20000};
    for (int k = 0; k < 10; k++) {
        kcase_t t = tc(names[k], fmts[k]);
        t.p.onebit_block = 64;
        t.p.tbq_block = 64;
        t.p.fp16_block = 64;
        t.p.q_block = 64;
        t.p.sparse_ratio = 0.05;
        for (size_t s = 0; s < 4; s++)
            compare_reject(&t, ns[s], 77 + s);
    }
}
END_TEST

/* The header of a message in device memory: every field mutated, against
 * hp_msg_decode; the two forms the device does not decode (the dense
 * fallback `none` and exceptions) rejected, as documented. */
static void devmsg_header(const char *name, int fmt)
{
    kcase_t t = tc(name, fmt);
    const int sparse = fmt == HP_GPU_FMT_SPARSE;
    const size_t n = 1000;
    size_t cap = hp_msg_max_bytes(t.kind, n, &t.p), len = 0, nlen = 0;
    uint8_t *m = malloc(cap), *nm = malloc(HP_MSG_HEADER + 4 * n);
    float *x = malloc(n * 4), *o = malloc(n * 4);
    hipress_encode_args_t a;
    hp_gpu_enc_t e = enc_args(&t, n);
    hp_gpu_dec_t d;
    int nf = 0, bad = 0;

    /* the constants hp_kern_msg.h spells for the module */
    ck_assert_uint_eq(HP_K_MSG_HEADER, HP_MSG_HEADER);
    ck_assert_uint_eq(HP_K_MSG_MAGIC, HP_MSG_MAGIC);
    ck_assert_uint_eq(HP_K_MSG_VERSION, HP_MSG_VERSION);
    ck_assert_uint_eq(HP_K_MSG_NONFINITE, HP_MSG_NONFINITE);
    ck_assert_uint_eq(HP_K_MSG_EXCEPT, HP_MSG_EXCEPT);
    ck_assert_uint_eq(HP_K_MSG_KIND_ERROR, HP_KIND_ERROR);

    fill(x, n, D_GRAD, 5);
    memset(&a, 0, sizeof(a));
    a.in = x;
    a.n = n;
    a.params = &t.p;
    ck_assert_int_eq(hp_msg_encode(t.kind, &a, m, cap, &len, &nf), HP_OK);
    memset(&d, 0, sizeof(d));
    d.fmt = e.fmt;
    d.n = n;
    for (int field = 0; field < 12; field++)
        for (int v = 0; v < 256; v += (field < 4 ? 1 : 37)) {
            uint8_t *mm = malloc(cap + 16);
            int cpu;
            uint32_t w;
            memcpy(mm, m, len);
            memset(mm + len, 0, cap + 16 - len);
            if (field < 4) {
                mm[field] = (uint8_t)v;
            } else if (field < 8) {
                w = (uint32_t)n + (uint32_t)(v - 111) * (field == 4 ? 1u : field == 5 ? 0x100u : field == 6 ? 0x10000u : 0x1000000u);
                memcpy(mm + 4, &w, 4);
            } else {
                w = (uint32_t)(len - HP_MSG_HEADER) + (uint32_t)(v - 111) * (field == 8 ? 1u : field == 9 ? 0x100u : field == 10 ? 0x10000u : 0x1000000u);
                memcpy(mm + 8, &w, 4);
            }
            if (mm[2] & HP_MSG_EXCEPT || (field == 1 && v == hp_kind_none && !sparse)) {
                free(mm);
                continue;   /* below */
            }
            memcpy(&w, mm + 8, 4);
            cpu = (size_t)w <= cap + 16 - HP_MSG_HEADER &&
                  hp_msg_decode(t.kind, mm, HP_MSG_HEADER + w, n, o, 0, &t.p) == HP_OK;
            ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, mm, cap + 16, o),
                             HP_GPU_OK);
            ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
            REQUIRE_MSG(cpu == !bad, "header byte field %d value %d: cpu accepts %d, device %d", field, v, cpu, !bad);
            free(mm);
        }
    /* exceptions and `none`: the host decodes them, the device rejects
     * them -- but `none` for a sparse format, its dense fallback, which
     * the device decodes as the host (both modes, the host's bits) */
    for (int acc = 0; acc < 2; acc++) {
        float *on = malloc(n * 4), *og = malloc(n * 4);
        hipress_encode_args_t an = a;
        fill(on, n, D_GRAD, 9);
        memcpy(og, on, n * 4);
        ck_assert_int_eq(hp_msg_encode(hp_kind_none, &an, nm, HP_MSG_HEADER + 4 * n, &nlen, &nf), HP_OK);
        ck_assert_int_eq(hp_msg_decode(t.kind, nm, nlen, n, on, acc, &t.p), HP_OK);
        d.accumulate = acc;
        ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, nm, nlen, og), HP_GPU_OK);
        d.accumulate = 0;
        ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
        ck_assert_int_eq(bad, !sparse);
        for (size_t i = 0; i < n && sparse; i++)
            REQUIRE_MSG(hp_f2u(on[i]) == hp_f2u(og[i]), "%s: the dense fallback, acc %d: [%zu] cpu %a gpu %a", name,
                        acc, i, on[i], og[i]);
        free(on);
        free(og);
    }
    if (sparse) {
        /* a sparse message with one exception: the host's form, which the
         * device rejects (a device sender never makes it) */
        uint8_t *xm = calloc(1, cap + 16);
        uint32_t k1 = 1, i0 = 0, pl = (uint32_t)(len - HP_MSG_HEADER) + 12;
        float big = 3e38f;
        memcpy(xm, m, HP_MSG_HEADER);
        xm[2] = HP_MSG_EXCEPT;
        memcpy(xm + 8, &pl, 4);
        memcpy(xm + HP_MSG_HEADER, &k1, 4);
        memcpy(xm + HP_MSG_HEADER + 4, &i0, 4);
        memcpy(xm + HP_MSG_HEADER + 8, &big, 4);
        memcpy(xm + HP_MSG_HEADER + 12, m + HP_MSG_HEADER, len - HP_MSG_HEADER);
        ck_assert_int_eq(hp_msg_decode(t.kind, xm, HP_MSG_HEADER + pl, n, o, 0, &t.p), HP_OK);
        ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, xm, cap + 16, o), HP_GPU_OK);
        ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
        ck_assert_int_eq(bad, 1);
        free(xm);
    } else {
        size_t xl = 0, ex = 0;
        uint8_t *xm = malloc(cap + HP_MSG_EXCEPT_BYTES);
        x[3] = 3e38f;
        x[4] = 3e38f;
        a.in = x;
        ck_assert_int_eq(hp_msg_encode_x(t.kind, &a, xm, cap + HP_MSG_EXCEPT_BYTES, HP_SRC_INPUT, &xl, &nf, &ex), HP_OK);
        ck_assert_uint_eq(ex, 2);
        ck_assert_int_eq(hp_msg_decode(t.kind, xm, xl, n, o, 0, &t.p), HP_OK);
        ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, xm, cap + HP_MSG_EXCEPT_BYTES,
                                             o), HP_GPU_OK);
        ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
        ck_assert_int_eq(bad, 1);
        /* the same input encoded on the device: the NaN message */
        e.in = x;
        ck_assert_int_eq(hp_codec_encode_msg(codec(HP_CODEC_PIECE), &e, (uint32_t)t.kind, xm, cap), HP_GPU_OK);
        ck_assert_uint_eq(hp_msg_len(xm, cap), HP_MSG_HEADER);
        ck_assert_uint_eq(xm[2], HP_MSG_NONFINITE);
        free(xm);
    }
    /* an error message (a peer's failure) is rejected: NaN follows */
    hp_msg_error(nm, n);
    ck_assert_int_eq(hp_codec_decode_msg(codec(HP_CODEC_PIECE), &d, (uint32_t)t.kind, nm, cap, o), HP_GPU_OK);
    ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
    ck_assert_int_eq(bad, 1);
    free(m); free(nm); free(x); free(o);
}

START_TEST(test_devmsg_header)
{
    devmsg_header("q4", HP_GPU_FMT_Q);
    devmsg_header("graddrop", HP_GPU_FMT_SPARSE);
}
END_TEST

/* The failure flag turned into NaN on the device: any non-zero byte. */
START_TEST(test_nan_if)
{
    float v[100];
    uint8_t flag[8];
    for (uint32_t bytes = 1; bytes <= 8; bytes *= 2)
        for (int pos = -1; pos < (int)bytes; pos++) {
            for (int i = 0; i < 100; i++)
                v[i] = (float)i;
            memset(flag, 0, sizeof(flag));
            if (pos >= 0)
                flag[pos] = (uint8_t)(1u << (pos % 8));
            flag[bytes % 8] |= bytes < 8 ? 0x80 : 0;   /* beyond `bytes`: never read as set */
            ck_assert_int_eq(hp_codec_nan_if(codec(HP_CODEC_PIECE), v, 100, flag, bytes), HP_GPU_OK);
            for (int i = 0; i < 100; i++)
                ck_assert(pos >= 0 ? isnan(v[i]) : v[i] == (float)i);
        }
    /* the sticky word is where the module says it is */
    ck_assert_ptr_eq(hp_codec_bad_word(codec(HP_CODEC_PIECE)), (uint32_t *)codec(HP_CODEC_PIECE)->ws[HP_WS_INFO] + 2);
}
END_TEST

/* The device messages' tests into the suite's case (check_kern.c). */
void kern_add_msg_tests(TCase *t)
{
    tcase_add_test(t, test_reject);
    tcase_add_test(t, test_devmsg_header);
    tcase_add_test(t, test_nan_if);
}
