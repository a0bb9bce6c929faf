/*
 * Scenarios of the compressed ncclAllReduce that hang or break on a GPU
 * when hipress synchronises what it must not (tests/gpu/nccl/run_nccl_scenarios.sh):
 * an MPI program under the preload, HIPRESS_NCCL=compress, the stand-in
 * NCCL's communicators spanning MPI_COMM_WORLD (MOCK_NCCL_MPI=1), the
 * stand-in driver (its device-wide synchronisations, captures and wait-for
 * graph: doc/dev/standins.md) and the emulated CUDA module.  Every rank must
 * end with the same bits, and no deadlock may be reported (the stand-in
 * ends a deadlocked process with 86).
 *
 *   nccl_scenarios CASE MOCKDIR/libcuda.so.1
 *
 *   twocomm     two communicators on two streams: two calls each in the
 *               same order (their first calls), then calls interleaved in
 *               opposite orders on even and odd ranks; the bits those of
 *               twin communicators called one after the other; no host or
 *               device-wide synchronisation in the interleaved calls;
 *   twocomm_cold  the same interleaving from the very first call;
 *   evict       HIPRESS_RESIDUAL_MAX_MB=2 on rank 1 only, two buffers of
 *               1.2 MB called in turn (each call evicts the other's
 *               residual there): the MPI path's bits with the same
 *               settings, and no synchronisation from the third call on;
 *   allocfail   a device allocation fails on rank 1 in a call that grows
 *               its memory (a new, larger buffer; the k-th allocation from
 *               its start, k = 1, 2, 3 in turn): the same NCCL calls on
 *               every rank (the stand-in checks counts), the same bits;
 *   ddp         DDP's buckets: three buffers in iteration 1, rebuilt at
 *               iteration 2 (two new buffers, new sizes), then steady:
 *               the MPI path's bits; no device-wide synchronisation from
 *               iteration 2 on, no host synchronisation from iteration 3;
 *   capture     a global-mode capture on another thread while steady-state
 *               calls run: not invalidated, the captured ncclAllReduce
 *               passed through unchanged (nothing of hipress' on that
 *               stream);
 *   capture_first  the same while a new communicator's first call runs;
 *   stats       the same calls through MPI_Allreduce and ncclAllReduce
 *               (host-synchronous) with a fixed plan: the same stats rows
 *               (compressed calls, raw and sent bytes, non-finite, errors);
 *   abort       a call that cannot complete (rank 1 never makes it) and
 *               ncclCommAbort from another thread of rank 0 in its middle:
 *               the call returns, nothing is left waiting.
 * Rank 0 prints "nccl_scenarios CASE: ok" or the program exits 1.
 * twocomm_cold is a known limit, run by hand (the script's header says
 * why).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <hipress.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mock_nccl.h"
#include "nccl_scen.h"

/* ---------------------------------------------------------------- cases */

/* Two communicators interleaved in opposite orders (from call `from` on;
 * before it, in the same order). */
static void case_twocomm(int from)
{
    const size_t n = 200000;
    const int T = 6;
    ncclComm_t a = new_comm(), b = new_comm(), ta = new_comm(), tb = new_comm();
    void *da = dev(n), *db = dev(n), *dta = dev(n), *dtb = dev(n);
    float *h = malloc(n * sizeof(float)), *ra = malloc(n * sizeof(float)), *rb = malloc(n * sizeof(float));
    char label[96];
    for (int t = 0; t < T; t++) {
        unsigned long long wa = 0, wb = 0;
        fill(h, n, t, 1);
        dwrite(da, h, n * sizeof(float));
        dwrite(dta, h, n * sizeof(float));
        fill(h, n, t, 2);
        dwrite(db, h, n * sizeof(float));
        dwrite(dtb, h, n * sizeof(float));
        if (t < from || rank % 2 == 0) {
            CHECK(call(a, SA, da, n, &wa) == ncclSuccess && call(b, SB, db, n, &wb) == ncclSuccess, "call %d", t);
        } else {
            CHECK(call(b, SB, db, n, &wb) == ncclSuccess && call(a, SA, da, n, &wa) == ncclSuccess, "call %d", t);
        }
        CHECK(t < 2 || (wa == 0 && wb == 0),
              "call %d: %llu and %llu host or device-wide synchronisations or copies in interleaved steady-state "
              "calls", t, wa, wb);
        /* the twins, one after the other, on one stream */
        CHECK(call(ta, SA, dta, n, NULL) == ncclSuccess && call(tb, SA, dtb, n, NULL) == ncclSuccess, "twins %d", t);
        dread(ra, dta, n * sizeof(float));
        dread(rb, dtb, n * sizeof(float));
        snprintf(label, sizeof(label), "communicator A, call %d", t);
        same_bits(da, ra, n, label);
        snprintf(label, sizeof(label), "communicator B, call %d", t);
        same_bits(db, rb, n, label);
    }
    nccl_ok(a, "communicator A");
    nccl_ok(b, "communicator B");
    free(h); free(ra); free(rb);
}

