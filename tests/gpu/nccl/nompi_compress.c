/*
 * Multi-rank compressed ncclAllReduce under the NCCL-only library
 * (libhipress_nccl.so) with no MPI anywhere: one process of a torchrun-like
 * job (tests/gpu/nccl/nompi_launch.c gives RANK, LOCAL_RANK, WORLD_SIZE and HP_RDZV,
 * a directory the processes share), linked to the stand-in NCCL built
 * without MPI, whose MOCK_NCCL_SHM=1 transport moves the data between the
 * processes through shared memory (tests/gpu/standins/mock_nccl_shm.c), on the stand-in
 * driver's device memory with the emulated CUDA module
 * (tests/gpu/nccl/run_nompi.sh, 2 to 4 processes).
 *
 *   nompi_compress MOCKDIR/libcuda.so.1
 *
 * As a torchrun user does: the process makes its device current
 * (LOCAL_RANK), rank 0 makes an ncclUniqueId and passes it to the others
 * (through HP_RDZV, as torchrun's store), every rank calls
 * ncclCommInitRank.  One communicator per case, the compressor and
 * HIPRESS_ALGO fixed on it (hipress_nccl_comm_set); per case four device
 * buffers, float32 and float16, ncclSum and ncclAvg, each reduced in place
 * a few calls in a row; two cases on non-blocking communicators
 * (ncclCommInitRankConfig with blocking = 0: the stand-in answers
 * ncclInProgress and moves the data when ncclCommGetAsyncError is polled
 * out), where nothing of hipress' may be left in progress at return.  After every call, with data each rank can compute
 * for every rank (so it computes the exact sum itself, in double):
 *   - the result is the same bits on every rank (a hash of it compared
 *     through files in HP_RDZV, not through the stand-in);
 *   - it is compressed: the stand-in got byte ncclSend/ncclRecv of the
 *     call and no float ncclAllReduce of the user's buffer;
 *   - lossless: fp16 on values on the fp16 grid (multiples of 1/4, few
 *     ranks) gives the exact sum bits, and ncclAvg the float division by N
 *     of it (a float16 call: that rounded to float16);
 *   - fp16 on gradient-like values: every element within the encodes'
 *     bound, (N + 1) 2^-10 of the sum of the |values| plus 2^-20 of the
 *     largest (each encode rounds to 11 bits relative to its block);
 *   - error feedback (onebit, tbq, q4, q8): conservation, the sum of the
 *     results (N times it for ncclAvg) plus every rank's residual
 *     (hipress_nccl_comm_residual, summed through files) is the sum of the
 *     inputs, within float rounding (and float16's rounding of each result
 *     for a float16 call), and the results are not zero.
 * The process maps no libmpi, libopen-pal or libhwloc.  NOMPI_COMPRESS_DIE=R
 * (the dead peer's test): rank R exits before its first call; an
 * ncclAllReduce that returns NCCL's own failure (ncclSystemError,
 * ncclInternalError, ncclInvalidUsage: the transport broke) ends the
 * process (exit 1), any other error is a failed check.
 * Rank 0 prints "nompi_compress: ok, C compressed calls, S of them with no
 * host synchronisation"; any failure exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#define HIPRESS_NO_MPI
#include <hipress.h>
#ifdef MPI_VERSION
#error "hipress.h included <mpi.h> under HIPRESS_NO_MPI"
#endif
#include <math.h>
#include <nccl.h>
#include "mock_nccl.h"
#include "hp_elem.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *(*dmalloc)(size_t, int);
static int (*dwrite)(void *, const void *, size_t);
static int (*dread)(void *, const void *, size_t);
static void (*set_current)(int);
static unsigned long long (*mock_count)(const char *);
static int (*stream_sync)(void *);
static int (*comm_set)(void *, const char *, const char *);
static int (*comm_residual)(void *, const void *, size_t, float *);

static int rank, size, local_rank, bad, compressed, no_sync;
static const char *rdzv;
static int die_rank = -1;   /* NOMPI_COMPRESS_DIE: that rank exits before its first call */

#define STREAM ((cudaStream_t)0x5150)
#define N_ELEM ((size_t)40000)   /* above HIPRESS_MIN_BYTES (run_nompi.sh sets 16K) as float16 */
#define T_CALLS 3

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "nompi_compress rank %d:%d: ", rank, __LINE__); \
                        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); bad = 1; } } while (0)

