/*
 * The GPU path, host side: device-buffer detection, the CUDA module's
 * interface, and the pure decisions the MPI and NCCL wrappers take on device
 * buffers.
 *
 * Three layers, cheapest first:
 *  1. A load watch (hp_gpu_watch_fired): a few instructions per call that
 *     say whether any shared object was loaded since the last look.  Device
 *     memory cannot exist before libcuda.so.1 is in the process, so until the
 *     watch fires no CUDA call is made at all.
 *  2. A detector inside libhipress.so (hp_gpu_ptr_query): once libcuda.so.1
 *     is loaded (found with dlopen(RTLD_NOLOAD), never loaded by hipress),
 *     the driver's cuPointerGetAttributes says what a pointer is.  It creates
 *     no context: for host memory, or before cuInit, it reports host.
 *  3. The CUDA module, libhipress_cuda.so (hp_gpu_module): built with nvcc
 *     when configure finds CUDA, dlopen()ed at the first need (a device
 *     buffer to stage, hipress_info --gpu), never at MPI_Init.  It exports one
 *     versioned table of functions, hp_gpu_ops_t.
 *
 * The module does not include this header's MPI parts; it includes this file
 * for hp_gpu_ops_t only (HP_GPU_OPS_ONLY).
 */
#ifndef HP_GPU_H
#define HP_GPU_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- types */

typedef enum {
    HP_MEM_HOST = 0,     /* host memory, or anything the driver does not know */
    HP_MEM_DEVICE = 1,   /* device memory (cudaMalloc, cuMemAlloc, VMM) */
    HP_MEM_MANAGED = 2   /* managed (unified) memory: treated like device memory */
} hp_mem_kind_t;

/* What the driver says about one pointer. */
typedef struct hp_gpu_ptr {
    int   kind;      /* hp_mem_kind_t */
    int   device;    /* device ordinal, -1 when unknown */
    void *ctx;       /* CUcontext of the allocation, NULL when unknown */
} hp_gpu_ptr_t;

/* The values of the CUDA driver API that libhipress.so uses without the CUDA
 * headers (they are part of the driver's ABI; the module checks them against
 * cuda.h at compile time). */
#define HP_CU_SUCCESS                      0
#define HP_CU_POINTER_ATTRIBUTE_CONTEXT    1
#define HP_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define HP_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define HP_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define HP_CU_MEMORYTYPE_HOST              1
#define HP_CU_MEMORYTYPE_DEVICE            2
#define HP_CU_MEMORYTYPE_UNIFIED           4
#define HP_CU_STREAM_CAPTURE_STATUS_NONE   0

/* Status of the module's functions: the public hipress_status_t values
 * (hipress.h; checked in hp_gpu.c), spelt here so the module needs no MPI
 * header. */
#define HP_GPU_OK               0
#define HP_GPU_ERR_INVALID     (-1)   /* HIPRESS_ERR_INVALID */
#define HP_GPU_ERR_NOMEM       (-2)   /* HIPRESS_ERR_NOMEM */
#define HP_GPU_ERR_UNSUPPORTED (-6)   /* HIPRESS_ERR_UNSUPPORTED: no driver, no such function */
#define HP_GPU_ERR_DEVICE      (-8)   /* HIPRESS_ERR_DEVICE: a CUDA call failed */

/* The library the driver API lives in. */
#define HP_CUDA_DRIVER_LIB "libcuda.so.1"

/* ------------------------------------------------------ the module's table */

#define HP_GPU_OPS_VERSION 1
/* The module exports `const hp_gpu_ops_t *hipress_gpu_ops_v1(void)`. */
#define HP_GPU_OPS_SYMBOL "hipress_gpu_ops_v1"
#define HP_GPU_MODULE_NAME "libhipress_cuda.so"

