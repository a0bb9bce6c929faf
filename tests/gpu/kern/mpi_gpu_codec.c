/*
 * Compressed MPI_Allreduce on (stand-in) device buffers against the same
 * calls on host buffers, under the preloaded libhipress.so with the
 * emulated CUDA module (tests/gpu/emu/run_gpu_emu.sh; no GPU needed), and, built
 * with HP_REAL_CUDA as tests/gpu/kern/mpi_cuda_codec, on cudaMalloc'd memory of a
 * real GPU (tests/gpu/kern/run_gpu_codec.sh; ranks share device rank % devices).
 *
 *   mpi_gpu_codec MOCKDIR/libcuda.so.1
 *   mpi_cuda_codec
 *
 * For every compressor and algorithm, two communicators with the same
 * settings (a fixed plan, so both partition alike) get the same sequence of
 * calls, one on host buffers and one on device memory of the stand-in
 * driver (a crash on any host access).  After every call the results must
 * be the same bits, and so must the residuals each rank holds for the two
 * buffers (hipress_comm_residual): the device path encodes the CPU's bytes,
 * keeps the residual on the device and decodes to the CPU's bits.  Calls
 * with NaN in the input, and a call whose first message is corrupted (it
 * must fail on every rank, on both paths), are part of the sequence, and
 * so are calls whose sum overflows float32 from finite inputs (every rank
 * 3e38 in a few elements: a relay sends them as message exceptions, those
 * elements alone are +Inf on every rank, the rest finite; on the device the
 * encoder's NaN/Inf goes back to the CPU's hp_msg_except on a host copy and
 * the messages with exceptions decode through the CPU's decoder).
 * Rank 0 prints "mpi_gpu_codec: ok, N device calls" or the program exits 1.
 *
 *   mpi_gpu_codec MOCKDIR/libcuda.so.1 hang SECONDS
 *
 * runs a few compressed calls on device buffers while the stand-in
 * driver's streams of one rank never complete (MOCK_CUDA_HANG): every call
 * must fail on every rank (an error, or NaN in the result) within SECONDS,
 * none may hang; rank 0 prints "mpi_gpu_codec: hang: ok, N calls failed on
 * every rank in T s".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HP_REAL_CUDA
#define PROG "mpi_cuda_codec"
#else
#define PROG "mpi_gpu_codec"
#endif

static int rank, size, bad, ndev;
#ifdef HP_REAL_CUDA
static int ndev_real = 1;
#endif

static int (*comm_residual)(MPI_Comm, const void *, size_t, float *);
/* the stand-in driver's counters (tests/gpu/standins/mock_cuda.c), NULL on a GPU */
static unsigned long long (*mock_count)(const char *);

#ifdef HP_REAL_CUDA
#include <cuda_runtime.h>
static void *dmalloc(size_t n, int dev)
{
    void *p = NULL;
    (void)dev;
    return cudaMalloc(&p, n) == cudaSuccess ? p : NULL;
}
static void dfree(void *p) { cudaFree(p); }
static int dwrite(void *d, const void *h, size_t n)
{
    return cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}
static int dread(void *h, const void *d, size_t n)
{
    return cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}
#define DIO_MISSING 0
#else
#define DIO_MISSING (!dmalloc || !dfree || !dwrite || !dread)
static void *(*dmalloc)(size_t, int);
static void (*dfree)(void *);
static int (*dwrite)(void *, const void *, size_t);
static int (*dread)(void *, const void *, size_t);
#endif

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "rank %d: ", rank); fprintf(stderr, __VA_ARGS__); \
                        fprintf(stderr, "\n"); bad = 1; } } while (0)

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* gradient-like values of rank r, call t */
static float val(int r, int t, size_t i)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)(r * 131 + t * 7919);
    z ^= z >> 31;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 29;
    return (float)(0.01 * sin((double)i * 0.001 + t) + ((double)(z >> 40) / 16777216.0 - 0.5) * 0.003);
}

