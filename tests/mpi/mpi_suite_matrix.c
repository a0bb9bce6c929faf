/*
 * mpi_suite (mpi_suite.c): the pass-through matrix -- every basic datatype
 * x every predefined op that applies x counts 0, 1, 7, 1000 (2^20+3 for a
 * subset) x in place / out of place x MPI_COMM_WORLD, a split and a dup,
 * against values each rank computes on its own; eligible cells (float sums
 * of >= HIPRESS_MIN_BYTES) are compressed with `none` and must still be
 * exact.
 */
#include "mpi_suite.h"

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

void types_init(void)
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

void test_matrix(void)
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
