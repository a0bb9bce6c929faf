/*
 * Scenarios of the compressed ncclAllReduce under the stand-ins' strict
 * rules (tests/gpu/nccl/run_nccl_rules.sh; doc/dev/standins.md lists each rule with
 * where the real API documents it): what a real driver or NCCL accepts
 * without an error while the GPU computes garbage, or one rank waits for
 * ever, and what the stand-ins stop instead (exit 87, a line naming both
 * sides).  An MPI program under the preload, as tests/gpu/nccl/nccl_scenarios.c.
 *
 *   nccl_rules CASE MOCKDIR/libcuda.so.1
 *
 *   destroy    stream-ordered calls, the last one followed at once by
 *              ncclCommDestroy: the communicator's stream-ordered memory is
 *              freed in its stream order, after the call's work (not at
 *              once, under work still queued); the result the same bits
 *              as a twin communicator's, waited for;
 *   finalize   the same with ncclCommFinalize, then ncclCommDestroy;
 *   twostream  one communicator from two streams, as PyTorch's async_op
 *              does: a stream-ordered call on one stream followed at once
 *              by a call on the other, stream-ordered or host-synchronous
 *              (HIPRESS_NCCL_ASYNC=off for it), SA then SB and SB then SA;
 *              each call the MPI path's bits (a host-synchronous call must
 *              not stage through memory the earlier call's queued work
 *              still reads);
 *   localfail  one rank's wait fails (the stand-in answers its k-th
 *              completed poll with an error, for every k a call makes), in
 *              a communicator's first call and in a host-synchronous call
 *              after a stream-ordered one: every rank still makes the same
 *              NCCL calls (the stand-in NCCL compares them) and ends with
 *              the same bits (the call's result, or NaN on every rank);
 *   capfail    one rank's query of whether the stream is captured fails
 *              (cuStreamIsCapturing answers an error), in a call alone and
 *              in a group of one (PyTorch's): that rank must not take the
 *              real ncclAllReduce while the others compress; the same NCCL
 *              calls and the same bits everywhere;
 *   probe      a communicator's first compressed call while another
 *              stream of rank 0 holds an NCCL operation that waits for
 *              rank 1, which makes it only after that call: nothing in the
 *              call may wait for the whole device (the codec's probe, its
 *              memory, the loading of the kernels come before: at the
 *              communicator's creation); no deadlock, the same bits;
 *   groupa2a   the program's own group of an eligible ncclAllReduce with an
 *              ncclAlltoAll (then ncclGather, ncclScatter): a group of two
 *              operations, so the allreduce goes to NCCL in it, exact (the
 *              bits of an uncompressed twin), the other operation's data
 *              right, the calls counted in a group.
 * Rank 0 prints "nccl_rules CASE: ok" or the program exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mock_nccl.h"
#include "nccl_scen.h"

/* Calls of T steps on a communicator and its twin (the same data): the
 * twin's waited for after each, the last call of the other followed at
 * once by its end (ncclCommFinalize first when `finalize`); the results
 * the same bits. */
static void case_end(int finalize)
{
    const size_t n = 200000;
    const int T = 4;
    ncclComm_t c = new_comm(), twin = new_comm();
    void *d = dev(n), *dt = dev(n);
    float *h = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    for (int t = 0; t < T; t++) {
        fill(h, n, t, 11);
        dwrite(d, h, n * sizeof(float));
        dwrite(dt, h, n * sizeof(float));
        CHECK(call(twin, SB, dt, n, NULL) == ncclSuccess, "twin call %d", t);
        cu_sync(SB);
        CHECK(call(c, SA, d, n, NULL) == ncclSuccess, "call %d", t);
        if (t < T - 1)
            continue;
        /* at once: the call's work may still be queued */
        if (finalize)
            CHECK(ncclCommFinalize(c) == ncclSuccess, "ncclCommFinalize");
        CHECK(ncclCommDestroy(c) == ncclSuccess, "ncclCommDestroy");
    }
    dread(want, dt, n * sizeof(float));
    same_bits(d, want, n, finalize ? "the call before ncclCommFinalize" : "the call before ncclCommDestroy");
    nccl_ok(twin, "the twin");
    CHECK(ncclCommDestroy(twin) == ncclSuccess, "ncclCommDestroy of the twin");
    cu_ctx_sync();
    free(h);
    free(want);
}

/* One call on (c, s) of buffer k (n[k] floats): its input written (the
 * scenario's streams waited for first) and reduced through MPI on the
 * host into want[k], the MPI path's bits for the same calls. */
