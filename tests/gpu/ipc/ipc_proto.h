/*
 * The IPC stand-in NCCL (tests/gpu/ipc/): N processes on one GPU form a
 * communicator and move data device to device, stream-ordered on the
 * caller's stream, the host never waiting for a peer.
 *
 * Rendezvous: ncclGetUniqueId names a POSIX shared-memory segment; every
 * rank maps it, allocates its block of device memory (flags and one FIFO
 * of slots per source rank), exports it (CUDA IPC) and records the handle
 * there; once all have joined, each maps every peer's block.
 *
 * Data: a message moves in chunks of at most `chunk` bytes through the
 * receiver's FIFO for its sender, `slots` chunks deep.  The sender's
 * stream waits until the slot is free (the receiver's "consumed" flag of
 * that slot, in the sender's block), copies the chunk into the peer's slot
 * and writes the peer's "ready" flag of the slot; the receiver's stream
 * waits for "ready", copies or reduces out of the slot and writes the
 * sender's "consumed" flag.  A flag holds the number of the last chunk
 * through its slot (a 32-bit count, compared wrap-safe), so a wait names a
 * value that may not exist yet: its stream stops there, on the device,
 * until the peer's stream writes it.  Nothing is waited on by the host, so
 * two communicators used on two streams in opposite orders on different
 * ranks cannot deadlock, and a send completes only when its chunks were
 * consumed (a send whose receive never comes never completes).
 *
 * Checks: every operation posts a descriptor per pair of ranks it moves
 * data over (what was called, counts, type, op, root), numbered per pair
 * in shared memory; the second side of a pair to post compares, so a
 * mismatch is an error naming both sides at once, and a descriptor left
 * unmatched for HP_IPC_TIMEOUT seconds is reported by a monitor thread,
 * as is a peer's process gone, aborted or failed.  The host never waits
 * for a peer except in the rendezvous and in ncclCommSplit.
 *
 * The protocol knows no CUDA: the device work goes through an engine
 * (hpi_engine_t): CUDA's driver (ipc_cuda.c) in libnccl.so.2, host threads
 * and shared memory (ipc_host.c) in the protocol tests.
 */
#ifndef HP_TESTS_IPC_PROTO_H
#define HP_TESTS_IPC_PROTO_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include "ipc_elem.h"

/* ------------------------------------------------------------- engine */

typedef struct {
    unsigned char b[64];   /* an exported block (a CUipcMemHandle) */
} hpi_handle_t;

/* The device work of the protocol.  Every function returns 0, or -1 with
 * a reason for last_error(); the stream functions only enqueue. */
typedef struct {
    const char *name;
    int (*ctx_get)(void **ctx_p, int *device_p);     /* the calling thread's context and device */
    int (*ctx_enter)(void *ctx, void **saved_p);     /* make ctx current */
    void (*ctx_leave)(void *saved);
    int (*block_alloc)(size_t bytes, void **ptr_p, hpi_handle_t *h_p);   /* zeroed, exportable */
    int (*block_open)(const hpi_handle_t *h, void **ptr_p);             /* another process's block */
    void (*block_close)(void *ptr);
    void (*block_free)(void *ptr);
    int (*stream_new)(void **s_p);                   /* a non-blocking stream of the stand-in's own */
    void (*stream_free)(void *s);
    int (*capturing)(void *stream);                  /* 1: under graph capture, 0: no, -1: error */
    int (*wait_geq)(void *stream, void *flag, uint32_t value);   /* until (int32)(*flag - value) >= 0 */
    int (*write)(void *stream, void *flag, uint32_t value);
    int (*fill)(void *stream, void *ptr, unsigned char byte, size_t bytes);
    int (*copy)(void *stream, void *dst, const void *src, size_t bytes);
    int (*reduce)(void *stream, const hpi_red_t *r);
    int (*event_new)(void **ev_p);
    void (*event_free)(void *ev);
    int (*record)(void *ev, void *stream);
    int (*wait_event)(void *stream, void *ev);
    int (*query)(void *ev);                          /* 1 done, 0 not yet, -1 error */
    int (*mem_alloc)(size_t bytes, void **ptr_p);    /* ncclMemAlloc */
    void (*mem_free)(void *ptr);
    const char *(*last_error)(void);
} hpi_engine_t;

/* The engine the library was built with (ipc_cuda.c or ipc_host.c). */
const hpi_engine_t *hpi_engine(void);

/* ------------------------------------------------------- communicator */

typedef struct ncclComm hpi_comm_t;

/* what a descriptor says was called */
enum {
    HPI_K_SEND = 1, HPI_K_RECV, HPI_K_ALLREDUCE, HPI_K_BCAST, HPI_K_REDUCE, HPI_K_ALLGATHER, HPI_K_REDSCAT,
    HPI_K_COPY   /* a local copy (ncclAlltoAll's own part): nothing posted */
};

