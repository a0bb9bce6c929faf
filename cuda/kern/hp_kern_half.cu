/*
 * The CUDA kernels of the 16-bit formats and their launchers
 * (hp_klaunch.h): fp16 (a power-of-two scale per block) and bf16.  Shells
 * around hp_kern.h's per-thread functions, as in cuda/kern/hp_kern.cu;
 * tests/gpu/emu/hp_kern_emu_half.c runs the same grid on the host.  Built with
 * --fmad=false.
 */
#include "hp_kern_cu.cuh"

/* --------------------------------------------------------- fp16, bf16 */

#define F16_SPAN 4096   /* a CTA covers max(B, F16_SPAN) elements (16 blocks below 256): whole blocks */
#define F16_REG  8      /* values a thread keeps for the second pass: blocks up to TPB * F16_REG */

/* Threads of an fp16 CTA: min(B, TPB), so a block of 32 is one warp. */
__host__ __device__ static inline unsigned f16_threads(uint32_t B)
{
    return B < TPB ? B : TPB;
}

__host__ __device__ static inline size_t f16_span(uint32_t B)
{
    const size_t t = f16_threads(B), span = t * 16 < F16_SPAN ? t * 16 : F16_SPAN;
    return B > span ? B : span;
}

/* The largest of every thread's v in the CTA (all threads get it); sm holds
 * a word per warp and is free again on return. */
__device__ static uint32_t cta_umax(uint32_t v, uint32_t *sm)
{
    const unsigned nw = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1) {
        uint32_t t = __shfl_xor_sync(FULL, v, o);
        v = t > v ? t : v;
    }
    if ((threadIdx.x & 31) == 0)
        sm[threadIdx.x / 32] = v;
    __syncthreads();
    v = sm[0];
    for (unsigned w = 1; w < nw; w++)
        v = sm[w] > v ? sm[w] : v;
    __syncthreads();
    return v;
}

/* A CTA per span of whole blocks; per block the largest |x| (one read: the
 * values stay in registers when the block fits, else the second pass reads
 * them again), then the exponent by one thread and the halves.  The
 * message is 2-byte aligned (the codec's workspace), so halves are stored
 * as 16-bit words (little-endian, as the CPU's bytes). */
__global__ static void __launch_bounds__(TPB) k_f16_enc(const float *x, size_t n, uint32_t B, uint8_t *halves,
                                                        uint8_t *exps, uint32_t *flags)
{
    HP_SHARED(uint32_t, sm, TPB / 32);
    const size_t span = f16_span(B), base = (size_t)blockIdx.x * span;
    const unsigned nt = blockDim.x;
    const int reg = B <= nt * F16_REG;
    uint16_t *h = (uint16_t *)halves;
    for (size_t b0 = base; b0 < n && b0 < base + span; b0 += B) {
        const size_t end = n - b0 < B ? n : b0 + B;
        float c[F16_REG];
        uint32_t m = 0;
        int e;
        float scale;
        if (reg) {
#pragma unroll
            for (int j = 0; j < F16_REG; j++) {
                const size_t i = b0 + threadIdx.x + (size_t)j * nt;
                c[j] = i < end ? x[i] : 0.0f;
                m = hp_k_absmax_step(m, c[j]);
            }
        } else {
            for (size_t i = b0 + threadIdx.x; i < end; i += nt)
                m = hp_k_absmax_step(m, x[i]);
        }
        m = cta_umax(m, sm);
        if (m >= HP_K_NONFINITE_BITS) {
            if (threadIdx.x == 0)
                atomicOr(flags, HP_K_F_NONFINITE);
            continue;
        }
        e = hp_f16_block_exp(m);
        if (threadIdx.x == 0)
            exps[b0 / B] = (uint8_t)(int8_t)e;
        scale = hp_exp2i(e);
        if (reg) {
#pragma unroll
            for (int j = 0; j < F16_REG; j++) {
                const size_t i = b0 + threadIdx.x + (size_t)j * nt;
                if (i < end)
                    h[i] = hp_f16_enc(c[j], scale);
            }
        } else {
            for (size_t i = b0 + threadIdx.x; i < end; i += nt)
                h[i] = hp_f16_enc(x[i], scale);
        }
    }
}

extern "C" int hp_kl_f16_enc(void *stream, const float *x, size_t n, uint32_t B, uint8_t *halves, uint8_t *exps,
                             uint32_t *flags)
{
    const size_t span = f16_span(B);
    if (n == 0)
        return 0;
    HP_LAUNCH(k_f16_enc, (unsigned)((n + span - 1) / span), f16_threads(B), (cudaStream_t)stream)(x, n, B, halves, exps,
                                                                                                  flags);
    return launched();
}

