/*
 * The experimental compressed ncclAllReduce (HIPRESS_NCCL=compress) without
 * a GPU: an MPI program under the preloaded libhipress.so, with the
 * stand-in NCCL in replay mode (tests/gpu/mock_nccl.c, MOCK_NCCL_MPI=1: its
 * ncclAllGather and ncclAllReduce move the data through MPI), the stand-in
 * driver's device memory and the emulated CUDA module
 * (tests/gpu/run_nccl_compress.sh, 2 to 4 ranks).
 *
 *   nccl_compress compress MOCKDIR/libcuda.so.1   HIPRESS_NCCL=compress
 *   nccl_compress pass MOCKDIR/libcuda.so.1       the default: nothing compressed
 *   nccl_compress async MOCKDIR/libcuda.so.1      stream-ordered calls, float32 and
 *                                                 16-bit (case_async, under MOCK_CUDA_DEFERRED)
 *
 * Checked (compress): the results are the same bits on every rank; fp16 on
 * data it represents exactly gives the exact sum (ncclSum) and the exact
 * sum divided by N (ncclAvg), in place and out of place (sendbuff left as
 * it was); onebit, tbq and graddrop over four calls conserve the gradient
 * (sum of the results + every rank's held residual == sum of the inputs, up
 * to rounding) and terngrad stays within a bound; the calls the stand-in
 * records, with the plan fixed to allgather with one message per rank
 * (comm_with): at the first call of a communicator one ncclAllReduce of
 * HP_SETTINGS_AGREE_N int64 (the settings agreement), then per call one group of N-1 ncclSend and N-1
 * ncclRecv of uint8 on the caller's stream and communicator, each smaller
 * than the data, then the failure agreement; pass-through (the user's call
 * as made, exact result) for HIPRESS_NCCL=pass on a communicator, a buffer
 * below HIPRESS_MIN_BYTES, a user's group of two calls (inside the group, in
 * order), a capturing stream, float64 data, and settings that differ
 * between ranks; a group of one (PyTorch's) compressed after the group; a
 * corrupted message (HIPRESS_TEST_CORRUPT) gives NaN on every rank and the
 * next call works again.
 *
 * The MPI path's bits (case_mpi_bits): for every compressor (onebit, tbq,
 * terngrad, dgc, graddrop, fp16, bf16, q2, q4, q8) and ring, ps, allgather
 * and tree, with the same fixed plan (HIPRESS_ALGO, HIPRESS_PARTITION_BYTES,
 * ... set alike on an MPI communicator with hipress_comm_set and on an NCCL
 * one with hipress_nccl_comm_set), and for powersgd (its collective run),
 * three calls (one with a NaN on one rank) through MPI_Allreduce on host
 * buffers and through ncclAllReduce on stand-in device buffers give the
 * same result bits and the same residuals after every call; each NCCL call
 * makes its algorithm's groups (allgather 1, ps 2, ring 2(N-1)) of byte
 * sends and receives on the caller's stream, then the failure agreement.
 * Also on non-blocking communicators (ncclCommInitRankConfig with
 * blocking = 0; the stand-in answers ncclInProgress and moves the data only
 * when ncclCommGetAsyncError is polled out), alone and in groups of one: the
 * same bits, and nothing of hipress' left in progress at return.  A split
 * of a non-blocking communicator (non-blocking, its own settings and state),
 * a passed-through call there (ncclInProgress back to the caller),
 * ncclCommAbort and ncclCommDestroy releasing the state.  Under
 * float16 and bfloat16 calls (case_half, host-synchronous:
 * HIPRESS_NCCL_ASYNC=off) are the float32 path's on the widened values,
 * narrowed: for onebit/ps, q4/ring, fp16/allgather and
 * tbq/tree, sum and avg, in place and out of place, a NaN and a value
 * whose sum overflows the 16-bit format: the result bits are the MPI
 * path's float result (on the widened inputs) rounded to the format on the
 * host, and the residuals are the MPI path's, call after call.  Under
 * HIPRESS_ALGO=auto (case_auto): the cost model measures over NCCL, the
 * first calls explore (plain among them), and every rank makes the same NCCL
 * calls, call after call, with the same bits.  Staging buffers (case_form:
 * form_bits, form_late): a buffer reused with two element counts, on every
 * rank or on rank 0 only, under HIPRESS_STAGING_FORM=unbiased, exact and
 * biased, gives the MPI path's bits and residuals call after call (also
 * stream-ordered in `async` mode, with no host work in its steady state),
 * and one that becomes a staging buffer only after its count's verdict
 * stays identical everywhere until the next agreement.
 *
 *   nccl_compress verify MOCKDIR/libcuda.so.1    HIPRESS_VERIFY=1 (case_verify)
 *   nccl_compress form MOCKDIR/libcuda.so.1      case_form alone
 *
 * Rank 0 prints "nccl_compress: ok, C compressed calls" or the program
 * exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <hipress.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include "mock_nccl.h"
#include "hp_elem.h"
#include "hp_config.h"
#include "hp_global.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



static void *(*dmalloc)(size_t, int);
static int (*dwrite)(void *, const void *, size_t);
static int (*dread)(void *, const void *, size_t);
/* (async mode) the stand-in driver's counters and a wait for a stream */
static unsigned long long (*mock_count)(const char *);
static int (*stream_sync)(void *);
static int (*htod_async)(unsigned long long, const void *, size_t, void *);
static void (*set_current)(int);
static void (*set_capturing)(void *, int);
static int (*comm_set)(void *, const char *, const char *);
static int (*comm_residual)(void *, const void *, size_t, float *);
static int (*mpi_comm_set)(MPI_Comm, const char *, const char *);
static int (*mpi_comm_residual)(MPI_Comm, const void *, size_t, float *);
static void (*nccl_stats)(hipress_nccl_stats_t *);

static int rank, size, bad, compressed;

#define STREAM ((cudaStream_t)0x5150)
#define N_ELEM ((size_t)300000)   /* 1.2 MB: above the default HIPRESS_MIN_BYTES, not a whole block */

#define CHECK(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, "nccl_compress rank %d:%d: ", rank, __LINE__); \
                        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); bad = 1; } } while (0)

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* values fp16 holds exactly (multiples of 1/4, |v| <= 6 (r + 1)) */
static float exact_val(int r, int t, size_t i)
{
    return (float)((r + 1) * ((int)((i + 3 * (size_t)t) % 13) - 6)) * 0.25f;
}

/* gradient-like values */
static float grad_val(int r, int t, size_t i)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)(r * 131 + t * 7919);
    z ^= z >> 31;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 29;
    return (float)(0.01 * sin((double)i * 0.001 + t) + ((double)(z >> 40) / 16777216.0 - 0.5) * 0.003);
}

/* A communicator with `compressor` and the plan fixed to allgather with
 * one message per rank (the recorded calls below are that algorithm's). */
static ncclComm_t comm_with(const char *compressor)
{
    ncclComm_t c = mock_nccl_comm_new();
    if (compressor != NULL)
        CHECK(comm_set(c, "HIPRESS_COMPRESSOR", compressor) == HIPRESS_OK, "comm_set %s", compressor);
    CHECK(comm_set(c, "HIPRESS_ALGO", "allgather") == HIPRESS_OK &&
              comm_set(c, "HIPRESS_PARTITION_BYTES", "1G") == HIPRESS_OK,
          "comm_set HIPRESS_ALGO, HIPRESS_PARTITION_BYTES");
    return c;
}

