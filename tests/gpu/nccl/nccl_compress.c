/*
 * The experimental compressed ncclAllReduce (HIPRESS_NCCL=compress) without
 * a GPU: an MPI program under the preloaded libhipress.so, with the
 * stand-in NCCL in replay mode (tests/gpu/standins/mock_nccl.c, MOCK_NCCL_MPI=1: its
 * communicators span MPI_COMM_WORLD, their operations move the data through
 * shared memory in the stand-in driver's stream order), the stand-in
 * driver's device memory and the emulated CUDA module
 * (tests/gpu/nccl/run_nccl_compress.sh, 2 to 4 ranks).
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
 * exits 1.  The cases are in this file (the basic ones, main),
 * nccl_compress_bits.c (the MPI path's bits, stream-ordered calls) and
 * nccl_compress_form.c (staging buffers, verify, timeout, auto, split).
 */
#include "nccl_compress.h"
#include <dlfcn.h>
#include <math.h>
#include "mock_nccl.h"
#include "hp_elem.h"
#include <stdlib.h>
#include <string.h>

void *(*dmalloc)(size_t, int);
int (*raw_write)(void *, const void *, size_t);
int (*raw_read)(void *, const void *, size_t);
unsigned long long (*mock_count)(const char *);
int (*stream_sync)(void *);
int (*htod_async)(unsigned long long, const void *, size_t, void *);
void (*set_current)(int);
void (*set_capturing)(void *, int);
int (*comm_set)(void *, const char *, const char *);
int (*comm_residual)(void *, const void *, size_t, float *);
int (*mpi_comm_set)(MPI_Comm, const char *, const char *);
int (*mpi_comm_residual)(MPI_Comm, const void *, size_t, float *);
void (*nccl_stats)(hipress_nccl_stats_t *);

int rank, size, bad, compressed;

int dwrite(void *d, const void *h, size_t n)
{
    stream_sync(STREAM);
    return raw_write(d, h, n);
}

int dread(void *h, const void *d, size_t n)
{
    stream_sync(STREAM);
    return raw_read(h, d, n);
}

uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* values fp16 holds exactly (multiples of 1/4, |v| <= 6 (r + 1)) */
float exact_val(int r, int t, size_t i)
{
    return (float)((r + 1) * ((int)((i + 3 * (size_t)t) % 13) - 6)) * 0.25f;
}

/* gradient-like values */
float grad_val(int r, int t, size_t i)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ULL + (uint64_t)(r * 131 + t * 7919);
    z ^= z >> 31;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 29;
    return (float)(0.01 * sin((double)i * 0.001 + t) + ((double)(z >> 40) / 16777216.0 - 0.5) * 0.003);
}

/* A communicator with `compressor` and the plan fixed to allgather with
 * one message per rank (the recorded calls below are that algorithm's). */
ncclComm_t comm_with(const char *compressor)
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
int same_everywhere(const float *h, size_t n)
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
int calls_since(int from, const char *fn)
{
    int k = 0;
    for (int i = from; i < mock_nccl_ncalls(); i++)
        k += strcmp(mock_nccl_call(i)->fn, fn) == 0;
    return k;
}

/* The agreements on device memory among the calls from index `from` on:
 * an ncclAllReduce of 1 int64 with ncclMax before the call's first group
 * (a call whose memory grows reserves it by agreement first: its messages'
 * and a 16-bit call's float32 copy; at most two per call). */
int reserves_since(int from)
{
    int k = 0;
    for (int i = from; i < mock_nccl_ncalls(); i++) {
        const mock_call_t *c = mock_nccl_call(i);
        if (strcmp(c->fn, "ncclGroupStart") == 0 || strcmp(c->fn, "ncclSend") == 0)
            break;
        k += strcmp(c->fn, "ncclAllReduce") == 0 && c->count == 1 && c->datatype == ncclInt64 && c->op == ncclMax;
    }
    return k;
}

/* One ncclAllReduce; checks what the stand-in saw: compressed (agreement
 * expected or not) or the user's call passed through. */
void allreduce(const char *label, const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op,
               ncclComm_t comm, int want_compressed, int want_agree)
{
    int from = mock_nccl_ncalls();
    ncclResult_t rc = ncclAllReduce(s, r, n, dt, op, comm, STREAM);
    CHECK(rc == ncclSuccess, "%s: ncclAllReduce returned %d", label, (int)rc);
    if (want_compressed) {
        const mock_call_t *g = mock_nccl_call(-1);
        int sends = calls_since(from, "ncclSend"), recvs = calls_since(from, "ncclRecv");
        compressed++;
        /* the settings agreement when expected, at most one agreement on
         * device memory, and the failure agreement after the exchange,
         * always */
        int res = reserves_since(from);
        CHECK(res <= 2 && calls_since(from, "ncclAllReduce") == want_agree + res + 1,
              "%s: %d ncclAllReduce calls (%d on memory), want %d", label, calls_since(from, "ncclAllReduce"), res,
              want_agree + res + 1);
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

void *dev(size_t n)
{
    void *p = dmalloc(n * sizeof(float), 0);
    if (p == NULL) {
        fprintf(stderr, "rank %d: no stand-in device memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* fp16 on exact data: sum and avg, in place and out of place */
void case_exact(void)
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
void case_lossy(const char *comp, int ef)
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
void case_pass(void)
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
        CHECK(calls_since(from, "ncclAllReduce") == 2 + reserves_since(from + 1) &&
                  calls_since(from, "ncclSend") == size - 1 && a && b &&
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
void case_corrupt(void)
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
void case_default(void)
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
        *(void **)&raw_write = dlsym(cu, "mock_cuda_write");
        *(void **)&raw_read = dlsym(cu, "mock_cuda_read");
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
    if (!dmalloc || !raw_write || !raw_read || !set_capturing || !comm_set || !comm_residual || !mpi_comm_set ||
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
