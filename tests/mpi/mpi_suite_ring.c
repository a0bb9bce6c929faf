/*
 * mpi_suite (mpi_suite.c): the compressed ring -- `none` exact, `fp16`
 * within its rounding bound and bit-identical on every rank, NaN and Inf
 * propagate -- and two threads calling it on two communicators under
 * MPI_THREAD_MULTIPLE.
 */
#include "mpi_suite.h"

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
         * them into NaN (contract 5, doc/dev/contracts.md), and nothing outside the ring chunk
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

void test_ring(void)
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

void test_threads(int provided)
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
