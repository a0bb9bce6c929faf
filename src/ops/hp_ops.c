/*
 * CompLL operators: the portable C kernels and the scalar lane steps the
 * AVX2 kernels share with them (hp_ops_avx2.c); the low-rank products live
 * in hp_ops_lowrank.c, the CPU probe and the run-time choice of table in
 * hp_ops_isa.c.
 * The element math comes from hp_elem.h and hp_ops.h so that the AVX2 and
 * (later) CUDA kernels compute the same bits.
 */
#include "hp_ops.h"
#include <math.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hipress payloads are little-endian; a big-endian port must byte-swap in hp_ops"
#endif

/* Loops of integer element math (bf16, the largest |x|) that GCC at -O2
 * leaves scalar but vectorises with the baseline instruction set when asked:
 * 2-3x faster generic bf16.  Only kernels without a float multiply carry it
 * (the attribute must not bring contraction into mul + add: the bits would
 * change), and vectorising never reassociates float operations. */
#if defined(__GNUC__) && !defined(__clang__)
#define HP_VEC __attribute__((optimize("tree-vectorize")))
#else
#define HP_VEC
#endif

/* ------------------------------------------------------------ lane steps */

void hp_ops_minmax_init(hp_minmax_lanes_t *l)
{
    for (int j = 0; j < 8; j++) {
        l->mn[j] = INFINITY;
        l->mx[j] = -INFINITY;
        l->am[j] = 0;
    }
}

void hp_ops_minmax_step(const float *x, size_t n, hp_minmax_lanes_t *l)
{
    for (size_t i = 0; i < n; i++) {
        size_t j = i & 7;
        float v = x[i];
        uint32_t a = hp_f2u(v) & 0x7fffffffu;
        /* the operand order of minps/maxps: first operand when the compare holds */
        l->mn[j] = v < l->mn[j] ? v : l->mn[j];
        l->mx[j] = v > l->mx[j] ? v : l->mx[j];
        l->am[j] = a > l->am[j] ? a : l->am[j];
    }
}

static float min2(float a, float b) { return a < b ? a : b; }
static float max2(float a, float b) { return a > b ? a : b; }
static uint32_t umax2(uint32_t a, uint32_t b) { return a > b ? a : b; }

void hp_ops_minmax_finish(const hp_minmax_lanes_t *l, float *min_p, float *max_p,
                          uint32_t *absmax_bits_p)
{
    const float *m = l->mn, *x = l->mx;
    const uint32_t *a = l->am;
    *min_p = min2(min2(min2(m[0], m[1]), min2(m[2], m[3])), min2(min2(m[4], m[5]), min2(m[6], m[7])));
    *max_p = max2(max2(max2(x[0], x[1]), max2(x[2], x[3])), max2(max2(x[4], x[5]), max2(x[6], x[7])));
    *absmax_bits_p = umax2(umax2(umax2(a[0], a[1]), umax2(a[2], a[3])),
                           umax2(umax2(a[4], a[5]), umax2(a[6], a[7])));
}

/* v = x + r (or x), stored to vout when asked */
static inline float load_v(const float *x, const float *r, float *vout, size_t i)
{
    float v = r ? x[i] + r[i] : x[i];
    if (vout)
        vout[i] = v;
    return v;
}

void hp_ops_abs_sum_step(const float *x, const float *r, size_t n, float *vout, float lanes[32])
{
    for (size_t i = 0; i < n; i++)
        lanes[i & 31] += fabsf(load_v(x, r, vout, i));
}

size_t hp_ops_sign_sum_step(const float *x, const float *r, size_t n, float *vout, float pos[32],
                            float neg[32], uint8_t *bits)
{
    size_t npos = 0;
    unsigned b = 0;
    for (size_t i = 0; i < n; i++) {
        float v = load_v(x, r, vout, i);
        unsigned set = v >= 0.0f;
        uint32_t m = 0u - (uint32_t)set;
        /* both classes add a value (+0 for a non-member), as the vector code
         * does; masks rather than branches (the signs are random) */
        pos[i & 31] += hp_u2f(hp_f2u(v) & m);
        neg[i & 31] += hp_u2f(hp_f2u(v) & ~m);
        npos += set;
        b |= set << (i & 7);
        if ((i & 7) == 7 || i + 1 == n) {
            if (bits)
                bits[i >> 3] = (uint8_t)b;
            b = 0;
        }
    }
    return npos;
}

