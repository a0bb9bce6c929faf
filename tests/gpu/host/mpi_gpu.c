/*
 * MPI collectives on host and on (stand-in) device buffers, under the
 * preloaded libhipress.so (tests/gpu/host/run_gpu.sh).
 *
 *   mpi_gpu host [MOCKDIR]  host buffers only; also proves that no libcuda
 *                           and no CUDA module is loaded into the process,
 *                           before and after loading MOCKDIR/libhpwatch.so
 *   mpi_gpu device MOCKDIR  then loads the stand-in driver
 *                           MOCKDIR/libcuda.so.1 (MOCKDIR: tests/gpu/mock/.libs)
 *                           after MPI_Init, as a framework does, and runs
 *                           MPI_Allreduce,
 *                           MPI_Bcast and MPI_Allgatherv on its "device
 *                           memory" (a crash on any host access): the
 *                           results must be exact, and the bytes a datatype
 *                           skips untouched
 *
 * Every rank checks its results; rank 0 prints "mpi_gpu: ok, A allreduce,
 * B bcast, C allgatherv calls on device buffers" (compared with the
 * HIPRESS_STATS table by the driver) or the program exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, bad;
static int dev_allreduce, dev_bcast, dev_allgatherv;

static void *(*dmalloc)(size_t, int);
static void (*dfree)(void *);
static int (*dwrite)(void *, const void *, size_t);
static int (*dread)(void *, const void *, size_t);
static unsigned long long (*mock_count)(const char *);

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "rank %d: ", rank); fprintf(stderr, __VA_ARGS__); \
                        fprintf(stderr, "\n"); bad = 1; } } while (0)

static int maps_contain(const char *what)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, what) != NULL)
            found = 1;
    fclose(f);
    return found;
}

static float val(int r, size_t i)
{
    return (float)((int)((i * 5 + (size_t)r * 11) % 13) - 6);
}

/* ------------------------------------------------------------- host */

