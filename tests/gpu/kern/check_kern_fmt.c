/*
 * tests/gpu/kern/check_kern's formats: every format's encode and decode through
 * the codec against the CPU compressor (check_kern.c's compare_encode),
 * swept over sizes, blocks, pieces, parameters and kinds of data; the q
 * formats' hook, and fp16's block rule against the CPU decoder.
 */
#include <check.h>
#include <string.h>
#include "hp_comp.h"
#include "hp_codec.h"
#include "hp_kern.h"
#include "check_kern.h"

static const size_t sizes[] = {1, 7, 31, 32, 33, 100, 2047, 2048, 2049, 4095, 4096, 4097,
                               16383, 16384, 16385, 40000, 65537, 200003};

static void sweep(kcase_t t, int all_data)
{
    for (size_t s = 0; s < HP_ARRAY_SIZE(sizes); s++)
        for (int d = 0; d < D_N; d++) {
            if (!all_data && d != D_GRAD && d != D_NAN && d != D_TIES && d != D_WIDE)
                continue;
            compare_encode(&t, sizes[s], d, 1000 * s + (uint64_t)d);
        }
}

START_TEST(test_none)
{
    kcase_t t = tc("none", HP_GPU_FMT_NONE);
    sweep(t, 1);
}
END_TEST

START_TEST(test_onebit)
{
    static const uint32_t blocks[] = {32, 64, 2048, 4096, 16384, 32768};
    kcase_t t = tc("onebit", HP_GPU_FMT_ONEBIT);
    for (int resid = 0; resid < 2; resid++)
        for (size_t b = 0; b < HP_ARRAY_SIZE(blocks); b++) {
            t.p.onebit_block = blocks[b];
            t.resid = resid;
            t.overflow = 0;
            sweep(t, b == 3);
            if (resid) {
                t.overflow = 1;
                sweep(t, 0);
            }
        }
}
END_TEST

START_TEST(test_onebit_pieces)
{
    /* small pieces: every piece boundary of the copies */
    kcase_t t = tc("onebit", HP_GPU_FMT_ONEBIT);
    t.p.onebit_block = 64;
    t.piece = 100;   /* rounded up to whole blocks */
    t.resid = 1;
    sweep(t, 1);
}
END_TEST

START_TEST(test_tbq)
{
    static const uint32_t blocks[] = {32, 2048, 4096, 65536};
    static const float thr[] = {0.0f, 0.003f};
    static const float scale[] = {1.0f, 0.37f};
    kcase_t t = tc("tbq", HP_GPU_FMT_TBQ);
    for (int resid = 0; resid < 2; resid++)
        for (size_t b = 0; b < HP_ARRAY_SIZE(blocks); b++)
            for (int k = 0; k < 2; k++) {
                t.p.tbq_block = blocks[b];
                t.p.tbq_threshold = thr[k];
                t.p.tbq_scale = scale[k];
                t.resid = resid;
                t.overflow = 0;
                sweep(t, b == 2 && k == 0);
                if (resid) {
                    t.overflow = 1;
                    sweep(t, 0);
                }
            }
    t.p.tbq_block = 32;
    t.p.tbq_threshold = 0.0f;
    t.piece = 70;
    t.resid = 1;
    t.overflow = 0;
    sweep(t, 1);
}
END_TEST

START_TEST(test_terngrad)
{
    static const uint32_t bits[] = {1, 2, 4, 8};
    static const uint32_t blocks[] = {32, 4096, 65536};
    kcase_t t = tc("terngrad", HP_GPU_FMT_TERNGRAD);
    for (size_t k = 0; k < 3; k++)
        for (size_t b = 0; b < 4; b++) {
            t.p.terngrad_block = blocks[k];
            t.p.terngrad_bits = bits[b];
            sweep(t, b == 1 && k == 1);
        }
}
END_TEST

START_TEST(test_terngrad_signed_zero)
{
    /* min and max of signed zeros: which zero the CPU keeps */
    kcase_t t = tc("terngrad", HP_GPU_FMT_TERNGRAD);
    for (size_t n = 1; n < 5000; n = n * 3 + 1)
        for (uint64_t s = 0; s < 20; s++)
            compare_encode(&t, n, D_SIGNED_ZERO, s);
}
END_TEST

