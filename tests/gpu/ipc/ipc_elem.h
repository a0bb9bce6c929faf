/*
 * The IPC stand-in NCCL's reductions (tests/gpu/ipc/): one element at a
 * time, compiled as C for the host paths (the host engine of the protocol
 * tests, the stand-in driver's host functions) and as CUDA for the kernel
 * (ipc_kern.cu), so every path gives the same bits by construction.
 *
 * Sources are reduced in rank order, so every rank gets the same bits and
 * a run is deterministic.  16-bit floats are widened, combined in float and
 * rounded back after every step (to nearest even), as NCCL does; ncclAvg is
 * the sum divided by the rank count (integers: truncating division).
 */
#ifndef HP_TESTS_IPC_ELEM_H
#define HP_TESTS_IPC_ELEM_H

#include <stdint.h>
#ifndef __CUDACC__
#include <string.h>
#endif

#ifdef __CUDACC__
#define HPI_HD __host__ __device__ static inline
#else
#define HPI_HD static inline
#endif

#define HPI_MAX_RANKS 8

/* the reductions (ncclSum ... ncclMin keep NCCL's numbers); HPI_SCALE:
 * dst = scalar * src[0], a premultiplied sum's own contribution */
enum { HPI_SUM = 0, HPI_PROD = 1, HPI_MAX = 2, HPI_MIN = 3, HPI_SCALE = 16 };
/* element types, as ncclDataType_t */
enum { HPI_I8 = 0, HPI_U8, HPI_I32, HPI_U32, HPI_I64, HPI_U64, HPI_F16, HPI_F32, HPI_F64, HPI_BF16 };

/* One reduction: dst[i] = src[0][i] op src[1][i] op ... for i < count,
 * then divided by div when div > 1.  Passed by value to the kernel. */
typedef struct {
    void       *dst;
    const void *src[HPI_MAX_RANKS];
    uint64_t    count;
    int         nsrc;
    int         dtype;
    int         op;
    int         div;
    double      scale_f;     /* HPI_SCALE of a float type, host scalar */
    int64_t     scale_i;     /* HPI_SCALE of an integer type, host scalar */
    const void *scale_p;     /* HPI_SCALE: the scalar in device memory (else NULL) */
} hpi_red_t;

HPI_HD uint32_t hpi_f2u(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

HPI_HD float hpi_u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

HPI_HD float hpi_h2f(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 31)
        return hpi_u2f(s | 0x7f800000u | (m << 13));
    if (e != 0)
        return hpi_u2f(s | ((e + 112) << 23) | (m << 13));
    if (m == 0)
        return hpi_u2f(s);
    e = 113;   /* subnormal: normalise */
    while (!(m & 0x400)) {
        m <<= 1;
        e--;
    }
    return hpi_u2f(s | (e << 23) | ((m & 0x3ff) << 13));
}

/* to nearest even; NaN stays NaN (quiet) with its sign */
HPI_HD uint16_t hpi_f2h(float f)
{
    uint32_t x = hpi_f2u(f), s = (x >> 16) & 0x8000, a = x & 0x7fffffffu, h, rem, half;
    if (a > 0x7f800000u)
        return (uint16_t)(s | 0x7e00);
    if (a >= 0x477ff000u)   /* 65520 and up round to infinity */
        return (uint16_t)(s | 0x7c00);
    if (a >= 0x38800000u) {   /* normal */
        h = (a >> 13) - (112u << 10);
        rem = a & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
            h++;
        return (uint16_t)(s | h);
    }
    if (a < 0x33000000u)   /* at most 2^-25: zero */
        return (uint16_t)s;
    {
        uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000, shift = 126 - e;
        h = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(s | h);
    }
}

HPI_HD float hpi_b2f(uint16_t b)
{
    return hpi_u2f((uint32_t)b << 16);
}