static void die(const char *what)
{
    fprintf(stderr, "nompi_compress rank %d: %s\n", rank, what);
    exit(1);
}

/* ----------------------------------------- exchange through HP_RDZV */

/* Every rank's `bytes` of `mine` into all[0..size*bytes), through files
 * (written whole, then renamed): at most HP_RDZV_TIMEOUT seconds (60) for
 * the others. */
static void xchg(const void *mine, size_t bytes, void *all)
{
    static unsigned seq;
    char path[4096], tmp[4096];
    FILE *f;
    struct timespec ts = {0, 2000000};
    time_t t0 = time(NULL);
    const char *tl = getenv("HP_RDZV_TIMEOUT");
    int limit = tl != NULL && atoi(tl) > 0 ? atoi(tl) : 60;

    seq++;
    snprintf(tmp, sizeof(tmp), "%s/.x%u.%d", rdzv, seq, rank);
    snprintf(path, sizeof(path), "%s/x%u.%d", rdzv, seq, rank);
    if ((f = fopen(tmp, "wb")) == NULL || fwrite(mine, 1, bytes, f) != bytes || fclose(f) != 0 ||
        rename(tmp, path) != 0)
        die("cannot write to HP_RDZV");
    for (int j = 0; j < size; j++) {
        size_t got = 0;
        snprintf(path, sizeof(path), "%s/x%u.%d", rdzv, seq, j);
        while ((f = fopen(path, "rb")) == NULL) {
            if (time(NULL) - t0 > limit) {
                fprintf(stderr, "nompi_compress rank %d: rank %d wrote nothing to HP_RDZV in %d s\n", rank, j, limit);
                exit(1);
            }
            nanosleep(&ts, NULL);
        }
        got = fread((char *)all + (size_t)j * bytes, 1, bytes, f);
        fclose(f);
        if (got != bytes)
            die("a short file in HP_RDZV");
    }
    /* every rank has read the exchange before the last (it wrote this one) */
    if (seq > 2) {
        snprintf(path, sizeof(path), "%s/x%u.%d", rdzv, seq - 2, rank);
        unlink(path);
    }
}

static uint64_t hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static int same_everywhere(const void *p, size_t n)
{
    uint64_t h = hash(p, n), *all = malloc((size_t)size * sizeof(uint64_t));
    int same = 1;
    xchg(&h, sizeof(h), all);
    for (int j = 0; j < size; j++)
        same &= all[j] == h;
    free(all);
    return same;
}

/* A communicator of every rank, as torchrun's users make one; a
 * non-blocking one (nb) with ncclCommInitRankConfig, polled out. */
static ncclComm_t new_comm(int nb)
{
    ncclUniqueId id, *all = malloc((size_t)size * sizeof(id));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclComm_t c = NULL;
    ncclResult_t rc;
    time_t t0 = time(NULL);
    memset(&id, 0, sizeof(id));
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        die("ncclGetUniqueId");
    xchg(&id, sizeof(id), all);
    cfg.blocking = 0;
    rc = nb ? ncclCommInitRankConfig(&c, size, all[0], rank, &cfg) : ncclCommInitRank(&c, size, all[0], rank);
    free(all);
    if (nb && rc != ncclInProgress)
        die("a non-blocking ncclCommInitRankConfig did not answer ncclInProgress");
    while (nb && rc == ncclInProgress && time(NULL) - t0 < 60)
        if (ncclCommGetAsyncError(c, &rc) != ncclSuccess)
            die("ncclCommGetAsyncError");
    if (rc != ncclSuccess)
        die("ncclCommInitRank failed");
    return c;
}

