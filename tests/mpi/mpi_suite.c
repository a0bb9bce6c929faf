/*
 * The drop-in library under mpirun, as users run it: a plain MPI program
 * with libhipress.so preloaded.  One launch per rank count runs every case:
 *
 *   matrix   every basic datatype x every predefined op that applies x counts
 *            0, 1, 7, 1000 (2^20+3 for a subset) x in place / out of place x
 *            MPI_COMM_WORLD, a split and a dup, against values each rank
 *            computes on its own; eligible cells (float sums of >= 1 MiB)
 *            are compressed with `none` and must still be exact
 *   errors   erroneous arguments return what PMPI_Allreduce returns
 *   ring     the compressed ring: `none` exact, `fp16` within its rounding
 *            bound and bit-identical on every rank, NaN and Inf propagate
 *   optout   opted-out communicators are never compressed and match PMPI
 *            bit for bit
 *   threads  two threads, two communicators, MPI_THREAD_MULTIPLE
 *
 *   mpirun -np N -x LD_PRELOAD=.../libhipress.so -x HIPRESS_COMPRESSOR=none \
 *          -x HIPRESS_ALGO=ring -x HIPRESS_PARTITION_BYTES=256K \
 *          -x HIPRESS_MIN_BYTES=1M mpi_suite [case...]
 *
 * The public API (hipress_comm_set, hipress_stats_get) is looked up in the
 * preloaded library with dlsym, so the program is not linked to hipress and a
 * missing preload is a failure.  The harness's own bookkeeping (failure
 * counts, hashes, reference results) goes through PMPI_* so it never enters
 * the statistics it checks.  Rank 0 prints "mpi_suite np=N: P checks, F
 * failed"; the exit status is 1 on any failure.
 */
#include <complex.h>
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include "hipress.h"

static int wrank, wsize;
static atomic_long nchecks, nfailed;
static long min_bytes;   /* HIPRESS_MIN_BYTES of the environment */

