/*
 * The MPI transport (hp_tp_mpi_ops): PMPI point-to-point and PMPI_Allreduce
 * on a communicator hipress owns.  Sends move a message's own length, not
 * its capacity; a receive of a message checks that the bytes that arrived
 * are the whole message its header describes (hp_msg_arrived), which a
 * transport that moves whole capacities does not need.  Every blocking wait
 * registers with the watchdog.
 */
#include "hp_tp_mpi.h"
#include "hp_comp.h"
#include "hp_watchdog.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HP_TAG 7001

/* What tp->impl and req->impl hold (copied in and out: the storage is
 * opaque to the header's users, which have no MPI types). */
typedef struct {
    MPI_Comm   comm;
    const int *world_of;
    int        owned;   /* comm and world_of are the transport's: freed by fini */
} mpi_tp_t;

typedef struct {
    MPI_Request r;
    void       *buf;   /* a receive of a message: its buffer and capacity; an
                        * agreement: what it is (the watchdog names it) */
    size_t      cap;   /* 0: no message to check (a send, a raw receive, an
                        * agreement) */
} mpi_req_t;

#define AGREEMENT_PEER (-2)   /* req->peer of an agreement (iagree) */

_Static_assert(sizeof(mpi_tp_t) <= sizeof(((hp_transport_t *)0)->impl), "hp_transport_t.impl too small");
_Static_assert(sizeof(mpi_req_t) <= sizeof(((hp_req_t *)0)->impl), "hp_req_t.impl too small");

/* How a wait waits.  MPI_Wait spins, and so does a blocking
 * MPI_Allreduce: a core is burnt for as long as the transfer lasts.  A
 * compressed allreduce often runs beside the training's own work (a DDP
 * comm hook's thread, Horovod's background thread, ranks that share cores),
 * which that core would have run, and on a slow network most of a call is
 * waiting.  So a wait polls for HIPRESS_SPIN_US (a short transfer completes
 * in it, at MPI's latency), then sleeps between polls, from 10 us growing
 * to 100 us: the kernel keeps receiving into the socket buffers meanwhile,
 * and a poll moves what arrived (Open MPI's TCP progresses only inside MPI
 * calls). */
static _Atomic double spin_s = 50e-6;
#define SLEEP_MIN_NS 10000
#define SLEEP_MAX_NS 100000

void hp_tp_mpi_set_spin(double seconds)
{
    spin_s = seconds;
}

static int polite_wait(MPI_Request *r, MPI_Status *status)
{
    const double spin = spin_s;
    double t0;
    long ns = SLEEP_MIN_NS;
    int flag = 0, rc;

    if (spin < 0)
        return PMPI_Wait(r, status);
    t0 = hp_now();
    for (;;) {
        if ((rc = PMPI_Test(r, &flag, status)) != MPI_SUCCESS || flag)
            return rc;
        if (hp_now() - t0 >= spin) {
            struct timespec ts = {0, ns};
            nanosleep(&ts, NULL);
            ns = HP_MIN(2 * ns, SLEEP_MAX_NS);
        }
    }
}

static mpi_tp_t state(const hp_transport_t *tp)
{
    mpi_tp_t s;
    memcpy(&s, &tp->impl, sizeof(s));
    return s;
}

hp_status_t hp_tp_mpi_init(hp_transport_t *tp, MPI_Comm comm, const int *world_of, int owned)
{
    mpi_tp_t s = {comm, world_of, owned};
    int rc;
    memset(tp, 0, sizeof(*tp));
    if ((rc = PMPI_Comm_rank(comm, &tp->rank)) != MPI_SUCCESS || (rc = PMPI_Comm_size(comm, &tp->size)) != MPI_SUCCESS)
        return HP_ST_MPI(rc);
    memcpy(&tp->impl, &s, sizeof(s));
    tp->ops = &hp_tp_mpi_ops;
    return HP_OK;
}

static hp_status_t mpi_isend(hp_transport_t *tp, const void *buf, size_t len, size_t cap, int peer,
                             hp_req_t *req)
{
    mpi_req_t q = {MPI_REQUEST_NULL, NULL, 0};
    int rc;
    (void)cap;
    if (len > INT_MAX)
        return HP_ERR_UNSUPPORTED;
    tp->bytes_sent += len;
    rc = PMPI_Isend(buf, (int)len, MPI_BYTE, peer, HP_TAG, state(tp).comm, &q.r);
    memcpy(&req->impl, &q, sizeof(q));
    return rc == MPI_SUCCESS ? HP_OK : HP_ST_MPI(rc);
}