#define HP_GPU_MAX_PROBED 16
typedef struct hp_gpu_probe {
    int  driver_version;        /* cuDriverGetVersion: 13000 for 13.0 */
    int  ndevices;              /* cuDeviceGetCount */
    struct {
        char   name[96];
        int    cc_major, cc_minor;
        size_t mem_bytes;
    } dev[HP_GPU_MAX_PROBED];   /* the first HP_GPU_MAX_PROBED devices */
} hp_gpu_probe_t;

/*
 * The CUDA module's functions.  Frozen once released: a new function goes
 * into a later table (hp_gpu_ops_v2_t, hp_gpu_ops_v3_t), found by its own
 * symbol.  Every int function returns HP_GPU_OK or an HP_GPU_ERR_*
 * value; last_error() then holds a one-line reason for this thread.
 * Functions that take a `where` pointer work in the context of that
 * allocation (its own context, else the primary context of its device) and
 * restore the caller's current context before returning.
 */
typedef struct hp_gpu_ops {
    uint32_t    version;    /* HP_GPU_OPS_VERSION */
    uint32_t    size;       /* sizeof(hp_gpu_ops_t) as the module was built */
    const char *build;      /* "CUDA 13.0, sm_75 sm_80 ... compute_90" */

    /* Find the driver's functions.  load_driver = 0: only when libcuda.so.1
     * is already in the process (the library's own use); 1: load it
     * (hipress_info).  Creates no context.  Idempotent. */
    int (*init)(int load_driver);
    /* Driver version, devices and their names (cuInit; no context). */
    int (*probe)(hp_gpu_probe_t *probe_p);
    /* What p is; host for memory the driver does not know. */
    int (*ptr_query)(const void *p, hp_gpu_ptr_t *ptr_p);
    /* Synchronous copies for exact staging; `where` describes the device side.
     * They run on the module's own non-blocking stream of that context
     * (never the legacy default stream: they wait for nothing the
     * application queued; it has finished writing a buffer it hands to
     * MPI), and wait for it within the module's bound. */
    int (*memcpy_d2h)(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where);
    int (*memcpy_h2d)(void *dst, const void *src, size_t bytes, const hp_gpu_ptr_t *where);
    /* Page-locked host memory, usable from every context; freed with the
     * `where` it was allocated with (in the context it was allocated in). */
    int (*host_alloc)(size_t bytes, const hp_gpu_ptr_t *where, void **p_p);
    int (*host_free)(void *p, const hp_gpu_ptr_t *where);
    /* Streams and events (non-blocking stream, events without timing). */
    int (*stream_create)(const hp_gpu_ptr_t *where, void **stream_p);
    int (*stream_destroy)(void *stream, const hp_gpu_ptr_t *where);
    int (*stream_sync)(void *stream);      /* bounded: see set_wait_bound (v2) */
    int (*stream_capturing)(void *stream, int *capturing_p);
    int (*event_create)(const hp_gpu_ptr_t *where, void **event_p);
    int (*event_record)(void *event, void *stream);
    int (*event_sync)(void *event);        /* bounded too */
    int (*event_destroy)(void *event, const hp_gpu_ptr_t *where);
    /* Run a kernel of this build on `device` and check its result: proves
     * the build's architectures cover the device.  Creates the primary
     * context of `device`: for hipress_info --gpu, never for the library. */
    int (*selftest)(int device);
    /* The reason of this thread's last failure ("" when none). */
    const char *(*last_error)(void);
} hp_gpu_ops_t;

/* ------------------------------------------------- the module's codec (v2) */

#include "hp_gpu_fmt.h"

/* One message to encode on the device.  The format and its parameters are
 * resolved by libhipress (the compressor's hp_comp_ext_t.gpu_fmt; the
 * module reads no setting); pointers are device memory of the call's
 * context. */
typedef struct hp_gpu_enc {
    hp_gpu_fmt_t fmt;         /* the format, its parameters, the largest payload */
    const float *in;          /* n values */
    float       *residual;    /* n floats or NULL */
    float       *state;       /* momentum state (a compressor's), or NULL */
    float       *mask;        /* zeroed where the message carries an element, or NULL */
    size_t       n;
    uint64_t     rng_key;     /* folded (hp_rng_key) */
    uint64_t     rng_offset;  /* counter of in[0] */
} hp_gpu_enc_t;

