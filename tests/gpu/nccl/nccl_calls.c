/*
 * NCCL calls through the preloaded libhipress.so, without MPI (a torchrun
 * job's shape), with the stand-in NCCL (tests/gpu/standins/mock_nccl.c) as the real
 * library (tests/gpu/nccl/run_nccl.sh).
 *
 *   nccl_calls all MOCKDIR   every case below; "nccl_calls: ok" or exit 1
 *   nccl_calls one           one eligible-sized float32 sum; prints
 *                            "nccl_calls: library L" (hipress_library())
 *                            and "nccl_calls: calls C eligible E passthrough P"
 *   nccl_calls device MOCKDIR  one in-place sum on the stand-in driver's
 *                            device memory: the exact result (run_device)
 *
 * Checked: every call reaches the stand-in with identical arguments and its
 * result comes back; ncclAllReduce is classified as hp_nccl_group.h says (datatype,
 * op, size, the user's groups against PyTorch's one-call groups, nesting,
 * graph capture through the stand-in driver MOCKDIR/libcuda.so.1, opt-out);
 * group depth is per thread; ncclCommDestroy/Abort/Finalize release a
 * communicator's state and ncclCommSplit children start clean; a
 * non-blocking communicator's ncclInProgress is passed back, and one made
 * by ncclCommInitRankConfig (or split from one) is remembered and released.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
/* a program without MPI: hipress.h must not bring <mpi.h> in */
#define HIPRESS_NO_MPI
#include <hipress.h>
#ifdef MPI_VERSION
#error "hipress.h included <mpi.h> under HIPRESS_NO_MPI"
#endif
#include <nccl.h>
#include "mock_nccl.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



static void (*stats_get)(hipress_nccl_stats_t *);
static int (*comm_set)(void *, const char *, const char *);
static int failures;

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "nccl_calls:%d: ", __LINE__); fprintf(stderr, __VA_ARGS__); \
                        fprintf(stderr, "\n"); failures++; } } while (0)

#define BIG (1u << 20)   /* float32 elements: 4 MiB, above the default HIPRESS_MIN_BYTES */
#define S ((const void *)0x10000000)
#define R ((void *)0x20000000)
#define STREAM ((cudaStream_t)0x5150)

static hipress_nccl_stats_t stats(void)
{
    hipress_nccl_stats_t s;
    stats_get(&s);
    return s;
}

/* the stand-in's last call must be fn with these arguments */
static void expect_last(int line, const char *fn, const void *s, const void *r, size_t count, int dt, int op,
                        int root, ncclComm_t comm, cudaStream_t stream)
{
    const mock_call_t *c = mock_nccl_call(-1);
    if (c == NULL || strcmp(c->fn, fn) != 0 || c->sendbuf != s || c->recvbuf != r || c->count != count ||
        c->datatype != dt || c->op != op || c->root != root || c->comm != (void *)comm ||
        c->stream != (void *)stream) {
        fprintf(stderr, "nccl_calls:%d: the stand-in's last call is %s(%p, %p, %zu, %d, %d, %d, %p, %p), want "
                "%s(%p, %p, %zu, %d, %d, %d, %p, %p)\n", line, c ? c->fn : "none", c ? c->sendbuf : NULL,
                c ? c->recvbuf : NULL, c ? c->count : 0, c ? c->datatype : 0, c ? c->op : 0, c ? c->root : 0,
                c ? c->comm : NULL, c ? c->stream : NULL, fn, s, r, count, dt, op, root, (void *)comm,
                (void *)stream);
        failures++;
    }
}

/* One ncclAllReduce; it must reach the stand-in unchanged, and move the
 * named counter by one ("eligible", "pass", "group", "capture"; "group2":
 * by two, this call and the group's pending first one; NULL: no counter
 * yet, as for the first call of a group). */
