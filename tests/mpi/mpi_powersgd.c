/*
 * powersgd under mpirun (np 2, 3, 4; driven by tests/mpi/run_powersgd.sh).
 *
 * Links the core library for its internal API: every case runs the
 * production driver hp_allreduce_compressed on a dup'd communicator set to
 * powersgd with hipress_comm_set, and reads the residual store of the
 * communicator's state to check error feedback.  One case calls
 * powersgd's host run (hp_algo_collective) directly without a residual
 * store.
 *
 * Tolerances (float32 data, matrices up to 1096 x 1096):
 *   exact cases (sum of rank <= r): max |result - exact| <= 2e-5 max |exact|
 *   error-feedback sums and projection identities (double references):
 *                                              relative error <= 1e-6
 * Identity across ranks is exact: result hashes must be equal.
 */
#include <mpi.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hp_algo.h"
#include "hp_elem.h"
#include "hp_front_mpi.h"
#include "hp_tp_mpi.h"
#include "hp_psgd.h"   /* the internal API of src/comp/hp_comp_powersgd.c */

#define EXACT_TOL 2e-5
#define EF_TOL 1e-6

static int me, np, failures;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "[rank %d of %d] %s:%d: check failed: %s: ", me, np, \
                    __FILE__, __LINE__, #cond);                              \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            failures++;                                                      \
        }                                                                    \
    } while (0)

static float urand(uint64_t key, uint64_t i)
{
    return 2.0f * hp_rng_unit(key, i) - 1.0f;
}

/* A communicator of its own for each case, so each starts with fresh state.
 * A fixed plan (algorithm and partition size set) always compresses; the
 * adaptive plan would time some calls on the plain path. */
static MPI_Comm psgd_comm(const char *rank)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    if (hipress_comm_set(c, "HIPRESS_COMPRESSOR", "powersgd") != HIPRESS_OK ||
        hipress_comm_set(c, "HIPRESS_MIN_BYTES", "0") != HIPRESS_OK ||
        hipress_comm_set(c, "HIPRESS_ALGO", "ring") != HIPRESS_OK ||
        hipress_comm_set(c, "HIPRESS_PARTITION_BYTES", "256K") != HIPRESS_OK ||
        (rank != NULL && hipress_comm_set(c, "HIPRESS_POWERSGD_RANK", rank) != HIPRESS_OK)) {
        fprintf(stderr, "[rank %d] hipress_comm_set failed\n", me);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return c;
}

static int allreduce(const float *send, float *recv, size_t n, MPI_Comm comm)
{
    int rc = MPI_SUCCESS, reason;
    if (!hp_mpi_allreduce(send, recv, n, comm, hp_mpi_comm(comm, 1), 1, 0, NULL, &rc, NULL, &reason))
        return MPI_ERR_OTHER;   /* (every rank compresses these calls) */
    return rc;
}

/* 1 when v holds the same bytes on every rank of comm */
static int same_everywhere(const void *v, size_t bytes, MPI_Comm comm)
{
    uint64_t h[2];
    h[0] = hp_hash_bytes(HP_HASH_INIT, v, bytes);
    h[1] = ~h[0];
    MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MAX, comm);
    return h[0] == ~h[1];   /* max == min */
}

/* The state vector `slot` (0 residual, 2 warm-start Q) of buffer (recv, n),
 * when it exists with len floats; NULL otherwise.  Read-only: no call is
 * counted on the buffer. */
static float *residual_of(MPI_Comm comm, const float *recv, size_t n, uint32_t slot, size_t len)
{
    hp_comm_t *c = hp_mpi_comm(comm, 0);
    hp_res_buf_t *b;
    int k = slot == 0 ? HP_RES_R : HP_RES_AUX;
    if (c == NULL || c->res == NULL)
        return NULL;
    b = hp_residual_buffer(c->res, (uintptr_t)recv, n, 0, HP_LAYOUT_TRUST, NULL);
    return b != NULL && b->len[k] == len ? b->vec[k] : NULL;
}

static double max_abs_d(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(v[i]));
    return m;
}

