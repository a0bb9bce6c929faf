/*
 * CompLL operator layer (CPU): the array kernels the dense compressors and
 * powersgd's low-rank products are composed from, the instruction-set levels
 * and the one CPU probe that picks among them (the sparse operators,
 * hp_ops_sparse.h, use the same levels).  Every operator has a portable C
 * path and an AVX2 path, and both give the same bytes for the same input
 * (contract 1, doc/dev/contracts.md): element math is IEEE single precision without
 * contraction, and every reduction has one defined summation order (below),
 * which both paths follow.
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

/* Instruction-set levels: the one declaration of them.  HIPRESS_ISA's
 * accepted list (auto|generic|avx2, src/core/hp_settings.def) is in this
 * order, so a setting's index is its level, and hipress_comp_params_t.isa
 * (0 auto, 1 generic, 2 avx2) carries it to every kernel: the dense table
 * below, the sparse operators (hp_ops_sparse.h) and the low-rank products. */
typedef enum {
    HP_ISA_AUTO = 0,     /* the best level this CPU runs (hp_isa_detect) */
    HP_ISA_GENERIC = 1,  /* portable C (GCC vector types of the baseline ISA) */
    HP_ISA_AVX2 = 2      /* x86-64 AVX2 with F16C and POPCNT */
} hp_isa_t;

/* The one CPU probe: HP_ISA_AVX2 when this CPU and this build can run the
 * AVX2 kernels (x86-64: AVX2 with the OS saving the vector state, F16C,
 * POPCNT), else HP_ISA_GENERIC.  Probed once. */
int hp_isa_detect(void);

/* The level a request runs at: HP_ISA_AUTO and HP_ISA_AVX2 give
 * hp_isa_detect(); HP_ISA_GENERIC, or any value not known, HP_ISA_GENERIC. */
int hp_isa_resolve(int isa);

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

    /* out[i] = a[i] + b[i], a NaN canonical (hp_canon); out may alias a
     * or b. */
    void (*add)(const float *a, const float *b, float *out, size_t n);

    /* 1 when x[0..n) holds NaN or Inf: the library's one non-finite
     * scanner (the backends, the sparse and low-rank compressors and
     * powersgd's runs all ask it). */
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
    /* The q codecs' generator: out[i] = hp_rng_q_unit(k, counter0 + i). */
    void (*rng_q_unit)(uint64_t k, uint64_t counter0, size_t n, float *out);

    /* Low-rank products (powersgd's passes over its matrix M, in
     * src/comp/hp_comp_powersgd.c): one tile of rows at a time, P (m x r)
     * and Q^T (r x c) row-major, ld the row stride of Q^T.  Single-threaded
     * and deterministic, one summation order per product (both tables):
     *   lr_dot:   8 lanes (lane l takes elements l, l+8, ...), the tail
     *             after the lanes, lanes combined as
     *             ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then added to p[k];
     *   lr_axpy:  each element of Q^T adds its rows in row order;
     *   lr_recon: each element sum_k p[k] qt[k ld + j] in k order, first
     *             term p[0] qt[j]. */
    /* p[k] += sum_j row[j] qt[k ld + j], k < r (a row of a tile of M Q). */
    void (*lr_dot)(const float *row, size_t len, const float *qt, size_t ld, size_t r, float *p);
    /* qt[k ld + j] += sum over the nr (<= 4) rows, in row order, of
     * p[i r + k] rows[i][j] (M^T P streamed by row). */
    void (*lr_axpy)(const float *const *rows, const float *p, size_t nr, size_t len, float *qt,
                    size_t ld, size_t r);
    /* nr (<= 4) consecutive rows, len columns, of the reconstruction P Q^T;
     * row t of p / out / ma / mb / res at t r / t stride.  Stores:
     *   res (if not NULL): res = (ma + mb) - P Qtl   (mb may be NULL; may be res)
     *   out (if not NULL): out = P Qts, or out += P Qts when accumulate
     * ma may be out (it is read first).  scratch: HP_OPS_LR_SCRATCH(r)
     * bytes, 16-byte aligned. */
    void (*lr_recon)(const float *p, size_t nr, size_t r, size_t len, size_t ld, const float *qts,
                     float *out, int accumulate, const float *qtl, const float *ma,
                     const float *mb, float *res, size_t stride, void *scratch);
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
    /* quant_near (rout as there) with the codes packed as pack packs them
     * (bits 2, 4, 8) into packed in the same pass: the bytes of quant_near
     * then pack, without the codes in between (the q codecs' encode). */
    void (*quant_near_pack)(const float *x, size_t n, float lo, float inv_gap, float gap, float levels,
                            unsigned bits, uint8_t *packed, float *rout);
    /* The same for stochastic rounding: quant_stoch, with rout (when not
     * NULL, may be x) rout[i] = x[i] - hp_dequant(codes[i], lo, 0, gap),
     * and pack. */
    void (*quant_stoch_pack)(const float *x, const float *u, size_t n, float lo, float inv_gap, float gap,
                             float levels, unsigned bits, uint8_t *packed, float *rout);
    /* quant_stoch_pack with u[i] = hp_rng_q_unit(key, counter0 + i) drawn
     * in the same pass: the bytes of rng_q_unit then quant_stoch_pack, without
     * the array of u in between (the q codecs' stochastic encode). */
    void (*quant_stoch_rng_pack)(const float *x, uint64_t key, uint64_t counter0, size_t n, float lo,
                                 float inv_gap, float gap, float levels, unsigned bits, uint8_t *packed,
                                 float *rout);
    /* x[i] = x[i] / d, a float division, a NaN kept as it is, payload and
     * signalling bit included: a mean's division (the ranks' sum by their
     * number), the bits of the device's divide kernel (k_divide). */
    void (*div)(float *x, size_t n, float d);
} hp_ops_t;

/* Bytes of lr_recon's scratch for rank r (4 r vectors of 4 floats). */
#define HP_OPS_LR_SCRATCH(r) (4 * (size_t)(r) * 4 * sizeof(float))

/* The kernel table for HIPRESS_ISA value `isa`, at hp_isa_resolve(isa):
 * HP_ISA_AUTO picks AVX2 when the CPU has AVX2, F16C and POPCNT;
 * HP_ISA_AVX2 on a CPU without them, or any value not known, falls back to
 * the generic table.  Never NULL. */
const hp_ops_t *hp_ops_get(int isa);

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

/* Internal: the low-rank products of each table (src/ops/hp_ops_lowrank.c). */
void hp_ops_lr_dot_generic(const float *row, size_t len, const float *qt, size_t ld, size_t r, float *p);
void hp_ops_lr_axpy_generic(const float *const *rows, const float *p, size_t nr, size_t len, float *qt,
                            size_t ld, size_t r);
void hp_ops_lr_recon_generic(const float *p, size_t nr, size_t r, size_t len, size_t ld, const float *qts,
                             float *out, int accumulate, const float *qtl, const float *ma,
                             const float *mb, float *res, size_t stride, void *scratch);
void hp_ops_lr_dot_avx2(const float *row, size_t len, const float *qt, size_t ld, size_t r, float *p);
void hp_ops_lr_axpy_avx2(const float *const *rows, const float *p, size_t nr, size_t len, float *qt,
                         size_t ld, size_t r);
void hp_ops_lr_recon_avx2(const float *p, size_t nr, size_t r, size_t len, size_t ld, const float *qts,
                          float *out, int accumulate, const float *qtl, const float *ma,
                          const float *mb, float *res, size_t stride, void *scratch);

#ifdef __cplusplus
}
#endif
#endif /* HP_OPS_H */