static void allreduce(int line, size_t count, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
                      cudaStream_t stream, const char *counter)
{
    hipress_nccl_stats_t a = stats(), b;
    int n = mock_nccl_ncalls();
    ncclResult_t rc = ncclAllReduce(S, R, count, dt, op, comm, stream);
    b = stats();
    CHECK(rc == (comm != NULL ? ncclSuccess : ncclInvalidArgument), "line %d: result %d", line, (int)rc);
    CHECK(mock_nccl_ncalls() == n + 1, "line %d: the call did not reach NCCL once", line);
    expect_last(line, "ncclAllReduce", S, R, count, dt, op, -1, comm, stream);
    CHECK(b.calls == a.calls + 1, "line %d: calls %llu -> %llu", line, a.calls, b.calls);
    if (counter == NULL)
        CHECK(b.eligible == a.eligible && b.passthrough == a.passthrough,
              "line %d: a call inside an open group was counted already", line);
    else if (strcmp(counter, "eligible") == 0)
        CHECK(b.eligible == a.eligible + 1 && b.passthrough == a.passthrough, "line %d: not eligible", line);
    else if (strcmp(counter, "group2") == 0)   /* this call and the group's first, found not alone */
        CHECK(b.passthrough == a.passthrough + 2 && b.in_group == a.in_group + 2, "line %d: not two in group",
              line);
    else {
        CHECK(b.passthrough == a.passthrough + 1 && b.eligible == a.eligible, "line %d: not passed through", line);
        if (strcmp(counter, "group") == 0)
            CHECK(b.in_group == a.in_group + 1, "line %d: not counted as the user's group", line);
        if (strcmp(counter, "capture") == 0)
            CHECK(b.capturing == a.capturing + 1, "line %d: not counted as capturing", line);
    }
}
#define ALLREDUCE(...) allreduce(__LINE__, __VA_ARGS__)

static void *other_thread(void *arg)
{
    ncclComm_t comm = (ncclComm_t)arg;
    hipress_nccl_stats_t s = stats();
    CHECK(s.group_depth == 0, "another thread's group leaked into this one (depth %d)", s.group_depth);
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "eligible");
    return NULL;
}