/* max |got - want| <= tol max |want| (and both finite) */
static void check_close(const char *what, const float *got, const double *want, size_t n,
                        double tol)
{
    double scale = max_abs_d(want, n), err = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            err = INFINITY;
            break;
        }
        err = fmax(err, fabs((double)got[i] - want[i]));
    }
    CHECK(err <= tol * scale, "%s: max error %.3g of max %.3g (tolerance %.1g relative)",
          what, err, scale, tol);
    if (me == 0 && getenv("HP_TEST_VERBOSE") != NULL)
        printf("np %d: %s: relative max error %.3g\n", np, what, scale > 0 ? err / scale : err);
}

/* Rank-`rk` matrix A B^T in the m x c layout of n floats; the padded last
 * row stays zero so padding does not add rank. */
static void lowrank(double *v, size_t n, size_t m, size_t c, size_t rk, uint64_t key)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < c && i * c + j < n; j++) {
            double s = 0;
            for (size_t k = 0; k < rk; k++) {
                float a = (i == m - 1 && m * c > n) ? 0.0f : urand(key, i * 64 + k);
                s += (double)a * urand(key + 1, j * 64 + k);
            }
            v[i * c + j] = s;
        }
}

/* --------------------------------------------------------------- cases */

/* Every rank holds the same rank-rk matrix: the result is np times it. */
static void case_shared_lowrank(size_t n, size_t rk, const char *r)
{
    MPI_Comm comm = psgd_comm(r);
    size_t m, c, rr;
    double *want = malloc(n * sizeof(double));
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    char what[96];

    hp_psgd_shape(n, (uint32_t)atoi(r), &m, &c, &rr);
    CHECK(!hp_psgd_skip(n, m, c, rr), "n %zu r %s should compress", n, r);
    lowrank(want, n, m, c, rk, 1000 + n + rk);
    for (size_t i = 0; i < n; i++) {
        in[i] = (float)want[i];
        want[i] = (double)in[i] * np;
    }
    /* twice: a cold start, then the warm start from the first call */
    for (int t = 0; t < 2; t++) {
        CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "allreduce");
        snprintf(what, sizeof(what), "shared rank-%zu matrix, n %zu, r %s, call %d", rk, n, r, t);
        check_close(what, out, want, n, EXACT_TOL);
        CHECK(same_everywhere(out, n * sizeof(float), comm), "%s: results differ across ranks", what);
    }
    MPI_Comm_free(&comm);
    free(want);
    free(in);
    free(out);
}

/* Each rank holds a different rank-1 matrix: the sum has rank np <= r. */
static void case_sum_of_rank1(size_t n)
{
    MPI_Comm comm = psgd_comm("4");
    size_t m, c, rr;
    double *want = calloc(n, sizeof(double)), *mine = malloc(n * sizeof(double));
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));

    hp_psgd_shape(n, 4, &m, &c, &rr);
    for (int q = 0; q < np; q++) {
        lowrank(mine, n, m, c, 1, 2000 + 17 * (uint64_t)q);
        for (size_t i = 0; i < n; i++) {
            if (q == me)
                in[i] = (float)mine[i];
            want[i] += (double)(float)mine[i];
        }
    }
    CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "allreduce");
    check_close("sum of per-rank rank-1 matrices", out, want, n, EXACT_TOL);
    CHECK(same_everywhere(out, n * sizeof(float), comm), "results differ across ranks");
    MPI_Comm_free(&comm);
    free(want);
    free(mine);
    free(in);
    free(out);
}

/* Zero input: every column of P is zero; the result is exactly zero. */
static void case_zero(size_t n)
{
    MPI_Comm comm = psgd_comm("4");
    float *in = calloc(n, sizeof(float)), *out = malloc(n * sizeof(float));
    int ok = 1;
    for (int t = 0; t < 2; t++) {
        CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "allreduce");
        for (size_t i = 0; i < n; i++)
            ok &= out[i] == 0.0f;
        CHECK(ok, "zero input must give exact zeros (call %d)", t);
    }
    MPI_Comm_free(&comm);
    free(in);
    free(out);
}

/* Calls that would not shrink go through the plain ring: integer-valued
 * floats sum exactly. */