/* Whether every rank holds the same bits in h[0..n). */
static int same_everywhere(const float *h, size_t n)
{
    float *r0 = malloc(n * sizeof(float));
    int same = 1, all;
    memcpy(r0, h, n * sizeof(float));
    MPI_Bcast(r0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    for (size_t i = 0; i < n && same; i++)
        same = bits(r0[i]) == bits(h[i]);
    free(r0);
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* The calls the stand-in received from index `from` on. */
static int calls_since(int from, const char *fn)
{
    int k = 0;
    for (int i = from; i < mock_nccl_ncalls(); i++)
        k += strcmp(mock_nccl_call(i)->fn, fn) == 0;
    return k;
}

/* One ncclAllReduce; checks what the stand-in saw: compressed (agreement
 * expected or not) or the user's call passed through. */
static void allreduce(const char *label, const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op,
                      ncclComm_t comm, int want_compressed, int want_agree)
{
    int from = mock_nccl_ncalls();
    ncclResult_t rc = ncclAllReduce(s, r, n, dt, op, comm, STREAM);
    CHECK(rc == ncclSuccess, "%s: ncclAllReduce returned %d", label, (int)rc);
    if (want_compressed) {
        const mock_call_t *g = mock_nccl_call(-1);
        int sends = calls_since(from, "ncclSend"), recvs = calls_since(from, "ncclRecv");
        compressed++;
        /* the eligibility agreement when expected, and the failure
         * agreement after the exchange, always */
        CHECK(calls_since(from, "ncclAllReduce") == want_agree + 1, "%s: %d ncclAllReduce calls, want %d", label,
              calls_since(from, "ncclAllReduce"), want_agree + 1);
        CHECK(g != NULL && strcmp(g->fn, "ncclAllReduce") == 0 && g->count == 1 && g->datatype == ncclInt64 &&
                  g->op == ncclMax && g->stream == STREAM && g->comm == comm,
              "%s: the last call is not the failure agreement (an ncclAllReduce of 1 int64 with ncclMax)", label);
        g = mock_nccl_ncalls() >= 2 ? mock_nccl_call(mock_nccl_ncalls() - 2) : NULL;
        if (want_agree) {
            const mock_call_t *a = mock_nccl_call(from);
            CHECK(strcmp(a->fn, "ncclAllReduce") == 0 && a->count == HP_SETTINGS_AGREE_N && a->datatype == ncclInt64 &&
                      a->op == ncclMax && a->stream == STREAM && a->comm == comm,
                  "%s: the agreement is not the settings agreement's ncclAllReduce of int64 with ncclMax on the stream",
                  label);
        }
        /* the allgather algorithm over the NCCL transport: one group of
         * N-1 sends and N-1 receives of uint8, each of the message
         * capacity (the same on both sides), on the caller's stream, the
         * group's end just before the failure agreement */
        CHECK(sends == size - 1 && recvs == size - 1 && calls_since(from, "ncclAllGather") == 0 && g != NULL &&
                  strcmp(g->fn, "ncclGroupEnd") == 0,
              "%s: %d ncclSend, %d ncclRecv, want %d of each in a group, last", label, sends, recvs, size - 1);
        for (int i = from; i < mock_nccl_ncalls(); i++) {
            const mock_call_t *c = mock_nccl_call(i);
            size_t raw = n * sizeof(float);
            if (strcmp(c->fn, "ncclSend") != 0 && strcmp(c->fn, "ncclRecv") != 0)
                continue;
            CHECK(c->datatype == ncclUint8 && c->stream == STREAM && c->comm == comm && c->count > 12 &&
                      c->count < raw && c->depth == 1 && c->root != rank && c->sendbuf != s && c->recvbuf != r,
                  "%s: %s of %zu bytes (datatype %d, stream %p, depth %d) for %zu bytes of data", label, c->fn,
                  c->count, c->datatype, c->stream, c->depth, raw);
        }
    } else {
        const mock_call_t *c = mock_nccl_call(-1);
        CHECK(c != NULL && strcmp(c->fn, "ncclAllReduce") == 0 && c->sendbuf == s && c->recvbuf == r &&
                  c->count == n && c->datatype == (int)dt && c->op == (int)op && c->stream == STREAM,
              "%s: not passed through as made", label);
        CHECK(calls_since(from, "ncclAllGather") == 0 && calls_since(from, "ncclSend") == 0,
              "%s: hipress' own NCCL calls in a pass-through", label);
    }
}

static void *dev(size_t n)
{
    void *p = dmalloc(n * sizeof(float), 0);
    if (p == NULL) {
        fprintf(stderr, "rank %d: no stand-in device memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* fp16 on exact data: sum and avg, in place and out of place */
static void case_exact(void)
{
    const size_t n = N_ELEM;
    ncclComm_t c = comm_with("fp16");
    float *h = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    void *d = dev(n), *ds = dev(n);
    for (int t = 0; t < 4; t++) {
        int avg = t >= 2, in_place = t % 2 == 0;
        size_t diff = n;
        for (size_t i = 0; i < n; i++) {
            float s = 0.0f;
            for (int j = 0; j < size; j++)
                s += exact_val(j, t, i);
            want[i] = avg ? s / (float)size : s;
            h[i] = exact_val(rank, t, i);
        }
        dwrite(in_place ? d : ds, h, n * sizeof(float));
        allreduce(avg ? "fp16 avg" : "fp16 sum", in_place ? d : ds, d, n, ncclFloat32, avg ? ncclAvg : ncclSum, c,
                  1, t == 0);
        dread(back, d, n * sizeof(float));
        for (size_t i = 0; i < n && diff == n; i++)
            if (bits(back[i]) != bits(want[i]))
                diff = i;
        CHECK(diff == n, "fp16 call %d: [%zu] %a, want %a", t, diff, back[diff], want[diff]);
        CHECK(same_everywhere(back, n), "fp16 call %d: results differ between ranks", t);
        if (!in_place) {
            dread(back, ds, n * sizeof(float));
            CHECK(memcmp(back, h, n * sizeof(float)) == 0, "fp16 call %d: sendbuff changed", t);
        }
    }
    free(h); free(want); free(back);
}

/* lossy compressors: same bits everywhere, conservation with error
 * feedback (ef), a bound otherwise */
static void case_lossy(const char *comp, int ef)
{
    const size_t n = N_ELEM;
    const int T = 4;
    ncclComm_t c = comm_with(comp);
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float));
    double *in_sum = calloc(n, sizeof(double)), *out_sum = calloc(n, sizeof(double));
    double *res_sum = calloc(n, sizeof(double)), worst = 0.0, err2 = 0.0, ref2 = 0.0, rl1 = 0.0;
    void *d = dev(n);
    char label[64];
    /* at its default (4 mean |v|) tbq sends nothing of these smooth values
     * in four calls */
    if (strcmp(comp, "tbq") == 0)
        CHECK(comm_set(c, "HIPRESS_TBQ_SCALE", "1") == HIPRESS_OK, "comm_set HIPRESS_TBQ_SCALE");
    for (int t = 0; t < T; t++) {
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (int j = 0; j < size; j++)
                s += grad_val(j, t, i);
            in_sum[i] += s;
            h[i] = grad_val(rank, t, i);
        }
        dwrite(d, h, n * sizeof(float));
        snprintf(label, sizeof(label), "%s call %d", comp, t);
        allreduce(label, d, d, n, ncclFloat32, ncclSum, c, 1, t == 0);
        dread(back, d, n * sizeof(float));
        CHECK(same_everywhere(back, n), "%s: results differ between ranks", label);
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (int j = 0; j < size; j++)
                s += grad_val(j, t, i);
            out_sum[i] += back[i];
            err2 += (back[i] - s) * (back[i] - s);
            ref2 += s * s;
            if (!isfinite(back[i])) {
                CHECK(0, "%s: [%zu] not finite", label, i);
                break;
            }
        }
    }
    {
        double ol1 = 0.0;
        for (size_t i = 0; i < n; i++)
            ol1 += fabs(out_sum[i]);
        CHECK(ol1 > 0.0, "%s: every result is zero", comp);
    }
    CHECK(comm_residual(c, d, n, res) == HIPRESS_OK, "%s: hipress_nccl_comm_residual", comp);
    for (size_t i = 0; i < n; i++) {
        res_sum[i] = res[i];
        rl1 += fabs(res[i]);
    }
    MPI_Allreduce(MPI_IN_PLACE, res_sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (ef) {
        for (size_t i = 0; i < n; i++) {
            double e = fabs(out_sum[i] + res_sum[i] - in_sum[i]);
            worst = e > worst ? e : worst;
        }
        CHECK(rl1 > 0.0, "%s: no residual held", comp);
        CHECK(worst <= 2e-6 * size, "%s: conservation off by %g", comp, worst);
    } else {
        CHECK(sqrt(err2 / ref2) < 1.0, "%s: relative error %g", comp, sqrt(err2 / ref2));
    }
    if (rank == 0)
        printf("# %s: relative error %.3g, conservation %.3g (residual L1 %.3g on rank 0)\n", comp,
               sqrt(err2 / ref2), worst, rl1);
    free(h); free(back); free(res); free(in_sum); free(out_sum); free(res_sum);
}

/* the user's call as made, with the exact (replayed) result */
static void case_pass(void)
{
    const size_t n = N_ELEM;
    ncclComm_t c = comm_with("onebit"), p = comm_with("onebit"), y = comm_with(rank == 0 ? "tbq" : "onebit");
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    void *d = dev(n), *d2 = dev(n);
    size_t diff = n;

    for (size_t i = 0; i < n; i++) {
        float s = 0.0f;
        for (int j = 0; j < size; j++)
            s += exact_val(j, 0, i);
        want[i] = s;
        h[i] = exact_val(rank, 0, i);
    }
    CHECK(comm_set(p, "HIPRESS_NCCL", "pass") == HIPRESS_OK, "comm_set HIPRESS_NCCL=pass");
    dwrite(d, h, n * sizeof(float));
    allreduce("HIPRESS_NCCL=pass", d, d, n, ncclFloat32, ncclSum, p, 0, 0);
    dread(back, d, n * sizeof(float));
    for (size_t i = 0; i < n && diff == n; i++)
        if (back[i] != want[i])
            diff = i;
    CHECK(diff == n, "HIPRESS_NCCL=pass: not the exact sum at %zu", diff);

    allreduce("below HIPRESS_MIN_BYTES", d, d, 1000, ncclFloat32, ncclSum, c, 0, 0);
    allreduce("float64", d, d, n / 2, ncclFloat64, ncclSum, c, 0, 0);
    set_capturing(STREAM, 1);
    allreduce("capturing", d, d, n, ncclFloat32, ncclSum, c, 0, 0);
    set_capturing(STREAM, 0);
    {
        /* groups, on a communicator with fp16: a group of two is the user's
         * (given to NCCL in its order), a group of one is PyTorch's
         * (compressed after the group, exactly here) */
        ncclComm_t g = comm_with("fp16");
        int from = mock_nccl_ncalls();
        const mock_call_t *a, *b;
        dwrite(d, h, n * sizeof(float));
        ncclGroupStart();
        ncclAllReduce(d, d, n, ncclFloat32, ncclSum, g, STREAM);
        ncclAllReduce(d2, d2, n, ncclFloat32, ncclSum, g, STREAM);
        ncclGroupEnd();
        a = mock_nccl_call(from + 1);
        b = mock_nccl_call(from + 2);
        CHECK(calls_since(from, "ncclAllReduce") == 2 && calls_since(from, "ncclAllGather") == 0 && a && b &&
                  strcmp(a->fn, "ncclAllReduce") == 0 && a->recvbuf == d && a->depth == 1 &&
                  strcmp(b->fn, "ncclAllReduce") == 0 && b->recvbuf == d2 && b->depth == 1,
              "a group of two: not passed through inside the group, in order");
        dread(back, d, n * sizeof(float));
        CHECK(memcmp(back, want, n * sizeof(float)) == 0, "a group of two: not the exact sum");

        dwrite(d, h, n * sizeof(float));
        from = mock_nccl_ncalls();
        ncclGroupStart();
        ncclAllReduce(d, d, n, ncclFloat32, ncclSum, g, STREAM);
        CHECK(mock_nccl_ncalls() == from + 1, "a group of one: the call reached NCCL inside the group");
        ncclGroupEnd();
        a = mock_nccl_call(-2);
        b = mock_nccl_call(-3);
        /* after the user's group: hipress' own group (depth 1, not 2), then
         * the failure agreement */
        CHECK(calls_since(from, "ncclAllReduce") == 2 && calls_since(from, "ncclSend") == size - 1 && a && b &&
                  strcmp(a->fn, "ncclGroupEnd") == 0 && a->depth == 1 && strncmp(b->fn, "ncclSend", 8) == 0 &&
                  b->depth == 1 && b->stream == STREAM && strcmp(mock_nccl_call(-1)->fn, "ncclAllReduce") == 0,
              "a group of one: want the agreement, the transport's group and the failure agreement after the "
              "user's group");
        dread(back, d, n * sizeof(float));
        CHECK(memcmp(back, want, n * sizeof(float)) == 0, "a group of one: not the exact sum");
        compressed++;
    }
    /* settings that differ: agreed over NCCL, then passed through on every rank */
    dwrite(d, h, n * sizeof(float));
    {
        int from = mock_nccl_ncalls();
        CHECK(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, y, STREAM) == ncclSuccess, "differing settings");
        CHECK(calls_since(from, "ncclAllReduce") == 2 && calls_since(from, "ncclAllGather") == 0 &&
                  mock_nccl_call(-1)->recvbuf == d,
              "differing settings: want the agreement, then the call passed through");
        dread(back, d, n * sizeof(float));
        CHECK(memcmp(back, want, n * sizeof(float)) == 0, "differing settings: not the exact sum");
        allreduce("differing settings, again", d, d, n, ncclFloat32, ncclSum, y, 0, 0);
    }
    free(h); free(back); free(want);
}

/* a corrupted message: NaN on every rank, then a good call */
static void case_corrupt(void)
{
    const size_t n = N_ELEM;
    ncclComm_t c = comm_with("onebit");
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    void *d = dev(n);
    size_t finite = 0;
    CHECK(comm_set(c, "HIPRESS_TEST_CORRUPT", size > 2 ? "2" : "1") == HIPRESS_OK, "comm_set TEST_CORRUPT");
    for (size_t i = 0; i < n; i++)
        h[i] = grad_val(rank, 0, i);
    dwrite(d, h, n * sizeof(float));
    allreduce("corrupted", d, d, n, ncclFloat32, ncclSum, c, 1, 1);
    dread(back, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        finite += !isnan(back[i]);
    CHECK(finite == 0, "corrupted: %zu elements not NaN", finite);
    CHECK(comm_set(c, "HIPRESS_TEST_CORRUPT", "-1") == HIPRESS_OK, "comm_set TEST_CORRUPT -1");
    dwrite(d, h, n * sizeof(float));
    allreduce("after the corrupted call", d, d, n, ncclFloat32, ncclSum, c, 1, 1);
    dread(back, d, n * sizeof(float));
    finite = 0;
    for (size_t i = 0; i < n; i++)
        finite += isfinite(back[i]) != 0;
    CHECK(finite == n, "after the corrupted call: %zu of %zu finite", finite, n);
    /* a float16 call alike, host-synchronous: ncclSuccess and NaN on every
     * rank, as for float32 (the rejected message is the call's failure,
     * already NaN, not the narrowing's) */
    {
        ncclComm_t c16 = comm_with("onebit");
        uint16_t *b16 = malloc(n * 2);
        size_t nan16 = 0;
        CHECK(comm_set(c16, "HIPRESS_NCCL_ASYNC", "off") == HIPRESS_OK &&
                  comm_set(c16, "HIPRESS_MIN_BYTES", "1K") == HIPRESS_OK &&
                  comm_set(c16, "HIPRESS_TEST_CORRUPT", size > 2 ? "2" : "1") == HIPRESS_OK,
              "comm_set HIPRESS_NCCL_ASYNC, HIPRESS_MIN_BYTES, HIPRESS_TEST_CORRUPT");
        for (size_t i = 0; i < n; i++)
            b16[i] = hp_f32_to_f16(grad_val(rank, 0, i) * 100.0f);
        dwrite(d, b16, n * 2);
        allreduce("corrupted float16", d, d, n, ncclFloat16, ncclSum, c16, 1, 1);
        dread(b16, d, n * 2);
        for (size_t i = 0; i < n; i++)
            nan16 += (b16[i] & 0x7fffu) > 0x7c00u;
        CHECK(nan16 == n, "corrupted float16: %zu of %zu elements NaN", nan16, n);
        free(b16);
    }
    free(h); free(back);
}

/* the default: every call as made */
static void case_default(void)
{
    const size_t n = N_ELEM;
    ncclComm_t c = comm_with("onebit");
    void *d = dev(n);
    float *h = calloc(n, sizeof(float));
    dwrite(d, h, n * sizeof(float));
    allreduce("default", d, d, n, ncclFloat32, ncclSum, c, 0, 0);
    allreduce("default avg", d, d, n, ncclFloat32, ncclAvg, c, 0, 0);
    free(h);
}

/* ------------------------------------------- the MPI path's bits */

/* The settings of one case, applied alike to an MPI communicator
 * (hipress_comm_set) and an NCCL one (hipress_nccl_comm_set). */
typedef struct {
    const char *kv[28];
} kv_t;

static kv_t case_kv(const char *comp, const char *algo)
{
    kv_t k = {{"HIPRESS_COMPRESSOR", comp, "HIPRESS_ALGO", algo,
               "HIPRESS_PARTITION_BYTES", strcmp(algo, "ring") == 0 ? "16K" : "64K",
               "HIPRESS_HIERARCHICAL", "off", "HIPRESS_MIN_BYTES", "1K", "HIPRESS_SPARSE_RATIO", "0.01",
               "HIPRESS_ONEBIT_BLOCK", "1024", "HIPRESS_SPARSE_BLOCK", "4096", "HIPRESS_DGC_MOMENTUM", "0.5",
               "HIPRESS_DGC_WARMUP", "1", "HIPRESS_ALLOW_PLAIN", "0", NULL}};
    return k;
}

static MPI_Comm mpi_comm(const kv_t *k)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    for (int i = 0; k->kv[i] != NULL; i += 2)
        CHECK(mpi_comm_set(c, k->kv[i], k->kv[i + 1]) == HIPRESS_OK, "hipress_comm_set %s", k->kv[i]);
    return c;
}

static void nccl_apply(ncclComm_t c, const kv_t *k)
{
    for (int i = 0; k->kv[i] != NULL; i += 2)
        CHECK(comm_set(c, k->kv[i], k->kv[i + 1]) == HIPRESS_OK, "hipress_nccl_comm_set %s", k->kv[i]);
}

/* Poll a non-blocking communicator's operation out, as its user must. */
static ncclResult_t poll_out(ncclComm_t c, ncclResult_t rc)
{
    ncclResult_t st = rc;
    for (int i = 0; st == ncclInProgress && i < 1000; i++)
        if (ncclCommGetAsyncError(c, &st) != ncclSuccess)
            return ncclSystemError;
    return st;
}

/* The transport's groups hipress put on the communicator since call
 * `from` (ncclGroupEnd calls; the user's own are not recorded there),
 * checking that each of its sends and receives is of bytes on the
 * caller's stream and communicator, inside the group. */
static int groups_since(int from, ncclComm_t comm, const char *label)
{
    int groups = 0;
    for (int i = from; i < mock_nccl_ncalls(); i++) {
        const mock_call_t *c = mock_nccl_call(i);
        if (strcmp(c->fn, "ncclGroupEnd") == 0)
            groups++;
        else if (strcmp(c->fn, "ncclSend") == 0 || strcmp(c->fn, "ncclRecv") == 0)
            CHECK(c->datatype == ncclUint8 && c->stream == STREAM && c->comm == comm && c->depth == 1 &&
                      c->root != rank && c->root >= 0 && c->root < size,
                  "%s: %s of %zu bytes (datatype %d, stream %p, depth %d, peer %d)", label, c->fn, c->count,
                  c->datatype, c->stream, c->depth, c->root);
    }
    return groups;
}

/* The groups algorithm `algo` puts on the communicator per call on this
 * rank (its phases: HP_TP_PHASED; tree: the receives from the children,
 * then the sends up with the broadcast's receive, then the broadcast's
 * sends: 3 groups on an inner rank, 2 at the root, 1 on a leaf, a rank
 * with no child, of the binomial tree rooted at 0); -1: not checked
 * (powersgd's depend on the buffer's shape). */
static int algo_groups(const char *algo)
{
    if (strcmp(algo, "tree") == 0)
        return !(rank % 2 == 0 && rank + 1 < size) ? 1 : rank == 0 ? 2 : 3;
    if (strcmp(algo, "allgather") == 0)
        return 1;
    if (strcmp(algo, "ps") == 0)
        return 2;
    if (strcmp(algo, "ring") == 0)
        return 2 * (size - 1);
    return -1;
}

/* The residuals the MPI communicator mc holds for host buffer h and the
 * NCCL communicator nc for device buffer d (n floats each, read into rh,
 * rd) are the same bits. */
static void same_residuals(MPI_Comm mc, const void *h, ncclComm_t nc, const void *d, size_t n, float *rh, float *rd,
                           const char *label)
{
    size_t diff = n;
    CHECK(mpi_comm_residual(mc, h, n, rh) == HIPRESS_OK && comm_residual(nc, d, n, rd) == HIPRESS_OK,
          "%s: the residuals cannot be read", label);
    for (size_t i = 0; i < n && diff == n; i++)
        if (bits(rh[i]) != bits(rd[i]))
            diff = i;
    CHECK(diff == n, "%s: residual[%zu] MPI %a NCCL %a", label, diff, diff < n ? rh[diff] : 0.0f,
          diff < n ? rd[diff] : 0.0f);
}

/* The same calls through MPI_Allreduce on host buffers and through the
 * compressed ncclAllReduce on stand-in device buffers, same settings and
 * data: after every call the same result bits and the same residual on
 * both paths, the same bits on every rank.  nb: the NCCL communicator is
 * non-blocking (made by ncclCommInitRankConfig), every call in a group of
 * one (PyTorch's) when it is 2. */
static void mpi_bits(const char *comp, const char *algo, size_t n, int calls, int nan_call, int in_place, int nb)
{
    kv_t k = case_kv(comp, algo);
    MPI_Comm mc = mpi_comm(&k);
    ncclComm_t nc;
    float *h = malloc(n * sizeof(float)), *hs = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    float *rh = malloc(n * sizeof(float)), *rd = malloc(n * sizeof(float));
    void *d = dev(n), *ds = dev(n);
    char label[96];

    if (nb) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        ncclUniqueId id;
        ncclResult_t rc;
        memset(&id, 0, sizeof(id));
        cfg.blocking = 0;
        rc = ncclCommInitRankConfig(&nc, size, id, rank, &cfg);
        CHECK(rc == ncclInProgress, "ncclCommInitRankConfig with blocking=0: %d, want ncclInProgress", (int)rc);
        CHECK(poll_out(nc, rc) == ncclSuccess, "the non-blocking communicator's creation");
    } else {
        nc = mock_nccl_comm_new();
    }
    nccl_apply(nc, &k);
    for (int t = 0; t < calls; t++) {
        int rcm, from, groups, want = algo_groups(algo);
        ncclResult_t rcn;
        size_t diff = n;
        snprintf(label, sizeof(label), "%s/%s%s%s call %d", comp, algo, in_place ? "" : " out of place",
                 nb == 2 ? " in a group of one, non-blocking" : nb ? " non-blocking" : "", t);
        for (size_t i = 0; i < n; i++)
            (in_place ? h : hs)[i] = grad_val(rank, t, i);
        if (t == nan_call && rank == size - 1)
            (in_place ? h : hs)[n / 3] = NAN;
        dwrite(in_place ? d : ds, in_place ? h : hs, n * sizeof(float));
        rcm = MPI_Allreduce(in_place ? MPI_IN_PLACE : hs, h, (int)n, MPI_FLOAT, MPI_SUM, mc);
        from = mock_nccl_ncalls();
        if (nb == 2) {
            ncclGroupStart();
            rcn = ncclAllReduce(in_place ? d : ds, d, n, ncclFloat32, ncclSum, nc, STREAM);
            CHECK(rcn == ncclSuccess, "%s: ncclAllReduce in the group: %d", label, (int)rcn);
            rcn = ncclGroupEnd();
        } else {
            rcn = ncclAllReduce(in_place ? d : ds, d, n, ncclFloat32, ncclSum, nc, STREAM);
        }
        compressed++;
        CHECK(rcm == MPI_SUCCESS && rcn == ncclSuccess, "%s: MPI rc %d, NCCL rc %d", label, rcm, (int)rcn);
        CHECK(mock_nccl_pending(nc) == 0, "%s: returned with an operation of its own in progress", label);
        /* (a group of one: the user's own ncclGroupEnd is recorded too) */
        groups = groups_since(from, nc, label) - (nb == 2);
        CHECK(groups >= 1 && (want < 0 || groups == want), "%s: %d groups of sends and receives, want %d", label,
              groups, want);
        CHECK(strcmp(mock_nccl_call(-1)->fn, "ncclAllReduce") == 0 && mock_nccl_call(-1)->count == 1 &&
                  mock_nccl_call(-1)->datatype == ncclInt64,
              "%s: the last call is not the failure agreement", label);
        dread(back, d, n * sizeof(float));
        for (size_t i = 0; i < n && diff == n; i++)
            if (bits(h[i]) != bits(back[i]))
                diff = i;
        CHECK(diff == n, "%s: result[%zu] MPI %a NCCL %a", label, diff, h[diff], back[diff]);
        CHECK(same_everywhere(back, n), "%s: results differ between ranks", label);
        if (!in_place) {
            dread(back, ds, n * sizeof(float));
            CHECK(memcmp(back, hs, n * sizeof(float)) == 0, "%s: sendbuff changed", label);
        }
        same_residuals(mc, h, nc, d, n, rh, rd, label);
    }
    MPI_Comm_free(&mc);
    if (nb) {
        hipress_nccl_stats_t a, b;
        nccl_stats(&a);
        CHECK(ncclCommDestroy(nc) == ncclSuccess, "ncclCommDestroy of the non-blocking communicator");
        nccl_stats(&b);
        CHECK(b.comms_released == a.comms_released + 1 && b.comms_tracked == a.comms_tracked - 1,
              "ncclCommDestroy did not release hipress' state");
    }
    free(h); free(hs); free(back); free(rh); free(rd);
}

