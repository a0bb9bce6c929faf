/*
 * tests/gpu/nccl/nccl_compress's cases of the MPI path's bits: the same calls
 * through MPI_Allreduce on host buffers and through the compressed
 * ncclAllReduce on stand-in device buffers (float32 on blocking and
 * non-blocking communicators, float16 and bfloat16 host-synchronously),
 * and the stream-ordered calls (`async` mode: float32 and 16-bit, a
 * corrupted message, no host work in a steady-state call).
 */
#include "nccl_compress.h"
#include <math.h>
#include "mock_nccl.h"
#include "hp_elem.h"
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------- the MPI path's bits */


kv_t case_kv(const char *comp, const char *algo)
{
    kv_t k = {{"HIPRESS_COMPRESSOR", comp, "HIPRESS_ALGO", algo,
               "HIPRESS_PARTITION_BYTES", strcmp(algo, "ring") == 0 ? "16K" : "64K",
               "HIPRESS_HIERARCHICAL", "off", "HIPRESS_MIN_BYTES", "1K", "HIPRESS_SPARSE_RATIO", "0.01",
               "HIPRESS_ONEBIT_BLOCK", "1024", "HIPRESS_SPARSE_BLOCK", "4096", "HIPRESS_DGC_MOMENTUM", "0.5",
               "HIPRESS_DGC_WARMUP", "1", "HIPRESS_ALLOW_PLAIN", "0", NULL}};
    return k;
}

MPI_Comm mpi_comm(const kv_t *k)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    for (int i = 0; k->kv[i] != NULL; i += 2)
        CHECK(mpi_comm_set(c, k->kv[i], k->kv[i + 1]) == HIPRESS_OK, "hipress_comm_set %s", k->kv[i]);
    return c;
}

void nccl_apply(ncclComm_t c, const kv_t *k)
{
    for (int i = 0; k->kv[i] != NULL; i += 2)
        CHECK(comm_set(c, k->kv[i], k->kv[i + 1]) == HIPRESS_OK, "hipress_nccl_comm_set %s", k->kv[i]);
}

/* Poll a non-blocking communicator's operation out, as its user must. */
ncclResult_t poll_out(ncclComm_t c, ncclResult_t rc)
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
int groups_since(int from, ncclComm_t comm, const char *label)
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
int algo_groups(const char *algo)
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
void same_residuals(MPI_Comm mc, const void *h, ncclComm_t nc, const void *d, size_t n, float *rh, float *rd,
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

void case_half(void)
{
    half_bits("onebit", "ps", ncclFloat16, 1);
    half_bits("q4", "ring", ncclBfloat16, 0);
    half_bits("fp16", "allgather", ncclFloat16, 0);
    half_bits("tbq", "tree", ncclBfloat16, 1);
}

void case_mpi_bits(void)
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
 * (stream and event synchronisations and completed queries), the device
 * synchronised as a whole (allocation, free, a kernel's first launch), or
 * a copy between host and device memory. */
unsigned long long host_work(void)
{
    return mock_count("syncs") + mock_count("dev_syncs") + mock_count("d2h") + mock_count("h2d");
}

/* The bytes of h written to device memory d on the caller's stream
 * (cuMemcpyHtoDAsync: under MOCK_CUDA_DEFERRED they are there only once the
 * stream has run to the copy, which reads h then). */
void stream_write(void *d, const void *h, size_t bytes)
{
    set_current(0);
    CHECK(htod_async((unsigned long long)(uintptr_t)d, h, bytes, STREAM) == 0,
          "cuMemcpyHtoDAsync on the caller's stream");
}

uint16_t narrow16(float v, int f16)
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
void kv_set(kv_t *k, const char *key, const char *val)
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

void case_async(void)
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

