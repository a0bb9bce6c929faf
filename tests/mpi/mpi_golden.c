/*
 * Golden hashes of compressed MPI_Allreduce (tests/mpi/run_golden.sh compares
 * them with tests/mpi/golden/hashes.txt, recorded from a known-good build).
 *
 *   mpirun -np N mpi_golden [--dev MOCKDIR/libcuda.so.1] [--set NAME=VALUE]...
 *
 * One process run per rank count loops over the cases: every compressor
 * (the built-ins and the plugin example_int8, loaded with HIPRESS_PLUGIN)
 * x every fixed algorithm (powersgd runs its own exchanges: one case) x
 * HIPRESS_ISA generic and avx2 x three shapes (HIPRESS_PARTITION_BYTES 64K
 * with 100003 and 2^18 + 7 floats, 16K with 100003), on host buffers (path
 * `cpu`) and, with --dev, on device buffers of the stand-in CUDA driver run
 * by the emulated CUDA module (path `dev`, ISA generic only: the device
 * kernels have no ISA).  Everything that shapes a plan is fixed per
 * communicator (algorithm, partition size, no hierarchy, no plain sends,
 * MIN_BYTES 0), so no measurement enters it.  The data of a case do not
 * depend on its path or ISA: as every path gives the same bits, the lines
 * of one case on cpu/generic, cpu/avx2 and dev hold the same hash.
 *
 * Each case gets a fresh communicator and fresh buffers (no residual state
 * carried between cases) and makes 3 calls on the same buffer with new
 * deterministic gradient-like input each time (calls 0 and 2 in place,
 * call 1 from a separate send buffer).  After each call the result and this
 * rank's residual (hipress_comm_residual) are hashed; every rank must hold
 * the same result, every call must have been compressed (hipress_stats_get)
 * under a compressed plan (hipress_comm_plan), else the program fails.
 * Rank 0 prints one line per case:
 *   golden <path> <isa> np=<N> <comp> <algo> part=<bytes> n=<count> <hash>
 * where hash combines the 3 results and every rank's 3 residual hashes.
 * Then ps with a sum codec for its owners (HIPRESS_SUM_CODEC, `<algo>` reads
 * "ps sum=<codec>"), and the q codecs' stochastic rounding
 * (HIPRESS_Q_ROUNDING=stochastic: q4 ring, q2 ps, onebit ps with sum codec
 * q2; "<algo> [sum=<codec>] stochastic"); every other case rounds to nearest.
 * --set NAME=VALUE is applied to every case's communicator after the
 * case's own settings (a perturbation for checking that the test can fail).
 * Rank 0 ends with "golden-done cases=C dev_calls=D"; exit 1 on failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipress.h"

#define CALLS 3
#define MAX_SETS 16

static int rank, nranks, bad;
static long dev_calls;

static void *(*dmalloc)(size_t, int);
static void (*dfree)(void *);
static int (*dwrite)(void *, const void *, size_t);
static int (*dread)(void *, const void *, size_t);

static const char *set_name[MAX_SETS], *set_value[MAX_SETS];
static int nsets;

#define FAIL(...) \
    do { fprintf(stderr, "mpi_golden rank %d: FAIL ", rank); fprintf(stderr, __VA_ARGS__); \
         fputc('\n', stderr); bad = 1; } while (0)

static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z;
}

/* A 64-bit hash of the bytes (whole 8-byte words, then the tail). */
static uint64_t hash_bytes(const void *p, size_t n, uint64_t h)
{
    const unsigned char *c = p;
    size_t i = 0;
    h ^= mix64(n + 0x9E3779B97F4A7C15ULL);
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, c + i, 8);
        h = (h ^ mix64(w + i)) * 0x100000001B3ULL;
        h = (h << 29) | (h >> 35);
    }
    for (; i < n; i++)
        h = (h ^ c[i]) * 0x100000001B3ULL;
    return mix64(h);
}

/* Gradient-like input of rank r, call t, case k (a hash of the case's
 * label, so adding a case changes no other case's data): deterministic,
 * from integer arithmetic alone (no libm: the same values everywhere). */
static float input(int r, int t, uint64_t k, size_t i)
{
    uint64_t z = mix64((uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)r * 0xD1B54A32D192ED03ULL +
                       (uint64_t)t * 0x8CB92BA72F3D8DD7ULL + k);
    /* a smooth part (a triangle wave, shared by all ranks) and noise; a few
     * large values so that the sparse compressors' top-k means something */
    int64_t w = (int64_t)((i + (size_t)t * 1237 + (size_t)(k & 0xFFF)) % 8192) - 4096;
    float v = (float)((w < 0 ? -w : w) - 2048) * (0.004f / 2048.0f) +
              (float)(int32_t)(uint32_t)(z >> 32) * (0.003f / 2147483648.0f);
    if ((z & 0x3FF) == 7)
        v *= 40.0f;
    return v;
}

