/*
 * CaSync under mpirun: every algorithm x compressor x awkward size is
 * bit-identical on all ranks, exact for `none` on integer-valued floats and
 * within the compressor's documented bound otherwise; hierarchical mode;
 * sub-communicators and interleaved calls; fp16/bf16 keep finite sums beyond
 * the half-precision range finite (range); plans agree across ranks that
 * measure different speeds; an injected bad message fails the call on every
 * rank without a hang; memory stays bounded over thousands of calls.
 *
 *   mpirun -np N mpi_algos [matrix] [comms] [plan] [fail] [hier] [range] [sum] [volume] [staging]
 *                          [unbiased CALLS] [memory CALLS]
 * Prints "mpi_algos np=N: P passed, F failed" on rank 0; exit 1 on failure.
 *
 * This file holds the shared helpers and main; the cases are in
 * mpi_algos_cases.c and mpi_algos_volume.c (mpi_algos.h).
 */
#include "mpi_algos.h"

int rank, nranks, passed, failed;

/* The documented test bounds on relative L2 error of one allreduce of
 * gradient-like data (doc/algorithms.md, doc/compressors.md). */
static double bound_for(const char *comp, int N)
{
    if (strcmp(comp, "fp16") == 0)
        return 4e-3 * N;          /* 2^-11 per rounding, N roundings at most */
    if (strcmp(comp, "bf16") == 0)
        return 3e-2 * N;          /* 2^-8 per rounding */
    if (strcmp(comp, "terngrad") == 0)
        return 2.0 * N;           /* unbiased, variance grows with the range */
    /* the q codecs: half a step of a block's range per encode, L = 3, 15, 255 */
    if (strcmp(comp, "q8") == 0)
        return 0.02 * N;
    if (strcmp(comp, "q4") == 0)
        return 0.25 * N;
    /* biased compressors (onebit, tbq, graddrop, dgc): each encode loses at
     * most the energy of its input, whose elements are at most the sums of
     * the inputs' magnitudes (biased_scale); one call may lose all of it,
     * error feedback returns it later */
    return 1.0 * N + 1.0;
}

/* The biased compressors' bound is relative to the norm of the elements'
 * sums of magnitudes (sum over ranks of |g|), not of the sum itself, which
 * cancellation can make arbitrarily small (one element, two ranks of
 * opposite signs). */
static int biased_scale(const char *comp)
{
    return strcmp(comp, "onebit") == 0 || strcmp(comp, "tbq") == 0 || strcmp(comp, "q2") == 0 ||
           strcmp(comp, "graddrop") == 0 || strcmp(comp, "dgc") == 0;
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) { h ^= c[i]; h *= 1099511628211ULL; }
    return h;
}

/* 1 when every rank holds the same bytes. */
int identical(const void *buf, size_t bytes, MPI_Comm comm)
{
    uint64_t h[2], out[2];
    h[0] = hash_bytes(buf, bytes);
    h[1] = ~h[0];
    PMPI_Allreduce(h, out, 2, MPI_UINT64_T, MPI_MAX, comm);
    return out[0] == ~out[1];
}

/* Input of rank r: integer-valued (exact sums) or gradient-like. */
float input(int r, size_t i, int integer)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)(r + 1) * 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 31; z *= 0x94D049BB133111EBULL; z ^= z >> 29;
    if (integer)
        return (float)((int)(z % 17) - 8);
    return (float)((double)(z >> 11) / 9007199254740992.0 - 0.5) * 0.01f + 0.002f * sinf((float)i * 0.01f);
}

