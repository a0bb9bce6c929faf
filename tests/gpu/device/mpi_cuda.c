/*
 * The GPU path on a real GPU (tests/gpu/device/run_gpu_device.sh; skipped without
 * one): MPI collectives on cudaMalloc'd memory under the preloaded
 * libhipress.so, with Debian's Open MPI, which is not CUDA-aware.
 *
 *   mpi_cuda     every rank uses device (rank % number of devices)
 *
 * Before any CUDA call, host collectives run and libcuda must not be
 * mapped.  Then float sums (one large enough to be compressed were it host
 * memory, one in place), an int max, a broadcast and an allgatherv run on
 * device buffers; every result is copied back and checked exactly.  Rank 0
 * prints "mpi_cuda: ok, N calls on device buffers".
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, bad;

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "rank %d: ", rank); fprintf(stderr, __VA_ARGS__); \
                        fprintf(stderr, "\n"); bad = 1; } } while (0)
#define CUDA(call) \
    do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

static float val(int r, size_t i)
{
    return (float)((int)((i * 5 + (size_t)r * 11) % 13) - 6);
}

static int maps_contain(const char *what)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        found |= strstr(line, what) != NULL;
    if (f != NULL)
        fclose(f);
    return found;
}

static void float_sum(size_t n, int in_place)
{
    float *h = malloc(n * sizeof(float)), *s = NULL, *r = NULL;
    for (size_t i = 0; i < n; i++)
        h[i] = val(rank, i);
    CUDA(cudaMalloc((void **)&r, n * sizeof(float)));
    CUDA(cudaMemcpy(r, h, n * sizeof(float), cudaMemcpyHostToDevice));
    if (!in_place) {
        CUDA(cudaMalloc((void **)&s, n * sizeof(float)));
        CUDA(cudaMemcpy(s, h, n * sizeof(float), cudaMemcpyHostToDevice));
    }
    CHECK(MPI_Allreduce(in_place ? MPI_IN_PLACE : s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
          "allreduce");
    CUDA(cudaMemcpy(h, r, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        float e = 0;
        for (int q = 0; q < size; q++)
            e += val(q, i);
        if (h[i] != e) {
            CHECK(0, "float sum of %zu (in place %d): [%zu] = %g, want %g", n, in_place, i, h[i], e);
            break;
        }
    }
    cudaFree(s);
    cudaFree(r);
    free(h);
}

int main(int argc, char **argv)
{
    int ndev = 0, all_bad = 0, calls = 0, x = 0, y = 0, *counts, *displs, total = 0;
    long long in = 1, out = 0;
    int *d, h[256];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(out == size && !maps_contain("libcuda.so"), "before any CUDA call libcuda is mapped (or the sum is wrong)");

    CUDA(cudaGetDeviceCount(&ndev));
    CUDA(cudaSetDevice(rank % ndev));
    float_sum((1 << 20) + 3, 0);
    float_sum((1 << 20) + 3, 1);
    float_sum(1000, 0);
    calls += 3;

    /* int max */
    CUDA(cudaMalloc((void **)&d, 256 * sizeof(int)));
    x = rank * 3;
    CUDA(cudaMemcpy(d, &x, sizeof(int), cudaMemcpyHostToDevice));
    MPI_Allreduce(MPI_IN_PLACE, d, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CUDA(cudaMemcpy(&y, d, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(y == (size - 1) * 3, "int max %d", y);
    calls++;

    /* broadcast from the last rank */
    for (int i = 0; i < 256; i++)
        h[i] = rank == size - 1 ? 7 * i : -1;
    CUDA(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
    MPI_Bcast(d, 256, MPI_INT, size - 1, MPI_COMM_WORLD);
    CUDA(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 256; i++)
        CHECK(h[i] == 7 * i, "bcast [%d] = %d", i, h[i]);
    calls++;

    /* allgatherv: rank q gives q + 1 ints */
    counts = malloc(size * sizeof(int));
    displs = malloc(size * sizeof(int));
    for (int q = 0; q < size; q++) {
        counts[q] = q + 1;
        displs[q] = total;
        total += q + 1;
    }
    if (total <= 256) {
        int *s;
        CUDA(cudaMalloc((void **)&s, (rank + 1) * sizeof(int)));
        for (int i = 0; i <= rank; i++)
            h[i] = rank * 100 + i;
        CUDA(cudaMemcpy(s, h, (rank + 1) * sizeof(int), cudaMemcpyHostToDevice));
        MPI_Allgatherv(s, rank + 1, MPI_INT, d, counts, displs, MPI_INT, MPI_COMM_WORLD);
        CUDA(cudaMemcpy(h, d, total * sizeof(int), cudaMemcpyDeviceToHost));
        for (int q = 0; q < size; q++)
            for (int i = 0; i <= q; i++)
                CHECK(h[displs[q] + i] == q * 100 + i, "allgatherv [%d][%d]", q, i);
        cudaFree(s);
        calls++;
    }
    cudaFree(d);
    PMPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !all_bad)
        printf("mpi_cuda: ok, %d calls on device buffers\n", calls);
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
