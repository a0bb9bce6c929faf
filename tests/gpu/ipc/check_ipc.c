/*
 * The IPC stand-in NCCL's protocol without a GPU: its NCCL API
 * (ipc_nccl.c) over the protocol (ipc_proto.c, ipc_sched.c) and the engine of
 * host threads (ipc_host.c), between real processes forked here, each
 * scenario under a time limit (a deadlock is a failure).
 *
 *   check_ipc [SCENARIO...]     all by default
 *
 *   elem        the 16-bit conversions against hipress' own (hp_elem.h)
 *   collectives at 2, 3, 4 ranks: ncclAllReduce of every type and op
 *               (rank order: the exact bits of a reduction computed here),
 *               in place and not, ncclReduce, ncclReduceScatter,
 *               ncclBroadcast, ncclAllGather, ncclAlltoAll, ncclGather,
 *               ncclScatter, premultiplied sums, counts of 0; messages of
 *               several chunks through FIFOs of 2 slots
 *   p2p         rings and exchanges in groups, longer than a FIFO (the
 *               group's chunks interleaved), more messages of a pair in a
 *               group than FIFO slots, receives called first, grouped
 *               otherwise on the peer, and a lone send before its lone
 *               receive
 *   mismatch    counts that differ: an error naming both sides, on one
 *               rank at once and on the other as its asynchronous error
 *   unmatched   a send without a receive never completes; the monitor
 *               reports it, to the peer too; ncclCommAbort lets its stream
 *               drain
 *   abort       the peer of a rank that aborts learns it
 *   opposite    two communicators on two streams, used in opposite orders
 *               on the two ranks: both complete
 *   split, shrink, nonblocking, gone (a peer that exits), threads (two
 *   ranks in one process), group (two communicators and two streams in one
 *   group), api (queries, argument checks, graph capture refused)
 * Exit 0 when every scenario passed.
 */
#define _GNU_SOURCE
#include "ipc_proto.h"
#include "hp_elem.h"
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void *hpi_host_stream_new(void);
int hpi_host_stream_sync(void *stream, double seconds);
int hpi_host_stream_query(void *stream);
void hpi_host_stream_set_capturing(void *stream, int on);

static int bad;
static const char *scen;
static int my_rank;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "check_ipc: %s rank %d:%d: ", scen, my_rank, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
            bad = 1;                                                                              \
        }                                                                                         \
    } while (0)
#define OK(call) CHECK((call) == ncclSuccess, "%s: %s", #call, ncclGetLastError(NULL))

#include "check_ipc.h"

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------- harness */

typedef void (*scen_fn)(int rank, int n, const ncclUniqueId *ids);

static ncclComm_t join(const ncclUniqueId *id, int n, int rank)
{
    ncclComm_t c = NULL;
    ncclResult_t rc = ncclCommInitRank(&c, n, *id, rank);
    CHECK(rc == ncclSuccess && c != NULL, "ncclCommInitRank: %d (%s)", (int)rc, ncclGetLastError(NULL));
    if (c == NULL)
        exit(1);
    return c;
}

static void sync_ok(void *s, const char *what)
{
    CHECK(hpi_host_stream_sync(s, 10) == 0, "%s: the stream did not complete within 10 s", what);
}

static int run(const char *name, int n, scen_fn f, double limit)
{
    ncclUniqueId ids[4];
    pid_t pid[HPI_MAX_RANKS];
    char path[128];
    int fails = 0;
    for (int i = 0; i < 4; i++)
        ncclGetUniqueId(&ids[i]);
    fflush(stdout);
    for (int r = 0; r < n; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            scen = name;
            my_rank = r;
            alarm((unsigned)limit);
            f(r, n, ids);
            fflush(stderr);
            _exit(bad ? 1 : 0);
        }
    }
    for (int k = 0; k < n; k++) {   /* in any order: a rank that exits early is reaped at once */
        int st, r = 0;
        pid_t w = wait(&st);
        while (r < n - 1 && pid[r] != w)
            r++;
        snprintf(path, sizeof(path), "rm -f /dev/shm/hpipc-m-%d-*", (int)w);   /* an exit without atexit */
        if (system(path) != 0)
            fprintf(stderr, "check_ipc: cannot clean /dev/shm\n");
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "check_ipc: %s (%d ranks): rank %d %s %d\n", name, n, r,
                    WIFSIGNALED(st) ? "was killed by signal (SIGALRM: over the time limit)" : "exited",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            fails++;
        }
    }
    printf("check_ipc: %-11s %d ranks: %s\n", name, n, fails ? "FAILED" : "ok");
    return fails != 0;
}

