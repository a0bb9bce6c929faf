/*
 * CompLL operator layer (CPU): the array kernels the dense compressors are
 * composed from.  Every operator has a portable C path and an AVX2 path, and
 * both give the same bytes for the same input (DESIGN contract 1): element
 * math is IEEE single precision without contraction, and every reduction has
 * one defined summation order (below), which both paths follow.
 *
 * Reduction order.  Min/max keep 8 lanes: lane j takes x[j], x[j+8],
 * x[j+16], ... in index order (the tail too), and the lanes are combined as
 * ((l0 o l1) o (l2 o l3)) o ((l4 o l5) o (l6 o l7)).  Sums have a fast form
 * and an exact form.  Fast: 32 float lanes, lane j adding x[j], x[j+32], ...
 * in index order from +0, then the lane totals added in double in lane order
 * 0..31.  When the fast result is not finite (a NaN or Inf in the input, or
 * a float lane that overflowed), the sum is recomputed in the exact form: 8
 * double lanes (lane j: x[j], x[j+8], ...) combined like min/max -- so a sum
 * of finite floats is always finite, and a NaN or Inf in the input always
 * shows.  Callers that reduce longer arrays in chunks add the chunk results
 * in chunk order; chunk boundaries are then part of the definition and are
 * fixed by the caller, never by the ISA.
 *
 * Pointers to float arrays must be 4-byte aligned; pointers into payloads
 * (uint8_t, uint16_t, uint32_t data) may have any alignment.  Bit-packed data
 * is little-endian and LSB first: element i of a b-bit array sits at bit
 * (i*b) % 8 of byte (i*b) / 8.
 */
#ifndef HP_OPS_H
#define HP_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include "hp_elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Instruction set of a kernel table (HIPRESS_ISA, hipress_comp_params_t.isa). */
#define HP_ISA_AUTO    0
#define HP_ISA_GENERIC 1
#define HP_ISA_AVX2    2

/* How a value-producing kernel stores its result v into out[i]. */
#define HP_OUT_SET 0 /* out[i] = v */
#define HP_OUT_ADD 1 /* out[i] += v (decode with accumulate) */
#define HP_OUT_SUB 2 /* out[i] -= v (error feedback: out holds the encoded input) */

/* Elements per chunk that compressors process at a time, so that the data
 * of one chunk (input, scratch, codes) stays in the L1 cache between the
 * operators applied to it.  A multiple of 32: chunk boundaries fall on byte
 * and word boundaries of every packed format. */
#define HP_OPS_CHUNK 2048

/* The per-element math (hp_quant_stoch, hp_quant_ternary, hp_dequant, the
 * fp16/bf16 conversions, the counter RNG) lives in hp_elem.h, shared with
 * the CUDA kernels. */

