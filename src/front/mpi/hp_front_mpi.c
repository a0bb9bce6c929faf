/*
 * The MPI front end's table for the driver (hp_front.h): the private
 * communicator's transport, host or device memory (the device path's
 * buffers were routed to the GPU by the wrapper), PMPI_Allreduce for a
 * plain plan and for HIPRESS_VERIFY's exact sum, and MPI error codes.
 * MPI calls are host-synchronous: a call is done when it returns.
 */
#include "hp_front_mpi.h"
#include "hp_backend_mpi.h"
#include "hp_global.h"
#include "hp_tp_mpi.h"
#include "hp_watchdog.h"
#include <stdlib.h>
#include <string.h>

#define STAT_ADD(field, v) atomic_fetch_add_explicit(&hp_g.stats.field, (v), memory_order_relaxed)

static MPI_Comm priv_of(const hp_comm_t *c)
{
    return hp_tp_mpi_comm(&c->tp_store[0][0]);
}

static hp_status_t mpi_begin(hp_comm_t *c, hp_dcall_t *d)
{
    d->tp = c->tp;
    d->async = 0;
    hp_mem_begin_owned(&d->mem, d->recv, &c->owner);
    if (hp_mem_is_device(&d->mem))
        STAT_ADD(dev_calls[HP_COLL_ALLREDUCE], 1);
    return HP_OK;
}

static hp_status_t mpi_widen(hp_comm_t *c, hp_dcall_t *d)
{
    (void)c;
    d->data = d->recv;
    return HP_OK;
}

static hp_status_t mpi_plain(hp_comm_t *c, hp_dcall_t *d, const void *send)
{
    hp_wd_wait_t w;
    int rc;
    if (hp_mem_is_device(&d->mem))
        STAT_ADD(dev_staged[HP_COLL_ALLREDUCE], 1);
    hp_wd_enter(&w, "an allreduce the plan sent plain", -1);
    rc = hp_mem_pmpi_allreduce(&d->mem, send != NULL ? send : MPI_IN_PLACE, d->recv, d->count,
                               (MPI_Comm)c->handle);
    hp_wd_leave(&w);
    return rc == MPI_SUCCESS ? HP_OK : HP_ST_MPI(rc);
}

static hp_status_t mpi_finish(hp_comm_t *c, hp_dcall_t *d, hp_status_t st)
{
    (void)c; (void)d; (void)st;   /* MPI's result is in recv as it is */
    return HP_OK;
}

static hp_status_t mpi_end(hp_comm_t *c, hp_dcall_t *d)
{
    (void)c;
    return hp_mem_end(&d->mem);
}

static hp_status_t mpi_exact(hp_comm_t *c, hp_dcall_t *d, float *out)
{
    int rc;
    if (out == NULL)
        return HP_ERR_NOMEM;
    d->mem.ops->copy(&d->mem, out, d->data, d->count * sizeof(float));
    rc = PMPI_Allreduce(MPI_IN_PLACE, out, (int)d->count, MPI_FLOAT, MPI_SUM, priv_of(c));
    return rc == MPI_SUCCESS ? HP_OK : HP_ST_MPI(rc);
}

const hp_front_t hp_front_mpi = {
    .name = "mpi",
    .prefix = "",
    .call = "allreduce",
    .call_desc = "an MPI_Allreduce of MPI_FLOAT with MPI_SUM",
    .on_failure = "",
    .id = HP_FRONT_MPI,
    .flags = HP_FRONT_AGREE_CALLS,
    .ready = hp_mpi_comm_ready,
    .begin = mpi_begin,
    .widen = mpi_widen,
    .plain = mpi_plain,
    .prepare = NULL,
    .finish = mpi_finish,
    .end = mpi_end,
    .exact = mpi_exact,
    .async_flag = NULL,
};

/* The MPI error code of a status: MPI's own where an MPI call failed, the
 * count mismatch of an erroneous program, else hipress' error class. */
static int mpi_native(hp_status_t st)
{
    switch (HP_ST_CLASS(st)) {
    case HP_OK:          return MPI_SUCCESS;
    case HP_ERR_INVALID: return MPI_ERR_COUNT;
    case HP_ERR_MPI:     return HP_ST_CAUSE(st) != 0 ? HP_ST_CAUSE(st) : hp_g.err_code;
    default:             return hp_g.err_code;
    }
}

int hp_mpi_allreduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Comm comm, hp_comm_t *c, int local_ok,
                     int mem_kind, const hp_mpi_key_t *key, int *rc_p, hp_status_t *st_p, int *reason_p)
{
    hp_dcall_t d;
    hp_status_t st;
    hp_drive_res_t res;

    memset(&d, 0, sizeof(d));
    d.send = sendbuf == MPI_IN_PLACE ? NULL : sendbuf;
    d.recv = recvbuf;
    d.count = count;
    d.elem = HP_ELEM_F32;
    d.local_ok = local_ok;
    d.mem_kind = mem_kind;
    if (key != NULL) {
        d.key = key->key;
        d.key_what = key->what;
        d.key_str = key->str;
    }
    hp_comm_get(c);
    res = hp_drive(c, &d, &st, reason_p);
    hp_comm_put(c);
    if (res == HP_DRIVE_PASS)
        return 0;
    *rc_p = mpi_native(st);
    if (st_p != NULL)
        *st_p = st;
    if (st != HP_OK)
        PMPI_Comm_call_errhandler(comm, *rc_p);
    return 1;
}