/* -------------------------------------------------------- scenarios */

static void sc_collectives(int rank, int N, const ncclUniqueId *ids)
{
    static const int dts[] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat64, ncclInt64, ncclInt32, ncclUint8};
    static const int ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    ncclComm_t c = join(&ids[0], N, rank);
    void *s = hpi_host_stream_new();
    size_t n = 3001, k = 700;
    char *a = malloc(n * 8 * N), *b = malloc(n * 8 * N);
    double sc[HPI_MAX_RANKS];
    float mine;
    ncclRedOp_t pm;

    for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            int dt = dts[d], op = ops[o];
            if (op == ncclAvg && (dt == ncclUint8 || dt == ncclInt32))
                continue;
            fill(dt, a, n, rank, 0);
            OK(ncclAllReduce(a, a, n, dt, op, c, s));
            sync_ok(s, "allreduce");
            same("allreduce in place", dt, op, N, a, n, 0, NULL);
        }
    fill(ncclFloat32, a, n, rank, 0);
    OK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, c, s));
    OK(ncclAllReduce(a, b, 0, ncclFloat32, ncclSum, c, s));
    sync_ok(s, "allreduce");
    same("allreduce out of place", ncclFloat32, ncclSum, N, b, n, 0, NULL);
    same_vals("allreduce's send buffer", ncclFloat32, rank, a, n, 0);
    memset(b, 0, n * 4);
    OK(ncclReduce(a, b, n, ncclFloat32, ncclMax, N - 1, c, s));
    sync_ok(s, "reduce");
    if (rank == N - 1)
        same("reduce", ncclFloat32, ncclMax, N, b, n, 0, NULL);
    /* reduce-scatter: rank r's block of N*k is elements [r*k, (r+1)*k) */
    fill(ncclFloat32, a, (size_t)N * k, rank, 0);
    OK(ncclReduceScatter(a, b, k, ncclFloat32, ncclSum, c, s));
    sync_ok(s, "reducescatter");
    same("reducescatter", ncclFloat32, ncclSum, N, b, k, (size_t)rank * k, NULL);
    /* broadcast from 1 % N, out of place, then in place from 0 */
    fill(ncclFloat32, a, n, rank, 0);
    memset(b, 0, n * 4);
    OK(ncclBroadcast(a, b, n, ncclFloat32, 1 % N, c, s));
    sync_ok(s, "broadcast");
    same_vals("broadcast", ncclFloat32, 1 % N, b, n, 0);
    OK(ncclBcast(a, n, ncclFloat32, 0, c, s));
    sync_ok(s, "bcast");
    same_vals("bcast", ncclFloat32, 0, a, n, 0);
    /* allgather, then all-to-all, gather, scatter: segment p of rank r's
     * send buffer holds rank r's values from p*k */
    fill(ncclFloat32, a, k, rank, 0);
    OK(ncclAllGather(a, b, k, ncclFloat32, c, s));
    sync_ok(s, "allgather");
    for (int p = 0; p < N; p++)
        same_vals("allgather", ncclFloat32, p, b + (size_t)p * k * 4, k, 0);
    fill(ncclFloat32, a, (size_t)N * k, rank, 0);
    OK(ncclAlltoAll(a, b, k, ncclFloat32, c, s));
    sync_ok(s, "alltoall");
    for (int p = 0; p < N; p++)
        same_vals("alltoall", ncclFloat32, p, b + (size_t)p * k * 4, k, (size_t)rank * k);
    fill(ncclFloat32, a, k, rank, 0);
    OK(ncclGather(a, b, k, ncclFloat32, 0, c, s));
    sync_ok(s, "gather");
    for (int p = 0; p < N && rank == 0; p++)
        same_vals("gather", ncclFloat32, p, b + (size_t)p * k * 4, k, 0);
    fill(ncclFloat32, a, (size_t)N * k, rank, 0);
    OK(ncclScatter(a, b, k, ncclFloat32, N - 1, c, s));
    sync_ok(s, "scatter");
    same_vals("scatter", ncclFloat32, N - 1, b, k, (size_t)rank * k);
    /* premultiplied sums: a host scalar, then one in "device" memory */
    for (int r = 0; r < N; r++)
        sc[r] = 0.5 * (r + 1);
    mine = (float)sc[rank];
    for (int dev = 0; dev < 2; dev++) {
        OK(ncclRedOpCreatePreMulSum(&pm, &mine, ncclFloat32, dev ? ncclScalarDevice : ncclScalarHostImmediate, c));
        fill(ncclFloat32, a, n, rank, 0);
        OK(ncclAllReduce(a, b, n, ncclFloat32, pm, c, s));
        sync_ok(s, "premulsum");
        same(dev ? "premulsum (device scalar)" : "premulsum", ncclFloat32, ncclSum, N, b, n, 0, sc);
        OK(ncclRedOpDestroy(pm, c));
    }
    OK(ncclCommDestroy(c));
    free(a);
    free(b);
}

