/*
 * Dense CompLL compressors (fp16, bf16, onebit, tbq, terngrad) and the
 * operator layer under them: wire sizes, error bounds, error feedback,
 * unbiasedness, determinism, identical bytes on every ISA path, NaN/Inf,
 * and rejection of malformed messages.
 *
 * This file holds the shared helpers and builds the suite; the tests are in
 * check_comp_dense_ops.c, _bounds.c, _exact.c and _malformed.c
 * (check_comp_dense.h).
 */
#include "check_comp_dense.h"

/* ------------------------------------------------------------- helpers */

uint64_t rng_state;
uint64_t next_u64(void)
{
    rng_state += 0x9E3779B97F4A7C15ULL;
    return hp_mix64(rng_state);
}
static double next_unit(void) { return (double)(next_u64() >> 11) * 0x1p-53; }
double next_normal(void)
{
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += next_unit() - 0.5;
    return s * 1.7320508075688772; /* variance 1 */
}

/* gradient-like values: a smooth component plus noise of varying scale */
void fill_grad(float *x, size_t n, uint64_t seed)
{
    rng_state = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(0.01 * sin((double)i * 0.0007 + (double)seed) +
                       0.003 * (1.0 + (double)(i % 97) / 50.0) * next_normal());
}

float *falloc(size_t n)
{
    float *p = malloc((n + 16) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

hipress_comp_params_t params_isa(int isa)
{
    hipress_comp_params_t p;
    hipress_comp_params_default(&p);
    p.isa = isa;
    return p;
}

hp_comp_t *comp(const char *name)
{
    int k = hp_comp_find(name);
    REQUIRE_MSG(k >= 0, "compressor %s not registered", name);
    return hp_comp_get(k);
}

/* Encode through the compressor; returns the payload length. */
size_t enc(hp_comp_t *c, const float *in, float *res, size_t n, const hipress_comp_params_t *p,
           void *out, size_t cap, uint64_t seed, int *nonfinite_p)
{
    hipress_encode_args_t a;
    size_t len = 0;
    int nf = -1;
    memset(&a, 0, sizeof(a));
    a.in = in;
    a.residual = res;
    a.n = n;
    a.out = out;
    a.out_cap = cap;
    a.rng_key[0] = seed;
    a.rng_key[1] = 3;
    a.rng_key[2] = 7;
    a.rng_key[3] = 1;
    a.rng_offset = 1000;
    a.params = p;
    ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
    REQUIRE(nf == 0 || nf == 1);
    REQUIRE(len <= cap);
    if (nonfinite_p)
        *nonfinite_p = nf;
    else
        REQUIRE_MSG(nf == 0, "%s: unexpected non-finite", c->name);
    return len;
}

size_t fp16_block(const hipress_comp_params_t *p)
{
    return p->fp16_block ? p->fp16_block : 1024;
}

static size_t tg_block(const hipress_comp_params_t *p)
{
    return p->terngrad_block ? p->terngrad_block : 4096;
}

size_t expected_payload(const char *name, size_t n, const hipress_comp_params_t *p)
{
    if (!strcmp(name, "fp16"))
        return 2 * n + (n + fp16_block(p) - 1) / fp16_block(p);
    if (!strcmp(name, "bf16"))
        return 2 * n;
    if (!strcmp(name, "onebit"))
        return 8 * ((n + p->onebit_block - 1) / p->onebit_block) + 4 * ((n + 31) / 32);
    if (!strcmp(name, "tbq"))
        return 4 * ((n + p->tbq_block - 1) / p->tbq_block) + (n + 3) / 4;
    if (!strcmp(name, "terngrad")) /* a (min, gap) pair per block, then the codes */
        return 8 * ((n + tg_block(p) - 1) / tg_block(p)) + (n * p->terngrad_bits + 7) / 8;
    ck_abort_msg("unknown compressor %s", name);
    return 0;
}

const char *dense_names[] = {"fp16", "bf16", "onebit", "tbq", "terngrad"};

static Suite *suite(void)
{
    Suite *s = suite_create("comp_dense");
    TCase *t = tcase_create("ops");
    tcase_set_timeout(t, 120);
    dense_ops_tests(t);
    suite_add_tcase(s, t);
    t = tcase_create("compressors");
    tcase_set_timeout(t, 300);
    dense_bounds_tests(t);
    dense_exact_tests(t);
    dense_roundtrip_tests(t);
    suite_add_tcase(s, t);
    t = tcase_create("malformed");
    dense_malformed_tests(t);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
