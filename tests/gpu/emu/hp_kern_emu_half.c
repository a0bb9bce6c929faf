/*
 * The kernels of cuda/kern/hp_kern_half.cu (fp16, bf16) run serially on the
 * host, over the same grid and per-thread functions, as tests/gpu/emu/hp_kern_emu.c
 * says.
 */
#include "hp_kern_emu.h"

/* -------------------------------------------------------- fp16, bf16 */

/* A CTA per span of whole blocks (hp_kern_half.cu): per block the largest |x|
 * (a maximum: any order), then the halves. */
HP_EMU_KERNEL(f16_enc, (const float *, x), (size_t, n), (uint32_t, B), (uint8_t *, halves), (uint8_t *, exps),
              (uint32_t *, flags))
{
    x = P(const float *, x);
    halves = P(uint8_t *, halves);
    exps = P(uint8_t *, exps);
    flags = P(uint32_t *, flags);
    for (size_t b0 = 0; b0 < n; b0 += B) {
        const size_t end = n - b0 < B ? n : b0 + B;
        uint32_t m = 0;
        int e;
        float scale;
        for (size_t i = b0; i < end; i++)
            m = hp_k_absmax_step(m, x[i]);
        if (m >= HP_K_NONFINITE_BITS) {
            flags[0] |= HP_K_F_NONFINITE;
            continue;
        }
        e = hp_f16_block_exp(m);
        exps[b0 / B] = (uint8_t)(int8_t)e;
        scale = hp_exp2i(e);
        for (size_t i = b0; i < end; i++)
            hp_k_st16(halves + 2 * i, hp_f16_enc(x[i], scale));
    }
    return 0;
}

HP_EMU_KERNEL(f16_dec, (const uint8_t *, halves), (const uint8_t *, exps), (size_t, n), (uint32_t, B),
              (float *, dst), (int, accumulate), (uint32_t *, bad))
{
    halves = P(const uint8_t *, halves);
    exps = P(const uint8_t *, exps);
    dst = P(float *, dst);
    bad = P(uint32_t *, bad);
    for (size_t b0 = 0; b0 < n; b0 += B) {
        const size_t end = n - b0 < B ? n : b0 + B;
        const int e = (int8_t)exps[b0 / B];
        const float inv = hp_exp2i(-e);
        uint32_t mx = 0;
        for (size_t i = b0; i < end; i++) {
            uint16_t h = hp_k_ld16(halves + 2 * i);
            uint32_t a = h & 0x7fffu;
            mx = a > mx ? a : mx;
            hp_k_store(dst, i, hp_f16_dec(h, inv), accumulate);
        }
        if (hp_k_f16_block_bad(mx, e))
            bad[0] |= HP_K_F_BAD;
    }
    return 0;
}

HP_EMU_KERNEL(bf16_enc, (const float *, x), (size_t, n), (uint8_t *, out), (uint32_t *, flags))
{
    x = P(const float *, x);
    out = P(uint8_t *, out);
    flags = P(uint32_t *, flags);
    for (size_t i = 0; i < n; i++) {
        if (hp_nonfinite(x[i]))
            flags[0] |= HP_K_F_NONFINITE;
        hp_k_st16(out + 2 * i, hp_bf16_enc(x[i]));
    }
    return 0;
}

HP_EMU_KERNEL(bf16_dec, (const uint8_t *, in), (size_t, n), (float *, dst), (int, accumulate), (uint32_t *, bad))
{
    in = P(const uint8_t *, in);
    dst = P(float *, dst);
    bad = P(uint32_t *, bad);
    for (size_t i = 0; i < n; i++) {
        uint16_t h = hp_k_ld16(in + 2 * i);
        if (hp_k_bf16_bad(h))
            bad[0] |= HP_K_F_BAD;
        hp_k_store(dst, i, hp_bf16_to_f32(h), accumulate);
    }
    return 0;
}

HP_EMU_KERNEL(convert, (void *, dst), (const void *, src), (size_t, n), (int, how))
{
    dst = P(void *, dst);
    src = P(const void *, src);
    for (size_t i = 0; i < n; i++)
        hp_k_convert(dst, src, i, how);
    return 0;
}
