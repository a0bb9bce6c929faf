/*
 * What the stand-in driver's files share (tests/gpu/standins/mock_cuda.c: devices,
 * contexts, allocations; mock_cuda_mem.c: device memory, its shadows and
 * CUDA IPC; mock_cuda_stream.c: the functions on streams, events, captures
 * and the stream memory operations; mock_cuda_exec.c: the queues, the
 * device executor and the host's waits; mock_cuda_wfg.c: the wait-for graph
 * and its deadlock report).
 * Private to them.
 */
#ifndef HP_TESTS_MOCK_CUDA_INT_H
#define HP_TESTS_MOCK_CUDA_INT_H

#define _GNU_SOURCE
#include "mock_cuda.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void (*CUhostFn)(void *);

enum {
    SUCCESS = 0, ERR_INVALID_VALUE = 1, ERR_OUT_OF_MEMORY = 2, ERR_NOT_INITIALIZED = 3, ERR_INVALID_DEVICE = 101,
    ERR_INVALID_CONTEXT = 201, ERR_INVALID_HANDLE = 400, ERR_NOT_READY = 600, ERR_LAUNCH_FAILED = 719,
    ERR_CAPTURE_UNSUPPORTED = 900, ERR_CAPTURE_INVALIDATED = 901, ERR_CAPTURE_UNMATCHED = 903
};
/* cuda.h's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD */
#define STREAM_LEGACY ((CUstream)0x1)
#define STREAM_PER_THREAD ((CUstream)0x2)

struct mstream;

/* ------------------------------------------------------------ counters */

extern unsigned long long n_query, n_d2h, n_h2d, n_d2h_bytes, n_h2d_bytes, n_init, n_retain, n_streams, n_events,
    n_async, n_alloc, n_alloc_async, n_syncs, n_dev_syncs, n_legacy, n_per_thread, n_pending, n_hostfn,
    n_bad_free_host, n_kernel_loads, n_capture_broken, n_alloc_failed;
#define COUNT(v, by) __atomic_add_fetch(&(v), (by), __ATOMIC_RELAXED)

/* ------------------------------------------------------ memory, contexts */

/* cuInit was called, or device memory allocated */
extern int mock_initialized;
CUcontext mock_current(void);
CUcontext mock_ctx_of(int device);
int mock_ctx_device(CUcontext c);
/* Count a copy between host and device memory ("d2h", "h2d"). */
void mock_count_copy(const void *dst, const void *src, size_t n);

/* A new region of device memory (zeroed) of `device`, or NULL. */
void *mock_region_new(size_t bytes, int device, int managed);
/* The host shadow of a device address (p itself for host memory). */
void *mock_shadow(const void *p);
/* Whether [p, p + n) lies in device memory of this driver (opened from
 * another process included). */
int mock_is_device(const void *p, size_t n);
/* The device and managed flag of the region holding p; 0 when none. */
int mock_region_info(const void *p, int *device_p, int *managed_p);
/* Free a region (the device-wide part is the caller's); -1 for memory
 * opened from another process (closed, never freed).  Stream-ordered
 * memory (mock_region_async) is kept as a tombstone: whatever touches it
 * later (an entry run after the free) stops the process naming `by`, the
 * free. */
int mock_region_free(void *p, const char *by);
/* p, from cuMemAllocAsync, is stream-ordered memory of stream s from its
 * entry `mark` (the allocation) on. */
void mock_region_async(void *p, struct mstream *s, unsigned long long mark);
/* Stream order of stream-ordered memory: t's entry tseq (an event wait)
 * orders t's later entries after u's first useq; the host has seen u run
 * its first `upto` entries (u NULL: every stream, a device-wide
 * synchronisation), so what was allocated there before is valid on every
 * stream. */
void mock_order_wait(struct mstream *t, unsigned long long tseq, struct mstream *u, unsigned long long useq);
void mock_order_seen(struct mstream *u, unsigned long long upto);
/* Whether p lies in stream-ordered memory: its allocation's range and the
 * stream it was allocated on (NULL when none). */