static void case_skipped(size_t n, const char *r)
{
    MPI_Comm comm = psgd_comm(r);
    size_t m, c, rr;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    int ok = 1;

    hp_psgd_shape(n, (uint32_t)atoi(r), &m, &c, &rr);
    CHECK(hp_psgd_skip(n, m, c, rr), "n %zu r %s should be sent plain", n, r);
    for (size_t i = 0; i < n; i++)
        in[i] = (float)((int)(hp_rng_u32(3000 + (uint64_t)me, i) % 201) - 100);
    CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "allreduce");
    for (size_t i = 0; i < n; i++) {
        long want = 0;
        for (int q = 0; q < np; q++)
            want += (long)(hp_rng_u32(3000 + (uint64_t)q, i) % 201) - 100;
        ok &= out[i] == (float)want;
    }
    CHECK(ok, "skipped n %zu r %s: not the exact sum", n, r);
    CHECK(same_everywhere(out, n * sizeof(float), comm), "results differ across ranks");
    MPI_Comm_free(&comm);
    free(in);
    free(out);
}

/* Full-rank inputs over several steps with error feedback.  Per step, with
 * S = sum over ranks of (input + old residual):
 *   result identical on all ranks;
 *   result = P P^T S is a projection: |R|^2 + |S - R|^2 = |S|^2 (when the
 *   matrix has no padding);
 *   new residuals sum to S - R;
 *   the warm-start Q is identical on all ranks.
 * Over all steps: sum of results + sum of final residuals = sum of inputs. */
static void case_error_feedback(size_t n, const char *r, int steps)
{
    MPI_Comm comm = psgd_comm(r);
    size_t m, c, rr;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    double *buf = malloc(n * sizeof(double)), *s = malloc(n * sizeof(double));
    double *sum_g = calloc(n, sizeof(double)), *sum_r = calloc(n, sizeof(double));
    float *res;

    hp_psgd_shape(n, (uint32_t)atoi(r), &m, &c, &rr);
    for (int t = 0; t < steps; t++) {
        double nr = 0, ns = 0, nd = 0, ne = 0, ns_ef = 0;
        for (size_t i = 0; i < n; i++)
            in[i] = urand(4000 + 131 * (uint64_t)me + (uint64_t)t, i) * (1.0f + (float)(i % 7));
        /* S from this rank's input and residual before the call */
        res = residual_of(comm, out, n, 0, n);
        CHECK(t == 0 || res != NULL, "step %d: no residual kept", t);
        for (size_t i = 0; i < n; i++) {
            buf[i] = (double)in[i] + (res != NULL ? (double)res[i] : 0.0);
            sum_g[i] += in[i];
        }
        MPI_Allreduce(buf, s, (int)n, MPI_DOUBLE, MPI_SUM, comm);
        CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "allreduce");
        CHECK(same_everywhere(out, n * sizeof(float), comm), "step %d: results differ across ranks", t);
        res = residual_of(comm, out, n, 0, n);
        CHECK(res != NULL, "step %d: no residual", t);
        if (res == NULL)
            break;
        for (size_t i = 0; i < n; i++)
            buf[i] = res[i];
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, comm);
        for (size_t i = 0; i < n; i++) {
            double d = s[i] - out[i];
            nr += (double)out[i] * out[i];
            ns += s[i] * s[i];
            nd += d * d;
            ne += (buf[i] - d) * (buf[i] - d);
            ns_ef += buf[i] * buf[i];
            sum_r[i] += out[i];
        }
        CHECK(nr > 0 && nd > 0, "step %d: a full-rank input must be approximated, not copied", t);
        /* with padding the projection is of the padded matrix, and the part
         * of P P^T S that falls into the padding is not part of R */
        CHECK(m * c != n || fabs(nr + nd - ns) <= EF_TOL * ns,
              "step %d: result is not a projection: |R|^2 %.6g + |S-R|^2 %.6g vs |S|^2 %.6g", t, nr, nd, ns);
        CHECK(sqrt(ne) <= EF_TOL * sqrt(ns), "step %d: residuals sum to S - R only within %.3g of |S| %.3g", t,
              sqrt(ne), sqrt(ns));
        if (me == 0 && getenv("HP_TEST_VERBOSE") != NULL)
            printf("np %d: n %zu r %s step %d: |R|/|S| %.3f, projection %.3g, residual sum %.3g\n", np, n, r, t,
                   sqrt(nr / ns), fabs(nr + nd - ns) / ns, sqrt(ne / ns));
        {
            float *q = residual_of(comm, out, n, 2, rr * c);
            int nonzero = 0;
            CHECK(q != NULL, "step %d: no warm-start Q", t);
            if (q != NULL) {
                for (size_t i = 0; i < rr * c; i++)
                    nonzero |= q[i] != 0.0f;
                CHECK(nonzero, "step %d: the warm-start Q was not stored", t);
                CHECK(same_everywhere(q, rr * c * sizeof(float), comm), "step %d: warm-start Q differs across ranks", t);
            }
        }
    }
    /* sum of results + sum of final residuals = sum of all inputs */
    res = residual_of(comm, out, n, 0, n);
    if (res != NULL) {
        double num = 0, den = 0;
        for (size_t i = 0; i < n; i++)
            buf[i] = res[i];
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, comm);
        MPI_Allreduce(MPI_IN_PLACE, sum_g, (int)n, MPI_DOUBLE, MPI_SUM, comm);
        for (size_t i = 0; i < n; i++) {
            double d = sum_r[i] + buf[i] - sum_g[i];
            num += d * d;
            den += sum_g[i] * sum_g[i];
        }
        CHECK(sqrt(num) <= EF_TOL * sqrt(den), "error feedback over %d steps: relative error %.3g", steps,
              sqrt(num / den));
        if (me == 0 && getenv("HP_TEST_VERBOSE") != NULL)
            printf("np %d: error feedback n %zu r %s over %d steps: relative error %.3g\n", np, n, r,
                   steps, sqrt(num / den));
    }
    MPI_Comm_free(&comm);
    free(in);
    free(out);
    free(buf);
    free(s);
    free(sum_g);
    free(sum_r);
}

