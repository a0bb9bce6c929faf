/*
 * The CUDA kernels of the block quantisers and their launchers
 * (hp_klaunch.h): onebit, tbq, terngrad, q2/q4/q8.  Shells around
 * hp_kern.h's per-thread functions, as in cuda/kern/hp_kern.cu;
 * tests/gpu/emu/hp_kern_emu_quant.c runs the same grid on the host.  Built with
 * --fmad=false.
 */
#include "hp_kern_cu.cuh"

/* ------------------------------------------------------------- onebit */

/* One CTA per span of whole blocks: its 8 warps reduce its chunks (and
 * write the bit words), one thread per block adds the chunk results in
 * order and writes the scales, then every thread writes residuals. */
__global__ static void __launch_bounds__(TPB) k_onebit_enc(const float *x, float *r, size_t n, uint32_t B,
                                                          uint8_t *scales, uint8_t *words, uint32_t *flags)
{
    HP_SHARED(double, cpos, HP_K_MAXCH);
    HP_SHARED(double, cneg, HP_K_MAXCH);
    HP_SHARED(uint32_t, cnp, HP_K_MAXCH);
    HP_SHARED(float[2], sc, HP_K_MAXCH);
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
    HP_SHARED(double, cpos, HP_K_WARPS);
    HP_SHARED(double, cneg, HP_K_WARPS);
    HP_SHARED(uint32_t, cnp, HP_K_WARPS);
    HP_SHARED(float[2], sc, HP_K_WARPS);
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
        HP_LAUNCH(k_onebit_enc_reg<true>, (unsigned)g.ncta, TPB, s)(x, r, n, B, scales, words, flags);
    else if (reg_path(B))
        HP_LAUNCH(k_onebit_enc_reg<false>, (unsigned)g.ncta, TPB, s)(x, r, n, B, scales, words, flags);
    else
        HP_LAUNCH(k_onebit_enc, (unsigned)g.ncta, TPB, s)(x, r, n, B, scales, words, flags);
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
    HP_LAUNCH(k_onebit_check, grid_for(nb, 1), TPB, (cudaStream_t)stream)(scales, words, n, B, bad);
    HP_LAUNCH(k_onebit_dec, grid_for(n, 4), TPB, (cudaStream_t)stream)(scales, words, n, B, dst, accumulate);
    return launched();
}

/* ---------------------------------------------------------------- tbq */

__global__ static void __launch_bounds__(TPB) k_tbq_enc(const float *x, float *r, size_t n, uint32_t B, float thr,
                                                       float scale, uint8_t *taus, uint8_t *codes, uint32_t *flags)
{
    HP_SHARED(double, cs, HP_K_MAXCH);
    HP_SHARED(float, tau, HP_K_MAXCH);
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
    HP_SHARED(double, cs, HP_K_WARPS);
    HP_SHARED(float, tau, HP_K_WARPS);
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
        HP_LAUNCH(k_tbq_enc_reg<true>, (unsigned)g.ncta, TPB, s)(x, r, n, B, thr, scale, taus, codes, flags);
    else if (reg_path(B))
        HP_LAUNCH(k_tbq_enc_reg<false>, (unsigned)g.ncta, TPB, s)(x, r, n, B, thr, scale, taus, codes, flags);
    else
        HP_LAUNCH(k_tbq_enc, (unsigned)g.ncta, TPB, s)(x, r, n, B, thr, scale, taus, codes, flags);
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
    HP_LAUNCH(k_tbq_dec, grid_for(n, 4), TPB, (cudaStream_t)stream)(taus, codes, n, B, dst, accumulate, bad);
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
    HP_SHARED(hp_k_mm_t, sm, TPB);
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
    HP_LAUNCH(k_tg_pairs, (unsigned)((n + span - 1) / span), TPB, s)(x, n, B, bits, pairs, flags);
    HP_LAUNCH(k_tg_codes, grid_for((n * bits + 7) / 8, 1), TPB, s)(x, n, B, bits, key, ctr0, pairs, codes, flags);
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
    HP_LAUNCH(k_tg_dec, grid_for(n, 4), TPB, (cudaStream_t)stream)(pairs, codes, n, B, bits, dst, accumulate, bad);
    return launched();
}

/* --------------------------------------------------------- q2, q4, q8 */