/* One payload to decode on the device. */
typedef struct hp_gpu_dec {
    hp_gpu_fmt_t fmt;         /* as for an encode of n elements (payload: its largest) */
    int          accumulate;
    size_t       n;
} hp_gpu_dec_t;

/* The codec's table, hp_gpu_ops_v2_t: its version and the symbol that
 * returns it.  Frozen as it is here.  (Builds before it was frozen served
 * earlier layouts, smaller ones, under this symbol and, for a while, under
 * HP_GPU_OPS_V3_SYMBOL: the size check refuses every one of them.) */
#define HP_GPU_CODEC_VERSION 2
#define HP_GPU_CODEC_SYMBOL "hipress_gpu_ops_v2"

/*
 * The second table adds the device codec: compressed MPI_Allreduce on
 * device buffers.  A call runs in a codec context
 * (call_begin .. call_end: the context of the buffer, two streams, events, a
 * device workspace kept from call to call, so no device allocation after the
 * first calls).  Work is queued in stream order; the functions that hand
 * bytes to the host (encode, copy to host memory, momentum, sync, call_end)
 * wait for what they need.  A malformed message found on the device is
 * remembered (sticky) and reported by the next encode, sync or call_end
 * through *bad_p.
 */
typedef struct hp_gpu_ops_v2 {
    hp_gpu_ops_t base;      /* base.version = HP_GPU_CODEC_VERSION, base.size = sizeof(hp_gpu_ops_v2_t) */

    /* Whether the codec's kernels run in where's context (HP_GPU_OK: yes;
     * a driver without a usable device, or a build without code for it: no). */
    int (*codec_probe)(const hp_gpu_ptr_t *where);
    int (*call_begin)(const hp_gpu_ptr_t *where, void **cx_p);
    int (*call_end)(void *cx, int *bad_p);
    /* Encode into host memory (out: the payload area of a message slot, cap
     * bytes, best page-locked); *plen_p payload bytes, *nonfinite_p 1 for
     * the NaN message (nothing then written to residual and state). */
    int (*encode)(void *cx, const hp_gpu_enc_t *e, void *out, size_t cap, size_t *plen_p,
                  int *nonfinite_p, int *bad_p);
    /* Decode a payload in host memory into dst (device); returns
     * HP_GPU_ERR_INVALID when the host-side checks reject it.  The payload
     * may be reused when it returns. */
    int (*decode)(void *cx, const hp_gpu_dec_t *d, const void *payload, size_t plen, float *dst);
    int (*fill)(void *cx, float *dst, float v, size_t n);
    /* buf += r, r = 0, unless buf holds NaN or Inf (then neither changes). */
    int (*fold)(void *cx, float *buf, float *r, size_t n);
    int (*add)(void *cx, float *dst, const float *src, size_t n);
    /* Any direction (unified addressing); returns once host memory involved
     * is written or may be reused. */
    int (*copy)(void *cx, void *dst, const void *src, size_t bytes);
    /* u = m u + buf; buf = u, unless buf holds NaN or Inf: *applied_p. */
    int (*momentum)(void *cx, float *u, float *buf, float m, size_t n, int *applied_p);
    /* Device scratch of the call (valid until the next work() or call_end). */
    int (*work)(void *cx, size_t bytes, void **p_p);
    int (*sync)(void *cx, int *bad_p);
    /* Device memory outside calls (error-feedback vectors): zero-filled. */
    int (*dev_alloc)(const hp_gpu_ptr_t *where, size_t bytes, void **p_p);
    int (*dev_free)(const hp_gpu_ptr_t *where, void *p);
    /* Sum of |p[i]| in double (the dropped-mass count of the residual store). */
    int (*dev_l1)(const hp_gpu_ptr_t *where, const float *p, size_t n, double *l1_p);
    /* Whether x[0..n) holds NaN or Inf (waits). */
    int (*nonfinite)(void *cx, const float *x, size_t n, int *nonfinite_p);
    /* powersgd's passes over M (the call's buffer, an m x c matrix of n
     * floats), in the CPU's summation orders (cuda/kern/hp_kern.h): P = M Q from
     * Q^T (tiles of T columns); Q^T = M^T P; buf = P Qs^T after
     * res = M - P Ql^T (res NULL: none).  Pointers are device memory. */
    int (*psgd_mq)(void *cx, const float *M, size_t n, size_t m, size_t c, size_t r, size_t T, const float *qt,
                   float *p);
    int (*psgd_mtp)(void *cx, const float *M, size_t n, size_t m, size_t c, size_t r, const float *p, float *qt);
    int (*psgd_recon)(void *cx, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                      const float *qs, const float *ql);
    /* hipress-bench --kernels --gpu: time every format's encode and decode
     * and a device-to-device copy on `device` (cuda/module/hp_cuda_module.c
     * cuda_bench); fmts are templates (their fmt for n = bytes / 4, a
     * non-NULL residual or state asks for one); rows are printed through
     * `row`. */
    int (*bench)(int device, size_t bytes, int reps, const hp_gpu_enc_t *fmts, int nfmts,
                 void (*row)(void *arg, int fmt_index, const char *op, double gbps, double copy_gbps,
                             size_t payload),
                 void *arg);

    /* Appended (a library checks base.size before it calls them; a table
     * of this version too small for them is refused, as every table too
     * small is): */
    /* The bound of every wait of the module, in seconds (0: none; default
     * 150).  Every wait is a poll (cuStreamQuery, cuEventQuery) that gives
     * up after it with HP_GPU_ERR_DEVICE and a last_error() naming what
     * it waited for; none is on the legacy default stream.  libhipress
     * sets half of HIPRESS_TIMEOUT when it loads the module, so a stuck
     * rank fails and its peers see that before their watchdog fires. */
    int (*set_wait_bound)(double seconds);
    /* Wait for the work queued on `stream` (the caller's, in its context),
     * within the bound; `what` names the work in last_error() ("the
     * encode of a compressed ncclAllReduce").  base.stream_sync is the same
     * with a generic name. */
    int (*stream_wait)(void *stream, const char *what);
    /* dst[0..n) = src[0..n) converted, in the call's stream order (how:
     * HP_GPU_CVT_*): 16-bit gradients widened into float before a
     * compressed ncclAllReduce of ncclFloat16 or ncclBfloat16, and its float
     * result narrowed back (round to nearest even, overflow to +-Inf, NaN
     * kept).  The 16-bit side is 2-byte aligned; pointers are device memory
     * of the call's context. */
    int (*convert)(void *cx, void *dst, const void *src, size_t n, int how);

    /* Appended: whole messages in device memory, stream-ordered
     * (doc/dev/gpu-internals.md, "Messages in device memory").  Nothing here waits on the
     * host once the codec context's workspace has grown.
     * encode_msg: the message hp_msg_encode writes (header of kind `kind`,
     * payload) at dmsg, device memory of cap bytes (at least the header and
     * e->fmt.payload, the format's largest; graddrop's and dgc's length,
     * their pair count, is written into the header on the device); NaN or
     * Inf in the input gives the NaN message (the residual and state
     * untouched), never one with exceptions. */
    int (*encode_msg)(void *cx, const hp_gpu_enc_t *e, uint32_t kind, void *dmsg, size_t cap);
    /* decode_msg: check the message at dmsg (device, cap bytes) on the
     * device and decode it into dst (added when d->accumulate): the NaN
     * message gives NaN; a rejected one (malformed, an error message,
     * exceptions, the dense fallback `none` for a dense format: graddrop's
     * and dgc's decoder takes it, as the host's does) sets the sticky flag
     * (bad_word; sync and call_end report it) and leaves dst unspecified. */
    int (*decode_msg)(void *cx, const hp_gpu_dec_t *d, uint32_t kind, const void *dmsg, size_t cap, float *dst);
    /* The device address of the sticky flag (a uint32, HP_K_F_BAD = 8 when
     * set), valid for the call. */
    int (*bad_word)(void *cx, uint32_t **word_p);
    /* dst = NaN (n floats) when any of the `bytes` bytes at flag (device
     * memory: bad_word, or the failure agreement's result) is not zero. */
    int (*nan_if)(void *cx, float *dst, size_t n, const void *flag, uint32_t bytes);
    /* Fork and join with a caller's stream (in the codec context's CUDA
     * context): stream_join makes the codec's streams wait for what
     * `stream` has queued so far; stream_release makes `stream` wait for
     * what the codec's streams have queued.  Events only, no host wait. */
    int (*stream_join)(void *cx, void *stream);
    int (*stream_release)(void *cx, void *stream);
    /* The end of a stream-ordered call, in place of call_end: no wait; the
     * sticky flag's clear is queued behind the call's work (after whatever
     * read it on the device, nan_if) and the context goes back to the
     * pool, whose next call on it runs after in stream order.  What failed
     * on the device is then known only on the device. */
    int (*call_release)(void *cx);
    /* dst[i] = dst[i] / d (a float division: the host's ncclAvg divide,
     * the same bits), in stream order. */
    int (*divide)(void *cx, float *dst, size_t n, float d);
    /* Appended with the sparse formats' stream-ordered calls: momentum's
     * u = m u + buf; buf = u, unless buf holds NaN or Inf, in stream
     * order with no wait.  Whether it was applied stays on the device,
     * where every later encode of the call that zeroes a mask (dgc's
     * momentum masking) reads it: no masking where it was not, as the
     * host's momentum (which answers *applied_p after a wait) gives. */
    int (*momentum_q)(void *cx, float *u, float *buf, float m, size_t n);

    /* Appended: powersgd stream-ordered (doc/powersgd.md "Stream-ordered
     * calls"), in the call's stream order, no host wait.  A flag is
     * device memory, `bytes` bytes of which any set counts as set (as
     * nan_if reads them).
     * flag_nonfinite: flag[0] |= HP_K_F_NONFINITE (1) when x[0..n) holds
     * NaN or Inf. */
    int (*flag_nonfinite)(void *cx, const float *x, size_t n, uint32_t *flag);
    /* hp_psgd_start_q's Q^T (r x c) into qt: from warm (device, NULL:
     * none) or the counter RNG under key (hp_psgd_q_key), its bits. */
    int (*psgd_start_q)(void *cx, float *qt, const float *warm, size_t r, size_t c, uint64_t key);
    /* hp_psgd_orthonormalise of p (m x r) in place, its bits (work: m r
     * doubles of device memory); nothing when the flag is set. */
    int (*psgd_orth)(void *cx, float *p, size_t m, size_t r, double *work, const void *flag, uint32_t bytes);
    /* psgd_recon, the residual written only when the flag is clear. */
    int (*psgd_recon_if)(void *cx, float *buf, float *res, size_t n, size_t c, size_t r, const float *p,
                         const float *qs, const float *ql, const void *flag, uint32_t bytes);
    /* dst = src (n floats, device) only when the flag is clear. */
    int (*copy_if)(void *cx, float *dst, const float *src, size_t n, const void *flag, uint32_t bytes);
} hp_gpu_ops_v2_t;

