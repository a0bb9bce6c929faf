/*
 * The kernel launchers of the GPU codec: one function per kernel (or small
 * group of kernels), all pointers device pointers, work queued on `stream`
 * (a CUstream; NULL: the legacy stream) and returning 0, or -1 when a launch
 * failed.  Flags words are device memory (hp_kern.h HP_K_F_*): kernels that
 * must not run once a message is known to be non-finite read them on the
 * device, so no host synchronisation is needed between launches.
 *
 * Three builds of these symbols, one per link unit (each split by family of
 * formats: hp_kern.cu the shared kernels, _quant onebit, tbq, terngrad and q,
 * _half fp16 and bf16, _sparse graddrop and dgc):
 *   cuda/kern/hp_kern*.cu     the CUDA kernels (libhipress_cuda.so), and the same
 *                        files compiled for the CPU on the strict SIMT
 *                        emulator (tests/gpu/simt, doc/dev/simt.md: tests/gpu);
 *   tests/gpu/emu/hp_kern_emu*.c  the same grid run serially on the host, over the
 *                        same per-thread functions (hp_kern.h): the CPU tests
 *                        (tests/gpu/kern/check_kern.c) and, built with
 *                        HP_KL_TRANSLATE, the emulated module of the MPI
 *                        tests (device pointers of the stand-in driver
 *                        translated to its host shadow).
 *
 * Payload regions are passed separately (onebit's scales and bit words,
 * tbq's thresholds and codes) so that a launch may cover a piece of a
 * message made of whole blocks: the codec pipelines pieces with copies.
 */
#ifndef HP_KLAUNCH_H
#define HP_KLAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include "hp_kern_msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether kernels of this build run in the current context: a tiny kernel
 * writes HP_KL_PROBE_WORD into *word (device memory), which the caller
 * reads back (cuda/module/hp_cuda_module.c cuda_codec_probe, on the module's own
 * stream).  0 when the launch was accepted. */
#define HP_KL_PROBE_WORD 0x48505253u
int hp_kl_probe(void *stream, uint32_t *word);

/* Every kernel of this build loaded now, in the current context: each
 * kernel's attributes are asked for (cudaFuncGetAttributes), so none is
 * loaded lazily later, by a launch inside a stream-ordered call (loading
 * can synchronise the context).  Returns the number of kernels (template
 * instances counted apart), or -1 when one cannot be loaded.  On the SIMT
 * emulator it records them and loads nothing; the serial emulation has
 * none (0). */
int hp_kl_preload(void);

/* flags[0] |= HP_K_F_NONFINITE when x[0..n) holds NaN or Inf. */
int hp_kl_finite(void *stream, const float *x, size_t n, uint32_t *flags);

/* buf += r, r = 0 over n elements, unless flags[0] has HP_K_F_NONFINITE. */
int hp_kl_fold(void *stream, float *buf, float *r, size_t n, const uint32_t *flags);

/* u = m u + buf; buf = u (dgc's momentum correction), unless flags[0] has
 * HP_K_F_NONFINITE. */
int hp_kl_momentum(void *stream, float *u, float *buf, float m, size_t n, const uint32_t *flags);

/* mask[0..n) = 0 (the masking of dgc's momentum by a dense message),
 * unless flags (the encode's, or NULL) or gate[0] (the call's momentum:
 * not applied) has HP_K_F_NONFINITE. */
int hp_kl_mask_zero(void *stream, float *mask, size_t n, const uint32_t *flags, const uint32_t *gate);

/* dst += src (n floats). */
int hp_kl_add(void *stream, float *dst, const float *src, size_t n);

/* dst[i] = v. */
int hp_kl_fill(void *stream, float *dst, float v, size_t n);

/* onebit encode of x (r: residual, or NULL) into scales (8 bytes per block)
 * and words (4 bytes per 32 elements; bits past n zero).  With r: nothing
 * happens when flags has HP_K_F_NONFINITE (hp_kl_finite ran first); r
 * becomes v - decode.  Without r: sets HP_K_F_NONFINITE on NaN/Inf. */