/* No MPI in the process (tests/gpu/nccl/run_nompi.sh hides it; this says so). */
static void no_libmpi(void)
{
    char line[4096];
    FILE *f = fopen("/proc/self/maps", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        CHECK(strstr(line, "libmpi") == NULL && strstr(line, "libopen-pal") == NULL &&
                  strstr(line, "libhwloc") == NULL, "MPI or hwloc is mapped: %s", line);
    if (f != NULL)
        fclose(f);
}

/* ------------------------------------------------------------- data */

/* values fp16 holds exactly (multiples of 1/4, |v| <= 6 (r + 1)) */
static float exact_val(int r, int t, size_t i)
{
    return (float)((r + 1) * ((int)((i + 3 * (size_t)t) % 13) - 6)) * 0.25f;
}

static float grad_val(int r, int t, size_t i)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)(r * 131 + t * 7919);
    z ^= z >> 31;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 29;
    return (float)(0.01 * sin((double)i * 0.001 + t) + ((double)(z >> 40) / 16777216.0 - 0.5) * 0.003);
}

/* rank r's input of call t as the user's datatype holds it */
static float input(int exact, int half, int r, int t, size_t i)
{
    float v = exact ? exact_val(r, t, i) : grad_val(r, t, i);
    return half ? hp_f16_to_f32(hp_f32_to_f16(v)) : v;
}

/* ------------------------------------------------------------ cases */

typedef struct {
    const char *comp, *algo;
    int         ef;      /* error feedback: conservation */
    int         exact;   /* lossless: the exact bits */
    int         nb;      /* on a non-blocking communicator */
} case_t;

static int calls_since(int from, const char *fn, int dt)
{
    int k = 0;
    for (int i = from; i < mock_nccl_ncalls(); i++)
        k += strcmp(mock_nccl_call(i)->fn, fn) == 0 && (dt < 0 || mock_nccl_call(i)->datatype == dt);
    return k;
}

/* One buffer of the case: T_CALLS in-place calls of datatype half ? float16
 * : float32 with op avg ? ncclAvg : ncclSum, checked. */