/* hp_gpu_ops_v2_t.convert's directions. */
enum { HP_GPU_CVT_F16_F32, HP_GPU_CVT_BF16_F32, HP_GPU_CVT_F32_F16, HP_GPU_CVT_F32_BF16 };

/* ------------------------------------------------- the third table (v3) */

#define HP_GPU_OPS_V3_VERSION 3
#define HP_GPU_OPS_V3_SYMBOL "hipress_gpu_ops_v3"

/*
 * The third table: codec contexts of their own per owner (a communicator),
 * and device memory in stream order, so that no call after a communicator's
 * first ones synchronises the device (doc/gpu.md, "Lifecycle under NCCL").
 * Frozen: a new function goes into a fourth table.  Its first member is the
 * second table (v2.base.version = HP_GPU_OPS_V3_VERSION, v2.base.size =
 * sizeof(hp_gpu_ops_v3_t)).
 */
typedef struct hp_gpu_ops_v3 {
    hp_gpu_ops_v2_t v2;

    /* An owner of codec contexts: calls begun for it (call_begin_owner) get
     * contexts of its own -- streams, events, workspace -- never one of
     * another owner's, so two communicators' calls on two streams wait for
     * nothing the application did not order.  An owner's calls are one at
     * a time (a communicator's are).  Creates nothing on the device. */
    int (*owner_create)(void **owner_p);
    /* Let go of an owner: nothing waits and nothing is freed synchronously
     * (safe while one of its calls is stuck on the device, from any
     * thread): an idle context's workspace is freed in its stream order and
     * its streams destroyed (the driver frees them once their work ran); a
     * context in a call goes when the call ends. */
    int (*owner_release)(void *owner);
    /* call_begin for an owner (where: the buffer's allocation). */
    int (*call_begin_owner)(void *owner, const hp_gpu_ptr_t *where, void **cx_p);
    /* Device memory in the codec context's stream order (cuMemAllocAsync:
     * no synchronisation of the device): usable by the work queued on the
     * context after it, and by a stream released after it (stream_release);
     * zero-filled when `zero`.  mem_free frees p after everything queued on
     * the context's streams so far; p was allocated by this owner's
     * contexts (any of them, any call). */
    int (*mem_alloc)(void *cx, size_t bytes, int zero, void **p_p);
    int (*mem_free)(void *cx, void *p);
} hp_gpu_ops_v3_t;