/* A residual evicted on rank 1 only: the MPI path's bits. */
static void case_evict(void)
{
    const size_t n = 300000;
    ncclComm_t c = new_comm();
    MPI_Comm mc = new_mpi_comm();
    void *d[2] = {dev(n), dev(n)};
    float *h[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    char label[96];
    if (rank == 1)
        CHECK(comm_set(c, "HIPRESS_RESIDUAL_MAX_MB", "2") == HIPRESS_OK &&
                  mpi_comm_set(mc, "HIPRESS_RESIDUAL_MAX_MB", "2") == HIPRESS_OK,
              "HIPRESS_RESIDUAL_MAX_MB on rank 1");
    for (int t = 0; t < 8; t++) {
        int k = t % 2;
        unsigned long long w = 0;
        fill(h[k], n, t, 3);
        dwrite(d[k], h[k], n * sizeof(float));
        CHECK(MPI_Allreduce(MPI_IN_PLACE, h[k], (int)n, MPI_FLOAT, MPI_SUM, mc) == MPI_SUCCESS, "MPI %d", t);
        CHECK(call(c, SA, d[k], n, &w) == ncclSuccess, "call %d", t);
        CHECK(t < 2 || w == 0, "call %d: %llu host or device-wide synchronisations or copies", t, w);
        snprintf(label, sizeof(label), "buffer %d, call %d (rank 1 evicts)", k, t);
        same_bits(d[k], h[k], n, label);
    }
    nccl_ok(c, "evict");
    MPI_Comm_free(&mc);
    free(h[0]); free(h[1]);
}

/* One stats path: the same calls through MPI_Allreduce on host buffers and
 * through ncclAllReduce on device buffers (host-synchronous, so that the
 * messages' lengths are known on the host), with a fixed plan, count the
 * same compressed calls, raw and message bytes, non-finite partitions,
 * exceptions and errors; a NaN in one call's input included. */
static void case_stats(void)
{
    const size_t n = 300000;
    ncclComm_t c = new_comm();
    MPI_Comm mc = new_mpi_comm();
    void *d = dev(n);
    float *h = malloc(n * sizeof(float));
    hipress_stats_t s0, s1, s2;
    unsigned long long m[5], q[5];
    CHECK(comm_set(c, "HIPRESS_NCCL_ASYNC", "off") == HIPRESS_OK, "HIPRESS_NCCL_ASYNC=off");
    stats_get(&s0);
    for (int t = 0; t < 4; t++) {
        fill(h, n, t, 6);
        if (t == 2 && rank == 0)
            h[n / 2] = NAN;
        CHECK(MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, mc) == MPI_SUCCESS, "MPI call %d", t);
    }
    stats_get(&s1);
    for (int t = 0; t < 4; t++) {
        fill(h, n, t, 6);
        if (t == 2 && rank == 0)
            h[n / 2] = NAN;
        dwrite(d, h, n * sizeof(float));
        CHECK(call(c, SA, d, n, NULL) == ncclSuccess, "NCCL call %d", t);
        syncall();
    }
    stats_get(&s2);
    m[0] = s1.compressed - s0.compressed, q[0] = s2.compressed - s1.compressed;
    m[1] = s1.bytes_raw - s0.bytes_raw, q[1] = s2.bytes_raw - s1.bytes_raw;
    m[2] = s1.bytes_wire - s0.bytes_wire, q[2] = s2.bytes_wire - s1.bytes_wire;
    m[3] = s1.nonfinite - s0.nonfinite, q[3] = s2.nonfinite - s1.nonfinite;
    m[4] = s1.errors - s0.errors, q[4] = s2.errors - s1.errors;
    CHECK(m[0] == 4 && m[1] == 4 * n * sizeof(float) && m[2] > 0 && m[3] > 0,
          "MPI: %llu compressed, %llu raw bytes, %llu sent, %llu non-finite", m[0], m[1], m[2], m[3]);
    for (int i = 0; i < 5; i++)
        CHECK(m[i] == q[i], "stats row %d: %llu through MPI, %llu through NCCL", i, m[i], q[i]);
    if (rank == 0)
        printf("# stats: %llu calls, %llu raw bytes, %llu sent, %llu non-finite, %llu errors on either path\n", q[0], q[1],
               q[2], q[3], q[4]);
    nccl_ok(c, "stats");
    MPI_Comm_free(&mc);
    free(h);
}