/* A host-synchronous 16-bit call (dt ncclFloat16 or ncclBfloat16;
 * HIPRESS_NCCL_ASYNC=off on its communicator): the MPI path on the
 * widened values, its float result narrowed on the host, gives the NCCL
 * path's bits; the residuals (keyed by the user's 16-bit buffer) are the
 * MPI path's.  Call 1 holds a NaN on the last rank, call 2 a value whose sum
 * overflows the format on rank 0 (fp16: 60000 each, bf16: 3e38 each), call
 * 3 is an ncclAvg. */
static void half_bits(const char *comp, const char *algo, ncclDataType_t dt, int in_place)
{
    const size_t n = 40003;
    const int f16 = dt == ncclFloat16;
    kv_t k = case_kv(comp, algo);
    MPI_Comm mc = mpi_comm(&k);
    ncclComm_t nc = mock_nccl_comm_new();
    uint16_t *h16 = malloc(n * 2), *back = malloc(n * 2);
    float *h = malloc(n * sizeof(float)), *rh = malloc(n * sizeof(float)), *rd = malloc(n * sizeof(float));
    void *d = dev(n), *ds = dev(n);
    char label[96];

    nccl_apply(nc, &k);
    /* the host-synchronous 16-bit path (its sums beyond a format carried as
     * exceptions, as on MPI); the stream-ordered one is async_half's */
    CHECK(comm_set(nc, "HIPRESS_NCCL_ASYNC", "off") == HIPRESS_OK, "comm_set HIPRESS_NCCL_ASYNC off");
    for (int t = 0; t < 4; t++) {
        const int avg = t == 3;
        int rcm, from;
        ncclResult_t rcn;
        size_t diff = n;
        snprintf(label, sizeof(label), "%s/%s %s%s%s call %d", comp, algo, f16 ? "float16" : "bfloat16",
                 avg ? " avg" : "", in_place ? "" : " out of place", t);
        for (size_t i = 0; i < n; i++) {
            float v = grad_val(rank, t, i) * 100.0f;
            h16[i] = f16 ? hp_f32_to_f16(v) : hp_f32_to_bf16(v);
        }
        if (t == 1 && rank == size - 1)
            h16[n / 3] = f16 ? 0x7e00u : 0x7fc0u;                     /* NaN */
        if (t == 2)
            h16[n / 5] = f16 ? hp_f32_to_f16(60000.0f) : hp_f32_to_bf16(3e38f);
        for (size_t i = 0; i < n; i++)
            h[i] = f16 ? hp_f16_to_f32(h16[i]) : hp_bf16_to_f32(h16[i]);
        dwrite(in_place ? d : ds, h16, n * 2);
        rcm = MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, mc);
        from = mock_nccl_ncalls();
        rcn = ncclAllReduce(in_place ? d : ds, d, n, dt, avg ? ncclAvg : ncclSum, nc, STREAM);
        compressed++;
        CHECK(rcm == MPI_SUCCESS && rcn == ncclSuccess, "%s: MPI rc %d, NCCL rc %d", label, rcm, (int)rcn);
        CHECK(calls_since(from, "ncclSend") > 0 && groups_since(from, nc, label) >= 1,
              "%s: not compressed (no sends of hipress')", label);
        dread(back, d, n * 2);
        for (size_t i = 0; i < n && diff == n; i++) {
            float v = avg ? h[i] / (float)size : h[i];
            uint16_t want = f16 ? hp_f32_to_f16(v) : hp_f32_to_bf16(v);
            if (back[i] != want)
                diff = i;
        }
        CHECK(diff == n, "%s: result[%zu] 0x%04x, want 0x%04x (the MPI path's %a narrowed)", label, diff,
              diff < n ? back[diff] : 0, diff < n ? (f16 ? hp_f32_to_f16(h[diff]) : hp_f32_to_bf16(h[diff])) : 0,
              diff < n ? h[diff] : 0.0f);
        /* (fp16 keeps 60000 well enough that the sum of two overflows) */
        if (t == 2 && size > 1 && strcmp(comp, "fp16") == 0)
            CHECK((back[n / 5] & 0x7fffu) == (f16 ? 0x7c00u : 0x7f80u), "%s: the overflowed sum is 0x%04x, not Inf",
                  label, back[n / 5]);
        {
            float *fb = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++)
                fb[i] = (float)back[i];   /* the bits, compared as numbers */
            CHECK(same_everywhere(fb, n), "%s: results differ between ranks", label);
            free(fb);
        }
        if (!in_place) {
            uint16_t *sb = malloc(n * 2), *h0 = malloc(n * 2);
            dread(sb, ds, n * 2);
            for (size_t i = 0; i < n; i++)
                h0[i] = f16 ? hp_f32_to_f16(grad_val(rank, t, i) * 100.0f) : hp_f32_to_bf16(grad_val(rank, t, i) * 100.0f);
            if (t == 1 && rank == size - 1)
                h0[n / 3] = f16 ? 0x7e00u : 0x7fc0u;
            if (t == 2)
                h0[n / 5] = f16 ? hp_f32_to_f16(60000.0f) : hp_f32_to_bf16(3e38f);
            CHECK(memcmp(sb, h0, n * 2) == 0, "%s: sendbuff changed", label);
            free(sb); free(h0);
        }
        same_residuals(mc, h, nc, d, n, rh, rd, label);
    }
    MPI_Comm_free(&mc);
    free(h16); free(back); free(h); free(rh); free(rd);
}