int hp_kl_onebit_enc(void *stream, const float *x, float *r, size_t n, uint32_t B, uint8_t *scales,
                     uint8_t *words, uint32_t *flags);

/* onebit decode; sets HP_K_F_BAD in *bad when a block's scales contradict
 * its bits (the host checked length, padding, finiteness and signs). */
int hp_kl_onebit_dec(void *stream, const uint8_t *scales, const uint8_t *words, size_t n, uint32_t B,
                     float *dst, int accumulate, uint32_t *bad);

/* tbq encode (thr > 0: fixed threshold, else scale * mean |v| per block). */
int hp_kl_tbq_enc(void *stream, const float *x, float *r, size_t n, uint32_t B, float thr, float scale,
                  uint8_t *taus, uint8_t *codes, uint32_t *flags);

/* tbq decode; HP_K_F_BAD on code 3 or a code other than 1 where tau is 0. */
int hp_kl_tbq_dec(void *stream, const uint8_t *taus, const uint8_t *codes, size_t n, uint32_t B,
                  float *dst, int accumulate, uint32_t *bad);

/* terngrad encode, one range per block of B: the blocks' pairs (8 bytes
 * each) and the codes (ceil(n bits / 8) bytes); HP_K_F_NONFINITE when the
 * largest |x| reaches 2^126 (or is NaN or Inf; the codes are not written). */
int hp_kl_tg_enc(void *stream, const float *x, size_t n, uint32_t B, uint32_t bits, uint64_t key, uint64_t ctr0,
                 uint8_t *pairs, uint8_t *codes, uint32_t *flags);

/* terngrad decode of a payload the host checked; HP_K_F_BAD in *bad for a
 * non-zero code in a block whose gap is 0. */
int hp_kl_tg_dec(void *stream, const uint8_t *pairs, const uint8_t *codes, size_t n, uint32_t B, uint32_t bits,
                 float *dst, int accumulate, uint32_t *bad);

/* q2, q4, q8 encode (src/comp/hp_comp_qbits.c): v = x + r (hp_k_q_v; r
 * NULL: x), one range per block of B, the pairs and the codes as
 * terngrad's (its decoder, hp_kl_tg_dec, decodes them), rounded to nearest
 * (stoch 0) or stochastically (1: counter ctr0 + i under key), and r =
 * v - decode; mask (dgc's momentum when q re-encodes its sum, or NULL)
 * zeroed whole: a dense message carries every element.  HP_K_F_NONFINITE
 * when the largest |x| reaches 2^126 (or is NaN or Inf): then neither the
 * codes nor r nor mask are written. */
int hp_kl_q_enc(void *stream, const float *x, float *r, float *mask, size_t n, uint32_t B, uint32_t bits,
                uint32_t stoch, uint64_t key, uint64_t ctr0, uint8_t *pairs, uint8_t *codes, uint32_t *flags);

/* graddrop / dgc encode (see hp_ops_sparse.h for the rule).  info[0]:
 * flags, info[1]: the number of pairs written to payload. */
typedef struct hp_kl_sparse {
    const float *g;
    float       *r;        /* residual (v stored), or NULL */
    float       *u;        /* momentum state (u' stored), or NULL */
    float        m;        /* momentum factor when u is not NULL */
    float       *mask;     /* zeroed at the sent indices too, or NULL */
    const uint32_t *gate;  /* with mask: unless gate[0] has HP_K_F_NONFINITE
                            * (the call's momentum was not applied) */
    size_t       n;
    uint32_t     G;        /* elements per block */
    uint32_t     k_full;   /* kept per full block */
    uint32_t     k_last;   /* kept by a last, shorter block */
    uint8_t     *payload;  /* 8 * (sum of k) bytes */
    void        *tmp;      /* hp_kl_sparse_tmp_bytes */
    uint32_t    *info;
} hp_kl_sparse_t;
size_t hp_kl_sparse_tmp_bytes(size_t n, uint32_t G, uint32_t k_full, uint32_t k_last);
int hp_kl_sparse_enc(void *stream, const hp_kl_sparse_t *a);