static hp_status_t mpi_irecv(hp_transport_t *tp, void *buf, size_t cap, int peer, int flags, hp_req_t *req)
{
    mpi_req_t q = {MPI_REQUEST_NULL, buf, (flags & HP_TP_MSG) ? cap : 0};
    int rc;
    if (cap > INT_MAX)
        return HP_ERR_UNSUPPORTED;
    rc = PMPI_Irecv(buf, (int)cap, MPI_BYTE, peer, HP_TAG, state(tp).comm, &q.r);
    memcpy(&req->impl, &q, sizeof(q));
    return rc == MPI_SUCCESS ? HP_OK : HP_ST_MPI(rc);
}

static hp_status_t mpi_wait(hp_transport_t *tp, hp_req_t *req)
{
    const mpi_tp_t s = state(tp);
    mpi_req_t q;
    MPI_Status status;
    int rc, count = 0;
    double t0 = hp_now();
    hp_wd_wait_t w;

    memcpy(&q, &req->impl, sizeof(q));
    if (req->peer == AGREEMENT_PEER)
        hp_wd_enter(&w, q.buf != NULL ? (const char *)q.buf : "an agreement of a compressed allreduce", -1);
    else
        hp_wd_enter(&w, "a compressed allreduce", req->peer >= 0 && s.world_of != NULL ? s.world_of[req->peer] : -1);
    rc = polite_wait(&q.r, &status);
    hp_wd_leave(&w);
    if (req->peer != AGREEMENT_PEER)
        tp->t_wait += hp_now() - t0;   /* (an agreement's wait is not a transfer's) */
    memcpy(&req->impl, &q, sizeof(q));
    if (rc != MPI_SUCCESS)
        return HP_ST_MPI(rc);
    if (q.cap > 0) {
        if ((rc = PMPI_Get_count(&status, MPI_BYTE, &count)) != MPI_SUCCESS || count == MPI_UNDEFINED)
            return HP_ST_MPI(rc != MPI_SUCCESS ? rc : MPI_ERR_COUNT);
        hp_msg_arrived(q.buf, (size_t)count, q.cap);
    }
    return HP_OK;
}

static void mpi_progress(hp_transport_t *tp)
{
    /* An Iprobe runs the progress engine without completing our requests. */
    int flag;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, state(tp).comm, &flag, MPI_STATUS_IGNORE);
}

static hp_status_t mpi_iagree(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n, const char *what,
                              hp_req_t *req)
{
    mpi_req_t q = {MPI_REQUEST_NULL, (void *)(uintptr_t)what, 0};
    int rc;
    if (n > INT_MAX)
        return HP_ERR_UNSUPPORTED;
    rc = PMPI_Iallreduce(MPI_IN_PLACE, values, (int)n, type == HP_TP_DOUBLE ? MPI_DOUBLE : MPI_INT64_T, MPI_MAX,
                         state(tp).comm, &q.r);
    memcpy(&req->impl, &q, sizeof(q));
    req->active = rc == MPI_SUCCESS;
    req->peer = AGREEMENT_PEER;
    return rc == MPI_SUCCESS ? HP_OK : HP_ST_MPI(rc);
}

static hp_status_t mpi_agree(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n, const char *what)
{
    hp_wd_wait_t w;
    int rc;
    if (n > INT_MAX)
        return HP_ERR_UNSUPPORTED;
    hp_wd_enter(&w, what != NULL ? what : "an agreement of a compressed allreduce", -1);
    if (spin_s < 0) {
        rc = PMPI_Allreduce(MPI_IN_PLACE, values, (int)n, type == HP_TP_DOUBLE ? MPI_DOUBLE : MPI_INT64_T, MPI_MAX,
                            state(tp).comm);
    } else {
        MPI_Request r;
        rc = PMPI_Iallreduce(MPI_IN_PLACE, values, (int)n, type == HP_TP_DOUBLE ? MPI_DOUBLE : MPI_INT64_T, MPI_MAX,
                             state(tp).comm, &r);
        if (rc == MPI_SUCCESS)
            rc = polite_wait(&r, MPI_STATUS_IGNORE);
    }
    hp_wd_leave(&w);
    return rc == MPI_SUCCESS ? HP_OK : HP_ST_MPI(rc);
}

/* MPI posts each operation as it comes. */
static hp_status_t mpi_group(hp_transport_t *tp)
{
    (void)tp;
    return HP_OK;
}

static void mpi_fini(hp_transport_t *tp)
{
    mpi_tp_t s = state(tp);
    if (s.owned) {
        if (s.comm != MPI_COMM_NULL)
            PMPI_Comm_free(&s.comm);
        free((int *)s.world_of);
    }
    memset(&tp->impl, 0, sizeof(tp->impl));
}

MPI_Comm hp_tp_mpi_comm(const hp_transport_t *tp)
{
    return state(tp).comm;
}

const hp_tp_ops_t hp_tp_mpi_ops = {
    .name = "mpi",
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .wait = mpi_wait,
    .progress = mpi_progress,
    .agree = mpi_agree,
    .iagree = mpi_iagree,
    .group_begin = mpi_group,
    .group_end = mpi_group,
    .fini = mpi_fini,
};