/* A failed check: say where and why (at most 30 lines per rank). */
#define EXPECT(cond, ...) \
    do { atomic_fetch_add(&nchecks, 1); \
         if (!(cond)) { \
             if (atomic_fetch_add(&nfailed, 1) < 30) { \
                 fprintf(stderr, "rank %d: FAIL %s:%d: ", wrank, __FILE__, __LINE__); \
                 fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } } while (0)

static int (*api_comm_set)(MPI_Comm, const char *, const char *);
static void (*api_stats_get)(hipress_stats_t *);

static void load_api(void)
{
    *(void **)&api_comm_set = dlsym(RTLD_DEFAULT, "hipress_comm_set");
    *(void **)&api_stats_get = dlsym(RTLD_DEFAULT, "hipress_stats_get");
    if (api_comm_set == NULL || api_stats_get == NULL) {
        fprintf(stderr, "rank %d: FAIL: hipress_comm_set/hipress_stats_get not found: is libhipress.so preloaded?\n",
                wrank);
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static hipress_stats_t stats(void)
{
    hipress_stats_t s;
    memset(&s, 0, sizeof(s));
    api_stats_get(&s);
    return s;
}

static void comm_set(MPI_Comm c, const char *name, const char *value)
{
    int rc = api_comm_set(c, name, value);
    EXPECT(rc == HIPRESS_OK, "hipress_comm_set(%s, %s) returned %d", name, value, rc);
}

/* SplitMix64 of (a, b, c): the inputs of every rank, reproducible anywhere. */
static uint64_t mix3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t z = a * 0x9E3779B97F4A7C15ULL + b * 0xBF58476D1CE4E5B9ULL + c * 0x94D049BB133111EBULL + 0x2545F4914F6CDD1DULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* 1 when every rank of comm holds the same bytes: max(h) == ~max(~h) only
 * when all h agree. */
static int identical(const void *buf, size_t bytes, MPI_Comm comm)
{
    uint64_t h[2], out[2];
    h[0] = hash_bytes(buf, bytes);
    h[1] = ~h[0];
    PMPI_Allreduce(h, out, 2, MPI_UINT64_T, MPI_MAX, comm);
    return out[0] == ~out[1];
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", wrank, n);
        PMPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

/* ================================================================= matrix */

typedef enum { C_SINT, C_UINT, C_FLT, C_CPLX, C_BOOL, C_BYTE, C_PAIR, C_CHARLIKE } tclass_t;

typedef struct {
    const char  *name;
    MPI_Datatype dt;
    size_t       size;    /* bytes of one element (the C type's sizeof) */
    tclass_t     cls;
    int          sub;     /* C_FLT/C_CPLX: 0 float, 1 double, 2 long double; C_PAIR: P_* */
} tinfo_t;

enum { P_FLOAT_INT, P_DOUBLE_INT, P_LONG_INT, P_2INT, P_SHORT_INT, P_LONG_DOUBLE_INT };
struct pair_fi { float v; int i; };
struct pair_di { double v; int i; };
struct pair_li { long v; int i; };
struct pair_ii { int v; int i; };
struct pair_si { short v; int i; };
struct pair_ldi { long double v; int i; };

typedef enum { O_SUM, O_PROD, O_MAX, O_MIN, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR, O_MAXLOC, O_MINLOC,
               O_COUNT } opi_t;
static const char *op_names[O_COUNT] = {"SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
                                        "MAXLOC", "MINLOC"};
static MPI_Op op_handle(opi_t o)
{
    MPI_Op ops[O_COUNT] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR,
                           MPI_BXOR, MPI_MAXLOC, MPI_MINLOC};
    return ops[o];
}

#define NTYPES 34
static tinfo_t types[NTYPES];

static void types_init(void)
{
    int k = 0;
#define T(n, d, ctype, c, s) types[k++] = (tinfo_t){n, d, sizeof(ctype), c, s}
    T("CHAR", MPI_CHAR, char, C_CHARLIKE, 0);
    T("WCHAR", MPI_WCHAR, wchar_t, C_CHARLIKE, 0);
    T("SIGNED_CHAR", MPI_SIGNED_CHAR, signed char, C_SINT, 0);
    T("UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, unsigned char, C_UINT, 0);
    T("SHORT", MPI_SHORT, short, C_SINT, 0);
    T("UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, unsigned short, C_UINT, 0);
    T("INT", MPI_INT, int, C_SINT, 0);
    T("UNSIGNED", MPI_UNSIGNED, unsigned, C_UINT, 0);
    T("LONG", MPI_LONG, long, C_SINT, 0);
    T("UNSIGNED_LONG", MPI_UNSIGNED_LONG, unsigned long, C_UINT, 0);
    T("LONG_LONG", MPI_LONG_LONG, long long, C_SINT, 0);
    T("UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, unsigned long long, C_UINT, 0);
    T("INT8_T", MPI_INT8_T, int8_t, C_SINT, 0);
    T("INT16_T", MPI_INT16_T, int16_t, C_SINT, 0);
    T("INT32_T", MPI_INT32_T, int32_t, C_SINT, 0);
    T("INT64_T", MPI_INT64_T, int64_t, C_SINT, 0);
    T("UINT8_T", MPI_UINT8_T, uint8_t, C_UINT, 0);
    T("UINT16_T", MPI_UINT16_T, uint16_t, C_UINT, 0);
    T("UINT32_T", MPI_UINT32_T, uint32_t, C_UINT, 0);
    T("UINT64_T", MPI_UINT64_T, uint64_t, C_UINT, 0);
    T("FLOAT", MPI_FLOAT, float, C_FLT, 0);
    T("DOUBLE", MPI_DOUBLE, double, C_FLT, 1);
    T("LONG_DOUBLE", MPI_LONG_DOUBLE, long double, C_FLT, 2);
    T("C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, float complex, C_CPLX, 0);
    T("C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, double complex, C_CPLX, 1);
    T("C_LONG_DOUBLE_COMPLEX", MPI_C_LONG_DOUBLE_COMPLEX, long double complex, C_CPLX, 2);
    T("C_BOOL", MPI_C_BOOL, bool, C_BOOL, 0);
    T("BYTE", MPI_BYTE, unsigned char, C_BYTE, 0);
    T("FLOAT_INT", MPI_FLOAT_INT, struct pair_fi, C_PAIR, P_FLOAT_INT);
    T("DOUBLE_INT", MPI_DOUBLE_INT, struct pair_di, C_PAIR, P_DOUBLE_INT);
    T("LONG_INT", MPI_LONG_INT, struct pair_li, C_PAIR, P_LONG_INT);
    T("2INT", MPI_2INT, struct pair_ii, C_PAIR, P_2INT);
    T("SHORT_INT", MPI_SHORT_INT, struct pair_si, C_PAIR, P_SHORT_INT);
    T("LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, struct pair_ldi, C_PAIR, P_LONG_DOUBLE_INT);
#undef T
    if (k != NTYPES) {
        fprintf(stderr, "types table: %d entries, NTYPES %d\n", k, NTYPES);
        PMPI_Abort(MPI_COMM_WORLD, 4);
    }
}

/* Ops the MPI standard defines for a class (MPI-3.1 section 5.9.2). */
static int op_applies(tclass_t c, opi_t o)
{
    switch (o) {
    case O_SUM: case O_PROD: return c == C_SINT || c == C_UINT || c == C_FLT || c == C_CPLX;
    case O_MAX: case O_MIN: return c == C_SINT || c == C_UINT || c == C_FLT;
    case O_LAND: case O_LOR: case O_LXOR: return c == C_SINT || c == C_UINT || c == C_BOOL;
    case O_BAND: case O_BOR: case O_BXOR: return c == C_SINT || c == C_UINT || c == C_BYTE;
    case O_MAXLOC: case O_MINLOC: return c == C_PAIR;
    default: return 0;
    }
}

/* One element's value in a type-independent form. */
typedef struct {
    long long      i;   /* integers, bool, byte, pair index */
    double         f;   /* floats, pair value (small, exact in any float type) */
    double complex z;
} val_t;

/* Input of element i on (communicator) rank r for op o.  Designed so every
 * result is exact and in range for every width: sums of at most 5 values in
 * [-2, 2] (unsigned [0, 3]), products of {-1, 1, 2} (unsigned {1, 2}),
 * quarter-integers for float max/min, ties in MAXLOC/MINLOC values. */
static val_t gen(const tinfo_t *t, opi_t o, int r, size_t i)
{
    uint64_t u = mix3((uint64_t)r, i, (uint64_t)o * 131 + (uint64_t)t->cls);
    const int sgn = t->cls != C_UINT;
    val_t v;
    v.i = 0;
    /* only the field of the type's class is filled: the expected values of
     * millions of elements are computed per cell */
    switch (o) {
    case O_SUM:
        v.i = sgn ? (long long)(u % 5) - 2 : (long long)(u % 4);
        if (t->cls == C_FLT)
            v.f = (double)v.i;
        else if (t->cls == C_CPLX)
            v.z = (double)v.i + I * (double)((long long)((u >> 20) % 5) - 2);
        break;
    case O_PROD:
        v.i = u % 3 == 0 ? (sgn ? -1 : 2) : (u % 7 == 0 ? 2 : 1);
        if (t->cls == C_FLT)
            v.f = (double)v.i;
        else if (t->cls == C_CPLX) {
            static const double complex units[4] = {1, -1, I, -I};
            v.z = units[(u >> 20) % 4];
        }
        break;
    case O_MAX: case O_MIN:
        v.i = sgn ? (long long)(u % 50) - 25 : (long long)(u % 200);
        if (t->cls == C_FLT)
            v.f = (double)v.i / 4;
        break;
    case O_LAND: case O_LOR: case O_LXOR:
        /* true values other than 1 too: logical ops must not be bitwise */
        v.i = u % 4 == 0 ? 0 : (long long)(u % 3) + 1;
        break;
    case O_BAND: case O_BOR: case O_BXOR:
        v.i = (long long)(u >> 3);   /* bits; truncated to the width on store */
        if (u % 5 == 0)
            v.i = -1;                /* all ones now and then, so BAND keeps bits */
        break;
    case O_MAXLOC: case O_MINLOC:
        v.f = (double)(u % 7);
        v.i = (long long)((u >> 20) % 11);
        break;
    default: break;
    }
    return v;
}

static val_t combine(const tinfo_t *t, opi_t o, val_t a, val_t b)
{
    val_t r = a;
    if (t->cls == C_FLT) {
        switch (o) {
        case O_SUM: r.f = a.f + b.f; break;
        case O_PROD: r.f = a.f * b.f; break;
        case O_MAX: r.f = a.f > b.f ? a.f : b.f; break;
        case O_MIN: r.f = a.f < b.f ? a.f : b.f; break;
        default: break;
        }
        return r;
    }
    if (t->cls == C_CPLX) {
        r.z = o == O_SUM ? a.z + b.z : a.z * b.z;
        return r;
    }
    switch (o) {
    case O_SUM: r.i = a.i + b.i; break;
    case O_PROD: r.i = a.i * b.i; break;
    case O_MAX: r.i = a.i > b.i ? a.i : b.i; break;
    case O_MIN: r.i = a.i < b.i ? a.i : b.i; break;
    case O_LAND: r.i = a.i && b.i; break;
    case O_LOR: r.i = a.i || b.i; break;
    case O_LXOR: r.i = (!a.i) != (!b.i); break;
    case O_BAND: r.i = a.i & b.i; break;
    case O_BOR: r.i = a.i | b.i; break;
    case O_BXOR: r.i = a.i ^ b.i; break;
    case O_MAXLOC: case O_MINLOC:
        if ((o == O_MAXLOC ? b.f > a.f : b.f < a.f) || (b.f == a.f && b.i < a.i))
            r = b;
        break;
    default: break;
    }
    return r;
}

/* Store v as element e of type t.  Pairs hold small values exact in every
 * value type; padding is zeroed so stores are reproducible. */
static void store(const tinfo_t *t, void *e, val_t v)
{
    memset(e, 0, t->size);
    switch (t->cls) {
    case C_SINT: case C_UINT: case C_BYTE: case C_CHARLIKE:
        memcpy(e, &v.i, t->size);   /* little endian: the low bytes */
        break;
    case C_BOOL: *(bool *)e = v.i != 0; break;
    case C_FLT:
        if (t->sub == 0) *(float *)e = (float)v.f;
        else if (t->sub == 1) *(double *)e = (double)v.f;
        else *(long double *)e = (long double)v.f;
        break;
    case C_CPLX:
        if (t->sub == 0) *(float complex *)e = (float complex)v.z;
        else if (t->sub == 1) *(double complex *)e = v.z;
        else *(long double complex *)e = (long double complex)v.z;
        break;
    case C_PAIR:
        switch (t->sub) {
        case P_FLOAT_INT: ((struct pair_fi *)e)->v = (float)v.f; ((struct pair_fi *)e)->i = (int)v.i; break;
        case P_DOUBLE_INT: ((struct pair_di *)e)->v = (double)v.f; ((struct pair_di *)e)->i = (int)v.i; break;
        case P_LONG_INT: ((struct pair_li *)e)->v = (long)v.f; ((struct pair_li *)e)->i = (int)v.i; break;
        case P_2INT: ((struct pair_ii *)e)->v = (int)v.f; ((struct pair_ii *)e)->i = (int)v.i; break;
        case P_SHORT_INT: ((struct pair_si *)e)->v = (short)v.f; ((struct pair_si *)e)->i = (int)v.i; break;
        default: ((struct pair_ldi *)e)->v = (long double)v.f; ((struct pair_ldi *)e)->i = (int)v.i; break;
        }
        break;
    }
}

/* Element e equals the expected value x (stored the same way into tmp);
 * floating types compare by value (long double has padding bytes that MPI
 * need not preserve), pairs by their two fields. */
static int same(const tinfo_t *t, const void *e, val_t x)
{
    _Alignas(32) unsigned char tmp[64];   /* any element type, aligned for all */
    store(t, tmp, x);
    switch (t->cls) {
    case C_FLT:
        if (t->sub == 0) return *(const float *)e == *(const float *)tmp;
        if (t->sub == 1) return *(const double *)e == *(const double *)tmp;
        return *(const long double *)e == *(const long double *)tmp;
    case C_CPLX:
        if (t->sub == 0) return *(const float complex *)e == *(const float complex *)tmp;
        if (t->sub == 1) return *(const double complex *)e == *(const double complex *)tmp;
        return *(const long double complex *)e == *(const long double complex *)tmp;
    case C_PAIR:
        switch (t->sub) {
#define PAIR_EQ(T) return ((const T *)e)->v == ((const T *)tmp)->v && ((const T *)e)->i == ((const T *)tmp)->i
        case P_FLOAT_INT: PAIR_EQ(struct pair_fi);
        case P_DOUBLE_INT: PAIR_EQ(struct pair_di);
        case P_LONG_INT: PAIR_EQ(struct pair_li);
        case P_2INT: PAIR_EQ(struct pair_ii);
        case P_SHORT_INT: PAIR_EQ(struct pair_si);
        default: PAIR_EQ(struct pair_ldi);
#undef PAIR_EQ
        }
    default:
        return memcmp(e, tmp, t->size) == 0;
    }
}

#define GUARD 64   /* bytes after each buffer that nobody may write */
#define LARGE ((1 << 20) + 3)

typedef struct {
    const char *name;
    MPI_Comm    comm;
} comm_t;

/* One cell: returns nothing, records checks.  Every rank of comm calls it
 * with the same arguments. */
static void matrix_cell(const comm_t *cm, const tinfo_t *t, opi_t o, int count, int in_place)
{
    int r, N, rc;
    size_t bytes = (size_t)count * t->size;
    unsigned char *sb = xmalloc(bytes + GUARD), *rb = xmalloc(bytes + GUARD), *ref = NULL;
    hipress_stats_t s0, s1;
    long bad = 0, first_bad = -1;
    char cell[160];

    PMPI_Comm_rank(cm->comm, &r);
    PMPI_Comm_size(cm->comm, &N);
    snprintf(cell, sizeof(cell), "%s %s count %d %s on %s (size %d)", t->name, op_names[o], count,
             in_place ? "in place" : "out of place", cm->name, N);
    for (int k = 0; k < count; k++)
        store(t, sb + (size_t)k * t->size, gen(t, o, r, (size_t)k));
    memset(sb + bytes, 0xA5, GUARD);
    if (in_place)
        memcpy(rb, sb, bytes + GUARD);
    else
        memset(rb, 0x5A, bytes + GUARD);

    s0 = stats();
    rc = in_place ? MPI_Allreduce(MPI_IN_PLACE, rb, count, t->dt, op_handle(o), cm->comm)
                  : MPI_Allreduce(sb, rb, count, t->dt, op_handle(o), cm->comm);
    s1 = stats();

    if (t->cls == C_CHARLIKE) {
        /* not a reduction type of the standard: whatever PMPI does (an
         * error code or a result), hipress must do the same */
        unsigned char *rs = xmalloc(bytes + GUARD);
        int rc2;
        for (int k = 0; k < count; k++)
            store(t, rs + (size_t)k * t->size, gen(t, o, r, (size_t)k));
        memset(rs + bytes, 0xA5, GUARD);
        if (in_place)
            rc2 = PMPI_Allreduce(MPI_IN_PLACE, rs, count, t->dt, op_handle(o), cm->comm);
        else {
            memset(rs, 0x5A, bytes + GUARD);
            rc2 = PMPI_Allreduce(sb, rs, count, t->dt, op_handle(o), cm->comm);
        }
        EXPECT(rc == rc2, "%s: hipress returned %d, PMPI %d", cell, rc, rc2);
        if (rc == MPI_SUCCESS && rc2 == MPI_SUCCESS)
            EXPECT(memcmp(rb, rs, bytes + GUARD) == 0, "%s: result differs from PMPI's", cell);
        free(rs);
    } else {
        EXPECT(rc == MPI_SUCCESS, "%s: returned %d", cell, rc);
        for (int k = 0; k < count && rc == MPI_SUCCESS; k++) {
            val_t x = gen(t, o, 0, (size_t)k);
            for (int q = 1; q < N; q++)
                x = combine(t, o, x, gen(t, o, q, (size_t)k));
            if (!same(t, rb + (size_t)k * t->size, x) && bad++ == 0)
                first_bad = k;
        }
        EXPECT(bad == 0, "%s: %ld wrong elements, first at %ld", cell, bad, first_bad);
    }
    for (int g = 0; g < GUARD; g++)
        if (rb[bytes + g] != (in_place ? 0xA5 : 0x5A) || sb[bytes + g] != 0xA5) {
            EXPECT(0, "%s: bytes past the end of a buffer were written", cell);
            break;
        }
    if (!in_place) {
        /* sendbuf is never written */
        ref = xmalloc(bytes + 1);
        for (int k = 0; k < count; k++)
            store(t, ref + (size_t)k * t->size, gen(t, o, r, (size_t)k));
        EXPECT(memcmp(ref, sb, bytes) == 0, "%s: sendbuf was modified", cell);
        free(ref);
    }
    /* every call is counted, and compressed exactly when eligible */
    {
        int eligible = t->dt == MPI_FLOAT && o == O_SUM && N > 1 && (long)bytes >= min_bytes;
        EXPECT(s1.calls - s0.calls == 1, "%s: calls counter moved by %llu", cell, s1.calls - s0.calls);
        EXPECT(s1.compressed - s0.compressed == (unsigned long long)eligible, "%s: compressed counter moved by %llu, want %d",
               cell, s1.compressed - s0.compressed, eligible);
        EXPECT(s1.passthrough - s0.passthrough == (unsigned long long)!eligible,
               "%s: passthrough counter moved by %llu, want %d", cell, s1.passthrough - s0.passthrough, !eligible);
    }
    free(sb);
    free(rb);
}

/* Which cells also run at 2^20+3 elements: the compressed one (float sum)
 * on every communicator, and one large pass-through cell per class and op
 * family on MPI_COMM_WORLD, which keeps the whole matrix to seconds. */
static int large_cell(const tinfo_t *t, opi_t o, int is_world)
{
    static const struct { const char *type; opi_t op; } cells[] = {
        {"DOUBLE", O_SUM}, {"FLOAT", O_MAX}, {"LONG_DOUBLE", O_MIN}, {"INT", O_BAND}, {"UNSIGNED_CHAR", O_MAX},
        {"LONG_LONG", O_PROD}, {"SHORT", O_LXOR}, {"UINT64_T", O_BXOR}, {"C_BOOL", O_LOR},
        {"C_DOUBLE_COMPLEX", O_SUM}, {"FLOAT_INT", O_MAXLOC}, {"DOUBLE_INT", O_MINLOC}, {"WCHAR", O_SUM},
    };
    if (t->dt == MPI_FLOAT && o == O_SUM)
        return 1;
    if (!is_world)
        return 0;
    for (size_t k = 0; k < sizeof(cells) / sizeof(cells[0]); k++)
        if (strcmp(cells[k].type, t->name) == 0 && cells[k].op == o)
            return 1;
    return 0;
}

static void test_matrix(void)
{
    static const int counts[] = {0, 1, 7, 1000, LARGE};
    comm_t comms[3];
    MPI_Comm split, dup;

    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &split);   /* reversed order inside */
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    comms[0] = (comm_t){"MPI_COMM_WORLD", MPI_COMM_WORLD};
    comms[1] = (comm_t){"split", split};
    comms[2] = (comm_t){"dup", dup};
    for (int c = 0; c < 3; c++)
        for (int ti = 0; ti < NTYPES; ti++)
            for (int o = 0; o < O_COUNT; o++) {
                const tinfo_t *t = &types[ti];
                if (!(t->cls == C_CHARLIKE ? o < O_MAXLOC : op_applies(t->cls, (opi_t)o)))
                    continue;
                for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
                    if (counts[k] == LARGE && !large_cell(t, (opi_t)o, c == 0))
                        continue;
                    for (int ip = 0; ip < 2; ip++)
                        matrix_cell(&comms[c], t, (opi_t)o, counts[k], ip);
                }
            }
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
}

/* ================================================================= errors */

/* Erroneous calls return the code PMPI_Allreduce returns for the very same
 * call (with MPI_ERRORS_RETURN), and none is compressed. */
static void error_case(const char *what, const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op,
                       MPI_Comm comm)
{
    int rc_h = MPI_Allreduce(sb, rb, count, dt, op, comm);
    int rc_p = PMPI_Allreduce(sb, rb, count, dt, op, comm);
    int cls_h = -1, cls_p = -1;
    EXPECT(rc_p != MPI_SUCCESS, "%s: PMPI_Allreduce accepted it (the case is meant to be erroneous)", what);
    EXPECT(rc_h == rc_p, "%s: hipress returned %d, PMPI_Allreduce %d", what, rc_h, rc_p);
    PMPI_Error_class(rc_h, &cls_h);
    PMPI_Error_class(rc_p, &cls_p);
    EXPECT(cls_h == cls_p, "%s: error class %d vs %d", what, cls_h, cls_p);
}

static void test_errors(void)
{
    const int n = 1 << 18;   /* 1 MiB of floats: size-eligible for compression */
    float *a = xmalloc((size_t)n * sizeof(float)), *b = xmalloc((size_t)n * sizeof(float));
    int *ia = xmalloc((size_t)n * sizeof(int));
    MPI_Comm dup;
    MPI_Datatype uncommitted;
    hipress_stats_t s0, s1;
    char what[128];

    for (int i = 0; i < n; i++) {
        a[i] = (float)(i % 7);
        ia[i] = i % 7;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    /* a communicator compressing everything, so only the argument checks
     * stand between these calls and the compressed path */
    comm_set(dup, "HIPRESS_MIN_BYTES", "0");
    MPI_Type_contiguous(4, MPI_FLOAT, &uncommitted);

    s0 = stats();
    for (int c = 0; c < 2; c++) {
        MPI_Comm comm = c == 0 ? MPI_COMM_WORLD : dup;
        const char *cn = c == 0 ? "world" : "dup";
#define CASE(label, ...) do { snprintf(what, sizeof(what), "%s on %s", label, cn); error_case(what, __VA_ARGS__); } while (0)
        CASE("negative count (float sum)", a, b, -1, MPI_FLOAT, MPI_SUM, comm);
        CASE("negative count (int max)", ia, b, -5, MPI_INT, MPI_MAX, comm);
        CASE("negative count in place", MPI_IN_PLACE, b, -1, MPI_FLOAT, MPI_SUM, comm);
        CASE("sendbuf == recvbuf (float sum)", a, a, n, MPI_FLOAT, MPI_SUM, comm);
        CASE("sendbuf == recvbuf (int sum)", ia, ia, 10, MPI_INT, MPI_SUM, comm);
        CASE("MPI_DATATYPE_NULL", a, b, 10, MPI_DATATYPE_NULL, MPI_SUM, comm);
        CASE("MPI_DATATYPE_NULL, large", a, b, n, MPI_DATATYPE_NULL, MPI_SUM, comm);
        CASE("MPI_OP_NULL (float)", a, b, n, MPI_FLOAT, MPI_OP_NULL, comm);
        CASE("MPI_OP_NULL (int)", ia, b, 10, MPI_INT, MPI_OP_NULL, comm);
        CASE("recvbuf MPI_IN_PLACE", a, MPI_IN_PLACE, n, MPI_FLOAT, MPI_SUM, comm);
        CASE("both MPI_IN_PLACE", MPI_IN_PLACE, MPI_IN_PLACE, n, MPI_FLOAT, MPI_SUM, comm);
        CASE("MPI_BAND on float", a, b, n, MPI_FLOAT, MPI_BAND, comm);
        CASE("MPI_SUM on FLOAT_INT", a, b, 10, MPI_FLOAT_INT, MPI_SUM, comm);
        CASE("MPI_MAXLOC on float", a, b, n, MPI_FLOAT, MPI_MAXLOC, comm);
        CASE("uncommitted datatype", a, b, 10, uncommitted, MPI_SUM, comm);
#undef CASE
    }
    /* MPI_COMM_NULL has no handler of its own: MPI_COMM_WORLD's is used
     * (set to MPI_ERRORS_RETURN in main) */
    error_case("MPI_COMM_NULL (float sum)", a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL);
    error_case("MPI_COMM_NULL (int sum)", ia, b, 10, MPI_INT, MPI_SUM, MPI_COMM_NULL);
    error_case("MPI_COMM_NULL, negative count", a, b, -1, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL);
    s1 = stats();
    EXPECT(s1.compressed == s0.compressed, "erroneous calls were compressed (%llu)", s1.compressed - s0.compressed);
    EXPECT(s1.errors == s0.errors, "erroneous calls counted as failed compressed calls");
    s0 = s1;

    /* ranks that disagree on the count of one eligible call: every rank
     * gets an error of class MPI_ERR_COUNT from the per-call agreement, no
     * rank hangs and no buffer is touched past its count */
    if (wsize > 1) {
        int rc, cls = -1, cnt = n - 8 + (wrank == 0 ? 5 : 0);
        memset(b, 0x5a, (size_t)n * sizeof(float));
        rc = MPI_Allreduce(a, b, cnt, MPI_FLOAT, MPI_SUM, dup);
        if (rc != MPI_SUCCESS)
            MPI_Error_class(rc, &cls);
        EXPECT(rc != MPI_SUCCESS && cls == MPI_ERR_COUNT,
               "counts differing across ranks: returned %d (class %d), want class MPI_ERR_COUNT", rc, cls);
        {
            const unsigned char *t = (const unsigned char *)(b + cnt);
            int touched = 0;
            for (size_t i = 0; i < 3 * sizeof(float); i++)
                touched |= t[i] != 0x5a;
            EXPECT(!touched, "counts differing across ranks: recvbuf written past the count");
        }
    }
    /* the communicators still work */
    {
        int one = 1, sum = 0;
        EXPECT(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup) == MPI_SUCCESS && sum == wsize,
               "dup broken after the errors");
    }
    MPI_Type_free(&uncommitted);
    MPI_Comm_free(&dup);
    free(a);
    free(b);
    free(ia);
}

/* =================================================================== ring */

/* Is x exactly an IEEE half?  Decided from the float's own fields, without
 * any fp16 code: at most 11 significant bits, exponent in the half range
 * (subnormal halves are multiples of 2^-24). */
static int is_half(float x)
{
    if (x == 0 || isinf(x))
        return 1;
    if (isnan(x))
        return 1;
    double a = fabs((double)x);
    if (a > 65504.0)
        return 0;
    if (a < 6.103515625e-05)   /* 2^-14: subnormal halves */
        return ldexp(a, 24) == floor(ldexp(a, 24));
    int e;
    frexp(a, &e);   /* a = m * 2^e, m in [0.5, 1) */
    double scaled = ldexp(a, 11 - e);
    return scaled == floor(scaled);
}

/* Input of rank r at element i: integer-valued for `none` (exact sums),
 * multiples of 1/64 up to +-156 for fp16 (the sums need rounding). */
static float ring_input(int integer, int r, size_t i, unsigned salt)
{
    uint64_t u = mix3((uint64_t)r + 1000, i, salt);
    if (integer)
        return (float)((long long)(u % 201) - 100);
    return (float)((long long)(u % 20001) - 10000) / 64.0f;
}

/* The fp16 bound asserted per element: the ring encodes N times along a
 * chunk (the first contributor's value, each of the N-2 re-encodes of the
 * growing partial sum, and the final encode of the full sum), each rounding
 * to nearest within a relative 2^-11 of the value it encodes (plus 2^-25
 * absolute in the subnormal range); every partial sum is at most
 * A = sum |x_r| in magnitude, and each float addition adds at most 2^-24
 * relative.  Hence |result - exact| <= N (2^-11 + 2^-24) A (1 + 2^-10 N) +
 * N 2^-25. */
static double fp16_bound(double A, int N)
{
    return N * (ldexp(1, -11) + ldexp(1, -24)) * A * (1 + ldexp(1, -10) * N) + N * ldexp(1, -25);
}

/* hp_chunk_off without the internal header: chunk c of n elements in N
 * chunks starts here (the first n % N chunks are one longer). */
static size_t hp_chunk_off_(size_t n, size_t N, size_t c)
{
    return c * (n / N) + (c < n % N ? c : n % N);
}

typedef struct {
    const char *comp;
    const char *part;   /* HIPRESS_PARTITION_BYTES, "" for the default */
    int         count;
    int         in_place;
    int         bad_elem;   /* -1, or the element one rank makes non-finite */
    float       bad_value;
} ring_case_t;

static void ring_run(MPI_Comm base, const ring_case_t *rc_)
{
    const ring_case_t c = *rc_;
    const int integer = strcmp(c.comp, "none") == 0;
    MPI_Comm comm;
    int r, N, rc;
    size_t n = (size_t)c.count;
    float *in = xmalloc(n * sizeof(float) + GUARD), *out = xmalloc(n * sizeof(float) + GUARD);
    hipress_stats_t s0, s1;
    long wrong = 0, first = -1, not_half = 0;
    double worst = 0;
    char label[160];
    static unsigned salt;

    salt++;
    MPI_Comm_dup(base, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(comm, &r);
    PMPI_Comm_size(comm, &N);
    snprintf(label, sizeof(label), "ring %s count %d%s part '%s'%s on size %d", c.comp, c.count,
             c.in_place ? " in place" : "", c.part, c.bad_elem >= 0 ? (isnan(c.bad_value) ? " with NaN" : " with Inf") : "",
             N);
    comm_set(comm, "HIPRESS_COMPRESSOR", c.comp);
    comm_set(comm, "HIPRESS_ALGO", "ring");
    comm_set(comm, "HIPRESS_MIN_BYTES", "0");
    if (c.part[0])
        comm_set(comm, "HIPRESS_PARTITION_BYTES", c.part);

    for (size_t i = 0; i < n; i++)
        in[i] = ring_input(integer, r, i, salt);
    if (c.bad_elem >= 0 && r == N - 1)
        in[c.bad_elem] = c.bad_value;
    memset((char *)in + n * sizeof(float), 0xA5, GUARD);
    memcpy(out, in, n * sizeof(float) + GUARD);
    if (!c.in_place)
        memset(out, 0x5A, n * sizeof(float));

    s0 = stats();
    rc = MPI_Allreduce(c.in_place ? MPI_IN_PLACE : in, out, c.count, MPI_FLOAT, MPI_SUM, comm);
    s1 = stats();
    EXPECT(rc == MPI_SUCCESS, "%s: returned %d", label, rc);
    EXPECT(s1.compressed - s0.compressed == (N > 1), "%s: compressed counter moved by %llu", label,
           s1.compressed - s0.compressed);
    EXPECT(memcmp((char *)out + n * sizeof(float), (char *)in + n * sizeof(float), GUARD) == 0,
           "%s: wrote past the end of recvbuf", label);

    /* the result: exact (none), within the bound (fp16), never anything
     * but a half (fp16, every element comes from one decoded message) */
    size_t nan_lo = n, nan_hi = 0;
    long nnan = 0;
    for (size_t i = 0; i < n; i++) {
        double exact = 0, A = 0;
        for (int q = 0; q < N; q++) {
            float x = ring_input(integer, q, i, salt);
            exact += x;
            A += fabs(x);
        }
        if (c.bad_elem == (long)i && !isnan(out[i]))
            continue;   /* Inf carried by `none` or an uncompressed call: checked below */
        if (isnan(out[i])) {
            nnan++;
            nan_lo = i < nan_lo ? i : nan_lo;
            nan_hi = i;
            continue;
        }
        double err = fabs((double)out[i] - exact);
        double tol = integer || N == 1 ? 0 : fp16_bound(A, N);
        if (err > tol && wrong++ == 0)
            first = (long)i;
        if (tol > 0 && err / tol > worst)
            worst = err / tol;
        if (!integer && N > 1 && !is_half(out[i]))
            not_half++;
    }
    if (c.bad_elem < 0) {
        EXPECT(nnan == 0, "%s: %ld NaN elements", label, nnan);
    } else {
        /* NaN and Inf reach every rank; fp16 turns the partition holding
         * them into NaN (contract 5), and nothing outside the ring chunk
         * holding the element; `none` carries it as a value: NaN+x is NaN,
         * Inf+x is Inf */
        size_t b = (size_t)c.bad_elem;
        if (integer || N == 1) {
            EXPECT(isnan(c.bad_value) ? isnan(out[b]) : isinf(out[b]), "%s: element %zu is %g", label, b, out[b]);
            EXPECT(nnan == (isnan(c.bad_value) ? 1 : 0), "%s: %ld NaN elements, want only element %zu", label, nnan, b);
        } else {
            char *suffix;
            size_t chunk = 0, part_max = (size_t)strtol(c.part, &suffix, 10) / sizeof(float);
            if (*suffix == 'K')
                part_max *= 1024;
            while (hp_chunk_off_(n, N, chunk + 1) <= b)
                chunk++;
            EXPECT(isnan(out[b]), "%s: element %zu is %g, want NaN", label, b, out[b]);
            EXPECT(nnan > 0 && nan_hi - nan_lo + 1 == (size_t)nnan, "%s: NaN elements not one contiguous range", label);
            EXPECT(nan_lo >= hp_chunk_off_(n, N, chunk) && nan_hi < hp_chunk_off_(n, N, chunk + 1),
                   "%s: NaN range [%zu, %zu] leaves the chunk of element %zu", label, nan_lo, nan_hi, b);
            EXPECT(part_max == 0 || (size_t)nnan <= part_max, "%s: %ld NaN elements, more than a partition (%zu)",
                   label, nnan, part_max);
            unsigned long long nf = s1.nonfinite - s0.nonfinite, nf_all = 0;
            PMPI_Allreduce(&nf, &nf_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
            EXPECT(nf_all >= 1, "%s: no rank counted a non-finite partition", label);
        }
    }
    EXPECT(wrong == 0, "%s: %ld elements off by more than %s (first %ld, worst %.3g x bound)", label, wrong,
           integer ? "0" : "the fp16 bound", first, worst);
    EXPECT(not_half == 0, "%s: %ld results are not fp16 values (not decoded from one message)", label, not_half);
    EXPECT(identical(out, n * sizeof(float), comm), "%s: results differ across ranks", label);
    if (!c.in_place) {
        int ok = 1;
        for (size_t i = 0; i < n && ok; i++) {
            float x = c.bad_elem == (long)i && r == N - 1 ? c.bad_value : ring_input(integer, r, i, salt);
            ok = memcmp(&x, &in[i], sizeof(float)) == 0;
        }
        EXPECT(ok, "%s: sendbuf was modified", label);
    }
    MPI_Comm_free(&comm);
    free(in);
    free(out);
}

static void test_ring(void)
{
    static const int counts[] = {1, 2, 3, 5, 7, 1000, 65537, 1000003, LARGE};
    static const char *comps[] = {"none", "fp16"};
    for (int ci = 0; ci < 2; ci++)
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
            /* the default partitioning, and small partitions so the
             * pipeline has many in flight */
            ring_case_t c = {comps[ci], "", counts[k], (int)(k % 2), -1, 0};
            ring_run(MPI_COMM_WORLD, &c);
            if (counts[k] >= 1000 && counts[k] <= 1000003) {
                c.part = counts[k] > 100000 ? "64K" : "1K";
                c.in_place = !c.in_place;
                ring_run(MPI_COMM_WORLD, &c);
            }
        }
    /* a sub-communicator: the ring among a subset, in reversed order */
    {
        MPI_Comm split;
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &split);
        ring_case_t c = {"fp16", "", 100003, 0, -1, 0};
        ring_run(split, &c);
        c.comp = "none";
        ring_run(split, &c);
        MPI_Comm_free(&split);
    }
    /* non-finite input on one rank */
    for (int ci = 0; ci < 2; ci++) {
        ring_case_t c = {comps[ci], "16K", 100003, 0, 54321, NAN};
        ring_run(MPI_COMM_WORLD, &c);
        c.bad_value = INFINITY;
        c.bad_elem = 7;
        c.in_place = 1;
        ring_run(MPI_COMM_WORLD, &c);
    }
    /* repeated calls on one communicator reuse its state */
    {
        MPI_Comm comm;
        int ok = 1;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        comm_set(comm, "HIPRESS_COMPRESSOR", "none");
        comm_set(comm, "HIPRESS_ALGO", "ring");
        comm_set(comm, "HIPRESS_MIN_BYTES", "0");
        for (int it = 0; it < 5; it++) {
            float v[333];
            for (int i = 0; i < 333; i++)
                v[i] = (float)(wrank + it + i);
            MPI_Allreduce(MPI_IN_PLACE, v, 333, MPI_FLOAT, MPI_SUM, comm);
            for (int i = 0; i < 333; i++)
                ok &= v[i] == (float)(wsize * (it + i) + wsize * (wsize - 1) / 2);
        }
        EXPECT(ok, "repeated ring calls on one communicator give wrong sums");
        MPI_Comm_free(&comm);
    }
    /* hipress_comm_set refuses what the settings parser refuses */
    {
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        EXPECT(api_comm_set(comm, "HIPRESS_COMPRESSOR", "bogus") == HIPRESS_ERR_INVALID, "bogus compressor accepted");
        EXPECT(api_comm_set(comm, "HIPRESS_NOPE", "1") == HIPRESS_ERR_INVALID, "unknown setting accepted");
        EXPECT(api_comm_set(comm, "HIPRESS_MIN_BYTES", "-3") == HIPRESS_ERR_INVALID, "negative size accepted");
        EXPECT(api_comm_set(comm, NULL, "1") == HIPRESS_ERR_INVALID, "NULL name accepted");
        MPI_Comm_free(&comm);
    }
}

/* ================================================================= optout */

/* A float sum of 2^18+5 elements (> 1 MiB) on comm must not be compressed and
 * must equal PMPI_Allreduce's result bit for bit. */
static void optout_check(MPI_Comm comm, const char *how)
{
    const int n = (1 << 18) + 5;
    float *in = xmalloc((size_t)n * sizeof(float)), *out = xmalloc((size_t)n * sizeof(float));
    float *ref = xmalloc((size_t)n * sizeof(float));
    hipress_stats_t s0, s1;
    int r, rc;

    PMPI_Comm_rank(comm, &r);
    for (int i = 0; i < n; i++)   /* not integers: the summation order shows in the bits */
        in[i] = (float)(mix3((uint64_t)r, (uint64_t)i, 99) % 100000) * 1.3e-3f - 60.0f;
    for (int ip = 0; ip < 2; ip++) {
        s0 = stats();
        if (ip) {
            memcpy(out, in, (size_t)n * sizeof(float));
            rc = MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_FLOAT, MPI_SUM, comm);
        } else {
            rc = MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, comm);
        }
        s1 = stats();
        PMPI_Allreduce(in, ref, n, MPI_FLOAT, MPI_SUM, comm);
        EXPECT(rc == MPI_SUCCESS, "%s: returned %d", how, rc);
        EXPECT(s1.compressed == s0.compressed, "%s%s: compressed", how, ip ? " (in place)" : "");
        EXPECT(s1.passthrough == s0.passthrough + 1, "%s: not counted as passed through", how);
        EXPECT(memcmp(out, ref, (size_t)n * sizeof(float)) == 0, "%s%s: result differs from PMPI_Allreduce's", how,
               ip ? " (in place)" : "");
    }
    free(in);
    free(out);
    free(ref);
}

/* Whether one float sum of 2^18+5 elements on comm is compressed. */
static int compresses(MPI_Comm comm)
{
    const int n = (1 << 18) + 5;
    float *v = xmalloc((size_t)n * sizeof(float));
    hipress_stats_t s0, s1;
    for (int i = 0; i < n; i++)
        v[i] = 1.0f;
    s0 = stats();
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, comm);
    s1 = stats();
    EXPECT(v[0] == (float)wsize && v[n - 1] == (float)wsize, "sum of ones is %g", v[0]);
    free(v);
    return s1.compressed != s0.compressed;
}

static void test_optout(void)
{
    MPI_Comm a, b, c;
    MPI_Info info;
    int want = wsize > 1;

    /* each communicator would compress (fp16, everything eligible) but for
     * the opt-out */
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN);
    for (int k = 0; k < 2; k++) {
        MPI_Comm x = k ? b : a;
        comm_set(x, "HIPRESS_COMPRESSOR", "fp16");
        comm_set(x, "HIPRESS_ALGO", "ring");
        comm_set(x, "HIPRESS_MIN_BYTES", "0");
    }
    EXPECT(compresses(a) == want, "control: communicator a %s compressed before opting out", want ? "not" : "");

    MPI_Info_create(&info);
    MPI_Info_set(info, "hipress_compress", "false");
    EXPECT(MPI_Comm_set_info(a, info) == MPI_SUCCESS, "MPI_Comm_set_info(hipress_compress=false) failed");
    MPI_Info_free(&info);
    optout_check(a, "info hipress_compress=false");

    comm_set(b, "HIPRESS_ENABLE", "0");
    optout_check(b, "hipress_comm_set HIPRESS_ENABLE=0");
    /* and back in */
    comm_set(b, "HIPRESS_ENABLE", "1");
    EXPECT(compresses(b) == want, "HIPRESS_ENABLE=1 again: %s", want ? "not compressed" : "compressed");
    MPI_Info_create(&info);
    MPI_Info_set(info, "hipress_compress", "true");
    EXPECT(MPI_Comm_set_info(a, info) == MPI_SUCCESS, "MPI_Comm_set_info(hipress_compress=true) failed");
    MPI_Info_free(&info);
    EXPECT(compresses(a) == want, "hipress_compress=true again: %s", want ? "not compressed" : "compressed");

    /* settings through info keys reach the communicator; a bad one is an
     * MPI_ERR_INFO_VALUE and leaves the communicator as it was */
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Info_create(&info);
    MPI_Info_set(info, "hipress_min_bytes", "0");
    MPI_Info_set(info, "hipress_algo", "ring");
    EXPECT(MPI_Comm_set_info(c, info) == MPI_SUCCESS, "MPI_Comm_set_info(hipress_min_bytes=0) failed");
    MPI_Info_free(&info);
    {
        float v[100];
        hipress_stats_t s0, s1;
        for (int i = 0; i < 100; i++)
            v[i] = (float)i;
        s0 = stats();
        MPI_Allreduce(MPI_IN_PLACE, v, 100, MPI_FLOAT, MPI_SUM, c);
        s1 = stats();
        EXPECT(s1.compressed - s0.compressed == (unsigned long long)want, "info hipress_min_bytes=0 not applied");
        EXPECT(v[99] == (float)(99 * wsize), "sum after info settings: %g", v[99]);
    }
    MPI_Info_create(&info);
    MPI_Info_set(info, "hipress_compressor", "bogus");
    EXPECT(MPI_Comm_set_info(c, info) == MPI_ERR_INFO_VALUE, "hipress_compressor=bogus not refused");
    MPI_Info_free(&info);
    EXPECT(compresses(c) == want, "communicator changed by a refused info value");

    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    MPI_Comm_free(&c);
}

/* ================================================================ threads */

typedef struct {
    MPI_Comm    comm;
    const char *comp;
    int         iters;
    int         seed;
} thread_arg_t;

/* One thread: compressed float sums on its own communicator, interleaved
 * with pass-through calls (int sums, double max, small float sums). */
static void *thread_main(void *p)
{
    const thread_arg_t *a = p;
    const int integer = strcmp(a->comp, "none") == 0;
    const size_t n = 200003 + (size_t)a->seed;
    float *v = xmalloc(n * sizeof(float));
    int N, r;

    PMPI_Comm_size(a->comm, &N);
    PMPI_Comm_rank(a->comm, &r);
    for (int it = 0; it < a->iters; it++) {
        unsigned salt = 1000u * (unsigned)a->seed + (unsigned)it;
        long bad = 0;
        for (size_t i = 0; i < n; i++)
            v[i] = ring_input(integer, r, i, salt);
        int rc = MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, a->comm);
        for (size_t i = 0; i < n; i++) {
            double exact = 0, A = 0;
            for (int q = 0; q < N; q++) {
                float x = ring_input(integer, q, i, salt);
                exact += x;
                A += fabs(x);
            }
            if (fabs(v[i] - exact) > (integer || N == 1 ? 0 : fp16_bound(A, N)))
                bad++;
        }
        EXPECT(rc == MPI_SUCCESS && bad == 0, "thread %s iteration %d: rc %d, %ld wrong elements", a->comp, it, rc, bad);

        int iv[1000], is[1000];
        for (int i = 0; i < 1000; i++)
            iv[i] = r + i + it;
        rc = MPI_Allreduce(iv, is, 1000, MPI_INT, MPI_SUM, a->comm);
        bad = 0;
        for (int i = 0; i < 1000; i++)
            bad += is[i] != N * (i + it) + N * (N - 1) / 2;
        EXPECT(rc == MPI_SUCCESS && bad == 0, "thread %s iteration %d: int sum wrong", a->comp, it);

        double dv[777], dm[777];
        for (int i = 0; i < 777; i++)
            dv[i] = (double)((r * 31 + i) % 97);
        rc = MPI_Allreduce(dv, dm, 777, MPI_DOUBLE, MPI_MAX, a->comm);
        bad = 0;
        for (int i = 0; i < 777; i++) {
            double m = 0;
            for (int q = 0; q < N; q++)
                m = fmax(m, (double)((q * 31 + i) % 97));
            bad += dm[i] != m;
        }
        EXPECT(rc == MPI_SUCCESS && bad == 0, "thread %s iteration %d: double max wrong", a->comp, it);
    }
    free(v);
    return NULL;
}

static void test_threads(int provided)
{
    const int iters = 6;
    MPI_Comm c1, c2;
    pthread_t t1, t2;
    thread_arg_t a1, a2;
    hipress_stats_t s0, s1;

    EXPECT(provided == MPI_THREAD_MULTIPLE,
           "MPI_THREAD_MULTIPLE not provided (got %d): the concurrent-call test cannot run", provided);
    if (provided != MPI_THREAD_MULTIPLE)
        return;
    MPI_Comm_dup(MPI_COMM_WORLD, &c1);
    MPI_Comm_dup(MPI_COMM_WORLD, &c2);
    comm_set(c1, "HIPRESS_COMPRESSOR", "fp16");
    comm_set(c2, "HIPRESS_COMPRESSOR", "none");
    for (int k = 0; k < 2; k++) {
        comm_set(k ? c2 : c1, "HIPRESS_ALGO", "ring");
        comm_set(k ? c2 : c1, "HIPRESS_MIN_BYTES", "64K");
    }
    a1 = (thread_arg_t){c1, "fp16", iters, 1};
    a2 = (thread_arg_t){c2, "none", iters, 2};
    s0 = stats();
    if (pthread_create(&t1, NULL, thread_main, &a1) != 0 || pthread_create(&t2, NULL, thread_main, &a2) != 0) {
        EXPECT(0, "pthread_create failed");
        PMPI_Abort(MPI_COMM_WORLD, 5);
    }
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    s1 = stats();
    EXPECT(s1.compressed - s0.compressed == (unsigned long long)(wsize > 1 ? 2 * iters : 0),
           "threads: %llu compressed calls, want %d", s1.compressed - s0.compressed, wsize > 1 ? 2 * iters : 0);
    EXPECT(s1.calls - s0.calls == (unsigned long long)(6 * iters), "threads: %llu calls counted, want %d",
           s1.calls - s0.calls, 6 * iters);
    MPI_Comm_free(&c1);
    MPI_Comm_free(&c2);
}

/* =================================================================== main */

static int wanted(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int provided = 0;
    long fails_all = 0, fails;
    double t0;
    const char *mb = getenv("HIPRESS_MIN_BYTES");

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    PMPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    load_api();
    types_init();
    if (mb == NULL || (min_bytes = atol(mb)) <= 0) {
        /* the matrix predicts which cells compress from this value */
        if (wrank == 0)
            fprintf(stderr, "FAIL: run with HIPRESS_MIN_BYTES set to a plain positive byte count\n");
        PMPI_Abort(MPI_COMM_WORLD, 6);
    }

#define RUN(name, call) \
    if (wanted(argc, argv, name)) { \
        t0 = PMPI_Wtime(); \
        call; \
        PMPI_Barrier(MPI_COMM_WORLD); \
        if (wrank == 0) \
            printf("# np=%d %-8s %.1f s, %ld checks so far\n", wsize, name, PMPI_Wtime() - t0, (long)nchecks); \
        fflush(stdout); }
    RUN("matrix", test_matrix());
    RUN("errors", test_errors());
    RUN("ring", test_ring());
    RUN("optout", test_optout());
    RUN("threads", test_threads(provided));
#undef RUN

    fails = (long)nfailed;
    PMPI_Allreduce(&fails, &fails_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("mpi_suite np=%d: %ld checks on rank 0, %ld failed on all ranks\n", wsize, (long)nchecks, fails_all);
    MPI_Finalize();
    return fails_all == 0 ? 0 : 1;
}