static void sc_p2p(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c = join(&ids[0], N, rank);
    void *s = hpi_host_stream_new();
    size_t n = 50001;
    char *a = malloc(n), *b = malloc(n);
    int next = (rank + 1) % N, prev = (rank + N - 1) % N;
    for (int round = 0; round < 2; round++) {
        fill(ncclUint8, a, n, rank, round);
        OK(ncclGroupStart());
        OK(ncclSend(a, n, ncclUint8, next, c, s));
        OK(ncclRecv(b, n, ncclUint8, prev, c, s));
        OK(ncclGroupEnd());
        sync_ok(s, "ring");
        same_vals("ring", ncclUint8, prev, b, n, round);
    }
    if (N == 2) {
        /* 6 one-chunk messages each way, receives called first: rank 0 in
         * a group of its receives, then one of its sends, rank 1 all in
         * one group */
        enum { M = 6, L = 3000 };
        fill(ncclUint8, a, M * L, rank, 7);
        OK(ncclGroupStart());
        for (int m = 0; m < M; m++)
            OK(ncclRecv(b + m * L, L, ncclUint8, 1 - rank, c, s));
        if (rank == 0) {
            OK(ncclGroupEnd());
            OK(ncclGroupStart());
        }
        for (int m = 0; m < M; m++)
            OK(ncclSend(a + m * L, L, ncclUint8, 1 - rank, c, s));
        OK(ncclGroupEnd());
        sync_ok(s, "receives first");
        same_vals("receives first", ncclUint8, 1 - rank, b, M * L, 7);
        /* a lone send, then a lone receive on the other rank, later */
        fill(ncclUint8, a, 30000, rank, 5);
        if (rank == 0) {
            OK(ncclSend(a, 30000, ncclInt8, 1, c, s));
            CHECK(hpi_host_stream_query(s) == 0, "a send of more than the FIFO completed before its receive");
        } else {
            nap(0.2);
            OK(ncclRecv(b, 30000, ncclInt8, 0, c, s));
        }
        sync_ok(s, "lone send");
        if (rank == 1)
            same_vals("lone send", ncclUint8, 0, b, 30000, 5);
    }
    OK(ncclCommDestroy(c));
}

static void sc_mismatch(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c = join(&ids[0], N, rank);
    void *s = hpi_host_stream_new();
    float *a = calloc(200, 4);
    ncclResult_t rc, ar = ncclSuccess;
    const char *e;
    if (rank == 1)
        nap(0.2);   /* (rank 0 posts first: rank 1 finds the mismatch) */
    rc = ncclAllReduce(a, a, rank == 0 ? 100 : 200, ncclFloat32, ncclSum, c, s);
    e = ncclGetLastError(NULL);
    if (rank == 1) {
        CHECK(rc == ncclInvalidUsage, "a mismatched count returned %d", (int)rc);
        CHECK(strstr(e, "rank 1's ncclAllReduce #1 (200 x float32, sum)") != NULL &&
                  strstr(e, "rank 0's ncclAllReduce #1 (100 x float32, sum)") != NULL,
              "the message does not name both sides: %s", e);
    } else {
        CHECK(rc == ncclSuccess, "the first side's call failed: %d", (int)rc);
        for (int i = 0; i < 40 && ar == ncclSuccess; i++) {
            nap(0.05);
            ncclCommGetAsyncError(c, &ar);
        }
        e = ncclGetLastError(NULL);
        CHECK(ar == ncclRemoteError && strstr(e, "rank 1 failed") != NULL && strstr(e, "100 x float32") != NULL,
              "the first side's asynchronous error: %d, %s", (int)ar, e);
        rc = ncclAllReduce(a, a, 100, ncclFloat32, ncclSum, c, s);
        CHECK(rc == ncclRemoteError, "a call on the failed communicator returned %d", (int)rc);
    }
    OK(ncclCommAbort(c));
}

