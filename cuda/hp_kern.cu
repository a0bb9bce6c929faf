/*
 * The CUDA kernels of the codec and their launchers (hp_klaunch.h).  Every
 * kernel is a shell around the per-thread functions of hp_kern.h: it picks
 * a thread's elements and does what needs the hardware (ballots, shuffles,
 * shared memory, atomics on flags and histograms).  cuda/hp_kern_emu.c runs
 * the same grid serially; tests/check_kern.c holds the emulation to the CPU
 * compressors' bytes, and scripts/gpu-check (tests/gpu_kern.cu) holds these
 * kernels to them on a GPU.
 *
 * Built with --fmad=false: a product feeding a sum must round on its own,
 * as it does on the CPU.
 */
#include "hp_klaunch.h"
#include "hp_kern.h"
#include <cuda_runtime.h>

#define FULL 0xffffffffu
#define TPB 256                      /* threads of the element-wise kernels */

static_assert(TPB == HP_K_WARPS * HP_K_WARP, "the block kernels run one warp per chunk slot");

static unsigned grid_for(size_t n, size_t per_thread)
{
    size_t g = (n + TPB * per_thread - 1) / (TPB * per_thread);
    if (g < 1)
        g = 1;
    return (unsigned)(g > 65535u * 4u ? 65535u * 4u : g);
}