/* An allocation of rank 1 fails in a call that grows its memory. */
static void case_allocfail(void)
{
    for (int k = 1; k <= 3; k++) {
        const size_t n1 = 50000, n2 = 400000;
        ncclComm_t c = new_comm();
        void *d1 = dev(n1), *d2 = dev(n2);
        float *h = malloc(n2 * sizeof(float));
        for (int t = 0; t < 3; t++) {
            fill(h, n1, t, 4);
            dwrite(d1, h, n1 * sizeof(float));
            CHECK(call(c, SA, d1, n1, NULL) == ncclSuccess, "warm-up call %d", t);
        }
        syncall();
        fill(h, n2, 9, 5);
        dwrite(d2, h, n2 * sizeof(float));
        if (rank == 1)
            fail_alloc(k);
        {
            ncclResult_t rc = call(c, SA, d2, n2, NULL);
            float *r = malloc(n2 * sizeof(float)), *r0 = malloc(n2 * sizeof(float));
            dread(r, d2, n2 * sizeof(float));
            memcpy(r0, r, n2 * sizeof(float));
            MPI_Bcast(r0, (int)n2, MPI_FLOAT, 0, MPI_COMM_WORLD);
            CHECK(memcmp(r, r0, n2 * sizeof(float)) == 0,
                  "allocation %d failed on rank 1: the results differ between ranks (rc %d here)", k, (int)rc);
            free(r); free(r0);
        }
        {
            char label[64];
            snprintf(label, sizeof(label), "allocation %d failed on rank 1", k);
            nccl_ok(c, label);
        }
        if (rank == 1)
            fail_alloc(1 << 30);
        free(h);
    }
}

/* DDP: buckets rebuilt at iteration 2. */
static void case_ddp(void)
{
    const size_t n1[3] = {120000, 250000, 60000}, n2[2] = {300000, 130000};
    ncclComm_t c = new_comm();
    MPI_Comm mc = new_mpi_comm();
    void *b1[3], *b2[2];
    float *h1[3], *h2[2];
    char label[96];
    for (int i = 0; i < 3; i++) {
        b1[i] = dev(n1[i]);
        h1[i] = malloc(n1[i] * sizeof(float));
    }
    for (int i = 0; i < 2; i++) {
        b2[i] = dev(n2[i]);
        h2[i] = malloc(n2[i] * sizeof(float));
    }
    for (int it = 1; it <= 5; it++) {
        int nb = it == 1 ? 3 : 2;
        unsigned long long devs = 0, w = 0;
        for (int i = 0; i < nb; i++) {
            void *d = it == 1 ? b1[i] : b2[i];
            float *h = it == 1 ? h1[i] : h2[i];
            size_t n = it == 1 ? n1[i] : n2[i];
            unsigned long long d0 = count("dev_syncs"), wi = 0;
            fill(h, n, it, 6 + i);
            dwrite(d, h, n * sizeof(float));
            CHECK(MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, mc) == MPI_SUCCESS, "MPI");
            CHECK(call(c, SA, d, n, &wi) == ncclSuccess, "iteration %d bucket %d", it, i);
            devs += count("dev_syncs") - d0;
            w += wi;
        }
        if (rank == 0)
            printf("# ddp iteration %d: %llu device-wide synchronisations, %llu host and device-wide "
                   "synchronisations and copies\n", it, devs, w);
        CHECK(it < 2 || devs == 0, "iteration %d: %llu device-wide synchronisations", it, devs);
        CHECK(it < 3 || w == 0, "iteration %d: %llu host synchronisations or copies", it, w);
        for (int i = 0; i < nb; i++) {
            snprintf(label, sizeof(label), "iteration %d bucket %d", it, i);
            same_bits(it == 1 ? b1[i] : b2[i], it == 1 ? h1[i] : h2[i], it == 1 ? n1[i] : n2[i], label);
        }
    }
    nccl_ok(c, "ddp");
    MPI_Comm_free(&mc);
}

