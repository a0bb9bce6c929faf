/*
 * The one per-communicator state of both front ends (hp_comm_t) and what
 * lives on it: the settings and codecs in effect, the error-feedback store,
 * the plans, the per-element-count record, the transports and the
 * hierarchy, scratch and device memory.  The MPI front end keeps one per
 * MPI communicator (an attribute), the NCCL front end one per ncclComm_t
 * (the registry below); the driver (hp_front.h) runs every call on it.
 * No MPI or NCCL header: the NCCL-only library has it too.
 *
 * Lifetime.  A state is reference-counted: its owner (the attribute, the
 * registry) holds one reference and every call in progress one more, so a
 * communicator ended by another thread (ncclCommAbort from PyTorch's
 * watchdog) is freed by whichever lets go last.  An ended state is never
 * used for a new call.  Device memory is released stream-ordered when the
 * state ends normally (after the work of its latest call, before the codec
 * contexts' owner is let go); after an abort nothing is freed that could
 * wait for the device (the allocations are kept and counted:
 * HIPRESS_STATS).
 */
#ifndef HP_COMM_H
#define HP_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include "hp_algo.h"
#include "hp_config.h"
#include "hp_gpu.h"
#include "hp_plan.h"
#include "hp_residual.h"
#include "hp_transport.h"

struct hp_front;

/* HIPRESS_STAGING_FORM's values, in the setting's order. */
enum { HP_FORM_UNBIASED = 0, HP_FORM_EXACT, HP_FORM_BIASED };

/* HIPRESS_OPTIMIZER's values, in the setting's order. */
enum { HP_OPT_AUTO = 0, HP_OPT_SGD, HP_OPT_ADAM };

/* Whether compressor `kind` runs its residual-free form on every call
 * under the optimizer cfg names (an SGD-only compressor, the optimizer not
 * said to be SGD: hp_comp_ext_t.sgd_only). */
int hp_comm_optimizer_form(const hp_config_t *cfg, int kind);

/* Rank 0's word on the job's settings once they are in (MPI_Init, or a
 * job's first NCCL call): a compressor that runs another form than its own
 * because of HIPRESS_OPTIMIZER.  Said once per process. */
void hp_comm_notice_settings(void);

/* hp_comm_t.state */
enum {
    HP_COMM_NEW = 0,   /* its settings not agreed yet on this communicator (NCCL) */
    HP_COMM_ON,        /* calls may be compressed */
    HP_COMM_OFF,       /* agreed: every call passes through, on every rank */
    HP_COMM_ENDED      /* destroyed or aborted: no new call uses it */
};

/* hp_comm_t.warned: warnings given once per communicator. */
#define HP_WARNED_STAGING  0x1   /* a staging buffer under STAGING_FORM=biased */
#define HP_WARNED_STRAND   0x2   /* residuals of buffers that are never reduced again */
#define HP_WARNED_OVERSIZE 0x4   /* a buffer too large for HIPRESS_RESIDUAL_MAX_MB */
#define HP_WARNED_LATE     0x8   /* a buffer found to be a staging buffer after its count's verdict */
#define HP_WARNED_NOPLAN   0x10  /* no plan could be made */

/* What every rank records per element count, in the same order on every
 * rank (a correct program makes the same calls everywhere): the compressed
 * calls of that count (dgc's warm-up: a rank-local count, such as a
 * buffer's whose residual was evicted on one rank, would change the size of
 * its messages) and, where calls carry no per-call agreement (NCCL), the
 * count's staging verdict.  Least recently used out when full. */
#define HP_COUNTS 256
typedef struct {
    size_t             count;   /* 0: free */
    uintptr_t          addr;    /* this rank's buffer at the count's last call */
    unsigned long long used;    /* the table's clock then (the same on every rank) */
    unsigned long long calls;   /* compressed calls of this count */
    int                form;    /* agreed: some rank keeps no residual for it */
    int                local;   /* this rank found a staging buffer of this count since */
} hp_count_t;

