/*
 * The one call driver (src/drive/hp_drive.c) and what a front end gives it.
 * A call through MPI_Allreduce or ncclAllReduce runs the same steps on the
 * same state (hp_comm.h):
 *
 *   eligibility agreement -> staging-form verdict -> plan -> plain or
 *   compressed run -> failure agreement -> verification -> statistics
 *
 * A front end supplies only what differs, as a table (hp_front_t): its
 * transports, the user's own reduction for a plain plan, when the input may
 * be read, a 16-bit call's float32 copy and ncclAvg's division, the
 * stream-ordered end, the exact sum of HIPRESS_VERIFY, and its native error
 * codes.  The MPI front end is src/front/mpi/hp_front_mpi.c, the NCCL one
 * src/front/nccl/hp_front_nccl.c.
 */
#ifndef HP_FRONT_H
#define HP_FRONT_H

#include "hp_comm.h"
#include "hp_backend.h"
#include "hp_global.h"
#include "hp_plan.h"

/* The element types of a call (float32 is what the algorithms reduce). */
enum { HP_ELEM_F32, HP_ELEM_F16, HP_ELEM_BF16 };

/* One call through the driver. */
typedef struct hp_dcall {
    /* the call, as the front end received it */
    const void     *send;       /* NULL: in place (recv holds the input) */
    void           *recv;       /* the user's receive buffer: the residuals' key */
    size_t          count;
    int             elem;       /* HP_ELEM_* */
    int             avg;        /* the result is divided by the ranks (ncclAvg) */
    int             local_ok;   /* this rank can compress it (its buffers) */
    int             mem_kind;   /* 0 host, 1 device: this rank's buffers (the plans' key) */
    long long       key;        /* what the caller says the call is (a comm hook's bucket), agreed
                                 * with the count by fronts that agree every call; 0: nothing */
    const char     *key_what;   /* what the key is, for the mismatch's message ("buckets") */
    void          (*key_str)(long long key, char *buf, size_t len);   /* a key in words; NULL: a number */
    void           *fctx;       /* the front end's own context of the call */
    /* the driver's and the front end's */
    hp_transport_t *tp;         /* the call's ranks (the front end's begin) */
    hp_mem_t        mem;        /* the buffer's memory (the front end's begin) */
    float          *data;       /* the float32 data reduced: recv, or a 16-bit call's copy */
    int             async;      /* stream-ordered: nothing on the host waits for it */
    int             form;       /* agreed: some rank keeps no residual for its buffer */
    int             mem_agreed; /* the plans' key agreed: the memory kind every rank has, else host */
    void           *dflag;      /* a stream-ordered call's failure flag (device memory) */
    double          t0;
} hp_dcall_t;

/* hp_front_t.flags */
#define HP_FRONT_AGREE_CALLS 0x1u   /* every call agrees eligibility and count on the host (MPI: a
                                     * rank's buffers may differ); without it the call's arguments
                                     * are the same on every rank by the API's contract (NCCL) and
                                     * a count's staging verdict is agreed once, at its first call */