/* The same grid: each thread decodes its halves as it reads them, the
 * block's largest |h| checked against its exponent by one thread. */
__global__ static void __launch_bounds__(TPB) k_f16_dec(const uint8_t *halves, const uint8_t *exps, size_t n,
                                                        uint32_t B, float *dst, int accumulate, uint32_t *bad)
{
    HP_SHARED(uint32_t, sm, TPB / 32);
    const size_t span = f16_span(B), base = (size_t)blockIdx.x * span;
    const unsigned nt = blockDim.x;
    const uint16_t *h = (const uint16_t *)halves;
    for (size_t b0 = base; b0 < n && b0 < base + span; b0 += B) {
        const size_t end = n - b0 < B ? n : b0 + B;
        const int e = (int8_t)exps[b0 / B];
        const float inv = hp_exp2i(-e);
        uint32_t mx = 0;
        for (size_t i = b0 + threadIdx.x; i < end; i += nt) {
            const uint16_t v = h[i];
            const uint32_t a = v & 0x7fffu;
            mx = a > mx ? a : mx;
            hp_k_store(dst, i, hp_f16_dec(v, inv), accumulate);
        }
        mx = cta_umax(mx, sm);
        if (threadIdx.x == 0 && hp_k_f16_block_bad(mx, e))
            atomicOr(bad, HP_K_F_BAD);
    }
}

extern "C" int hp_kl_f16_dec(void *stream, const uint8_t *halves, const uint8_t *exps, size_t n, uint32_t B,
                             float *dst, int accumulate, uint32_t *bad)
{
    const size_t span = f16_span(B);
    if (n == 0)
        return 0;
    HP_LAUNCH(k_f16_dec, (unsigned)((n + span - 1) / span), f16_threads(B), (cudaStream_t)stream)(halves, exps, n, B,
                                                                                                  dst, accumulate, bad);
    return launched();
}

/* bf16: element-wise, 16-bit stores (the message is 2-byte aligned). */
__global__ static void k_bf16_enc(const float *x, size_t n, uint8_t *out, uint32_t *flags)
{
    uint16_t *o = (uint16_t *)out;
    int bad = 0;
    GRID_STRIDE(i, n) {
        const float v = x[i];
        bad |= hp_nonfinite(v);
        o[i] = hp_bf16_enc(v);
    }
    if (__any_sync(FULL, bad) && (threadIdx.x & 31) == 0)
        atomicOr(flags, HP_K_F_NONFINITE);
}

extern "C" int hp_kl_bf16_enc(void *stream, const float *x, size_t n, uint8_t *out, uint32_t *flags)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_bf16_enc, grid_for(n, 4), TPB, (cudaStream_t)stream)(x, n, out, flags);
    return launched();
}

__global__ static void k_bf16_dec(const uint8_t *in, size_t n, float *dst, int accumulate, uint32_t *bad)
{
    const uint16_t *h = (const uint16_t *)in;
    int b = 0;
    GRID_STRIDE(i, n) {
        const uint16_t v = h[i];
        b |= hp_k_bf16_bad(v);
        hp_k_store(dst, i, hp_bf16_to_f32(v), accumulate);
    }
    if (__any_sync(FULL, b) && (threadIdx.x & 31) == 0)
        atomicOr(bad, HP_K_F_BAD);
}

extern "C" int hp_kl_bf16_dec(void *stream, const uint8_t *in, size_t n, float *dst, int accumulate, uint32_t *bad)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_bf16_dec, grid_for(n, 4), TPB, (cudaStream_t)stream)(in, n, dst, accumulate, bad);
    return launched();
}

/* 16-bit gradients to float and back: element-wise (hp_k_convert). */
__global__ static void k_convert(void *dst, const void *src, size_t n, int how)
{
    GRID_STRIDE(i, n)
        hp_k_convert(dst, src, i, how);
}

extern "C" int hp_kl_convert(void *stream, void *dst, const void *src, size_t n, int how)
{
    if (n == 0)
        return 0;
    HP_LAUNCH(k_convert, grid_for(n, 4), TPB, (cudaStream_t)stream)(dst, src, n, how);
    return launched();
}

/* the kernels of this file (hp_kl_preload) */
extern "C" int hp_kl_preload_half(void)
{
    int n = 0;
    HP_PRELOAD(n, k_f16_enc);
    HP_PRELOAD(n, k_f16_dec);
    HP_PRELOAD(n, k_bf16_enc);
    HP_PRELOAD(n, k_bf16_dec);
    HP_PRELOAD(n, k_convert);
    return n;
}