typedef struct {
    unsigned long long clock;
    int                n;
    hp_count_t         c[HP_COUNTS];
} hp_counts_t;

/* Device memory kept by a state (the NCCL front end's messages and
 * agreements, a 16-bit call's float32 copy). */
typedef struct {
    hp_gpu_ptr_t where;   /* its context */
    void        *p;
    size_t       bytes;
    size_t       agreed;  /* what every rank is known to hold (grown only by agreement) */
} hp_dbuf_t;

typedef struct hp_comm {
    _Atomic int            refs;
    const struct hp_front *front;
    void                  *handle;   /* the user's communicator: the registry's key */
    struct hp_comm        *next;     /* the registry's chain */
    int                    state;    /* HP_COMM_* */
    int                    state_set;   /* the state a settings change returns to: HP_COMM_NEW where
                                         * settings are agreed per communicator (NCCL), else ON */
    int                    aborted;  /* ended by an abort: nothing that waits for the device */
    int                    rank, size;
    int                    nonblocking;   /* NCCL: made non-blocking */
    int                    opted_out;
    hp_config_t            cfg;      /* the job's settings plus this communicator's */
    /* the codecs: the compressor, its sum codec, and the residual-free
     * form a staging buffer runs (HIPRESS_STAGING_FORM) */
    int                    kind, sum_kind, layout, staging_form, form_kind, form_sum_kind;
    int                    optimizer_form;   /* every call runs the residual-free form (HIPRESS_OPTIMIZER) */
    hipress_comp_params_t  params, form_params;
    hp_residual_store_t   *res;
    hp_residual_info_t     res_seen;   /* counters already added to the stats */
    hp_counts_t            counts;
    hp_planner_t           planner;
    unsigned long long     ncalls;     /* compressed calls: the algorithms' call number */
    unsigned long long     nomem_call; /* HIPRESS_TEST_NOMEM: call whose memory failed, + 1 */
    int                    warned;     /* HP_WARNED_* */
    /* the ranks: every rank (NULL until ready; the NCCL front end makes
     * one per call, on the call's stream), and the hierarchy */
    hp_transport_t        *tp;
    hp_hier_t              hier;
    hp_transport_t         tp_store[3][2];   /* every rank, node, inter-node: base and test wrapper */
    /* scratch: the algorithms' messages, a hierarchical call's shards */
    void                  *scratch, *scratch2;
    size_t                 scratch_bytes, scratch2_bytes;
    hp_dbuf_t              msgs, wide;
    int                    dev_busy;   /* msgs may still be in use by stream-ordered work */
    void                  *owner;      /* the CUDA module's owner of its codec contexts: calls
                                        * of different communicators share no stream */
    /* the codec context (the owner's: valid until its release) of the
     * latest call that used the device memory above, in `last_where`'s
     * CUDA context, and whether that call was stream-ordered: its work is
     * queued on the context's streams, so the next call's stream waits for
     * them and the memory is freed in their order */
    void                  *last_cx;
    hp_gpu_ptr_t           last_where;
    int                    last_async;
    /* the user's communicator, as this process enqueues on it: enq is held
     * by a call while it enqueues (one operation, or a group from its start
     * to its end); closed is set, then enq taken once, before the real end
     * function runs (hp_comm_close), so no call enqueues on a communicator
     * the library has freed */
    pthread_mutex_t        enq;
    _Atomic int            closed;
} hp_comm_t;

/* A new state of `size` ranks (rank: this one's; size 0: not known yet)
 * for front `front`, with the job's settings, one reference held by the
 * caller.  NULL on failure. */
hp_comm_t *hp_comm_new(const struct hp_front *front, void *handle, int rank, int size);

/* Re-derive the codecs after cfg changed (hp_comm_set); err gets a line. */
hp_status_t hp_comm_refresh(hp_comm_t *c, char *err, size_t errlen);

/* The codecs of a call: c's compressor and sum codec, or their
 * residual-free form (form). */