/* Kernel table of one instruction set. */
typedef struct hp_ops {
    const char *name; /* "generic" or "avx2" */
    int isa;          /* HP_ISA_GENERIC or HP_ISA_AVX2 */

    /* out[i] = a[i] + b[i]; out may alias a or b. */
    void (*add)(const float *a, const float *b, float *out, size_t n);

    /* 1 when x[0..n) holds NaN or Inf. */
    int (*nonfinite)(const float *x, size_t n);

    /* The largest |x[i]| as its bit pattern (>= 0x7f800000: x holds NaN or
     * Inf); 0 for n == 0. */
    uint32_t (*absmax)(const float *x, size_t n);

    /* Minimum and maximum of x (lane rule above, min taking x < m ? x : m),
     * and the largest |x[i]| as its bit pattern (>= 0x7f800000: NaN or Inf;
     * min and max are then meaningless).  n == 0 gives +Inf, -Inf, 0. */
    void (*minmax)(const float *x, size_t n, float *min_p, float *max_p, uint32_t *absmax_bits_p);

    /* The reductions and the ternary quantiser take their input as
     * v[i] = x[i] + r[i] (r NULL: v[i] = x[i]); the reductions store v into
     * vout when it is not NULL (vout may be r: error feedback adds the
     * residual in place while the data streams through once). */

    /* Sum of |v[i]| (in the order above). */
    double (*abs_sum)(const float *x, const float *r, size_t n, float *vout);

    /* onebit's reduction: sums (in the order above; a non-member adds +0)
     * of the v[i] >= 0 (the set class) and of the rest (the clear class; a
     * NaN lands there, making that sum NaN), and, when bits is not NULL,
     * the classes packed 1 bit per element
     * (bits[i] = v[i] >= 0; the unused high bits of byte ceil(n/8)-1 zero).
     * Returns the number of elements in the set class. */
    size_t (*sign_sum)(const float *x, const float *r, size_t n, float *vout, double *pos_p,
                       double *neg_p, uint8_t *bits);

    /* bits[i] = x[i] >= 0 alone, packed as sign_sum packs them. */
    void (*pack_sign)(const float *x, size_t n, uint8_t *bits);

    /* v = bit i ? s1 : s0 stored into out[i] by `mode` (HP_OUT_*). */
    void (*select1)(const uint8_t *bits, size_t n, float s1, float s0, float *out, int mode);

    /* codes[i] = hp_quant_ternary(v[i], tau), tau > 0; with error feedback
     * (rout not NULL, may be r) also the new residual
     * rout[i] = v[i] - hp_dequant(codes[i], 0, -1, tau), in the same pass. */
    void (*quant_ternary)(const float *x, const float *r, size_t n, float tau, uint8_t *codes,
                          float *rout);

    /* codes[i] = hp_quant_stoch(x[i], lo, inv_gap, u[i], levels). */
    void (*quant_stoch)(const float *x, const float *u, size_t n, float lo, float inv_gap,
                        float levels, uint8_t *codes);

    /* v = hp_dequant(codes[i], base, cbias, step) stored into out[i] by mode. */
    void (*dequant)(const uint8_t *codes, size_t n, float base, float cbias, float step,
                    float *out, int mode);

    /* Pack n codes of `bits` bits (1, 2, 4, 8; each code < 2^bits) into
     * ceil(n*bits/8) bytes; the unused high bits of the last byte are zero. */
    void (*pack)(const uint8_t *codes, size_t n, unsigned bits, uint8_t *packed);

    /* Inverse of pack; returns the bits after element n-1 in the last byte
     * (0 for a well-formed array) and stores the smallest and largest code
     * in *min_p, *max_p (0, 0 for n == 0). */
    unsigned (*unpack)(const uint8_t *packed, size_t n, unsigned bits, uint8_t *codes,
                       uint8_t *min_p, uint8_t *max_p);

    /* fp16 (hp_elem.h): out[i] = hp_f16_enc(x[i], scale), little-endian
     * binary16 (scale 2^e of the block; 1: plain binary16 saturated at
     * +-65504). */
    void (*f32_to_f16)(const float *x, size_t n, float scale, uint8_t *out);
    /* v = hp_f16_dec(in[i], scale) stored into out[i] by mode.  Returns the
     * largest in[i] & 0x7fff (>= 0x7c00 when in held Inf or NaN; out is then
     * unspecified: F16C quietens a signalling NaN, hp_f16_to_f32 does not,
     * and no valid message carries either). */
    unsigned (*f16_to_f32)(const uint8_t *in, size_t n, float scale, float *out, int mode);
    /* bf16: out[i] = hp_bf16_enc(x[i]); returns 1 when x held NaN or Inf. */
    int (*f32_to_bf16)(const float *x, size_t n, uint8_t *out);
    /* Returns 1 when in held Inf or NaN (out then unspecified; no valid
     * message carries either). */
    int (*bf16_to_f32)(const uint8_t *in, size_t n, float *out, int mode);

    /* Counter RNG: out[i] = hp_rng_u32 / hp_rng_unit (k, counter0 + i). */
    void (*rng_u32)(uint64_t k, uint64_t counter0, size_t n, uint32_t *out);
    void (*rng_unit)(uint64_t k, uint64_t counter0, size_t n, float *out);

    /* Appended for the q codecs (q2, q4, q8): codes[i] =
     * hp_quant_near(x[i], lo, inv_gap, levels); with error feedback (rout
     * not NULL, may be x) also rout[i] = x[i] - hp_dequant(codes[i], lo, 0,
     * gap), in the same pass. */
    void (*quant_near)(const float *x, size_t n, float lo, float inv_gap, float gap, float levels,
                       uint8_t *codes, float *rout);
    /* minmax of v[i] = x[i] + r[i] (r NULL: x[i]), storing v into vout when
     * it is not NULL (vout may be r): error feedback's v and the block's
     * range in one pass over the data. */
    void (*minmax_add)(const float *x, const float *r, size_t n, float *vout, float *min_p,
                       float *max_p, uint32_t *absmax_bits_p);
} hp_ops_t;

/* The kernel table for HIPRESS_ISA value `isa`: HP_ISA_AUTO picks AVX2 when
 * the CPU has AVX2, F16C and POPCNT; HP_ISA_AVX2 on a CPU without them, or
 * any value not known, falls back to the generic table.  Never NULL. */
const hp_ops_t *hp_ops_get(int isa);

/* 1 when this CPU (and this build) can run the AVX2 table (x86: AVX2 with
 * the OS saving the vector state, F16C, POPCNT). */
int hp_ops_have_avx2(void);

/* The two tables, for tests that compare them directly. */
extern const hp_ops_t hp_ops_generic;
const hp_ops_t *hp_ops_avx2_table(void); /* NULL when not built or not supported */

/* Internal: the scalar lane steps and lane combinations that both tables
 * use, so a vector kernel handles whole groups (8 elements for min/max, 32
 * for sums) and leaves the tail and the combination to the same code the
 * generic kernel runs.  x points at an element whose index is a multiple of
 * the group (lane 0).  The finish functions
 * fall back to the exact form when the fast one is not finite; they read v
 * from vout when it was stored, else from x and r. */
typedef struct {
    float mn[8], mx[8];
    uint32_t am[8];
} hp_minmax_lanes_t;
void hp_ops_minmax_init(hp_minmax_lanes_t *l);
void hp_ops_minmax_step(const float *x, size_t n, hp_minmax_lanes_t *l);
void hp_ops_minmax_finish(const hp_minmax_lanes_t *l, float *min_p, float *max_p,
                          uint32_t *absmax_bits_p);
void hp_ops_abs_sum_step(const float *x, const float *r, size_t n, float *vout, float lanes[32]);
double hp_ops_abs_sum_finish(const float lanes[32], const float *x, const float *r, size_t n,
                             const float *vout);
size_t hp_ops_sign_sum_step(const float *x, const float *r, size_t n, float *vout, float pos[32],
                            float neg[32], uint8_t *bits);
void hp_ops_sign_sum_finish(const float pos[32], const float neg[32], const float *x,
                            const float *r, size_t n, const float *vout, double *pos_p,
                            double *neg_p);

#ifdef __cplusplus
}
#endif
#endif /* HP_OPS_H */