/* Sparse decode of m pairs (validated on the device: HP_K_F_BAD in *bad);
 * overwrite mode zero-fills dst first; nothing is scattered once *bad has
 * HP_K_F_BAD (pairs out of order may name an element twice). */
int hp_kl_sparse_dec(void *stream, const uint8_t *pairs, size_t m, size_t n, float *dst, int accumulate,
                     uint32_t *bad);

/* Zero v at the m indices of the pairs (dgc's momentum masking of a message
 * encoded elsewhere); nothing when flags[0] has HP_K_F_NONFINITE. */
int hp_kl_sparse_mask(void *stream, const uint8_t *pairs, const uint32_t *count, float *v, size_t n,
                      const uint32_t *flags);

/* A sparse message in device memory for n elements (m: cap bytes),
 * decoded into dst on the device from what its header says:
 * status[0] = hp_k_msg_head_sparse's HP_K_MSG_* (kind the format's, dense
 * the fallback's, `none`), status[3] = 1 for the dense fallback; for
 * pairs, status[2] |= HP_K_F_BAD when one breaks hp_k_sparse_pair_bad
 * (order, range, a NaN or Inf value); then overwrite mode zero-fills dst
 * and the pairs are scattered (or the dense values stored or added).
 * Nothing is written to dst unless status[0] is HP_K_MSG_OK, and no pair
 * is scattered once status[2] is set.  status is
 * the codec's HP_INFO_MSG words, [1..3] zeroed by the caller. */
int hp_kl_sparse_dec_msg(void *stream, const uint8_t *m, size_t cap, uint32_t kind, uint32_t dense, size_t n,
                         float *dst, int accumulate, uint32_t *status);

/* The header of a message of varying length whose encode's kernels ran
 * before: as hp_kl_msg_header, with a payload of unit * count[0] bytes
 * (count in device memory: the sparse encode's pair count, info word 1). */
int hp_kl_msg_header_count(void *stream, uint8_t *m, uint32_t kind, uint32_t n, uint32_t unit, const uint32_t *count,
                           const uint32_t *flags);

/* fp16 encode of x, blocks of B (a power of two >= 32) from x[0]: n
 * binary16 values into halves (2n bytes) and one exponent byte per block
 * into exps; HP_K_F_NONFINITE when x holds NaN or Inf (a block with one is
 * not written).  halves is 2-byte aligned. */
int hp_kl_f16_enc(void *stream, const float *x, size_t n, uint32_t B, uint8_t *halves, uint8_t *exps,
                  uint32_t *flags);

/* fp16 decode of a payload whose length and exponents the host checked;
 * HP_K_F_BAD in *bad when a block's halves break the rule of its exponent
 * (hp_k_f16_block_bad). */
int hp_kl_f16_dec(void *stream, const uint8_t *halves, const uint8_t *exps, size_t n, uint32_t B, float *dst,
                  int accumulate, uint32_t *bad);

/* bf16 encode: n values into out (2n bytes, 2-byte aligned);
 * HP_K_F_NONFINITE when x holds NaN or Inf. */
int hp_kl_bf16_enc(void *stream, const float *x, size_t n, uint8_t *out, uint32_t *flags);

/* bf16 decode; HP_K_F_BAD in *bad for a NaN or Inf value. */
int hp_kl_bf16_dec(void *stream, const uint8_t *in, size_t n, float *dst, int accumulate, uint32_t *bad);

/* dst[i] = src[i] converted (hp_k_convert), i < n; how: HP_KL_CVT_*
 * (cuda/kern/hp_kern.h).  The 16-bit side is 2-byte aligned. */
