/*
 * The transport the CaSync algorithms and the driver's own collectives are
 * written against: an ops table (hp_tp_ops_t) that each transport fills,
 * and thin inline wrappers (hp_tp_isend, ...) that dispatch through it.
 * The MPI implementation (PMPI on a private communicator) is
 * src/transport/hp_tp_mpi.c; a test build adds wrappers of it
 * (src/transport/hp_tp_delay.c, rows of hp_transports.def under
 * HP_TEST_TABLES).  The shape is meant to fit NCCL too:
 *
 *  * Messages have a fixed capacity both sides agree on, and their length
 *    inside (the hp_msg header, src/comp/hp_comp.h): a receiver learns a
 *    message's length from hp_msg_len, never from the transport.  So a
 *    transport that must give matching counts when it enqueues (NCCL) can
 *    move the whole capacity, and MPI can move just the message.
 *  * Requests are completed by the transport (wait: a host wait for MPI,
 *    stream order for NCCL), and between one pair of ranks messages match
 *    in posting order (sends to one peer in the order posted, receives
 *    from one peer in the order posted); nothing else about order or timing
 *    is promised (the test transport breaks everything else on purpose).
 *  * agree is a max over all ranks of a few values, which a device
 *    transport can keep on the device; iagree starts one that a wait
 *    completes (MPI: MPI_Iallreduce; NCCL: in stream order, the values
 *    then device-resident), so a front end can enqueue a call's failure
 *    agreement with the call and learn its result at completion.
 *  * group_begin / group_end bracket posts that a transport may issue
 *    together (NCCL's ncclGroupStart/End; MPI: nothing).
 *
 * The header needs no <mpi.h>: an implementation keeps what it needs in
 * the opaque storage of hp_transport_t and hp_req_t.
 */
#ifndef HP_TRANSPORT_H
#define HP_TRANSPORT_H

#include "hp_core.h"

struct hp_transport;

/* One posted send or receive; opaque to the algorithms (they only copy
 * HP_REQ_NULL into it and hand it back to the transport). */
typedef struct hp_req {
    int active;            /* posted and not yet waited for */
    int peer;              /* the peer (a stuck wait names it), or -1 */
    union {
        void    *ptr[3];
        uint64_t u64[3];
    } impl;                /* the transport's own: an MPI_Request and the buffer, ... */
} hp_req_t;
#define HP_REQ_NULL ((hp_req_t){.active = 0, .peer = -1})

/* The types agree works on. */
typedef enum { HP_TP_INT64, HP_TP_DOUBLE } hp_tp_type_t;

/* irecv flags.  HP_TP_MSG: the buffer receives one hp_msg message (the
 * algorithms' receives).  A transport that can receive fewer bytes than the
 * capacity (MPI) then makes a message whose header does not give exactly
 * the bytes that arrived invalid (hp_msg_arrived), so that a header that
 * lies about its length is rejected, never decoded from bytes that did not
 * arrive.  Without it the buffer receives raw bytes (the node exchanges of
 * the hierarchy, the plan's measurement), left as they arrive. */
#define HP_TP_MSG 0x1

/* hp_tp_ops_t.flags.  HP_TP_PHASED: the transport holds every post and
 * issues all it holds at the next wait, as one group that completes as a
 * whole (NCCL, host-synchronous: src/transport/hp_tp_nccl.c).  A receive
 * posted before it can be matched (one of a later phase, whose sender first
 * needs this rank's results) would then block that wait for ever: an
 * algorithm posts each phase's receives with that phase's sends.  The order
 * in which a pair of ranks' messages match is the same either way. */
#define HP_TP_PHASED 0x1u