START_TEST(test_q)
{
    /* q2, q4, q8: every width, blocks below, at and above a chunk, both
     * roundings, with and without a residual, residuals that overflow */
    static const char *names[] = {"q2", "q4", "q8"};
    static const uint32_t blocks[] = {32, 512, 4096, 65536};
    for (size_t w = 0; w < 3; w++) {
        kcase_t t = tc(names[w], HP_GPU_FMT_Q);
        for (size_t k = 0; k < HP_ARRAY_SIZE(blocks); k++)
            for (uint32_t rnd_ = 0; rnd_ < 2; rnd_++)
                for (int resid = 0; resid < 2; resid++) {
                    t.p.q_block = blocks[k];
                    t.p.q_rounding = rnd_;
                    t.resid = resid;
                    t.overflow = 0;
                    sweep(t, k == 1 && resid);
                    if (resid && k < 2) {
                        t.overflow = 1;
                        sweep(t, 0);
                    }
                }
    }
}
END_TEST

START_TEST(test_q_signed_zero)
{
    /* which zero the CPU's min and max keep, with v = x + r too */
    kcase_t t = tc("q4", HP_GPU_FMT_Q);
    for (int resid = 0; resid < 2; resid++) {
        t.resid = resid;
        for (size_t n = 1; n < 5000; n = n * 3 + 1)
            for (uint64_t s = 0; s < 10; s++)
                compare_encode(&t, n, D_SIGNED_ZERO, s);
    }
}
END_TEST

START_TEST(test_q_hook)
{
    /* the hook's format: bits, block, rounding and the encoder's own size;
     * settings the encoder rejects have no device form either */
    static const char *names[] = {"q2", "q4", "q8"};
    for (unsigned w = 0; w < 3; w++) {
        kcase_t t = tc(names[w], HP_GPU_FMT_Q);
        hp_gpu_fmt_t f;
        t.p.q_block = 1024;
        t.p.q_rounding = 1;
        ck_assert_int_eq(hp_comp_gpu_fmt(t.kind, &t.p, 100003, 0, &f), HP_OK);
        ck_assert_uint_eq(f.id, HP_GPU_FMT_Q);
        ck_assert_uint_eq(f.block, 1024);
        ck_assert_uint_eq(f.iarg[0], 2u << w);
        ck_assert_uint_eq(f.iarg[1], 1);
        ck_assert_uint_eq(f.payload, hp_comp_get(t.kind)->max_payload(100003, &t.p));
        t.p.q_rounding = 2;
        ck_assert_int_eq(hp_comp_gpu_fmt(t.kind, &t.p, 100003, 0, &f), HP_ERR_INVALID);
        t.p.q_rounding = 0;
        t.p.q_block = 48;
        ck_assert_int_eq(hp_comp_gpu_fmt(t.kind, &t.p, 100003, 0, &f), HP_ERR_INVALID);
    }
}
END_TEST

START_TEST(test_sparse)
{
    static const uint32_t blocks[] = {32, 1024, 65536};
    static const double ratios[] = {0.001, 0.01, 0.3};
    kcase_t t = tc("graddrop", HP_GPU_FMT_SPARSE);
    for (size_t b = 0; b < HP_ARRAY_SIZE(blocks); b++)
        for (size_t q = 0; q < HP_ARRAY_SIZE(ratios); q++)
            for (int resid = 0; resid < 2; resid++) {
                t.p.sparse_block = blocks[b];
                t.p.sparse_ratio = ratios[q];
                t.resid = resid;
                t.overflow = 0;
                sweep(t, b == 1 || q == 0);
                if (resid && q == 1) {
                    t.overflow = 1;
                    sweep(t, 0);
                }
            }
}
END_TEST

START_TEST(test_dgc_state)
{
    /* dgc's encoder with its momentum state (u = m u + g) */
    kcase_t t = tc("dgc", HP_GPU_FMT_SPARSE);
    t.p.dgc_momentum = 0.9f;
    t.p.sparse_block = 4096;
    for (int resid = 0; resid < 2; resid++) {
        t.resid = resid;
        t.state = 1;
        sweep(t, 1);
    }
}
END_TEST

/* fp16 and bf16: the sizes of the task (tails of blocks of 32 and 1024,
 * one piece and several), every data kind and the edges. */
static const size_t half_sizes[] = {1, 31, 1023, 1024, 1025, 4097, 100003};