static void sc_mismatch_p2p(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c = join(&ids[0], N, rank);
    void *s = hpi_host_stream_new();
    char *a = calloc(1000, 1);
    ncclResult_t rc;
    if (rank == 0) {
        OK(ncclSend(a, 100, ncclFloat32, 1, c, s));
    } else {
        nap(0.2);
        rc = ncclRecv(a, 50, ncclFloat32, 0, c, s);
        CHECK(rc == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "rank 1's ncclRecv #1 (50 x float32, 200 "
                                                 "bytes, from rank 0)") != NULL &&
                  strstr(ncclGetLastError(NULL), "rank 0's ncclSend #1 (100 x float32, 400 bytes, to rank 1)") != NULL,
              "a receive of another size: %d, %s", (int)rc, ncclGetLastError(NULL));
    }
    nap(0.3);
    OK(ncclCommAbort(c));
}

static void sc_unmatched(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c;
    void *s = hpi_host_stream_new();
    char *a = calloc(1000, 1);
    ncclResult_t ar = ncclSuccess;
    setenv("HP_IPC_TIMEOUT", "1", 1);
    c = join(&ids[0], N, rank);
    if (rank == 0) {
        OK(ncclSend(a, 1000, ncclUint8, 1, c, s));
        nap(0.3);
        CHECK(!hpi_host_stream_query(s), "a send without a receive completed");
        for (int i = 0; i < 60 && ar == ncclSuccess; i++) {
            nap(0.05);
            ncclCommGetAsyncError(c, &ar);
        }
        CHECK(ar == ncclRemoteError && strstr(ncclGetLastError(NULL), "rank 0's ncclSend #1 (1000 x uint8, 1000 "
                                                 "bytes, to rank 1) has had no matching call on rank 1") != NULL,
              "the unmatched send: %d, %s", (int)ar, ncclGetLastError(NULL));
        OK(ncclCommAbort(c));
        CHECK(hpi_host_stream_sync(s, 2) == 0, "the stream did not drain after ncclCommAbort");
    } else {
        for (int i = 0; i < 100 && ar == ncclSuccess; i++) {
            nap(0.05);
            ncclCommGetAsyncError(c, &ar);
        }
        CHECK(ar == ncclRemoteError && strstr(ncclGetLastError(NULL), "rank 0 failed: rank 0's ncclSend #1") != NULL,
              "the peer of the unmatched send: %d, %s", (int)ar, ncclGetLastError(NULL));
        OK(ncclCommAbort(c));
    }
}

static void sc_abort(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c = join(&ids[0], N, rank);
    ncclResult_t ar = ncclSuccess;
    if (rank == 0) {
        OK(ncclCommAbort(c));
        return;
    }
    for (int i = 0; i < 60 && ar == ncclSuccess; i++) {
        nap(0.05);
        ncclCommGetAsyncError(c, &ar);
    }
    CHECK(ar == ncclRemoteError && strstr(ncclGetLastError(NULL), "rank 0 aborted") != NULL,
          "the peer of an aborted rank: %d, %s", (int)ar, ncclGetLastError(NULL));
    OK(ncclCommDestroy(c));
}