static int launched(void)
{
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* ------------------------------------------------------------ helpers */

__global__ static void k_probe(uint32_t *p)
{
    *p = 0x48505253u;
}

extern "C" int hp_kl_probe(void)
{
    uint32_t *d = NULL, h = 0;
    int ok;
    if (cudaMalloc((void **)&d, sizeof(uint32_t)) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    k_probe<<<1, 1>>>(d);
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost) == cudaSuccess && h == 0x48505253u;
    cudaFree(d);
    cudaGetLastError();
    return ok ? 0 : -1;
}

__global__ static void k_finite(const float *x, size_t n, uint32_t *flags)
{
    int bad = 0;
    GRID_STRIDE(i, n)
        bad |= hp_nonfinite(x[i]);
    if (__any_sync(FULL, bad) && (threadIdx.x & 31) == 0)
        atomicOr(flags, HP_K_F_NONFINITE);
}

extern "C" int hp_kl_finite(void *stream, const float *x, size_t n, uint32_t *flags)
{
    if (n == 0)
        return 0;
    k_finite<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(x, n, flags);
    return launched();
}

__global__ static void k_fold(float *buf, float *r, size_t n, const uint32_t *flags)
{
    if (flags[0] & HP_K_F_NONFINITE)
        return;
    GRID_STRIDE(i, n) {
        buf[i] = buf[i] + r[i];
        r[i] = 0.0f;
    }
}

extern "C" int hp_kl_fold(void *stream, float *buf, float *r, size_t n, const uint32_t *flags)
{
    if (n == 0)
        return 0;
    k_fold<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(buf, r, n, flags);
    return launched();
}

__global__ static void k_momentum(float *u, float *buf, float m, size_t n, const uint32_t *flags)
{
    if (flags[0] & HP_K_F_NONFINITE)
        return;
    GRID_STRIDE(i, n) {
        float v = hp_k_sparse_u(buf, u, m, i);
        u[i] = v;
        buf[i] = v;
    }
}

extern "C" int hp_kl_momentum(void *stream, float *u, float *buf, float m, size_t n, const uint32_t *flags)
{
    if (n == 0)
        return 0;
    k_momentum<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(u, buf, m, n, flags);
    return launched();
}

__global__ static void k_add(float *dst, const float *src, size_t n)
{
    GRID_STRIDE(i, n)
        dst[i] = dst[i] + src[i];
}

extern "C" int hp_kl_add(void *stream, float *dst, const float *src, size_t n)
{
    if (n == 0)
        return 0;
    k_add<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(dst, src, n);
    return launched();
}

__global__ static void k_fill(float *dst, float v, size_t n)
{
    GRID_STRIDE(i, n)
        dst[i] = v;
}

extern "C" int hp_kl_fill(void *stream, float *dst, float v, size_t n)
{
    if (n == 0)
        return 0;
    k_fill<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(dst, v, n);
    return launched();
}

/* Warp sum of an integer (any order gives the same). */
__device__ static uint32_t warp_sum(uint32_t v)
{
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_xor_sync(FULL, v, d);
    return v;
}

/* The 32 lane totals of a warp, added in double in lane order (every lane
 * gets the sum). */
__device__ static double lanes_in_order(float l)
{
    double s = 0.0;
    for (int j = 0; j < 32; j++)
        s += (double)__shfl_sync(FULL, l, j);
    return s;
}

/* ------------------------------------------------------------- onebit */

/* One CTA per span of whole blocks: its 8 warps reduce its chunks (and
 * write the bit words), one thread per block adds the chunk results in
 * order and writes the scales, then every thread writes residuals. */
__global__ static void __launch_bounds__(TPB) k_onebit_enc(const float *x, float *r, size_t n, uint32_t B,
                                                          uint8_t *scales, uint8_t *words, uint32_t *flags)
{
    __shared__ double cpos[HP_K_MAXCH], cneg[HP_K_MAXCH];
    __shared__ uint32_t cnp[HP_K_MAXCH];
    __shared__ float sc[HP_K_MAXCH][2];
    const hp_k_bgrid_t g = hp_k_bgrid(n, B);
    const size_t cta = blockIdx.x, base = cta * g.span, nch = hp_k_cta_chunks(&g), nbl = hp_k_cta_blocks(&g);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (r != NULL && (flags[0] & HP_K_F_NONFINITE))
        return;
    for (size_t c = warp; c < nch; c += HP_K_WARPS) {
        size_t off, len;
        float pos = 0.0f, neg = 0.0f;
        uint32_t np = 0;
        double p, q;
        hp_k_chunk(&g, cta, c, &off, &len);
        if (len == 0)
            break;
        const float *xc = x + off, *rc = r != NULL ? r + off : NULL;
        for (size_t t = 0; t * 32 < len; t++) {
            size_t i = t * 32 + lane;
            int act = i < len;
            float v = act ? hp_k_v(xc, rc, i) : 0.0f;
            uint32_t w;
            if (act)
                hp_k_sign_step(v, &pos, &neg, &np);
            w = __ballot_sync(FULL, act && v >= 0.0f);
            if (lane == 0)
                hp_k_st32(words + 4 * (off / 32 + t), w);
        }
        p = lanes_in_order(pos);
        q = lanes_in_order(neg);
        np = warp_sum(np);
        if (lane == 0) {
            if (!isfinite(p) || !isfinite(q)) {
                p = hp_k_sum_exact(xc, rc, len, 1);
                q = hp_k_sum_exact(xc, rc, len, 2);
            }
            cpos[c] = p;
            cneg[c] = q;
            cnp[c] = np;
        }
    }
    __syncthreads();
    for (size_t b = threadIdx.x; b < nbl; b += TPB) {
        size_t start = base + b * B, len, cpb = B / g.C, npos = 0;
        double pos = 0.0, neg = 0.0;
        if (start >= n)
            break;
        len = n - start < B ? n - start : B;
        for (size_t c = b * cpb; c < (b + 1) * cpb && (c - b * cpb) * g.C < len; c++) {
            pos += cpos[c];
            neg += cneg[c];
            npos += cnp[c];
        }
        if (!isfinite(pos) || !isfinite(neg)) {
            atomicOr(flags, HP_K_F_NONFINITE);   /* only without a residual */
            continue;
        }
        hp_k_onebit_scales(pos, neg, npos, len, sc[b]);
        hp_k_st32(scales + 8 * (start / B), hp_f2u(sc[b][0]));
        hp_k_st32(scales + 8 * (start / B) + 4, hp_f2u(sc[b][1]));
    }
    if (r == NULL)
        return;
    __syncthreads();
    for (size_t i = base + threadIdx.x; i < n && i < base + g.span; i += TPB) {
        const float *s = sc[(i - base) / B];
        float v = hp_k_v(x, r, i);
        r[i] = v - hp_k_onebit_sel(v, s[0], s[1]);
    }
}

/* The same for blocks of 2048 to 16384 elements (the default 4096), where
 * each warp has exactly one chunk of the CTA's span: a lane keeps its 64
 * values in registers between the sums and the residual, so the data is
 * read from memory once. */
#define REG_STEPS (HP_K_CHUNK / 32)
static_assert(HP_K_SPAN / HP_K_CHUNK == HP_K_WARPS, "one chunk per warp");

static int reg_path(uint32_t B)
{
    return B >= HP_K_CHUNK && B <= HP_K_SPAN;
}

template <bool EF>
__global__ static void __launch_bounds__(TPB) k_onebit_enc_reg(const float *x, float *r, size_t n, uint32_t B,
                                                              uint8_t *scales, uint8_t *words, uint32_t *flags)
{
    __shared__ double cpos[HP_K_WARPS], cneg[HP_K_WARPS];
    __shared__ uint32_t cnp[HP_K_WARPS];
    __shared__ float sc[HP_K_WARPS][2];
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t base = (size_t)blockIdx.x * HP_K_SPAN, off = base + (size_t)warp * HP_K_CHUNK;
    const size_t len = off < n ? (n - off < HP_K_CHUNK ? n - off : HP_K_CHUNK) : 0;
    const size_t nbl = HP_K_SPAN / B;
    float v[REG_STEPS];

    if (EF && (flags[0] & HP_K_F_NONFINITE))
        return;
    if (len > 0) {
        const float *xc = x + off, *rc = EF ? r + off : NULL;
        float pos = 0.0f, neg = 0.0f;
        uint32_t np = 0;
        double p, q;
#pragma unroll
        for (int t = 0; t < REG_STEPS; t++) {
            size_t i = (size_t)t * 32 + lane;
            int act = i < len;
            uint32_t w;
            v[t] = act ? hp_k_v(xc, rc, i) : 0.0f;
            if (act)
                hp_k_sign_step(v[t], &pos, &neg, &np);
            w = __ballot_sync(FULL, act && v[t] >= 0.0f);
            if (lane == 0 && (size_t)t * 32 < len)
                hp_k_st32(words + 4 * (off / 32 + (size_t)t), w);
        }
        p = lanes_in_order(pos);
        q = lanes_in_order(neg);
        np = warp_sum(np);
        if (lane == 0) {
            if (!isfinite(p) || !isfinite(q)) {
                p = hp_k_sum_exact(xc, rc, len, 1);
                q = hp_k_sum_exact(xc, rc, len, 2);
            }
            cpos[warp] = p;
            cneg[warp] = q;
            cnp[warp] = np;
        }
    }
    __syncthreads();
    if (threadIdx.x < nbl) {
        const size_t b = threadIdx.x, start = base + b * B, cpb = B / HP_K_CHUNK;
        if (start < n) {
            size_t blen = n - start < B ? n - start : B, npos = 0;
            double pos = 0.0, neg = 0.0;
            for (size_t c = b * cpb; c < (b + 1) * cpb && (c - b * cpb) * HP_K_CHUNK < blen; c++) {
                pos += cpos[c];
                neg += cneg[c];
                npos += cnp[c];
            }
            if (!isfinite(pos) || !isfinite(neg)) {
                atomicOr(flags, HP_K_F_NONFINITE);   /* only without a residual */
            } else {
                hp_k_onebit_scales(pos, neg, npos, blen, sc[b]);
                hp_k_st32(scales + 8 * (start / B), hp_f2u(sc[b][0]));
                hp_k_st32(scales + 8 * (start / B) + 4, hp_f2u(sc[b][1]));
            }
        }
    }
    if (!EF)
        return;
    __syncthreads();
    if (len > 0) {
        const float *s = sc[(off - base) / B];   /* a chunk lies in one block */
#pragma unroll
        for (int t = 0; t < REG_STEPS; t++) {
            size_t i = (size_t)t * 32 + lane;
            if (i < len)
                r[off + i] = v[t] - hp_k_onebit_sel(v[t], s[0], s[1]);
        }
    }
}

extern "C" int hp_kl_onebit_enc(void *stream, const float *x, float *r, size_t n, uint32_t B, uint8_t *scales,
                                uint8_t *words, uint32_t *flags)
{
    const hp_k_bgrid_t g = hp_k_bgrid(n, B);
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
    if (reg_path(B) && r != NULL)
        k_onebit_enc_reg<true><<<(unsigned)g.ncta, TPB, 0, s>>>(x, r, n, B, scales, words, flags);
    else if (reg_path(B))
        k_onebit_enc_reg<false><<<(unsigned)g.ncta, TPB, 0, s>>>(x, r, n, B, scales, words, flags);
    else
        k_onebit_enc<<<(unsigned)g.ncta, TPB, 0, s>>>(x, r, n, B, scales, words, flags);
    return launched();
}

/* One thread per block: its set bits against its scales. */
__global__ static void k_onebit_check(const uint8_t *scales, const uint8_t *words, size_t n, uint32_t B,
                                      uint32_t *bad)
{
    const size_t nb = (n + B - 1) / B;
    GRID_STRIDE(b, nb) {
        size_t start = b * B, len = n - start < B ? n - start : B, npos = 0;
        for (size_t w = 0; w * 32 < len; w++)
            npos += hp_k_popc(hp_k_ld32(words + 4 * (start / 32 + w)));
        if (!hp_k_onebit_scales_ok(hp_u2f(hp_k_ld32(scales + 8 * b)), hp_u2f(hp_k_ld32(scales + 8 * b + 4)),
                                   npos, len))
            atomicOr(bad, HP_K_F_BAD);
    }
}

__global__ static void k_onebit_dec(const uint8_t *scales, const uint8_t *words, size_t n, uint32_t B,
                                    float *dst, int accumulate)
{
    GRID_STRIDE(i, n) {
        uint32_t w = hp_k_ld32(words + 4 * (i / 32));
        const uint8_t *s = scales + 8 * (i / B);
        hp_k_store(dst, i, hp_k_onebit_bit_sel(w >> (i % 32), hp_u2f(hp_k_ld32(s)), hp_u2f(hp_k_ld32(s + 4))),
                   accumulate);
    }
}

extern "C" int hp_kl_onebit_dec(void *stream, const uint8_t *scales, const uint8_t *words, size_t n, uint32_t B,
                                float *dst, int accumulate, uint32_t *bad)
{
    const size_t nb = (n + B - 1) / B;
    if (n == 0)
        return 0;
    k_onebit_check<<<grid_for(nb, 1), TPB, 0, (cudaStream_t)stream>>>(scales, words, n, B, bad);
    k_onebit_dec<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(scales, words, n, B, dst, accumulate);
    return launched();
}

/* ---------------------------------------------------------------- tbq */

__global__ static void __launch_bounds__(TPB) k_tbq_enc(const float *x, float *r, size_t n, uint32_t B, float thr,
                                                       float scale, uint8_t *taus, uint8_t *codes, uint32_t *flags)
{
    __shared__ double cs[HP_K_MAXCH];
    __shared__ float tau[HP_K_MAXCH];
    const hp_k_bgrid_t g = hp_k_bgrid(n, B);
    const size_t cta = blockIdx.x, base = cta * g.span, nch = hp_k_cta_chunks(&g), nbl = hp_k_cta_blocks(&g);
    const size_t end = n - base < g.span ? n : base + g.span;
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int bad = 0;

    if (r != NULL && (flags[0] & HP_K_F_NONFINITE))
        return;
    if (thr == 0.0f) {
        for (size_t c = warp; c < nch; c += HP_K_WARPS) {
            size_t off, len;
            float a = 0.0f;
            double s;
            hp_k_chunk(&g, cta, c, &off, &len);
            if (len == 0)
                break;
            const float *xc = x + off, *rc = r != NULL ? r + off : NULL;
            for (size_t i = lane; i < len; i += 32)
                a += fabsf(hp_k_v(xc, rc, i));
            s = lanes_in_order(a);
            if (lane == 0) {
                if (!isfinite(s))
                    s = hp_k_sum_exact(xc, rc, len, 0);
                cs[c] = s;
            }
        }
        __syncthreads();
    }
    for (size_t b = threadIdx.x; b < nbl; b += TPB) {
        size_t start = base + b * B, len, cpb = B / g.C;
        double asum = 0.0;
        if (start >= n)
            break;
        len = n - start < B ? n - start : B;
        if (thr == 0.0f) {
            for (size_t c = b * cpb; c < (b + 1) * cpb && (c - b * cpb) * g.C < len; c++)
                asum += cs[c];
            if (!isfinite(asum))
                atomicOr(flags, HP_K_F_NONFINITE);   /* only without a residual */
        }
        tau[b] = hp_k_tbq_tau(asum, len, thr, scale);
        hp_k_st32(taus + 4 * (start / B), hp_f2u(tau[b]));
    }
    __syncthreads();
    /* four elements (one byte of codes) per thread */
    for (size_t i0 = base + 4 * (size_t)threadIdx.x; i0 < end; i0 += 4 * TPB) {
        uint32_t byte = 0;
        for (size_t i = i0; i < i0 + 4 && i < end; i++) {
            float t = tau[(i - base) / B];
            float v = hp_k_v(x, r, i);
            uint32_t c = hp_k_tbq_code(v, t);
            bad |= r == NULL && hp_nonfinite(v);
            byte |= c << (2 * (i - i0));
            if (r != NULL)
                r[i] = hp_k_tbq_resid(v, c, t);
        }
        codes[i0 / 4] = (uint8_t)byte;
    }
    if (bad)
        atomicOr(flags, HP_K_F_NONFINITE);
}

/* tbq with values kept in registers (blocks of 2048 to 16384, as onebit). */
template <bool EF>
__global__ static void __launch_bounds__(TPB) k_tbq_enc_reg(const float *x, float *r, size_t n, uint32_t B,
                                                           float thr, float scale, uint8_t *taus, uint8_t *codes,
                                                           uint32_t *flags)
{
    __shared__ double cs[HP_K_WARPS];
    __shared__ float tau[HP_K_WARPS];
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t base = (size_t)blockIdx.x * HP_K_SPAN, off = base + (size_t)warp * HP_K_CHUNK;
    const size_t len = off < n ? (n - off < HP_K_CHUNK ? n - off : HP_K_CHUNK) : 0;
    const size_t nbl = HP_K_SPAN / B;
    const float *xc = x + off, *rc = EF ? r + off : NULL;
    float v[REG_STEPS];
    int bad = 0;

    if (EF && (flags[0] & HP_K_F_NONFINITE))
        return;
    if (len > 0) {
        float a = 0.0f;
#pragma unroll
        for (int t = 0; t < REG_STEPS; t++) {
            size_t i = (size_t)t * 32 + lane;
            v[t] = i < len ? hp_k_v(xc, rc, i) : 0.0f;
            a += fabsf(v[t]);   /* +0 for a lane past the end: the CPU's lane adds nothing, and x + 0 = x */
        }
        if (thr == 0.0f) {
            double sum = lanes_in_order(a);
            if (lane == 0) {
                if (!isfinite(sum))
                    sum = hp_k_sum_exact(xc, rc, len, 0);
                cs[warp] = sum;
            }
        }
    }
    __syncthreads();
    if (threadIdx.x < nbl) {
        const size_t b = threadIdx.x, start = base + b * B, cpb = B / HP_K_CHUNK;
        if (start < n) {
            size_t blen = n - start < B ? n - start : B;
            double asum = 0.0;
            if (thr == 0.0f) {
                for (size_t c = b * cpb; c < (b + 1) * cpb && (c - b * cpb) * HP_K_CHUNK < blen; c++)
                    asum += cs[c];
                if (!isfinite(asum))
                    atomicOr(flags, HP_K_F_NONFINITE);   /* only without a residual */
            }
            tau[b] = hp_k_tbq_tau(asum, blen, thr, scale);
            hp_k_st32(taus + 4 * (start / B), hp_f2u(tau[b]));
        }
    }
    __syncthreads();
    if (len > 0) {
        const float t_ = tau[(off - base) / B];
#pragma unroll
        for (int t = 0; t < REG_STEPS; t++) {
            size_t i = (size_t)t * 32 + lane;
            int act = i < len;
            uint32_t c = act ? hp_k_tbq_code(v[t], t_) : 0u, byte;
            bad |= !EF && act && hp_nonfinite(v[t]);
            /* the byte of four elements, gathered in the first lane of the four */
            byte = c | (__shfl_down_sync(FULL, c, 1) << 2) | (__shfl_down_sync(FULL, c, 2) << 4) |
                   (__shfl_down_sync(FULL, c, 3) << 6);
            if (act && (lane & 3) == 0)
                codes[(off + i) / 4] = (uint8_t)byte;
            if (EF && act)
                r[off + i] = hp_k_tbq_resid(v[t], c, t_);
        }
    }
    if (bad)
        atomicOr(flags, HP_K_F_NONFINITE);
}

extern "C" int hp_kl_tbq_enc(void *stream, const float *x, float *r, size_t n, uint32_t B, float thr, float scale,
                             uint8_t *taus, uint8_t *codes, uint32_t *flags)
{
    const hp_k_bgrid_t g = hp_k_bgrid(n, B);
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
    if (reg_path(B) && r != NULL)
        k_tbq_enc_reg<true><<<(unsigned)g.ncta, TPB, 0, s>>>(x, r, n, B, thr, scale, taus, codes, flags);
    else if (reg_path(B))
        k_tbq_enc_reg<false><<<(unsigned)g.ncta, TPB, 0, s>>>(x, r, n, B, thr, scale, taus, codes, flags);
    else
        k_tbq_enc<<<(unsigned)g.ncta, TPB, 0, s>>>(x, r, n, B, thr, scale, taus, codes, flags);
    return launched();
}

__global__ static void k_tbq_dec(const uint8_t *taus, const uint8_t *codes, size_t n, uint32_t B, float *dst,
                                 int accumulate, uint32_t *bad)
{
    int b = 0;
    GRID_STRIDE(i, n) {
        float tau = hp_u2f(hp_k_ld32(taus + 4 * (i / B)));
        uint32_t c = (codes[i / 4] >> (2 * (i % 4))) & 3u;
        b |= hp_k_tbq_code_bad(c, tau);
        hp_k_store(dst, i, hp_k_tbq_dec(c, tau), accumulate);
    }
    if (b)
        atomicOr(bad, HP_K_F_BAD);
}

extern "C" int hp_kl_tbq_dec(void *stream, const uint8_t *taus, const uint8_t *codes, size_t n, uint32_t B,
                             float *dst, int accumulate, uint32_t *bad)
{
    if (n == 0)
        return 0;
    k_tbq_dec<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(taus, codes, n, B, dst, accumulate, bad);
    return launched();
}

/* ----------------------------------------------------------- terngrad */

#define TG_SPAN 4096   /* a CTA of the pairs kernel: the blocks of max(B, TG_SPAN) elements */

/* A CTA per span of whole blocks, each block reduced by all its threads:
 * min and max with their keys (so the tree gives the CPU's choice among
 * equal values), then the pair by one thread. */
__global__ static void k_tg_pairs(const float *x, size_t n, uint32_t B, uint32_t bits, uint8_t *pairs,
                                  uint32_t *flags)
{
    __shared__ hp_k_mm_t sm[TPB];
    const size_t span = B > TG_SPAN ? B : TG_SPAN, base = (size_t)blockIdx.x * span;
    uint32_t absmax = 0;
    for (size_t b0 = base; b0 < n && b0 < base + span; b0 += B) {
        const size_t end = n - b0 < B ? n : b0 + B;
        hp_k_mm_t a;
        hp_k_mm_init(&a);
        for (size_t i = b0 + threadIdx.x; i < end; i += TPB)
            hp_k_mm_add(&a, x[i], hp_k_mm_key(i));
        sm[threadIdx.x] = a;
        __syncthreads();
        for (unsigned s = TPB / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s)
                hp_k_mm_merge(&sm[threadIdx.x], &sm[threadIdx.x + s]);
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            float pr[2];
            hp_k_tg_pair(sm[0].mn, sm[0].mx, bits, pr);
            hp_k_st32(pairs + 8 * (b0 / B), hp_f2u(pr[0]));
            hp_k_st32(pairs + 8 * (b0 / B) + 4, hp_f2u(pr[1]));
            absmax = sm[0].absmax > absmax ? sm[0].absmax : absmax;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0 && absmax >= HP_K_TG_LIMIT_BITS)
        atomicOr(flags, HP_K_F_NONFINITE);
}

__global__ static void k_tg_codes(const float *x, size_t n, uint32_t B, uint32_t bits, uint64_t key, uint64_t ctr0,
                                  const uint8_t *pairs, uint8_t *codes, const uint32_t *flags)
{
    const size_t per = 8 / bits, nbytes = (n + per - 1) / per;
    if (flags[0] & HP_K_F_NONFINITE)
        return;
    GRID_STRIDE(o, nbytes) {
        const uint8_t *pp = pairs + 8 * (o * per / B);   /* a byte never straddles blocks */
        const float pr[2] = {hp_u2f(hp_k_ld32(pp)), hp_u2f(hp_k_ld32(pp + 4))};
        uint32_t byte = 0;
        for (size_t j = 0; j < per && o * per + j < n; j++) {
            size_t i = o * per + j;
            byte |= hp_k_tg_code(x[i], pr, bits, key, ctr0 + i) << (j * bits);
        }
        codes[o] = (uint8_t)byte;
    }
}

extern "C" int hp_kl_tg_enc(void *stream, const float *x, size_t n, uint32_t B, uint32_t bits, uint64_t key,
                            uint64_t ctr0, uint8_t *pairs, uint8_t *codes, uint32_t *flags)
{
    const size_t span = B > TG_SPAN ? B : TG_SPAN;
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
    k_tg_pairs<<<(unsigned)((n + span - 1) / span), TPB, 0, s>>>(x, n, B, bits, pairs, flags);
    k_tg_codes<<<grid_for((n * bits + 7) / 8, 1), TPB, 0, s>>>(x, n, B, bits, key, ctr0, pairs, codes, flags);
    return launched();
}

__global__ static void k_tg_dec(const uint8_t *pairs, const uint8_t *codes, size_t n, uint32_t B, uint32_t bits,
                                float *dst, int accumulate, uint32_t *bad)
{
    const uint32_t per = 8 / bits, mask = (1u << bits) - 1u;
    int b = 0;
    GRID_STRIDE(i, n) {
        const uint8_t *pp = pairs + 8 * (i / B);
        float mn = hp_u2f(hp_k_ld32(pp)), gap = hp_u2f(hp_k_ld32(pp + 4));
        uint32_t c = (codes[i / per] >> ((i % per) * bits)) & mask;
        b |= hp_f2u(gap) == 0 && c != 0;
        hp_k_store(dst, i, hp_dequant(c, mn, 0.0f, gap), accumulate);
    }
    if (b)
        atomicOr(bad, HP_K_F_BAD);
}

extern "C" int hp_kl_tg_dec(void *stream, const uint8_t *pairs, const uint8_t *codes, size_t n, uint32_t B,
                            uint32_t bits, float *dst, int accumulate, uint32_t *bad)
{
    if (n == 0)
        return 0;
    k_tg_dec<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(pairs, codes, n, B, bits, dst, accumulate, bad);
    return launched();
}

/* ------------------------------------------------------------- sparse */

#define SEL_TPB 1024   /* threads of a block's selection (fewer for small blocks) */

extern "C" size_t hp_kl_sparse_tmp_bytes(size_t n, uint32_t G, uint32_t k_full, uint32_t k_last)
{
    size_t nb = (n + G - 1) / G;
    (void)k_last;
    /* per block: its pairs (8 k_full bytes), its count, its offset */
    return 8 * nb * (size_t)k_full + 8 * nb + 64;
}

__global__ static void k_sparse_reset(float *r, float *u, size_t n, const uint32_t *flags)
{
    if (!(flags[0] & HP_K_F_OVERFLOW))
        return;
    GRID_STRIDE(i, n) {
        if (r != NULL)
            r[i] = 0.0f;
        if (u != NULL)
            u[i] = 0.0f;
    }
}

/* Block-wide exclusive scan of a 0/1 flag in thread order; *total gets
 * the sum.  wsum: shared, 32 words. */
__device__ static uint32_t scan01(int f, uint32_t *wsum, uint32_t *total)
{
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    uint32_t bal = __ballot_sync(FULL, f), before = __popc(bal & ((1u << lane) - 1u)), acc = 0;
    if (lane == 0)
        wsum[warp] = __popc(bal);
    __syncthreads();
    for (unsigned w = 0; w < nw; w++) {
        if (w == warp)
            before += acc;
        acc += wsum[w];
    }
    *total = acc;
    __syncthreads();
    return before;
}

/* Pick the digit of this pass from hist (thread 0), extending the prefix. */
__device__ static void pick(int pass, const uint32_t *hist, uint32_t *s_kk, uint32_t *s_prefix, uint32_t *s_above)
{
    if (threadIdx.x == 0) {
        uint32_t kk = *s_kk, above;
        uint32_t d = hp_k_radix_pick(hist, hp_k_radix_nbins(pass), &kk, &above);
        *s_kk = kk;
        *s_above = above;
        *s_prefix |= d << hp_k_radix_shift(pass);
    }
    __syncthreads();
}

#define CAND_CAP 4096   /* candidates kept in shared memory after the first digit */

/* One CTA per block.  Pass 0 forms v (storing u' and v when the encode
 * keeps state) and counts the first digit of the non-zero |v| bits; the
 * k-th largest |v| is then found by a radix select (three digits), over a
 * list of the candidates in shared memory when they fit (those whose first
 * digit is at least the chosen one: usually a few times k), else over the
 * block again; then the pairs in index order: everything above it, and the
 * first `quota` equal to it.  A v that overflows flags the message (its
 * pairs are then never used, and the state is reset after). */
__global__ static void __launch_bounds__(1024) k_sparse_select(const float *g, float *r, float *u, float m, size_t n,
                                                               uint32_t G, uint32_t k_full, uint32_t k_last,
                                                               uint8_t *slots, uint32_t *counts, uint32_t *flags)
{
    __shared__ uint32_t hist[HP_K_RADIX_BINS];
    __shared__ uint32_t cidx[CAND_CAP], cmag[CAND_CAP];
    __shared__ uint32_t wsum[32];
    __shared__ uint32_t s_prefix, s_kk, s_nnz, s_above, s_ncand;
    const size_t b = blockIdx.x, start = b * G, len = n - start < G ? n - start : G;
    const uint32_t k = len < G ? k_last : k_full;
    const int writes = r != NULL || u != NULL;
    const float *post = (r != NULL ? r : u != NULL ? u : g) + start;
    uint8_t *out = slots + 8 * b * (size_t)k_full;
    uint32_t t = 0, quota = 0, cnt = 0, ties = 0, nnz = 0, d0;
    int bad = 0, use_list;

    if (flags[0] & HP_K_F_NONFINITE)
        return;   /* NaN or Inf in g (hp_kl_finite ran first) */
    for (unsigned i = threadIdx.x; i < HP_K_RADIX_BINS; i += blockDim.x)
        hist[i] = 0;
    if (threadIdx.x == 0) {
        s_prefix = 0;
        s_kk = k;
        s_nnz = 0;
        s_ncand = 0;
    }
    __syncthreads();
    /* pass 0, with the commit of u' and v */
    for (size_t i = threadIdx.x; i < len; i += blockDim.x) {
        float up = hp_k_sparse_u(g + start, u != NULL ? u + start : NULL, m, i);
        float v = hp_k_sparse_v(r != NULL ? r + start : NULL, up, i);
        uint32_t mag = hp_k_absbits(v);
        if (u != NULL)
            u[start + i] = up;
        if (r != NULL)
            r[start + i] = v;
        bad |= hp_nonfinite(v);
        if (mag != 0) {
            atomicAdd(&hist[hp_k_radix_digit(mag, 0)], 1u);
            nnz++;
        }
    }
    nnz = warp_sum(nnz);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(&s_nnz, nnz);
    if (__any_sync(FULL, bad) && (threadIdx.x & 31) == 0 && writes)
        atomicOr(flags, HP_K_F_OVERFLOW | HP_K_F_NONFINITE);
    __syncthreads();
    if (s_nnz > k) {
        pick(0, hist, &s_kk, &s_prefix, &s_above);
        d0 = s_prefix >> hp_k_radix_shift(0);
        use_list = s_above + hist[d0] <= CAND_CAP;
        if (use_list) {
            /* the candidates: first digit at least d0 */
            for (size_t i = threadIdx.x; i < len; i += blockDim.x) {
                uint32_t mag = hp_k_absbits(post[i]);
                if (mag != 0 && hp_k_radix_digit(mag, 0) >= d0) {
                    uint32_t at = atomicAdd(&s_ncand, 1u);
                    cidx[at] = (uint32_t)i;
                    cmag[at] = mag;
                }
            }
            __syncthreads();
        }
        for (int pass = 1; pass < 3; pass++) {
            const uint32_t prefix = s_prefix;
            for (unsigned i = threadIdx.x; i < HP_K_RADIX_BINS; i += blockDim.x)
                hist[i] = 0;
            __syncthreads();
            if (use_list) {
                for (uint32_t j = threadIdx.x; j < s_ncand; j += blockDim.x)
                    if (hp_k_radix_match(cmag[j], prefix, pass))
                        atomicAdd(&hist[hp_k_radix_digit(cmag[j], pass)], 1u);
            } else {
                for (size_t i = threadIdx.x; i < len; i += blockDim.x) {
                    uint32_t mag = hp_k_absbits(post[i]);
                    if (mag != 0 && hp_k_radix_match(mag, prefix, pass))
                        atomicAdd(&hist[hp_k_radix_digit(mag, pass)], 1u);
                }
            }
            __syncthreads();
            pick(pass, hist, &s_kk, &s_prefix, &s_above);
        }
        t = s_prefix;
        quota = s_kk;
    } else {
        use_list = 0;   /* every non-zero element goes */
    }
    if (use_list) {
        /* the candidates in index order (bitonic sort; padding sorts last) */
        uint32_t nc = s_ncand, P = 1;
        while (P < nc)
            P <<= 1;
        for (uint32_t j = nc + threadIdx.x; j < P; j += blockDim.x) {
            cidx[j] = 0xffffffffu;
            cmag[j] = 0;
        }
        __syncthreads();
        for (uint32_t kk = 2; kk <= P; kk <<= 1)
            for (uint32_t jj = kk >> 1; jj > 0; jj >>= 1) {
                for (uint32_t i = threadIdx.x; i < P; i += blockDim.x) {
                    uint32_t ixj = i ^ jj;
                    if (ixj > i && ((cidx[i] > cidx[ixj]) == ((i & kk) == 0))) {
                        uint32_t a = cidx[i], bm = cmag[i];
                        cidx[i] = cidx[ixj];
                        cmag[i] = cmag[ixj];
                        cidx[ixj] = a;
                        cmag[ixj] = bm;
                    }
                }
                __syncthreads();
            }
        for (uint32_t j0 = 0; j0 < nc; j0 += blockDim.x) {
            uint32_t j = j0 + threadIdx.x, mag = j < nc ? cmag[j] : 0, tot, rank, pos;
            int sel;
            rank = ties + scan01(mag == t && t > 0, wsum, &tot);
            ties += tot;
            sel = mag != 0 && hp_k_sparse_sel(mag, t, rank, quota);
            pos = cnt + scan01(sel, wsum, &tot);
            cnt += tot;
            if (sel) {
                hp_k_st32(out + 8 * pos, cidx[j]);
                hp_k_st32(out + 8 * pos + 4, hp_f2u(post[cidx[j]]));
            }
        }
    } else {
        /* the whole block again, blockDim.x elements at a time */
        for (size_t i0 = 0; i0 < len; i0 += blockDim.x) {
            size_t i = i0 + threadIdx.x;
            uint32_t mag = i < len ? hp_k_absbits(post[i]) : 0, tot, rank, pos;
            int cand = mag != 0 && mag >= t, sel;
            if (!__syncthreads_or(cand))
                continue;
            rank = ties + scan01(mag == t && t > 0, wsum, &tot);
            ties += tot;
            sel = mag != 0 && hp_k_sparse_sel(mag, t, rank, quota);
            pos = cnt + scan01(sel, wsum, &tot);
            cnt += tot;
            if (sel) {
                hp_k_st32(out + 8 * pos, (uint32_t)i);
                hp_k_st32(out + 8 * pos + 4, hp_f2u(post[i]));
            }
        }
    }
    if (threadIdx.x == 0)
        counts[b] = cnt;
}

/* Offsets of the blocks' pairs in the payload (one CTA, a scan in rounds
 * of blockDim.x blocks) and the total in info[1]. */
__global__ static void k_sparse_offsets(const uint32_t *counts, size_t nb, uint32_t *offs, uint32_t *info)
{
    __shared__ uint32_t wsum[32];
    uint32_t acc = 0;
    if (info[0] & HP_K_F_NONFINITE)
        return;
    for (size_t b0 = 0; b0 < nb; b0 += blockDim.x) {
        size_t b = b0 + threadIdx.x;
        uint32_t c = b < nb ? counts[b] : 0, tot;
        /* counts can exceed 1: scan by warps of values */
        const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
        uint32_t x = c;
        for (int d = 1; d < 32; d <<= 1) {
            uint32_t y = __shfl_up_sync(FULL, x, d);
            if (lane >= (unsigned)d)
                x += y;
        }
        if (lane == 31)
            wsum[warp] = x;
        __syncthreads();
        uint32_t before = x - c;
        tot = 0;
        for (unsigned w = 0; w < nw; w++) {
            if (w < warp)
                before += wsum[w];
            tot += wsum[w];
        }
        if (b < nb)
            offs[b] = acc + before;
        acc += tot;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        info[1] = acc;
}

__global__ static void k_sparse_pack(const uint8_t *slots, const uint32_t *counts, const uint32_t *offs,
                                     uint32_t G, uint32_t k_full, uint8_t *payload, const uint32_t *flags)
{
    const size_t b = blockIdx.x;
    const uint8_t *in = slots + 8 * b * (size_t)k_full;
    if (flags[0] & HP_K_F_NONFINITE)
        return;
    for (uint32_t j = threadIdx.x; j < counts[b]; j += blockDim.x) {
        uint8_t *o = payload + 8 * ((size_t)offs[b] + j);
        hp_k_st32(o, hp_k_ld32(in + 8 * j) + (uint32_t)(b * G));
        hp_k_st32(o + 4, hp_k_ld32(in + 8 * j + 4));
    }
}

/* Zero r, u and mask at the sent indices. */
__global__ static void k_sparse_zero_sent(const uint8_t *payload, const uint32_t *info, float *r, float *u,
                                          float *mask)
{
    if (info[0] & HP_K_F_NONFINITE)
        return;
    GRID_STRIDE(j, (size_t)info[1]) {
        uint32_t i = hp_k_ld32(payload + 8 * j);
        if (r != NULL)
            r[i] = 0.0f;
        if (u != NULL)
            u[i] = 0.0f;
        if (mask != NULL)
            mask[i] = 0.0f;
    }
}

extern "C" int hp_kl_sparse_enc(void *stream, const hp_kl_sparse_t *a)
{
    cudaStream_t s = (cudaStream_t)stream;
    const size_t nb = (a->n + a->G - 1) / a->G;
    const int writes = a->r != NULL || a->u != NULL;
    uint8_t *slots = (uint8_t *)a->tmp;
    uint32_t *counts = (uint32_t *)(slots + 8 * nb * (size_t)a->k_full), *offs = counts + nb;
    unsigned sel_tpb = a->G < SEL_TPB ? a->G : SEL_TPB;

    if (a->n == 0)
        return 0;
    if (hp_kl_finite(stream, a->g, a->n, a->info) != 0)
        return -1;
    k_sparse_select<<<(unsigned)nb, sel_tpb, 0, s>>>(a->g, a->r, a->u, a->m, a->n, a->G, a->k_full, a->k_last, slots,
                                                     counts, a->info);
    k_sparse_offsets<<<1, 1024, 0, s>>>(counts, nb, offs, a->info);
    k_sparse_pack<<<(unsigned)nb, 128, 0, s>>>(slots, counts, offs, a->G, a->k_full, a->payload, a->info);
    if (writes || a->mask != NULL)
        k_sparse_zero_sent<<<grid_for(nb * (size_t)a->k_full, 1), TPB, 0, s>>>(a->payload, a->info, a->r, a->u,
                                                                                a->mask);
    if (writes)
        k_sparse_reset<<<grid_for(a->n, 4), TPB, 0, s>>>(a->r, a->u, a->n, a->info);
    return launched();
}

__global__ static void k_sparse_check(const uint8_t *pairs, size_t m, size_t n, uint32_t *bad)
{
    int b = 0;
    GRID_STRIDE(j, m) {
        uint32_t i = hp_k_ld32(pairs + 8 * j), vb = hp_k_ld32(pairs + 8 * j + 4);
        uint32_t prev = j ? hp_k_ld32(pairs + 8 * (j - 1)) : 0;
        b |= hp_k_sparse_pair_bad(i, vb, j == 0, prev, n);
    }
    if (b)
        atomicOr(bad, HP_K_F_BAD);
}

__global__ static void k_sparse_scatter(const uint8_t *pairs, size_t m, size_t n, float *dst, int accumulate)
{
    GRID_STRIDE(j, m) {
        uint32_t i = hp_k_ld32(pairs + 8 * j);
        if ((size_t)i < n)
            hp_k_store(dst, i, hp_u2f(hp_k_ld32(pairs + 8 * j + 4)), accumulate);
    }
}

extern "C" int hp_kl_sparse_dec(void *stream, const uint8_t *pairs, size_t m, size_t n, float *dst, int accumulate,
                                uint32_t *bad)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (m > 0)
        k_sparse_check<<<grid_for(m, 1), TPB, 0, s>>>(pairs, m, n, bad);
    if (!accumulate && n > 0)
        k_fill<<<grid_for(n, 4), TPB, 0, s>>>(dst, 0.0f, n);
    if (m > 0)
        k_sparse_scatter<<<grid_for(m, 1), TPB, 0, s>>>(pairs, m, n, dst, accumulate);
    return launched();
}

__global__ static void k_sparse_mask(const uint8_t *pairs, const uint32_t *count, float *v, size_t n,
                                     const uint32_t *flags)
{
    if (flags[0] & HP_K_F_NONFINITE)
        return;
    GRID_STRIDE(j, (size_t)count[0]) {
        uint32_t i = hp_k_ld32(pairs + 8 * j);
        if ((size_t)i < n)
            v[i] = 0.0f;
    }
}

extern "C" int hp_kl_sparse_mask(void *stream, const uint8_t *pairs, const uint32_t *count, float *v, size_t n,
                                 const uint32_t *flags)
{
    k_sparse_mask<<<grid_for(n, 8), TPB, 0, (cudaStream_t)stream>>>(pairs, count, v, n, flags);
    return launched();
}

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
    __shared__ uint32_t sm[TPB / 32];
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
    k_f16_enc<<<(unsigned)((n + span - 1) / span), f16_threads(B), 0, (cudaStream_t)stream>>>(x, n, B, halves,
                                                                                             exps, flags);
    return launched();
}