static void run_buffer(const case_t *k, ncclComm_t c, int half, int avg)
{
    const size_t n = N_ELEM, es = half ? 2 : 4;
    void *d = dmalloc(n * es, local_rank), *h = malloc(n * es), *back = malloc(n * es);
    float *res = malloc(n * sizeof(float)), *all = malloc((size_t)size * n * sizeof(float));
    double *in_sum = calloc(n, sizeof(double)), *out_sum = calloc(n, sizeof(double)), *tol = calloc(n, sizeof(double));
    double worst = 0.0, ol1 = 0.0, wr = 0.0;
    size_t wi = 0;
    char label[96];
    int bad0 = bad;   /* (this buffer's failures are its own line's) */

    bad = 0;

    if (d == NULL || h == NULL || back == NULL || res == NULL || all == NULL || in_sum == NULL || out_sum == NULL ||
        tol == NULL)
        die("no memory");
    for (int t = 0; t < T_CALLS; t++) {
        int from = mock_nccl_ncalls();
        unsigned long long syncs;
        ncclResult_t rc;
        size_t diff = n;

        snprintf(label, sizeof(label), "%s/%s%s %s %s call %d", k->comp, k->algo, k->nb ? " non-blocking" : "",
                 half ? "float16" : "float32", avg ? "avg" : "sum", t);
        for (size_t i = 0; i < n; i++) {
            float v = input(k->exact, half, rank, t, i);
            if (half)
                ((uint16_t *)h)[i] = hp_f32_to_f16(v);
            else
                ((float *)h)[i] = v;
        }
        dwrite(d, h, n * es);
        syncs = mock_count("syncs");
        rc = ncclAllReduce(d, d, n, half ? ncclFloat16 : ncclFloat32, avg ? ncclAvg : ncclSum, c, STREAM);
        if (mock_count("syncs") == syncs)
            no_sync++;
        CHECK(rc == ncclSuccess, "%s: ncclAllReduce returned %d (%s)", label, (int)rc, ncclGetErrorString(rc));
        if (rc == ncclSystemError || rc == ncclInternalError || rc == ncclInvalidUsage) {
            /* NCCL's own failure (the stand-in's transport): nothing more
             * can move; exit as a torchrun worker raises, and the others'
             * waits end by themselves */
            fprintf(stderr, "nompi_compress rank %d: %s: NCCL failed, exiting\n", rank, label);
            exit(1);
        }
        CHECK(mock_nccl_pending(c) == 0, "%s: an operation of hipress' left in progress", label);
        stream_sync(STREAM);   /* as the user waits for the stream before reading */
        dread(back, d, n * es);
        compressed++;
        CHECK(calls_since(from, "ncclSend", ncclUint8) > 0 && calls_since(from, "ncclRecv", ncclUint8) > 0 &&
                  calls_since(from, "ncclAllReduce", ncclFloat32) == 0 &&
                  calls_since(from, "ncclAllReduce", ncclFloat16) == 0,
              "%s: not compressed (%d byte sends, %d float32 allreduces)", label,
              calls_since(from, "ncclSend", ncclUint8), calls_since(from, "ncclAllReduce", ncclFloat32));
        CHECK(same_everywhere(back, n * es), "%s: the results differ between ranks", label);
        for (size_t i = 0; i < n; i++) {
            double s = 0.0, sa = 0.0, mx = 0.0;
            float got = half ? hp_f16_to_f32(((uint16_t *)back)[i]) : ((float *)back)[i];
            for (int j = 0; j < size; j++) {
                double v = input(k->exact, half, j, t, i);
                s += v;
                sa += fabs(v);
                mx = fabs(v) > mx ? fabs(v) : mx;
            }
            in_sum[i] += s;
            out_sum[i] += avg ? (double)size * got : got;
            ol1 += isfinite(got) ? fabs(got) : 0.0;
            /* conservation's rounding: each call's float sum and division,
             * and a float16 result's rounding */
            tol[i] += 4e-7 * size * (sa + 0.02) + (half ? ldexp(fabs(got) * (avg ? size : 1), -11) + 1e-7 : 0.0);
            if (!isfinite(got)) {
                CHECK(0, "%s: [%zu] = %g, not finite", label, i, got);
                break;
            }
            if (k->exact) {
                float want = avg ? (float)s / (float)size : (float)s;
                if (half)
                    want = hp_f16_to_f32(hp_f32_to_f16(want));
                if (hp_f2u(got) != hp_f2u(want) && diff == n)
                    diff = i;
            } else if (!k->ef) {
                double e = fabs((avg ? (double)size * got : got) - s);
                double b = (size + 1) * ldexp(sa, -10) + ldexp(mx * size, -20) + (half ? ldexp(fabs(s), -10) : 0);
                if (e > b && diff == n) {
                    diff = i;
                    CHECK(0, "%s: [%zu] = %.9g, the exact sum %.9g: off by %.3g, bound %.3g", label, i, got, s, e, b);
                }
            }
        }
        if (k->exact)
            CHECK(diff == n, "%s: [%zu] is not the exact %s", label, diff, avg ? "average" : "sum");
    }
    CHECK(ol1 > 0.0, "%s/%s: no result is finite and not zero", k->comp, k->algo);
    if (k->ef) {
        CHECK(comm_residual(c, d, n, res) == HIPRESS_OK, "%s/%s: hipress_nccl_comm_residual", k->comp, k->algo);
        xchg(res, n * sizeof(float), all);
        for (size_t i = 0; i < n; i++) {
            double r = 0.0, e;
            for (int j = 0; j < size; j++)
                r += all[(size_t)j * n + i];
            e = fabs(out_sum[i] + r - in_sum[i]);
            if (e > tol[i] && e - tol[i] > worst) {
                worst = e - tol[i];
                wi = i;
                wr = r;
            }
        }
        CHECK(worst == 0.0,
              "%s/%s %s %s: conservation at [%zu]: results %.9g + residuals %.9g, inputs %.9g (bound %.3g)", k->comp,
              k->algo, half ? "float16" : "float32", avg ? "avg" : "sum", wi, out_sum[wi], wr, in_sum[wi], tol[wi]);
    }
    if (rank == 0)
        printf("# %s/%s%s %s %s: %s\n", k->comp, k->algo, k->nb ? " non-blocking" : "",
               half ? "float16" : "float32", avg ? "avg" : "sum", bad ? "FAILED" : k->exact ? "exact" : k->ef ? "conserved" : "within the bound");
    bad |= bad0;
    free(h); free(back); free(res); free(all); free(in_sum); free(out_sum); free(tol);
}