static void case_half(void)
{
    half_bits("onebit", "ps", ncclFloat16, 1);
    half_bits("q4", "ring", ncclBfloat16, 0);
    half_bits("fp16", "allgather", ncclFloat16, 0);
    half_bits("tbq", "tree", ncclBfloat16, 1);
}

static void case_mpi_bits(void)
{
    static const char *const comps[] = {"onebit", "tbq", "terngrad", "dgc", "graddrop", "fp16", "bf16",
                                        "q2", "q4", "q8"};
    static const char *const algos[] = {"ring", "ps", "allgather", "tree"};
    for (size_t c = 0; c < sizeof(comps) / sizeof(comps[0]); c++)
        for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
            mpi_bits(comps[c], algos[a], 40003, 3, 2, (int)(a + c) % 2, 0);
    /* powersgd: its collective run (factors summed by the exact ring) */
    mpi_bits("powersgd", "auto", 40003, 3, 2, 1, 0);
    /* non-blocking communicators: the same bits, calls alone and in
     * PyTorch's groups of one */
    mpi_bits("onebit", "ps", 40003, 3, 1, 1, 1);
    mpi_bits("q4", "ring", 40003, 2, -1, 0, 2);
    mpi_bits("dgc", "allgather", 40003, 2, -1, 1, 1);
}

/* ------------------------------------------- stream-ordered calls */

/* What the stand-in driver counts as the host waiting for the device
 * (stream, event and context synchronisations and completed queries) or
 * copying between host and device memory. */
static unsigned long long host_work(void)
{
    return mock_count("syncs") + mock_count("d2h") + mock_count("h2d");
}

/* The bytes of h written to device memory d on the caller's stream
 * (cuMemcpyHtoDAsync: under MOCK_CUDA_DEFERRED they are there only once the
 * stream has run to the copy, which reads h then). */
static void stream_write(void *d, const void *h, size_t bytes)
{
    set_current(0);
    CHECK(htod_async((unsigned long long)(uintptr_t)d, h, bytes, STREAM) == 0,
          "cuMemcpyHtoDAsync on the caller's stream");
}

static uint16_t narrow16(float v, int f16)
{
    return f16 ? hp_f32_to_f16(v) : hp_f32_to_bf16(v);
}

/* Stream-ordered calls (HIPRESS_NCCL_ASYNC=auto, the default; `async` mode,
 * run under MOCK_CUDA_DEFERRED=1 and 2 by run_nccl_compress.sh): the same
 * calls through MPI_Allreduce on host buffers and through ncclAllReduce on
 * device buffers give the same result bits and residuals, call after call
 * (call 1 with a NaN on the last rank, call 2 an ncclAvg: the MPI sum
 * divided by N on the host); every call after a communicator's
 * first (agreement, plan, first memory) makes no host synchronisation and
 * no host copy (the stand-in's counters around ncclAllReduce; the input is
 * written on the caller's stream, stream_write, so an encode the codec's
 * streams do not order after it reads the last call's bytes under
 * MOCK_CUDA_DEFERRED=2), so the
 * result is there only once the caller's stream has run (waited for here
 * before reading it; the deferred stand-in runs nothing before: a missing
 * event gives wrong bits), with the same NCCL calls as the host-synchronous
 * form: the algorithm's groups on the caller's stream, then the failure
 * agreement (one int64). */
/* k's value of key set to val (appended when k has none). */
static void kv_set(kv_t *k, const char *key, const char *val)
{
    int i = 0;
    while (k->kv[i] != NULL && strcmp(k->kv[i], key) != 0)
        i += 2;
    if (k->kv[i] == NULL)
        k->kv[i + 2] = NULL;
    k->kv[i] = key;
    k->kv[i + 1] = val;
}

