/*
 * What the stand-in NCCL's files share (tests/gpu/standins/mock_nccl.c: the NCCL
 * functions, communicators and groups; mock_nccl_ent.c: operations as
 * entries of the stand-in driver's streams).  Private to them.
 */
#ifndef HP_TESTS_MOCK_NCCL_INT_H
#define HP_TESTS_MOCK_NCCL_INT_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include "mock_nccl_shm.h"

struct entry;

/* A stand-in communicator. */
typedef struct mock_comm {
    int           nonblocking;
    int           pending;     /* polls of ncclCommGetAsyncError before the held operations are enqueued */
    mock_shm_t   *world;       /* its ranks' shared memory; NULL: one rank, nothing moves */
    int           rank, size;
    int           aborted;     /* ncclCommAbort: its operations fail at once */
    int           closing;     /* destroyed or aborted (atomic): any later use is reported (mock_comm_live) */
    int           refs;        /* the user's (until destroyed) and one per operation queued */
    unsigned      opno;        /* operations this rank enqueued on it */
    uint64_t     *sseq, *rseq; /* per peer: transfers numbered so far, sent and received */
    uint64_t     *wnext, *rnext; /* per peer: the next transfer the channel moves */
    uint64_t     *wtop, *rtop;   /* per peer: the highest transfer reached here */
    ncclResult_t  async_err;   /* the first failure of an operation */
    struct entry *held;        /* a non-blocking communicator's operations, until polled out */
    void         *last_stream; /* the stream of its latest operation, and an event recorded after it */
    void         *order_ev;
    uint64_t      ncoll;       /* collectives this rank issued on it (mock_nccl_seq.c) */
    unsigned char *connected;  /* per peer: the pair connected (its first group with a send or receive) */
    int           seq_ended;   /* its end compared */
    struct mock_comm *gone;    /* the ended communicators' chain (mock_comm_unref) */
} mock_comm_t;

/* An operation held in the open group. */
typedef struct {
    int          coll;       /* 0: a send or receive, else MOCK_D_* */
    int          send, peer, dt, op;
    const void  *sbuf;
    void        *rbuf;
    size_t       count;
    mock_comm_t *c;
    void        *stream;
} gop_t;

/* mock_nccl.c's record of a call; whether the thread's group is open, an
 * operation into it (0, or -1 without memory); an entry enqueued, or held
 * for a non-blocking communicator's polls (*held_p 1); MOCK_NCCL_POLLS. */
void mock_record(const char *fn, const void *s, void *r, size_t count, int dt, int op, int root, void *comm,
                 void *stream);
int mock_in_group(void);
int mock_group_add(const gop_t *g);
ncclResult_t mock_submit(struct entry *e, mock_comm_t *c, int *held_p);
int mock_polls(void);
/* NCCL connects a pair of ranks at the ncclGroupEnd of the first group
 * with a send or receive between them (an operation outside a group is a
 * group of its own): it blocks until the peer reaches its own.  The pairs
 * of the n operations g not connected yet: ncclSuccess, or
 * ncclSystemError after a line (a peer gone, MOCK_NCCL_TIMEOUT) or once a
 * communicator of them is aborted. */
ncclResult_t mock_connect(const gop_t *g, int n);
/* Any operation on comm while one is in progress (a non-blocking
 * communicator not polled out) is ncclInvalidUsage. */
int mock_busy(ncclComm_t comm);

/* An operation enqueued on a stream: a group's sends and receives on one
 * communicator, or one collective. */
struct entry *mock_ent_p2p(mock_comm_t *c, void *stream);
int mock_ent_add(struct entry *e, int send, const void *buf, size_t count, int dt, int peer);
struct entry *mock_ent_coll(mock_comm_t *c, void *stream, int kind, const void *send, void *recv, size_t count,
                            int dt, int op, int root);
void mock_ent_free(struct entry *e);
/* Number its transfers and put it on its stream (or, the stream being
 * captured, into the capture); ncclSuccess or an error (freed then). */
ncclResult_t mock_ent_enqueue(struct entry *e);
/* A non-blocking communicator's held operations, in order. */
void mock_ent_hold(mock_comm_t *c, struct entry *e);
ncclResult_t mock_ent_release_held(mock_comm_t *c);
/* The comparison of the ranks' calls (mock_nccl_seq.c), as each is
 * issued: a collective (before its transfers are numbered), one side of a
 * send or receive (numbered n); and at the communicator's end (fn names
 * it; not after an abort).  The first difference stops the process with a
 * line naming both ranks. */
void mock_seq_coll(mock_comm_t *c, const mock_desc_t *d);
void mock_seq_p2p(mock_comm_t *c, int send, int peer, uint64_t n, const mock_desc_t *d);
void mock_seq_end(mock_comm_t *c, const char *fn);
/* "ncclAllReduce", "float32" */
const char *mock_kind_name(int kind);
const char *mock_dt_name(int dt);

/* What mock_ent_enqueue keeps to order a communicator's operations across
 * streams, released with it. */
void mock_ent_order_free(mock_comm_t *c);
/* The communicator's memory goes once its operations ended; the struct
 * itself stays (on a chain: reachable), so that a use after its end is
 * reported rather than read from freed memory. */
void mock_comm_unref(mock_comm_t *c);
/* comm, for function fn: a use after ncclCommDestroy or ncclCommAbort is
 * the program's error, and where the real library has freed the
 * communicator: reported on stderr naming fn, and the process aborts. */
mock_comm_t *mock_comm_live(ncclComm_t comm, const char *fn);

#endif