#ifndef HP_GPU_OPS_ONLY

#include <link.h>
#include <stdatomic.h>
#include "hp_config.h"

/* HIPRESS_GPU and HIPRESS_GPU_MPI_AWARE, in the order of their accepted lists. */
enum { HP_GPU_SETTING_AUTO, HP_GPU_SETTING_OFF, HP_GPU_SETTING_STAGE };
enum { HP_GPU_AWARE_AUTO, HP_GPU_AWARE_YES, HP_GPU_AWARE_NO };
/* HIPRESS_NCCL */
enum { HP_NCCL_SETTING_PASS, HP_NCCL_SETTING_COMPRESS };
/* HIPRESS_NCCL_ASYNC */
enum { HP_NCCL_ASYNC_AUTO, HP_NCCL_ASYNC_OFF };

/* ------------------------------------------------------------ the watch */

/* The object whose l_next the fast path reads: the last shared object
 * loaded when hipress last looked (pinned so it is never unloaded), a node
 * that always fires (libcuda is loaded: look at every pointer; or not looked
 * yet), or one that never fires (HIPRESS_GPU=off). */
extern struct link_map *_Atomic hp_gpu_watch;

/* Nonzero when device memory may exist in this process: libcuda.so.1 is
 * loaded, or something was loaded since the last look.  A few instructions;
 * zero in a process that never loads CUDA. */