int mock_region_async_of(const void *p, void **base_p, size_t *len_p, struct mstream **s_p);
/* A documented rule of the driver or of NCCL broken: the line (after the
 * process's rank and pid) on stderr, and the process ends with
 * MOCK_RULE_EXIT. */
void mock_rule_broken(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Remove the names of this process's exported segments (as it ends). */
void mock_ipc_unlink(void);
/* Whether process pid has ended (a zombie included). */
int mock_pid_gone(int pid);
/* Remove the shared-memory segments /PREFIX<pid>... of processes that have
 * ended without removing theirs (killed, or ended by a deadlock report). */
void mock_shm_sweep(const char *prefix);
/* The process's rank for reports (OMPI_COMM_WORLD_RANK, RANK, else -1). */
int mock_rank(void);

/* --------------------------------------------------- streams and entries */

enum { OP_COPY, OP_MEMSET, OP_FN, OP_WAIT, OP_EXT, OP_FREE, OP_MARK, OP_WAIT_VALUE, OP_WRITE_VALUE };

struct mstream;
typedef struct op {
    int                   kind;
    unsigned long long    seq;       /* its number in its stream (from 1) */
    void                 *dst;
    const void           *src;
    size_t                n;
    unsigned char         v;
    uint32_t              value;     /* OP_WAIT_VALUE, OP_WRITE_VALUE: at dst */
    unsigned              cmp;       /* OP_WAIT_VALUE: CU_STREAM_WAIT_VALUE_GEQ ... */
    CUhostFn              fn;
    void                 *arg;
    struct mstream       *ws;        /* OP_WAIT: ws has run its first wseq entries */
    unsigned long long    wseq;
    const mock_ext_ops_t *xo;        /* OP_EXT */
    void                 *xarg;
    int                   reached;
    struct op            *next;
} op_t;

typedef struct mstream {
    unsigned long long queued, done;   /* entries queued, entries run */
    unsigned long long want;           /* MOCK_CUDA_DEFERRED: run entries up to this one */
    op_t              *head, *tail;
    int                running;        /* its head is being run outside the lock */
    int                id;             /* for reports: 0 legacy, 1 per-thread, then by creation */
    void              *handle;         /* as the application names it */
    CUcontext          ctx;            /* NULL: every context's (the default streams) */
    int                doomed;         /* destroyed: freed once it has run everything */
    int                cap_mode;       /* -1, or the mode of the capture recording it */
    int                cap_invalid;
    pthread_t          cap_thread;
    unsigned long long cap_ops;        /* entries recorded into the capture */
    struct mstream    *next_all;
} mstream_t;

typedef struct mevent {
    mstream_t         *s;      /* NULL: never recorded (complete) */
    unsigned long long seq;
} mevent_t;

/* The queues' lock (recursive) and the one condition every waiter and the
 * executor wait on. */
extern pthread_mutex_t qlock;
extern pthread_cond_t qcond;
extern mstream_t legacy_s, per_thread_s;
extern mstream_t *all_streams;

/* Every stream: the default ones, then those made (under qlock). */
#define FOR_STREAMS(s) \
    for (mstream_t *s = &legacy_s; s != NULL; \
         s = s == &legacy_s ? &per_thread_s : s == &per_thread_s ? all_streams : s->next_all)

/* MOCK_CUDA_DEFERRED: 0 eager, 1 on demand, 2 on demand, others first. */
int mock_deferred(void);
/* The queue of a handle, counting the default streams' use (locks). */
mstream_t *mock_stream_of(CUstream s);
/* The same under qlock, without counting. */
mstream_t *mock_queue_of(CUstream s);
/* cuStreamCreate's queue, of the current context; cuStreamDestroy's end
 * (once its queued work has run; the record stays for its events). */
mstream_t *mock_stream_new(void);
void mock_stream_destroy(mstream_t *m);
/* Queue a copy of *o on s (the executor runs it; a capturing stream
 * records it instead). */
CUresult mock_enqueue(mstream_t *s, const op_t *o);
/* The same, with the entry's number in its stream in *seq_p. */
CUresult mock_enqueue_at(mstream_t *s, const op_t *o, unsigned long long *seq_p);
/* The entry this thread runs now (NULL: none), for mock_running; its
 * stream and number (*s_p NULL: none). */
void mock_run_set(const mstream_t *s, const op_t *o);
void mock_running_entry(const mstream_t **s_p, unsigned long long *seq_p);
/* " (called from F)": the function whose return address is ret, when the
 * dynamic linker can name it ("" otherwise). */
void mock_caller(const void *ret, char *buf, size_t len);
/* One line on what this thread is running: a stream's entry (its stream,
 * number and kind), or "the host" outside the executor. */
void mock_running(char *buf, size_t len);
/* An entry queued and not yet run (or running) that uses [p, p + n), as
 * far as its kind says (copies, sets, value operations, NCCL operations;
 * a kernel's arguments are not known): 1 and its line in buf. */
int mock_pending_use(const void *p, size_t n, char *buf, size_t len);
/* Host waits: for s's first `upto` entries; for every stream of the
 * current context (a device-wide synchronisation).  `what` names the call
 * in reports.  0, or the CUresult of a prohibited call during a capture. */
void mock_wait_stream(mstream_t *s, unsigned long long upto, const char *what);
CUresult mock_device_sync(const char *what);
/* Whether s has run its first `upto` entries; asks for them (deferred). */
int mock_query(mstream_t *s, unsigned long long upto, const char *what);
/* A call that would synchronise or touch the legacy stream: refused with
 * ERR_CAPTURE_UNSUPPORTED (and the capture invalidated) while a capture
 * forbids it from this thread, else 0. */
CUresult mock_capture_check(const char *what);
/* The first launch of a kernel (its host function and the first pointer of
 * its argument) synchronises the device, as lazy loading may. */
CUresult mock_kernel_launch(CUhostFn fn, void *arg);
/* Whether the value wait o (OP_WAIT_VALUE) holds now; the word it reads. */
int mock_value_holds(const op_t *o, uint32_t *now_p);
/* Hold every entry off (1: once none is running, under qlock) and let them
 * go again (0): what changes a shadow's place (cuIpcGetMemHandle) does it
 * in between. */
void mock_quiesce(int on);
/* MOCK_CUDA_WAIT_FAIL, MOCK_CUDA_CAPTURE_FAIL: whether a completed poll,
 * a capture query answers an error. */
int mock_wait_fails(void);
int mock_capture_query_fails(void);
/* MOCK_CUDA_HANG */
int mock_hangs(void);
void mock_block_for_ever(const char *what);

/* ------------------------------------------------- the wait-for graph */

/* What a thread of the process is doing, for the graph. */
enum { TH_RUNNING = 0, TH_WAIT_STREAM, TH_WAIT_DEVICE, TH_POLL };
typedef struct mthread {
    int        tid;
    int        state;
    mstream_t *target;      /* TH_WAIT_STREAM, TH_POLL */
    int        nccl;        /* it enqueued external entries */
    double     since;       /* when it began waiting */
    char       what[48];
} mthread_t;

/* The calling thread's record (made at its first use). */
mthread_t *mock_thread(void);
/* Every live thread record (under qlock). */
int mock_threads(mthread_t **out, int max);

/* Serve a peer's request for this process's snapshot (under qlock). */
void mock_wfg_serve(void);
/* A thread of this process has waited long: look for a wait cycle across
 * the processes; on one that holds, report it and end the process.  Called
 * without qlock. */
void mock_wfg_check(mthread_t *me);
/* Make this process's segment now (cuIpcGetMemHandle: its peers register
 * in it), and register, both ways, a process whose memory this one opened
 * (who may write what a stream of either waits for). */
void mock_wfg_open(void);
void mock_wfg_peer(int pid);
/* The executor's and the waiters' progress counter. */
extern unsigned long long mock_progress;

#endif