typedef struct {
    ncclComm_t      c;
    void           *d;
    size_t          n;
    int             step, rc_begin, rc_end, rc_call;
    pthread_mutex_t m;
    pthread_cond_t  cv;
} cap_t;

static void cap_at(cap_t *k, int step)
{
    pthread_mutex_lock(&k->m);
    while (k->step < step)
        pthread_cond_wait(&k->cv, &k->m);
    pthread_mutex_unlock(&k->m);
}

static void cap_to(cap_t *k, int step)
{
    pthread_mutex_lock(&k->m);
    k->step = step;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->m);
}

/* The capturing thread: a global-mode capture of SC with a compressible
 * ncclAllReduce in it (hipress passes it through). */
static void *capturer(void *v)
{
    cap_t *k = v;
    void *graph = NULL;
    set_current(0);
    k->rc_begin = cu_begin(SC, 0);
    k->rc_call = ncclAllReduce(k->d, k->d, k->n, ncclFloat32, ncclSum, k->c, SC);
    cap_to(k, 1);
    cap_at(k, 2);
    k->rc_end = cu_end(SC, &graph);
    return NULL;
}

static void case_capture(int first)
{
    const size_t n = 200000;
    ncclComm_t c = new_comm(), late = first ? new_comm() : NULL;
    void *d = dev(n), *dc = dev(n);
    float *h = malloc(n * sizeof(float));
    cap_t k = {c, dc, n, 0, -1, -1, -1, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    pthread_t t;
    unsigned long long broken = count("capture_broken");
    int from;
    for (int i = 0; i < 2; i++) {   /* c's first calls */
        fill(h, n, i, 7);
        dwrite(d, h, n * sizeof(float));
        CHECK(call(c, SA, d, n, NULL) == ncclSuccess, "first call %d", i);
    }
    syncall();
    MPI_Barrier(MPI_COMM_WORLD);
    from = mock_nccl_ncalls();
    pthread_create(&t, NULL, capturer, &k);
    cap_at(&k, 1);
    for (int i = 2; i < 5; i++) {
        fill(h, n, i, 7);
        raw_write(d, h, n * sizeof(float));   /* (SA is idle: no wait on another thread's capture) */
        CHECK(call(first ? late : c, SA, d, n, NULL) == ncclSuccess, "call %d during the capture", i);
        cu_sync(SA);
    }
    cap_to(&k, 2);
    pthread_join(t, NULL);
    CHECK(k.rc_begin == 0 && k.rc_call == ncclSuccess, "the capture's start %d, its ncclAllReduce %d", k.rc_begin,
          k.rc_call);
    CHECK(k.rc_end == 0 && count("capture_broken") == broken,
          "the capture was invalidated (cuStreamEndCapture %d): hipress synchronised during it", k.rc_end);
    for (int i = from; i < mock_nccl_ncalls(); i++) {
        const mock_call_t *m = mock_nccl_call(i);
        if (m->stream == SC)
            CHECK(strcmp(m->fn, "ncclAllReduce") == 0 && m->recvbuf == dc && m->count == n &&
                      m->datatype == ncclFloat32,
                  "on the captured stream: %s of %zu (not the call passed through as made)", m->fn, m->count);
    }
    free(h);
}

static ncclComm_t abort_comm;
static volatile int abort_done;

static void *aborter(void *v)
{
    int from = *(int *)v;
    struct timespec ts = {0, 1000000};
    /* once the call is inside NCCL (its first operation recorded) */
    while (mock_nccl_ncalls() == from)
        nanosleep(&ts, NULL);
    ts.tv_nsec = 200000000;
    nanosleep(&ts, NULL);
    ncclCommAbort(abort_comm);
    abort_done = 1;
    return NULL;
}

static void case_abort(void)
{
    const size_t n = 200000;
    ncclComm_t c = new_comm();
    void *d = dev(n);
    float *h = malloc(n * sizeof(float));
    fill(h, n, 0, 8);
    dwrite(d, h, n * sizeof(float));
    if (rank == 0) {
        pthread_t t;
        int from = mock_nccl_ncalls();
        ncclResult_t rc;
        abort_comm = c;
        pthread_create(&t, NULL, aborter, &from);
        rc = call(c, SA, d, n, NULL);   /* rank 1 never makes it */
        pthread_join(t, NULL);
        CHECK(abort_done, "the call returned (%d) before the abort", (int)rc);
        /* nothing left waiting: the whole device drains (what the
         * released state freed in stream order included; anything stuck
         * behind the aborted operations would be reported as a deadlock) */
        cu_sync(SA);
        cu_ctx_sync();
        CHECK(count("pending") == 0, "%llu stream entries still queued after the abort", count("pending"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(h);
}

/* Both ranks' calls block in an ncclGroupEnd that never connects
 * (MOCK_NCCL_CONNECT_HANG), holding their communicator; each rank's
 * watchdog thread aborts it: the abort waits its bound, then ends the
 * communicator under the blocked call, which returns. */
static void *hang_aborter(void *v)
{
    struct timespec ts = {0, 1000000};
    (void)v;
    while (mock_nccl_connecting() == 0)
        nanosleep(&ts, NULL);
    ncclCommAbort(abort_comm);
    abort_done = 1;
    return NULL;
}

static void case_abort_hang(void)
{
    const size_t n = 200000;
    ncclComm_t c = new_comm();
    void *d = dev(n);
    float *h = malloc(n * sizeof(float));
    pthread_t t;
    fill(h, n, 0, 9);
    dwrite(d, h, n * sizeof(float));
    abort_comm = c;
    pthread_create(&t, NULL, hang_aborter, NULL);
    (void)call(c, SA, d, n, NULL);
    pthread_join(t, NULL);
    CHECK(abort_done, "the call returned before the abort");
    cu_sync(SA);
    cu_ctx_sync();
    CHECK(count("pending") == 0, "%llu stream entries still queued after the abort", count("pending"));
    MPI_Barrier(MPI_COMM_WORLD);
    free(h);
}

int main(int argc, char **argv)
{
    scen_init(&argc, &argv, "nccl_scenarios");
    if (strcmp(argv[1], "twocomm") == 0)
        case_twocomm(2);
    else if (strcmp(argv[1], "twocomm_cold") == 0)
        case_twocomm(0);
    else if (strcmp(argv[1], "evict") == 0)
        case_evict();
    else if (strcmp(argv[1], "allocfail") == 0)
        case_allocfail();
    else if (strcmp(argv[1], "ddp") == 0)
        case_ddp();
    else if (strcmp(argv[1], "capture") == 0 || strcmp(argv[1], "capture_first") == 0)
        case_capture(argv[1][7] == '_');
    else if (strcmp(argv[1], "abort") == 0)
        case_abort();
    else if (strcmp(argv[1], "abort_hang") == 0)
        case_abort_hang();
    else if (strcmp(argv[1], "stats") == 0)
        case_stats();
    else
        CHECK(0, "unknown case %s", argv[1]);
    return scen_end(argv[1]);
}
