/*
 * The IPC stand-in's CUDA engine (ipc_cuda.c) over the stand-in driver
 * (tests/gpu/ipc/run_ipc.sh).  One-rank communicators: the driver loaded
 * through dlopen, the caller's context, blocks zeroed on a stream of the
 * stand-in's own, reductions as host functions over the shadows (in stream
 * order: MOCK_CUDA_DEFERRED=1 runs nothing before a wait), groups over two
 * streams joined by events, finalize, destroy and abort.  Then a two-rank
 * communicator of two threads, each on a stream of its own: an
 * ncclAllReduce through the flags and FIFOs of the one process (stream
 * memory operations, no CUDA IPC); on a driver without stream memory
 * operations it must fail instead, naming the missing driver function, and
 * fail the communicator.
 *
 *   ipc_one MOCKDIR/libcuda.so.1
 *
 * Prints "ipc_one: ok" or exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hp_elem.h"

static void *(*dmalloc)(size_t, int);
static int (*dwrite)(void *, const void *, size_t);
static int (*dread)(void *, const void *, size_t);
static int (*screate)(void **, unsigned), (*ssync)(void *);
static int bad;

#define CHECK(cond, ...)                                             \
    do {                                                             \
        if (!(cond)) {                                               \
            fprintf(stderr, "ipc_one:%d: ", __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                            \
            fprintf(stderr, " (%s)\n", ncclGetLastError(NULL));      \
            bad = 1;                                                 \
        }                                                            \
    } while (0)
#define OK(call) CHECK((call) == ncclSuccess, "%s", #call)

static ncclComm_t one(void)
{
    ncclUniqueId id;
    ncclComm_t c = NULL;
    OK(ncclGetUniqueId(&id));
    OK(ncclCommInitRank(&c, 1, id, 0));
    if (c == NULL)
        exit(1);
    return c;
}

static ncclUniqueId pair_id;
static int memops;
static void *pair_rank(void *arg)
{
    int r = (int)(intptr_t)arg;
    ncclComm_t c = NULL;
    ncclResult_t rc, st = ncclSuccess;
    float *d = dmalloc(64, 0), h[16];
    void *s = NULL;
    for (int i = 0; i < 16; i++)
        h[i] = (float)(i + 100 * r);
    dwrite(d, h, sizeof(h));
    OK(ncclCommInitRank(&c, 2, pair_id, r));
    if (c == NULL)
        return NULL;
    screate(&s, 1);   /* (in the context the communicator made current) */
    rc = ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, c, s);
    if (memops) {
        CHECK(rc == ncclSuccess, "two ranks in one process: %d", (int)rc);
        ssync(s);
        dread(h, d, sizeof(h));
        for (int i = 0; i < 16; i++)
            CHECK(h[i] == (float)(2 * i + 100), "two ranks' sum [%d] = %g", i, h[i]);
        OK(ncclCommDestroy(c));
        return NULL;
    }
    CHECK(rc == ncclUnhandledCudaError && strstr(ncclGetLastError(NULL), "this CUDA driver has no cuStreamW") != NULL,
          "two ranks on a driver without stream memory operations: %d", (int)rc);
    OK(ncclCommGetAsyncError(c, &st));
    CHECK(st == ncclUnhandledCudaError, "the communicator is not failed: %d", (int)st);
    OK(ncclCommAbort(c));
    return NULL;
}

int main(int argc, char **argv)
{
    void *cu, *s1, *s2;
    const size_t n = 5000;
    float *h = malloc(n * 4), *back = malloc(n * 4), two = 2.0f;
    uint16_t *hh = malloc(n * 2), *hb = malloc(n * 2);
    void *d, *e, *f;
    ncclComm_t c;
    ncclRedOp_t pm;
    pthread_t t[2];

    if (argc < 2 || (cu = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) == NULL) {
        fprintf(stderr, "usage: ipc_one MOCKDIR/libcuda.so.1\n");
        return 2;
    }
    *(void **)&dmalloc = dlsym(cu, "mock_cuda_malloc");
    *(void **)&dwrite = dlsym(cu, "mock_cuda_write");
    *(void **)&dread = dlsym(cu, "mock_cuda_read");
    *(void **)&screate = dlsym(cu, "cuStreamCreate");
    *(void **)&ssync = dlsym(cu, "cuStreamSynchronize");
    if (dmalloc == NULL || dwrite == NULL || dread == NULL || screate == NULL || ssync == NULL)
        return 2;
    memops = dlsym(cu, "cuStreamWaitValue32_v2") != NULL;
    c = one();
    screate(&s1, 1);
    screate(&s2, 1);
    d = dmalloc(n * 4, 0);
    e = dmalloc(n * 4, 0);
    f = dmalloc(n * 2, 0);
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)i * 0.5f - 7.0f;
        hh[i] = hp_f32_to_f16(h[i]);
    }
    dwrite(d, h, n * 4);
    dwrite(f, hh, n * 2);
    /* avg of one rank: the input; a premultiplied sum: twice it */
    OK(ncclAllReduce(d, e, n, ncclFloat32, ncclAvg, c, s1));
    OK(ncclRedOpCreatePreMulSum(&pm, &two, ncclFloat32, ncclScalarHostImmediate, c));
    OK(ncclAllReduce(e, e, n, ncclFloat32, pm, c, s1));
    OK(ncclRedOpDestroy(pm, c));
    OK(ncclGroupStart());   /* two streams in one group */
    OK(ncclBroadcast(f, f, n, ncclFloat16, 0, c, s2));
    OK(ncclAllReduce(f, f, n, ncclFloat16, ncclMax, c, s1));
    OK(ncclGroupEnd());
    ssync(s1);
    ssync(s2);
    dread(back, e, n * 4);
    dread(hb, f, n * 2);
    for (size_t i = 0; i < n; i++) {
        CHECK(back[i] == 2.0f * h[i], "[%zu] = %g, want %g", i, back[i], 2.0f * h[i]);
        CHECK(hb[i] == hh[i], "float16 [%zu] = 0x%04x, want 0x%04x", i, hb[i], hh[i]);
        if (bad)
            break;
    }
    OK(ncclCommFinalize(c));
    OK(ncclCommDestroy(c));
    c = one();
    OK(ncclAllGather(d, e, n, ncclFloat32, c, s1));
    OK(ncclCommAbort(c));
    OK(ncclGetUniqueId(&pair_id));
    for (int r = 0; r < 2; r++)
        pthread_create(&t[r], NULL, pair_rank, (void *)(intptr_t)r);
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
    if (!bad)
        printf("ipc_one: ok\n");
    return bad;
}