static void host_phase(void)
{
    size_t n = (1 << 18) + 3;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int)), total = 0;
    long long l = rank, lmax = -1;

    for (size_t i = 0; i < n; i++)
        a[i] = val(rank, i);
    CHECK(MPI_Allreduce(a, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce");
    for (size_t i = 0; i < n; i += 4099) {
        float e = 0;
        for (int q = 0; q < size; q++)
            e += val(q, i);
        CHECK(b[i] == e, "host float sum [%zu] = %g, want %g", i, b[i], e);
    }
    MPI_Allreduce(&l, &lmax, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lmax == size - 1, "host max");
    for (size_t i = 0; i < 100; i++)
        a[i] = rank == 0 ? (float)i : -1.0f;
    MPI_Bcast(a, 100, MPI_FLOAT, 0, MPI_COMM_WORLD);
    for (size_t i = 0; i < 100; i++)
        CHECK(a[i] == (float)i, "host bcast [%zu]", i);
    for (int q = 0; q < size; q++) {
        counts[q] = q + 1;
        displs[q] = total;
        total += q + 1;
    }
    for (int i = 0; i <= rank; i++)
        a[i] = (float)(rank * 100 + i);
    MPI_Allgatherv(a, rank + 1, MPI_FLOAT, b, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
    for (int q = 0; q < size; q++)
        for (int i = 0; i <= q; i++)
            CHECK(b[displs[q] + i] == (float)(q * 100 + i), "host allgatherv [%d][%d]", q, i);
    free(a);
    free(b);
    free(counts);
    free(displs);
}

/* ----------------------------------------------------------- device */

/* n elements of `bytes` each in device memory, filled from host */
static void *dev_from(const void *host, size_t bytes)
{
    void *d = dmalloc(bytes, 0);
    if (d == NULL || dwrite(d, host, bytes) != 0) {
        fprintf(stderr, "rank %d: stand-in device memory failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return d;
}

static void allreduce_float(size_t n, int in_place, int host_send)
{
    float *h = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    void *s, *r;
    for (size_t i = 0; i < n; i++)
        h[i] = val(rank, i);
    r = dev_from(h, n * sizeof(float));
    s = in_place ? MPI_IN_PLACE : host_send ? (void *)h : dev_from(h, n * sizeof(float));
    CHECK(MPI_Allreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "device allreduce");
    dev_allreduce++;
    dread(out, r, n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float e = 0;
        for (int q = 0; q < size; q++)
            e += val(q, i);
        if (out[i] != e) {
            CHECK(0, "device float sum of %zu (in place %d, host send %d) [%zu] = %g, want %g", n, in_place,
                  host_send, i, out[i], e);
            break;
        }
    }
    if (!in_place && !host_send)
        dfree(s);
    dfree(r);
    free(h);
    free(out);
}

/* Rank 0 passes device buffers, the others host buffers, to one eligible
 * float sum: only rank 0 sees that it cannot be compressed, so the ranks
 * must agree per call (hipress' eligibility agreement) or rank 0 would pass
 * through while the others compress, and hang. */
static void allreduce_mixed(size_t n)
{
    float *h = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    void *r = h;
    for (size_t i = 0; i < n; i++)
        h[i] = val(rank, i);
    if (rank == 0)
        r = dev_from(h, n * sizeof(float));
    CHECK(MPI_Allreduce(MPI_IN_PLACE, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
          "mixed device/host allreduce");
    if (rank == 0) {
        dev_allreduce++;
        dread(out, r, n * sizeof(float));
        dfree(r);
    } else {
        memcpy(out, h, n * sizeof(float));
    }
    for (size_t i = 0; i < n; i++) {
        float e = 0;
        for (int q = 0; q < size; q++)
            e += val(q, i);
        if (out[i] != e) {
            CHECK(0, "mixed device/host float sum of %zu [%zu] = %g, want %g", n, i, out[i], e);
            break;
        }
    }
    free(h);
    free(out);
}

static void allreduce_int_max(void)
{
    int in[7], out[7];
    void *s, *r;
    for (int i = 0; i < 7; i++)
        in[i] = rank * 10 + i;
    s = dev_from(in, sizeof(in));
    r = dev_from(in, sizeof(in));
    CHECK(MPI_Allreduce(s, r, 7, MPI_INT, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS, "device int max");
    dev_allreduce++;
    dread(out, r, sizeof(out));
    for (int i = 0; i < 7; i++)
        CHECK(out[i] == (size - 1) * 10 + i, "device int max [%d] = %d", i, out[i]);
    dfree(s);
    dfree(r);
}

/* A strided type with a user-defined sum (as Horovod brings its own fp16
 * type and op; MPI's predefined ops refuse derived types): the ints the
 * type skips in the receive buffer must survive. */
static void vec_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *a = (const int *)in;
    int *b = (int *)inout;
    (void)dt;
    for (int e = 0; e < *len; e++)
        for (int k = 0; k < 4; k++)
            b[10 * e + 3 * k] += a[10 * e + 3 * k];
}

static void allreduce_strided(void)
{
    MPI_Datatype vec;
    MPI_Op op;
    int in[12], out[12];
    void *s, *r;
    MPI_Type_vector(4, 1, 3, MPI_INT, &vec);    /* ints 0, 3, 6, 9: extent 10 ints */
    MPI_Type_commit(&vec);
    MPI_Op_create(vec_sum, 1, &op);
    for (int i = 0; i < 12; i++)
        in[i] = i % 3 == 0 && i < 10 ? rank + i : -1000 - i;
    s = dev_from(in, sizeof(in));
    r = dev_from(in, sizeof(in));
    CHECK(MPI_Allreduce(s, r, 1, vec, op, MPI_COMM_WORLD) == MPI_SUCCESS, "device strided allreduce");
    dev_allreduce++;
    dread(out, r, sizeof(out));
    for (int i = 0; i < 12; i++) {
        int e = i % 3 == 0 && i < 10 ? size * (size - 1) / 2 + size * i : -1000 - i;
        CHECK(out[i] == e, "device strided allreduce [%d] = %d, want %d", i, out[i], e);
    }
    MPI_Op_free(&op);
    MPI_Type_free(&vec);
    dfree(s);
    dfree(r);
}

static void bcast(int root, int strided)
{
    MPI_Datatype vec;
    int h[30], out[30], count = strided ? 5 : 30;
    void *d;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);    /* ints 0 and 2 of each 3-int extent... */
    MPI_Type_commit(&vec);
    for (int i = 0; i < 30; i++)
        h[i] = rank == root ? 7 * i + 1 : -i - 1;
    d = dev_from(h, sizeof(h));
    CHECK(MPI_Bcast(d, count, strided ? vec : MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "device bcast");
    dev_bcast++;
    dread(out, d, sizeof(out));
    for (int i = 0; i < 30; i++) {
        /* vector(2,1,2) has extent 3 ints: element k covers ints 3k and 3k+2 */
        int touched = strided ? i < 15 && (i % 3 == 0 || i % 3 == 2) : 1;
        int e = touched || rank == root ? 7 * i + 1 : -i - 1;
        CHECK(out[i] == e, "device bcast root %d strided %d [%d] = %d, want %d", root, strided, i, out[i], e);
    }
    MPI_Type_free(&vec);
    dfree(d);
}

static void allgatherv(int in_place, int gap, int host_send)
{
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int)), total = 0;
    int *h, *out, mine[64];
    void *r, *s = NULL;
    for (int q = 0; q < size; q++) {
        counts[q] = q + 1;
        displs[q] = total;
        total += q + 1 + gap;
    }
    h = malloc(total * sizeof(int));
    out = malloc(total * sizeof(int));
    for (int i = 0; i < total; i++)
        h[i] = -5 - i;
    for (int i = 0; i <= rank; i++)
        mine[i] = h[displs[rank] + i] = rank * 1000 + i;
    r = dev_from(h, total * sizeof(int));
    if (!in_place)
        s = host_send ? (void *)mine : dev_from(mine, (rank + 1) * sizeof(int));
    CHECK(MPI_Allgatherv(in_place ? MPI_IN_PLACE : s, rank + 1, MPI_INT, r, counts, displs, MPI_INT,
                         MPI_COMM_WORLD) == MPI_SUCCESS, "device allgatherv");
    dev_allgatherv++;
    dread(out, r, total * sizeof(int));
    for (int i = 0, q = 0; i < total; i++) {
        int e = -5 - i;
        while (q + 1 < size && i >= displs[q + 1])
            q++;
        if (i - displs[q] <= q)
            e = q * 1000 + (i - displs[q]);
        CHECK(out[i] == e, "device allgatherv (in place %d, gap %d) [%d] = %d, want %d", in_place, gap, i,
              out[i], e);
    }
    if (!in_place && !host_send)
        dfree(s);
    dfree(r);
    free(h);
    free(out);
    free(counts);
    free(displs);
}

static void device_phase(const char *mock)
{
    void *h = dlopen(mock, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "rank %d: cannot load %s: %s\n", rank, mock, dlerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    dmalloc = (void *(*)(size_t, int))dlsym(h, "mock_cuda_malloc");
    dfree = (void (*)(void *))dlsym(h, "mock_cuda_free");
    dwrite = (int (*)(void *, const void *, size_t))dlsym(h, "mock_cuda_write");
    dread = (int (*)(void *, const void *, size_t))dlsym(h, "mock_cuda_read");
    mock_count = (unsigned long long (*)(const char *))dlsym(h, "mock_cuda_count");
    if (!dmalloc || !dfree || !dwrite || !dread || !mock_count) {
        fprintf(stderr, "rank %d: %s is not the stand-in driver\n", rank, mock);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    allreduce_float((1 << 18) + 7, 0, 0);    /* would be compressed if it were host memory */
    allreduce_float((1 << 18) + 7, 1, 0);
    allreduce_float((1 << 18) + 7, 0, 1);    /* host input, device output */
    allreduce_float(1000, 0, 0);
    allreduce_mixed((1 << 18) + 7);
    allreduce_int_max();
    allreduce_strided();
    bcast(0, 0);
    bcast(size - 1, 0);
    bcast(size / 2, 1);
    allgatherv(0, 0, 0);
    allgatherv(1, 0, 0);
    allgatherv(0, 2, 0);
    allgatherv(1, 3, 0);
    allgatherv(0, 1, 1);
    /* host buffers keep working next to device ones */
    host_phase();
    /* staging and the device codec used the module's own streams only */
    CHECK(mock_count("legacy") == 0 && mock_count("per_thread") == 0,
          "%llu driver calls on the legacy default stream, %llu on the per-thread one", mock_count("legacy"),
          mock_count("per_thread"));
    CHECK(mock_count("bad_free_host") == 0, "pinned memory freed outside its context");
    CHECK(mock_count("pending") == 0, "%llu stream entries still queued after the calls returned",
          mock_count("pending"));
}

int main(int argc, char **argv)
{
    int all_bad = 0, device = argc > 2 && strcmp(argv[1], "device") == 0;
    const char *dir = argc > 2 ? argv[2] : NULL;
    char path[4096];

    if (argc < 2 || (strcmp(argv[1], "host") != 0 && !device)) {
        fprintf(stderr, "usage: mpi_gpu host [MOCKDIR] | device MOCKDIR  (MOCKDIR: tests/gpu/mock/.libs)\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    host_phase();
    CHECK(maps_contain("libcuda.so") == 0, "libcuda is mapped into a process that never loaded it");
    CHECK(maps_contain("libhipress_cuda") == 0, "the CUDA module is loaded into a process without CUDA");
    if (dir != NULL) {
        /* loading an unrelated object fires hipress' watch; it must look,
         * find no driver, and bring nothing in */
        snprintf(path, sizeof(path), "%s/libhpwatch.so", dir);
        CHECK(dlopen(path, RTLD_NOW | RTLD_LOCAL) != NULL, "cannot load %s: %s", path, dlerror());
        host_phase();
        CHECK(maps_contain("libcuda.so") == 0, "libcuda mapped after an unrelated dlopen");
        CHECK(maps_contain("libhipress_cuda") == 0, "the CUDA module loaded after an unrelated dlopen");
    }
    if (device) {
        snprintf(path, sizeof(path), "%s/libcuda.so.1", dir);
        device_phase(path);
    }
    PMPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !all_bad)
        printf("mpi_gpu: ok, %d allreduce, %d bcast, %d allgatherv calls on device buffers\n", dev_allreduce,
               dev_bcast, dev_allgatherv);
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