static void run_all(const char *mockdir)
{
    ncclComm_t comm = mock_nccl_comm_new(), c2, child, reused;
    hipress_nccl_stats_t a, b;
    int (*set_capturing)(void *, int);
    char path[4096];
    pthread_t th;
    void *cuda;

    /* plain calls */
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "eligible");
    ALLREDUCE(BIG, ncclFloat16, ncclSum, comm, STREAM, "eligible");
    ALLREDUCE(BIG, ncclBfloat16, ncclAvg, comm, STREAM, "eligible");
    ALLREDUCE(BIG, ncclFloat32, ncclAvg, comm, NULL, "eligible");
    ALLREDUCE(BIG, ncclInt32, ncclSum, comm, STREAM, "pass");
    ALLREDUCE(BIG, ncclFloat64, ncclSum, comm, STREAM, "pass");
    ALLREDUCE(BIG, ncclFloat32, ncclMax, comm, STREAM, "pass");
    ALLREDUCE(1000, ncclFloat32, ncclSum, comm, STREAM, "pass");
    ALLREDUCE(0, ncclFloat32, ncclSum, comm, STREAM, "pass");
    ALLREDUCE(BIG, ncclFloat32, ncclSum, NULL, STREAM, "pass");   /* NCCL's error comes back */

    /* PyTorch's group of one call: eligible, decided at ncclGroupEnd */
    for (int i = 0; i < 3; i++) {
        a = stats();
        CHECK(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
        CHECK(stats().group_depth == 1 && mock_nccl_depth() == 1, "depth after ncclGroupStart");
        ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, NULL);
        CHECK(mock_nccl_call(-1)->depth == 1, "the call must stay inside the real group");
        CHECK(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd");
        b = stats();
        CHECK(b.group_depth == 0 && mock_nccl_depth() == 0, "depth after ncclGroupEnd");
        CHECK(b.eligible == a.eligible + 1, "a one-call group's call is not eligible");
    }
    /* an ineligible call alone in a group is counted at once */
    ncclGroupStart();
    ALLREDUCE(10, ncclFloat32, ncclSum, comm, STREAM, "pass");
    ncclGroupEnd();

    /* the user's group: two all-reduces */
    a = stats();
    ncclGroupStart();
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, NULL);
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "group2");
    ncclGroupEnd();
    b = stats();
    CHECK(b.in_group == a.in_group + 2 && b.eligible == a.eligible, "a two-call group: %llu in group",
          b.in_group - a.in_group);
    /* an all-reduce and a send */
    a = stats();
    ncclGroupStart();
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, NULL);
    CHECK(ncclSend(S, 5, ncclInt8, 1, comm, STREAM) == ncclSuccess, "ncclSend");
    expect_last(__LINE__, "ncclSend", S, NULL, 5, ncclInt8, -1, 1, comm, STREAM);
    ncclGroupEnd();
    b = stats();
    CHECK(b.in_group == a.in_group + 1 && b.eligible == a.eligible, "all-reduce + send: not the user's group");
    /* a send first, then the all-reduce */
    ncclGroupStart();
    ncclRecv(R, 5, ncclInt8, 1, comm, STREAM);
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "group");
    ncclGroupEnd();
    /* nested: the user's group around a one-call group */
    a = stats();
    ncclGroupStart();
    ncclGroupStart();
    CHECK(stats().group_depth == 2, "nested depth");
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "group");
    ncclGroupEnd();
    ncclGroupEnd();
    b = stats();
    CHECK(b.eligible == a.eligible && b.group_depth == 0, "nested group");
    /* an unbalanced end: NCCL's error, the depth stays 0 */
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "unbalanced ncclGroupEnd must return NCCL's error");
    CHECK(stats().group_depth == 0, "unbalanced end changed the depth");
    ncclGroupStart();
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, NULL);
    ncclGroupEnd();

    /* groups are per thread */
    ncclGroupStart();
    pthread_create(&th, NULL, other_thread, comm);
    pthread_join(th, NULL);
    CHECK(stats().group_depth == 1, "this thread's group was lost");
    ncclGroupEnd();

    /* the other operations pass through unchanged */
    ncclBroadcast(S, R, 3, ncclUint8, 2, comm, STREAM);
    expect_last(__LINE__, "ncclBroadcast", S, R, 3, ncclUint8, -1, 2, comm, STREAM);
    ncclBcast(R, 4, ncclInt64, 1, comm, STREAM);
    expect_last(__LINE__, "ncclBcast", R, R, 4, ncclInt64, -1, 1, comm, STREAM);
    ncclReduce(S, R, 5, ncclFloat32, ncclProd, 0, comm, STREAM);
    expect_last(__LINE__, "ncclReduce", S, R, 5, ncclFloat32, ncclProd, 0, comm, STREAM);
    ncclAllGather(S, R, 6, ncclFloat16, comm, STREAM);
    expect_last(__LINE__, "ncclAllGather", S, R, 6, ncclFloat16, -1, -1, comm, STREAM);
    ncclReduceScatter(S, R, 7, ncclFloat32, ncclSum, comm, STREAM);
    expect_last(__LINE__, "ncclReduceScatter", S, R, 7, ncclFloat32, ncclSum, -1, comm, STREAM);

    /* opt-out, and the release of a communicator's state */
    c2 = mock_nccl_comm_new();
    CHECK(comm_set(c2, "HIPRESS_ENABLE", "0") == HIPRESS_OK, "opt-out");
    CHECK(comm_set(c2, "HIPRESS_NOT_A_SETTING", "1") == HIPRESS_ERR_INVALID, "a bad name must be refused");
    CHECK(comm_set(c2, "HIPRESS_MIN_BYTES", "lots") == HIPRESS_ERR_INVALID, "a bad value must be refused");
    CHECK(comm_set(NULL, "HIPRESS_ENABLE", "0") == HIPRESS_ERR_INVALID, "a NULL communicator must be refused");
    CHECK(stats().comms_tracked == 1, "tracked %llu", stats().comms_tracked);
    ALLREDUCE(BIG, ncclFloat32, ncclSum, c2, STREAM, "pass");
    CHECK(comm_set(c2, "HIPRESS_ENABLE", "1") == HIPRESS_OK && comm_set(c2, "HIPRESS_MIN_BYTES", "8M") == HIPRESS_OK,
          "opt back in");
    ALLREDUCE(BIG, ncclFloat32, ncclSum, c2, STREAM, "pass");           /* 4 MiB < 8M on this one */
    ALLREDUCE(4 * BIG, ncclFloat32, ncclSum, c2, STREAM, "eligible");
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "eligible");     /* others keep the job's */
    a = stats();
    CHECK(ncclCommDestroy(c2) == ncclSuccess, "ncclCommDestroy");
    expect_last(__LINE__, "ncclCommDestroy", NULL, NULL, 0, -1, -1, -1, c2, NULL);
    b = stats();
    CHECK(b.comms_tracked == 0 && b.comms_released == a.comms_released + 1, "destroy: tracked %llu, released %llu",
          b.comms_tracked, b.comms_released - a.comms_released);
    c2 = mock_nccl_comm_new();
    comm_set(c2, "HIPRESS_ENABLE", "0");
    CHECK(ncclCommAbort(c2) == ncclSuccess && stats().comms_tracked == 0, "abort releases");
    c2 = mock_nccl_comm_new();
    comm_set(c2, "HIPRESS_ENABLE", "0");
    setenv("MOCK_NCCL_NONBLOCKING", "1", 1);
    CHECK(ncclCommFinalize(c2) == ncclInProgress, "a non-blocking finalize's ncclInProgress must come back");
    unsetenv("MOCK_NCCL_NONBLOCKING");
    CHECK(stats().comms_tracked == 0, "finalize releases");
    CHECK(ncclCommDestroy(c2) == ncclSuccess && stats().comms_released == a.comms_released + 3, "released %llu",
          stats().comms_released - a.comms_released);
    /* a destroy of a communicator without state releases nothing */
    CHECK(ncclCommDestroy(mock_nccl_comm_new()) == ncclSuccess &&
          stats().comms_released == a.comms_released + 3, "nothing to release");

    /* children start clean, even at an address that had state */
    CHECK(comm_set(comm, "HIPRESS_ENABLE", "0") == HIPRESS_OK, "parent opt-out");
    CHECK(ncclCommSplit(comm, 0, 0, &child, NULL) == ncclSuccess && child != NULL, "split");
    ALLREDUCE(BIG, ncclFloat32, ncclSum, child, STREAM, "eligible");
    ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "pass");
    reused = mock_nccl_comm_new();
    comm_set(reused, "HIPRESS_ENABLE", "0");
    mock_nccl_next_split(reused);
    CHECK(ncclCommSplit(comm, 1, 0, &child, NULL) == ncclSuccess && child == reused, "split to a reused address");
    ALLREDUCE(BIG, ncclFloat32, ncclSum, child, STREAM, "eligible");
    CHECK(stats().comms_tracked == 1, "after the splits %llu tracked (the parent only)", stats().comms_tracked);
    comm_set(comm, "HIPRESS_ENABLE", "1");

    /* a non-blocking communicator (ncclCommInitRankConfig, blocking = 0):
     * its creation's ncclInProgress comes back, hipress remembers it (an
     * entry), and its split without a config (non-blocking too, nccl.h);
     * a blocking one is not tracked; abort and destroy release them */
    {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        ncclUniqueId id;
        ncclComm_t nb = NULL, nbc = NULL, bl = NULL;
        ncclResult_t st = ncclInProgress;
        memset(&id, 0, sizeof(id));
        cfg.blocking = 0;
        a = stats();
        CHECK(ncclCommInitRankConfig(&nb, 1, id, 0, &cfg) == ncclInProgress && nb != NULL,
              "ncclCommInitRankConfig(blocking = 0) must answer ncclInProgress");
        CHECK(strcmp(mock_nccl_call(-1)->fn, "ncclCommInitRankConfig") == 0, "the creation did not reach NCCL");
        CHECK(stats().comms_tracked == a.comms_tracked + 1, "a non-blocking communicator is not remembered");
        for (int i = 0; i < 100 && st == ncclInProgress; i++)
            CHECK(ncclCommGetAsyncError(nb, &st) == ncclSuccess, "ncclCommGetAsyncError");
        CHECK(st == ncclSuccess, "the creation never completed");
        CHECK(ncclCommSplit(nb, 0, 0, &nbc, NULL) == ncclInProgress && nbc != NULL,
              "a split of a non-blocking communicator without a config must answer ncclInProgress");
        CHECK(stats().comms_tracked == a.comms_tracked + 2, "the non-blocking split is not remembered");
        for (int i = 0, done = 0; i < 100 && !done; i++)
            done = ncclCommGetAsyncError(nbc, &st) == ncclSuccess && st != ncclInProgress;
        cfg.blocking = 1;
        CHECK(ncclCommInitRankConfig(&bl, 1, id, 0, &cfg) == ncclSuccess &&
                  stats().comms_tracked == a.comms_tracked + 2,
              "a blocking communicator made with a config");
        CHECK(ncclCommAbort(nbc) == ncclSuccess && ncclCommDestroy(nb) == ncclSuccess &&
                  ncclCommDestroy(bl) == ncclSuccess,
              "abort and destroy");
        b = stats();
        CHECK(b.comms_tracked == a.comms_tracked && b.comms_released == a.comms_released + 2,
              "abort and destroy of the non-blocking ones: tracked %llu, released %llu", b.comms_tracked,
              b.comms_released - a.comms_released);
    }

    /* graph capture, through the stand-in driver */
    snprintf(path, sizeof(path), "%s/libcuda.so.1", mockdir);
    cuda = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(cuda != NULL, "cannot load %s: %s", path, dlerror());
    if (cuda != NULL) {
        set_capturing = (int (*)(void *, int))dlsym(cuda, "mock_cuda_set_capturing");
        ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "eligible");
        set_capturing((void *)STREAM, 1);
        ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "capture");
        ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, (cudaStream_t)0x6160, "eligible");
        ncclGroupStart();
        ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "capture");
        ncclGroupEnd();
        set_capturing((void *)STREAM, 0);
        ALLREDUCE(BIG, ncclFloat32, ncclSum, comm, STREAM, "eligible");
    }
    CHECK(stats().group_depth == 0 && mock_nccl_depth() == 0, "groups left open");
    b = stats();
    CHECK(b.calls == b.eligible + b.passthrough, "calls %llu != eligible %llu + passed through %llu", b.calls,
          b.eligible, b.passthrough);
}