/* (key, val: one setting more, or NULL) */
static void async_bits(const char *comp, const char *algo, const char *rounding, size_t n, int calls,
                       const char *key, const char *val)
{
    kv_t k = case_kv(comp, algo);
    MPI_Comm mc;
    ncclComm_t nc = mock_nccl_comm_new();
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float)), *hin = malloc(n * sizeof(float));
    float *rh = malloc(n * sizeof(float)), *rd = malloc(n * sizeof(float));
    void *d = dev(n);
    char label[96];

    kv_set(&k, "HIPRESS_Q_ROUNDING", rounding);
    if (key != NULL)
        kv_set(&k, key, val);
    mc = mpi_comm(&k);
    nccl_apply(nc, &k);
    for (int t = 0; t < calls; t++) {
        int rcm, from, groups, want = algo_groups(algo);
        unsigned long long w0, w;
        ncclResult_t rcn;
        size_t diff = n;
        snprintf(label, sizeof(label), "stream-ordered %s/%s (%s%s%s%s%s) call %d", comp, algo, rounding,
                 key != NULL ? ", " : "", key != NULL ? key + 8 : "", key != NULL ? "=" : "",
                 key != NULL ? val : "", t);
        for (size_t j = 0; j < n; j++)
            h[j] = grad_val(rank, t, j);
        if (t == 1 && rank == size - 1)
            h[n / 3] = NAN;
        memcpy(hin, h, n * sizeof(float));
        stream_write(d, hin, n * sizeof(float));
        rcm = MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, mc);
        from = mock_nccl_ncalls();
        w0 = host_work();
        rcn = ncclAllReduce(d, d, n, ncclFloat32, t == 2 ? ncclAvg : ncclSum, nc, STREAM);
        w = host_work() - w0;
        compressed++;
        if (t == 2)
            for (size_t j = 0; j < n; j++)
                h[j] = h[j] / (float)size;
        CHECK(rcm == MPI_SUCCESS && rcn == ncclSuccess, "%s: MPI rc %d, NCCL rc %d", label, rcm, (int)rcn);
        CHECK(t == 0 || w == 0, "%s: %llu host synchronisations or copies in a steady-state call (%llu syncs, "
              "%llu d2h, %llu h2d in all so far)", label, w, mock_count("syncs"),
              mock_count("d2h"), mock_count("h2d"));
        groups = groups_since(from, nc, label);
        CHECK(want < 0 || groups == want, "%s: %d groups of sends and receives, want %d", label, groups, want);
        CHECK(strcmp(mock_nccl_call(-1)->fn, "ncclAllReduce") == 0 && mock_nccl_call(-1)->count == 1 &&
                  mock_nccl_call(-1)->datatype == ncclInt64,
              "%s: the last call is not the failure agreement", label);
        CHECK(stream_sync(STREAM) == 0, "%s: the caller's stream", label);
        dread(back, d, n * sizeof(float));
        for (size_t j = 0; j < n && diff == n; j++)
            if (bits(h[j]) != bits(back[j]))
                diff = j;
        CHECK(diff == n, "%s: result[%zu] MPI %a NCCL %a", label, diff, diff < n ? h[diff] : 0.0f,
              diff < n ? back[diff] : 0.0f);
        CHECK(same_everywhere(back, n), "%s: results differ between ranks", label);
        same_residuals(mc, h, nc, d, n, rh, rd, label);
    }
    MPI_Comm_free(&mc);
    free(h); free(back); free(hin); free(rh); free(rd);
}

/* A stream-ordered call whose message one rank corrupts
 * (HIPRESS_TEST_CORRUPT): rejected on the device, NaN on every rank
 * through the failure agreement on device values; the next calls (the
 * knob off) are finite again, the second of them with no host wait.
 * powersgd: the failed call leaves the residual as it was (as its host
 * path: the sticky flag predicates the write). */
static void async_corrupt(const char *comp, const char *algo)
{
    const size_t n = N_ELEM;
    kv_t k = case_kv(comp, algo);
    ncclComm_t c = mock_nccl_comm_new();
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    float *r0 = malloc(n * sizeof(float)), *r1 = malloc(n * sizeof(float));
    const int keeps = strcmp(comp, "powersgd") == 0;
    void *d = dev(n);
    char label[96];

    nccl_apply(c, &k);
    for (int t = 0; t < 4; t++) {
        size_t finite = 0;
        unsigned long long w0, w;
        ncclResult_t rc;
        snprintf(label, sizeof(label), "stream-ordered %s/%s, corrupted at call 1: call %d", comp, algo, t);
        if (t == 1)
            CHECK(comm_set(c, "HIPRESS_TEST_CORRUPT", size > 2 ? "2" : "1") == HIPRESS_OK, "comm_set TEST_CORRUPT");
        if (t == 2)
            CHECK(comm_set(c, "HIPRESS_TEST_CORRUPT", "-1") == HIPRESS_OK, "comm_set TEST_CORRUPT -1");
        for (size_t j = 0; j < n; j++)
            h[j] = grad_val(rank, t, j);
        dwrite(d, h, n * sizeof(float));
        if (keeps && t == 1)
            CHECK(comm_residual(c, d, n, r0) == HIPRESS_OK, "%s: the residual", label);
        w0 = host_work();
        rc = ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c, STREAM);
        w = host_work() - w0;
        compressed++;
        CHECK(rc == ncclSuccess, "%s: rc %d", label, (int)rc);
        CHECK(t != 3 || w == 0, "%s: %llu host synchronisations or copies", label, w);
        CHECK(stream_sync(STREAM) == 0, "%s: the caller's stream", label);
        if (keeps && t == 1) {
            CHECK(comm_residual(c, d, n, r1) == HIPRESS_OK, "%s: the residual", label);
            CHECK(memcmp(r0, r1, n * sizeof(float)) == 0, "%s: the residual changed", label);
        }
        dread(back, d, n * sizeof(float));
        for (size_t j = 0; j < n; j++)
            finite += isfinite(back[j]) != 0;
        if (t == 1)
            CHECK(finite == 0, "%s: %zu elements not NaN", label, finite);
        else
            CHECK(finite == n, "%s: %zu of %zu finite", label, finite, n);
    }
    free(h); free(back); free(r0); free(r1);
}

/* Stream-ordered 16-bit calls (dt ncclFloat16 or ncclBfloat16), their input
 * written on the caller's stream (stream_write: a widen not ordered after
 * it reads the last call's bytes, under MOCK_CUDA_DEFERRED=2 whose run of a
 * stream runs the codec's first): the result bits are those of a
 * stream-ordered float32 call on the widened input (a twin communicator,
 * the same settings, call after call) narrowed on the host, and the
 * residuals (keyed by the user's 16-bit buffer) the twin's; in calls 0 to
 * 2 they are the MPI path's on the widened input too (as half_bits).  Call
 * 1 holds a NaN on the last rank, call 2 is an ncclAvg, call 3 a value on
 * every rank whose sum is beyond the 16-bit format (float16 60000: +Inf
 * with fp16, as NCCL's own float16 sum) or that the compressor cannot
 * carry although finite (bfloat16 3e38, q4 and tbq: NaN on the device, the
 * stream-ordered float32 path's rule, where the host-synchronous path's
 * exceptions carry it).  Every call after the first makes no host
 * synchronisation and no host copy; the result is read after a wait for the
 * caller's stream (a narrow the stream is not made to wait for is not run
 * then under MOCK_CUDA_DEFERRED=1). */
static void async_half(const char *comp, const char *algo, ncclDataType_t dt, int in_place)
{
    const size_t n = 40003;
    const int f16 = dt == ncclFloat16;
    kv_t k = case_kv(comp, algo);
    MPI_Comm mc = mpi_comm(&k);
    ncclComm_t nc = mock_nccl_comm_new(), nf = mock_nccl_comm_new();
    uint16_t *h16 = malloc(n * 2), *back = malloc(n * 2), *sb = malloc(n * 2);
    float *h = malloc(n * sizeof(float)), *hf = malloc(n * sizeof(float)), *fb = malloc(n * sizeof(float));
    float *rh = malloc(n * sizeof(float)), *rd = malloc(n * sizeof(float));
    void *d = dev(n), *ds = dev(n), *df = dev(n);
    char label[112];

    nccl_apply(nc, &k);
    nccl_apply(nf, &k);
    for (int t = 0; t < 4; t++) {
        const ncclRedOp_t op = t == 2 ? ncclAvg : ncclSum;
        int rcm = MPI_SUCCESS, from, groups, want = algo_groups(algo);
        unsigned long long w0, w;
        ncclResult_t rcn, rcf;
        size_t diff = n, dmpi = n;
        snprintf(label, sizeof(label), "stream-ordered %s/%s %s%s%s call %d", comp, algo,
                 f16 ? "float16" : "bfloat16", t == 2 ? " avg" : "", in_place ? "" : " out of place", t);
        for (size_t i = 0; i < n; i++)
            h16[i] = narrow16(grad_val(rank, t, i) * 100.0f, f16);
        if (t == 1 && rank == size - 1)
            h16[n / 3] = f16 ? 0x7e00u : 0x7fc0u;   /* NaN */
        if (t == 3)
            h16[n / 5] = narrow16(f16 ? 60000.0f : 3e38f, f16);
        for (size_t i = 0; i < n; i++)
            h[i] = f16 ? hp_f16_to_f32(h16[i]) : hp_bf16_to_f32(h16[i]);
        /* the float32 twin on the widened input */
        dwrite(df, h, n * sizeof(float));
        rcf = ncclAllReduce(df, df, n, ncclFloat32, op, nf, STREAM);
        CHECK(rcf == ncclSuccess && stream_sync(STREAM) == 0, "%s: the float32 twin: rc %d", label, (int)rcf);
        dread(hf, df, n * sizeof(float));
        /* the 16-bit call */
        stream_write(in_place ? d : ds, h16, n * 2);
        from = mock_nccl_ncalls();
        w0 = host_work();
        rcn = ncclAllReduce(in_place ? d : ds, d, n, dt, op, nc, STREAM);
        w = host_work() - w0;
        compressed += 2;
        if (t < 3)
            rcm = MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, mc);
        CHECK(rcm == MPI_SUCCESS && rcn == ncclSuccess, "%s: MPI rc %d, NCCL rc %d", label, rcm, (int)rcn);
        CHECK(t == 0 || w == 0, "%s: %llu host synchronisations or copies in a steady-state call", label, w);
        groups = groups_since(from, nc, label);
        CHECK(groups >= 1 && (want < 0 || groups == want), "%s: %d groups of sends and receives, want %d", label,
              groups, want);
        CHECK(strcmp(mock_nccl_call(-1)->fn, "ncclAllReduce") == 0 && mock_nccl_call(-1)->count == 1 &&
                  mock_nccl_call(-1)->datatype == ncclInt64,
              "%s: the last call is not the failure agreement", label);
        CHECK(stream_sync(STREAM) == 0, "%s: the caller's stream", label);
        dread(back, d, n * 2);
        for (size_t i = 0; i < n; i++) {
            if (diff == n && back[i] != narrow16(hf[i], f16))
                diff = i;
            if (t < 3 && dmpi == n && back[i] != narrow16(t == 2 ? h[i] / (float)size : h[i], f16))
                dmpi = i;
        }
        CHECK(diff == n, "%s: result[%zu] 0x%04x, want 0x%04x (the stream-ordered float32 call's %a narrowed)",
              label, diff, diff < n ? back[diff] : 0, diff < n ? narrow16(hf[diff], f16) : 0,
              diff < n ? hf[diff] : 0.0f);
        CHECK(t == 3 || dmpi == n, "%s: result[%zu] 0x%04x, not the MPI path's %a narrowed", label, dmpi,
              dmpi < n ? back[dmpi] : 0, dmpi < n ? h[dmpi] : 0.0f);
        /* (fp16 carries 60000 N, beyond float16: +Inf; q4 and tbq cannot
         * carry 3e38 although finite: NaN on the device) */
        if (t == 3 && f16 && strcmp(comp, "fp16") == 0)
            CHECK(back[n / 5] == 0x7c00u, "%s: the sum beyond float16 is 0x%04x, not +Inf", label, back[n / 5]);
        if (t == 3 && !f16 && (strcmp(comp, "q4") == 0 || strcmp(comp, "tbq") == 0))
            CHECK((back[n / 5] & 0x7fffu) > 0x7f80u, "%s: the value %s cannot carry gives 0x%04x, not NaN", label,
                  comp, back[n / 5]);
        for (size_t i = 0; i < n; i++)
            fb[i] = (float)back[i];   /* the bits, compared as numbers */
        CHECK(same_everywhere(fb, n), "%s: results differ between ranks", label);
        if (!in_place) {
            dread(sb, ds, n * 2);
            CHECK(memcmp(sb, h16, n * 2) == 0, "%s: sendbuff changed", label);
        }
        {
            size_t at = n;
            CHECK(comm_residual(nf, df, n, rh) == HIPRESS_OK && comm_residual(nc, d, n, rd) == HIPRESS_OK,
                  "%s: the residuals cannot be read", label);
            for (size_t i = 0; i < n && at == n; i++)
                if (bits(rh[i]) != bits(rd[i]))
                    at = i;
            CHECK(at == n, "%s: residual[%zu] float32 twin %a 16-bit %a", label, at, at < n ? rh[at] : 0.0f,
                  at < n ? rd[at] : 0.0f);
        }
        if (t < 3)
            same_residuals(mc, h, nc, d, n, rh, rd, label);
    }
    MPI_Comm_free(&mc);
    free(h16); free(back); free(sb); free(h); free(hf); free(fb); free(rh); free(rd);
}