double hp_ops_abs_sum_finish(const float lanes[32], const float *x, const float *r, size_t n,
                             const float *vout)
{
    double s = hp_sum_lanes32(lanes), d[8] = {0};
    if (isfinite(s))
        return s;
    if (vout) {
        x = vout;
        r = NULL;
    }
    for (size_t i = 0; i < n; i++)
        d[i & 7] += (double)fabsf(r ? x[i] + r[i] : x[i]);
    return hp_sum_lanes8(d);
}

void hp_ops_sign_sum_finish(const float pos[32], const float neg[32], const float *x,
                            const float *r, size_t n, const float *vout, double *pos_p,
                            double *neg_p)
{
    double p = hp_sum_lanes32(pos), q = hp_sum_lanes32(neg), dp[8] = {0}, dq[8] = {0};
    if (isfinite(p) && isfinite(q)) {
        *pos_p = p;
        *neg_p = q;
        return;
    }
    if (vout) {
        x = vout;
        r = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        float v = r ? x[i] + r[i] : x[i];
        dp[i & 7] += (double)(v >= 0.0f ? v : 0.0f);
        dq[i & 7] += (double)(v >= 0.0f ? 0.0f : v);
    }
    *pos_p = hp_sum_lanes8(dp);
    *neg_p = hp_sum_lanes8(dq);
}

/* ------------------------------------------------------- generic kernels */

static inline uint16_t load_u16(const uint8_t *p, size_t i)
{
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return h;
}

/* for (i < n) out[i] (=, +=, -=) EXPR, one loop per mode so that the loop
 * body has no branch (and the compiler may vectorise it); an add into the
 * caller's buffer, which may hold NaN or Inf, stores a NaN canonical
 * (hp_canon: the CUDA kernels' accumulating stores do the same) */
#define OUT_LOOP(n, out, mode, EXPR) \
    do { \
        if ((mode) == HP_OUT_SET) \
            for (size_t i = 0; i < (n); i++) (out)[i] = (EXPR); \
        else if ((mode) == HP_OUT_ADD) \
            for (size_t i = 0; i < (n); i++) (out)[i] = hp_canon((out)[i] + (EXPR)); \
        else \
            for (size_t i = 0; i < (n); i++) (out)[i] -= (EXPR); \
    } while (0)

static void g_add(const float *a, const float *b, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = hp_canon(a[i] + b[i]);
}

static void g_div(float *x, size_t n, float d)
{
    /* (x86's division would quiet a signalling NaN) */
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] != x[i] ? x[i] : x[i] / d;
}

static int g_nonfinite(const float *x, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= (uint32_t)hp_nonfinite(x[i]);
    return bad != 0;
}

HP_VEC static uint32_t g_absmax(const float *x, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = hp_f2u(x[i]) & 0x7fffffffu;
        m = a > m ? a : m;
    }
    return m;
}

static void g_minmax(const float *x, size_t n, float *min_p, float *max_p, uint32_t *absmax_bits_p)
{
    hp_minmax_lanes_t l;
    hp_ops_minmax_init(&l);
    hp_ops_minmax_step(x, n, &l);
    hp_ops_minmax_finish(&l, min_p, max_p, absmax_bits_p);
}

static double g_abs_sum(const float *x, const float *r, size_t n, float *vout)
{
    float lanes[32] = {0};
    hp_ops_abs_sum_step(x, r, n, vout, lanes);
    return hp_ops_abs_sum_finish(lanes, x, r, n, vout);
}

static size_t g_sign_sum(const float *x, const float *r, size_t n, float *vout, double *pos_p,
                         double *neg_p, uint8_t *bits)
{
    float pos[32] = {0}, neg[32] = {0};
    size_t npos = hp_ops_sign_sum_step(x, r, n, vout, pos, neg, bits);
    hp_ops_sign_sum_finish(pos, neg, x, r, n, vout, pos_p, neg_p);
    return npos;
}

static void g_pack_sign(const float *x, size_t n, uint8_t *bits)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        unsigned b = 0;
        for (unsigned j = 0; j < 8; j++)
            b |= (unsigned)(x[i + j] >= 0.0f) << j;
        bits[i >> 3] = (uint8_t)b;
    }
    if (i < n) {
        unsigned b = 0;
        for (unsigned j = 0; i + j < n; j++)
            b |= (unsigned)(x[i + j] >= 0.0f) << j;
        bits[i >> 3] = (uint8_t)b;
    }
}

static void g_select1(const uint8_t *bits, size_t n, float s1, float s0, float *out, int mode)
{
    const uint32_t u1 = hp_f2u(s1), u0 = hp_f2u(s0);
    /* a mask, not a branch: the bits are random */
#define SEL1(i) hp_u2f((u1 & (0u - ((uint32_t)(bits[(i) >> 3] >> ((i) & 7)) & 1u))) | \
                       (u0 & ~(0u - ((uint32_t)(bits[(i) >> 3] >> ((i) & 7)) & 1u))))
    OUT_LOOP(n, out, mode, SEL1(i));
