/*
 * The q codecs (q2, q4, q8: per-block max-min uniform quantisation, round to
 * nearest with error feedback or stochastic rounding) and the operators
 * under them: wire sizes, exact round trips on the grid, error bounds,
 * unbiasedness of stochastic rounding, error feedback, partition
 * independence, identical bytes on every ISA path, NaN/Inf and overflow,
 * decode by overwriting and by adding, rejection of malformed messages,
 * the parameters from the settings; the stochastic form's generator
 * (hp_rng_q_unit): its formula, its paths, its statistics.
 *
 * This file holds the shared helpers and builds the suite; the tests are in
 * check_comp_qbits_ops.c, _codec.c and _rng.c (check_comp_qbits.h).
 */
#include "check_comp_qbits.h"

const char *const qnames[] = {"q2", "q4", "q8"};
const unsigned qb[] = {2, 4, 8};

/* ------------------------------------------------------------- helpers */

uint64_t rng_state;
uint64_t next_u64(void)
{
    rng_state += 0x9E3779B97F4A7C15ULL;
    return hp_mix64(rng_state);
}
double next_unit(void) { return (double)(next_u64() >> 11) * 0x1p-53; }

void fill_grad(float *x, size_t n, uint64_t seed)
{
    rng_state = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(0.01 * sin((double)i * 0.0007 + (double)seed) +
                       0.003 * (1.0 + (double)(i % 97) / 50.0) * (next_unit() - 0.5));
}

/* gradient-like data with awkward stretches: constant blocks, values near
 * the range limit, tiny ranges, subnormals, signed zeros */
void fill_awkward(float *x, size_t n, uint64_t seed)
{
    fill_grad(x, n, seed);
    for (size_t i = 0; i < n; i++) {
        size_t k = (i / 64) % 8;
        if (k == 1)
            x[i] = 3.0f;
        else if (k == 3)
            x[i] *= 0x1p120f;
        else if (k == 5)
            x[i] = 1.0f + (float)(i % 3) * 0x1p-23f;
        else if (k == 6)
            x[i] = (i % 2 ? -1.0f : 1.0f) * 1e-42f * (float)(i % 5);
        else if (k == 7 && i % 5 == 0)
            x[i] = i % 2 ? -0.0f : 0x1.fffffep125f;
    }
}

float *falloc(size_t n)
{
    float *p = malloc((n + 16) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

hipress_comp_params_t params(int isa, uint32_t B, uint32_t rounding)
{
    hipress_comp_params_t p;
    hipress_comp_params_default(&p);
    p.isa = isa;
    p.q_block = B;
    p.q_rounding = rounding;
    return p;
}

hp_comp_t *comp(const char *name)
{
    int k = hp_comp_find(name);
    REQUIRE_MSG(k >= 0, "compressor %s not registered", name);
    return hp_comp_get(k);
}

size_t blk(const hipress_comp_params_t *p) { return p->q_block ? p->q_block : 512; }

size_t enc(hp_comp_t *c, const float *in, float *res, size_t n, const hipress_comp_params_t *p,
           void *out, uint64_t seed, uint64_t offset, int *nonfinite_p)
{
    hipress_encode_args_t a = {.in = in, .residual = res, .n = n, .out = out, .out_cap = c->max_payload(n, p),
                               .rng_key = {seed, 3, 7, 1}, .rng_offset = offset, .params = p};
    size_t len = 0;
    int nf = -1;
    ck_assert_int_eq(c->encode(&a, &len, &nf), HIPRESS_COMP_OK);
    REQUIRE(nf == 0 || nf == 1);
    if (nonfinite_p)
        *nonfinite_p = nf;
    else
        REQUIRE_MSG(nf == 0, "%s: unexpected non-finite", c->name);
    return len;
}

/* One encode checked against the definition: each block's pair is its own
 * min and (max - min) / L (or +0 when 1/gap overflows), every decoded value
 * within half a step (nearest) or a step (stochastic) of v, to float
 * rounding, and the new residual exactly v - decode. */
void check_block_rule(unsigned b, const float *x, const float *r0, const float *r1, size_t n,
                      const hipress_comp_params_t *p, const uint8_t *pl, const float *o)
{
    const size_t B = blk(p), L = (1u << b) - 1u;
    const double half = p->q_rounding ? 1.0 : 0.5;
    for (size_t j = 0; j * B < n; j++) {
        float mn = INFINITY, mx = -INFINITY, pair[2], v;
        for (size_t i = j * B; i < n && i < (j + 1) * B; i++) {
            v = r0 ? x[i] + r0[i] : x[i];
            mn = fminf(mn, v);
            mx = fmaxf(mx, v);
        }
        memcpy(pair, pl + 8 * j, 8);
        /* (== : the sign of a zero min depends on the lane order) */
        REQUIRE_MSG(pair[0] == mn, "b=%u block %zu: min %a, want %a (n=%zu B=%zu r0 %d)", b, j, pair[0], mn, n, B, r0 != NULL);
        if (isfinite(1.0f / ((mx - mn) / (float)L)))
            REQUIRE_MSG(pair[1] == (mx - mn) / (float)L, "b=%u block %zu: gap", b, j);
        else
            REQUIRE(hp_f2u(pair[1]) == 0);
        for (size_t i = j * B; i < n && i < (j + 1) * B; i++) {
            double e;
            v = r0 ? x[i] + r0[i] : x[i];
            e = fabs((double)o[i] - v);
            /* (the rounding of (v - min) / gap: a few 2^-24 of up to L steps) */
            REQUIRE_MSG(e <= (half + 0x1p-12) * pair[1] + 0x1p-22 * (fabs(v) + fabs(mn)) + 0x1p-120,
                        "b=%u i=%zu: |%a - %a| > %g gap %a", b, i, o[i], v, half, pair[1]);
            if (r1)
                REQUIRE_MSG(hp_f2u(r1[i]) == hp_f2u(v - o[i]), "b=%u i=%zu: residual", b, i);
        }
    }
}

static Suite *suite(void)
{
    Suite *s = suite_create("comp_qbits");
    TCase *t = tcase_create("qbits");
    tcase_set_timeout(t, 300);
    qbits_ops_tests(t);
    qbits_bounds_tests(t);
    qbits_rng_tests(t);
    qbits_codec_tests(t);
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