static void case_async(void)
{
    static const char *const comps[] = {"fp16", "bf16", "q2", "q4", "q8", "onebit", "tbq", "terngrad"};
    static const char *const algos[] = {"ring", "ps", "allgather", "tree"};
    for (size_t c = 0; c < sizeof(comps) / sizeof(comps[0]); c++)
        for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
            async_bits(comps[c], algos[a], "nearest", 40003, 3, NULL, NULL);
            if (comps[c][0] == 'q')
                async_bits(comps[c], algos[a], "stochastic", 40003, 3, NULL, NULL);
        }
    /* the sparse formats: graddrop; graddrop dense enough that the ps
     * owner's sums (and ring's later hops) go as the dense fallback
     * (a density of N x 0.3); dgc with its warm-up (the first call at 25%)
     * and momentum correction (0.5: call 1's NaN leaves that rank's
     * momentum unapplied and unmasked, which shows in calls 2 and 3), and
     * without it */
    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
        async_bits("graddrop", algos[a], "nearest", 40003, 3, NULL, NULL);
        async_bits("graddrop", algos[a], "nearest", 40003, 3, "HIPRESS_SPARSE_RATIO", "0.3");
        async_bits("dgc", algos[a], "nearest", 40003, 4, NULL, NULL);
        async_bits("dgc", algos[a], "nearest", 40003, 4, "HIPRESS_DGC_MOMENTUM", "0");
    }
    /* powersgd (its collective run): four calls, so that the warm start the
     * stream-ordered call 2 writes (call 1, NaN, keeps call 0's) is what
     * call 3 starts from; 40003 floats (157 x 256, the last row short) at
     * rank 4, 1024 x 1024 at rank 8 (P: 8193 floats), and a buffer sent
     * plain (rank 16: 16 (19 + 16) >= 300) */
    async_bits("powersgd", "auto", "nearest", 40003, 4, "HIPRESS_POWERSGD_RANK", "4");
    async_bits("powersgd", "auto", "nearest", 1u << 20, 4, "HIPRESS_POWERSGD_RANK", "8");
    async_bits("powersgd", "auto", "nearest", 300, 4, "HIPRESS_POWERSGD_RANK", "16");
    async_corrupt("onebit", "allgather");
    async_corrupt("q4", "ring");
    async_corrupt("fp16", "ps");
    async_corrupt("graddrop", "ring");
    async_corrupt("graddrop", "ps");
    async_corrupt("q8", "tree");
    async_corrupt("graddrop", "tree");
    async_corrupt("powersgd", "auto");   /* in P's sum: no rank's residual written */
    /* 16-bit calls, stream-ordered */
    async_half("fp16", "ring", ncclFloat16, 1);
    async_half("fp16", "ps", ncclFloat16, 0);
    async_half("onebit", "ps", ncclFloat16, 1);
    async_half("q4", "ring", ncclBfloat16, 0);
    async_half("bf16", "allgather", ncclBfloat16, 1);
    async_half("tbq", "ps", ncclBfloat16, 0);
    async_half("q8", "allgather", ncclFloat16, 0);
    async_half("fp16", "tree", ncclFloat16, 0);
    async_half("terngrad", "tree", ncclBfloat16, 1);
    async_half("q4", "tree", ncclBfloat16, 0);
    async_half("graddrop", "ring", ncclBfloat16, 1);
    async_half("dgc", "tree", ncclFloat16, 0);
    async_half("powersgd", "auto", ncclBfloat16, 0);
}

/* ------------------------------------------- staging buffers */

/* A staging buffer (HIPRESS_STAGING_FORM=form, doc/gpu.md "Staging buffers
 * on NCCL"): six calls alternating between two element counts, into one
 * buffer on every rank, or (one) on rank 0 only while the others keep a
 * buffer per count, so that only rank 0 finds a staging buffer and the
 * others fold what they hold.  The same calls through MPI_Allreduce on host
 * buffers (the verdict agreed per call) and ncclAllReduce on device buffers
 * (agreed at a count's first call, kept) give the same result bits and
 * residuals after every call, the same bits on every rank.  steady: from
 * the fourth call on (both counts' verdicts made at their first calls, the
 * form's message memory grown at the third) no host synchronisation or
 * copy (the stream-ordered form). */
static void form_bits(const char *comp, const char *algo, const char *form, int one, int steady)
{
    const size_t cnt[2] = {40003, 30011};
    kv_t k = case_kv(comp, algo);
    MPI_Comm mc;
    ncclComm_t nc = mock_nccl_comm_new();
    float *hb[2], *back = malloc(cnt[0] * sizeof(float));
    float *rh = malloc(cnt[0] * sizeof(float)), *rd = malloc(cnt[0] * sizeof(float));
    void *db[2];
    char label[128];
    const int split = one && rank != 0, plain = strcmp(form, "exact") == 0;
    int i = 0;

    while (k.kv[i] != NULL)
        i += 2;
    k.kv[i] = "HIPRESS_STAGING_FORM";
    k.kv[i + 1] = form;
    k.kv[i + 2] = NULL;
    mc = mpi_comm(&k);
    nccl_apply(nc, &k);
    hb[0] = malloc(cnt[0] * sizeof(float));
    hb[1] = split ? malloc(cnt[1] * sizeof(float)) : hb[0];
    db[0] = dev(cnt[0]);
    db[1] = split ? dev(cnt[1]) : db[0];
    for (int t = 0; t < 6; t++) {
        const size_t n = cnt[t % 2];
        float *h = hb[t % 2];
        void *d = db[t % 2];
        unsigned long long w0, w;
        int rcm;
        ncclResult_t rcn;
        size_t diff = n;
        snprintf(label, sizeof(label), "staging form %s, %s/%s%s, call %d (%zu elements)", form, comp, algo,
                 one ? " (staging on rank 0 only)" : "", t, n);
        for (size_t j = 0; j < n; j++)
            h[j] = grad_val(rank, t, j);
        dwrite(d, h, n * sizeof(float));
        rcm = MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, mc);
        w0 = host_work();
        rcn = ncclAllReduce(d, d, n, ncclFloat32, ncclSum, nc, STREAM);
        w = host_work() - w0;
        /* (STAGING_FORM=exact: from the second call on, plain) */
        compressed += !plain || t == 0;
        CHECK(rcm == MPI_SUCCESS && rcn == ncclSuccess, "%s: MPI rc %d, NCCL rc %d", label, rcm, (int)rcn);
        CHECK(!steady || t < 3 || w == 0, "%s: %llu host synchronisations or copies in a steady-state call", label,
              w);
        CHECK(stream_sync(STREAM) == 0, "%s: the caller's stream", label);
        dread(back, d, n * sizeof(float));
        for (size_t j = 0; j < n && diff == n; j++)
            if (bits(h[j]) != bits(back[j]))
                diff = j;
        CHECK(diff == n, "%s: result[%zu] MPI %a NCCL %a", label, diff, diff < n ? h[diff] : 0.0f,
              diff < n ? back[diff] : 0.0f);
        CHECK(same_everywhere(back, n), "%s: results differ between ranks", label);
        same_residuals(mc, h, nc, d, n, rh, rd, label);
    }
    if (steady) {
        /* a stream-ordered call of the first count, and with no wait a call
         * of a third count (its agreement stages in the device memory the
         * first may still use): both the MPI path's bits */
        const size_t n3 = 20011;
        float *h3 = malloc(n3 * sizeof(float)), *b3 = malloc(n3 * sizeof(float));
        void *d3 = dev(n3);
        size_t diff = cnt[0], diff3 = n3;
        for (size_t j = 0; j < cnt[0]; j++)
            hb[0][j] = grad_val(rank, 6, j);
        for (size_t j = 0; j < n3; j++)
            h3[j] = grad_val(rank, 7, j);
        dwrite(db[0], hb[0], cnt[0] * sizeof(float));
        dwrite(d3, h3, n3 * sizeof(float));
        CHECK(MPI_Allreduce(MPI_IN_PLACE, hb[0], (int)cnt[0], MPI_FLOAT, MPI_SUM, mc) == MPI_SUCCESS &&
                  MPI_Allreduce(MPI_IN_PLACE, h3, (int)n3, MPI_FLOAT, MPI_SUM, mc) == MPI_SUCCESS &&
                  ncclAllReduce(db[0], db[0], cnt[0], ncclFloat32, ncclSum, nc, STREAM) == ncclSuccess &&
                  ncclAllReduce(d3, d3, n3, ncclFloat32, ncclSum, nc, STREAM) == ncclSuccess &&
                  stream_sync(STREAM) == 0,
              "staging form %s, %s/%s: a call then a new count's: failed", form, comp, algo);
        compressed += 2;
        dread(back, db[0], cnt[0] * sizeof(float));
        dread(b3, d3, n3 * sizeof(float));
        for (size_t j = 0; j < cnt[0] && diff == cnt[0]; j++)
            if (bits(hb[0][j]) != bits(back[j]))
                diff = j;
        for (size_t j = 0; j < n3 && diff3 == n3; j++)
            if (bits(h3[j]) != bits(b3[j]))
                diff3 = j;
        CHECK(diff == cnt[0] && diff3 == n3,
              "staging form %s, %s/%s: a stream-ordered call then, with no wait, a new count's: result[%zu] and "
              "[%zu] of the new count's not the MPI path's", form, comp, algo, diff, diff3);
        free(h3); free(b3);
    }
    MPI_Comm_free(&mc);
    if (split)
        free(hb[1]);
    free(hb[0]); free(back); free(rh); free(rd);
}