#undef SEL1
}

static void g_quant_ternary(const float *x, const float *r, size_t n, float tau, uint8_t *codes,
                            float *rout)
{
    for (size_t i = 0; i < n; i++) {
        float v = load_v(x, r, NULL, i);
        uint32_t c = hp_quant_ternary(v, tau);
        codes[i] = (uint8_t)c;
        if (rout)
            rout[i] = v - hp_dequant(c, 0.0f, -1.0f, tau);
    }
}

static void g_quant_stoch(const float *x, const float *u, size_t n, float lo, float inv_gap,
                          float levels, uint8_t *codes)
{
    for (size_t i = 0; i < n; i++)
        codes[i] = (uint8_t)hp_quant_stoch(x[i], lo, inv_gap, u[i], levels);
}

static void g_dequant(const uint8_t *codes, size_t n, float base, float cbias, float step,
                      float *out, int mode)
{
    OUT_LOOP(n, out, mode, hp_dequant(codes[i], base, cbias, step));
}

static void g_pack(const uint8_t *codes, size_t n, unsigned bits, uint8_t *packed)
{
    unsigned per = 8u / bits;
    size_t i = 0, o = 0;
    if (bits == 8) {
        memcpy(packed, codes, n);
        return;
    }
    for (; i + per <= n; i += per) {
        unsigned b = 0;
        for (unsigned j = 0; j < per; j++)
            b |= (unsigned)codes[i + j] << (j * bits);
        packed[o++] = (uint8_t)b;
    }
    if (i < n) {
        unsigned b = 0;
        for (unsigned j = 0; i + j < n; j++)
            b |= (unsigned)codes[i + j] << (j * bits);
        packed[o] = (uint8_t)b;
    }
}

static unsigned g_unpack(const uint8_t *packed, size_t n, unsigned bits, uint8_t *codes,
                         uint8_t *min_p, uint8_t *max_p)
{
    unsigned per = 8u / bits, mask = (1u << bits) - 1u, pad = 0;
    unsigned mn = 0xff, mx = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = (packed[i / per] >> ((i % per) * bits)) & mask;
        codes[i] = (uint8_t)c;
        mn = c < mn ? c : mn;
        mx = c > mx ? c : mx;
    }
    if (n % per)
        pad = packed[n / per] >> ((n % per) * bits);
    *min_p = (uint8_t)(n ? mn : 0);
    *max_p = (uint8_t)mx;
    return pad;
}

static void g_f32_to_f16(const float *x, size_t n, float scale, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h = hp_f16_enc(x[i], scale);
        memcpy(out + 2 * i, &h, 2);
    }
}

static unsigned g_f16_to_f32(const uint8_t *in, size_t n, float scale, float *out, int mode)
{
    unsigned mx = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned a = load_u16(in, i) & 0x7fffu;
        mx = a > mx ? a : mx;
    }
    OUT_LOOP(n, out, mode, hp_f16_dec(load_u16(in, i), scale));
    return mx;
}

HP_VEC static int g_f32_to_bf16(const float *x, size_t n, uint8_t *out)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t h = hp_bf16_enc(x[i]);
        bad |= (uint32_t)hp_nonfinite(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
    return bad != 0;
}

HP_VEC static int g_bf16_to_f32(const uint8_t *in, size_t n, float *out, int mode)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= (uint32_t)((load_u16(in, i) & 0x7fffu) >= 0x7f80u);
    OUT_LOOP(n, out, mode, hp_bf16_to_f32(load_u16(in, i)));
    return bad != 0;
}

static void g_rng_u32(uint64_t k, uint64_t counter0, size_t n, uint32_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = hp_rng_u32(k, counter0 + i);
}

static void g_rng_unit(uint64_t k, uint64_t counter0, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = hp_rng_unit(k, counter0 + i);
}

static void g_rng_q_unit(uint64_t k, uint64_t counter0, size_t n, float *out)
{
    uint64_t kp = hp_rng_q_key(k, counter0);
    for (size_t i = 0; i < n; i++) {
        const uint64_t c = counter0 + i;
        if ((uint32_t)c == 0 && i > 0)
            kp = hp_rng_q_key(k, c);   /* the next page */
        out[i] = hp_rng_q_unit_k(kp, (uint32_t)c);
    }
}