/* NaN or Inf in one rank's input: NaN everywhere, residual and warm start
 * untouched, counted; the next finite call is finite again. */
static void case_nonfinite(size_t n, float bad)
{
    MPI_Comm comm = psgd_comm("4");
    size_t m, c, rr;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    float *res0 = malloc(n * sizeof(float)), *q0, *res, *q;
    hipress_stats_t st0, st1;
    int all_nan = 1, finite = 1;

    hp_psgd_shape(n, 4, &m, &c, &rr);
    q0 = malloc(rr * c * sizeof(float));
    for (size_t i = 0; i < n; i++)
        in[i] = urand(5000 + (uint64_t)me, i);
    CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "allreduce");
    res = residual_of(comm, out, n, 0, n);
    q = residual_of(comm, out, n, 2, rr * c);
    CHECK(res != NULL && q != NULL, "no state after a first call");
    if (res == NULL || q == NULL)
        goto out;
    memcpy(res0, res, n * sizeof(float));
    memcpy(q0, q, rr * c * sizeof(float));
    if (me == np - 1)
        in[n / 3] = bad;
    hipress_stats_get(&st0);
    CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "allreduce");
    hipress_stats_get(&st1);
    for (size_t i = 0; i < n; i++)
        all_nan &= isnan(out[i]);
    CHECK(all_nan, "input with %g on rank %d: the result must be NaN everywhere", bad, np - 1);
    CHECK(st1.nonfinite == st0.nonfinite + 1, "non-finite call not counted (%llu -> %llu)",
          st0.nonfinite, st1.nonfinite);
    res = residual_of(comm, out, n, 0, n);
    q = residual_of(comm, out, n, 2, rr * c);
    CHECK(res != NULL && memcmp(res, res0, n * sizeof(float)) == 0, "residual changed by a non-finite call");
    CHECK(q != NULL && memcmp(q, q0, rr * c * sizeof(float)) == 0, "warm start changed by a non-finite call");
    in[n / 3] = 0.5f;
    CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "allreduce");
    for (size_t i = 0; i < n; i++)
        finite &= isfinite(out[i]) != 0;
    CHECK(finite, "a finite call after a non-finite one must be finite");
    CHECK(same_everywhere(out, n * sizeof(float), comm), "results differ across ranks");
out:
    MPI_Comm_free(&comm);
    free(in);
    free(out);
    free(res0);
    free(q0);
}

/* A rank that sends a corrupt message: every rank returns an error, nobody
 * hangs, and the communicator works again afterwards. */