static void sc_opposite(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c[2] = {join(&ids[0], N, rank), join(&ids[1], N, rank)};
    void *s[2] = {hpi_host_stream_new(), hpi_host_stream_new()};
    size_t n = 20000;
    float *a[2] = {malloc(n * 4), malloc(n * 4)};
    for (int j = 0; j < 2; j++) {
        int k = rank == 0 ? j : 1 - j;
        fill(ncclFloat32, a[k], n, rank, 0);
        OK(ncclAllReduce(a[k], a[k], n, ncclFloat32, ncclSum, c[k], s[k]));
        if (j == 0)
            nap(0.1);   /* the first is enqueued everywhere before the second */
    }
    for (int k = 0; k < 2; k++) {
        sync_ok(s[k], "opposite orders");
        same("opposite orders", ncclFloat32, ncclSum, N, a[k], n, 0, NULL);
        OK(ncclCommDestroy(c[k]));
    }
}

static void sc_split(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c = join(&ids[0], N, rank), d = NULL;
    void *s = hpi_host_stream_new();
    int color = rank == 0 ? NCCL_SPLIT_NOCOLOR : rank % 2, cnt = -1, me = -1;
    float x[4] = {(float)rank, 1, 2, 3};
    OK(ncclCommSplit(c, color, -rank, &d, NULL));
    if (rank == 0) {
        CHECK(d == NULL, "NCCL_SPLIT_NOCOLOR gave a communicator");
    } else if (d != NULL) {
        OK(ncclCommCount(d, &cnt));
        OK(ncclCommUserRank(d, &me));
        CHECK(cnt == (color == 1 ? 2 : 1) && me == (rank == 3 || color == 0 ? 0 : 1),
              "split: rank %d of %d (color %d)", me, cnt, color);
        OK(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, d, s));
        sync_ok(s, "split");
        CHECK(x[0] == (color == 1 ? 4.0f : 2.0f), "the split's sum: %g", x[0]);
        OK(ncclCommDestroy(d));
    } else {
        CHECK(0, "no communicator from ncclCommSplit");
    }
    OK(ncclCommDestroy(c));
}

static void sc_shrink(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c = join(&ids[0], N, rank), d = NULL;
    void *s = hpi_host_stream_new();
    int ex = 1, cnt = -1;
    float x = (float)rank + 1;
    if (rank != 1) {
        OK(ncclCommShrink(c, &ex, 1, &d, NULL, NCCL_SHRINK_DEFAULT));
        OK(ncclCommCount(d, &cnt));
        CHECK(cnt == N - 1, "shrink: %d ranks", cnt);
        OK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, d, s));
        sync_ok(s, "shrink");
        CHECK(x == (float)(N * (N + 1) / 2 - 2), "the shrunk communicator's sum: %g", x);
        OK(ncclCommDestroy(d));
    }
    OK(ncclCommDestroy(c));
}

static void sc_nonblocking(int rank, int N, const ncclUniqueId *ids)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclComm_t c = NULL;
    ncclResult_t rc, st = ncclInProgress;
    void *s = hpi_host_stream_new();
    float x = 1;
    cfg.blocking = 0;
    if (rank == 1)
        nap(0.2);
    rc = ncclCommInitRankConfig(&c, N, ids[0], rank, &cfg);
    CHECK(c != NULL && (rc == ncclInProgress || rc == ncclSuccess), "non-blocking creation: %d", (int)rc);
    if (rank == 0)
        CHECK(rc == ncclInProgress, "a rank missing, yet ncclCommInitRankConfig returned %d", (int)rc);
    for (int i = 0; i < 200 && st == ncclInProgress; i++) {
        OK(ncclCommGetAsyncError(c, &st));
        nap(0.01);
    }
    CHECK(st == ncclSuccess, "the non-blocking creation ended in %d", (int)st);
    OK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, s));
    sync_ok(s, "non-blocking");
    CHECK(x == (float)N, "sum %g", x);
    OK(ncclCommDestroy(c));
}

static void sc_gone(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c = join(&ids[0], N, rank);
    ncclResult_t ar = ncclSuccess;
    if (rank == 1)
        _exit(0);   /* without ncclCommDestroy */
    for (int i = 0; i < 60 && ar == ncclSuccess; i++) {
        nap(0.05);
        ncclCommGetAsyncError(c, &ar);
    }
    CHECK(ar == ncclRemoteError && strstr(ncclGetLastError(NULL), "rank 1 (process") != NULL,
          "a peer gone: %d, %s", (int)ar, ncclGetLastError(NULL));
    OK(ncclCommAbort(c));
}