static int set(MPI_Comm c, const char *name, const char *value)
{
    int rc = hipress_comm_set(c, name, value);
    if (rc != HIPRESS_OK)
        FAIL("hipress_comm_set(%s, %s): %s", name, value, hipress_status_string(rc));
    return rc;
}

/* HIPRESS_Q_ROUNDING of the cases (the q codecs, and q as a sum codec) */
static const char *q_rounding = "nearest";

static MPI_Comm configured(const char *comp, const char *algo, const char *sum, const char *isa, const char *part)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    set(c, "HIPRESS_COMPRESSOR", comp);
    set(c, "HIPRESS_ALGO", algo);
    set(c, "HIPRESS_SUM_CODEC", sum);
    set(c, "HIPRESS_PARTITION_BYTES", part);
    set(c, "HIPRESS_ISA", isa);
    set(c, "HIPRESS_MIN_BYTES", "0");
    set(c, "HIPRESS_HIERARCHICAL", "off");
    set(c, "HIPRESS_ALLOW_PLAIN", "0");
    set(c, "HIPRESS_EF_LAYOUT", "detect");
    /* compressor parameters: several blocks per partition, sparse
     * selections of a few hundred elements, dgc's momentum and warm-up
     * within the 3 calls */
    set(c, "HIPRESS_ONEBIT_BLOCK", "1024");
    set(c, "HIPRESS_TBQ_BLOCK", "1024");
    set(c, "HIPRESS_FP16_BLOCK", "1024");
    set(c, "HIPRESS_TERNGRAD_BLOCK", "1024");
    set(c, "HIPRESS_SPARSE_RATIO", "0.01");
    set(c, "HIPRESS_SPARSE_BLOCK", "4096");
    set(c, "HIPRESS_DGC_MOMENTUM", "0.5");
    set(c, "HIPRESS_DGC_WARMUP", "2");
    set(c, "HIPRESS_POWERSGD_RANK", "4");
    set(c, "HIPRESS_Q_ROUNDING", q_rounding);
    for (int i = 0; i < nsets; i++)
        set(c, set_name[i], set_value[i]);
    return c;
}

/* One case: 3 calls on one buffer of n floats; returns the case hash
 * (meaningful on rank 0). */