/* "device MOCKDIR": one in-place float32 sum on a buffer of the stand-in
 * driver's device memory, as one rank of a torchrun job makes it.  The
 * result must be the data, bit for bit (one rank: the exact sum is the
 * data; hipress passes a one-rank communicator through, compressing or
 * not); the stand-in must have got the call, with the same arguments, last.
 * Prints "nccl_calls: device ok, N calls reached NCCL". */
static int run_device(const char *mockdir)
{
    char path[4096];
    void *cu, *d;
    void *(*dmalloc)(size_t, int);
    int (*dwrite)(void *, const void *, size_t), (*dread)(void *, const void *, size_t);
    float *h = malloc(BIG * sizeof(float)), *back = malloc(BIG * sizeof(float));
    ncclComm_t comm = mock_nccl_comm_new();
    ncclResult_t rc;

    snprintf(path, sizeof(path), "%s/libcuda.so.1", mockdir);
    cu = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    CHECK(cu != NULL && h != NULL && back != NULL, "cannot load %s: %s", path, dlerror());
    if (cu == NULL || h == NULL || back == NULL)
        return 1;
    *(void **)&dmalloc = dlsym(cu, "mock_cuda_malloc");
    *(void **)&dwrite = dlsym(cu, "mock_cuda_write");
    *(void **)&dread = dlsym(cu, "mock_cuda_read");
    d = dmalloc != NULL ? dmalloc(BIG * sizeof(float), 0) : NULL;
    CHECK(d != NULL && dwrite != NULL && dread != NULL, "the stand-in driver gives no device memory");
    if (d == NULL || dwrite == NULL || dread == NULL)
        return 1;
    for (size_t i = 0; i < BIG; i++)
        h[i] = (float)((int)(i % 2001) - 1000) * 0.37f;   /* mixed signs: onebit would change them */
    dwrite(d, h, BIG * sizeof(float));
    rc = ncclAllReduce(d, d, BIG, ncclFloat32, ncclSum, comm, STREAM);
    CHECK(rc == ncclSuccess, "result %d", (int)rc);
    expect_last(__LINE__, "ncclAllReduce", d, d, BIG, ncclFloat32, ncclSum, -1, comm, STREAM);
    dread(back, d, BIG * sizeof(float));
    CHECK(memcmp(back, h, BIG * sizeof(float)) == 0, "the one-rank sum is not the data, bit for bit");
    if (failures == 0)
        printf("nccl_calls: device ok, %d calls reached NCCL\n", mock_nccl_ncalls());
    free(h);
    free(back);
    return failures == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    hipress_nccl_stats_t s;

    stats_get = (void (*)(hipress_nccl_stats_t *))dlsym(RTLD_DEFAULT, "hipress_nccl_stats_get");
    comm_set = (int (*)(void *, const char *, const char *))dlsym(RTLD_DEFAULT, "hipress_nccl_comm_set");
    if (argc < 2 || stats_get == NULL || comm_set == NULL) {
        fprintf(stderr, "usage: LD_PRELOAD=libhipress.so nccl_calls all MOCKDIR | one\n");
        return 2;
    }
    if (strcmp(argv[1], "one") == 0) {
        ncclComm_t comm = mock_nccl_comm_new();
        const char *(*library)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "hipress_library");
        ncclResult_t rc = ncclAllReduce(S, R, BIG, ncclFloat32, ncclSum, comm, STREAM);
        printf("nccl_calls: library %s\n", library != NULL ? library() : "unknown");
        s = stats();
        printf("nccl_calls: result %d, calls %llu eligible %llu passthrough %llu\n", (int)rc, s.calls, s.eligible,
               s.passthrough);
        return rc == ncclSuccess && mock_nccl_ncalls() == 1 ? 0 : 1;
    }
    if (argc < 3)
        return 2;
    if (strcmp(argv[1], "device") == 0)
        return run_device(argv[2]);
    CHECK(stats().intercepted == 1 && stats().calls == 0, "hipress does not intercept NCCL in this build");
    run_all(argv[2]);
    if (failures == 0)
        printf("nccl_calls: ok, %llu ncclAllReduce calls\n", stats().calls);
    return failures == 0 ? 0 : 1;
}
