/*
 * Device buffers in MPI collectives hipress does not compress.
 *
 * A CUDA-aware MPI takes device pointers: they go to PMPI unchanged.  Open
 * MPI as Debian ships it is not CUDA-aware and would read device memory as
 * host memory (a crash), so there each call is staged exactly: the bytes
 * the datatype touches are copied to host memory, PMPI runs on the host
 * copy, and what it wrote is copied back.  The copies go through the CUDA
 * module (hp_gpu_ops_t); without it (a build without CUDA) the call goes to
 * PMPI unchanged, with one warning.
 *
 * MPI_Bcast and MPI_Allgatherv (Horovod's GPU-MPI mode calls them on device
 * memory) are wrapped for this alone: their wrappers give host buffers
 * straight to PMPI after the few instructions of hp_gpu_watch_fired(), and
 * the rest, through the front end's entry, to the functions here.
 */
#define _GNU_SOURCE
#include "hp_mpi_stage.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

int hp_mpi_cuda_aware(void)
{
    static _Atomic int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    int (*query)(void);

    if (v >= 0)
        return v;
    switch (hp_cfg_i(&hp_g.cfg, HP_S_GPU_MPI_AWARE)) {
    case HP_GPU_AWARE_YES:
        v = 1;
        HP_INFO("gpu: HIPRESS_GPU_MPI_AWARE=yes: device buffers go to MPI unchanged");
        break;
    case HP_GPU_AWARE_NO:
        v = 0;
        HP_INFO("gpu: HIPRESS_GPU_MPI_AWARE=no: device buffers are staged through host memory");
        break;
    default:
        /* Open MPI's extension; looked up at run time so the answer is the
         * one of the libmpi the job runs with, and any MPI links */
        query = (int (*)(void))dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
        v = query != NULL && query() != 0;
        HP_INFO("gpu: the MPI is %sCUDA-aware (%s): device buffers %s", v ? "" : "not ",
                query != NULL ? (v ? "MPIX_Query_cuda_support() = 1" : "MPIX_Query_cuda_support() = 0")
                              : "no MPIX_Query_cuda_support in this MPI; HIPRESS_GPU_MPI_AWARE=yes says otherwise",
                v ? "go to MPI unchanged" : "are staged through host memory");
        break;
    }
    atomic_store(&cached, v);
    return v;
}

int hp_mpi_buffers_kind(const void *sendbuf, const void *recvbuf, hp_gpu_ptr_t kinds[2])
{
    kinds[0].kind = kinds[1].kind = HP_MEM_HOST;
    kinds[0].device = kinds[1].device = -1;
    kinds[0].ctx = kinds[1].ctx = NULL;
    if (!hp_gpu_driver_loaded())
        return 0;
    if (sendbuf != MPI_IN_PLACE)
        hp_gpu_ptr_query(sendbuf, &kinds[0]);
    if (recvbuf != MPI_IN_PLACE)
        hp_gpu_ptr_query(recvbuf, &kinds[1]);
    return kinds[0].kind != HP_MEM_HOST || kinds[1].kind != HP_MEM_HOST;
}

/* ------------------------------------------------------------- staging */

/* A host copy of the bytes [lo, hi) of a device buffer. */
typedef struct {
    char              *mem;       /* hi - lo bytes */
    char              *dev;       /* the device buffer */
    long long          lo, hi;
    const hp_gpu_ptr_t *where;
} stage_t;

/* The host address that stands for the device buffer itself. */
static void *stage_base(const stage_t *st)
{
    return (void *)((uintptr_t)st->mem - (uintptr_t)st->lo);
}

static void stage_abort(MPI_Comm comm, long long bytes)
{
    fprintf(stderr, "hipress: error: cannot allocate %lld bytes of host memory to stage a device buffer "
            "for an MPI that is not CUDA-aware\n", bytes);
    fflush(stderr);
    PMPI_Abort(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, 1);
}

/* Allocate the host copy; with copy_in, fill it from the device.  Returns 0,
 * or 1 when the copy failed (the host copy is still usable: the caller
 * takes part in the collective and reports the error after). */
static int stage_in(stage_t *st, const hp_gpu_ops_t *ops, void *dev, long long lo, long long hi,
                    const hp_gpu_ptr_t *where, int copy_in, MPI_Comm comm)
{
    size_t bytes = (size_t)(hi - lo);
    st->dev = (char *)dev;
    st->lo = lo;
    st->hi = hi;
    st->where = where;
    st->mem = malloc(bytes ? bytes : 1);
    if (st->mem == NULL)
        stage_abort(comm, hi - lo);
    if (!copy_in || bytes == 0)
        return 0;
    if (ops->memcpy_d2h(st->mem, st->dev + lo, bytes, where) != HP_GPU_OK) {
        HP_WARN("gpu: copying %zu bytes of a device buffer to host memory failed: %s", bytes, ops->last_error());
        memset(st->mem, 0, bytes);
        return 1;
    }
    return 0;
}