static void prep(MPI_Comm mc, void *d, float *want, size_t n, int t, int k)
{
    fill(want, n, t, 20 + k);
    dwrite(d, want, n * sizeof(float));
    CHECK(MPI_Allreduce(MPI_IN_PLACE, want, (int)n, MPI_FLOAT, MPI_SUM, mc) == MPI_SUCCESS, "MPI");
}

static void case_twostream(void)
{
    enum { K = 5 };
    const size_t n[K] = {150000, 90001, 90002, 90003, 90004};
    ncclComm_t c = new_comm();
    MPI_Comm mc = new_mpi_comm();
    void *d[K];
    float *want[K];
    char label[128];
    for (int k = 0; k < K; k++) {
        d[k] = dev(n[k]);
        want[k] = malloc(n[k] * sizeof(float));
    }
    /* the first calls: the steady state of buffer 0 on SA */
    for (int t = 0; t < 3; t++) {
        prep(mc, d[0], want[0], n[0], t, 0);
        CHECK(call(c, SA, d[0], n[0], NULL) == ncclSuccess, "warm-up %d", t);
        same_bits(d[0], want[0], n[0], "warm-up");
    }
    /* a stream-ordered call of buffer 0 on one stream, then at once buffer
     * k's on the other: stream-ordered (k odd) or host-synchronous
     * (HIPRESS_NCCL_ASYNC=off for it, k even); SA then SB, and SB then SA */
    for (int k = 1; k < K; k++) {
        int t = 2 + k, sync = k % 2 == 0;
        cudaStream_t s1 = k <= 2 ? SA : SB, s2 = k <= 2 ? SB : SA;
        prep(mc, d[0], want[0], n[0], t, 0);
        prep(mc, d[k], want[k], n[k], t, k);
        CHECK(call(c, s1, d[0], n[0], NULL) == ncclSuccess, "step %d, the stream-ordered call", t);
        if (sync)
            CHECK(comm_set(c, "HIPRESS_NCCL_ASYNC", "off") == HIPRESS_OK, "HIPRESS_NCCL_ASYNC=off");
        CHECK(call(c, s2, d[k], n[k], NULL) == ncclSuccess, "step %d, the call on the other stream", t);
        if (sync)
            CHECK(comm_set(c, "HIPRESS_NCCL_ASYNC", "auto") == HIPRESS_OK, "HIPRESS_NCCL_ASYNC=auto");
        snprintf(label, sizeof(label), "step %d: the stream-ordered call on %s", t, s1 == SA ? "SA" : "SB");
        same_bits(d[0], want[0], n[0], label);
        snprintf(label, sizeof(label), "step %d: the %s call on %s right after it", t,
                 sync ? "host-synchronous" : "stream-ordered", s2 == SA ? "SA" : "SB");
        same_bits(d[k], want[k], n[k], label);
    }
    nccl_ok(c, "twostream");
    MPI_Comm_free(&mc);
    for (int k = 0; k < K; k++)
        free(want[k]);
}

static void (*fail_wait)(int);

/* A call of (c, s) on d with rank 1's k-th wait failing (k 0: none); the
 * waits it made on rank 1 (the same on every k). */
static unsigned long long call_failing(ncclComm_t c, cudaStream_t s, void *d, size_t n, int k, const char *label)
{
    unsigned long long w0 = count("waits"), w;
    float *h = malloc(n * sizeof(float));
    if (rank == 1 && k > 0)
        fail_wait(k);
    (void)call(c, s, d, n, NULL);
    w = count("waits") - w0;
    if (rank == 1)
        fail_wait(1 << 30);
    dread(h, d, n * sizeof(float));
    CHECK(same_everywhere(h, n), "%s, rank 1's wait %d failed: the results differ between ranks", label, k);
    nccl_ok(c, label);
    free(h);
    return w;
}