/* terngrad's pairs kernel on v = x + r (hp_k_q_v, read only: the residual
 * is written by k_q_codes once the whole input is known to be in range),
 * and the largest |x| of the message. */
__global__ static void k_q_pairs(const float *x, const float *r, size_t n, uint32_t B, uint32_t bits, uint8_t *pairs,
                                 uint32_t *flags)
{
    HP_SHARED(hp_k_mm_t, sm, TPB);
    const size_t span = B > TG_SPAN ? B : TG_SPAN, base = (size_t)blockIdx.x * span;
    uint32_t absmax = 0;
    for (size_t b0 = base; b0 < n && b0 < base + span; b0 += B) {
        const size_t end = n - b0 < B ? n : b0 + B;
        hp_k_mm_t a;
        hp_k_mm_init(&a);
        for (size_t i = b0 + threadIdx.x; i < end; i += TPB) {
            hp_k_mm_add(&a, hp_k_q_v(x, r, i), hp_k_mm_key(i));
            absmax = hp_k_absmax_step(absmax, x[i]);
        }
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
        }
        __syncthreads();
    }
    if (__any_sync(FULL, absmax >= HP_K_TG_LIMIT_BITS) && (threadIdx.x & 31) == 0)
        atomicOr(flags, HP_K_F_NONFINITE);
}

/* One byte of codes per thread, and the residuals (and mask) of its
 * elements. */
__global__ static void k_q_codes(const float *x, float *r, float *mask, size_t n, uint32_t B, uint32_t bits,
                                 uint32_t stoch, uint64_t key, uint64_t ctr0, const uint8_t *pairs, uint8_t *codes,
                                 const uint32_t *flags)
{
    const size_t per = 8 / bits, nbytes = (n + per - 1) / per;
    if (flags[0] & HP_K_F_NONFINITE)
        return;
    GRID_STRIDE(o, nbytes) {
        const uint8_t *pp = pairs + 8 * (o * per / B);   /* a byte never straddles blocks */
        const float pr[2] = {hp_u2f(hp_k_ld32(pp)), hp_u2f(hp_k_ld32(pp + 4))};
        uint32_t byte = 0;
        for (size_t j = 0; j < per && o * per + j < n; j++) {
            const size_t i = o * per + j;
            const float v = hp_k_q_v(x, r, i);
            const uint32_t c = hp_k_q_code(v, pr, bits, stoch, key, ctr0 + i);
            byte |= c << (j * bits);
            if (r != NULL)
                r[i] = hp_k_q_resid(v, c, pr);
            if (mask != NULL)
                mask[i] = 0.0f;
        }
        codes[o] = (uint8_t)byte;
    }
}

extern "C" int hp_kl_q_enc(void *stream, const float *x, float *r, float *mask, size_t n, uint32_t B,
                           uint32_t bits, uint32_t stoch, uint64_t key, uint64_t ctr0, uint8_t *pairs,
                           uint8_t *codes, uint32_t *flags)
{
    const size_t span = B > TG_SPAN ? B : TG_SPAN;
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return 0;
    HP_LAUNCH(k_q_pairs, (unsigned)((n + span - 1) / span), TPB, s)(x, r, n, B, bits, pairs, flags);
    HP_LAUNCH(k_q_codes, grid_for((n * bits + 7) / 8, 1), TPB, s)(x, r, mask, n, B, bits, stoch, key, ctr0, pairs,
                                                                  codes, flags);
    return launched();
}

/* the kernels of this file (hp_kl_preload) */
extern "C" int hp_kl_preload_quant(void)
{
    int n = 0;
    HP_PRELOAD(n, k_onebit_enc);
    HP_PRELOAD(n, k_onebit_enc_reg<true>);
    HP_PRELOAD(n, k_onebit_enc_reg<false>);
    HP_PRELOAD(n, k_onebit_check);
    HP_PRELOAD(n, k_onebit_dec);
    HP_PRELOAD(n, k_tbq_enc);
    HP_PRELOAD(n, k_tbq_enc_reg<true>);
    HP_PRELOAD(n, k_tbq_enc_reg<false>);
    HP_PRELOAD(n, k_tbq_dec);
    HP_PRELOAD(n, k_tg_pairs);
    HP_PRELOAD(n, k_tg_codes);
    HP_PRELOAD(n, k_tg_dec);
    HP_PRELOAD(n, k_q_pairs);
    HP_PRELOAD(n, k_q_codes);
    return n;
}
