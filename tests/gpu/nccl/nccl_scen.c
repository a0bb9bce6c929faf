/*
 * What the programs of the NCCL scenarios share (nccl_scen.h).
 */
#define _GNU_SOURCE
#include "nccl_scen.h"
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mock_nccl.h"

int rank, size, bad;
const char *scen_prog = "nccl_scen";
void *(*dmalloc)(size_t, int);
int (*raw_write)(void *, const void *, size_t);
int (*raw_read)(void *, const void *, size_t);
unsigned long long (*count)(const char *);
int (*cu_sync)(void *);
int (*cu_ctx_sync)(void);
int (*cu_begin)(void *, int);
int (*cu_end)(void *, void **);
void (*set_current)(int);
void (*fail_alloc)(int);
int (*comm_set)(void *, const char *, const char *);
int (*mpi_comm_set)(MPI_Comm, const char *, const char *);
void (*stats_get)(hipress_stats_t *);

void syncall(void)
{
    cu_sync(SA);
    cu_sync(SB);
}

void dwrite(void *d, const void *h, size_t n)
{
    syncall();
    raw_write(d, h, n);
}

void dread(void *h, const void *d, size_t n)
{
    syncall();
    raw_read(h, d, n);
}

void *dev(size_t n)
{
    void *p = dmalloc(n * sizeof(float), 0);
    if (p == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    return p;
}

float grad_val(int r, int t, size_t i)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)(r * 131 + t * 7919);
    z ^= z >> 31;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 29;
    return (float)(0.01 * sin((double)i * 0.001 + t) + ((double)(z >> 40) / 16777216.0 - 0.5) * 0.003);
}

void fill(float *h, size_t n, int t, int salt)
{
    for (size_t i = 0; i < n; i++)
        h[i] = grad_val(rank, t * 17 + salt, i);
}

/* What hipress made the stand-in driver do: host and device-wide waits
 * and host copies. */
unsigned long long work(void)
{
    return count("syncs") + count("dev_syncs") + count("d2h") + count("h2d");
}

static const char *const settings[] = {
    "HIPRESS_COMPRESSOR", "onebit", "HIPRESS_ALGO", "ring", "HIPRESS_PARTITION_BYTES", "64K",
    "HIPRESS_HIERARCHICAL", "off", "HIPRESS_MIN_BYTES", "1K", "HIPRESS_ALLOW_PLAIN", "0", NULL,
};

ncclComm_t comm_settings(ncclComm_t c)
{
    for (int i = 0; settings[i] != NULL; i += 2)
        CHECK(comm_set(c, settings[i], settings[i + 1]) == HIPRESS_OK, "hipress_nccl_comm_set %s", settings[i]);
    return c;
}

ncclComm_t new_comm(void)
{
    return comm_settings(mock_nccl_comm_new());
}

MPI_Comm new_mpi_comm(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    for (int i = 0; settings[i] != NULL; i += 2)
        CHECK(mpi_comm_set(c, settings[i], settings[i + 1]) == HIPRESS_OK, "hipress_comm_set %s", settings[i]);
    return c;
}

int same_everywhere(const float *h, size_t n)
{
    uint64_t x = 0xcbf29ce484222325ULL, lo, hi;
    const unsigned char *b = (const unsigned char *)h;
    for (size_t i = 0; i < n * sizeof(float); i++)
        x = (x ^ b[i]) * 0x100000001b3ULL;
    MPI_Allreduce(&x, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&x, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

/* d (n floats on the device) holds want's bits, and the same everywhere. */
void same_bits(const void *d, const float *want, size_t n, const char *label)
{
    float *h = malloc(n * sizeof(float));
    size_t diff = n;
    dread(h, d, n * sizeof(float));
    for (size_t i = 0; i < n && diff == n; i++)
        if (memcmp(&h[i], &want[i], sizeof(float)) != 0 || !isfinite(h[i]))
            diff = i;
    CHECK(diff == n, "%s: [%zu] %a, want %a", label, diff, diff < n ? h[diff] : 0.0f, diff < n ? want[diff] : 0.0f);
    CHECK(same_everywhere(h, n), "%s: the results differ between ranks", label);
    free(h);
}

/* NCCL saw nothing wrong on c (a count mismatch of the stand-in: an
 * error on a GPU, or a hang). */
void nccl_ok(ncclComm_t c, const char *label)
{
    ncclResult_t st = ncclSuccess;
    syncall();
    CHECK(ncclCommGetAsyncError(c, &st) == ncclSuccess && st == ncclSuccess, "%s: the communicator's error is %d",
          label, (int)st);
}

/* One compressed call on (c, s) of d, its host and device work in *w_p. */
ncclResult_t call(ncclComm_t c, cudaStream_t s, void *d, size_t n, unsigned long long *w_p)
{
    unsigned long long w0 = work();
    ncclResult_t rc = ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c, s);
    if (w_p != NULL)
        *w_p = work() - w0;
    return rc;
}

void scen_init(int *argc, char ***argv, const char *prog)
{
    void *cu;
    scen_prog = prog;
    if (*argc < 3) {
        fprintf(stderr, "usage: %s CASE MOCKDIR/libcuda.so.1\n", prog);
        exit(2);
    }
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((cu = dlopen((*argv)[2], RTLD_NOW | RTLD_GLOBAL)) == NULL) {
        fprintf(stderr, "%s: %s\n", prog, dlerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    *(void **)&dmalloc = dlsym(cu, "mock_cuda_malloc");
    *(void **)&raw_write = dlsym(cu, "mock_cuda_write");
    *(void **)&raw_read = dlsym(cu, "mock_cuda_read");
    *(void **)&count = dlsym(cu, "mock_cuda_count");
    *(void **)&cu_sync = dlsym(cu, "cuStreamSynchronize");
    *(void **)&cu_ctx_sync = dlsym(cu, "cuCtxSynchronize");
    *(void **)&cu_begin = dlsym(cu, "cuStreamBeginCapture_v2");
    *(void **)&cu_end = dlsym(cu, "cuStreamEndCapture");
    *(void **)&set_current = dlsym(cu, "mock_cuda_set_current");
    *(void **)&fail_alloc = dlsym(cu, "mock_cuda_fail_alloc");
    *(void **)&comm_set = dlsym(RTLD_DEFAULT, "hipress_nccl_comm_set");
    *(void **)&mpi_comm_set = dlsym(RTLD_DEFAULT, "hipress_comm_set");
    *(void **)&stats_get = dlsym(RTLD_DEFAULT, "hipress_stats_get");
    if (!dmalloc || !raw_write || !raw_read || !count || !cu_sync || !cu_ctx_sync || !cu_begin || !cu_end ||
        !set_current || !fail_alloc || !comm_set || !mpi_comm_set || !stats_get) {
        fprintf(stderr, "%s: the stand-in driver or hipress is missing\n", prog);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    set_current(0);
}

int scen_end(const char *name)
{
    int all;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !all)
        printf("%s %s: ok\n", scen_prog, name);
    MPI_Finalize();
    return all ? 1 : 0;
}