static inline int hp_gpu_watch_fired(void)
{
    struct link_map *w = atomic_load_explicit(&hp_gpu_watch, memory_order_relaxed);
    return __atomic_load_n(&w->l_next, __ATOMIC_RELAXED) != NULL;
}

/* After the watch fired: look again (under a lock).  Returns 1 when
 * libcuda.so.1 is loaded and its pointer query usable, else 0 and re-arms
 * the watch on the current last object. */
int hp_gpu_driver_loaded(void);

/* What p is.  HP_MEM_HOST when libcuda.so.1 is not loaded, p is NULL, or the
 * driver does not know p.  Never creates a context. */
void hp_gpu_ptr_query(const void *p, hp_gpu_ptr_t *ptr_p);

/* The calling thread's current CUDA context as a `where` (device memory of
 * its device): 1, or 0 when libcuda.so.1 is not loaded or no context is
 * current.  Creates nothing. */
int hp_gpu_current_where(hp_gpu_ptr_t *where_p);

/* Whether `stream` is being captured into a CUDA graph, through the loaded
 * libcuda.so.1's cuStreamIsCapturing: 1 yes; 0 no (also when no driver is
 * loaded: nothing can capture then); -1 unknown, the driver lacks the
 * function (the same on every rank); -2 unknown, the query failed (this
 * rank only: a local failure). */