/* A buffer that becomes a staging buffer on rank 0 only after its count's
 * verdict (the limit of doc/gpu.md "Staging buffers on NCCL"): counts c1,
 * c2 with a buffer each, then c2 into rank 0's c1 buffer.  That call runs
 * the compressor without error feedback on rank 0 (one warning,
 * run_nccl_compress.sh), the same bits on every rank (the MPI path runs
 * the form at once: not compared); a call of a new count c3 agrees again,
 * and the next call of c1 is in the form on every rank, the MPI path's bits
 * and residuals again. */
static void form_late(void)
{
    const size_t cnt[3] = {40003, 30011, 20011};
    /* the buffer (index into hb, db) and count of each call */
    const int buf[5] = {0, 1, rank == 0 ? 0 : 1, 2, 0}, cn[5] = {0, 1, 1, 2, 0};
    kv_t k = case_kv("onebit", "allgather");
    MPI_Comm mc = mpi_comm(&k);
    ncclComm_t nc = mock_nccl_comm_new();
    float *hb[3], *back = malloc(cnt[0] * sizeof(float));
    float *rh = malloc(cnt[0] * sizeof(float)), *rd = malloc(cnt[0] * sizeof(float));
    void *db[3];
    char label[128];

    nccl_apply(nc, &k);
    for (int b = 0; b < 3; b++) {
        hb[b] = malloc(cnt[b] * sizeof(float));
        db[b] = dev(cnt[b]);
    }
    for (int t = 0; t < 5; t++) {
        const size_t n = cnt[cn[t]];
        float *h = hb[buf[t]];
        void *d = db[buf[t]];
        size_t diff = n;
        snprintf(label, sizeof(label), "a late staging buffer on rank 0, call %d (%zu elements)", t, n);
        for (size_t j = 0; j < n; j++)
            h[j] = grad_val(rank, t, j);
        dwrite(d, h, n * sizeof(float));
        CHECK(MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, mc) == MPI_SUCCESS &&
                  ncclAllReduce(d, d, n, ncclFloat32, ncclSum, nc, STREAM) == ncclSuccess &&
                  stream_sync(STREAM) == 0,
              "%s: failed", label);
        compressed++;
        dread(back, d, n * sizeof(float));
        CHECK(same_everywhere(back, n), "%s: results differ between ranks", label);
        if (t == 2 || t == 3)
            continue;
        for (size_t j = 0; j < n && diff == n; j++)
            if (bits(h[j]) != bits(back[j]))
                diff = j;
        CHECK(diff == n, "%s: result[%zu] MPI %a NCCL %a", label, diff, diff < n ? h[diff] : 0.0f,
              diff < n ? back[diff] : 0.0f);
        same_residuals(mc, h, nc, d, n, rh, rd, label);
    }
    MPI_Comm_free(&mc);
    for (int b = 0; b < 3; b++)
        free(hb[b]);
    free(back); free(rh); free(rd);
}

static void case_form(void)
{
    form_bits("onebit", "ring", "unbiased", 0, 0);
    form_bits("onebit", "allgather", "unbiased", 1, 0);
    form_bits("tbq", "ps", "unbiased", 1, 0);
    form_bits("terngrad", "ps", "unbiased", 0, 0);
    form_bits("graddrop", "tree", "unbiased", 1, 0);
    form_bits("onebit", "ps", "exact", 1, 0);
    form_bits("onebit", "ring", "biased", 0, 0);
    form_late();
}

/* ------------------------------------------- HIPRESS_VERIFY */