static void case_localfail(void)
{
    const size_t n = 100000;
    void *d0 = dev(n), *d1 = dev(n);
    float *h = malloc(n * sizeof(float));
    unsigned long long waits;
    char label[96];
    *(void **)&fail_wait = dlsym(RTLD_DEFAULT, "mock_cuda_fail_wait");
    CHECK(fail_wait != NULL, "mock_cuda_fail_wait");
    if (fail_wait == NULL)
        return;
    /* a communicator's first call */
    fill(h, n, 0, 31);
    dwrite(d0, h, n * sizeof(float));
    waits = call_failing(new_comm(), SA, d0, n, 0, "a first call");
    MPI_Bcast(&waits, 1, MPI_UNSIGNED_LONG_LONG, 1, MPI_COMM_WORLD);
    for (int k = 1; k <= (int)waits; k++) {
        dwrite(d0, h, n * sizeof(float));
        snprintf(label, sizeof(label), "a first call (wait %d of %llu)", k, waits);
        call_failing(new_comm(), SA, d0, n, k, label);
    }
    /* a host-synchronous call on SB right after a stream-ordered one on SA */
    {
        ncclComm_t c = new_comm();
        int t = 0;
        for (int k = -3; k <= (int)waits; k++, t++) {
            fill(h, n, t, 32);
            dwrite(d0, h, n * sizeof(float));
            CHECK(call(c, SA, d0, n, NULL) == ncclSuccess, "call %d", t);
            if (k < 0)
                continue;   /* (the first calls: then stream-ordered) */
            fill(h, n, t, 33);
            dwrite(d1, h, n * sizeof(float));
            CHECK(comm_set(c, "HIPRESS_NCCL_ASYNC", "off") == HIPRESS_OK, "HIPRESS_NCCL_ASYNC=off");
            snprintf(label, sizeof(label), "a host-synchronous call (wait %d of %llu)", k, waits);
            if (k == 0) {
                waits = call_failing(c, SB, d1, n, 0, label);
                MPI_Bcast(&waits, 1, MPI_UNSIGNED_LONG_LONG, 1, MPI_COMM_WORLD);
            } else {
                call_failing(c, SB, d1, n, k, label);
            }
            CHECK(comm_set(c, "HIPRESS_NCCL_ASYNC", "auto") == HIPRESS_OK, "HIPRESS_NCCL_ASYNC=auto");
        }
    }
    if (rank == 0)
        printf("# localfail: every wait of a first call and of a host-synchronous call failed in turn on rank 1\n");
    free(h);
}

static void case_capfail(void)
{
    const size_t n = 120000;
    ncclComm_t c = new_comm();
    void *d = dev(n);
    float *h = malloc(n * sizeof(float));
    void (*fail_query)(int);
    char label[96];
    *(void **)&fail_query = dlsym(RTLD_DEFAULT, "mock_cuda_fail_capture_query");
    CHECK(fail_query != NULL, "mock_cuda_fail_capture_query");
    for (int t = 0; t < 7 && fail_query != NULL; t++) {
        int fails = t >= 3, group = t >= 5;
        ncclResult_t rc;
        fill(h, n, t, 41);
        dwrite(d, h, n * sizeof(float));
        if (fails && rank == 1)
            fail_query(1);
        if (group)
            ncclGroupStart();
        rc = ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c, SA);
        if (group)
            ncclGroupEnd();
        if (rank == 1)
            fail_query(1 << 30);
        snprintf(label, sizeof(label), "call %d%s%s", t, fails ? ", rank 1's capture query failing" : "",
                 group ? ", in a group of one" : "");
        dread(h, d, n * sizeof(float));
        CHECK(same_everywhere(h, n), "%s: the results differ between ranks (rc %d here)", label, (int)rc);
        nccl_ok(c, label);
    }
    free(h);
}

static void case_probe(void)
{
    const size_t n = 100000;
    ncclComm_t p = new_comm(), c = NULL;
    ncclUniqueId id;
    void *d = dev(n), *pd = dev(4);
    float *h = malloc(n * sizeof(float));
    unsigned long long d0;
    memset(&id, 0, sizeof(id));
    /* (through the wrapper, as PyTorch makes its communicators) */
    CHECK(ncclCommInitRank(&c, size, id, rank) == ncclSuccess && c != NULL, "ncclCommInitRank");
    comm_settings(c);
    fill(h, n, 0, 51);
    dwrite(d, h, n * sizeof(float));
    /* rank 0: an operation of another communicator, on another stream,
     * that waits for rank 1 (a pass-through: int64) */
    if (rank == 0)
        CHECK(ncclAllReduce(pd, pd, 2, ncclInt64, ncclSum, p, SB) == ncclSuccess, "the other operation");
    d0 = count("dev_syncs");
    CHECK(call(c, SA, d, n, NULL) == ncclSuccess, "the first compressed call");
    CHECK(count("dev_syncs") == d0, "the first compressed call waited for the whole device %llu times",
          count("dev_syncs") - d0);
    if (rank != 0)
        CHECK(ncclAllReduce(pd, pd, 2, ncclInt64, ncclSum, p, SB) == ncclSuccess, "the other operation");
    dread(h, d, n * sizeof(float));
    CHECK(same_everywhere(h, n), "the first compressed call: the results differ between ranks");
    nccl_ok(c, "probe");
    free(h);
}

/* The program's group of an eligible ncclAllReduce and `which`
 * (0 ncclAlltoAll, 1 ncclGather, 2 ncclScatter) of n2 floats a rank. */
