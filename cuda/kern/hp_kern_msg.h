/*
 * Whole messages in device memory (hp_msg, src/comp/hp_comp.h: a 12-byte
 * header, then the payload), as per-thread functions that compile as C and
 * as CUDA device code, like hp_kern.h: the header a device encode writes,
 * the header checks of hp_msg_check, and the checks of a payload that the
 * host codec makes before a decode (hp_codec_fmt_t.check), one item at a
 * time, so a kernel can spread them over threads.  The host rows call the
 * same item functions (cuda/codec/hp_codec_quant.c, hp_codec_half.c), so a message
 * the device accepts is one the host codec accepts, and the reverse.
 *
 * A device decode has no return code: the check gives a status word on
 * the device (HP_K_MSG_*), which the decode's last kernel reads (NaN for
 * the NaN message, the sticky HP_K_F_BAD for a rejected one).
 */
#ifndef HP_KERN_MSG_H
#define HP_KERN_MSG_H

#include "hp_kern.h"

/* hp_comp.h's wire constants, spelt here for the module (no hp_comp.h
 * there); tests/gpu/kern/check_kern checks they agree. */
#define HP_K_MSG_HEADER 12u
#define HP_K_MSG_MAGIC 0xC5u
#define HP_K_MSG_VERSION 1u
#define HP_K_MSG_NONFINITE 0x1u
#define HP_K_MSG_EXCEPT 0x2u
#define HP_K_MSG_KIND_ERROR 0xFFu

/* The status of a message in device memory, after its checks. */
#define HP_K_MSG_OK 0u        /* decode the payload */
#define HP_K_MSG_NAN 1u       /* the NaN message: every element NaN */
#define HP_K_MSG_REJECT 2u    /* malformed, an error message, or one the device cannot decode */

/* The payload checks a format's row names (hp_codec_fmt_t.dcheck): which
 * item function below checks its payload. */
enum { HP_K_CHK_LEN = 0, HP_K_CHK_ONEBIT, HP_K_CHK_TBQ, HP_K_CHK_TG, HP_K_CHK_F16 };

/* What a payload check needs of the format: its elements, block, bits. */
typedef struct {
    uint32_t chk;      /* HP_K_CHK_* */
    uint32_t n, B, bits;
} hp_k_msgfmt_t;

/* The header hp_msg_put_header writes: kind, NONFINITE when `nonfinite`
 * (then no payload), n elements, `payload` bytes. */
HP_KD void hp_k_msg_put_header(uint8_t *m, uint32_t kind, int nonfinite, uint32_t n, uint32_t payload)
{
    m[0] = (uint8_t)HP_K_MSG_MAGIC;
    m[1] = (uint8_t)kind;
    m[2] = (uint8_t)(nonfinite ? HP_K_MSG_NONFINITE : 0u);
    m[3] = (uint8_t)HP_K_MSG_VERSION;
    hp_k_st32(m + 4, n);
    hp_k_st32(m + 8, nonfinite ? 0u : payload);
}

/* The header of a message in a buffer of cap bytes that must hold n
 * elements of kind `kind` in a payload of exactly `payload` bytes (the
 * formats of fixed length): hp_msg_len and hp_msg_check, except that the
 * dense fallback `none` and messages with exceptions are rejected (the
 * device decodes neither; a hipress sender of these formats sends neither
 * on the device path).  Returns HP_K_MSG_*. */
HP_KD uint32_t hp_k_msg_head(const uint8_t *m, size_t cap, uint32_t kind, uint32_t n, uint32_t payload)
{
    uint32_t flags = m[2], plen = hp_k_ld32(m + 8);
    if (cap < HP_K_MSG_HEADER || m[0] != HP_K_MSG_MAGIC || m[3] != HP_K_MSG_VERSION)
        return HP_K_MSG_REJECT;
    if ((flags & ~HP_K_MSG_NONFINITE) != 0 || (size_t)plen > cap - HP_K_MSG_HEADER)
        return HP_K_MSG_REJECT;
    if (m[1] != kind || hp_k_ld32(m + 4) != n)
        return HP_K_MSG_REJECT;   /* an error message (kind 0xFF) too */
    if (flags & HP_K_MSG_NONFINITE)
        return plen == 0 && n > 0 ? HP_K_MSG_NAN : HP_K_MSG_REJECT;
    if (n == 0)
        return plen == 0 ? HP_K_MSG_OK : HP_K_MSG_REJECT;
    return plen == payload ? HP_K_MSG_OK : HP_K_MSG_REJECT;
}

/* The header of a sparse message (graddrop, dgc: hp_ops_sparse.h) in a
 * buffer of cap bytes for n elements: kind `kind`, a payload of 8-byte
 * pairs, at most n of them (hp_sparse_decode's length rule); or the dense
 * fallback, kind `dense` (`none`: 4n bytes of floats, none's rule), which a
 * sparse sender makes for a set denser than half (src/algo/hp_algo_common.c;
 * its length is the host's, so both forms come in a slot of one capacity).
 * hp_msg_len and hp_msg_check otherwise, as hp_k_msg_head; messages with
 * exceptions are rejected.  Returns HP_K_MSG_*; *dense_p = 1 for the dense
 * fallback.  The pairs themselves are the decode kernels' (their order,
 * range and finite values). */