static int stage_out(const stage_t *st, const hp_gpu_ops_t *ops)
{
    size_t bytes = (size_t)(st->hi - st->lo);
    if (bytes == 0 || ops->memcpy_h2d(st->dev + st->lo, st->mem, bytes, st->where) == HP_GPU_OK)
        return 0;
    HP_WARN("gpu: copying %zu bytes back to a device buffer failed: %s", bytes, ops->last_error());
    return 1;
}

/* Bytes [lo, hi) that `count` elements of `dt` touch, and whether they hold
 * gaps (bytes the datatype skips, which a staged receive must preserve).
 * -1 when the datatype cannot be queried or the span overflows: the caller
 * then leaves the (erroneous) call to PMPI. */
static int type_span(int count, MPI_Datatype dt, long long *lo_p, long long *hi_p, int *gaps_p)
{
    MPI_Aint lb, extent, tlb, textent;
    int size;
    if (dt == MPI_DATATYPE_NULL || PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &tlb, &textent) != MPI_SUCCESS ||
        PMPI_Type_size(dt, &size) != MPI_SUCCESS)
        return -1;
    if (hp_type_span(count, extent, tlb, textent, lo_p, hi_p) != 0)
        return -1;
    *gaps_p = (long long)count * size != *hi_p - *lo_p;
    return 0;
}

/* Route a call with device buffers and count it; NULL ops unless staging
 * (the caller counts the staged calls: an erroneous one still goes to PMPI
 * unchanged, for MPI to report). */
static hp_gpu_route_t route(int coll, const hp_gpu_ops_t **ops_p)
{
    static _Atomic int warned;
    char why[600];
    hp_gpu_route_t r;
    const hp_gpu_ops_t *ops = NULL;
    int aware = hp_mpi_cuda_aware();

    if (!aware)
        ops = hp_gpu_module(0, why, sizeof(why));
    r = hp_gpu_route(1, aware, ops != NULL);
    atomic_fetch_add_explicit(&hp_g.stats.dev_calls[coll], 1, memory_order_relaxed);
    if (r == HP_GPU_ROUTE_UNSTAGED) {
        atomic_fetch_add_explicit(&hp_g.stats.dev_unstaged[coll], 1, memory_order_relaxed);
        if (atomic_exchange(&warned, 1) == 0)
            HP_WARN("gpu: a device buffer reached MPI, which is not CUDA-aware, and hipress cannot stage it (%s); "
                    "passing it to MPI unchanged", why);
    }
    *ops_p = ops;
    return r;
}

static void count_staged(int coll)
{
    atomic_fetch_add_explicit(&hp_g.stats.dev_staged[coll], 1, memory_order_relaxed);
}

/* An error of the staging copies, raised as hipress errors are. */
static int stage_error(MPI_Comm comm)
{
    atomic_fetch_add_explicit(&hp_g.stats.errors, 1, memory_order_relaxed);
    PMPI_Comm_call_errhandler(comm, hp_g.err_code);
    return hp_g.err_code;
}

/* ----------------------------------------------------------- allreduce */