typedef struct hp_tp_ops {
    const char *name;
    unsigned    flags;   /* HP_TP_* */
    /* Post a send of the message buf[0..len) to peer; cap (>= len) is the
     * capacity the receiver posted: MPI sends len bytes, a transport that
     * needs matching counts at enqueue time sends cap.  buf must stay
     * untouched until the request is waited for. */
    hp_status_t (*isend)(struct hp_transport *tp, const void *buf, size_t len, size_t cap, int peer,
                         hp_req_t *req);
    /* Post a receive of at most cap bytes from peer into buf (flags:
     * HP_TP_MSG or 0); buf is undefined until the request is waited for. */
    hp_status_t (*irecv)(struct hp_transport *tp, void *buf, size_t cap, int peer, int flags, hp_req_t *req);
    /* Complete an active request (a host wait for MPI); no length: a
     * message carries its own (hp_msg_len). */
    hp_status_t (*wait)(struct hp_transport *tp, hp_req_t *req);
    /* Let posted transfers move (Open MPI's TCP moves data only inside MPI
     * calls); completes nothing the caller can see. */
    void (*progress)(struct hp_transport *tp);
    /* Element-wise max of values[0..n) over all ranks, in place (a logical
     * OR is the max of 0/1 flags, a min the max of negated values).  what:
     * the agreement, named by a stuck wait (HIPRESS_TIMEOUT). */
    hp_status_t (*agree)(struct hp_transport *tp, hp_tp_type_t type, void *values, size_t n,
                         const char *what);
    /* The same, started: values[0..n) hold the max once req is waited for
     * (untouched until then).  The implementation sets req->active: 0 when
     * it completed at once (a host-synchronous transport). */
    hp_status_t (*iagree)(struct hp_transport *tp, hp_tp_type_t type, void *values, size_t n,
                          const char *what, hp_req_t *req);
    /* Bracket posts the transport may issue together. */
    hp_status_t (*group_begin)(struct hp_transport *tp);
    hp_status_t (*group_end)(struct hp_transport *tp);
    /* Release the implementation's state (NULL: nothing to release). */
    void (*fini)(struct hp_transport *tp);
} hp_tp_ops_t;

typedef struct hp_transport {
    const hp_tp_ops_t *ops;    /* NULL: no transport (a rank outside the communicator) */
    int                rank, size;
    double             t_wait;      /* seconds spent blocked in wait (not in agree) */
    size_t             bytes_sent;  /* message bytes posted by isend */
    hp_status_t        err;         /* the latest failure of an operation (hp_tp_failure) */
    union {
        void    *ptr[4];
        uint64_t u64[4];
    } impl;                    /* the implementation's state (MPI: its communicator, ...) */
} hp_transport_t;

/* The MPI transport is built by hp_tp_mpi_init (src/transport/hp_tp_mpi.h). */
extern const hp_tp_ops_t hp_tp_mpi_ops;

/* The transport to use over `base` (an initialised transport): base
 * itself, or in a test build (HP_TEST_TABLES) the test transport that the
 * environment variable HP_TEST_TRANSPORT names (a row of
 * hp_transports.def), built in *wrap over base.  Release with hp_tp_fini
 * of the result (then of base). */
hp_transport_t *hp_tp_select(hp_transport_t *base, hp_transport_t *wrap);

/* The transports of this build, by name (hp_transports.def); NULL when none. */
const hp_tp_ops_t *hp_tp_find(const char *name);

/* st, kept as the transport's latest failure when it is one. */
static inline hp_status_t hp_tp_note(hp_transport_t *tp, hp_status_t st)
{
    if (st != HP_OK)
        tp->err = st;
    return st;
}

/* What an algorithm returns when an operation of tp failed: that failure,
 * its cause kept (an MPI or NCCL error stays one). */
static inline hp_status_t hp_tp_failure(const hp_transport_t *tp)
{
    return tp->err != HP_OK ? tp->err : HP_ERR_STATE;
}

static inline hp_status_t hp_tp_isend(hp_transport_t *tp, const void *buf, size_t len, size_t cap, int peer,
                                      hp_req_t *req)
{
    hp_status_t st = hp_tp_note(tp, tp->ops->isend(tp, buf, len, cap, peer, req));
    req->active = st == HP_OK;
    req->peer = peer;
    return st;
}

/* A receive of one message (HP_TP_MSG). */
static inline hp_status_t hp_tp_irecv(hp_transport_t *tp, void *buf, size_t cap, int peer, hp_req_t *req)
{
    hp_status_t st = hp_tp_note(tp, tp->ops->irecv(tp, buf, cap, peer, HP_TP_MSG, req));
    req->active = st == HP_OK;
    req->peer = peer;
    return st;
}