static uint64_t run_case(uint64_t k, int dev, const char *comp, const char *algo, const char *sum,
                         const char *isa, const char *part, size_t n, const char *label)
{
    MPI_Comm c = configured(comp, algo, sum, isa, part);
    const size_t bytes = n * sizeof(float);
    float *h = malloc(bytes), *hs = malloc(bytes), *res = malloc(bytes);
    void *d = NULL, *ds = NULL;
    uint64_t mine[2 * CALLS], *all = NULL, hash = 0;

    if (h == NULL || hs == NULL || res == NULL) {
        fprintf(stderr, "mpi_golden rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (dev) {
        d = dmalloc(bytes, 0);
        ds = dmalloc(bytes, 0);
        if (d == NULL || ds == NULL) {
            fprintf(stderr, "mpi_golden rank %d: no device memory\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (int t = 0; t < CALLS; t++) {
        const int in_place = t != 1;
        float *src = in_place ? h : hs;
        hipress_stats_t s0, s1;
        int rc;

        for (size_t i = 0; i < n; i++)
            src[i] = input(rank, t, k, i);
        hipress_stats_get(&s0);
        if (dev) {
            void *dsrc = in_place ? d : ds;
            if (dwrite(dsrc, src, bytes) != 0)
                FAIL("%s: writing device memory", label);
            rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : ds, d, (int)n, MPI_FLOAT, MPI_SUM, c);
            if (dread(h, d, bytes) != 0)
                FAIL("%s: reading device memory", label);
            dev_calls++;
        } else {
            rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : hs, h, (int)n, MPI_FLOAT, MPI_SUM, c);
        }
        hipress_stats_get(&s1);
        if (rc != MPI_SUCCESS)
            FAIL("%s call %d: rc %d", label, t, rc);
        if (s1.calls != s0.calls + 1 || s1.compressed != s0.compressed + 1 || s1.errors != s0.errors)
            FAIL("%s call %d: not compressed (calls +%llu, compressed +%llu, errors +%llu)", label, t,
                 s1.calls - s0.calls, s1.compressed - s0.compressed, s1.errors - s0.errors);
        if (hipress_comm_residual(c, dev ? d : (void *)h, n, res) != HIPRESS_OK)
            FAIL("%s call %d: hipress_comm_residual failed", label, t);
        mine[2 * t] = hash_bytes(h, bytes, 1);
        mine[2 * t + 1] = hash_bytes(res, bytes, 2);
    }
    {
        char plan[128] = "";
        hipress_comm_plan(c, bytes, plan, sizeof(plan));
        if (strcmp(plan, "plain") == 0 || strcmp(plan, "none") == 0 || strcmp(plan, "exploring") == 0 ||
            plan[0] == '\0')
            FAIL("%s: plan '%s' is not a compressed one", label, plan);
        if (strcmp(comp, "powersgd") == 0 ? strncmp(plan, "collective", 10) != 0
                                          : strncmp(plan, algo, strlen(algo)) != 0 || plan[strlen(algo)] != ' ')
            FAIL("%s: plan '%s' is not the one set", label, plan);
        if (strcmp(sum, "same") != 0 && strcmp(sum, comp) != 0) {
            /* an owner stage in the sum codec shows in the plan */
            char want[32];
            snprintf(want, sizeof(want), ", sum %s", sum);
            if (strstr(plan, want) == NULL)
                FAIL("%s: plan '%s' does not name the sum codec %s", label, plan, sum);
        }
    }
    if (rank == 0)
        all = malloc(sizeof(mine) * (size_t)nranks);
    PMPI_Gather(mine, 2 * CALLS, MPI_UINT64_T, all, 2 * CALLS, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 1; r < nranks; r++)
            for (int t = 0; t < CALLS; t++)
                if (all[2 * CALLS * r + 2 * t] != all[2 * t])
                    FAIL("%s call %d: rank %d's result differs from rank 0's", label, t, r);
        hash = 0x243F6A8885A308D3ULL;
        for (int t = 0; t < CALLS; t++)
            hash = hash_bytes(&all[2 * t], 8, hash);
        for (int r = 0; r < nranks; r++)
            for (int t = 0; t < CALLS; t++)
                hash = hash_bytes(&all[2 * CALLS * r + 2 * t + 1], 8, hash);
        free(all);
    }
    MPI_Comm_free(&c);
    if (dev) {
        dfree(d);
        dfree(ds);
    }
    free(h);
    free(hs);
    free(res);
    return hash;
}

/* One case and its golden line "golden <path> <isa> np=N <comp> <what>
 * part=P n=C <hash>" (rank 0 prints it).  The data depend on the case but
 * not on the path or the ISA, which must give the same bits. */
static void golden_case(int dev, const char *isa, const char *comp, const char *what, const char *algo,
                        const char *sum, const char *part, size_t n)
{
    char label[160];
    uint64_t hash;
    int at = snprintf(label, sizeof(label), "%s %s ", dev ? "dev" : "cpu", isa);
    snprintf(label + at, sizeof(label) - (size_t)at, "np=%d %s %s part=%s n=%zu", nranks, comp, what, part, n);
    hash = run_case(hash_bytes(label + at, strlen(label + at), 3), dev, comp, algo, sum, isa, part, n, label);
    if (rank == 0)
        printf("golden %s %016llx\n", label, (unsigned long long)hash);
}

