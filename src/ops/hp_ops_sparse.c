/*
 * CompLL sparse operators (see hp_ops_sparse.h).
 *
 * Encoding streams over the data twice, plus work proportional to k: a
 * check that the gradient is finite (reads g only), a random sample that
 * gives a threshold a little below the k-th largest |v|, one fused pass that
 * stores the new state and residual in place and collects the indices at or
 * above the threshold, and an exact top-k on those few candidates.  The
 * streaming passes have an AVX2 path; every path computes each v with the
 * same float operations (no FMA), so all select the same indices and store
 * the same bits.
 */
#include "hp_ops_sparse.h"
#include "hp_ops.h"
#include "hp_elem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the AVX2 paths where hp_isa_detect can choose them */
#if defined(__x86_64__)
#include <immintrin.h>
#define HP_SPARSE_HAVE_AVX2 1
#else
#define HP_SPARSE_HAVE_AVX2 0
#endif



/* ------------------------------------------------------------ selection */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Branch-free partition of a[lo..hi) around p: values < p (or <= p when
 * le) first; returns where the rest starts.  Each element is written back
 * whatever the comparison says, so there is no mispredicted branch. */
static size_t partition_bf(uint32_t *a, size_t lo, size_t hi, uint32_t p, int le)
{
    size_t lt = lo;
    if (le) {
        for (size_t i = lo; i < hi; i++) {
            uint32_t x = a[i];
            a[i] = a[lt];
            a[lt] = x;
            lt += x <= p;
        }
    } else {
        for (size_t i = lo; i < hi; i++) {
            uint32_t x = a[i];
            a[i] = a[lt];
            a[lt] = x;
            lt += x < p;
        }
    }
    return lt;
}

/*
 * The j-th smallest (0-based) of a[0..m), reordering a.  Quickselect with a
 * median-of-three pivot and branch-free partitions; when the pivot is the
 * smallest value left, a second partition splits off its copies, so long
 * runs of equal values finish at once.  After too many rounds the rest is
 * sorted, so the worst case stays O(m log m).  Deterministic: it depends on
 * the data only.
 */
static uint32_t select_nth(uint32_t *a, size_t m, size_t j)
{
    size_t lo = 0, hi = m; /* j in [lo, hi) */
    int rounds = 0;

    while (hi - lo > 16) {
        size_t mid = lo + (hi - lo) / 2, lt;
        uint32_t x = a[lo], y = a[mid], z = a[hi - 1], piv;

        if (++rounds > 64) {
            qsort(a + lo, hi - lo, sizeof(uint32_t), cmp_u32);
            return a[j];
        }
        piv = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        lt = partition_bf(a, lo, hi, piv, 0);
        if (j < lt) {
            hi = lt;
        } else if (lt > lo) {
            lo = lt;
        } else {
            /* nothing below the pivot: [lo, le) holds its copies */
            size_t le = partition_bf(a, lo, hi, piv, 1);
            if (j < le)
                return piv;
            lo = le;
        }
    }
    /* insertion sort of the small rest */
    for (size_t i = lo + 1; i < hi; i++) {
        uint32_t v = a[i];
        size_t p = i;
        while (p > lo && a[p - 1] > v) {
            a[p] = a[p - 1];
            p--;
        }
        a[p] = v;
    }
    return a[j];
}

size_t hp_sparse_k(size_t n, size_t args_k, const hipress_comp_params_t *params)
{
    double ratio = params != NULL ? params->sparse_ratio : HP_SPARSE_DEFAULT_RATIO;
    double kk;

    if (n == 0)
        return 0;
    if (args_k != 0)
        return args_k < n ? args_k : n;
    kk = ceil((double)n * ratio);
    if (!(kk >= 1.0)) /* also NaN */
        return 1;
    return kk >= (double)n ? n : (size_t)kk;
}

size_t hp_sparse_sample_size(size_t n, double sample_ratio)
{
    double s = ceil((double)n * sample_ratio);
    size_t ss = s >= (double)n ? n : (s >= 1.0 ? (size_t)s : 0);
    ss = ss < HP_SPARSE_MIN_SAMPLE ? HP_SPARSE_MIN_SAMPLE : ss;
    return ss < n ? ss : n;
}