HP_KD uint32_t hp_k_msg_head_sparse(const uint8_t *m, size_t cap, uint32_t kind, uint32_t dense, uint32_t n,
                                    uint32_t *dense_p)
{
    uint32_t flags, plen;
    *dense_p = 0;
    if (cap < HP_K_MSG_HEADER || m[0] != HP_K_MSG_MAGIC || m[3] != HP_K_MSG_VERSION)
        return HP_K_MSG_REJECT;
    flags = m[2];
    plen = hp_k_ld32(m + 8);
    if ((flags & ~HP_K_MSG_NONFINITE) != 0 || (size_t)plen > cap - HP_K_MSG_HEADER)
        return HP_K_MSG_REJECT;
    if ((m[1] != kind && m[1] != dense) || hp_k_ld32(m + 4) != n)
        return HP_K_MSG_REJECT;   /* an error message (kind 0xFF) too */
    if (flags & HP_K_MSG_NONFINITE)
        return plen == 0 && n > 0 ? HP_K_MSG_NAN : HP_K_MSG_REJECT;
    if (n == 0)
        return plen == 0 ? HP_K_MSG_OK : HP_K_MSG_REJECT;
    if (m[1] == dense) {
        *dense_p = 1;
        return (size_t)plen == 4 * (size_t)n ? HP_K_MSG_OK : HP_K_MSG_REJECT;
    }
    return plen % 8 == 0 && plen / 8 <= n ? HP_K_MSG_OK : HP_K_MSG_REJECT;
}

/* Items of a payload check: one per block (scales, thresholds, ranges,
 * exponents), then one for the padding after the last element. */
HP_KD size_t hp_k_msg_items(const hp_k_msgfmt_t *f)
{
    size_t nb = f->B != 0 ? ((size_t)f->n + f->B - 1) / f->B : 0;
    switch (f->chk) {
    case HP_K_CHK_ONEBIT: case HP_K_CHK_TBQ: case HP_K_CHK_TG: return nb + 1;
    case HP_K_CHK_F16: return nb;
    default: return 0;
    }
}

HP_KD float hp_k_ldf(const uint8_t *p)
{
    return hp_u2f(hp_k_ld32(p));
}

/* Item j of the payload check of p (the payload, its length already
 * checked): 0 when acceptable.  The rules are those the host codec made
 * before (hp_codec_quant.c, hp_codec_half.c): what needs every element is
 * the decode kernels'. */
HP_KD int hp_k_msg_item(const hp_k_msgfmt_t *f, const uint8_t *p, size_t j)
{
    const size_t n = f->n, B = f->B, nb = (n + B - 1) / B;
    switch (f->chk) {
    case HP_K_CHK_ONEBIT: {
        const uint8_t *bits = p + 8 * nb;
        if (j < nb) {
            /* scales finite, with the sign of their class */
            float s0 = hp_k_ldf(p + 8 * j), s1 = hp_k_ldf(p + 8 * j + 4);
            return hp_nonfinite(s0) || hp_nonfinite(s1) || !(s0 >= 0.0f) || !(s1 <= 0.0f);
        }
        /* padding bits after element n-1, to the end of the last word */
        if ((n & 7) && (bits[n / 8] >> (n & 7)) != 0)
            return 1;
        for (size_t i = (n + 7) / 8; i < 4 * ((n + 31) / 32); i++)
            if (bits[i] != 0)
                return 1;
        return 0;
    }
    case HP_K_CHK_TBQ:
        if (j < nb) {
            float tau = hp_k_ldf(p + 4 * j);
            return hp_nonfinite(tau) || (hp_f2u(tau) >> 31) != 0;
        }
        return (n & 3) && (p[4 * nb + n / 4] >> (2 * (n & 3))) != 0;
    case HP_K_CHK_TG: {
        const uint32_t b = f->bits;
        if (j < nb) {
            const double top = 0x1p127 * (1.0 + 0x1p-20);
            float mn = hp_k_ldf(p + 8 * j), gap = hp_k_ldf(p + 8 * j + 4);
            if (!((hp_f2u(mn) & 0x7fffffffu) < HP_K_TG_LIMIT_BITS))
                return 1;
            return hp_f2u(gap) != 0 && !(gap > 0.0f && (double)gap * (double)((1u << b) - 1u) <= top);
        }
        /* a block whose gap is 0 must have codes 0: the decode kernel's */
        return ((n * b) & 7) && (p[8 * nb + n * b / 8] >> ((n * b) & 7)) != 0;
    }
    case HP_K_CHK_F16: {
        int e = (int8_t)p[2 * n + j];
        return e < HP_F16_EMIN || e > HP_F16_EMAX;
    }
    default:
        return 0;
    }
}

#endif