int main(int argc, char **argv)
{
    static const char *const comps[] = {"none", "fp16", "bf16", "onebit", "tbq", "terngrad",
                                        "graddrop", "dgc", "example_int8", "powersgd", "q2", "q4", "q8"};
    static const char *const algos[] = {"ring", "tree", "ps", "allgather"};
    static const char *const isas[] = {"generic", "avx2"};
    static const struct { const char *comp, *sum; } sums[] = {
        {"onebit", "q4"}, {"onebit", "q2"}, {"onebit", "q8"}, {"onebit", "fp16"}, {"onebit", "none"},
        {"tbq", "q4"}, {"terngrad", "q2"}, {"dgc", "q4"}, {"fp16", "bf16"}};
    static const struct { const char *comp, *algo, *sum; } stoch[] = {
        {"q4", "ring", "same"}, {"q2", "ps", "same"}, {"onebit", "ps", "q2"}};
    /* (partition bytes, floats): sizes divisible by nothing useful, every
     * algorithm cutting the buffer (ring and ps: each rank's chunk of it)
     * into 2 to 65 partitions at 2 to 5 ranks */
    static const struct { const char *part; size_t n; } shapes[] = {
        {"64K", 100003}, {"64K", (1u << 18) + 7}, {"16K", 100003}};
    const char *libcuda = NULL;
    int ncases = 0, all_bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dev") == 0 && i + 1 < argc) {
            libcuda = argv[++i];
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc && nsets < MAX_SETS &&
                   strchr(argv[i + 1], '=') != NULL) {
            char *kv = argv[++i], *eq = strchr(kv, '=');
            *eq = '\0';
            set_name[nsets] = kv;
            set_value[nsets++] = eq + 1;
        } else {
            fprintf(stderr, "usage: mpi_golden [--dev MOCKDIR/libcuda.so.1] [--set NAME=VALUE]...\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (size_t c = 0; c < sizeof(comps) / sizeof(comps[0]); c++)
        if (hipress_compressor_find(comps[c]) == NULL) {
            fprintf(stderr, "mpi_golden: compressor %s is not registered (HIPRESS_PLUGIN=plugin_example.so?)\n",
                    comps[c]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    if (libcuda != NULL) {
        void *lh = dlopen(libcuda, RTLD_NOW | RTLD_LOCAL);
        if (lh != NULL) {
            dmalloc = (void *(*)(size_t, int))dlsym(lh, "mock_cuda_malloc");
            dfree = (void (*)(void *))dlsym(lh, "mock_cuda_free");
            dwrite = (int (*)(void *, const void *, size_t))dlsym(lh, "mock_cuda_write");
            dread = (int (*)(void *, const void *, size_t))dlsym(lh, "mock_cuda_read");
        }
        if (lh == NULL || !dmalloc || !dfree || !dwrite || !dread) {
            fprintf(stderr, "mpi_golden: %s: not the stand-in driver (%s)\n", libcuda, lh ? "" : dlerror());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (int dev = 0; dev <= (libcuda != NULL); dev++)
        for (size_t c = 0; c < sizeof(comps) / sizeof(comps[0]); c++) {
            /* powersgd runs its own exchanges whatever the algorithm: one case */
            const int collective = strcmp(comps[c], "powersgd") == 0;
            for (size_t a = 0; a < (collective ? 1 : sizeof(algos) / sizeof(algos[0])); a++)
                for (size_t i = 0; i < (dev ? 1 : sizeof(isas) / sizeof(isas[0])); i++)
                    for (size_t p = 0; p < sizeof(shapes) / sizeof(shapes[0]); p++, ncases++)
                        golden_case(dev, isas[i], comps[c], collective ? "own" : algos[a],
                                    collective ? "ring" : algos[a], "same", shapes[p].part, shapes[p].n);
        }
    /* ps with a sum codec for its owners' stage (HIPRESS_SUM_CODEC): the
     * cases above run with `same`, the wire format before sum codecs */
    for (int dev = 0; dev <= (libcuda != NULL); dev++)
        for (size_t c = 0; c < sizeof(sums) / sizeof(sums[0]); c++)
            for (size_t i = 0; i < (dev ? 1 : sizeof(isas) / sizeof(isas[0])); i++)
                for (size_t p = 0; p < sizeof(shapes) / sizeof(shapes[0]); p++, ncases++) {
                    char what[32];
                    snprintf(what, sizeof(what), "ps sum=%s", sums[c].sum);
                    golden_case(dev, isas[i], sums[c].comp, what, "ps", sums[c].sum, shapes[p].part, shapes[p].n);
                }
    /* the q codecs' stochastic rounding (the counter generator), as a
     * compressor and as ps's sum codec */
    q_rounding = "stochastic";
    for (int dev = 0; dev <= (libcuda != NULL); dev++)
        for (size_t c = 0; c < sizeof(stoch) / sizeof(stoch[0]); c++)
            for (size_t i = 0; i < (dev ? 1 : sizeof(isas) / sizeof(isas[0])); i++)
                for (size_t p = 0; p < sizeof(shapes) / sizeof(shapes[0]); p++, ncases++) {
                    char what[48];
                    snprintf(what, sizeof(what), "%s%s%s stochastic", stoch[c].algo,
                             strcmp(stoch[c].sum, "same") ? " sum=" : "", strcmp(stoch[c].sum, "same") ? stoch[c].sum : "");
                    golden_case(dev, isas[i], stoch[c].comp, what, stoch[c].algo, stoch[c].sum, shapes[p].part,
                                shapes[p].n);
                }
    q_rounding = "nearest";
    PMPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("golden-done cases=%d dev_calls=%ld%s\n", ncases, dev_calls, all_bad ? " FAILED" : "");
        fflush(stdout);
    }
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