int hp_mpi_allreduce_try(const hp_mpi_call_t *k, int *rc_p, hp_status_t *st_p)
{
    hp_call_desc_t d;
    hp_comm_t *c = k->c;
    hp_elig_t r;

    memset(&d, 0, sizeof(d));
    d.enabled = k->enabled;
    d.op_is_sum = 1;
    d.dtype_is_float = 1;
    d.count = k->count;
    d.elem_size = sizeof(float);
    d.sendbuf = k->sendbuf;
    d.recvbuf = k->recvbuf == MPI_IN_PLACE ? NULL : k->recvbuf;   /* erroneous: PMPI reports it */
    d.in_place = k->sendbuf == MPI_IN_PLACE;
    d.device = k->device;
    d.comm_size = k->size;
    d.null_handle = k->comm == MPI_COMM_NULL;
    if (k->size == 0 && !d.null_handle &&
        (PMPI_Comm_test_inter(k->comm, &d.is_inter) != MPI_SUCCESS ||
         PMPI_Comm_size(k->comm, &d.comm_size) != MPI_SUCCESS))
        d.null_handle = 1;
    /* the one lookup of the call's state */
    if (c == NULL && d.enabled && !d.null_handle && !d.is_inter)
        c = hp_mpi_comm(k->comm, 0);
    if (c != NULL)
        d.opted_out = c->opted_out;
    d.min_bytes = (size_t)hp_cfg_i(c != NULL ? &c->cfg : &hp_g.cfg, HP_S_MIN_BYTES);
    r = hp_eligible(&d);
    /* every rank of a correct program shares the other criteria: those
     * ranks meet in the driver's agreement, so that no rank compresses
     * while another passes through */
    if (r == HP_ELIG_YES || hp_eligible_shared(&d) == HP_ELIG_YES) {
        int why = HP_ELIG_YES;
        if (c == NULL && (c = hp_mpi_comm(k->comm, 1)) == NULL)
            why = HP_ELIG_DISABLED;
        else if (hp_mpi_allreduce(k->sendbuf, k->recvbuf, (size_t)k->count, k->comm, c, r == HP_ELIG_YES, k->gpu,
                                  k->key, rc_p, st_p, &why))
            return 1;
        if (r == HP_ELIG_YES)
            r = (hp_elig_t)why;
    }
    atomic_fetch_add_explicit(&hp_g.stats.reason[HP_FRONT_MPI][r], 1, memory_order_relaxed);
    return 0;
}

/* ------------------------------------------------------------ public */

hp_comm_t *hp_mpi_comm(MPI_Comm comm, int create)
{
    hp_comm_t *c = NULL;
    int flag = 0, rank = 0, size = 0, keyval = hp_mpi_keyval();

    if (keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL)
        return NULL;
    if (PMPI_Comm_get_attr(comm, keyval, &c, &flag) != MPI_SUCCESS)
        return NULL;
    if (flag || !create)
        return flag ? c : NULL;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    if ((c = hp_comm_new(&hp_front_mpi, (void *)comm, rank, size)) == NULL)
        return NULL;
    /* the job's settings were agreed at MPI_Init; a communicator's own
     * changes follow hipress_comm_set's rule (the same on every rank) */
    c->state = c->state_set = HP_COMM_ON;
    if (PMPI_Comm_set_attr(comm, keyval, c) != MPI_SUCCESS) {
        hp_comm_put(c);
        return NULL;
    }
    return c;
}

HP_EXPORT int hipress_comm_set(MPI_Comm comm, const char *name, const char *value)
{
    hp_comm_t *c;
    char err[512];
    int initialized = 0;

    PMPI_Initialized(&initialized);
    if (!initialized || !hp_g.initialized)
        return HIPRESS_ERR_STATE;
    if (name == NULL || value == NULL)
        return HIPRESS_ERR_INVALID;
    if ((c = hp_mpi_comm(comm, 1)) == NULL)
        return HIPRESS_ERR_INVALID;
    if (hp_comm_set(c, name, value, err, sizeof(err)) != HP_OK) {
        HP_WARN("hipress_comm_set: %s", err);
        return HIPRESS_ERR_INVALID;
    }
    return HIPRESS_OK;
}

HP_EXPORT int hipress_comm_plan(MPI_Comm comm, size_t bytes, char *buf, size_t len)
{
    hp_comm_t *c = hp_mpi_comm(comm, 0);
    if (buf == NULL || len == 0)
        return HIPRESS_ERR_INVALID;
    if (c == NULL) {
        snprintf(buf, len, "none");
        return HIPRESS_OK;
    }
    hp_plan_text(&c->planner, bytes, buf, len);
    return HIPRESS_OK;
}

HP_EXPORT int hipress_comm_residual(MPI_Comm comm, const void *buf, size_t count, float *out)
{
    hp_comm_t *c;
    hp_res_buf_t *rb;
    if (!hp_g.initialized || buf == NULL || (out == NULL && count > 0))
        return HIPRESS_ERR_INVALID;
    c = hp_mpi_comm(comm, 0);
    /* a lookup with layout trust: it must not count as a call on the buffer */
    rb = c != NULL ? hp_residual_buffer(c->res, (uintptr_t)buf, count, 0, HP_LAYOUT_TRUST, NULL) : NULL;
    if (rb != NULL && rb->len[HP_RES_R] == count && rb->vec[HP_RES_R] != NULL) {
        if (hp_mem_residual_read(rb, rb->vec[HP_RES_R], out, count) != 0)
            return HIPRESS_ERR_DEVICE;
    } else if (count > 0) {
        memset(out, 0, count * sizeof(float));
    }
    return HIPRESS_OK;
}