int hp_gpu_stream_capturing(void *stream);

/* ---------------------------------------------------------- the module */

/* Apply HIPRESS_GPU and HIPRESS_CUDA_MODULE (at MPI_Init, or when settings
 * load without MPI). */
void hp_gpu_configure(const hp_config_t *cfg);

/* One INFO line on the GPU path at start-up: what the build has, and whether
 * libcuda.so.1 is in the process (it makes no CUDA call). */
void hp_gpu_log_state(void);

/* The CUDA module, loaded at the first call (later calls return the same).
 * load_driver: see hp_gpu_ops_t.init.  NULL when this build has no module,
 * it cannot be loaded, or the driver is missing; `why` then says which
 * (also logged once at INFO). */
const hp_gpu_ops_t *hp_gpu_module(int load_driver, char *why, size_t whylen);

/* The loaded module's device codec (hp_gpu_ops_v2_t), or NULL: no module,
 * or one without the codec (version 1).  Loads the module as
 * hp_gpu_module(0, ...) does. */
const hp_gpu_ops_v2_t *hp_gpu_module_v2(void);
/* Its third table (owners, stream-ordered memory), or NULL. */
const hp_gpu_ops_v3_t *hp_gpu_module_v3(void);

/* The module file hipress would load (HIPRESS_CUDA_MODULE, next to the
 * library, or the install directory), or "" when none is found; `searched`
 * lists the places looked at when not NULL. */
const char *hp_gpu_module_path(char *buf, size_t len, char *searched, size_t searchedlen);

/* ------------------------------------------------------ pure decisions */

/* What a wrapper does with a call whose buffers it has classified. */
typedef enum {
    HP_GPU_ROUTE_HOST = 0,   /* host buffers only: the usual path */
    HP_GPU_ROUTE_PASS,       /* device buffers, the MPI takes them: PMPI unchanged */
    HP_GPU_ROUTE_STAGE,      /* device buffers, the MPI does not: stage through host memory */
    HP_GPU_ROUTE_UNSTAGED    /* it cannot (no CUDA module): PMPI unchanged, warned once */
} hp_gpu_route_t;

hp_gpu_route_t hp_gpu_route(int any_device, int mpi_cuda_aware, int can_stage);

/* Bytes [lo, hi) relative to a buffer that `count` elements of a datatype
 * touch (extent, true lower bound and true extent as MPI reports them).
 * Returns 0 and sets lo = hi = 0 for count <= 0; -1 on overflow. */
int hp_type_span(long long count, long long extent, long long true_lb, long long true_extent,
                 long long *lo_p, long long *hi_p);

/* The same over the blocks of MPI_Allgatherv's receive buffer (block i:
 * counts[i] elements at displs[i] extents).  *covered_p = 1 when the blocks
 * fill [lo, hi) exactly with no gap and no overlap (a contiguous datatype,
 * type_size == extent == true_extent), so the buffer need not be read before
 * it is written.  Returns -1 on overflow or a negative count. */
int hp_allgatherv_span(int n, const int *counts, const int *displs, long long extent,
                       long long true_lb, long long true_extent, long long type_size,
                       long long *lo_p, long long *hi_p, int *covered_p);

#endif /* HP_GPU_OPS_ONLY */
#endif /* HP_GPU_H */