static void run_case(const case_t *k)
{
    ncclComm_t c = new_comm(k->nb);
    int cnt = 0;
    CHECK(ncclCommCount(c, &cnt) == ncclSuccess && cnt == size, "ncclCommCount %d, want %d", cnt, size);
    CHECK(comm_set(c, "HIPRESS_COMPRESSOR", k->comp) == HIPRESS_OK &&
              comm_set(c, "HIPRESS_ALGO", k->algo) == HIPRESS_OK,
          "hipress_nccl_comm_set %s, %s", k->comp, k->algo);
    if (die_rank == rank) {
        fprintf(stderr, "nompi_compress rank %d: exits now (NOMPI_COMPRESS_DIE)\n", rank);
        _exit(3);
    }
    if (strcmp(k->comp, "tbq") == 0)   /* (at its default tbq sends next to nothing of these values) */
        CHECK(comm_set(c, "HIPRESS_TBQ_SCALE", "1") == HIPRESS_OK, "comm_set HIPRESS_TBQ_SCALE");
    for (int b = 0; b < 4; b++)
        run_buffer(k, c, b >= 2, b % 2);
    CHECK(ncclCommDestroy(c) == ncclSuccess, "ncclCommDestroy");
}

int main(int argc, char **argv)
{
    static const case_t cases[] = {
        {"fp16", "ring", 0, 1, 0},     {"fp16", "tree", 0, 1, 0},   {"fp16", "ps", 0, 1, 0},
        {"fp16", "allgather", 0, 1, 0}, {"fp16", "ring", 0, 0, 0},  {"onebit", "ring", 1, 0, 0},
        {"onebit", "ps", 1, 0, 0},     {"tbq", "allgather", 1, 0, 0}, {"q4", "tree", 1, 0, 0},
        {"q8", "ring", 1, 0, 0},
        /* non-blocking communicators (ncclInProgress polled out by hipress) */
        {"fp16", "ring", 0, 1, 1},  {"onebit", "ps", 1, 0, 1},
    };
    const char *(*library)(void);
    const char *e;
    void *cu;

    e = getenv("RANK");
    rank = e != NULL ? atoi(e) : -1;
    e = getenv("WORLD_SIZE");
    size = e != NULL ? atoi(e) : 0;
    e = getenv("LOCAL_RANK");
    local_rank = e != NULL ? atoi(e) : rank;
    rdzv = getenv("HP_RDZV");
    if (argc < 2 || rank < 0 || size < 1 || rank >= size || rdzv == NULL) {
        fprintf(stderr, "usage: nompi_launch NP TIMEOUT nompi_compress MOCKDIR/libcuda.so.1 (RANK, WORLD_SIZE, "
                        "HP_RDZV from the launcher)\n");
        return 2;
    }
    cu = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (cu == NULL)
        die(dlerror());
    *(void **)&dmalloc = dlsym(cu, "mock_cuda_malloc");
    *(void **)&dwrite = dlsym(cu, "mock_cuda_write");
    *(void **)&dread = dlsym(cu, "mock_cuda_read");
    *(void **)&set_current = dlsym(cu, "mock_cuda_set_current");
    *(void **)&mock_count = dlsym(cu, "mock_cuda_count");
    *(void **)&stream_sync = dlsym(cu, "cuStreamSynchronize");
    *(void **)&comm_set = dlsym(RTLD_DEFAULT, "hipress_nccl_comm_set");
    *(void **)&comm_residual = dlsym(RTLD_DEFAULT, "hipress_nccl_comm_residual");
    *(void **)&library = dlsym(RTLD_DEFAULT, "hipress_library");
    if (dmalloc == NULL || dwrite == NULL || dread == NULL || set_current == NULL || mock_count == NULL ||
        stream_sync == NULL)
        die("not the stand-in driver");
    if (comm_set == NULL || comm_residual == NULL || library == NULL || strcmp(library(), "libhipress_nccl") != 0)
        die("libhipress_nccl.so is not preloaded");
    set_current(local_rank);   /* cudaSetDevice(LOCAL_RANK) */
    e = getenv("NOMPI_COMPRESS_DIE");
    die_rank = e != NULL && *e ? atoi(e) : -1;
    no_libmpi();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i]);
    if (rank == 0 && !bad)
        printf("nompi_compress: ok, %d compressed calls, %d of them with no host synchronisation\n", compressed,
               no_sync);
    return bad ? 1 : 0;
}