static void case_corrupt(size_t n)
{
    MPI_Comm comm = psgd_comm("4");
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    int rc, failed, all_failed;
    for (size_t i = 0; i < n; i++)
        in[i] = urand(6000 + (uint64_t)me, i);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    hipress_comm_set(comm, "HIPRESS_TEST_CORRUPT", "1");
    rc = allreduce(in, out, n, comm);
    failed = rc != MPI_SUCCESS;
    MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    CHECK(all_failed, "a corrupt message must fail the call on every rank (rc %d here)", rc);
    hipress_comm_set(comm, "HIPRESS_TEST_CORRUPT", "-1");
    CHECK(allreduce(in, out, n, comm) == MPI_SUCCESS, "the call after a failed one");
    CHECK(same_everywhere(out, n * sizeof(float), comm), "results differ across ranks");
    MPI_Comm_free(&comm);
    free(in);
    free(out);
}

/* powersgd's host run without a residual store (no error feedback, no warm
 * start): still exact for a shared low-rank matrix, identical everywhere. */
static void *scratch(void *ctx, size_t bytes)
{
    void **p = (void **)ctx;
    free(*p);
    *p = hp_aligned_alloc(bytes);
    return *p;
}

static void case_no_store(size_t n)
{
    MPI_Comm comm;
    hp_transport_t tp;
    hp_call_t call;
    hipress_comp_params_t params;
    size_t m, c, rr;
    double *want = malloc(n * sizeof(double));
    float *buf = malloc(n * sizeof(float));
    void *mem = NULL;

    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    hipress_comp_params_default(&params);
    params.powersgd_rank = 3;
    hp_psgd_shape(n, 3, &m, &c, &rr);
    lowrank(want, n, m, c, 2, 7000);
    for (size_t i = 0; i < n; i++) {
        buf[i] = (float)want[i];
        want[i] = (double)buf[i] * np;
    }
    CHECK(hp_tp_mpi_init(&tp, comm, NULL, 0) == HP_OK, "hp_tp_mpi_init");
    memset(&call, 0, sizeof(call));
    call.tp = &tp;
    call.buf = buf;
    call.n = n;
    call.kind = hp_comp_find("powersgd");
    call.params = &params;
    call.seed = 99;
    call.part_elems = 1 << 18;
    call.scratch = scratch;
    call.scratch_ctx = &mem;
    CHECK(call.kind >= 0 && hp_algo_collective(&call) == HP_OK, "hp_algo_collective");
    check_close("no residual store, shared rank-2 matrix", buf, want, n, EXACT_TOL);
    CHECK(same_everywhere(buf, n * sizeof(float), comm), "results differ across ranks");
    CHECK(tp.bytes_sent > 0 && tp.bytes_sent < n * sizeof(float), "wire bytes %zu for %zu floats",
          tp.bytes_sent, n);
    free(mem);
    MPI_Comm_free(&comm);
    free(want);
    free(buf);
}

int main(int argc, char **argv)
{
    int any;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (hp_init_after_mpi() != 0) {
        fprintf(stderr, "hipress initialisation failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    case_shared_lowrank(81, 4, "4");           /* 9 x 9, the smallest that shrinks */
    case_shared_lowrank(65536, 4, "4");        /* 256 x 256 */
    case_shared_lowrank(100003, 3, "4");       /* padded last row */
    case_shared_lowrank(100003, 1, "8");       /* rank-deficient P: 7 zero columns */
    case_shared_lowrank(50021, 12, "12");
    case_shared_lowrank(1201216, 5, "32");     /* 1096 x 1096: two column tiles */
    case_sum_of_rank1(70001);
    case_zero(40000);
    case_skipped(40, "4");                     /* 6 x 7: 4 * 13 >= 40 */
    case_skipped(10000, "256");                /* r capped at 100: 100 * 200 >= 10000 */
    case_error_feedback(90000, "4", 6);        /* 300 x 300 */
    case_error_feedback(30102, "1", 4);        /* 173 x 174 */
    case_error_feedback(50021, "2", 4);        /* padded */
    case_error_feedback(1100401, "64", 2);     /* 1049 x 1049: three column tiles */
    case_nonfinite(50000, NAN);
    case_nonfinite(50000, -INFINITY);
    case_corrupt(50000);
    case_no_store(60001);

    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0)
        printf("mpi_powersgd np %d: %s (%d failed checks)\n", np, any ? "FAIL" : "ok", any);
    MPI_Finalize();
    return any ? 1 : 0;
}