/* Sift x down from the root of a min-heap h[0..m). */
static void heap_replace_root(uint32_t *h, size_t m, uint32_t x)
{
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && h[c + 1] < h[c])
            c++;
        if (h[c] >= x)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static void heap_push(uint32_t *h, size_t m, uint32_t x)
{
    size_t i = m;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

uint32_t hp_sparse_threshold(const hp_sparse_src_t *src, size_t n, size_t k, double sample_ratio,
                             uint64_t key, uint64_t offset, int level, uint32_t *scratch,
                             size_t *sample_p)
{
    size_t s = hp_sparse_sample_size(n, sample_ratio), rank, q, rem, lo = 0, acc = 0;
    uint32_t *mag = scratch, *heap = scratch + s;
    double e, r;

    *sample_p = s;
    if (s == 0 || k == 0)
        return 1;
    /* The number of sampled elements at or above the k-th largest |v| has
     * mean e = s k / n and at most the variance of Binomial(s, k/n); aiming
     * two standard deviations (plus one) above the mean makes at least k
     * elements pass in about 98% of calls (a miss costs one more read-only
     * pass), and each level goes four times deeper into the sample. */
    e = (double)s * (double)k / (double)n;
    r = ceil(e + 2.0 * sqrt(e) + 1.0);
    for (int l = 0; l < level && r <= (double)s; l++)
        r *= 4.0;
    if (r > (double)s)
        return 1;
    rank = (size_t)r;
    /* Stratified: one element drawn from each of s equal strata
     * [j n / s, (j + 1) n / s), so reads go forward through memory; the
     * gather has no data-dependent branch, so its loads overlap. */
    q = n / s;
    rem = n % s;
    for (size_t j = 0; j < s; j++) {
        size_t width = q + (acc + rem >= s);
        size_t i = lo + (size_t)(((uint64_t)hp_rng_u32(key, offset + j) * (uint64_t)width) >> 32);
        mag[j] = hp_sparse_absbits(hp_sparse_v_at(src, i));
        lo += width;
        acc = acc + rem >= s ? acc + rem - s : acc + rem;
    }
    /* the rank largest in a min-heap: its root ends as the rank-th largest */
    for (size_t j = 0; j < rank; j++)
        heap_push(heap, j, mag[j]);
    for (size_t j = rank; j < s; j++)
        if (mag[j] > heap[0])
            heap_replace_root(heap, rank, mag[j]);
    return heap[0] > 1 ? heap[0] : 1;
}

/* Generic filter over one source mode; U, R are compile-time 0/1 so the
 * compiler emits one loop per mode.  Blocks of FB elements: the magnitudes
 * of a block and its hit / non-finite flags come from a loop the compiler
 * vectorises (|v| bits and thr are below 2^31, so signed compares are
 * exact), and only the rare block holding a candidate is scanned again. */
#define FB 64
#define FILTER_GENERIC(U, R)                                                        \
    do {                                                                            \
        for (; i + FB <= n && cap - cnt >= FB; i += FB) {                           \
            int32_t a[FB], hit = 0;                                                 \
            for (size_t j = 0; j < FB; j++) {                                       \
                float x = (U) ? m * u[i + j] + g[i + j] : g[i + j];                 \
                float v = (R) ? r[i + j] + x : x;                                   \
                a[j] = (int32_t)hp_sparse_absbits(v);                               \
                hit |= a[j] >= t;                                                   \
                bad |= a[j] >= (int32_t)HP_SPARSE_NONFINITE_BITS;                             \
            }                                                                       \
            if (hit == 0)                                                           \
                continue;                                                           \
            for (size_t j = 0; j < FB; j++) {                                       \
                idx[cnt] = (uint32_t)(i + j); /* kept only when counted */          \
                cnt += a[j] >= t;                                                   \
            }                                                                       \
        }                                                                           \
        for (; i < n && cnt < cap; i++) {                                           \
            float x = (U) ? m * u[i] + g[i] : g[i];                                 \
            float v = (R) ? r[i] + x : x;                                           \
            int32_t a = (int32_t)hp_sparse_absbits(v);                              \
            bad |= a >= (int32_t)HP_SPARSE_NONFINITE_BITS;                                    \
            idx[cnt] = (uint32_t)i;                                                 \
            cnt += a >= t;                                                          \
        }                                                                           \
    } while (0)

static size_t filter_generic(const hp_sparse_src_t *src, size_t n, uint32_t thr, size_t *pos_p,
                             uint32_t *idx, size_t cap, int *bad_p)
{
    const float *g = src->g, *r = src->r, *u = src->u;
    const float m = src->m;
    const int32_t t = (int32_t)thr;
    size_t i = *pos_p, cnt = 0;
    int bad = 0;

    if (u != NULL && r != NULL)
        FILTER_GENERIC(1, 1);
    else if (u != NULL)
        FILTER_GENERIC(1, 0);
    else if (r != NULL)
        FILTER_GENERIC(0, 1);
    else
        FILTER_GENERIC(0, 0);
    *pos_p = i;
    *bad_p |= bad;
    return cnt;
}

#if HP_SPARSE_HAVE_AVX2
/* v for 8 elements from i, with the same operations as hp_sparse_v_at. */
#define AVX2_V8(U, R, i)                                                            \
    __extension__({                                                                 \
        __m256 x_ = _mm256_loadu_ps(g + (i));                                       \
        if (U)                                                                      \
            x_ = _mm256_add_ps(_mm256_mul_ps(mv, _mm256_loadu_ps(u + (i))), x_);    \
        if (R)                                                                      \
            x_ = _mm256_add_ps(_mm256_loadu_ps(r + (i)), x_);                       \
        _mm256_and_si256(_mm256_castps_si256(x_), absmask);                         \
    })

/* The candidates and the non-finite flag of 32 |v| bits in a0..a3 (the
 * block starting at i). */
#define AVX2_SCAN4(a0, a1, a2, a3)                                                  \
    do {                                                                            \
        __m256i c0 = _mm256_cmpgt_epi32(a0, thr1), c1 = _mm256_cmpgt_epi32(a1, thr1); \
        __m256i c2 = _mm256_cmpgt_epi32(a2, thr1), c3 = _mm256_cmpgt_epi32(a3, thr1); \
        __m256i any = _mm256_or_si256(_mm256_or_si256(c0, c1), _mm256_or_si256(c2, c3)); \
        __m256i mx = _mm256_max_epi32(_mm256_max_epi32(a0, a1), _mm256_max_epi32(a2, a3)); \
        badv = _mm256_or_si256(badv, _mm256_cmpgt_epi32(mx, fmax));                 \
        if (__builtin_expect(!_mm256_testz_si256(any, any), 0)) {                   \
            uint64_t bits = (uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(c0)) | \
                ((uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(c1)) << 8) |    \
                ((uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(c2)) << 16) |   \
                ((uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(c3)) << 24);    \
            while (bits != 0) {                                                     \
                idx[cnt++] = (uint32_t)(i + (size_t)__builtin_ctzll(bits));         \
                bits &= bits - 1;                                                   \
            }                                                                       \
        }                                                                           \
    } while (0)

#define FILTER_AVX2(U, R)                                                           \
    do {                                                                            \
        for (; i + 32 <= n && cap - cnt >= 32; i += 32) {                           \
            __m256i a0 = AVX2_V8(U, R, i), a1 = AVX2_V8(U, R, i + 8);               \
            __m256i a2 = AVX2_V8(U, R, i + 16), a3 = AVX2_V8(U, R, i + 24);         \
            AVX2_SCAN4(a0, a1, a2, a3);                                             \
        }                                                                           \
    } while (0)

__attribute__((target("avx2")))
static size_t filter_avx2(const hp_sparse_src_t *src, size_t n, uint32_t thr, size_t *pos_p,
                          uint32_t *idx, size_t cap, int *bad_p)
{
    const float *g = src->g, *r = src->r, *u = src->u;
    const __m256 mv = _mm256_set1_ps(src->m);
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    /* thr >= 1 and |v| bits < 2^31, so a signed a > thr - 1 is a >= thr */
    const __m256i thr1 = _mm256_set1_epi32((int)(thr - 1));
    const __m256i fmax = _mm256_set1_epi32((int)(HP_SPARSE_NONFINITE_BITS - 1));
    __m256i badv = _mm256_setzero_si256();
    size_t i = *pos_p, cnt = 0, tail;

    if (u != NULL && r != NULL)
        FILTER_AVX2(1, 1);
    else if (u != NULL)
        FILTER_AVX2(1, 0);
    else if (r != NULL)
        FILTER_AVX2(0, 1);
    else
        FILTER_AVX2(0, 0);
    *bad_p |= !_mm256_testz_si256(badv, badv);
    /* the tail (and the last few slots of idx) element by element */
    *pos_p = i;
    tail = filter_generic(src, n, thr, pos_p, idx + cnt, cap - cnt, bad_p);
    return cnt + tail;
}
#endif

size_t hp_sparse_filter(const hp_sparse_src_t *src, size_t n, uint32_t thr, size_t *pos_p,
                        uint32_t *idx, size_t cap, int *nonfinite_p, int isa)
{
    if (thr < 1)
        thr = 1;
    if (thr > 0x7fffffffu)
        thr = 0x7fffffffu;
#if HP_SPARSE_HAVE_AVX2
    if (isa == HP_ISA_AVX2)
        return filter_avx2(src, n, thr, pos_p, idx, cap, nonfinite_p);
#endif
    (void)isa;
    return filter_generic(src, n, thr, pos_p, idx, cap, nonfinite_p);
}

/* ---------------------------------------------------------------- top-k */

size_t hp_sparse_topk(const hp_sparse_src_t *src, uint32_t *idx, size_t m, size_t k,
                      uint32_t *scratch)
{
    uint32_t *mag = scratch, *tmp = scratch + m, t;
    size_t greater = 0, quota, kept = 0;

    if (m <= k)
        return m;
    if (k == 0)
        return 0;
    for (size_t j = 0; j < m; j++)
        mag[j] = hp_sparse_absbits(hp_sparse_v_at(src, idx[j]));
    memcpy(tmp, mag, m * sizeof(uint32_t));
    /* the k-th largest magnitude */
    t = select_nth(tmp, m, m - k);
    for (size_t j = 0; j < m; j++)
        greater += mag[j] > t;
    /* everything above t, then ties at t by increasing index */
    quota = k - greater;
    for (size_t j = 0; j < m; j++) {
        if (mag[j] > t || (mag[j] == t && quota > 0)) {
            quota -= mag[j] == t;
            idx[kept++] = idx[j];
        }
    }
    return kept;
}

/* ----------------------------------------------------------------- pack */

void hp_sparse_pack(const hp_sparse_src_t *src, const uint32_t *idx, size_t m, void *out)
{
    unsigned char *o = (unsigned char *)out;
    for (size_t j = 0; j < m; j++) {
        float v = hp_sparse_v_at(src, idx[j]);
        memcpy(o + 8 * j, &idx[j], 4);
        memcpy(o + 8 * j + 4, &v, 4);
    }
}

/* -------------------------------------------------- filter and commit */

/* Generic fused pass: as FILTER_GENERIC, and stores u' into u and v into r
 * (in place) as it goes.  g, r and u are distinct vectors (restrict), which
 * lets the compiler vectorise the stores. */
#define FCOMMIT_GENERIC(U, R)                                                       \
    do {                                                                            \
        for (; i + FB <= n && cap - cnt >= FB; i += FB) {                           \
            int32_t a[FB], hit = 0;                                                 \
            for (size_t j = 0; j < FB; j++) {                                       \
                float x = (U) ? m * u[i + j] + g[i + j] : g[i + j];                 \
                float v;                                                            \
                if (U)                                                              \
                    u[i + j] = x;                                                   \
                v = (R) ? r[i + j] + x : x;                                         \
                if (R)                                                              \
                    r[i + j] = v;                                                   \
                a[j] = (int32_t)hp_sparse_absbits(v);                               \
                hit |= a[j] >= t;                                                   \
                bad |= a[j] >= (int32_t)HP_SPARSE_NONFINITE_BITS;                             \
            }                                                                       \
            if (hit == 0)                                                           \
                continue;                                                           \
            for (size_t j = 0; j < FB; j++) {                                       \
                idx[cnt] = (uint32_t)(i + j);                                       \
                cnt += a[j] >= t;                                                   \
            }                                                                       \
        }                                                                           \
        for (; i < n && cnt < cap; i++) {                                           \
            float x = (U) ? m * u[i] + g[i] : g[i];                                 \
            float v;                                                                \
            int32_t a;                                                              \
            if (U)                                                                  \
                u[i] = x;                                                           \
            v = (R) ? r[i] + x : x;                                                 \
            if (R)                                                                  \
                r[i] = v;                                                           \
            a = (int32_t)hp_sparse_absbits(v);                                      \
            bad |= a >= (int32_t)HP_SPARSE_NONFINITE_BITS;                                    \
            idx[cnt] = (uint32_t)i;                                                 \
            cnt += a >= t;                                                          \
        }                                                                           \
    } while (0)

static size_t fcommit_generic(const float *restrict g, float *restrict r, float *restrict u,
                              float m, size_t n, uint32_t thr, size_t *pos_p, uint32_t *idx,
                              size_t cap, int *bad_p)
{
    const int32_t t = (int32_t)thr;
    size_t i = *pos_p, cnt = 0;
    int bad = 0;

    if (u != NULL && r != NULL)
        FCOMMIT_GENERIC(1, 1);
    else if (u != NULL)
        FCOMMIT_GENERIC(1, 0);
    else if (r != NULL)
        FCOMMIT_GENERIC(0, 1);
    else
        FCOMMIT_GENERIC(0, 0);
    *pos_p = i;
    *bad_p |= bad;
    return cnt;
}

#if HP_SPARSE_HAVE_AVX2
/* |v| bits of 8 elements from i, storing u' and v on the way. */
#define AVX2_VC8(U, R, i)                                                           \
    __extension__({                                                                 \
        __m256 x_ = _mm256_loadu_ps(g + (i));                                       \
        if (U) {                                                                    \
            x_ = _mm256_add_ps(_mm256_mul_ps(mv, _mm256_loadu_ps(u + (i))), x_);    \
            _mm256_storeu_ps(u + (i), x_);                                          \
        }                                                                           \
        if (R) {                                                                    \
            x_ = _mm256_add_ps(_mm256_loadu_ps(r + (i)), x_);                       \
            _mm256_storeu_ps(r + (i), x_);                                          \
        }                                                                           \
        _mm256_and_si256(_mm256_castps_si256(x_), absmask);                         \
    })

#define FCOMMIT_AVX2(U, R)                                                          \
    do {                                                                            \
        for (; i + 32 <= n && cap - cnt >= 32; i += 32) {                           \
            __m256i a0 = AVX2_VC8(U, R, i), a1 = AVX2_VC8(U, R, i + 8);             \
            __m256i a2 = AVX2_VC8(U, R, i + 16), a3 = AVX2_VC8(U, R, i + 24);       \
            AVX2_SCAN4(a0, a1, a2, a3);                                             \
        }                                                                           \
    } while (0)

__attribute__((target("avx2")))
static size_t fcommit_avx2(const float *g, float *r, float *u, float m, size_t n, uint32_t thr,
                           size_t *pos_p, uint32_t *idx, size_t cap, int *bad_p)
{
    const __m256 mv = _mm256_set1_ps(m);
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i thr1 = _mm256_set1_epi32((int)(thr - 1));
    const __m256i fmax = _mm256_set1_epi32((int)(HP_SPARSE_NONFINITE_BITS - 1));
    __m256i badv = _mm256_setzero_si256();
    size_t i = *pos_p, cnt = 0, tail;

    if (u != NULL && r != NULL)
        FCOMMIT_AVX2(1, 1);
    else if (u != NULL)
        FCOMMIT_AVX2(1, 0);
    else if (r != NULL)
        FCOMMIT_AVX2(0, 1);
    else
        FCOMMIT_AVX2(0, 0);
    *bad_p |= !_mm256_testz_si256(badv, badv);
    *pos_p = i;
    tail = fcommit_generic(g, r, u, m, n, thr, pos_p, idx + cnt, cap - cnt, bad_p);
    return cnt + tail;
}
#endif

size_t hp_sparse_filter_commit(const hp_sparse_src_t *src, float *r, float *u, size_t n,
                               uint32_t thr, size_t *pos_p, uint32_t *idx, size_t cap,
                               int *nonfinite_p, int isa)
{
    if (thr < 1)
        thr = 1;
    if (thr > 0x7fffffffu)
        thr = 0x7fffffffu;
    /* in place only (the sources of v are the vectors written), and three
     * distinct vectors */
    if (r != src->r || u != src->u || (r != NULL && (r == u || (const float *)r == src->g)) ||
        (u != NULL && (const float *)u == src->g))
        return 0;
#if HP_SPARSE_HAVE_AVX2
    if (isa == HP_ISA_AVX2)
        return fcommit_avx2(src->g, r, u, src->m, n, thr, pos_p, idx, cap, nonfinite_p);
#endif
    (void)isa;
    return fcommit_generic(src->g, r, u, src->m, n, thr, pos_p, idx, cap, nonfinite_p);
}

/* ----------------------------------------------------------------- mask */

void hp_sparse_mask(float *r, float *u, const uint32_t *idx, size_t m)
{
    for (size_t j = 0; j < m; j++) {
        if (r != NULL)
            r[idx[j]] = 0.0f;
        if (u != NULL)
            u[idx[j]] = 0.0f;
    }
}