static MPI_Comm make_comm(const char *const *kv)
{
    MPI_Comm c;
    MPI_Info info;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Info_create(&info);
    for (int i = 0; kv[i] != NULL; i += 2)
        MPI_Info_set(info, kv[i], kv[i + 1]);
    CHECK(MPI_Comm_set_info(c, info) == MPI_SUCCESS, "MPI_Comm_set_info");
    MPI_Info_free(&info);
    return c;
}

/* The same calls on host and device buffers of n floats; call ovf_call
 * has 3e38 in elements [ovf_at, ovf_at + ovf_len) on every rank. */
static void run_ovf(const char *label, const char *const *kv, size_t n, int calls, int nan_call, int in_place,
                    int ovf_call, size_t ovf_at, size_t ovf_len)
{
    MPI_Comm ch = make_comm(kv), cd = make_comm(kv);
    float *h = malloc(n * sizeof(float)), *hs = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    float *rh = malloc(n * sizeof(float)), *rd = malloc(n * sizeof(float));
    void *d = dmalloc(n * sizeof(float), 0), *ds = dmalloc(n * sizeof(float), 0);

    if (h == NULL || hs == NULL || back == NULL || rh == NULL || rd == NULL || d == NULL || ds == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int t = 0; t < calls; t++) {
        int rch, rcd, ok;
        size_t diff = n;
        for (size_t i = 0; i < n; i++)
            (in_place ? h : hs)[i] = val(rank, t, i);
        if (t == nan_call && rank == size - 1)
            (in_place ? h : hs)[n / 3] = NAN;
        if (t == ovf_call)
            for (size_t i = ovf_at; i < ovf_at + ovf_len; i++)
                (in_place ? h : hs)[i] = 3e38f;
        dwrite(in_place ? d : ds, in_place ? h : hs, n * sizeof(float));
        rch = MPI_Allreduce(in_place ? MPI_IN_PLACE : hs, h, (int)n, MPI_FLOAT, MPI_SUM, ch);
        rcd = MPI_Allreduce(in_place ? MPI_IN_PLACE : ds, d, (int)n, MPI_FLOAT, MPI_SUM, cd);
        ndev++;
        CHECK(rch == MPI_SUCCESS && rcd == MPI_SUCCESS, "%s call %d: host rc %d, device rc %d", label, t, rch, rcd);
        dread(back, d, n * sizeof(float));
        for (size_t i = 0; i < n && diff == n; i++)
            if (bits(h[i]) != bits(back[i]))
                diff = i;
        CHECK(diff == n, "%s n=%zu call %d: result[%zu] host %a device %a", label, n, t, diff, h[diff],
              back[diff]);
        if (t == ovf_call) {
            /* as MPI_Allreduce: +Inf where the sum overflowed, finite elsewhere */
            size_t wrong = n;
            for (size_t i = 0; i < n && wrong == n; i++)
                if ((i >= ovf_at && i < ovf_at + ovf_len) ? !(back[i] == INFINITY) : !isfinite(back[i]))
                    wrong = i;
            CHECK(wrong == n, "%s n=%zu call %d (overflow at %zu..%zu): device result[%zu] = %g", label, n, t,
                  ovf_at, ovf_at + ovf_len - 1, wrong, back[wrong]);
        }
        ok = comm_residual(ch, h, n, rh) == 0 && comm_residual(cd, d, n, rd) == 0;
        CHECK(ok, "%s: hipress_comm_residual failed", label);
        diff = n;
        for (size_t i = 0; ok && i < n && diff == n; i++)
            if (bits(rh[i]) != bits(rd[i]))
                diff = i;
        CHECK(diff == n, "%s n=%zu call %d: residual[%zu] host %a device %a", label, n, t, diff, rh[diff],
              rd[diff]);
    }
    MPI_Comm_free(&ch);
    MPI_Comm_free(&cd);
    dfree(d);
    dfree(ds);
    free(h);
    free(hs);
    free(back);
    free(rh);
    free(rd);
}

static void run(const char *label, const char *const *kv, size_t n, int calls, int nan_call, int in_place)
{
    run_ovf(label, kv, n, calls, nan_call, in_place, -1, 0, 0);
}