/* Make the unique id of a new communicator. */
void hpi_unique_id(ncclUniqueId *id);
/* Join the communicator named by id as rank `rank` of `nranks`.  blocking:
 * return when every rank has joined (or the rendezvous failed); else
 * return at once, hpi_comm_progress finishing the rendezvous. */
ncclResult_t hpi_comm_create(const ncclUniqueId *id, int nranks, int rank, int blocking, hpi_comm_t **comm_p);
/* A step of a non-blocking rendezvous: ncclSuccess when done, ncclInProgress
 * while a rank is missing, or the failure. */
ncclResult_t hpi_comm_progress(hpi_comm_t *c);
/* ncclCommSplit (color < 0: NCCL_SPLIT_NOCOLOR, *new_p = NULL) and
 * ncclCommShrink (the ranks excluded[0..nex) left out). */
ncclResult_t hpi_comm_split(hpi_comm_t *c, int color, int key, hpi_comm_t **new_p);
ncclResult_t hpi_comm_shrink(hpi_comm_t *c, const int *excluded, int nex, hpi_comm_t **new_p);
/* Wait (bounded) until the device finished this rank's work on c. */
ncclResult_t hpi_comm_finalize(hpi_comm_t *c);
/* Release c (after finalize); abort: release what the host holds only,
 * unblock this rank's waits, free nothing the device may still use. */
ncclResult_t hpi_comm_destroy(hpi_comm_t *c);
ncclResult_t hpi_comm_abort(hpi_comm_t *c);
int hpi_comm_rank(const hpi_comm_t *c);
int hpi_comm_size(const hpi_comm_t *c);
int hpi_comm_device(const hpi_comm_t *c);
int hpi_comm_blocking(const hpi_comm_t *c);
void *hpi_comm_ctx(hpi_comm_t *c);
/* this rank's next operation number on c (for messages) */
unsigned long long hpi_comm_next_call(hpi_comm_t *c);
/* ncclSuccess, ncclInProgress (rendezvous), or the sticky error: this
 * rank's, a peer's (ncclRemoteError), a timeout. */
ncclResult_t hpi_comm_status(hpi_comm_t *c);
/* Record an error on c (sticky, shown to the peers) and as the last error. */
ncclResult_t hpi_comm_fail(hpi_comm_t *c, ncclResult_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The last error's text (ncclGetLastError), and setting it. */
const char *hpi_last_error(void);
ncclResult_t hpi_error(ncclResult_t rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------- tasks */

/* One operation of a group, on one communicator and stream. */
typedef struct {
    int          kind;        /* HPI_K_* */
    hpi_comm_t  *comm;
    void        *stream;
    const void  *sbuf;
    void        *rbuf;
    size_t       count;       /* elements (per rank for allgather and reduce-scatter) */
    int          dtype;
    int          op;          /* HPI_SUM ...; avg: HPI_SUM with div */
    int          div;
    int          root;        /* peer of a send or receive, root of a broadcast or reduce */
    int          premul;      /* a premultiplied sum: scale the own contribution first */
    double       scale_f;
    int64_t      scale_i;
    const void  *scale_p;
    unsigned long long call;  /* this rank's operation number on comm, for messages */
} hpi_task_t;

size_t hpi_dtype_size(int dtype);
const char *hpi_dtype_name(int dtype);
const char *hpi_kind_name(int kind);

/* Check the tasks, post their descriptors (a mismatch found here fails the
 * call and the communicator), and enqueue them as one group: their chunks
 * interleaved, so that the group's operations progress together. */
ncclResult_t hpi_group_launch(hpi_task_t *t, int n);

/* ---------------------------------------------- shared with ipc_sched.c */

/* The flags and FIFOs of rank r's block, as seen by rank `me`. */
void *hpi_ready_flag(hpi_comm_t *c, int owner, int src, int slot);     /* in owner's block */
void *hpi_consumed_flag(hpi_comm_t *c, int owner, int dst, int slot);  /* in owner's block */
void *hpi_fifo_slot(hpi_comm_t *c, int owner, int src, int slot);
void *hpi_scratch(hpi_comm_t *c);
uint32_t hpi_slots(const hpi_comm_t *c);
size_t hpi_chunk(const hpi_comm_t *c);
/* the chunk counters of the pairs (me -> p) and (p -> me), advanced on enqueue */
uint64_t *hpi_sent(hpi_comm_t *c, int p);
uint64_t *hpi_rcvd(hpi_comm_t *c, int p);
/* post this rank's descriptor of task t for the pair (me -> p) (side 0) or
 * (p -> me) (side 1): compare with the peer's if it posted first */
ncclResult_t hpi_post(hpi_comm_t *c, int side, int p, const hpi_task_t *t, uint64_t bytes);
/* after a group on stream s: what finalize waits for */
ncclResult_t hpi_comm_mark(hpi_comm_t *c, void *stream);
void *hpi_side_stream(hpi_comm_t *c);
/* the stream of the stand-in's own on which a group of sends and receives
 * moves this communicator's sends, beside its receives */
void *hpi_send_stream(hpi_comm_t *c);

#endif