void hp_comm_codecs(const hp_comm_t *c, int form, hp_codecs_t *cc);

/* Whether a call of worker codec `kind` and sum codec `sum_kind` keeps
 * per-buffer state (error feedback in either, or momentum). */
int hp_comm_keeps_state(int kind, int sum_kind);

/* One setting changed on this communicator (hipress_comm_set,
 * hipress_nccl_comm_set): validated, the codecs re-derived; a NCCL state
 * agrees its settings again at its next call. */
hp_status_t hp_comm_set(hp_comm_t *c, const char *name, const char *value, char *err, size_t errlen);

/* References.  hp_comm_put frees the state with the last one. */
static inline void hp_comm_get(hp_comm_t *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}
void hp_comm_put(hp_comm_t *c);

/* The owner lets go (MPI_Comm_free, ncclCommDestroy, ncclCommAbort after
 * the real call): the state is ended and its owner's reference dropped.
 * aborted: nothing may wait for the device. */
void hp_comm_end(hp_comm_t *c, int aborted);

/* Before the user's communicator ends (the real ncclCommAbort, Destroy or
 * Finalize): c closed to new enqueues, and an enqueue in progress on
 * another thread waited for, at most `bound` seconds (one blocked inside
 * the library is what the end itself frees).  0, or -1 when the bound
 * passed. */
int hp_comm_close(hp_comm_t *c, double bound);

/* Scratch of at least `bytes`, 64-byte aligned, owned by c; NULL when it
 * cannot be had. */
void *hp_comm_scratch(hp_comm_t *c, size_t bytes);
void *hp_comm_scratch2(hp_comm_t *c, size_t bytes);

/* Device memory of at least `bytes` in b (grown, contents not kept), in
 * the context of `where`; freed by the state.  The new memory is had
 * before the old is let go: on failure b is as it was.  cx: a codec
 * context of c's owner (the call's), in whose stream order the growth is
 * made (no synchronisation of the device: the old memory goes after the
 * work queued before); NULL: synchronously.  HP_OK or an error with a
 * warning naming `what`. */
hp_status_t hp_comm_dbuf(hp_comm_t *c, hp_dbuf_t *b, const hp_gpu_ptr_t *where, size_t bytes, void *cx,
                         const char *what);

/* Add this communicator's new residual counters to the stats. */
void hp_comm_sync_stats(hp_comm_t *c);

/* The warnings about residual memory (once per communicator). */
void hp_comm_warn_residuals(hp_comm_t *c);

/* ------------------------------------------------- the element counts */

/* The record of `count` for a call into addr (this rank's buffer), made
 * when missing (*fresh_p = 1: the caller may have to agree on it); the
 * clock advances on every rank alike. */
hp_count_t *hp_counts_find(hp_counts_t *t, size_t count, uintptr_t addr, int *fresh_p);

/* ------------------------------------------------------- the registry */

/* A table of states by handle (the NCCL front end's communicators), under
 * its own lock; lookups return a reference.  Zeroed: empty. */
#define HP_REG_BUCKETS 64
typedef struct {
    pthread_mutex_t lock;
    _Atomic size_t  count;
    hp_comm_t      *bucket[HP_REG_BUCKETS];
} hp_registry_t;
#define HP_REGISTRY_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}

/* The state of `handle` with a reference, NULL when none (or ended). */
hp_comm_t *hp_registry_get(hp_registry_t *r, const void *handle);

/* Add c (the registry takes over the caller's reference); the state a
 * handle had before (an address reused) is ended first. */
void hp_registry_add(hp_registry_t *r, hp_comm_t *c);

/* Remove the state of `handle` from the registry and return it with the
 * registry's reference (the caller ends it: hp_comm_end), NULL when none:
 * no new lookup finds it, so the handle's owner may then end the user's
 * communicator and the address may come back for a new one. */
hp_comm_t *hp_registry_detach(hp_registry_t *r, const void *handle);

#endif