/* Sums that overflow float32 from finite inputs, at a relay of ring, tree
 * and ps: fp16 (device kernels: 3e38 scales into binary16 with e = -112,
 * the sum of two overflows to +Inf, which the device encoder reports so
 * the CPU's hp_msg_except sends it as an exception), onebit (device kernels: one
 * whole block of 32 at 3e38, so the decoded sum of two is +Inf in 32
 * elements, within HP_MSG_MAX_EXCEPT) and graddrop (device kernels: the
 * one element is selected and sent exactly; the sum is +Inf) and q4
 * (device kernels: an input of 3e38 >= 2^126 makes the message non-finite
 * with its residual untouched, and the CPU's hp_msg_except sends the
 * element exactly).  The next call checks what the exceptions left in the
 * residuals. */
static void overflow(void)
{
    static const char *const comps[] = {"fp16", "onebit", "graddrop", "q4"};
    static const char *const algos[] = {"ring", "tree", "ps"};
    for (size_t c = 0; c < sizeof(comps) / sizeof(comps[0]); c++)
        for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
            char label[64];
            const char *kv[] = {"hipress_compressor", comps[c], "hipress_algo", algos[a],
                                "hipress_partition_bytes", "16K", "hipress_hierarchical", "off",
                                "hipress_min_bytes", "1K", "hipress_sparse_ratio", "0.01",
                                "hipress_onebit_block", "32", "hipress_sparse_block", "4096", NULL};
            const int onebit = c == 1;
            snprintf(label, sizeof(label), "overflow/%s/%s", comps[c], algos[a]);
            run_ovf(label, kv, 40003, 2, -1, (int)a % 2, 0, onebit ? 32 * 411 : 12345, onebit ? 32 : 1);
        }
}

/* A corrupted first message: the call fails on every rank, on both paths,
 * and the next call works. */
static void corrupt(void)
{
    static const char *const kv[] = {"hipress_compressor", "onebit", "hipress_algo", "ring",
                                     "hipress_partition_bytes", "16K", "hipress_hierarchical", "off",
                                     "hipress_min_bytes", "1K", "hipress_test_corrupt", "0", NULL};
    const size_t n = 50000;
    MPI_Comm ch = make_comm(kv), cd = make_comm(kv);
    float *h = malloc(n * sizeof(float));
    void *d = dmalloc(n * sizeof(float), 0);
    int rch, rcd;
    for (size_t i = 0; i < n; i++)
        h[i] = val(rank, 0, i);
    dwrite(d, h, n * sizeof(float));
    rch = MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, ch);
    rcd = MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_FLOAT, MPI_SUM, cd);
    ndev++;
    CHECK(rch != MPI_SUCCESS && rcd != MPI_SUCCESS, "corrupted message: host rc %d, device rc %d (both must fail)",
          rch, rcd);
    MPI_Comm_free(&ch);
    MPI_Comm_free(&cd);
    free(h);
    dfree(d);
}

/* Compressed calls from a thread that then exits: its page-locked message
 * memory is freed at its exit, in the context it was allocated in (the
 * stand-in driver refuses cuMemFreeHost in another; the main checks
 * count it). */
static void *thread_calls(void *arg)
{
    static const char *const kv[] = {"hipress_compressor", "onebit", "hipress_algo", "ring",
                                     "hipress_partition_bytes", "16K", "hipress_hierarchical", "off",
                                     "hipress_min_bytes", "1K", NULL};
    (void)arg;
#ifdef HP_REAL_CUDA
    cudaSetDevice(rank % ndev_real);
#endif
    run("onebit/ring/thread", kv, 40003, 2, -1, 1);
    return NULL;
}

