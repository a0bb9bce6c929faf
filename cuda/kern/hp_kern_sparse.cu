/*
 * The CUDA kernels of the sparse format and their launchers (hp_klaunch.h):
 * graddrop and dgc's exact top-k per block (a radix select), the pairs
 * placed in index order by scans, the residual and momentum updates, and
 * the decoder with its index checks.  Shells around hp_kern.h's per-thread
 * functions, as in cuda/kern/hp_kern.cu; tests/gpu/emu/hp_kern_emu_sparse.c runs the same
 * grid on the host.  Built with --fmad=false.
 */
#include "hp_kern_cu.cuh"

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
    HP_SHARED(uint32_t, hist, HP_K_RADIX_BINS);
    HP_SHARED(uint32_t, cidx, CAND_CAP);
    HP_SHARED(uint32_t, cmag, CAND_CAP);
    HP_SHARED(uint32_t, wsum, 32);
    HP_SHARED_VAR(uint32_t, s_prefix);
    HP_SHARED_VAR(uint32_t, s_kk);
    HP_SHARED_VAR(uint32_t, s_nnz);
    HP_SHARED_VAR(uint32_t, s_above);
    HP_SHARED_VAR(uint32_t, s_ncand);
    HP_SHARED_VAR(uint32_t, s_skip);
    const size_t b = blockIdx.x, start = b * G, len = n - start < G ? n - start : G;
    const uint32_t k = len < G ? k_last : k_full;
    const int writes = r != NULL || u != NULL;
    const float *post = (r != NULL ? r : u != NULL ? u : g) + start;
    uint8_t *out = slots + 8 * b * (size_t)k_full;
    uint32_t t = 0, quota = 0, cnt = 0, ties = 0, nnz = 0, d0;
    int bad = 0, use_list;

    for (unsigned i = threadIdx.x; i < HP_K_RADIX_BINS; i += blockDim.x)
        hist[i] = 0;
    if (threadIdx.x == 0) {
        /* NaN or Inf in g (hp_kl_finite ran first), or an overflow another
         * CTA found: read by one thread, as other CTAs may set it while
         * this one starts, and the CTA's threads must agree */
        s_skip = hp_k_ld_relaxed(flags) & HP_K_F_NONFINITE;
        s_prefix = 0;
        s_kk = k;
        s_nnz = 0;
        s_ncand = 0;
    }
    __syncthreads();
    if (s_skip)
        return;
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
        /* every thread reads hist[d0] here, and pass 1 zeroes hist: the
         * barrier after the list (taken by every thread, whichever branch)
         * keeps a late warp from reading a zeroed bin and taking the other
         * branch, with other barrier counts and a list written past
         * CAND_CAP */
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
        }
        __syncthreads();
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
    HP_SHARED(uint32_t, wsum, 32);
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
                                          float *mask, const uint32_t *gate)
{
    if (info[0] & HP_K_F_NONFINITE)
        return;
    if (mask != NULL && (gate[0] & HP_K_F_NONFINITE))
        mask = NULL;   /* the call's momentum was not applied: no masking */
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
    HP_LAUNCH(k_sparse_select, (unsigned)nb, sel_tpb, s)(a->g, a->r, a->u, a->m, a->n, a->G, a->k_full, a->k_last,
                                                         slots, counts, a->info);
    HP_LAUNCH(k_sparse_offsets, 1, 1024, s)(counts, nb, offs, a->info);
    HP_LAUNCH(k_sparse_pack, (unsigned)nb, 128, s)(slots, counts, offs, a->G, a->k_full, a->payload, a->info);
    if (writes || a->mask != NULL)
        HP_LAUNCH(k_sparse_zero_sent, grid_for(nb * (size_t)a->k_full, 1), TPB, s)(a->payload, a->info, a->r, a->u,
                                                                                   a->mask, a->gate);
    if (writes)
        HP_LAUNCH(k_sparse_reset, grid_for(a->n, 4), TPB, s)(a->r, a->u, a->n, a->info);
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

/* Nothing when the check failed: pairs out of order can name an element
 * twice, and two threads would write it at once. */
__global__ static void k_sparse_scatter(const uint8_t *pairs, size_t m, size_t n, float *dst, int accumulate,
                                        const uint32_t *bad)
{
    if (bad[0] & HP_K_F_BAD)
        return;
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
    int rc = 0;
    if (m > 0)
        HP_LAUNCH(k_sparse_check, grid_for(m, 1), TPB, s)(pairs, m, n, bad);
    if (!accumulate && n > 0)
        rc = hp_kl_fill(stream, dst, 0.0f, n);   /* its launch check covers the check's launch too */
    if (m > 0)
        HP_LAUNCH(k_sparse_scatter, grid_for(m, 1), TPB, s)(pairs, m, n, dst, accumulate, bad);
    return launched() == 0 && rc == 0 ? 0 : -1;
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
    HP_LAUNCH(k_sparse_mask, grid_for(n, 8), TPB, (cudaStream_t)stream)(pairs, count, v, n, flags);
    return launched();
}

/* ------------------------------------------ messages in device memory */

/* One thread: the header (status[0]; the dense fallback in status[3]). */
__global__ static void k_sparse_msg_head(const uint8_t *m, size_t cap, uint32_t kind, uint32_t dense, uint32_t n,
                                         uint32_t *status)
{
    uint32_t d = 0;
    status[0] = hp_k_msg_head_sparse(m, cap, kind, dense, n, &d);
    status[3] = d;
}

/* A thread per pair of an accepted sparse header: its checks. */
__global__ static void k_sparse_msg_pairs(const uint8_t *m, size_t n, uint32_t *status)
{
    int b = 0;
    if (status[0] != HP_K_MSG_OK || status[3] != 0)
        return;
    GRID_STRIDE(j, (size_t)(hp_k_ld32(m + 8) / 8)) {
        const uint8_t *pr = m + HP_K_MSG_HEADER + 8 * j;
        uint32_t prev = j ? hp_k_ld32(pr - 8) : 0;
        b |= hp_k_sparse_pair_bad(hp_k_ld32(pr), hp_k_ld32(pr + 4), j == 0, prev, n);
    }
    if (b)
        atomicOr(status + 2, HP_K_F_BAD);
}

/* A thread per element: the zero fill of overwrite mode, or the dense
 * fallback's values. */
__global__ static void k_sparse_msg_dense(const uint8_t *m, size_t n, float *dst, int accumulate,
                                          const uint32_t *status)
{
    const int dense = status[3] != 0;
    if (status[0] != HP_K_MSG_OK || (!dense && accumulate))
        return;
    GRID_STRIDE(i, n) {
        if (dense)
            hp_k_store(dst, i, hp_u2f(hp_k_ld32(m + HP_K_MSG_HEADER + 4 * i)), accumulate);
        else
            dst[i] = 0.0f;
    }
}

/* A thread per pair: the scatter (after the zero fill), of pairs that
 * passed their checks (out of order, two could name one element). */
__global__ static void k_sparse_msg_scatter(const uint8_t *m, size_t n, float *dst, int accumulate,
                                            const uint32_t *status)
{
    if (status[0] != HP_K_MSG_OK || status[3] != 0 || status[2] != 0)
        return;
    GRID_STRIDE(j, (size_t)(hp_k_ld32(m + 8) / 8)) {
        const uint8_t *pr = m + HP_K_MSG_HEADER + 8 * j;
        uint32_t i = hp_k_ld32(pr);
        if ((size_t)i < n)
            hp_k_store(dst, i, hp_u2f(hp_k_ld32(pr + 4)), accumulate);
    }
}

extern "C" int hp_kl_sparse_dec_msg(void *stream, const uint8_t *m, size_t cap, uint32_t kind, uint32_t dense,
                                    size_t n, float *dst, int accumulate, uint32_t *status)
{
    cudaStream_t s = (cudaStream_t)stream;
    /* the grids from what the host knows: at most n pairs in cap bytes */
    size_t pmax = cap >= HP_K_MSG_HEADER ? (cap - HP_K_MSG_HEADER) / 8 : 0;
    if (pmax > n)
        pmax = n;
    HP_LAUNCH(k_sparse_msg_head, 1, 1, s)(m, cap, kind, dense, (uint32_t)n, status);
    HP_LAUNCH(k_sparse_msg_pairs, grid_for(pmax, 1), TPB, s)(m, n, status);
    HP_LAUNCH(k_sparse_msg_dense, grid_for(n, 4), TPB, s)(m, n, dst, accumulate, status);
    HP_LAUNCH(k_sparse_msg_scatter, grid_for(pmax, 1), TPB, s)(m, n, dst, accumulate, status);
    return launched();
}

__global__ static void k_msg_header_count(uint8_t *m, uint32_t kind, uint32_t n, uint32_t unit,
                                          const uint32_t *count, const uint32_t *flags)
{
    hp_k_msg_put_header(m, kind, (flags[0] & HP_K_F_NONFINITE) != 0, n, unit * count[0]);
}

extern "C" int hp_kl_msg_header_count(void *stream, uint8_t *m, uint32_t kind, uint32_t n, uint32_t unit,
                                      const uint32_t *count, const uint32_t *flags)
{
    HP_LAUNCH(k_msg_header_count, 1, 1, (cudaStream_t)stream)(m, kind, n, unit, count, flags);
    return launched();
}

/* the kernels of this file (hp_kl_preload) */
extern "C" int hp_kl_preload_sparse(void)
{
    int n = 0;
    HP_PRELOAD(n, k_sparse_reset);
    HP_PRELOAD(n, k_sparse_select);
    HP_PRELOAD(n, k_sparse_offsets);
    HP_PRELOAD(n, k_sparse_pack);
    HP_PRELOAD(n, k_sparse_zero_sent);
    HP_PRELOAD(n, k_sparse_check);
    HP_PRELOAD(n, k_sparse_scatter);
    HP_PRELOAD(n, k_sparse_mask);
    HP_PRELOAD(n, k_sparse_msg_head);
    HP_PRELOAD(n, k_sparse_msg_pairs);
    HP_PRELOAD(n, k_sparse_msg_dense);
    HP_PRELOAD(n, k_sparse_msg_scatter);
    HP_PRELOAD(n, k_msg_header_count);
    return n;
}