int hp_mpi_allreduce_pass(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm, const hp_gpu_ptr_t *kinds)
{
    hp_gpu_ptr_t k[2];
    const hp_gpu_ops_t *ops;
    stage_t ss, rs;
    long long lo, hi;
    int gaps, in_place = sendbuf == MPI_IN_PLACE, bad = 0, rc;
    const void *s;
    void *r;

    if (kinds == NULL) {
        if (!hp_mpi_buffers_kind(sendbuf, recvbuf, k))
            return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
        kinds = k;
    } else if (kinds[0].kind == HP_MEM_HOST && kinds[1].kind == HP_MEM_HOST) {
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
    if (route(HP_COLL_ALLREDUCE, &ops) != HP_GPU_ROUTE_STAGE ||
        type_span(count, datatype, &lo, &hi, &gaps) != 0 || hi == lo)
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    count_staged(HP_COLL_ALLREDUCE);
    s = sendbuf;
    r = recvbuf;
    if (!in_place && kinds[0].kind != HP_MEM_HOST) {
        bad |= stage_in(&ss, ops, (void *)sendbuf, lo, hi, &kinds[0], 1, comm);
        s = stage_base(&ss);
    }
    if (kinds[1].kind != HP_MEM_HOST) {
        /* read first when the buffer is also the input, or holds gaps the
         * copy back must not overwrite */
        bad |= stage_in(&rs, ops, recvbuf, lo, hi, &kinds[1], in_place || gaps, comm);
        r = stage_base(&rs);
    }
    rc = PMPI_Allreduce(s, r, count, datatype, op, comm);
    if (kinds[1].kind != HP_MEM_HOST) {
        if (rc == MPI_SUCCESS && !bad)
            bad |= stage_out(&rs, ops);
        free(rs.mem);
    }
    if (!in_place && kinds[0].kind != HP_MEM_HOST)
        free(ss.mem);
    return rc == MPI_SUCCESS && bad ? stage_error(comm) : rc;
}

/* --------------------------------------------------------------- bcast */

int hp_mpi_bcast_pass(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    hp_gpu_ptr_t k;
    const hp_gpu_ops_t *ops;
    stage_t st;
    long long lo, hi;
    int gaps, inter = 0, rank = -1, sender, receiver, bad = 0, rc;

    if (!hp_gpu_driver_loaded())
        return PMPI_Bcast(buf, count, datatype, root, comm);
    hp_gpu_ptr_query(buf, &k);
    if (k.kind == HP_MEM_HOST)
        return PMPI_Bcast(buf, count, datatype, root, comm);
    if (route(HP_COLL_BCAST, &ops) != HP_GPU_ROUTE_STAGE || comm == MPI_COMM_NULL ||
        PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
        type_span(count, datatype, &lo, &hi, &gaps) != 0 || hi == lo)
        return PMPI_Bcast(buf, count, datatype, root, comm);
    /* on an intercommunicator the root says MPI_ROOT, its group's other
     * ranks MPI_PROC_NULL (their buffer is not used) */
    sender = inter ? root == MPI_ROOT : root == rank;
    receiver = inter ? root != MPI_ROOT && root != MPI_PROC_NULL : root != rank;
    if (!sender && !receiver)
        return PMPI_Bcast(buf, count, datatype, root, comm);
    count_staged(HP_COLL_BCAST);
    bad |= stage_in(&st, ops, buf, lo, hi, &k, sender || gaps, comm);
    rc = PMPI_Bcast(stage_base(&st), count, datatype, root, comm);
    if (receiver && rc == MPI_SUCCESS && !bad)
        bad |= stage_out(&st, ops);
    free(st.mem);
    return rc == MPI_SUCCESS && bad ? stage_error(comm) : rc;
}

/* ---------------------------------------------------------- allgatherv */

int hp_mpi_allgatherv_pass(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    hp_gpu_ptr_t k[2];
    const hp_gpu_ops_t *ops;
    stage_t ss, rs;
    MPI_Aint lb, rext, rtlb, rtext;
    long long slo = 0, shi = 0, rlo, rhi;
    int sgaps = 0, rsize, n = 0, inter = 0, covered = 0, bad = 0, rc;
    int in_place = sendbuf == MPI_IN_PLACE;
    const void *s = sendbuf;
    void *r = recvbuf;

#define PASS() PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm)
    if (!hp_mpi_buffers_kind(sendbuf, recvbuf, k))
        return PASS();
    if (route(HP_COLL_ALLGATHERV, &ops) != HP_GPU_ROUTE_STAGE || comm == MPI_COMM_NULL ||
        recvcounts == NULL || displs == NULL || recvtype == MPI_DATATYPE_NULL ||
        PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        (inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS ||
        PMPI_Type_get_extent(recvtype, &lb, &rext) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(recvtype, &rtlb, &rtext) != MPI_SUCCESS ||
        PMPI_Type_size(recvtype, &rsize) != MPI_SUCCESS ||
        hp_allgatherv_span(n, recvcounts, displs, rext, rtlb, rtext, rsize, &rlo, &rhi, &covered) != 0 ||
        (!in_place && type_span(sendcount, sendtype, &slo, &shi, &sgaps) != 0))
        return PASS();
    (void)sgaps;
    count_staged(HP_COLL_ALLGATHERV);
    if (!in_place && k[0].kind != HP_MEM_HOST && shi > slo) {
        bad |= stage_in(&ss, ops, (void *)sendbuf, slo, shi, &k[0], 1, comm);
        s = stage_base(&ss);
    }
    if (k[1].kind != HP_MEM_HOST && rhi > rlo) {
        /* in place, this rank's block is its input; and bytes no block
         * covers must survive the copy back */
        bad |= stage_in(&rs, ops, recvbuf, rlo, rhi, &k[1], in_place || !covered, comm);
        r = stage_base(&rs);
    }
    rc = PMPI_Allgatherv(s, sendcount, sendtype, r, recvcounts, displs, recvtype, comm);
    if (r != recvbuf) {
        if (rc == MPI_SUCCESS && !bad)
            bad |= stage_out(&rs, ops);
        free(rs.mem);
    }
    if (s != sendbuf)
        free(ss.mem);
    return rc == MPI_SUCCESS && bad ? stage_error(comm) : rc;
#undef PASS
}