#ifndef HP_REAL_CUDA
/* Compressed calls whose device work never completes on some rank. */
static int hang_test(double limit)
{
    static const char *const kv[] = {"hipress_compressor", "onebit", "hipress_algo", "ring",
                                     "hipress_partition_bytes", "16K", "hipress_hierarchical", "off",
                                     "hipress_min_bytes", "1K", NULL};
    const size_t n = 40003;
    const int calls = 3;
    MPI_Comm cd = make_comm(kv);
    float *h = malloc(n * sizeof(float));
    void *d = dmalloc(n * sizeof(float), 0);
    int failed_all = 1, all_bad = 0;
    double t0 = MPI_Wtime(), t;
    if (h == NULL || d == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int c = 0; c < calls; c++) {
        int rc, failed, nan = 0, all;
        for (size_t i = 0; i < n; i++)
            h[i] = val(rank, c, i);
        dwrite(d, h, n * sizeof(float));
        rc = MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_FLOAT, MPI_SUM, cd);
        dread(h, d, n * sizeof(float));
        for (size_t i = 0; i < n && !nan; i++)
            nan = isnan(h[i]);
        failed = rc != MPI_SUCCESS || nan;
        PMPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        CHECK(failed, "call %d: rc %d and no NaN while a rank's device work never completes", c, rc);
        failed_all &= all;
    }
    t = MPI_Wtime() - t0;
    CHECK(t <= limit, "%d calls took %.1f s, more than %.1f s", calls, t, limit);
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !all_bad && failed_all)
        printf("%s: hang: ok, %d calls failed on every rank in %.1f s\n", PROG, calls, t);
    MPI_Comm_free(&cd);
    free(h);
    MPI_Finalize();
    return all_bad || !failed_all ? 1 : 0;
}
#endif