MPI_Comm configured(MPI_Comm base, const char *comp, const char *algo, const char *part)
{
    MPI_Comm c;
    MPI_Comm_dup(base, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    if (hipress_comm_set(c, "HIPRESS_COMPRESSOR", comp) != HIPRESS_OK ||
        hipress_comm_set(c, "HIPRESS_ALGO", algo) != HIPRESS_OK ||
        hipress_comm_set(c, "HIPRESS_MIN_BYTES", "0") != HIPRESS_OK ||
        hipress_comm_set(c, "HIPRESS_PARTITION_BYTES", part) != HIPRESS_OK)
        fprintf(stderr, "rank %d: hipress_comm_set(%s, %s, %s) failed\n", rank, comp, algo, part);
    return c;
}

/* One allreduce on comm c, checked. */
void check_call(MPI_Comm c, const char *comp, const char *label, size_t n, int in_place)
{
    int r, N, integer = strcmp(comp, "none") == 0;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    double num = 0, den = 0, den_abs = 0, rel;
    int rc, bad = 0;

    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &N);
    for (size_t i = 0; i < n; i++)
        in[i] = input(r, i, integer);
    if (in_place) {
        memcpy(out, in, n * sizeof(float));
        rc = MPI_Allreduce(MPI_IN_PLACE, out, (int)n, MPI_FLOAT, MPI_SUM, c);
    } else {
        rc = MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, c);
    }
    EXPECT(rc == MPI_SUCCESS, "%s n=%zu: rc %d", label, n, rc);
    for (size_t i = 0; i < n; i++) {
        double e = 0, a = 0;
        for (int j = 0; j < N; j++) {
            e += input(j, i, integer);
            a += fabs(input(j, i, integer));
        }
        if (integer && (double)out[i] != e)
            bad++;
        num += ((double)out[i] - e) * ((double)out[i] - e);
        den += e * e;
        den_abs += a * a;
    }
    if (biased_scale(comp))
        den = den_abs;
    rel = den > 0 ? sqrt(num / den) : sqrt(num);
    EXPECT(identical(out, n * sizeof(float), c), "%s n=%zu: ranks differ", label, n);
    if (integer)
        EXPECT(bad == 0, "%s n=%zu: %d elements differ from the exact sum", label, n, bad);
    else
        EXPECT(isfinite(rel) && rel <= bound_for(comp, N), "%s n=%zu: relative error %.3g > %.3g", label, n,
               rel, bound_for(comp, N));
    free(in);
    free(out);
}

/* The fixed algorithms, then auto: the library's four, and the test build's
 * extra rows named in HP_TEST_ALGOS (tests/mpi/run_tables.sh: "star"), so the
 * same cases run any algorithm of the table. */
const char *algos[MAX_ALGOS + 1];
size_t nfixed, nalgos;

static void init_algos(void)
{
    static const char *base[] = {"ring", "ps", "tree", "allgather"};
    static char extra[256];
    const char *e = getenv("HP_TEST_ALGOS");
    for (size_t i = 0; i < 4; i++)
        algos[nfixed++] = base[i];
    if (e != NULL) {
        snprintf(extra, sizeof(extra), "%s", e);
        for (char *t = strtok(extra, " ,"); t != NULL && nfixed < MAX_ALGOS; t = strtok(NULL, " ,"))
            algos[nfixed++] = t;
    }
    algos[nfixed] = "auto";
    nalgos = nfixed + 1;
}

int main(int argc, char **argv)
{
    int all_failed = 0;
    MPI_Init(&argc, &argv);
    init_algos();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "matrix") == 0) test_matrix();
        else if (strcmp(argv[i], "comms") == 0) test_comms();
        else if (strcmp(argv[i], "plan") == 0) test_plan();
        else if (strcmp(argv[i], "fail") == 0) test_fail();
        else if (strcmp(argv[i], "hier") == 0) test_hier();
        else if (strcmp(argv[i], "range") == 0) test_range();
        else if (strcmp(argv[i], "sum") == 0) test_sum();
        else if (strcmp(argv[i], "volume") == 0) test_volume();
        else if (strcmp(argv[i], "staging") == 0) test_staging();
        else if (strcmp(argv[i], "unbiased") == 0 && i + 1 < argc) test_unbiased(atoi(argv[++i]));
        else if (strcmp(argv[i], "memory") == 0 && i + 1 < argc) test_memory(atoi(argv[++i]));
        else { fprintf(stderr, "mpi_algos: unknown test '%s'\n", argv[i]); failed++; }
    }
    PMPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_algos np=%d: %d passed, %d failed\n", nranks, passed, all_failed);
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