/* The same grid: each thread decodes its halves as it reads them, the
 * block's largest |h| checked against its exponent by one thread. */
__global__ static void __launch_bounds__(TPB) k_f16_dec(const uint8_t *halves, const uint8_t *exps, size_t n,
                                                        uint32_t B, float *dst, int accumulate, uint32_t *bad)
{
    __shared__ uint32_t sm[TPB / 32];
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
    k_f16_dec<<<(unsigned)((n + span - 1) / span), f16_threads(B), 0, (cudaStream_t)stream>>>(halves, exps, n, B,
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
    k_bf16_enc<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(x, n, out, flags);
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
    k_bf16_dec<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(in, n, dst, accumulate, bad);
    return launched();
}

/* ----------------------------------------------------------- powersgd */

/* One thread per (row, k), the CPU's order along the row (the row and a
 * row of Q^T come from the caches: r threads read the same row). */
__global__ static void k_psgd_mq(const float *M, size_t n, size_t m, size_t c, size_t r, size_t T, const float *qt,
                                 float *p)
{
    GRID_STRIDE(t, m * r) {
        size_t i = t / r, k = t % r;
        p[t] = hp_k_psgd_dot(M + i * c, hp_k_psgd_row_len(n, c, i), qt + k * c, T);
    }
}

extern "C" int hp_kl_psgd_mq(void *stream, const float *M, size_t n, size_t m, size_t c, size_t r, size_t T,
                             const float *qt, float *p)
{
    if (m * r == 0)
        return 0;
    k_psgd_mq<<<grid_for(m * r, 1), TPB, 0, (cudaStream_t)stream>>>(M, n, m, c, r, T, qt, p);
    return launched();
}

/* One thread per (k, column): down the rows in order (coalesced across
 * the columns of a warp). */
__global__ static void k_psgd_mtp(const float *M, size_t n, size_t m, size_t c, size_t r, const float *p, float *qt)
{
    GRID_STRIDE(t, r * c) {
        size_t k = t / c, j = t % c;
        qt[t] = hp_k_psgd_col(M, n, m, c, p, r, k, j);
    }
}

extern "C" int hp_kl_psgd_mtp(void *stream, const float *M, size_t n, size_t m, size_t c, size_t r, const float *p,
                              float *qt)
{
    if (r * c == 0)
        return 0;
    k_psgd_mtp<<<grid_for(r * c, 1), TPB, 0, (cudaStream_t)stream>>>(M, n, m, c, r, p, qt);
    return launched();
}

__global__ static void k_psgd_recon(float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                                    const float *qs, const float *ql)
{
    GRID_STRIDE(e, n) {
        const float *prow = p + (e / c) * r;
        if (res != NULL)
            res[e] = buf[e] - hp_k_psgd_recon(prow, r, ql, c, e % c);
        buf[e] = hp_k_psgd_recon(prow, r, qs, c, e % c);
    }
}

extern "C" int hp_kl_psgd_recon(void *stream, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                                const float *qs, const float *ql)
{
    if (n == 0)
        return 0;
    k_psgd_recon<<<grid_for(n, 4), TPB, 0, (cudaStream_t)stream>>>(buf, res, n, c, r, p, qs, ql);
    return launched();
}
