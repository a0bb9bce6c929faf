/*
 * The data of the IPC stand-in's protocol tests (check_ipc.c): each rank's
 * values of every type, and the bits a reduction over ranks must give,
 * computed here in rank order with hipress' own 16-bit conversions
 * (hp_elem.h), independent of the stand-in's.  Included once, after
 * check_ipc.c's CHECK.
 */
#ifndef HP_TESTS_CHECK_IPC_H
#define HP_TESTS_CHECK_IPC_H

static size_t esz(int dt)
{
    return hpi_dtype_size(dt);
}

static double val(int dt, int r, size_t i)
{
    switch (dt) {
    case ncclUint8: return (double)((r * 3 + i) % 7);
    case ncclInt32: case ncclInt64: return (double)((int)((r * 7 + i * 3) % 11) - 5);
    default: return ((double)((r * 31 + i * 17) % 97) - 48.0) * 0.37 + 0.001 * r;
    }
}

static void put(int dt, void *b, size_t i, double v)
{
    switch (dt) {
    case ncclUint8: ((uint8_t *)b)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)b)[i] = (int32_t)v; break;
    case ncclInt64: ((int64_t *)b)[i] = (int64_t)v; break;
    case ncclFloat16: ((uint16_t *)b)[i] = hp_f32_to_f16((float)v); break;
    case ncclBfloat16: ((uint16_t *)b)[i] = hp_f32_to_bf16((float)v); break;
    case ncclFloat32: ((float *)b)[i] = (float)v; break;
    default: ((double *)b)[i] = v; break;
    }
}

static void fill(int dt, void *b, size_t n, int r, size_t from)
{
    for (size_t i = 0; i < n; i++)
        put(dt, b, i, val(dt, r, from + i));
}

#define COMB(a, b) (op == ncclProd ? (a) * (b) : op == ncclMax ? ((a) > (b) ? (a) : (b)) \
                    : op == ncclMin ? ((a) < (b) ? (a) : (b)) : (a) + (b))

/* element i of the reduction over ranks 0..N-1 in rank order, as bits;
 * scale[r]: a premultiplied sum's scalars (NULL: none) */
static uint64_t expect(int dt, int op, int N, size_t i, const double *scale)
{
    uint64_t bits = 0;
    int avg = op == ncclAvg;
    if (avg)
        op = ncclSum;
    if (dt == ncclFloat32) {
        float a = 0;
        for (int r = 0; r < N; r++) {
            float x = (float)val(dt, r, i);
            if (scale)
                x = x * (float)scale[r];
            a = r == 0 ? x : COMB(a, x);
        }
        if (avg)
            a = a / (float)N;
        memcpy(&bits, &a, 4);
    } else if (dt == ncclFloat64) {
        double a = 0;
        for (int r = 0; r < N; r++)
            a = r == 0 ? val(dt, r, i) : COMB(a, val(dt, r, i));
        if (avg)
            a = a / N;
        memcpy(&bits, &a, 8);
    } else if (dt == ncclFloat16 || dt == ncclBfloat16) {
        int bf = dt == ncclBfloat16;
        uint16_t v = 0;
        for (int r = 0; r < N; r++) {
            uint16_t w = bf ? hp_f32_to_bf16((float)val(dt, r, i)) : hp_f32_to_f16((float)val(dt, r, i));
            float a = bf ? hp_bf16_to_f32(v) : hp_f16_to_f32(v), b = bf ? hp_bf16_to_f32(w) : hp_f16_to_f32(w);
            v = r == 0 ? w : bf ? hp_f32_to_bf16(COMB(a, b)) : hp_f32_to_f16(COMB(a, b));
        }
        if (avg) {
            float a = (bf ? hp_bf16_to_f32(v) : hp_f16_to_f32(v)) / (float)N;
            v = bf ? hp_f32_to_bf16(a) : hp_f32_to_f16(a);
        }
        bits = v;
    } else {
        int64_t a = 0;
        for (int r = 0; r < N; r++) {
            int64_t x = (int64_t)val(dt, r, i);
            a = r == 0 ? x : COMB(a, x);
            if (dt == ncclUint8)
                a = (uint8_t)a;
            else if (dt == ncclInt32)
                a = (int32_t)a;
        }
        if (avg)
            a = a / N;
        bits = (uint64_t)a & (esz(dt) == 8 ? ~0ULL : (1ULL << (8 * esz(dt))) - 1);
    }
    return bits;
}

static uint64_t got(int dt, const void *b, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)b + i * esz(dt), esz(dt));
    return v;
}

/* buffer b (n elements) against element base+i of the reduction */
static void same(const char *what, int dt, int op, int N, const void *b, size_t n, size_t base, const double *sc)
{
    for (size_t i = 0; i < n; i++)
        if (got(dt, b, i) != expect(dt, op, N, base + i, sc)) {
            CHECK(0, "%s %s op %d: [%zu] = 0x%llx, want 0x%llx", what, hpi_dtype_name(dt), op, i,
                  (unsigned long long)got(dt, b, i), (unsigned long long)expect(dt, op, N, base + i, sc));
            return;
        }
}

/* rank r's own values as they would be stored, elements [from, from+n) */
static void same_vals(const char *what, int dt, int r, const void *b, size_t n, size_t from)
{
    void *w = malloc(n * esz(dt) + 1);
    fill(dt, w, n, r, from);
    CHECK(memcmp(w, b, n * esz(dt)) == 0, "%s: not rank %d's values", what, r);
    free(w);
}

#endif