static void sweep_halves(kcase_t t)
{
    for (size_t s = 0; s < HP_ARRAY_SIZE(half_sizes); s++)
        for (int d = 0; d <= D_EDGE; d++)
            compare_encode(&t, half_sizes[s], d, 5000 * s + (uint64_t)d);
}

START_TEST(test_fp16)
{
    static const uint32_t blocks[] = {32, 1024, 0 /* the default: 1024 */, 4096};
    kcase_t t = tc("fp16", HP_GPU_FMT_FP16);
    for (size_t b = 0; b < HP_ARRAY_SIZE(blocks); b++) {
        t.p.fp16_block = blocks[b];
        sweep_halves(t);
    }
    /* pieces: every piece boundary of the copies (100 -> 128, whole blocks) */
    t.p.fp16_block = 32;
    t.piece = 100;
    sweep_halves(t);
    /* a value that scales to [65520, 65536) in every block of 32, beside
     * values that round to each side of binary16's ties */
    for (uint64_t seed = 0; seed < 50; seed++) {
        size_t n = 32 * (1 + seed % 9) + seed % 5;
        compare_encode(&t, n, D_EDGE, 90000 + seed);
    }
}
END_TEST

START_TEST(test_bf16)
{
    kcase_t t = tc("bf16", HP_GPU_FMT_BF16);
    sweep_halves(t);
    t.piece = 100;
    sweep_halves(t);
}
END_TEST

START_TEST(test_f16_block_rule)
{
    /* the device's block check against the CPU decoder on every kind of
     * block: largest |h| at each binade edge, every exponent */
    static const uint16_t mxs[] = {0x0000, 0x0001, 0x03ff, 0x0400, 0x77ff, 0x7800, 0x7bff, 0x7c00, 0x7c01, 0x7fff};
    kcase_t t = tc("fp16", HP_GPU_FMT_FP16);
    hp_gpu_dec_t d;
    const size_t n = 64;
    uint8_t pl[2 * 64 + 2];
    float o[64];
    t.p.fp16_block = 32;
    memset(&d, 0, sizeof(d));
    ck_assert_int_eq(hp_comp_gpu_fmt(t.kind, &t.p, n, 0, &d.fmt), HP_OK);
    ck_assert_uint_eq(d.fmt.payload, sizeof(pl));
    d.n = n;
    for (int e = -128; e < 128; e++)
        for (size_t k = 0; k < HP_ARRAY_SIZE(mxs); k++) {
            int cpu, gpu, bad = 0;
            memset(pl, 0, sizeof(pl));
            hp_k_st16(pl + 2 * 5, mxs[k]);
            hp_k_st16(pl + 2 * 6, (uint16_t)(0x8000u | (mxs[k] >> 1)));
            pl[2 * n] = (uint8_t)(int8_t)e;
            pl[2 * n + 1] = 0;
            cpu = hp_comp_get(t.kind)->decode(pl, sizeof(pl), n, o, 0, &t.p) == HIPRESS_COMP_OK;
            gpu = hp_codec_decode(codec(HP_CODEC_PIECE), &d, pl, sizeof(pl), o) == HP_GPU_OK;
            ck_assert_int_eq(hp_codec_sync(codec(HP_CODEC_PIECE), &bad), HP_GPU_OK);
            gpu = gpu && !bad;
            REQUIRE_MSG(cpu == gpu, "e %d largest %04x: cpu accepts %d, gpu %d", e, mxs[k], cpu, gpu);
        }
}
END_TEST

/* The formats' tests into the suite's case (check_kern.c). */
void kern_add_fmt_tests(TCase *t)
{
    tcase_add_test(t, test_none);
    tcase_add_test(t, test_onebit);
    tcase_add_test(t, test_onebit_pieces);
    tcase_add_test(t, test_tbq);
    tcase_add_test(t, test_terngrad);
    tcase_add_test(t, test_terngrad_signed_zero);
    tcase_add_test(t, test_q);
    tcase_add_test(t, test_q_signed_zero);
    tcase_add_test(t, test_q_hook);
    tcase_add_test(t, test_sparse);
    tcase_add_test(t, test_dgc_state);
    tcase_add_test(t, test_fp16);
    tcase_add_test(t, test_bf16);
    tcase_add_test(t, test_f16_block_rule);
}