static void group_with(ncclComm_t c, ncclComm_t twin, int which, size_t n, size_t n2)
{
    static const char *const names[] = {"ncclAlltoAll", "ncclGather", "ncclScatter"};
    void *d = dev(n), *dt = dev(n), *s2 = dev(n2 * (size_t)size), *r2 = dev(n2 * (size_t)size);
    float *h = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    float *h2 = malloc(n2 * (size_t)size * sizeof(float));
    hipress_nccl_stats_t s0, s1;
    void (*nstats)(hipress_nccl_stats_t *);
    char label[96];
    *(void **)&nstats = dlsym(RTLD_DEFAULT, "hipress_nccl_stats_get");
    fill(h, n, which, 60);
    dwrite(d, h, n * sizeof(float));
    dwrite(dt, h, n * sizeof(float));
    for (size_t i = 0; i < n2 * (size_t)size; i++)
        h2[i] = (float)(rank * 100000 + (int)i);
    dwrite(s2, h2, n2 * (size_t)size * sizeof(float));
    CHECK(ncclAllReduce(dt, dt, n, ncclFloat32, ncclSum, twin, SA) == ncclSuccess, "the twin's allreduce");
    nstats(&s0);
    CHECK(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
    CHECK(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c, SA) == ncclSuccess, "the group's allreduce");
    if (which == 0)
        CHECK(ncclAlltoAll(s2, r2, n2, ncclFloat32, c, SA) == ncclSuccess, "ncclAlltoAll");
    else if (which == 1)
        CHECK(ncclGather(s2, r2, n2, ncclFloat32, 0, c, SA) == ncclSuccess, "ncclGather");
    else
        CHECK(ncclScatter(s2, r2, n2, ncclFloat32, 0, c, SA) == ncclSuccess, "ncclScatter");
    CHECK(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd");
    nstats(&s1);
    dread(want, dt, n * sizeof(float));
    snprintf(label, sizeof(label), "the allreduce of a group with %s", names[which]);
    same_bits(d, want, n, label);
    CHECK(s1.in_group == s0.in_group + 1, "%s: %llu calls counted in the program's group, want 1", label,
          s1.in_group - s0.in_group);
    dread(h2, r2, n2 * (size_t)size * sizeof(float));
    for (int p = 0; p < size; p++)
        for (size_t i = 0; i < n2; i++) {
            /* what each rank got from rank p, where it got anything */
            float got = h2[(size_t)p * n2 + i], want2 = -1;
            if (which == 0)
                want2 = (float)(p * 100000 + (int)((size_t)rank * n2 + i));
            else if (which == 1 && rank == 0)
                want2 = (float)(p * 100000 + (int)i);
            else if (which == 2 && p == 0)
                want2 = (float)((int)((size_t)rank * n2 + i));
            if (want2 >= 0 && got != want2) {
                CHECK(0, "%s: element %zu from rank %d is %g, want %g", names[which], i, p, got, want2);
                p = size;
                break;
            }
        }
    free(h);
    free(want);
    free(h2);
}

static void case_groupa2a(void)
{
    ncclComm_t c = new_comm(), twin = new_comm();
    const size_t n = 80000;
    void *d = dev(n);
    float *h = malloc(n * sizeof(float));
    /* the twin passes everything through, exact; c compresses alone */
    CHECK(comm_set(twin, "HIPRESS_ENABLE", "0") == HIPRESS_OK, "HIPRESS_ENABLE=0 on the twin");
    for (int t = 0; t < 2; t++) {   /* c's first calls */
        fill(h, n, t, 61);
        dwrite(d, h, n * sizeof(float));
        CHECK(call(c, SA, d, n, NULL) == ncclSuccess, "first call %d", t);
    }
    for (int which = 0; which < 3; which++)
        group_with(c, twin, which, n, 1000);
    nccl_ok(c, "groupa2a");
    free(h);
}

int main(int argc, char **argv)
{
    scen_init(&argc, &argv, "nccl_rules");
    if (strcmp(argv[1], "destroy") == 0)
        case_end(0);
    else if (strcmp(argv[1], "finalize") == 0)
        case_end(1);
    else if (strcmp(argv[1], "twostream") == 0)
        case_twostream();
    else if (strcmp(argv[1], "localfail") == 0)
        case_localfail();
    else if (strcmp(argv[1], "capfail") == 0)
        case_capfail();
    else if (strcmp(argv[1], "probe") == 0)
        case_probe();
    else if (strcmp(argv[1], "groupa2a") == 0)
        case_groupa2a();
    else
        CHECK(0, "unknown case %s", argv[1]);
    return scen_end(argv[1]);
}
