/*
 * MPI interposition (PMPI).  Each wrapper forwards to libmpi's PMPI_* entry;
 * hipress exports no PMPI_* symbol of its own.  MPI_Allreduce's fast path
 * (anything but MPI_FLOAT + MPI_SUM) costs two compares and two atomic adds,
 * plus the load watch of the GPU path (hp_gpu.h), which stays quiet in a
 * process that never loads CUDA.
 */
#include "hp_front_mpi.h"
#include "hp_backend.h"
#include "hp_mpi_stage.h"
#include <ctype.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

#define HP_WRAP HP_EXPORT

static void count_reason(hp_elig_t r)
{
    atomic_fetch_add_explicit(&hp_g.stats.reason[HP_FRONT_MPI][r], 1, memory_order_relaxed);
}

HP_WRAP int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        PMPI_Query_thread(&hp_g.thread_level);
        hp_init_after_mpi();
    }
    return rc;
}

HP_WRAP int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    /* never raise the level the application asked for */
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        hp_g.thread_level = *provided;
        hp_init_after_mpi();
    }
    return rc;
}

HP_WRAP int MPI_Finalize(void)
{
    hp_finalize_before_mpi();
    return PMPI_Finalize();
}

HP_EXPORT const char *hipress_library(void)
{
    return "libhipress";
}

/* Everything that is not a plain float sum is decided here, off the fast
 * path: the call's own eligibility, then the driver (src/drive/hp_drive.c),
 * which agrees with the other ranks before it compresses. */