static void g_quant_near(const float *x, size_t n, float lo, float inv_gap, float gap, float levels,
                         uint8_t *codes, float *rout)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        uint32_t c = hp_quant_near(v, lo, inv_gap, levels);
        codes[i] = (uint8_t)c;
        if (rout)
            rout[i] = v - hp_dequant(c, lo, 0.0f, gap);
    }
}

static void g_minmax_add(const float *x, const float *r, size_t n, float *vout, float *min_p,
                         float *max_p, uint32_t *absmax_bits_p)
{
    hp_minmax_lanes_t l;
    float t[64];
    hp_ops_minmax_init(&l);
    /* groups of 64 start on lane 0 */
    for (size_t i = 0; i < n; i += 64) {
        size_t k = n - i < 64 ? n - i : 64;
        for (size_t j = 0; j < k; j++) {
            t[j] = load_v(x + i, r ? r + i : NULL, NULL, j);
            if (vout)
                vout[i + j] = t[j];
        }
        hp_ops_minmax_step(t, k, &l);
    }
    hp_ops_minmax_finish(&l, min_p, max_p, absmax_bits_p);
}

static void g_quant_near_pack(const float *x, size_t n, float lo, float inv_gap, float gap, float levels,
                              unsigned bits, uint8_t *packed, float *rout)
{
    uint8_t codes[HP_OPS_CHUNK];
    for (size_t c = 0; c < n; c += HP_OPS_CHUNK) {
        size_t k = n - c < HP_OPS_CHUNK ? n - c : HP_OPS_CHUNK;
        g_quant_near(x + c, k, lo, inv_gap, gap, levels, codes, rout ? rout + c : NULL);
        g_pack(codes, k, bits, packed + c * bits / 8);
    }
}

static void g_quant_stoch_pack(const float *x, const float *u, size_t n, float lo, float inv_gap, float gap,
                               float levels, unsigned bits, uint8_t *packed, float *rout)
{
    uint8_t codes[HP_OPS_CHUNK];
    for (size_t c = 0; c < n; c += HP_OPS_CHUNK) {
        size_t k = n - c < HP_OPS_CHUNK ? n - c : HP_OPS_CHUNK;
        g_quant_stoch(x + c, u + c, k, lo, inv_gap, levels, codes);
        if (rout)
            g_dequant(codes, k, lo, 0.0f, gap, rout + c, HP_OUT_SUB);
        g_pack(codes, k, bits, packed + c * bits / 8);
    }
}

/* quant_stoch_pack with u drawn in pieces of 256 (whole bytes at any width) */
static void g_quant_stoch_rng_pack(const float *x, uint64_t key, uint64_t counter0, size_t n, float lo,
                                   float inv_gap, float gap, float levels, unsigned bits, uint8_t *packed,
                                   float *rout)
{
    float u[256];
    for (size_t c = 0; c < n; c += 256) {
        size_t k = n - c < 256 ? n - c : 256;
        g_rng_q_unit(key, counter0 + c, k, u);
        g_quant_stoch_pack(x + c, u, k, lo, inv_gap, gap, levels, bits, packed + c * bits / 8,
                           rout ? rout + c : NULL);
    }
}

const hp_ops_t hp_ops_generic = {
    .name = "generic",
    .isa = HP_ISA_GENERIC,
    .add = g_add,
    .div = g_div,
    .nonfinite = g_nonfinite,
    .absmax = g_absmax,
    .minmax = g_minmax,
    .abs_sum = g_abs_sum,
    .sign_sum = g_sign_sum,
    .pack_sign = g_pack_sign,
    .select1 = g_select1,
    .quant_ternary = g_quant_ternary,
    .quant_stoch = g_quant_stoch,
    .dequant = g_dequant,
    .pack = g_pack,
    .unpack = g_unpack,
    .f32_to_f16 = g_f32_to_f16,
    .f16_to_f32 = g_f16_to_f32,
    .f32_to_bf16 = g_f32_to_bf16,
    .bf16_to_f32 = g_bf16_to_f32,
    .rng_u32 = g_rng_u32,
    .rng_unit = g_rng_unit,
    .rng_q_unit = g_rng_q_unit,
    .lr_dot = hp_ops_lr_dot_generic,
    .lr_axpy = hp_ops_lr_axpy_generic,
    .lr_recon = hp_ops_lr_recon_generic,
    .quant_near = g_quant_near,
    .minmax_add = g_minmax_add,
    .quant_near_pack = g_quant_near_pack,
    .quant_stoch_pack = g_quant_stoch_pack,
    .quant_stoch_rng_pack = g_quant_stoch_rng_pack,
};