HPI_HD uint16_t hpi_f2b(float f)
{
    uint32_t x = hpi_f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

HPI_HD double hpi_comb_d(double a, double b, int op)
{
    return op == HPI_PROD ? a * b : op == HPI_MAX ? (a > b ? a : b) : op == HPI_MIN ? (a < b ? a : b) : a + b;
}

HPI_HD float hpi_comb_f(float a, float b, int op)
{
    return op == HPI_PROD ? a * b : op == HPI_MAX ? (a > b ? a : b) : op == HPI_MIN ? (a < b ? a : b) : a + b;
}

#define HPI_COMB_INT(T, a, b, op) \
    ((op) == HPI_PROD ? (T)((a) * (b)) : (op) == HPI_MAX ? ((a) > (b) ? (a) : (b)) \
     : (op) == HPI_MIN ? ((a) < (b) ? (a) : (b)) : (T)((a) + (b)))

/* The reduction of element i of r. */
HPI_HD void hpi_red_elem(const hpi_red_t *r, uint64_t i)
{
    int n = r->nsrc, op = r->op, k;
    switch (r->dtype) {
    case HPI_F32: {
        float a = ((const float *)r->src[0])[i];
        if (op == HPI_SCALE) {
            float s = r->scale_p != 0 ? *(const float *)r->scale_p : (float)r->scale_f;
            a = a * s;
        }
        for (k = 1; k < n; k++)
            a = hpi_comb_f(a, ((const float *)r->src[k])[i], op);
        if (r->div > 1)
            a = a / (float)r->div;
        ((float *)r->dst)[i] = a;
        return;
    }
    case HPI_F64: {
        double a = ((const double *)r->src[0])[i];
        if (op == HPI_SCALE)
            a = a * (r->scale_p != 0 ? *(const double *)r->scale_p : r->scale_f);
        for (k = 1; k < n; k++)
            a = hpi_comb_d(a, ((const double *)r->src[k])[i], op);
        if (r->div > 1)
            a = a / (double)r->div;
        ((double *)r->dst)[i] = a;
        return;
    }
    case HPI_F16:
    case HPI_BF16: {
        int bf = r->dtype == HPI_BF16;
        uint16_t v = ((const uint16_t *)r->src[0])[i];
        if (op == HPI_SCALE) {
            float s = r->scale_p != 0 ? (bf ? hpi_b2f(*(const uint16_t *)r->scale_p)
                                            : hpi_h2f(*(const uint16_t *)r->scale_p))
                                      : (float)r->scale_f;
            float a = (bf ? hpi_b2f(v) : hpi_h2f(v)) * s;
            v = bf ? hpi_f2b(a) : hpi_f2h(a);
        }
        for (k = 1; k < n; k++) {
            uint16_t w = ((const uint16_t *)r->src[k])[i];
            float a = bf ? hpi_comb_f(hpi_b2f(v), hpi_b2f(w), op) : hpi_comb_f(hpi_h2f(v), hpi_h2f(w), op);
            v = bf ? hpi_f2b(a) : hpi_f2h(a);
        }
        if (r->div > 1) {
            float a = (bf ? hpi_b2f(v) : hpi_h2f(v)) / (float)r->div;
            v = bf ? hpi_f2b(a) : hpi_f2h(a);
        }
        ((uint16_t *)r->dst)[i] = v;
        return;
    }
#define HPI_INT_CASE(ID, T)                                                       \
    case ID: {                                                                    \
        T a = ((const T *)r->src[0])[i];                                          \
        if (op == HPI_SCALE)                                                      \
            a = (T)(a * (r->scale_p != 0 ? *(const T *)r->scale_p : (T)r->scale_i)); \
        for (k = 1; k < n; k++) {                                                 \
            T b = ((const T *)r->src[k])[i];                                      \
            a = HPI_COMB_INT(T, a, b, op);                                        \
        }                                                                         \
        if (r->div > 1)                                                           \
            a = (T)(a / (T)r->div);                                               \
        ((T *)r->dst)[i] = a;                                                     \
        return;                                                                   \
    }
    HPI_INT_CASE(HPI_I8, int8_t)
    HPI_INT_CASE(HPI_U8, uint8_t)
    HPI_INT_CASE(HPI_I32, int32_t)
    HPI_INT_CASE(HPI_U32, uint32_t)
    HPI_INT_CASE(HPI_I64, int64_t)
    HPI_INT_CASE(HPI_U64, uint64_t)
#undef HPI_INT_CASE
    default:
        return;
    }
}

#endif