static __attribute__((noinline)) int allreduce_slow(const void *sendbuf, void *recvbuf, int count,
                                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    hp_call_desc_t d;
    hp_comm_t *c = NULL;
    const hp_config_t *cfg = &hp_g.cfg;
    hp_gpu_ptr_t kinds[2];
    int r, rc, any_device = 0, gpu = 0;

    memset(&d, 0, sizeof(d));
    /* device memory must never reach the CPU path; it can exist only once
     * the watch has fired.  The GPU compresses what it can (the decision:
     * hp_gpu_compress_route, agreed by the driver with the other ranks'
     * like every rank-local fact); the rest is passed through, staged. */
    if (HP_UNLIKELY(hp_gpu_watch_fired())) {
        any_device = hp_mpi_buffers_kind(sendbuf, recvbuf, kinds);
        gpu = any_device && hp_gpu_compress_route(&hp_g.cfg, kinds, sendbuf, recvbuf);
        d.device = any_device && !gpu;
    }
    d.enabled = 1;
    d.op_is_sum = 1;
    d.dtype_is_float = 1;
    d.count = count;
    d.elem_size = sizeof(float);
    d.sendbuf = sendbuf;
    d.recvbuf = recvbuf == MPI_IN_PLACE ? NULL : recvbuf;   /* erroneous: PMPI reports it */
    d.in_place = sendbuf == MPI_IN_PLACE;
    d.null_handle = comm == MPI_COMM_NULL;
    if (!d.null_handle) {
        if (PMPI_Comm_test_inter(comm, &d.is_inter) != MPI_SUCCESS ||
            PMPI_Comm_size(comm, &d.comm_size) != MPI_SUCCESS)
            d.null_handle = 1;
        else if (!d.is_inter && (c = hp_mpi_comm(comm, 0)) != NULL) {
            cfg = &c->cfg;
            d.opted_out = c->opted_out;
        }
    }
    d.min_bytes = (size_t)hp_cfg_i(cfg, HP_S_MIN_BYTES);
    r = hp_eligible(&d);
    /* every rank of a correct program shares the other criteria: those
     * ranks meet in the driver's agreement, so that no rank compresses
     * while another passes through */
    if (r == HP_ELIG_YES || hp_eligible_shared(&d) == HP_ELIG_YES) {
        int why = HP_ELIG_YES;
        if (c == NULL && (c = hp_mpi_comm(comm, 1)) == NULL)
            why = HP_ELIG_DISABLED;
        else if (hp_mpi_allreduce(sendbuf, recvbuf, (size_t)count, comm, c, r == HP_ELIG_YES, gpu, NULL, &rc, NULL,
                                          &why))
            return rc;
        if (r == HP_ELIG_YES)
            r = why;
    }
    count_reason((hp_elig_t)r);
    if (HP_UNLIKELY(any_device))
        return hp_mpi_allreduce_pass(sendbuf, recvbuf, count, datatype, op, comm, kinds);
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

/* A call the fast path passes through, once device memory may exist: PMPI,
 * with device buffers staged when the MPI cannot take them.  Six arguments,
 * so the fast path reaches it by a plain jump. */
static __attribute__((noinline)) int allreduce_pass_watch(const void *sendbuf, void *recvbuf, int count,
                                                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return hp_mpi_allreduce_pass(sendbuf, recvbuf, count, datatype, op, comm, NULL);
}

HP_WRAP int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm)
{
    if (HP_UNLIKELY(!hp_g.enabled))
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    atomic_fetch_add_explicit(&hp_g.stats.calls[HP_FRONT_MPI], 1, memory_order_relaxed);
    if (datatype != MPI_FLOAT) {
        count_reason(HP_ELIG_DATATYPE);
        if (HP_UNLIKELY(hp_gpu_watch_fired()))
            return allreduce_pass_watch(sendbuf, recvbuf, count, datatype, op, comm);
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
    if (op != MPI_SUM) {
        count_reason(HP_ELIG_OP);
        if (HP_UNLIKELY(hp_gpu_watch_fired()))
            return allreduce_pass_watch(sendbuf, recvbuf, count, datatype, op, comm);
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
    return allreduce_slow(sendbuf, recvbuf, count, datatype, op, comm);
}

#ifdef HAVE_MPI_ALLREDUCE_C
/* MPI-4 large-count variant: counted and passed through (hipress compresses
 * the int-count entry point only). */
HP_WRAP int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                            MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    if (hp_g.enabled && datatype == MPI_FLOAT && op == MPI_SUM && count >= 0 && count <= INT_MAX)
        return MPI_Allreduce(sendbuf, recvbuf, (int)count, datatype, op, comm);
    return PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
}
#endif

/* Info keys "hipress_compress" (bool) and "hipress_<setting>" tune one
 * communicator; every other key goes to MPI unchanged. */
HP_WRAP int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info)
{
    int rc = PMPI_Comm_set_info(comm, info);
    int nkeys = 0, bad = 0;

    if (rc != MPI_SUCCESS || !hp_g.initialized || comm == MPI_COMM_NULL || info == MPI_INFO_NULL)
        return rc;
    if (PMPI_Info_get_nkeys(info, &nkeys) != MPI_SUCCESS)
        return rc;
    for (int i = 0; i < nkeys; i++) {
        char key[MPI_MAX_INFO_KEY + 1], value[HP_STR_MAX], name[MPI_MAX_INFO_KEY + 16];
        int flag = 0;
        if (PMPI_Info_get_nthkey(info, i, key) != MPI_SUCCESS || strncasecmp(key, "hipress_", 8) != 0)
            continue;
        if (PMPI_Info_get(info, key, HP_STR_MAX - 1, value, &flag) != MPI_SUCCESS || !flag)
            continue;
        if (strcasecmp(key, "hipress_compress") == 0) {
            snprintf(name, sizeof(name), "HIPRESS_ENABLE");
        } else {
            size_t k;
            snprintf(name, sizeof(name), "HIPRESS_%s", key + 8);
            for (k = 8; name[k]; k++)
                name[k] = (char)toupper((unsigned char)name[k]);
        }
        if (hipress_comm_set(comm, name, value) != HIPRESS_OK)
            bad = 1;
    }
    if (bad) {
        PMPI_Comm_call_errhandler(comm, MPI_ERR_INFO_VALUE);
        return MPI_ERR_INFO_VALUE;
    }
    return rc;
}
