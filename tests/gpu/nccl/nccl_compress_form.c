/*
 * tests/gpu/nccl/nccl_compress's cases of staging buffers (their form), of
 * HIPRESS_VERIFY, of an operation in progress beyond HIPRESS_TIMEOUT, of
 * HIPRESS_ALGO=auto and of a non-blocking communicator's split.
 */
#include "nccl_compress.h"
#include <math.h>
#include "mock_nccl.h"
#include "hp_elem.h"
#include <stdlib.h>
#include <string.h>

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
/* h[0..n) := the sum of every rank's h in rank order (float). */
static void rank_order_sum(float *h, size_t n)
{
    float *all = malloc((size_t)size * n * sizeof(float));
    MPI_Allgather(h, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    for (size_t j = 0; j < n; j++) {
        float v = all[j];
        for (int r = 1; r < size; r++)
            v += all[(size_t)r * n + j];
        h[j] = v;
    }
    free(all);
}

void form_bits(const char *comp, const char *algo, const char *form, int one, int steady)
{
    const size_t cnt[2] = {40003, 30011};
    kv_t k = case_kv(comp, algo);
    MPI_Comm mc;
    ncclComm_t nc = mock_nccl_comm_new();
    float *hb[2], *back = malloc(cnt[0] * sizeof(float));
    float *rh = malloc(cnt[0] * sizeof(float)), *rd = malloc(cnt[0] * sizeof(float));
    float *exact = malloc(cnt[0] * sizeof(float));
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
        if (plain && t > 0) {
            /* an exact call is NCCL's own sum, whose order is not MPI's:
             * the stand-in's, in rank order, of every rank's input with
             * what it held for the buffer folded in */
            CHECK(comm_residual(nc, d, n, rd) == HIPRESS_OK, "%s: the residual", label);
            for (size_t j = 0; j < n; j++)
                exact[j] = h[j] + rd[j];
            rank_order_sum(exact, n);
        }
        rcm = MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, mc);
        if (plain && t > 0)
            memcpy(h, exact, n * sizeof(float));
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
    free(hb[0]); free(back); free(rh); free(rd); free(exact);
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

void case_form(void)
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
void case_verify(void)
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
void case_timeout(void)
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
void case_auto(void)
{
    const size_t n = N_ELEM;
    ncclComm_t c = mock_nccl_comm_new();
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    void *d = dev(n);
    int plain = 0, comp = 0;
    /* (a fast network for the model: plain is timed too, where a slow one
     * would put it far behind and leave it out) */
    CHECK(comm_set(c, "HIPRESS_COMPRESSOR", "onebit") == HIPRESS_OK &&
              comm_set(c, "HIPRESS_NET_GBPS", "1000") == HIPRESS_OK,
          "comm_set");
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
void case_split(void)
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