int main(int argc, char **argv)
{
    static const char *const comps[] = {"none", "onebit", "tbq", "terngrad", "graddrop", "dgc", "fp16", "bf16",
                                        "q2", "q4", "q8"};
    static const char *const algos[] = {"ring", "ps", "tree", "allgather"};
    int all_bad = 0, provided = MPI_THREAD_SINGLE;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifdef HP_REAL_CUDA
    {
        int ndevs = 0;
        (void)argv;
        if (cudaGetDeviceCount(&ndevs) != cudaSuccess || ndevs < 1 || cudaSetDevice(rank % ndevs) != cudaSuccess) {
            fprintf(stderr, "rank %d: no CUDA device\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        ndev_real = ndevs;
    }
#else
    {
        void *h;
        if (argc < 2 || (h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL) {
            fprintf(stderr, "usage: mpi_gpu_codec MOCKDIR/libcuda.so.1 (%s)\n", dlerror());
            MPI_Abort(MPI_COMM_WORLD, 2);
            return 2;
        }
        dmalloc = (void *(*)(size_t, int))dlsym(h, "mock_cuda_malloc");
        dfree = (void (*)(void *))dlsym(h, "mock_cuda_free");
        dwrite = (int (*)(void *, const void *, size_t))dlsym(h, "mock_cuda_write");
        dread = (int (*)(void *, const void *, size_t))dlsym(h, "mock_cuda_read");
        mock_count = (unsigned long long (*)(const char *))dlsym(h, "mock_cuda_count");
    }
#endif
    comm_residual = (int (*)(MPI_Comm, const void *, size_t, float *))dlsym(RTLD_DEFAULT, "hipress_comm_residual");
    if (DIO_MISSING || !comm_residual) {
        fprintf(stderr, "rank %d: no stand-in driver or no preloaded libhipress\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
#ifndef HP_REAL_CUDA
    if (argc > 3 && strcmp(argv[2], "hang") == 0)
        return hang_test(atof(argv[3]));
#endif
    /* HP_TEST_PLUGIN_COMP: a plugin compressor (HIPRESS_PLUGIN) too, which
     * has no device kernels: its ranges are encoded on host copies */
    const char *plugin = getenv("HP_TEST_PLUGIN_COMP");
    const size_t ncomps = sizeof(comps) / sizeof(comps[0]) + (plugin != NULL && *plugin != '\0');
    for (size_t c = 0; c < ncomps; c++)
        for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
            char label[64];
            const char *comp = c < sizeof(comps) / sizeof(comps[0]) ? comps[c] : plugin;
            const char *kv[] = {"hipress_compressor", comp, "hipress_algo", algos[a],
                                "hipress_partition_bytes", a == 0 ? "16K" : "64K", "hipress_hierarchical", "off",
                                "hipress_min_bytes", "1K", "hipress_sparse_ratio", "0.01",
                                "hipress_onebit_block", "1024", "hipress_sparse_block", "4096",
                                "hipress_dgc_momentum", "0.5", "hipress_dgc_warmup", "3", NULL};
            snprintf(label, sizeof(label), "%s/%s", comp, algos[a]);
            run(label, kv, 40003, 4, 2, a % 2);
            if (a == 0)
                run(label, kv, 4099, 2, -1, 1);
        }
    /* the q codecs' stochastic rounding (the counter generator on the
     * device), and ps re-encoding its owners' sums with a q codec
     * (HIPRESS_SUM_CODEC: hp_call_encode_sum on the device's kernels) in
     * both roundings */
    for (size_t c = 0; c < 2; c++)
        for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
            char label[64];
            const char *kv[] = {"hipress_compressor", c == 0 ? "q2" : "q8", "hipress_algo", algos[a],
                                "hipress_partition_bytes", "16K", "hipress_hierarchical", "off",
                                "hipress_min_bytes", "1K", "hipress_q_rounding", "stochastic",
                                "hipress_q_block", a % 2 ? "32" : "1024", NULL};
            snprintf(label, sizeof(label), "%s-stochastic/%s", kv[1], algos[a]);
            run(label, kv, 40003, 3, 1, (int)a % 2);
        }
    for (size_t c = 0; c < 4; c++) {
        char label[64];
        const char *kv[] = {"hipress_compressor", c < 2 ? "onebit" : "terngrad", "hipress_algo", "ps",
                            "hipress_sum_codec", c % 2 ? "q2" : "q4", "hipress_partition_bytes", "64K",
                            "hipress_hierarchical", "off", "hipress_min_bytes", "1K", "hipress_allow_plain", "0",
                            "hipress_q_rounding", c == 1 ? "stochastic" : "nearest", "hipress_onebit_block", "1024",
                            NULL};
        snprintf(label, sizeof(label), "%s/ps/sum=%s/%s", kv[1], kv[5], kv[15]);
        run(label, kv, 40003, 3, 2, (int)c % 2);
    }
    {
        const char *kv[] = {"hipress_compressor", "powersgd", "hipress_hierarchical", "off", "hipress_allow_plain", "0",
                            "hipress_min_bytes", "1K", NULL};
        run("powersgd", kv, 40003, 4, 2, 1);
        kv[7] = "0";   /* hipress_min_bytes: 30 floats, too few to factor: sent plain */
        run("powersgd/plain", kv, 30, 3, 1, 1);
    }
    overflow();
    corrupt();
    if (provided >= MPI_THREAD_SERIALIZED) {
        /* the main thread waits in pthread_join: the calls are serialised */
        pthread_t t;
        CHECK(pthread_create(&t, NULL, thread_calls, NULL) == 0 && pthread_join(t, NULL) == 0, "a thread's calls");
    } else if (rank == 0) {
        printf("# MPI_THREAD_SERIALIZED not provided: no calls from a thread\n");
    }
    if (mock_count != NULL) {
        /* no call path waits for, or queues on, the application's default
         * streams; pinned memory is freed in its context; every queued
         * entry has run once the calls returned */
        CHECK(mock_count("legacy") == 0 && mock_count("per_thread") == 0,
              "%llu driver calls on the legacy default stream, %llu on the per-thread one", mock_count("legacy"),
              mock_count("per_thread"));
        CHECK(mock_count("bad_free_host") == 0, "pinned memory freed outside its context");
        CHECK(mock_count("pending") == 0, "%llu stream entries still queued after the calls returned",
              mock_count("pending"));
    }
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !all_bad && mock_count != NULL)
        printf("%s: ok, %d device calls; rank 0: %llu host synchronisations, %llu d2h copies (%llu bytes), %llu h2d "
               "(%llu bytes), %llu kernels\n", PROG, ndev, mock_count("syncs"), mock_count("d2h"),
               mock_count("d2h_bytes"), mock_count("h2d"), mock_count("h2d_bytes"), mock_count("hostfn"));
    else if (rank == 0 && !all_bad)
        printf("%s: ok, %d device calls\n", PROG, ndev);
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