/* The error HIPRESS_VERIFY reports for result got against exact. */
static double rel_err(const float *exact, const float *got, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)exact[i];
        num += d * d;
        den += (double)exact[i] * (double)exact[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* What hipress must report for one verified call (rank 0 prints it;
 * run_nccl_compress.sh compares it with hipress' INFO lines): the error of
 * got against the exact float sum of every rank's in (NCCL's sum in the
 * stand-in: PMPI_Allreduce on MPI_COMM_WORLD), divided by N for ncclAvg. */
static double verify_expect(const float *in, const float *got, size_t n, int avg)
{
    float *ex = malloc(n * sizeof(float));
    double e;
    PMPI_Allreduce(in, ex, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (avg)
        for (size_t i = 0; i < n; i++)
            ex[i] = ex[i] / (float)size;
    e = rel_err(ex, got, n);
    if (rank == 0)
        printf("# verify: %zu elements, relative error %.9g\n", n, e);
    free(ex);
    return e;
}

/* A verified call's NCCL calls since `from`: the exact sum first (an
 * ncclAllReduce of n float32 with ncclSum on the caller's stream and
 * communicator, before any send of the compressed exchange; after the
 * settings agreement at a communicator's first call), and last the failure
 * agreement (one int64) then the identity check (two int64, ncclMax). */
static void verify_calls(int from, size_t n, ncclComm_t comm, const char *label)
{
    int exact = -1, first_send = -1, k = mock_nccl_ncalls();
    for (int i = from; i < k; i++) {
        const mock_call_t *c = mock_nccl_call(i);
        if (strcmp(c->fn, "ncclAllReduce") == 0 && c->count == n && c->datatype == ncclFloat32 && exact < 0)
            exact = i;
        if (strcmp(c->fn, "ncclSend") == 0 && first_send < 0)
            first_send = i;
    }
    CHECK(exact >= 0 && first_send > exact && mock_nccl_call(exact)->op == ncclSum &&
              mock_nccl_call(exact)->stream == STREAM && mock_nccl_call(exact)->comm == comm &&
              mock_nccl_call(exact)->sendbuf == mock_nccl_call(exact)->recvbuf,
          "%s: no exact ncclAllReduce (ncclSum, float32, in place, on the stream) before the exchange", label);
    CHECK(k - from >= 2 && strcmp(mock_nccl_call(k - 1)->fn, "ncclAllReduce") == 0 && mock_nccl_call(k - 1)->count == 2 &&
              mock_nccl_call(k - 1)->datatype == ncclInt64 && mock_nccl_call(k - 1)->op == ncclMax &&
              mock_nccl_call(k - 2)->count == 1 && mock_nccl_call(k - 2)->datatype == ncclInt64,
          "%s: the last calls are not the failure agreement and the identity check", label);
}

/* HIPRESS_VERIFY=1 (`verify` mode, run by run_nccl_compress.sh with
 * HIPRESS_DEBUG=INFO): every compressed call reports the error computed
 * here, identical everywhere; fp16 on values it holds exactly reports 0
 * (sum and avg, in place and out of place); onebit (error feedback) and
 * a float16 q4 call, whose float32 result is the MPI path's on the
 * widened values (checked through the narrowed bits), report theirs. */
static void case_verify(void)
{
    const size_t n = N_ELEM;
    ncclComm_t c = comm_with("fp16"), o = mock_nccl_comm_new(), q = mock_nccl_comm_new();
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    void *d = dev(n), *ds = dev(n);
    kv_t k = case_kv("q4", "ring");
    MPI_Comm mc = mpi_comm(&k);

    for (int t = 0; t < 4; t++) {
        const int avg = t >= 2, in_place = t % 2 == 0;
        int from;
        for (size_t i = 0; i < n; i++)
            h[i] = exact_val(rank, t, i);
        from = mock_nccl_ncalls();
        dwrite(in_place ? d : ds, h, n * sizeof(float));
        CHECK(ncclAllReduce(in_place ? d : ds, d, n, ncclFloat32, avg ? ncclAvg : ncclSum, c, STREAM) == ncclSuccess,
              "verify fp16 call %d", t);
        compressed++;
        verify_calls(from, n, c, "verify fp16");
        dread(back, d, n * sizeof(float));
        CHECK(verify_expect(h, back, n, avg) == 0.0, "verify fp16 call %d: not the exact sum", t);
    }
    CHECK(comm_set(o, "HIPRESS_COMPRESSOR", "onebit") == HIPRESS_OK && comm_set(o, "HIPRESS_ALGO", "ring") == HIPRESS_OK &&
              comm_set(o, "HIPRESS_PARTITION_BYTES", "256K") == HIPRESS_OK, "verify: comm_set onebit");
    for (int t = 0; t < 3; t++) {
        for (size_t i = 0; i < n; i++)
            h[i] = grad_val(rank, t, i);
        int from = mock_nccl_ncalls();
        dwrite(d, h, n * sizeof(float));
        CHECK(ncclAllReduce(d, d, n, ncclFloat32, t == 2 ? ncclAvg : ncclSum, o, STREAM) == ncclSuccess,
              "verify onebit call %d", t);
        compressed++;
        verify_calls(from, n, o, "verify onebit");
        CHECK(stream_sync(STREAM) == 0, "verify onebit: the caller's stream");
        dread(back, d, n * sizeof(float));
        CHECK(same_everywhere(back, n), "verify onebit call %d: results differ between ranks", t);
        CHECK(verify_expect(h, back, n, t == 2) > 0.0, "verify onebit call %d: no error", t);
    }
    /* float16: the float32 reduction is verified (the MPI path's float
     * result on the widened values, not verified there) */
    CHECK(mpi_comm_set(mc, "HIPRESS_VERIFY", "0") == HIPRESS_OK, "hipress_comm_set HIPRESS_VERIFY");
    nccl_apply(q, &k);
    for (int t = 0; t < 2; t++) {
        const size_t m = 40003;
        uint16_t *h16 = malloc(m * 2), *b16 = malloc(m * 2);
        float *in = malloc(m * sizeof(float));
        size_t diff = m;
        for (size_t i = 0; i < m; i++) {
            h16[i] = hp_f32_to_f16(grad_val(rank, t, i) * 100.0f);
            in[i] = h[i] = hp_f16_to_f32(h16[i]);
        }
        dwrite(d, h16, m * 2);
        CHECK(MPI_Allreduce(MPI_IN_PLACE, h, (int)m, MPI_FLOAT, MPI_SUM, mc) == MPI_SUCCESS, "verify float16: MPI");
        if (t == 1)
            for (size_t i = 0; i < m; i++)
                h[i] = h[i] / (float)size;
        CHECK(ncclAllReduce(d, d, m, ncclFloat16, t == 1 ? ncclAvg : ncclSum, q, STREAM) == ncclSuccess,
              "verify float16 call %d", t);
        compressed++;
        dread(b16, d, m * 2);
        for (size_t i = 0; i < m && diff == m; i++)
            if (b16[i] != hp_f32_to_f16(h[i]))
                diff = i;
        CHECK(diff == m, "verify float16 call %d: result[%zu] is not the MPI path's narrowed", t, diff);
        verify_expect(in, h, m, t == 1);
        free(h16); free(b16); free(in);
    }
    MPI_Comm_free(&mc);
    free(h); free(back);
}

/* An operation of hipress' that stays in progress longer than
 * HIPRESS_TIMEOUT: the call fails with ncclSystemError after about that
 * long, naming what it waited for (run_nccl_compress.sh), and enqueues
 * nothing more; the communicator is then aborted, releasing its state. */
static void case_timeout(void)
{
    const size_t n = N_ELEM;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ncclComm_t c;
    ncclResult_t rc;
    void *d = dev(n);
    float *h = calloc(n, sizeof(float));
    int from;
    double t0;

    memset(&id, 0, sizeof(id));
    cfg.blocking = 0;
    rc = ncclCommInitRankConfig(&c, size, id, rank, &cfg);
    CHECK(poll_out(c, rc) == ncclSuccess, "timeout: the communicator's creation");
    CHECK(comm_set(c, "HIPRESS_COMPRESSOR", "onebit") == HIPRESS_OK &&
              comm_set(c, "HIPRESS_TIMEOUT", "1") == HIPRESS_OK,
          "timeout: comm_set");
    dwrite(d, h, n * sizeof(float));
    mock_nccl_set_polls(1 << 30);
    from = mock_nccl_ncalls();
    t0 = MPI_Wtime();
    rc = ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c, STREAM);
    t0 = MPI_Wtime() - t0;
    mock_nccl_set_polls(0);
    CHECK(rc == ncclSystemError && t0 >= 0.9 && t0 < 30,
          "timeout: ncclAllReduce returned %d after %.1f s, want ncclSystemError after about 1 s", (int)rc, t0);
    CHECK(mock_nccl_ncalls() == from + 1 && strcmp(mock_nccl_call(-1)->fn, "ncclAllReduce") == 0 &&
              mock_nccl_call(-1)->count == HP_SETTINGS_AGREE_N,
          "timeout: want the agreement alone, then nothing more enqueued (%d calls)", mock_nccl_ncalls() - from);
    CHECK(ncclCommAbort(c) == ncclSuccess, "timeout: ncclCommAbort");
    free(h);
}

/* Under HIPRESS_ALGO=auto the cost model measures over NCCL and the first
 * calls of a size class explore (plain, then the algorithms it keeps):
 * every rank makes the same choice (the same NCCL calls, call after call)
 * and gets the same bits. */
static void case_auto(void)
{
    const size_t n = N_ELEM;
    ncclComm_t c = mock_nccl_comm_new();
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    void *d = dev(n);
    int plain = 0, comp = 0;
    CHECK(comm_set(c, "HIPRESS_COMPRESSOR", "onebit") == HIPRESS_OK, "comm_set");
    for (int t = 0; t < 16; t++) {
        int from = mock_nccl_ncalls(), sig[3], lo[3], hi[3];
        for (size_t i = 0; i < n; i++)
            h[i] = grad_val(rank, t, i);
        dwrite(d, h, n * sizeof(float));
        CHECK(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c, STREAM) == ncclSuccess, "auto call %d", t);
        sig[0] = mock_nccl_ncalls() - from;
        sig[1] = calls_since(from, "ncclSend");
        sig[2] = groups_since(from, c, "auto");
        for (int i = 0; i < 3; i++) {
            lo[i] = -sig[i];
            hi[i] = sig[i];
        }
        MPI_Allreduce(MPI_IN_PLACE, lo, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, hi, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        CHECK(-lo[0] == hi[0] && -lo[1] == hi[1] && -lo[2] == hi[2],
              "auto call %d: the ranks made different NCCL calls (%d calls, %d sends, %d groups here)", t, sig[0],
              sig[1], sig[2]);
        dread(back, d, n * sizeof(float));
        CHECK(same_everywhere(back, n), "auto call %d: results differ between ranks", t);
        {
            /* a plain call: the user's reduction given to NCCL (the first
             * call's measurement sends too) */
            int is_plain = 0;
            for (int i = from; i < mock_nccl_ncalls(); i++) {
                const mock_call_t *m = mock_nccl_call(i);
                is_plain |= strcmp(m->fn, "ncclAllReduce") == 0 && m->count == n && m->datatype == ncclFloat32 &&
                            m->recvbuf == d;
            }
            if (is_plain)
                plain++;
            else
                comp++;
        }
    }
    compressed += comp;
    CHECK(plain >= 1 && comp >= 1, "auto: %d plain and %d compressed calls: not explored", plain, comp);
    if (rank == 0)
        printf("# auto: %d calls plain, %d compressed in 16\n", plain, comp);
    free(h); free(back);
}

/* A split of a non-blocking communicator is non-blocking too and gets
 * state of its own; ncclCommAbort and ncclCommDestroy release both. */
static void case_split(void)
{
    const size_t n = N_ELEM;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ncclComm_t parent, child;
    hipress_nccl_stats_t a, b;
    float *h = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    void *d = dev(n);
    ncclResult_t rc;
    size_t diff = n;

    memset(&id, 0, sizeof(id));
    cfg.blocking = 0;
    rc = ncclCommInitRankConfig(&parent, size, id, rank, &cfg);
    CHECK(poll_out(parent, rc) == ncclSuccess, "split: the parent's creation");
    CHECK(comm_set(parent, "HIPRESS_COMPRESSOR", "onebit") == HIPRESS_OK &&
              comm_set(parent, "HIPRESS_ALGO", "ring") == HIPRESS_OK &&
              comm_set(parent, "HIPRESS_PARTITION_BYTES", "64K") == HIPRESS_OK,
          "split: comm_set");
    rc = ncclCommSplit(parent, 0, rank, &child, NULL);
    CHECK(rc == ncclInProgress, "a split of a non-blocking communicator without a config: %d, want ncclInProgress",
          (int)rc);
    CHECK(poll_out(child, rc) == ncclSuccess, "split: the child's creation");
    /* the child: its own settings (fp16 with allgather, exact here), its
     * own agreement */
    CHECK(comm_set(child, "HIPRESS_COMPRESSOR", "fp16") == HIPRESS_OK &&
              comm_set(child, "HIPRESS_ALGO", "allgather") == HIPRESS_OK &&
              comm_set(child, "HIPRESS_PARTITION_BYTES", "1G") == HIPRESS_OK,
          "split: comm_set on the child");
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < n; i++) {
            float s = 0.0f;
            for (int j = 0; j < size; j++)
                s += exact_val(j, t, i);
            want[i] = s;
            h[i] = exact_val(rank, t, i);
        }
        dwrite(d, h, n * sizeof(float));
        allreduce("split: the child", d, d, n, ncclFloat32, ncclSum, child, 1, t == 0);
        dread(back, d, n * sizeof(float));
        for (size_t i = 0; i < n && diff == n; i++)
            if (bits(back[i]) != bits(want[i]))
                diff = i;
        CHECK(diff == n, "split: the child's fp16 sum [%zu] %a, want %a", diff, back[diff], want[diff]);
        /* the parent, onebit with ring: the same bits everywhere */
        dwrite(d, h, n * sizeof(float));
        {
            int from = mock_nccl_ncalls(), groups;
            CHECK(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, parent, STREAM) == ncclSuccess &&
                      mock_nccl_pending(parent) == 0,
                  "split: the parent's compressed call");
            groups = groups_since(from, parent, "split: the parent");
            CHECK(groups == 2 * (size - 1), "split: the parent's call made %d groups, want ring's %d", groups,
                  2 * (size - 1));
            compressed++;
        }
        dread(back, d, n * sizeof(float));
        CHECK(same_everywhere(back, n), "split: the parent's results differ between ranks");
    }
    /* a pass-through on a non-blocking communicator: NCCL's ncclInProgress
     * comes back to the caller, who polls it out: the exact sum */
    CHECK(comm_set(parent, "HIPRESS_MIN_BYTES", "1G") == HIPRESS_OK, "comm_set HIPRESS_MIN_BYTES");
    dwrite(d, h, n * sizeof(float));
    rc = ncclAllReduce(d, d, n, ncclFloat32, ncclSum, parent, STREAM);
    CHECK(rc == ncclInProgress && poll_out(parent, rc) == ncclSuccess,
          "a passed-through call on a non-blocking communicator: %d, want ncclInProgress, then done", (int)rc);
    dread(back, d, n * sizeof(float));
    CHECK(memcmp(back, want, n * sizeof(float)) == 0, "the passed-through call: not the exact sum");
    nccl_stats(&a);
    CHECK(ncclCommAbort(child) == ncclSuccess, "ncclCommAbort of the child");
    nccl_stats(&b);
    CHECK(b.comms_released == a.comms_released + 1 && b.comms_tracked == a.comms_tracked - 1,
          "ncclCommAbort did not release the child's state");
    CHECK(ncclCommDestroy(parent) == ncclSuccess, "ncclCommDestroy of the parent");
    nccl_stats(&a);
    CHECK(a.comms_released == b.comms_released + 1 && a.comms_tracked == b.comms_tracked - 1,
          "ncclCommDestroy did not release the parent's state");
    free(h); free(want); free(back);
}

int main(int argc, char **argv)
{
    void *cu;
    int all;
    if (argc < 3) {
        fprintf(stderr, "usage: nccl_compress compress|pass|async|verify|form MOCKDIR/libcuda.so.1\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cu = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
    if (cu != NULL) {
        *(void **)&dmalloc = dlsym(cu, "mock_cuda_malloc");
        *(void **)&dwrite = dlsym(cu, "mock_cuda_write");
        *(void **)&dread = dlsym(cu, "mock_cuda_read");
        *(void **)&set_capturing = dlsym(cu, "mock_cuda_set_capturing");
        *(void **)&mock_count = dlsym(cu, "mock_cuda_count");
        *(void **)&stream_sync = dlsym(cu, "cuStreamSynchronize");
        *(void **)&htod_async = dlsym(cu, "cuMemcpyHtoDAsync_v2");
        *(void **)&set_current = dlsym(cu, "mock_cuda_set_current");
    }
    *(void **)&comm_set = dlsym(RTLD_DEFAULT, "hipress_nccl_comm_set");
    *(void **)&comm_residual = dlsym(RTLD_DEFAULT, "hipress_nccl_comm_residual");
    *(void **)&mpi_comm_set = dlsym(RTLD_DEFAULT, "hipress_comm_set");
    *(void **)&mpi_comm_residual = dlsym(RTLD_DEFAULT, "hipress_comm_residual");
    *(void **)&nccl_stats = dlsym(RTLD_DEFAULT, "hipress_nccl_stats_get");
    if (!dmalloc || !dwrite || !dread || !set_capturing || !comm_set || !comm_residual || !mpi_comm_set ||
        !mpi_comm_residual || !nccl_stats || !mock_count || !stream_sync || !htod_async || !set_current) {
        fprintf(stderr, "nccl_compress: the stand-in driver or hipress is missing (%s)\n", dlerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (strcmp(argv[1], "pass") == 0) {
        case_default();
    } else if (strcmp(argv[1], "async") == 0) {
        case_async();
        form_bits("onebit", "ring", "unbiased", 1, 1);
        form_bits("tbq", "allgather", "unbiased", 0, 1);
    } else if (strcmp(argv[1], "verify") == 0) {
        case_verify();
    } else if (strcmp(argv[1], "form") == 0) {
        case_form();   /* (part of compress: alone, to debug) */
    } else {
        case_exact();
        case_lossy("onebit", 1);
        case_lossy("tbq", 1);
        case_lossy("graddrop", 1);
        case_lossy("terngrad", 0);
        case_lossy("q4", 1);
        case_pass();
        case_corrupt();
        case_mpi_bits();
        case_half();
        case_split();
        case_timeout();
        case_auto();
        case_form();
    }
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !all)
        printf("nccl_compress: ok, %d compressed calls\n", compressed);
    MPI_Finalize();
    return all ? 1 : 0;
}