int hp_kl_convert(void *stream, void *dst, const void *src, size_t n, int how);

/* Whole messages in device memory (cuda/kern/hp_kern_msg.h: the header, the
 * checks).  The header of the message at m whose encode's kernels ran
 * before: kind, n, `payload` bytes, or the NaN message (no payload) when
 * flags[0] has HP_K_F_NONFINITE -- hp_msg_put_header's bytes. */
int hp_kl_msg_header(void *stream, uint8_t *m, uint32_t kind, uint32_t n, uint32_t payload, const uint32_t *flags);

/* The checks of the message at m (a buffer of cap bytes >= 12 + payload)
 * as a decoder of kind `kind` and a payload of `payload` bytes checked by
 * f's items: status[0] = the header's HP_K_MSG_*; status[1] |= 1 when a
 * payload item fails (the caller zeroed it; meaningful when status[0] is
 * HP_K_MSG_OK). */
int hp_kl_msg_check(void *stream, const uint8_t *m, size_t cap, uint32_t kind, uint32_t payload, hp_k_msgfmt_t f,
                    uint32_t *status);

/* The end of a device decode into dst (n floats): NaN everywhere when
 * status[0] is HP_K_MSG_NAN; otherwise, when status[0] is HP_K_MSG_REJECT
 * or status[1] or status[2] (the decode kernels' flag) is set, *sticky |=
 * HP_K_F_BAD. */
int hp_kl_msg_fix(void *stream, float *dst, size_t n, const uint32_t *status, uint32_t *sticky);

/* dst[i] = NaN for all n when any of the `bytes` bytes at flag is not
 * zero (a failure flag, or the failure agreement's result, on the device). */
int hp_kl_nan_if(void *stream, float *dst, size_t n, const uint8_t *flag, uint32_t bytes);

/* dst[i] = dst[i] / d for all n (a float division, IEEE-rounded; a NaN
 * keeps its bits, as the host's division does). */
int hp_kl_divide(void *stream, float *dst, size_t n, float d);

/* powersgd's passes over the m x c matrix M of n floats (the CPU's orders,
 * hp_kern.h): P (m x r) = M Q with Q^T (r x c) given, tiles of T columns;
 * Q^T = M^T P; and the reconstruction buf = P Qs^T, with res = M - P Ql^T
 * first when res is not NULL (M is buf). */
int hp_kl_psgd_mq(void *stream, const float *M, size_t n, size_t m, size_t c, size_t r, size_t T, const float *qt,
                  float *p);
int hp_kl_psgd_mtp(void *stream, const float *M, size_t n, size_t m, size_t c, size_t r, const float *p, float *qt);
int hp_kl_psgd_recon(void *stream, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                     const float *qs, const float *ql);

/* powersgd's stream-ordered steps (cuda/kern/hp_kern_psgd.h; the flags are
 * device memory, `bytes` bytes of which any set counts as set, as
 * hp_kl_nan_if reads them):
 * start_q: Q^T (r x c) from the warm start (NULL: none) or the RNG under
 * key, one thread per row; orth: P (m x r) orthonormalised in place (work:
 * m r doubles), one thread, nothing done when the flag is set;
 * recon_if: hp_kl_psgd_recon with res written only when the flag is clear;
 * copy_if: dst = src (n floats) only when the flag is clear. */
int hp_kl_psgd_start_q(void *stream, float *qt, const float *warm, size_t r, size_t c, uint64_t key);
int hp_kl_psgd_orth(void *stream, float *p, size_t m, size_t r, double *work, const uint8_t *flag, uint32_t bytes);
int hp_kl_psgd_recon_if(void *stream, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                        const float *qs, const float *ql, const uint8_t *flag, uint32_t bytes);
int hp_kl_copy_if(void *stream, float *dst, const float *src, size_t n, const uint8_t *flag, uint32_t bytes);

#ifdef __cplusplus
}
#endif
#endif