static const ncclUniqueId *thr_id;
static void *thr_rank(void *arg)
{
    int rank = (int)(intptr_t)arg;
    ncclComm_t c = join(thr_id, 2, rank);
    void *s = hpi_host_stream_new();
    size_t n = 9000;
    float *a = malloc(n * 4), *b = malloc(n * 4), *x = malloc(n * 4);
    fill(ncclFloat32, a, n, rank, 0);
    OK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, c, s));
    /* (a group's send and receive progress apart, as NCCL's: not into the
     * buffer the send reads) */
    OK(ncclGroupStart());
    OK(ncclSend(a, n, ncclFloat32, 1 - rank, c, s));
    OK(ncclRecv(x, n, ncclFloat32, 1 - rank, c, s));
    OK(ncclGroupEnd());
    sync_ok(s, "threads");
    same("threads", ncclFloat32, ncclSum, 2, b, n, 0, NULL);
    same_vals("threads' exchange", ncclFloat32, 1 - rank, x, n, 0);
    OK(ncclCommDestroy(c));
    return NULL;
}

static void sc_threads(int rank, int N, const ncclUniqueId *ids)
{
    pthread_t t[2];
    thr_id = &ids[0];
    for (int r = 0; r < 2; r++)
        pthread_create(&t[r], NULL, thr_rank, (void *)(intptr_t)r);
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
}

static void sc_group(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c[2] = {join(&ids[0], N, rank), join(&ids[1], N, rank)};
    void *s[2] = {hpi_host_stream_new(), hpi_host_stream_new()};
    size_t n = 5000;
    float *a = malloc(n * 4), *a2 = malloc(n * 4), *b = malloc(n * 4 * N);
    fill(ncclFloat32, a, n, rank, 0);
    fill(ncclFloat32, a2, n, rank, 0);
    OK(ncclGroupStart());
    OK(ncclAllReduce(a, a, n, ncclFloat32, ncclMax, c[0], s[0]));
    OK(ncclGroupStart());
    OK(ncclAllGather(a2, b, n, ncclFloat32, c[1], s[1]));
    OK(ncclGroupEnd());
    OK(ncclGroupEnd());
    sync_ok(s[0], "group");
    sync_ok(s[1], "group");
    same("group's allreduce", ncclFloat32, ncclMax, N, a, n, 0, NULL);
    for (int p = 0; p < N; p++)
        same_vals("group's allgather", ncclFloat32, p, b + (size_t)p * n, n, 0);
    OK(ncclCommDestroy(c[0]));
    OK(ncclCommDestroy(c[1]));
}

static void sc_api(int rank, int N, const ncclUniqueId *ids)
{
    ncclComm_t c = join(&ids[0], 1, 0), d = NULL;
    void *s = hpi_host_stream_new(), *m = NULL, *h = NULL;
    int v = 0, x = 0;
    float f[4] = {1, 2, 3, 4};
    ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
    ncclRedOp_t pm;
    OK(ncclGetVersion(&v));
    CHECK(v == NCCL_VERSION_CODE, "version %d", v);
    CHECK(strcmp(ncclGetErrorString(ncclInvalidUsage), "invalid usage") == 0, "error string");
    OK(ncclCommCount(c, &x));
    CHECK(x == 1, "count %d", x);
    OK(ncclCommCuDevice(c, &x));
    OK(ncclCommRegister(c, f, sizeof(f), &h));
    OK(ncclCommDeregister(c, h));
    OK(ncclMemAlloc(&m, 64));
    OK(ncclMemFree(m));
    OK(ncclAllReduce(f, f, 4, ncclFloat32, ncclAvg, c, NULL));   /* the legacy stream */
    sync_ok(NULL, "api");
    CHECK(f[3] == 4.0f, "a one-rank average: %g", f[3]);
    CHECK(ncclSend(f, 1, ncclFloat32, 0, c, s) == ncclInvalidUsage, "a send to itself was accepted");
    CHECK(ncclBroadcast(f, f, 1, ncclFloat32, 3, c, s) == ncclInvalidArgument, "root 3 of 1 rank was accepted");
    CHECK(ncclAllReduce(f, f, 1, ncclFloat8e4m3, ncclSum, c, s) == ncclInvalidArgument, "an fp8 sum was accepted");
    CHECK(ncclAllReduce(f, f, 1, ncclFloat32, (ncclRedOp_t)77, c, s) == ncclInvalidArgument, "op 77 was accepted");
    CHECK(ncclAllReduce(f, f, 1, ncclFloat32, ncclSum, NULL, s) == ncclInvalidArgument, "a NULL comm was accepted");
    OK(ncclRedOpCreatePreMulSum(&pm, &f[0], ncclFloat64, ncclScalarHostImmediate, c));
    CHECK(ncclAllReduce(f, f, 1, ncclFloat32, pm, c, s) == ncclInvalidArgument, "a premulsum of another type");
    OK(ncclRedOpDestroy(pm, c));
    hpi_host_stream_set_capturing(s, 1);
    CHECK(ncclAllReduce(f, f, 1, ncclFloat32, ncclSum, c, s) == ncclInvalidUsage &&
              strstr(ncclGetLastError(NULL), "CUDA graph") != NULL, "a capturing stream was accepted");
    hpi_host_stream_set_capturing(s, 0);
    OK(ncclGroupStart());
    OK(ncclAllReduce(f, f, 1, ncclFloat32, ncclSum, c, s));
    OK(ncclGroupSimulateEnd(&si));
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd without a group was accepted");
    CHECK(ncclCommWindowRegister(c, f, 16, NULL, 0) == ncclInvalidUsage, "window registration");
    OK(ncclCommInitAll(&d, 1, NULL));
    OK(ncclCommDestroy(d));
    OK(ncclCommDestroy(c));
}