/* A receive of raw bytes. */
static inline hp_status_t hp_tp_irecv_bytes(hp_transport_t *tp, void *buf, size_t cap, int peer, hp_req_t *req)
{
    hp_status_t st = hp_tp_note(tp, tp->ops->irecv(tp, buf, cap, peer, 0, req));
    req->active = st == HP_OK;
    req->peer = peer;
    return st;
}

/* Wait for a request; one that is not active (HP_REQ_NULL, already waited
 * for, or whose post failed) is done at once. */
static inline hp_status_t hp_tp_wait(hp_transport_t *tp, hp_req_t *req)
{
    hp_status_t st;
    if (!req->active)
        return HP_OK;
    st = hp_tp_note(tp, tp->ops->wait(tp, req));
    req->active = 0;
    return st;
}

static inline void hp_tp_progress(hp_transport_t *tp)
{
    tp->ops->progress(tp);
}

static inline hp_status_t hp_tp_agree(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n,
                                      const char *what)
{
    return hp_tp_note(tp, tp->ops->agree(tp, type, values, n, what));
}

/* Start an agreement (hp_tp_ops_t.iagree); hp_tp_wait completes it. */
static inline hp_status_t hp_tp_iagree(hp_transport_t *tp, hp_tp_type_t type, void *values, size_t n,
                                       const char *what, hp_req_t *req)
{
    hp_status_t st;
    req->peer = -1;
    st = hp_tp_note(tp, tp->ops->iagree(tp, type, values, n, what, req));
    if (st != HP_OK)
        req->active = 0;
    return st;
}

/* The failure agreement, started: *v (0 or 1, kept until the wait) becomes
 * 1 on every rank when it is 1 on any, once req is waited for. */
static inline hp_status_t hp_tp_agree_flag_start(hp_transport_t *tp, int failed, int64_t *v, hp_req_t *req)
{
    *v = failed != 0;
    return hp_tp_iagree(tp, HP_TP_INT64, v, 1, "the failure agreement of a compressed allreduce", req);
}

/* The failure agreement in one go: *flag becomes 1 on every rank when it is
 * nonzero on any. */
static inline hp_status_t hp_tp_agree_flag(hp_transport_t *tp, int *flag)
{
    int64_t v = *flag != 0;
    hp_status_t st = hp_tp_agree(tp, HP_TP_INT64, &v, 1, "the failure agreement of a compressed allreduce");
    if (st == HP_OK)
        *flag = v != 0;
    return st;
}

static inline hp_status_t hp_tp_group_begin(hp_transport_t *tp)
{
    return hp_tp_note(tp, tp->ops->group_begin(tp));
}

static inline hp_status_t hp_tp_group_end(hp_transport_t *tp)
{
    return hp_tp_note(tp, tp->ops->group_end(tp));
}

/* Blocking exchange of raw bytes: send sbuf[0..len) to `to` while receiving
 * at most cap bytes from `from` into rbuf (a ring step of the plan's
 * measurement, an MPI_Sendrecv). */
static inline hp_status_t hp_tp_exchange(hp_transport_t *tp, const void *sbuf, size_t len, int to, void *rbuf,
                                         size_t cap, int from)
{
    hp_req_t rr = HP_REQ_NULL, sr = HP_REQ_NULL;
    hp_status_t st[5];
    /* both posted whatever fails, so the peers are not left waiting */
    st[0] = hp_tp_group_begin(tp);
    st[1] = hp_tp_irecv_bytes(tp, rbuf, cap, from, &rr);
    st[2] = hp_tp_isend(tp, sbuf, len, len, to, &sr);
    st[3] = hp_tp_group_end(tp);
    st[4] = hp_tp_wait(tp, &rr);
    for (int i = 0; i < 5; i++)
        if (st[i] != HP_OK) {
            hp_tp_wait(tp, &sr);
            return st[i];
        }
    return hp_tp_wait(tp, &sr);
}

static inline void hp_tp_fini(hp_transport_t *tp)
{
    if (tp != NULL && tp->ops != NULL && tp->ops->fini != NULL)
        tp->ops->fini(tp);
    if (tp != NULL)
        tp->ops = NULL;
}

#endif