typedef struct hp_front {
    const char *name;      /* "mpi", "nccl" */
    const char *prefix;    /* what the driver's messages start with: "" (MPI's, the default), "nccl: " */
    const char *call;      /* what a message calls a call: "allreduce", "ncclAllReduce" */
    const char *call_desc; /* the call with its arguments, for an erroneous program's message:
                            * "an MPI_Allreduce of MPI_FLOAT with MPI_SUM" */
    const char *on_failure;   /* what a failed call's message adds: "; the result is NaN" */
    int         id;        /* HP_FRONT_*: its row of the statistics */
    unsigned    flags;     /* HP_FRONT_* */
    /* Make c's transports and hierarchy (collective over the communicator;
     * MPI: the private communicators).  Called before every call's
     * agreement; cheap once made. */
    hp_status_t (*ready)(hp_comm_t *c, hp_dcall_t *d);
    /* The call's ranks (d->tp), memory (d->mem, hp_mem_begin) and input:
     * what produced the input is done, or the codec's streams wait for it
     * (a call that may be stream-ordered: prepare decides). */
    hp_status_t (*begin)(hp_comm_t *c, hp_dcall_t *d);
    /* The float32 data of the call (d->data): recv, or a 16-bit call's
     * widened copy of its input.  HP_ERR_NOMEM only when agreed (every
     * rank then passes the call on). */
    hp_status_t (*widen)(hp_comm_t *c, hp_dcall_t *d);
    /* The user's own reduction of d->data (a plain plan), input `send`
     * (NULL: in place), finished on return. */
    hp_status_t (*plain)(hp_comm_t *c, hp_dcall_t *d, const void *send);
    /* Before a compressed run of `plan` with codecs cc: what the run needs
     * beyond the buffer (the NCCL front end's device memory for the
     * messages, reserved from agreed values: HP_ERR_NOMEM on every rank
     * alike when a rank could not have it; the call then goes plain), and
     * whether it is stream-ordered (d->async; then switched: device
     * messages, the stream-ordered transport).  NULL: nothing. */
    hp_status_t (*prepare)(hp_comm_t *c, hp_dcall_t *d, const hp_plan_t *plan, int explore, const hp_codecs_t *cc,
                           int sum_kind);
    /* The result of a call that ran: ncclAvg's division, NaN everywhere on
     * a failed call (st: the agreed outcome; HP_OK on a stream-ordered call,
     * whose outcome is the device's flag), a 16-bit call's result narrowed
     * into recv.  HP_OK or this rank's error. */
    hp_status_t (*finish)(hp_comm_t *c, hp_dcall_t *d, hp_status_t st);
    /* The end of what begin started, whether or not the call ran: the
     * codec's streams given back to the caller's, the memory's end
     * (hp_mem_end).  HP_OK or this rank's error. */
    hp_status_t (*end)(hp_comm_t *c, hp_dcall_t *d);
    /* HIPRESS_VERIFY's exact sum of d->data (count floats) on every rank,
     * into host memory `out`; HP_OK, or an error on this rank only (the
     * collective still ran). */
    hp_status_t (*exact)(hp_comm_t *c, hp_dcall_t *d, float *out);
    /* This rank's failure flag of a stream-ordered call in device memory
     * (d->dflag), from st and the codec's sticky flag. */
    hp_status_t (*async_flag)(hp_comm_t *c, hp_dcall_t *d, hp_status_t st);
} hp_front_t;

/* What the driver did with a call. */
typedef enum {
    HP_DRIVE_PASS = 0,   /* not taken: the front end passes it on unchanged (on every rank) */
    HP_DRIVE_DONE = 1    /* taken: its status is the call's */
} hp_drive_res_t;

/*
 * One call from agreement to statistics (the front end counts the call and
 * its eligibility; the driver everything after).  Returns HP_DRIVE_PASS with
 * *reason_p (hp_elig_t) when the call goes to the user's library unchanged
 * (a peer cannot compress it, the communicator's settings disagree, no
 * plan could be made: on every rank alike), else
 * HP_DRIVE_DONE with *st_p the call's status (HP_OK, or an error every rank
 * sees: HP_ERR_PEER where another rank failed; the count mismatch of an
 * erroneous program is HP_ERR_INVALID).  The caller holds a reference on c.
 */
hp_drive_res_t hp_drive(hp_comm_t *c, hp_dcall_t *d, hp_status_t *st_p, int *reason_p);

/* The settings agreement of a communicator (every setting that must agree,
 * this rank's ability to compress, the size), over tp: sets c->state to
 * HP_COMM_ON or HP_COMM_OFF on every rank alike.  `local_bad`: this rank
 * cannot compress (why: a warning).  A transport failure returns its
 * status (every rank's collective ran). */
hp_status_t hp_drive_agree_settings(hp_comm_t *c, hp_transport_t *tp, int local_bad, const char *why);

#endif