static int t_elem(void)
{
    int fails = 0;
    uint32_t u = 0x12345678;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = hpi_h2f((uint16_t)h), b = hp_f16_to_f32((uint16_t)h), g = hpi_b2f((uint16_t)h);
        fails += !(isnan(a) ? isnan(b) : hpi_f2u(a) == hp_f2u(b));
        fails += !(isnan(g) ? 1 : hpi_f2u(g) == hp_f2u(hp_bf16_to_f32((uint16_t)h)));
    }
    for (int i = 0; i < 2000000; i++) {
        float f;
        u = u * 1664525u + 1013904223u;
        f = hpi_u2f(i < 1000000 ? u : (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 50) << 23));
        if (isnan(f))
            continue;
        fails += hpi_f2h(f) != hp_f32_to_f16(f);
        fails += hpi_f2b(f) != hp_f32_to_bf16(f);
    }
    fails += !isnan(hpi_h2f(hpi_f2h(NAN))) + !isnan(hpi_b2f(hpi_f2b(NAN)));
    printf("check_ipc: %-11s 16-bit conversions against hp_elem.h: %s\n", "elem", fails ? "FAILED" : "ok");
    return fails != 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        scen_fn     f;
        int         n[3];
    } all[] = {
        {"collectives", sc_collectives, {2, 3, 4}}, {"p2p", sc_p2p, {2, 3, 0}}, {"mismatch", sc_mismatch, {2, 0, 0}},
        {"mismatch", sc_mismatch_p2p, {2, 0, 0}}, {"unmatched", sc_unmatched, {2, 0, 0}},
        {"abort", sc_abort, {2, 0, 0}},
        {"opposite", sc_opposite, {2, 0, 0}}, {"split", sc_split, {4, 0, 0}}, {"shrink", sc_shrink, {3, 0, 0}},
        {"nonblocking", sc_nonblocking, {2, 0, 0}}, {"gone", sc_gone, {2, 0, 0}}, {"threads", sc_threads, {1, 0, 0}},
        {"group", sc_group, {2, 3, 0}}, {"api", sc_api, {1, 0, 0}},
    };
    int fails = 0;
    setenv("HP_IPC_CHUNK", "4096", 1);
    setenv("HP_IPC_SLOTS", "2", 1);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || strcmp(argv[1], "elem") == 0)
        fails += t_elem();
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strcmp(argv[a], all[i].name) == 0;
        for (int k = 0; k < 3 && want && all[i].n[k] > 0; k++)
            fails += run(all[i].name, all[i].n[k], all[i].f, 30);
    }
    if (fails == 0)
        printf("check_ipc: ok\n");
    return fails ? 1 : 0;
}
