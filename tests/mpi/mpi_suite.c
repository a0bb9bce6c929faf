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
 *
 * This file holds the shared helpers, the error and opt-out cases and
 * main; the matrix is mpi_suite_matrix.c, the ring and the threads
 * mpi_suite_ring.c (mpi_suite.h).
 */
#include "mpi_suite.h"

int wrank, wsize;
atomic_long nchecks, nfailed;
long min_bytes;   /* HIPRESS_MIN_BYTES of the environment */

int (*api_comm_set)(MPI_Comm, const char *, const char *);
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

hipress_stats_t stats(void)
{
    hipress_stats_t s;
    memset(&s, 0, sizeof(s));
    api_stats_get(&s);
    return s;
}

void comm_set(MPI_Comm c, const char *name, const char *value)
{
    int rc = api_comm_set(c, name, value);
    EXPECT(rc == HIPRESS_OK, "hipress_comm_set(%s, %s) returned %d", name, value, rc);
}

/* SplitMix64 of (a, b, c): the inputs of every rank, reproducible anywhere. */
uint64_t mix3(uint64_t a, uint64_t b, uint64_t c)
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
int identical(const void *buf, size_t bytes, MPI_Comm comm)
{
    uint64_t h[2], out[2];
    h[0] = hash_bytes(buf, bytes);
    h[1] = ~h[0];
    PMPI_Allreduce(h, out, 2, MPI_UINT64_T, MPI_MAX, comm);
    return out[0] == ~out[1];
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", wrank, n);
        PMPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
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

void test_errors(void)
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

void test_optout(void)
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
